/* Recovery from out of memory in loom_plan_run (loom_plan_run_options.recover, issue 17): a
 * device that refuses memory its plan fitted under the limit, simulated by the memory
 * manager's fault injection (loom_testing_fail_node_allocations), from every allocation of a
 * run in turn. */
#include <math.h>
#include <stdlib.h>

#include "ir/repiece.h"
#include "loom/testing.h"
#include "split_util.h"

/* IR.md's kNN, small: d2 is 1000 x 800 floats (3.1 MiB), so a 1 MiB limit chunks it. */
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

/* Two kNN results of one input computed in pieces of other sizes: distances within this
 * tolerance, indices equal except at such ties. Fusion off, the distance rewrite takes the
 * expanded form |a|^2 + |b|^2 - 2 a.b^T, whose GEMM OpenBLAS sums in an order that depends on
 * the piece's shape with some of its kernels (Haswell's, which it also runs on a Zen 5). */
#define KNN_ATOL 1e-6
#define KNN_RTOL 1e-5

/* The plan is chunked for LIMIT; the "device" then refuses allocations over REFUSE. Fusion is
 * off: a fused loop body holds a few KiB where the unfused one fills the limit, and the
 * refusals must hit buffers that a plan for less memory makes smaller (pieces of the distance
 * matrix), not the outputs, which every plan allocates whole. */
enum { LIMIT = 1 << 20, REFUSE = LIMIT / 4 };
static const char *const no_fuse[] = {"fuse"};

static void optimize_options(loom_optimize_options *o) {
  loom_optimize_options_init(o);
  o->disabled = no_fuse;
  o->n_disabled = 1;
}

static bool cut_before(const loom_graph *g, int32_t op, void *acc) {
  (void)g;
  return op == *(const int32_t *)acc;
}

/* cpu0 alone: no OpenCL platform to open for every run of a sweep. */
static loom_context *cpu_context(void) {
  loom_context_options o;
  loom_context_options_init(&o);
  o.devices = "cpu0";
  loom_context *ctx = NULL;
  return loom_context_create(&o, &ctx) == LOOM_OK ? ctx : NULL;
}

/* The graph optimized for cpu0:LIMIT and cut by memory; with cut_at >= 0, cut by
 * loom_plan_split before op cut_at instead (two stages, each within the limit). */
static loom_plan *knn_plan(loom_graph **out_graph, int32_t *cut_at) {
  loom_graph *g = su_parse(knn_lir);
  loom_runner r = {"cpu0", LIMIT};
  loom_graph *opt = NULL;
  loom_plan *plan = NULL;
  loom_optimize_options o;
  optimize_options(&o);
  if (!g || loom_graph_optimize_for_runners(g, &r, 1, &o, &opt, NULL, NULL, 0)) return NULL;
  loom_status s;
  if (cut_at) {
    /* Before the first loop: stage 0 computes what the loop reads, stage 1 runs the loop. */
    *cut_at = -1;
    for (int32_t i = 0; i < loom_graph_op_count(opt) && *cut_at < 0; i++)
      if (loom_graph_loop_get(opt, i, NULL, NULL, NULL) == LOOM_OK) *cut_at = i;
    s = loom_plan_split(opt, cut_before, cut_at, &r, 1, &plan);
  } else {
    s = loom_plan_split_by_memory(opt, &r, 1, &plan);
  }
  loom_graph_destroy(opt);
  *out_graph = g;
  return s ? NULL : plan;
}

/* What recovery halves for stage i: what it was planned to hold, at most its limit. */
static int64_t planned(const loom_plan *plan, int32_t i) {
  loom_stage_info info;
  if (loom_plan_stage(plan, i, &info)) return -1;
  return info.estimated_peak < info.limit ? info.estimated_peak : info.limit;
}

/* Allocations host0 refused in the last run(). */
static int64_t last_refusals;

/* Runs the plan with recovery on (recover false: off), host0 refusing every allocation of
 * more than max_bytes from its nth on (nth 0: nothing refused). *out is calloc'd. */
