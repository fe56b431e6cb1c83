/* The runtime on CUDA devices (issue 7, point 4): the kNN and dot-chain examples run on cuda0
 * under a memory limit with every stage's measured peak at or under the limit (and within 10%
 * of its estimate), the executor's meter on cuda0 counting exactly what it counts on cpu0,
 * allocation failures, and cuFFT's work area inside the scratch under a limit. */
#if LOOM_HAVE_CUDA
#include <stdarg.h>
#include <stdlib.h>

#include "backends/cuda/cuda_backend.h"
#include "gpu_util.h"
#include "loom/memory.h"
#include "loom/plan.h"
#include "loom/testing.h"
#include "tools/knn_ref.h"

static loom_graph *parse(const char *text) {
  loom_graph *g = NULL;
  if (loom_graph_parse(text, strlen(text), "t.lir", &g)) {
    loom_test_fail(__FILE__, __LINE__, "parse failed: %s\n%s", loom_last_error(), text);
    return NULL;
  }
  return g;
}

/* An example graph of the source tree (examples/NAME.lir); NULL and a skip outside ctest. */
static loom_graph *example(const char *name) {
  const char *dir = getenv("LOOM_SOURCE_DIR");
  if (!dir || !*dir) {
    loom_test_skip("LOOM_SOURCE_DIR is not set (ctest sets it)");
    return NULL;
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/examples/%s.lir", dir, name);
  loom_graph *g = NULL;
  if (loom_graph_load(path, &g)) {
    loom_test_fail(__FILE__, __LINE__, "%s: %s", path, loom_last_error());
    return NULL;
  }
  return g;
}

/* Optimizes g for one runner (dev, limit), plans it by memory and runs the plan; stats are
 * checked against the limit: every stage at or under it, and within 10% of its estimate. */
static bool run_under_limit(const loom_graph *g, const char *dev, int64_t limit, const loom_tensor *in,
                            loom_tensor *out, const char *file, int line) {
  loom_runner r = {.limit = limit};
  snprintf(r.device, sizeof r.device, "%s", dev);
  loom_graph *opt = NULL;
  loom_rewrite_report report = {0};
  loom_plan *plan = NULL;
  loom_plan_stats stats = {0};
  char note[256];
  loom_status s = loom_graph_optimize_for_runners(g, &r, 1, NULL, &opt, &report, note, sizeof note);
  if (!s) s = loom_plan_split_by_memory(opt, &r, 1, &plan);
  if (!s)
    s = loom_plan_run(gt_context(), plan, in, loom_graph_param_count(g), out, loom_graph_output_count(g),
                      &stats);
  bool ok = s == LOOM_OK;
  if (!ok)
    loom_test_fail(file, line, "%s under %lld bytes: %s: %s", dev, (long long)limit, loom_status_string(s),
                   loom_last_error());
  for (int32_t i = 0; ok && i < stats.n_stages; i++) {
    const loom_stage_stats *st = &stats.stages[i];
    int64_t diff = st->peak_bytes - st->estimated_peak_bytes;
    if (diff < 0) diff = -diff;
    if (st->peak_bytes > limit || diff * 10 > st->estimated_peak_bytes) {
      loom_test_fail(file, line, "stage %d on %s: measured peak %lld, estimate %lld, limit %lld", (int)i, dev,
                     (long long)st->peak_bytes, (long long)st->estimated_peak_bytes, (long long)limit);
      ok = false;
    }
  }
  if (ok)
    printf("    %s under %lld bytes: %d stages, peak %lld, %.3f s\n", dev, (long long)limit,
           (int)stats.n_stages, (long long)stats.peak_bytes, stats.seconds);
  if (!ok && s == LOOM_OK) gt_tensors_free(out, loom_graph_output_count(g));
  loom_plan_stats_deinit(&stats);
  loom_plan_destroy(plan);
  loom_rewrite_report_deinit(&report);
  loom_graph_destroy(opt);
  return ok;
}

/* examples/knn.lir (20000 x 30000 points: its naive form holds 7.2 GB at once) on cuda0 under
 * 256 MiB; the neighbours checked by brute force in float64. */
TEST(knn_example_on_cuda0_under_a_limit) {
  if (!gt_have_devices(LOOM_BACKEND_CUDA)) return;
  loom_graph *g = example("knn");
  if (!g) return;
  loom_tensor in[2], out[2];
  ASSERT_OK(gt_inputs(g, 11, in));
  /* Points in [0, 1)^3, as knn_ref.h's tolerance assumes (f32 cancellation in the rewritten
   * |x|^2 + |y|^2 - 2 x.y is then about 1e-7 absolute). */
  for (int32_t p = 0; p < 2; p++) {
    int64_t n = 0;
    loom_type_elements(&in[p].type, &n);
    for (int64_t i = 0; i < n; i++) ((float *)in[p].data)[i] = (((float *)in[p].data)[i] + 2.0f) / 4.0f;
  }
  bool ok = run_under_limit(g, "cuda0", (int64_t)256 << 20, in, out, __FILE__, __LINE__);
  if (ok) {
    const loom_type *x = &in[0].type, *y = &in[1].type;
    int64_t failures = knn_check(in[0].data, in[1].data, x->dims[0], y->dims[0], x->dims[1],
                                 out[0].type.dims[1], out[0].data, out[1].data);
    gt_tensors_free(out, 2);
    ASSERT_EQ(failures, 0);
  }
  gt_tensors_free(in, 2);
  loom_graph_destroy(g);
  ASSERT_TRUE(ok);
}

/* examples/dot_chain.lir ((A.B).v: a 64 MB product in the written order) on cuda0 under 8 MiB
 * (the reordering makes it A.(B.v)), against the cpu backend's run of the graph as written. */
TEST(dot_chain_example_on_cuda0_under_a_limit) {
  if (!gt_have_devices(LOOM_BACKEND_CUDA)) return;
  loom_graph *g = example("dot_chain");
  if (!g) return;
  loom_tensor in[3], ref[1], out[1];
  ASSERT_OK(gt_inputs(g, 12, in));
  ASSERT_OK(gt_run(g, NULL, in, ref, 0, NULL));
  bool ok = run_under_limit(g, "cuda0", (int64_t)8 << 20, in, out, __FILE__, __LINE__);
  if (ok) {
    /* Sums of 4000 products in another order (the reordered chain, cuBLAS's blocking): the
     * error scales with the largest output, not with each (some cancel to near zero). */
    char msg[512];
    double largest = 0;
    for (int64_t i = 0; i < ref[0].type.dims[0]; i++)
      largest = fmax(largest, fabs(((float *)ref[0].data)[i]));
    ok = gt_close(&ref[0], &out[0], 1e-3, 1e-4 * largest, msg, sizeof msg);
    if (!ok) loom_test_fail(__FILE__, __LINE__, "%s", msg);
    gt_tensors_free(out, 1);
  }
  gt_tensors_free(ref, 1);
  gt_tensors_free(in, 3);
  loom_graph_destroy(g);
}

TEST(peaks_equal_cpu0_and_limits_hold) {
  gt_test_peaks_equal_cpu0(LOOM_BACKEND_CUDA);
}

/* Every allocation failure during a run on a device (host or device memory: the fault
 * injection reaches cudaMalloc) is reported and frees what it took. */
TEST(allocation_failures_on_a_device) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_CUDA, devs) == 0) return;
  loom_graph *g = parse(gt_chain_lir);
  ASSERT_TRUE(g != NULL);
  loom_tensor in[3], out[5];
  ASSERT_OK(gt_inputs(g, 4, in));
  ASSERT_OK(gt_run(g, devs[0], in, out, 0, NULL)); /* cuBLAS and cuFFT set up before the sweep */
  gt_tensors_free(out, 5);
  loom_test_sweep sw;
  SWEEP_ALLOCATIONS(&sw, 0, 100000) {
    if (!SWEEP_RUN(&sw, gt_run(g, devs[0], in, out, 0, NULL))) gt_tensors_free(out, 5);
  }
  gt_tensors_free(in, 3);
  loom_graph_destroy(g);
}

