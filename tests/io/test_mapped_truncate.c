/* A mapped input whose file shrinks under it (another program truncates it while Loom streams
 * it) fails with an error naming the file instead of killing the process with SIGBUS: through
 * a copy (loom_safetensors_load), a whole run and a run streamed piece by piece by a loop. */
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "loom/loom.h"

#define N (1 << 18) /* 1 MiB of f32: 256 pages, most of them past the cut */

static const char *temp_path(char *buf, size_t size) {
  const char *tmp = getenv("TMPDIR");
  snprintf(buf, size, "%s/loom_trunc_%d.safetensors", tmp && *tmp ? tmp : "/tmp", (int)getpid());
  return buf;
}

static loom_status write_input(const char *path) {
  int64_t dims[] = {512, N / 512};
  loom_type t;
  loom_tensor x;
  loom_status s = loom_type_make(LOOM_F32, 2, dims, &t);
  if (!s) s = loom_tensor_init(&x, &t);
  if (s) return s;
  float *v = x.data;
  for (int64_t i = 0; i < N; i++) v[i] = 1.0f;
  const char *names[] = {"x"};
  s = loom_safetensors_save(path, names, &x, 1);
  loom_tensor_deinit(&x);
  return s;
}

/* Runs sum(x) over the mapped x; the status, with *sum set on success. */
static loom_status run_sum(loom_context *ctx, const loom_graph *g, const loom_tensor *x, double *sum) {
  loom_tensor out;
  loom_status s = loom_graph_run(ctx, g, x, 1, &out, 1, NULL);
  if (s) return s;
  *sum = *(const float *)out.data;
  loom_tensor_deinit(&out);
  return LOOM_OK;
}

TEST(truncated_mapped_input_is_an_error_naming_the_file) {
  char path[256];
  temp_path(path, sizeof path);
  ASSERT_OK(write_input(path));
  const char *lir = "graph s(x: f32[512,512]) {\n  s = reduce_sum x axes=[1]\n  return s\n}\n";
  loom_graph *g = NULL, *chunked = NULL;
  ASSERT_OK(loom_graph_parse(lir, strlen(lir), "trunc.lir", &g));
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.limit = 64 << 10; /* x (1 MiB) is streamed by a loop, a slice per piece */
  ASSERT_OK(loom_graph_optimize(g, &o, &chunked, NULL));
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  loom_safetensors *st = NULL;
  ASSERT_OK(loom_safetensors_open(path, &st));
  loom_tensor x;
  ASSERT_OK(loom_safetensors_map(st, 0, &x));
  loom_tensor out;
  ASSERT_OK(loom_graph_run(ctx, chunked, &x, 1, &out, 1, NULL)); /* the whole file: fine */
  ASSERT_EQ(((const float *)out.data)[511], 512.0f);             /* 512 ones: exact */
  loom_tensor_deinit(&out);
  /* Another program cuts the file to its first 64 KiB while it stays mapped. */
  ASSERT_EQ(truncate(path, 64 << 10), 0);
  ASSERT_STATUS(loom_graph_run(ctx, chunked, &x, 1, &out, 1, NULL), LOOM_ERR_IO);
  ASSERT_CONTAINS(loom_last_error(), path);
  ASSERT_CONTAINS(loom_last_error(), "shrank");
  double sum = 0;
  ASSERT_STATUS(run_sum(ctx, g, &x, &sum), LOOM_ERR_IO);
  ASSERT_CONTAINS(loom_last_error(), path);
  loom_tensor copy;
  ASSERT_STATUS(loom_safetensors_load(st, 0, &copy), LOOM_ERR_IO);
  ASSERT_CONTAINS(loom_last_error(), path);
  ASSERT_TRUE(copy.data == NULL);
  loom_safetensors_close(st);
  /* Opened again, the short file is refused up front by its size, as before. */
  ASSERT_STATUS(loom_safetensors_open(path, &st), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "outside the data section");
  unlink(path);
  loom_context_destroy(ctx);
  loom_graph_destroy(chunked);
  loom_graph_destroy(g);
}