static loom_status run(loom_context *ctx, const loom_plan *plan, const loom_tensor *in, bool recover,
                       int64_t nth, int64_t max_bytes, loom_tensor **out, loom_plan_stats *stats) {
  const loom_graph *g = loom_plan_graph(plan);
  int32_t n = loom_graph_output_count(g);
  *out = calloc((size_t)n, sizeof **out);
  loom_optimize_options opt;
  optimize_options(&opt);
  loom_plan_run_options o;
  loom_plan_run_options_init(&o);
  o.recover = recover;
  o.optimize = &opt;
  loom_testing_fail_node_allocations("host0", nth, max_bytes);
  loom_status s = loom_plan_run_with_options(ctx, plan, &o, in, loom_graph_param_count(g), *out, n, stats);
  last_refusals = loom_testing_node_allocation_failures();
  loom_testing_fail_node_allocations(NULL, 0, 0);
  return s;
}

/* The sweep: host0 refuses allocations over REFUSE from its nth on, for every nth of a
 * fault-free run. Each run finishes, with the fault-free run's results, and lists re-plans
 * exactly when an allocation was refused: for half what the stage was planned to hold, then a
 * quarter (the host's free memory is far above both), the last one run to the end within its
 * limit. Returns the runs
 * that recovered; *stages_seen gets a bit per stage that recovered. */
static int64_t sweep(loom_context *ctx, const loom_plan *plan, const loom_tensor *in, const loom_tensor *ref,
                     uint32_t *stages_seen, const char *file, int line) {
  const loom_graph *g = loom_plan_graph(plan);
  int32_t n_out = loom_graph_output_count(g);
  loom_tensor *out = calloc((size_t)n_out, sizeof *out);
  loom_plan_stats stats = {0};
  loom_testing_fail_node_allocations("host0", INT64_MAX, 0); /* counts only */
  loom_status s = loom_plan_run(ctx, plan, in, loom_graph_param_count(g), out, n_out, NULL);
  int64_t total = loom_testing_node_allocation_count();
  loom_testing_fail_node_allocations(NULL, 0, 0);
  su_tensors_free(out, n_out);
  if (s || total < 4) {
    loom_test_fail(file, line, "fault-free run: %s, %lld allocations", loom_status_string(s),
                   (long long)total);
    return 0;
  }
  int64_t recovered = 0;
  for (int64_t nth = 1; nth <= total; nth++) {
    int64_t live = loom_testing_live_allocations();
    s = run(ctx, plan, in, true, nth, REFUSE, &out, &stats);
    bool ok = s == LOOM_OK;
    if (!ok)
      loom_test_fail(file, line, "nth %lld: %s: %s", (long long)nth, loom_status_string(s),
                     loom_last_error());
    /* A re-plan runs smaller pieces, whose distances may round otherwise (KNN_RTOL's comment):
     * by tolerance. */
    int64_t bad = ok ? su_knn_mismatches(&ref[0], &ref[1], &out[0], &out[1], KNN_ATOL, KNN_RTOL) : 0;
    if (bad != 0) {
      loom_test_fail(file, line, "nth %lld: %lld elements differ from the fault-free run", (long long)nth,
                     (long long)bad);
      ok = false;
    }
    if (ok && (stats.n_recoveries > 0) != (last_refusals > 0)) {
      loom_test_fail(file, line, "nth %lld: %lld allocations refused, %d re-plans listed", (long long)nth,
                     (long long)last_refusals, (int)stats.n_recoveries);
      ok = false;
    }
    for (int32_t i = 0; ok && i < stats.n_recoveries; i++) {
      const loom_plan_recovery *r = &stats.recoveries[i];
      bool last = i == stats.n_recoveries - 1;
      ok = r->succeeded == last && r->attempt == i + 1 && r->tries == 3 &&
           r->limit_bytes == planned(plan, r->stage) >> (i + 1) && strcmp(r->device, "cpu0") == 0 &&
           r->allocation >= 1 && r->n_stages >= 1 && r->estimated_peak_bytes <= r->limit_bytes &&
           r->peak_bytes <= r->limit_bytes && r->stage == stats.recoveries[0].stage &&
           strstr(r->error, "the device refused") != NULL;
      if (!ok)
        loom_test_fail(file, line, "nth %lld: recovery %d: try %d, limit %lld, peak %lld, succeeded %d, '%s'",
                       (long long)nth, (int)i, (int)r->attempt, (long long)r->limit_bytes,
                       (long long)r->peak_bytes, (int)r->succeeded, r->error);
      else if (last && r->stage < 32)
        *stages_seen |= 1u << r->stage;
    }
    recovered += ok && stats.n_recoveries > 0;
    for (int32_t i = 0; ok && i < stats.n_stages; i++)
      if (stats.stages[i].peak_bytes > stats.stages[i].limit_bytes) {
        loom_test_fail(file, line, "nth %lld: stage %d peaked at %lld over its limit %lld", (long long)nth,
                       (int)i, (long long)stats.stages[i].peak_bytes, (long long)stats.stages[i].limit_bytes);
        ok = false;
      }
    loom_plan_stats_deinit(&stats);
    su_tensors_free(out, n_out);
    if (ok && loom_testing_live_allocations() != live) {
      loom_test_fail(file, line, "nth %lld: %lld allocations leaked", (long long)nth,
                     (long long)(loom_testing_live_allocations() - live));
      ok = false;
    }
    if (!ok) return recovered;
  }
  return recovered;
}

