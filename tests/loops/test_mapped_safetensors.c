/* Streaming from a memory-mapped .safetensors file (issue 17): a 64 MiB weight, mapped with
 * loom_safetensors_map (nothing read but the header), runs through a chunked graph under a
 * limit a quarter of the file's size; the process's resident set (VmHWM, its peak reset just
 * before the run) grows by well under the file's size, because each piece's pages are dropped
 * again once the piece is done; the result equals the run over a copy of the tensor, unchunked.
 * On OpenCL devices the streamed slices are written in from the mapping: results likewise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_util.h"
#include "loom/io.h"
#include "loom/plan.h"

#define MIB (1024 * 1024)
#define ROWS 65536
#define COLS 256 /* x: f32[65536,256], 64 MiB */

/* A value of /proc/self/status in KiB ("VmHWM"), or -1. */
static long status_kib(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  size_t n = strlen(key);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, n) == 0 && line[n] == ':') v = strtol(line + n + 1, NULL, 10);
  fclose(f);
  return v;
}

/* Resets VmHWM to the current resident set (Linux: clear_refs 5). */
static bool reset_peak_rss(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  bool ok = fputs("5", f) >= 0;
  return fclose(f) == 0 && ok;
}

static float value_at(int64_t i) {
  return (float)((uint64_t)i * 2654435761u % 1000u) / 1000.0f - 0.5f;
}

/* Writes the file by hand, a row block at a time (never the whole tensor in memory): a
 * metadata entry and a small i8 tensor before "w", which the data section still keeps
 * aligned (w first, as writers place larger elements first). */
static bool write_weights(const char *path) {
  char header[512];
  int64_t bytes = (int64_t)ROWS * COLS * 4;
  int n = snprintf(
      header, sizeof header,
      "{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":\"F32\",\"shape\":[%d,%d],"
      "\"data_offsets\":[0,%lld]},\"tag\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[%lld,%lld]}}",
      ROWS, COLS, (long long)bytes, (long long)bytes, (long long)bytes + 3);
  while ((8 + n) % 8) header[n++] = ' ';
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  unsigned char len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)n >> (8 * i));
  bool ok = fwrite(len8, 1, 8, f) == 8 && fwrite(header, 1, (size_t)n, f) == (size_t)n;
  static float block[COLS * 64];
  for (int64_t r = 0; ok && r < ROWS; r += 64) {
    for (int64_t i = 0; i < COLS * 64; i++) block[i] = value_at(r * COLS + i);
    ok = fwrite(block, sizeof block, 1, f) == 1;
  }
  ok = ok && fwrite("\x01\x02\x03", 1, 3, f) == 3;
  return fclose(f) == 0 && ok;
}

static loom_graph *weights_graph(void) {
  return gt_parse("graph m(w: f32[%d,%d]) {\n e = exp w\n s = reduce_sum e axes=[1]\n return s\n}", ROWS,
                  COLS);
}

/* The graph chunked under `limit`, checked to stream w. */
static loom_graph *chunked(const loom_graph *g, int64_t limit) {
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.limit = limit;
  loom_graph *c = NULL;
  if (loom_graph_optimize(g, &o, &c, NULL)) {
    loom_test_fail(__FILE__, __LINE__, "optimize: %s", loom_last_error());
    return NULL;
  }
  loom_estimate e;
  if (!loom_graph_estimate(c, NULL, &e)) {
    if (e.input_bytes != 0 || e.peak_bytes > limit)
      loom_test_fail(__FILE__, __LINE__, "not streamed: input bytes %lld, peak %lld",
                     (long long)e.input_bytes, (long long)e.peak_bytes);
    loom_estimate_deinit(&e);
  }
  return c;
}

static const char *temp_path(void) {
  static char buf[128];
  snprintf(buf, sizeof buf, "/tmp/loom_mapped_st_%d.safetensors", (int)getpid());
  return buf;
}