/* A transform whose cuFFT work area fits the scratch under a limit, and one along a middle axis
 * (packed into the scratch first): the estimate holds, the results are the cpu backend's. */
TEST(cufft_stays_inside_the_estimate) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_CUDA, devs) == 0) return;
  loom_graph *g = parse(
      "graph f(z: c64[64,1000], w: c128[8,97,6]) { a = fft z axis=1\n b = ifft w axis=1\n"
      " c = irfft z axis=0 n=126\n return a, b, c }");
  ASSERT_TRUE(g != NULL);
  loom_tensor in[2], ref[3], out[3];
  ASSERT_OK(gt_inputs(g, 6, in));
  loom__meter cpu, dev;
  ASSERT_OK(gt_run(g, NULL, in, ref, 0, &cpu));
  ASSERT_OK(gt_run(g, devs[0], in, out, cpu.peak, &dev));
  ASSERT_EQ(dev.peak, cpu.peak);
  for (int32_t i = 0; i < 3; i++) {
    char msg[512];
    double rtol, atol;
    gt_tolerance(ref[i].type.dtype, 100, &rtol, &atol);
    ASSERT_TRUE(gt_close(&ref[i], &out[i], rtol, atol, msg, sizeof msg));
  }
  gt_tensors_free(out, 3);
  gt_tensors_free(ref, 3);
  gt_tensors_free(in, 2);
  loom_graph_destroy(g);
}

