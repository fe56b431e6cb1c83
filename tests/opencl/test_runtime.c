/* The runtime on OpenCL devices: plans whose stages run on ocl0 and ocl1 (values passed device
 * to device), limits and measured peaks (the same meter as on cpu0), allocation failures, the
 * on-disk program cache, build errors with their log, and devices without fp64. */
#if LOOM_HAVE_OPENCL
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/opencl/opencl_backend.h"
#include "gpu_util.h"
#include "loom/memory.h"
#include "loom/plan.h"
#include "loom/testing.h"

static bool cut_every_2(const loom_graph *g, int32_t op, void *acc) {
  (void)g;
  (void)acc;
  return op > 0 && op % 2 == 0;
}

/* Runs the plan and compares with a whole-graph cpu0 run; stats filled. */
static bool plan_matches_cpu(const loom_graph *g, const loom_plan *plan, loom_plan_stats *stats,
                             const char *file, int line) {
  int32_t np = loom_graph_param_count(g), no = loom_graph_output_count(g);
  loom_tensor in[8], ref[8], got[8];
  if (gt_inputs(g, 5, in) || gt_run(g, NULL, in, ref, 0, NULL)) {
    loom_test_fail(file, line, "cpu0: %s", loom_last_error());
    return false;
  }
  loom_status s = loom_plan_run(gt_context(), plan, in, np, got, no, stats);
  bool ok = s == LOOM_OK;
  if (!ok) loom_test_fail(file, line, "plan run: %s: %s", loom_status_string(s), loom_last_error());
  for (int32_t i = 0; ok && i < no; i++) {
    double rtol, atol;
    char msg[512];
    gt_tolerance(ref[i].type.dtype, 20, &rtol, &atol);
    if (!gt_close(&ref[i], &got[i], rtol, atol, msg, sizeof msg)) {
      loom_test_fail(file, line, "output %d: %s", (int)i, msg);
      ok = false;
    }
  }
  if (s == LOOM_OK) gt_tensors_free(got, no);
  gt_tensors_free(ref, no);
  gt_tensors_free(in, np);
  return ok;
}

/* The bytes each of ocl0 and ocl1 got from another device without the host so far. */
static void peer_bytes(int64_t out[2]) {
  loom_mem_manager *m = NULL;
  out[0] = out[1] = 0;
  if (loom_context_memory(gt_context(), &m) != LOOM_OK) return;
  for (int32_t k = 0; k < 2; k++) {
    int32_t node;
    loom_mem_node_stats st;
    if (loom_mem_node_find(m, k == 0 ? "ocl0" : "ocl1", &node) == LOOM_OK &&
        loom_mem_stats(m, node, &st) == LOOM_OK)
      out[k] = st.peer_bytes_in;
  }
}

/* Live bytes on every device node of the context's manager (0 once a run has ended). */
static int64_t device_live_bytes(void) {
  loom_mem_manager *m = NULL;
  int64_t live = 0;
  if (loom_context_memory(gt_context(), &m) != LOOM_OK) return -1;
  for (int32_t i = 0; i < loom_mem_node_count(m); i++) {
    loom_mem_node_info info;
    loom_mem_node_stats st;
    if (loom_mem_node_info_get(m, i, &info) == LOOM_OK && info.kind == LOOM_MEMORY_DEVICE &&
        loom_mem_stats(m, i, &st) == LOOM_OK)
      live += st.in_use;
  }
  return live;
}

/* gt_chain_lir in stages of two ops on ocl0, ocl1 (ocl0 again with one device), cpu0, in turn:
 * values pass from ocl0 to ocl1 device to device, from ocl1 to cpu0 read back, from cpu0 to
 * ocl0 written in. NULL plan on failure. */
static loom_plan *alternating_plan(int32_t n_devices, loom_graph **out_g) {
  loom_plan *plan = NULL;
  loom_runner r[3] = {{"ocl0", 1 << 20}, {"ocl1", 1 << 20}, {"cpu0", 1 << 20}};
  if (n_devices < 2) snprintf(r[1].device, sizeof r[1].device, "ocl0");
  *out_g = gt_parse("%s", gt_chain_lir);
  if (*out_g && loom_plan_split(*out_g, cut_every_2, NULL, r, 3, &plan) != LOOM_OK) plan = NULL;
  return plan;
}

