/* A streamed input sliced along an axis that is not its leading one, with a loop nested in the
 * loop that streams it (tests/chunk/data/column_slices.lir, node/test_gather_0's shape): each
 * piece's slice is not a run of the input, and the body reshapes it for the inner loop. The
 * estimate lays the body out over a dense slice; the executor must hold no more than that
 * wherever the slice comes from: read from the caller's tensor in place on cpu0 (copied dense,
 * since a reshape of the strided slice would copy it again, uncounted), written into a
 * buffer of its own from the host tensor on ocl0, or read from a device buffer there (copied
 * dense). Each run's measured peak equals the estimate and its result the whole graph's. */
#include <stdlib.h>

#include "harness.h"
#include "ir/ir.h"
#include "kernel_check.h"
#include "loom/memory.h"
#include "runtime/exec.h"

enum { LIMIT = 504 };

/* The graph, parsed from the source tree; NULL (test failed) when it cannot be. */
static loom_graph *load_graph(void) {
  const char *src = getenv("LOOM_SOURCE_DIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/chunk/data/column_slices.lir", src ? src : ".");
  FILE *f = fopen(path, "rb");
  if (!f) {
    printf("    cannot open %s\n", path);
    return NULL;
  }
  static char text[1 << 12];
  size_t n = fread(text, 1, sizeof text, f);
  fclose(f);
  loom_graph *g = NULL;
  if (loom_graph_parse(text, n, path, &g)) printf("    %s\n", loom_last_error());
  return g;
}

/* The graph chunked for cpu0 at LIMIT: data streamed by its axis 1, a loop inside the loop.
 * NULL (test failed) otherwise. */
static loom_graph *chunked(const loom_graph *g) {
  loom_runner runner = {.device = "cpu0", .limit = LIMIT};
  loom_rewrite_report report = {0};
  loom_graph *c = NULL;
  if (loom_graph_optimize_for_runners(g, &runner, 1, NULL, &c, &report, NULL, 0)) {
    printf("    %s\n", loom_last_error());
    return NULL;
  }
  bool nested = false;
  for (int32_t i = 0; i < report.count; i++)
    if (strcmp(report.entries[i].name, "chunk") == 0) {
      printf("    chunk: %s\n", report.entries[i].detail);
      nested |= strstr(report.entries[i].detail, "along its result's axis 1") &&
                strstr(report.entries[i].detail, "inside loop");
    }
  loom_rewrite_report_deinit(&report);
  bool streamed = false;
  for (int32_t o = 0; c && o < c->n_ops; o++)
    for (int32_t i = 0; c->ops[o].loop && i < c->ops[o].n_inputs; i++)
      streamed |= c->values[c->ops[o].inputs[i]].op < 0 && c->ops[o].loop->rules[i].axis == 1 &&
                  loom__value_streamed(c, c->ops[o].inputs[i]);
  if (!nested || !streamed) {
    printf("    the plan is not a nested loop streaming data by its axis 1\n");
    loom_graph_destroy(c);
    return NULL;
  }
  return c;
}

static void fill(loom_tensor *t, uint64_t seed) {
  int64_t n = 0;
  loom_type_elements(&t->type, &n);
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    ((float *)t->data)[i] = (float)((double)(seed >> 11) * 0x1p-52 - 1.0);
  }
}

/* Runs c on device `id` under LIMIT (data from a buffer of that device's memory when
 * `in_buffer`), checking the meter against the estimate and y against the whole graph's. */
static void check_on(const char *id, bool in_buffer) {
  loom_graph *g = load_graph();
  ASSERT_TRUE(g != NULL);
  loom_graph *c = chunked(g);
  ASSERT_TRUE(c != NULL);
  loom_estimate e;
  ASSERT_OK(loom_graph_estimate(c, NULL, &e));
  int64_t estimate = e.peak_bytes;
  ASSERT_EQ(e.input_bytes, 60); /* w only: data is streamed */
  loom_estimate_deinit(&e);
  ASSERT_TRUE(estimate > 0 && estimate <= LIMIT);

  loom_tensor in[2], want, got;
  for (int32_t p = 0; p < 2; p++) {
    ASSERT_OK(loom_tensor_init(&in[p], &g->values[g->params[p]].type));
    fill(&in[p], 34 + (uint64_t)p);
  }
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  ASSERT_OK(loom_graph_run(ctx, g, in, 2, &want, 1, NULL));
  loom__exec_options eo = {0};
  loom_buffer *data = NULL, *bufs[2] = {NULL, NULL};
  ASSERT_OK(loom__context_exec_device(ctx, id, &eo.device));
  if (in_buffer) {
    int64_t bytes = 0;
    ASSERT_OK(loom_type_bytes(&in[1].type, &bytes));
    ASSERT_OK(loom_buffer_allocate(eo.device->memory, bytes, LOOM_F32, eo.device->node, LOOM_MEM_DEVICE_LOCAL,
                                   &data));
    ASSERT_OK(loom_buffer_write(data, 0, in[1].data, bytes));
    bufs[1] = data;
    eo.input_buffers = bufs;
  }
  loom__meter meter = {.limit = LIMIT};
  loom_status s = loom__execute(c, &eo, in, &got, &meter);
  if (s) loom_test_fail(__FILE__, __LINE__, "on %s: %s", id, loom_last_error());
  if (!s) {
    printf("    %s%s: measured peak %lld, estimate %lld\n", id, in_buffer ? " (data in its buffer)" : "",
           (long long)meter.peak, (long long)estimate);
    ASSERT_EQ(meter.in_use, 0);
    ASSERT_EQ(meter.peak, estimate);
    ASSERT_TRUE(loom_type_equal(&want.type, &got.type));
    const float *a = want.data, *b = got.data;
    int64_t n = 0;
    loom_type_elements(&want.type, &n);
    for (int64_t i = 0; i < n; i++)
      if (fabs((double)a[i] - b[i]) > 1e-5 * (1 + fabs((double)a[i]))) {
        loom_test_fail(__FILE__, __LINE__, "on %s: y[%lld] is %g, the whole graph's %g", id, (long long)i,
                       (double)b[i], (double)a[i]);
        break;
      }
    loom_tensor_deinit(&got);
  }
  loom_buffer_free(data);
  loom_context_destroy(ctx);
  loom_tensor_deinit(&want);
  for (int32_t p = 0; p < 2; p++) loom_tensor_deinit(&in[p]);
  loom_graph_destroy(c);
  loom_graph_destroy(g);
}

TEST(chunk_column_slices_nested_on_cpu0) {
  check_on("cpu0", false);
}

TEST(chunk_column_slices_nested_on_ocl0) {
  if (kernel_have_ocl0()) check_on("ocl0", false);
}

TEST(chunk_column_slices_nested_on_ocl0_from_its_buffer) {
  if (kernel_have_ocl0()) check_on("ocl0", true);
}
