/* Streaming from a memory-mapped .npy (issue 13): an input mapped with loom_tensor_map_npy
 * (nothing read but its header) runs through a chunked graph under a limit a quarter of its
 * size, on cpu0 and on every OpenCL device, with the result equal to the unchunked run's and
 * the meter's peak under the limit; and the mapping's errors. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gpu_util.h"
#include "loom/io.h"
#include "loom/plan.h"

#define KIB 1024

static void temp_path(char *buf, size_t size, const char *stem) {
  snprintf(buf, size, "/tmp/loom_mapped_%s_%d.npy", stem, (int)getpid());
}

/* y = exp(x) * 2 + x over f32[262144] (1 MiB), chunked under 256 KiB: one loop, x streamed. */
static void check_mapped(const loom__exec_device *dev) {
  const char *where = dev ? dev->id : "cpu0";
  loom_graph *g = gt_parse(
      "graph m(x: f32[262144]) {\n e = exp x\n two = constant 2 : f32[]\n"
      " d = mul e two\n y = add d x\n return y\n}");
  ASSERT_TRUE(g != NULL);
  loom_tensor x, want, got;
  ASSERT_OK(gt_inputs(g, 7, &x));
  char path[128];
  temp_path(path, sizeof path, "x");
  ASSERT_OK(loom_tensor_save_npy(path, &x));
  loom_tensor mapped;
  loom_npy_map *map = NULL;
  ASSERT_OK(loom_tensor_map_npy(path, &mapped, &map));
  ASSERT_TRUE(loom_type_equal(&mapped.type, &x.type));
  ASSERT_TRUE(memcmp(mapped.data, x.data, 1 << 20) == 0);

  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.limit = 256 * KIB;
  loom_graph *c = NULL;
  ASSERT_OK(loom_graph_optimize(g, &o, &c, NULL));
  loom_estimate e;
  ASSERT_OK(loom_graph_estimate(c, NULL, &e));
  ASSERT_EQ(e.input_bytes, 0); /* x streamed: never held whole */
  ASSERT_TRUE(e.peak_bytes <= o.limit);
  ASSERT_OK(gt_run(g, NULL, &x, &want, 0, NULL));
  loom__meter m;
  loom_status s = gt_run(c, dev, &mapped, &got, o.limit, &m);
  if (s) loom_test_fail(__FILE__, __LINE__, "%s: %s", where, loom_last_error());
  if (!s) {
    char msg[256];
    ASSERT_TRUE(m.peak <= o.limit);
    ASSERT_EQ(m.peak, e.peak_bytes);
    if (!gt_close(&want, &got, 1e-6, 1e-6, msg, sizeof msg))
      loom_test_fail(__FILE__, __LINE__, "%s: %s", where, msg);
    gt_tensors_free(&got, 1);
  }
  loom_estimate_deinit(&e);
  gt_tensors_free(&want, 1);
  loom_npy_unmap(map);
  remove(path);
  gt_tensors_free(&x, 1);
  loom_graph_destroy(c);
  loom_graph_destroy(g);
}

TEST(loops_stream_a_mapped_npy_on_cpu0) {
  check_mapped(NULL);
}

TEST(loops_stream_a_mapped_npy_on_opencl) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  for (int32_t d = 0; d < nd && !loom_test_failed(); d++) check_mapped(devs[d]);
}

TEST(mapped_npy_errors_name_the_file) {
  char path[128];
  temp_path(path, sizeof path, "short");
  loom_tensor t, m;
  loom_type ty;
  ASSERT_OK(loom_type_make(LOOM_F32, 1, (int64_t[]){64}, &ty));
  ASSERT_OK(loom_tensor_init(&t, &ty));
  ASSERT_OK(loom_tensor_save_npy(path, &t));
  loom_tensor_deinit(&t);
  ASSERT_EQ(truncate(path, 128 + 100), 0); /* the header (128 bytes) and 100 of 256 data bytes */
  loom_npy_map *map = (loom_npy_map *)&m;
  ASSERT_STATUS(loom_tensor_map_npy(path, &m, &map), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(map == NULL && m.data == NULL);
  ASSERT_CONTAINS(loom_last_error(), path);
  ASSERT_CONTAINS(loom_last_error(), "expected 256 data bytes, found 100");
  remove(path);
  ASSERT_STATUS(loom_tensor_map_npy(path, &m, &map), LOOM_ERR_IO);
  ASSERT_CONTAINS(loom_last_error(), path);
  ASSERT_STATUS(loom_tensor_map_npy("/dev/null", &m, &map), LOOM_ERR_INVALID_ARGUMENT); /* no magic */
}