TEST(plan_stages_alternate_between_devices) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  if (nd == 0) return;
  loom_graph *g = NULL;
  loom_plan *plan = alternating_plan(nd, &g);
  ASSERT_TRUE(plan != NULL);
  ASSERT_TRUE(loom_plan_stage_count(plan) >= 4);
  loom_plan_stats stats = {0};
  int64_t before[2], after[2];
  peer_bytes(before);
  bool ok = plan_matches_cpu(g, plan, &stats, __FILE__, __LINE__);
  peer_bytes(after);
  for (int32_t i = 0; ok && i < stats.n_stages; i++) {
    /* The same meter as on cpu0: the estimator's numbers exactly. */
    ASSERT_EQ(stats.stages[i].peak_bytes, stats.stages[i].estimated_peak_bytes);
    ASSERT_TRUE(stats.stages[i].peak_bytes <= stats.stages[i].limit_bytes);
  }
  if (ok && nd >= 2) ASSERT_TRUE(after[1] > before[1]); /* ocl0 -> ocl1 without the host */
  ASSERT_EQ(device_live_bytes(), 0);                    /* nothing held, nothing cached */
  loom_plan_stats_deinit(&stats);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
  ASSERT_TRUE(ok);
}

TEST(split_by_memory_across_devices_keeps_limits) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  if (nd == 0) return;
  loom_graph *g = gt_parse(
      "graph knn(x: f32[300,3], y: f32[400,3]) {\n  xe = reshape x shape=[300,1,3]\n  ye = reshape y "
      "shape=[1,400,3]\n"
      "  diff = sub xe ye\n  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n  val, idx = topk d2 k=5 "
      "axis=1 largest=false\n"
      "  return val, idx\n}\n");
  ASSERT_TRUE(g != NULL);
  loom_runner r[2] = {{"ocl0", 256 << 10}, {"ocl1", 256 << 10}};
  if (nd < 2) snprintf(r[1].device, sizeof r[1].device, "ocl0");
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.limit = r[0].limit;
  loom_graph *opt = NULL;
  loom_rewrite_report report = {0};
  ASSERT_OK(loom_graph_optimize(g, &o, &opt, &report));
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split_by_memory(opt, r, 2, &plan));
  loom_plan_stats stats = {0};
  bool ok = plan_matches_cpu(opt, plan, &stats, __FILE__, __LINE__);
  for (int32_t i = 0; ok && i < stats.n_stages; i++) {
    ASSERT_EQ(stats.stages[i].peak_bytes, stats.stages[i].estimated_peak_bytes);
    ASSERT_TRUE(stats.stages[i].peak_bytes <= r[i % 2].limit);
  }
  loom_plan_stats_deinit(&stats);
  loom_plan_destroy(plan);
  loom_rewrite_report_deinit(&report);
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
  ASSERT_TRUE(ok);
}

TEST(peaks_equal_cpu0_and_limits_hold) {
  gt_test_peaks_equal_cpu0(LOOM_BACKEND_OPENCL);
}

/* Every allocation failure during a run on a device is reported and frees what it took. */
TEST(allocation_failures_on_a_device) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_OPENCL, devs) == 0) return;
  loom_graph *g = gt_parse("%s", gt_chain_lir);
  ASSERT_TRUE(g != NULL);
  loom_tensor in[3], out[5];
  ASSERT_OK(gt_inputs(g, 4, in));
  ASSERT_OK(gt_run(g, devs[0], in, out, 0, NULL)); /* programs built before the sweep */
  gt_tensors_free(out, 5);
  loom_test_sweep sw;
  SWEEP_ALLOCATIONS(&sw, 0, 100000) {
    if (!SWEEP_RUN(&sw, gt_run(g, devs[0], in, out, 0, NULL))) gt_tensors_free(out, 5);
  }
  gt_tensors_free(in, 3);
  loom_graph_destroy(g);
}

/* How many times `needle` occurs in the file at path (-1: unreadable). */
static int32_t occurrences(const char *path, const char *needle) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  static char text[1 << 22];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  int32_t count = 0;
  for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle)) count++;
  return count;
}

/* Stages on ocl0, cpu0, ocl1 in turn: while the cpu0 stage runs, what the ocl1 stage reads
 * from the ocl0 stage is brought to ocl1 (prefetch policy adaptive, the default), within
 * ocl1's runner limit; with the policy none it is not. */
