/* Recovery from out of memory (loom_plan_run_options.recover, issue 17) on an OpenCL device:
 * ocl0 refuses memory its plan fitted under the limit, from every allocation of a run in turn
 * (loom_testing_fail_node_allocations), and each run finishes through a re-plan. */
#if LOOM_HAVE_OPENCL
#include <stdlib.h>

#include "gpu_util.h"
#include "loom/memory.h"
#include "loom/plan.h"
#include "loom/testing.h"

static const char *knn_lir =
    "graph knn(x: f32[1000,3], y: f32[800,3]) {\n"
    "  xe = reshape x shape=[1000,1,3]\n"
    "  ye = reshape y shape=[1,800,3]\n"
    "  diff = sub xe ye\n"
    "  sq = mul diff diff\n"
    "  d2 = reduce_sum sq axes=[2]\n"
    "  val, idx = topk d2 k=5 axis=1 largest=false\n"
    "  return val, idx\n"
    "}\n";

/* Chunked for LIMIT, unfused (a fused body holds a few KiB, far under the limit: the refusals
 * must hit the pieces a plan for less memory makes smaller, not the whole outputs); ocl0 then
 * refuses allocations over REFUSE. */
enum { LIMIT = 1 << 20, REFUSE = LIMIT / 4 };
static const char *const no_fuse[] = {"fuse"};

static void optimize_options(loom_optimize_options *o) {
  loom_optimize_options_init(o);
  o->disabled = no_fuse;
  o->n_disabled = 1;
}

/* The plan on ocl0 under LIMIT, run with recovery on, ocl0 refusing allocations over
 * max_bytes from its nth (0: none). Returns the status; *refused: the allocations refused. */
static loom_status run(const loom_plan *plan, const loom_tensor *in, int64_t nth, int64_t max_bytes,
                       loom_tensor *out, loom_plan_stats *stats, int64_t *refused) {
  loom_optimize_options opt;
  optimize_options(&opt);
  loom_plan_run_options o;
  loom_plan_run_options_init(&o);
  o.recover = true;
  o.optimize = &opt;
  loom_testing_fail_node_allocations("ocl0", nth, max_bytes);
  loom_status s = loom_plan_run_with_options(gt_context(), plan, &o, in, 2, out, 2, stats);
  *refused = loom_testing_node_allocation_failures();
  loom_testing_fail_node_allocations(NULL, 0, 0);
  return s;
}

/* The bytes live on ocl0 (its pool included): 0 after every run. */
static int64_t ocl0_in_use(void) {
  loom_mem_manager *m = NULL;
  int32_t node = -1;
  loom_mem_node_stats ms;
  if (loom_context_memory(gt_context(), &m) || loom_mem_node_find(m, "ocl0", &node) ||
      loom_mem_stats(m, node, &ms))
    return -1;
  return ms.in_use;
}

TEST(recovery_sweep_on_ocl0) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_OPENCL, devs) == 0) return;
  loom_graph *g = gt_parse("%s", knn_lir), *opt = NULL;
  ASSERT_TRUE(g != NULL);
  loom_runner r = {"ocl0", LIMIT};
  loom_plan *plan = NULL;
  loom_optimize_options oo;
  optimize_options(&oo);
  ASSERT_OK(loom_graph_optimize_for_runners(g, &r, 1, &oo, &opt, NULL, NULL, 0));
  ASSERT_OK(loom_plan_split_by_memory(opt, &r, 1, &plan));
  loom_tensor in[2], ref[2], cpu[2], out[2];
  ASSERT_OK(gt_inputs(g, 6, in));
  /* The reference: the fault-free run, itself checked against the whole graph on cpu0. */
  loom_testing_fail_node_allocations("ocl0", INT64_MAX, 0); /* counts only */
  ASSERT_OK(loom_plan_run(gt_context(), plan, in, 2, ref, 2, NULL));
  int64_t total = loom_testing_node_allocation_count();
  loom_testing_fail_node_allocations(NULL, 0, 0);
  ASSERT_TRUE(total >= 4);
  ASSERT_OK(gt_run(g, NULL, in, cpu, 0, NULL));
  char msg[256];
  double rtol, atol;
  gt_tolerance(LOOM_F32, 20, &rtol, &atol);
  ASSERT_TRUE(gt_close(&cpu[0], &ref[0], rtol, atol, msg, sizeof msg));
  /* At most 40 runs: PoCL is slower than cpu0. */
  int64_t step = total > 40 ? total / 40 : 1, recovered = 0;
  for (int64_t nth = 1; nth <= total; nth += step) {
    loom_plan_stats stats = {0};
    int64_t refused = 0, live = loom_testing_live_allocations();
    loom_status s = run(plan, in, nth, REFUSE, out, &stats, &refused);
    if (s) loom_test_fail(__FILE__, __LINE__, "nth %lld: %s", (long long)nth, loom_last_error());
    ASSERT_OK(s);
    ASSERT_TRUE(gt_close(&ref[0], &out[0], rtol, atol, msg, sizeof msg));
    ASSERT_TRUE(gt_close(&ref[1], &out[1], 0, 0, msg, sizeof msg));
    ASSERT_EQ(stats.n_recoveries > 0, refused > 0);
    if (stats.n_recoveries > 0) {
      const loom_plan_recovery *rec = &stats.recoveries[stats.n_recoveries - 1];
      ASSERT_TRUE(rec->succeeded && strcmp(rec->device, "ocl0") == 0);
      ASSERT_TRUE(rec->limit_bytes < LIMIT && rec->peak_bytes <= rec->limit_bytes);
      ASSERT_CONTAINS(stats.recoveries[0].error, "out of memory on ocl0: the device refused");
      recovered++;
    }
    loom_plan_stats_deinit(&stats);
    gt_tensors_free(out, 2);
    ASSERT_EQ(loom_testing_live_allocations(), live);
    ASSERT_EQ(ocl0_in_use(), 0);
  }
  ASSERT_TRUE(recovered >= 4);
  /* ocl0 refusing everything: the error names stage and device, nothing stays allocated. */
  loom_plan_stats stats = {0};
  int64_t refused = 0, live = loom_testing_live_allocations();
  ASSERT_STATUS(run(plan, in, 1, 0, out, &stats, &refused), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_CONTAINS(loom_last_error(), "stage 0 (ocl0): out of memory, and recovery failed after 3 tries");
  ASSERT_EQ(stats.n_recoveries, 3);
  loom_plan_stats_deinit(&stats);
  ASSERT_EQ(loom_testing_live_allocations(), live);
  ASSERT_EQ(ocl0_in_use(), 0);
  gt_tensors_free(ref, 2);
  gt_tensors_free(cpu, 2);
  gt_tensors_free(in, 2);
  loom_plan_destroy(plan);
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
}
#endif