/* The reference: the plan run without faults (and that run close to the whole graph's). */
static loom_tensor *reference(loom_context *ctx, const loom_graph *g, const loom_plan *plan,
                              const loom_tensor *in) {
  loom_tensor *ref = NULL, *whole = NULL;
  loom_plan_stats stats = {0};
  if (run(ctx, plan, in, false, 0, 0, &ref, &stats) || su_run_graph(g, in, &whole) ||
      su_worst(&whole[0], &ref[0], 1e-5, 1e-4) > 1) {
    su_tensors_free(ref, 2);
    ref = NULL;
  }
  loom_plan_stats_deinit(&stats);
  su_tensors_free(whole, 2);
  return ref;
}

TEST(recovery_sweep_one_stage) {
  loom_graph *g = NULL;
  loom_plan *plan = knn_plan(&g, NULL);
  ASSERT_TRUE(plan != NULL);
  loom_context *ctx = cpu_context();
  ASSERT_TRUE(ctx != NULL);
  loom_tensor *in = NULL;
  ASSERT_OK(su_inputs(g, 3, &in));
  loom_tensor *ref = reference(ctx, g, plan, in);
  ASSERT_TRUE(ref != NULL);
  uint32_t seen = 0;
  int64_t recovered = sweep(ctx, plan, in, ref, &seen, __FILE__, __LINE__);
  if (loom_test_failed()) return;
  /* Every piece of the loop allocates more than REFUSE: most runs recover. */
  ASSERT_TRUE(recovered >= 4);
  ASSERT_TRUE(seen & 1u);
  su_tensors_free(ref, 2);
  su_tensors_free(in, 2);
  loom_context_destroy(ctx);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* Two stages: a refusal in the second re-plans it alone, the first stage's results kept. */
TEST(recovery_sweep_second_stage) {
  loom_graph *g = NULL;
  int32_t cut = -1;
  loom_plan *plan = knn_plan(&g, &cut);
  ASSERT_TRUE(plan != NULL);
  ASSERT_TRUE(cut > 0);
  ASSERT_EQ(loom_plan_stage_count(plan), 2);
  loom_context *ctx = cpu_context();
  ASSERT_TRUE(ctx != NULL);
  loom_tensor *in = NULL;
  ASSERT_OK(su_inputs(g, 4, &in));
  loom_tensor *ref = reference(ctx, g, plan, in);
  ASSERT_TRUE(ref != NULL);
  uint32_t seen = 0;
  int64_t recovered = sweep(ctx, plan, in, ref, &seen, __FILE__, __LINE__);
  if (loom_test_failed()) return;
  ASSERT_TRUE(recovered >= 4);
  ASSERT_TRUE(seen & 2u);
  su_tensors_free(ref, 2);
  su_tensors_free(in, 2);
  loom_context_destroy(ctx);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* A device that refuses everything: every try fails, the error names the stage, the device
 * and the limits tried, nothing is left allocated, and every try is recorded. */
TEST(recovery_that_cannot_help) {
  loom_graph *g = NULL;
  loom_plan *plan = knn_plan(&g, NULL);
  ASSERT_TRUE(plan != NULL);
  loom_context *ctx = cpu_context();
  ASSERT_TRUE(ctx != NULL);
  loom_tensor *in = NULL, *out = NULL;
  ASSERT_OK(su_inputs(g, 3, &in));
  int64_t live = loom_testing_live_allocations();
  loom_plan_stats stats = {0};
  ASSERT_STATUS(run(ctx, plan, in, true, 1, 0, &out, &stats), LOOM_ERR_OUT_OF_MEMORY);
  int64_t base = planned(plan, 0);
  char a[32], b[32], c[32], want[256];
  snprintf(want, sizeof want,
           "stage 0 (cpu0): out of memory, and recovery failed after 3 tries (re-planned for %s, %s, %s): "
           "re-plan stage 0 (cpu0, limit %lld bytes): ",
           loom_bytes_format(base / 2, a, sizeof a), loom_bytes_format(base / 4, b, sizeof b),
           loom_bytes_format(base / 8, c, sizeof c), (long long)(base / 8));
  ASSERT_CONTAINS(loom_last_error(), want);
  ASSERT_CONTAINS(loom_last_error(), "out of memory on host0: the device refused");
  ASSERT_EQ(stats.n_recoveries, 3);
  for (int32_t i = 0; i < 3; i++) {
    ASSERT_EQ(stats.recoveries[i].attempt, i + 1);
    ASSERT_EQ(stats.recoveries[i].limit_bytes, base >> (i + 1));
    ASSERT_TRUE(!stats.recoveries[i].succeeded && stats.recoveries[i].n_stages >= 1);
  }
  ASSERT_TRUE(out[0].data == NULL && out[1].data == NULL);
  loom_plan_stats_deinit(&stats);
  free(out);
  ASSERT_EQ(loom_testing_live_allocations(), live);
  /* Without recovery the device's refusal is the error, as before. */
  ASSERT_STATUS(run(ctx, plan, in, false, 1, 0, &out, &stats), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_CONTAINS(loom_last_error(), "stage 0 (cpu0, limit 1048576 bytes): ");
  ASSERT_CONTAINS(loom_last_error(), "out of memory on host0: the device refused");
  ASSERT_EQ(stats.n_recoveries, 0);
  loom_plan_stats_deinit(&stats);
  free(out);
  ASSERT_EQ(loom_testing_live_allocations(), live);
  su_tensors_free(in, 2);
  loom_context_destroy(ctx);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* A bookkeeping allocation failing (the host allocator's sweep) is no device out of memory:
 * with recovery on, every failure is still reported and frees what it took. */
TEST(recovery_allocation_failure_sweep) {
  loom_graph *g = NULL;
  loom_plan *plan = knn_plan(&g, NULL);
  ASSERT_TRUE(plan != NULL);
  loom_context *ctx = cpu_context();
  ASSERT_TRUE(ctx != NULL);
  loom_tensor *in = NULL, *out = NULL;
  ASSERT_OK(su_inputs(g, 3, &in));
  loom_plan_run_options o;
  loom_plan_run_options_init(&o);
  o.recover = true;
  loom_optimize_options opt;
  optimize_options(&opt);
  o.optimize = &opt;
  out = calloc(2, sizeof *out);
  loom_test_sweep sw;
  SWEEP_ALLOCATIONS(&sw, 0, 100000) {
    /* host0 refuses big allocations from the 3rd on, so recovery runs while the host
     * allocator fails too. */
    loom_testing_fail_node_allocations("host0", 3, REFUSE);
    loom_plan_stats stats = {0};
    if (!SWEEP_RUN(&sw, loom_plan_run_with_options(ctx, plan, &o, in, 2, out, 2, &stats)))
      for (int32_t i = 0; i < 2; i++) loom_tensor_deinit(&out[i]);
    loom_testing_fail_node_allocations(NULL, 0, 0);
    loom_plan_stats_deinit(&stats);
  }
  ASSERT_TRUE(sw.nth > 100 && sw.failures > 10);
  free(out);
  su_tensors_free(in, 2);
  loom_context_destroy(ctx);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

TEST(recovery_options) {
  loom_plan_run_options o;
  loom_plan_run_options_init(&o);
  ASSERT_TRUE(!o.recover && o.recover_tries == 3 && o.optimize == NULL);
  loom_plan_run_options_init(NULL);
  loom_graph *g = NULL;
  loom_plan *plan = knn_plan(&g, NULL);
  ASSERT_TRUE(plan != NULL);
  loom_context *ctx = cpu_context();
  loom_tensor *in = NULL, out[2];
  ASSERT_OK(su_inputs(g, 3, &in));
  o.recover = true;
  o.recover_tries = 0;
  ASSERT_STATUS(loom_plan_run_with_options(ctx, plan, &o, in, 2, out, 2, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "recover_tries is 0, not 1 to 8");
  /* One try: refusals at every size leave one record. */
  o.recover_tries = 1;
  loom_plan_stats stats = {0};
  loom_testing_fail_node_allocations("host0", 1, 0);
  ASSERT_STATUS(loom_plan_run_with_options(ctx, plan, &o, in, 2, out, 2, &stats), LOOM_ERR_OUT_OF_MEMORY);
  loom_testing_fail_node_allocations(NULL, 0, 0);
  char half[32], want[96];
  snprintf(want, sizeof want, "recovery failed after 1 try (re-planned for %s)",
           loom_bytes_format(planned(plan, 0) / 2, half, sizeof half));
  ASSERT_CONTAINS(loom_last_error(), want);
  ASSERT_EQ(stats.n_recoveries, 1);
  loom_plan_stats_deinit(&stats);
  su_tensors_free(in, 2);
  loom_context_destroy(ctx);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* Another user of the device (here a buffer the test holds on host0, whose limit it lowers to
 * the runner's) leaves less than the plan fitted. Recovery re-plans for the memory the manager
 * reports free, below what the stage planned to hold, and as that graph holds more at once
 * than the free memory whatever the chunking (FFTs are not cut along their axis), the re-plan
 * cuts the stage into several, which run in its place. */
static const char *ffts_lir =
    "graph ffts(x: c64[2048]) {\n"
    "  m0 = add x x\n  f0 = fft m0 axis=0\n"
    "  m1 = add m0 f0\n  f1 = fft m1 axis=0\n"
    "  m2 = add m1 f1\n  f2 = fft m2 axis=0\n"
    "  m3 = add m2 f2\n  f3 = fft m3 axis=0\n"
    "  m4 = add m3 f3\n  f4 = fft m4 axis=0\n"
    "  m5 = add m4 f4\n  f5 = fft m5 axis=0\n"
    "  m6 = add m5 f5\n  f6 = fft m6 axis=0\n"
    "  m7 = add m6 f6\n  f7 = fft m7 axis=0\n"
    "  s6 = add f7 f6\n  s5 = add s6 f5\n  s4 = add s5 f4\n  s3 = add s4 f3\n"
    "  s2 = add s3 f2\n  s1 = add s2 f1\n  s0 = add s1 f0\n"
    "  return s0\n"
    "}\n";

TEST(recovery_for_the_free_memory_in_stages) {
  loom_graph *g = su_parse(ffts_lir);
  ASSERT_TRUE(g != NULL);
  loom_runner r = {"cpu0", LIMIT};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split_by_memory(g, &r, 1, &plan));
  ASSERT_EQ(loom_plan_stage_count(plan), 1);
  loom_stage_info st;
  ASSERT_OK(loom_plan_stage(plan, 0, &st));
  loom_context *ctx = cpu_context();
  ASSERT_TRUE(ctx != NULL);
  loom_mem_manager *m = NULL;
  int32_t host = -1;
  ASSERT_OK(loom_context_memory(ctx, &m));
  ASSERT_OK(loom_mem_node_find(m, "host0", &host));
  loom_mem_node_info info;
  ASSERT_OK(loom_mem_node_info_get(m, host, &info));
  int64_t own_limit = info.limit_bytes, free_bytes = 100 << 10;
  ASSERT_TRUE(free_bytes < st.estimated_peak);
  ASSERT_OK(loom_mem_set_limit(m, host, LIMIT));
  loom_buffer *other = NULL;
  ASSERT_OK(loom_buffer_allocate(m, LIMIT - free_bytes, LOOM_U8, host, LOOM_MEM_EXACT_SIZE, &other));
  loom_tensor *in = NULL, *out = NULL, *whole = NULL;
  ASSERT_OK(su_inputs(g, 5, &in));
  ASSERT_OK(su_run_graph(g, in, &whole));
  loom_plan_stats stats = {0};
  ASSERT_OK(run(ctx, plan, in, true, 0, 0, &out, &stats));
  ASSERT_EQ(stats.n_recoveries, 1);
  const loom_plan_recovery *rec = &stats.recoveries[0];
  ASSERT_CONTAINS(rec->error, "out of memory on host0");
  ASSERT_EQ(rec->free_bytes, free_bytes);
  ASSERT_EQ(rec->limit_bytes, free_bytes);
  ASSERT_TRUE(rec->succeeded && rec->n_stages > 1 && rec->peak_bytes <= free_bytes);
  ASSERT_TRUE(su_worst(&whole[0], &out[0], 1e-3, 1e-4) <= 1);
  loom_plan_stats_deinit(&stats);
  su_tensors_free(out, 1);
  /* Without recovery the same run fails, naming the node. */
  ASSERT_STATUS(run(ctx, plan, in, false, 0, 0, &out, &stats), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_CONTAINS(loom_last_error(), "out of memory on host0");
  loom_plan_stats_deinit(&stats);
  free(out);
  loom_buffer_free(other);
  ASSERT_OK(loom_mem_set_limit(m, host, own_limit));
  su_tensors_free(whole, 1);
  su_tensors_free(in, 1);
  loom_context_destroy(ctx);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* The re-plan's first means: the chunk rewrite's loop in smaller pieces, the largest that fit,
 * with the same results; where nothing fits, the least pieces there can be. */
TEST(recovery_loops_in_smaller_pieces) {
  loom_graph *g = su_parse(knn_lir), *chunked = NULL;
  ASSERT_TRUE(g != NULL);
  loom_optimize_options o;
  optimize_options(&o);
  o.limit = LIMIT;
  ASSERT_OK(loom_graph_optimize(g, &o, &chunked, NULL));
  int32_t loop = -1;
  for (int32_t i = 0; i < loom_graph_op_count(chunked) && loop < 0; i++)
    if (loom_graph_loop_get(chunked, i, NULL, NULL, NULL) == LOOM_OK) loop = i;
  ASSERT_TRUE(loop >= 0);
  int64_t n = 0, piece = 0, smaller = 0, peak = 0;
  ASSERT_OK(loom_graph_loop_get(chunked, loop, NULL, &n, &piece));
  loom_graph *fit = NULL;
  ASSERT_OK(loom__loops_fit(chunked, LIMIT / 4, &fit, &peak));
  loom_estimate e;
  ASSERT_OK(loom_graph_estimate(fit, NULL, &e));
  ASSERT_EQ(e.peak_bytes, peak);
  ASSERT_TRUE(peak <= LIMIT / 4 && peak > LIMIT / 8); /* fits, and not by far */
  loom_estimate_deinit(&e);
  ASSERT_OK(loom_graph_loop_get(fit, loop, NULL, NULL, &smaller));
  ASSERT_TRUE(smaller < piece / 3);
  loom_tensor *in = NULL, *a = NULL, *b = NULL;
  ASSERT_OK(su_inputs(g, 7, &in));
  ASSERT_OK(su_run_graph(chunked, in, &a));
  ASSERT_OK(su_run_graph(fit, in, &b));
  /* Smaller pieces: the distances may round otherwise (KNN_RTOL's comment), so by tolerance. */
  ASSERT_EQ(su_knn_mismatches(&a[0], &a[1], &b[0], &b[1], KNN_ATOL, KNN_RTOL), 0);
  su_tensors_free(b, 2);
  loom_graph_destroy(fit);
  /* 1 KiB: no piece fits (the inputs alone pass it); the least ones, a row of x each (the loop
   * cuts x's rows, each piece's topk running over all of y). */
  ASSERT_OK(loom__loops_fit(chunked, 1024, &fit, &peak));
  ASSERT_TRUE(peak > 1024);
  ASSERT_OK(loom_graph_loop_get(fit, loop, NULL, NULL, &smaller));
  ASSERT_EQ(smaller, 1);
  ASSERT_OK(su_run_graph(fit, in, &b));
  ASSERT_EQ(su_knn_mismatches(&a[0], &a[1], &b[0], &b[1], KNN_ATOL, KNN_RTOL), 0);
  su_tensors_free(b, 2);
  su_tensors_free(a, 2);
  su_tensors_free(in, 2);
  loom_graph_destroy(fit);
  loom_graph_destroy(chunked);
  loom_graph_destroy(g);
}

/* A loop along y's rows merges topk candidates: its pieces, the last one included, keep at
 * least k rows (20003 = 7 x 2857 + 4: pieces of 7 would leave 4 at the end). */
TEST(recovery_loops_keep_k_per_piece) {
  loom_graph *g = su_parse(
      "graph k(x: f32[4,3], y: f32[20003,3]) {\n"
      "  xe = reshape x shape=[4,1,3]\n"
      "  ye = reshape y shape=[1,20003,3]\n"
      "  diff = sub xe ye\n"
      "  sq = mul diff diff\n"
      "  d2 = reduce_sum sq axes=[2]\n"
      "  val, idx = topk d2 k=7 axis=1 largest=false\n"
      "  return val, idx\n"
      "}\n");
  ASSERT_TRUE(g != NULL);
  loom_graph *chunked = NULL, *fit = NULL;
  loom_optimize_options o;
  optimize_options(&o);
  o.limit = 400 << 10;
  ASSERT_OK(loom_graph_optimize(g, &o, &chunked, NULL));
  int32_t loop = -1;
  for (int32_t i = 0; i < loom_graph_op_count(chunked) && loop < 0; i++)
    if (loom_graph_loop_get(chunked, i, NULL, NULL, NULL) == LOOM_OK) loop = i;
  ASSERT_TRUE(loop >= 0);
  int64_t piece = 0, peak = 0;
  ASSERT_OK(loom__loops_fit(chunked, 1024, &fit, &peak));
  ASSERT_OK(loom_graph_loop_get(fit, loop, NULL, NULL, &piece));
  ASSERT_TRUE(piece >= 7 && (20003 % piece == 0 || 20003 % piece >= 7));
  loom_tensor *in = NULL, *a = NULL, *b = NULL;
  ASSERT_OK(su_inputs(g, 8, &in));
  ASSERT_OK(su_run_graph(chunked, in, &a));
  ASSERT_OK(su_run_graph(fit, in, &b));
  ASSERT_EQ(su_knn_mismatches(&a[0], &a[1], &b[0], &b[1], KNN_ATOL, KNN_RTOL), 0);
  su_tensors_free(b, 2);
  su_tensors_free(a, 2);
  su_tensors_free(in, 2);
  loom_graph_destroy(fit);
  loom_graph_destroy(chunked);
  loom_graph_destroy(g);
}