TEST(the_next_stages_inputs_are_prefetched_to_its_device) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_OPENCL, devs) < 2) return;
  loom_graph *g = gt_parse("%s", gt_chain_lir);
  ASSERT_TRUE(g != NULL);
  loom_runner r[3] = {{"ocl0", 1 << 20}, {"cpu0", 1 << 20}, {"ocl1", 1 << 20}};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split(g, cut_every_2, NULL, r, 3, &plan));
  loom_mem_manager *m = NULL;
  ASSERT_OK(loom_context_memory(gt_context(), &m));
  char path[] = "/tmp/loom-prefetch-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_TRUE(fd >= 0);
  close(fd);
  int32_t counts[2];
  for (int32_t pass = 0; pass < 2; pass++) {
    ASSERT_OK(loom_mem_set_prefetch_policy(m, pass == 0 ? LOOM_MEM_POLICY_ADAPTIVE : LOOM_MEM_POLICY_NONE));
    ASSERT_OK(loom_mem_trace_enable(m, true));
    loom_plan_stats stats = {0};
    bool ok = plan_matches_cpu(g, plan, &stats, __FILE__, __LINE__);
    ASSERT_OK(loom_mem_trace_enable(m, false));
    ASSERT_OK(loom_mem_trace_write(m, path));
    counts[pass] = occurrences(path, "\"prefetch\"");
    for (int32_t i = 0; ok && i < stats.n_stages; i++)
      ASSERT_TRUE(stats.stages[i].peak_bytes <= stats.stages[i].limit_bytes);
    loom_plan_stats_deinit(&stats);
    ASSERT_TRUE(ok);
    ASSERT_EQ(device_live_bytes(), 0);
  }
  ASSERT_OK(loom_mem_set_prefetch_policy(m, LOOM_MEM_POLICY_ADAPTIVE));
  unlink(path);
  ASSERT_TRUE(counts[0] > 0);      /* the trace keeps what it recorded: */
  ASSERT_EQ(counts[1], counts[0]); /* no prefetch in the second pass */
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* Every allocation failure during a plan whose stages pass values between ocl0, ocl1 and cpu0
 * is reported, and leaves nothing allocated on the host or on a device. */
TEST(allocation_failures_in_a_plan_across_devices) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  if (nd == 0) return;
  loom_graph *g = NULL;
  loom_plan *plan = alternating_plan(nd, &g);
  ASSERT_TRUE(plan != NULL);
  loom_tensor in[3], out[5];
  ASSERT_OK(gt_inputs(g, 4, in));
  ASSERT_OK(loom_plan_run(gt_context(), plan, in, 3, out, 5, NULL)); /* programs built first */
  gt_tensors_free(out, 5);
  loom_test_sweep sw;
  SWEEP_ALLOCATIONS(&sw, 0, 100000) {
    if (!SWEEP_RUN(&sw, loom_plan_run(gt_context(), plan, in, 3, out, 5, NULL))) gt_tensors_free(out, 5);
    ASSERT_EQ(device_live_bytes(), 0);
  }
  ASSERT_TRUE(sw.failures > 10);
  gt_tensors_free(in, 3);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* ---- the program cache ----------------------------------------------------------------------- */

static int32_t count_cache_files(const char *dir, bool damage) {
  char path[1024];
  snprintf(path, sizeof path, "%s/opencl", dir);
  DIR *dp = opendir(path);
  if (!dp) return 0;
  int32_t n = 0;
  struct dirent *e;
  while ((e = readdir(dp))) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".bin") != 0) continue;
    n++;
    if (damage) {
      char file[1400];
      snprintf(file, sizeof file, "%s/%s", path, e->d_name);
      FILE *f = fopen(file, "wb");
      if (f) {
        fputs("LOOMCL1\nnot a program", f);
        fclose(f);
      }
    }
  }
  closedir(dp);
  return n;
}

TEST(programs_are_cached_on_disk_and_damage_is_rebuilt) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_OPENCL, devs) == 0) return;
  const char *dir = getenv("LOOM_CACHE_DIR");
  if (!dir || !*dir) {
    loom_test_skip("LOOM_CACHE_DIR is not set (ctest sets it)");
    return;
  }
  loom_graph *g = gt_parse("graph c(a: i16[5,7]) { b = neg a\n r = reduce_sum b axes=[1]\n return r }");
  ASSERT_TRUE(g != NULL);
  loom_tensor in[1], ref[1], out[1];
  ASSERT_OK(gt_inputs(g, 1, in));
  ASSERT_OK(gt_run(g, NULL, in, ref, 0, NULL));
  ASSERT_OK(gt_run(g, devs[0], in, out, 0, NULL));
  gt_tensors_free(out, 1);
  ASSERT_TRUE(count_cache_files(dir, false) >= 1);
  /* Damaged files: a new context (programs not in memory) rebuilds them from source. */
  count_cache_files(dir, true);
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  const loom__exec_device *dev = NULL;
  ASSERT_OK(loom__context_exec_device(ctx, devs[0]->id, &dev));
  ASSERT_OK(gt_run(g, dev, in, out, 0, NULL));
  char msg[256];
  ASSERT_TRUE(gt_close(&ref[0], &out[0], 0, 0, msg, sizeof msg));
  gt_tensors_free(out, 1);
  loom_context_destroy(ctx);
  ASSERT_TRUE(count_cache_files(dir, false) >= 1);
  gt_tensors_free(ref, 1);
  gt_tensors_free(in, 1);
  loom_graph_destroy(g);
}