TEST(loops_stream_a_mapped_safetensors_weight_with_a_small_resident_set) {
  const char *path = temp_path();
  ASSERT_TRUE(write_weights(path));
  const int64_t file_bytes = (int64_t)ROWS * COLS * 4, limit = file_bytes / 4;
  loom_graph *g = weights_graph();
  loom_graph *c = g ? chunked(g, limit) : NULL;
  ASSERT_TRUE(c != NULL);

  /* A small run first, so that what any first run sets up (threads, pools) is not counted. */
  loom_graph *warm =
      gt_parse("graph w(x: f32[64,256]) {\n e = exp x\n s = reduce_sum e axes=[1]\n return s\n}");
  loom_tensor wx, wy;
  ASSERT_OK(gt_inputs(warm, 1, &wx));
  ASSERT_OK(gt_run(warm, NULL, &wx, &wy, 0, NULL));
  gt_tensors_free(&wx, 1);
  gt_tensors_free(&wy, 1);
  loom_graph_destroy(warm);

  loom_safetensors *st = NULL;
  ASSERT_OK(loom_safetensors_open(path, &st));
  loom_tensor w, got;
  ASSERT_OK(loom_safetensors_map(st, loom_safetensors_find(st, "w"), &w));
  if (!reset_peak_rss()) {
    loom_test_fail(__FILE__, __LINE__, "cannot reset the resident set's peak (/proc/self/clear_refs)");
    return;
  }
  long before = status_kib("VmRSS");
  loom__meter m;
  loom_status s = gt_run(c, NULL, &w, &got, limit, &m);
  long peak = status_kib("VmHWM");
  ASSERT_OK(s);
  long grown = peak - before;
  printf(
      "    file %lld KiB, limit %lld KiB, meter peak %lld KiB; resident set %ld KiB before, peak %ld KiB "
      "(+%ld KiB)\n",
      (long long)file_bytes / 1024, (long long)limit / 1024, (long long)m.peak / 1024, before, peak, grown);
  ASSERT_TRUE(before > 0 && peak >= before);
  ASSERT_TRUE(m.peak <= limit);
  /* Well under the file: at most the limit's worth of buffers and the pages of a piece or two.
   * Without dropping the streamed pages it grows by the whole file (64 MiB). */
  if (grown * 1024 >= file_bytes / 2)
    loom_test_fail(__FILE__, __LINE__, "the resident set grew by %ld KiB over a %lld KiB file", grown,
                   (long long)file_bytes / 1024);

  /* The reference: the tensor copied, the graph unchunked. */
  loom_tensor copy, want;
  ASSERT_OK(loom_safetensors_load(st, loom_safetensors_find(st, "w"), &copy));
  ASSERT_OK(gt_run(g, NULL, &copy, &want, 0, NULL));
  char msg[256];
  if (!gt_close(&want, &got, 1e-6, 0, msg, sizeof msg)) loom_test_fail(__FILE__, __LINE__, "%s", msg);
  /* and the file's bytes were never written: the mapping still equals the copy */
  ASSERT_TRUE(memcmp(w.data, copy.data, (size_t)file_bytes) == 0);

  /* OpenCL devices: slices written in from the mapping, then dropped; results equal. */
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  for (int32_t d = 0; d < nd && !loom_test_failed(); d++) {
    loom_tensor dev_got;
    s = gt_run(c, devs[d], &w, &dev_got, limit, &m);
    if (s) {
      loom_test_fail(__FILE__, __LINE__, "%s: %s", devs[d]->id, loom_last_error());
      continue;
    }
    if (!gt_close(&want, &dev_got, 1e-5, 1e-5, msg, sizeof msg))
      loom_test_fail(__FILE__, __LINE__, "%s: %s", devs[d]->id, msg);
    gt_tensors_free(&dev_got, 1);
  }
  gt_tensors_free(&want, 1);
  gt_tensors_free(&got, 1);
  loom_tensor_deinit(&copy);
  loom_safetensors_close(st);
  remove(path);
  loom_graph_destroy(c);
  loom_graph_destroy(g);
}