/* A device the driver lists but the CUDA runtime refuses (here the stand-in driver of
 * tests/devices, which has no runtime entry points; on a real machine a driver older than this
 * build's CUDA): opening it, and allocating on its memory node, are UNAVAILABLE with CUDA's name
 * for the error, never a crash. Runs only where ctest sets up the stand-in (cuda.fake_driver). */
TEST(refused_by_the_runtime) {
  if (!getenv("LOOM_FAKE_CUDA_DEVICES")) {
    loom_test_skip("needs the stand-in driver (ctest's cuda.fake_driver sets it up)");
    return;
  }
  loom_context *ctx = gt_context();
  const loom__exec_device *dev = NULL;
  ASSERT_STATUS(loom__context_exec_device(ctx, "cuda0", &dev), LOOM_ERR_UNAVAILABLE);
  ASSERT_CONTAINS(loom_last_error(), "cuda0: cudaSetDevice failed: cudaError");
  ASSERT_TRUE(dev == NULL);
  loom_mem_manager *m = NULL;
  int32_t node = -1;
  ASSERT_OK(loom_context_memory(ctx, &m));
  ASSERT_OK(loom_mem_node_find(m, "cuda0", &node));
  loom_mem_node_info info;
  ASSERT_OK(loom_mem_node_info_get(m, node, &info));
  ASSERT_TRUE(info.storages & LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_CUDA_DEVICE));
  loom_buffer *b = NULL;
  ASSERT_STATUS(loom_buffer_allocate(m, 4096, LOOM_U8, node, 0, &b), LOOM_ERR_UNAVAILABLE);
  ASSERT_TRUE(b == NULL);
  /* cpu0 still runs. */
  loom_graph *g = parse("graph g(a: f32[4]) { b = exp a\n return b }");
  ASSERT_TRUE(g != NULL);
  loom_tensor in[1], out[1];
  ASSERT_OK(gt_inputs(g, 1, in));
  ASSERT_OK(gt_run(g, NULL, in, out, 0, NULL));
  gt_tensors_free(out, 1);
  gt_tensors_free(in, 1);
  loom_graph_destroy(g);
}

/* The backend names itself, and unknown CUDA devices are named in the error. */
TEST(cuda_devices_run_through_the_cuda_backend) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_CUDA, devs);
  if (nd == 0) return;
  for (int32_t k = 0; k < nd; k++) {
    ASSERT_TRUE(devs[k]->backend == &loom__cuda_backend);
    ASSERT_TRUE(loom__cuda_stream(devs[k]->dev) != NULL);
  }
  const loom__exec_device *dev = NULL;
  ASSERT_STATUS(loom__context_exec_device(gt_context(), "cuda99", &dev), LOOM_ERR_NOT_FOUND);
  ASSERT_CONTAINS(loom_last_error(), "device cuda99 is not in this context");
}
#endif