TEST(a_failed_build_reports_its_log) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_OPENCL, devs) == 0) return;
  const char *parts[] = {"__kernel void broken(__global float *x) { x[0] = undeclared_thing; }\n"};
  cl_program prog = NULL;
  loom__cl_device *d = devs[0]->dev;
  ASSERT_STATUS(loom__cl_program_build(d, "broken.cl", parts, 1, "-cl-std=CL1.2", &prog), LOOM_ERR_INTERNAL);
  ASSERT_TRUE(prog == NULL);
  ASSERT_CONTAINS(loom_last_error(),
                  "building the OpenCL program broken.cl failed (CL_BUILD_PROGRAM_FAILURE");
  ASSERT_CONTAINS(loom_last_error(), "build log:");
  ASSERT_CONTAINS(loom_last_error(), "undeclared_thing");
  ASSERT_CONTAINS(loom_last_error(), devs[0]->id);
}

/* A device without fp64: f64 and c128 ops are UNSUPPORTED naming device and op; others run,
 * and f16 runs everywhere (a storage type: no cl_khr_fp16 needed). */
TEST(a_device_without_fp64_refuses_f64_by_name) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_OPENCL, devs) == 0) return;
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  const loom__exec_device *dev = NULL;
  ASSERT_OK(loom__context_exec_device(ctx, devs[0]->id, &dev));
  loom__opencl_testing_disable_fp64(dev->dev);
  loom_graph *g = gt_parse("graph f(a: f64[3]) { r = exp a\n return r }");
  loom_graph *h =
      gt_parse("graph h(a: f16[3], b: f32[3]) { r = add a a\n s = reduce_sum b axes=[0]\n return r, s }");
  ASSERT_TRUE(g != NULL && h != NULL);
  loom_tensor in[2], out[2];
  ASSERT_OK(gt_inputs(g, 1, in));
  ASSERT_STATUS(gt_run(g, dev, in, out, 0, NULL), LOOM_ERR_UNSUPPORTED);
  ASSERT_CONTAINS(loom_last_error(), devs[0]->id);
  ASSERT_CONTAINS(loom_last_error(), "exp on f64: the device has no fp64 (cl_khr_fp64)");
  gt_tensors_free(in, 1);
  ASSERT_OK(gt_inputs(h, 1, in));
  ASSERT_OK(gt_run(h, dev, in, out, 0, NULL)); /* f32 sums accumulate in float there */
  gt_tensors_free(out, 2);
  gt_tensors_free(in, 2);
  loom_graph_destroy(g);
  loom_graph_destroy(h);
  loom_context_destroy(ctx);
}

/* Without a limit CLBlast may take temporaries beyond the op's scratch (counted by the meter);
 * under a limit a dot stays inside the estimate. Both give the cpu backend's result. */
TEST(library_temporaries_only_without_a_limit) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_OPENCL, devs) == 0) return;
#if !LOOM_HAVE_CLBLAST
  loom_test_skip("this build has no CLBlast");
  return;
#endif
  /* 1000 is no multiple of CLBlast's tiles: it pads the matrices into its temporary buffer
   * (12 MB, three times the output). */
  loom_graph *g = gt_parse("graph d(a: f32[1000,1000], b: f32[1000,1000]) { r = dot a b\n return r }");
  ASSERT_TRUE(g != NULL);
  loom_tensor in[2], ref[1], out[1];
  ASSERT_OK(gt_inputs(g, 2, in));
  loom__meter cpu, free_run, limited;
  ASSERT_OK(gt_run(g, NULL, in, ref, 0, &cpu));
  ASSERT_OK(gt_run(g, devs[0], in, out, 0, &free_run));
  ASSERT_TRUE(free_run.peak > cpu.peak);
  char msg[512];
  double rtol, atol;
  gt_tolerance(LOOM_F32, 20, &rtol, &atol);
  ASSERT_TRUE(gt_close(&ref[0], &out[0], rtol, atol, msg, sizeof msg));
  gt_tensors_free(out, 1);
  ASSERT_OK(gt_run(g, devs[0], in, out, cpu.peak, &limited));
  ASSERT_EQ(limited.peak, cpu.peak);
  ASSERT_TRUE(gt_close(&ref[0], &out[0], rtol, atol, msg, sizeof msg));
  gt_tensors_free(out, 1);
  gt_tensors_free(ref, 1);
  gt_tensors_free(in, 2);
  loom_graph_destroy(g);
}

TEST(unknown_devices_are_named) {
  loom_context *ctx = gt_context();
  const loom__exec_device *dev = NULL;
  ASSERT_STATUS(loom__context_exec_device(ctx, "ocl99", &dev), LOOM_ERR_NOT_FOUND);
  ASSERT_CONTAINS(loom_last_error(), "device ocl99 is not in this context (it has: cpu0");
  ASSERT_TRUE(dev == NULL);
  ASSERT_OK(loom__context_exec_device(ctx, "cpu0", &dev));
  ASSERT_TRUE(dev->backend == &loom__cpu_backend && dev->dev == NULL);
}
#endif
