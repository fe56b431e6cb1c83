/* Cutting graphs into stages: loom_plan_split with a caller's predicate, and
 * loom_plan_split_by_memory over runners with different limits (shared/IR.md "Stages and
 * plans"). Every plan is run and compared with the whole graph's run. */
#include <stdlib.h>

#include "ir/ir.h"
#include "loom/testing.h"
#include "split_util.h"
#include "splitter/splitter.h"

/* ---- split every 5 ops with an accumulator ---------------------------------------------- */

typedef struct every_acc {
  int32_t count;   /* ops in the current stage */
  int32_t calls;   /* ops seen */
  int32_t last_op; /* the op seen last: ops come in schedule order */
  bool in_order;
} every_acc;

static bool every_5(const loom_graph *g, int32_t op, void *p) {
  every_acc *acc = p;
  acc->in_order &= op == acc->last_op + 1;
  acc->last_op = op;
  acc->calls++;
  if (acc->count == 5) {
    acc->count = 1;
    return true;
  }
  acc->count++;
  return false;
}

/* x (f32[256]) through a chain of n binary ops, each reading the last result and x. */
static loom_graph *chain(int32_t n) {
  loom_graph *g = NULL;
  if (loom_graph_create("chain", &g)) return NULL;
  int64_t dims[1] = {256};
  loom_type t;
  loom_type_make(LOOM_F32, 1, dims, &t);
  loom_value x = loom_graph_param(g, "x", &t), v = x;
  static const loom_op ops[] = {LOOM_OP_MUL, LOOM_OP_ADD, LOOM_OP_SUB, LOOM_OP_MAXIMUM};
  for (int32_t i = 0; i < n; i++) {
    v = loom_binary(g, ops[i % 4], v, x);
    char name[16];
    snprintf(name, sizeof name, "c%d", (int)i);
    loom_value_set_name(g, v, name);
  }
  loom_graph_return(g, &v, 1);
  if (loom_graph_verify(g)) {
    loom_graph_destroy(g);
    return NULL;
  }
  return g;
}

TEST(split_every_5_ops) {
  const int32_t n = 23;
  loom_graph *g = chain(n);
  ASSERT_TRUE(g != NULL);
  loom_runner runners[2] = {{"cpu0", 1 << 20}, {"cpu0", 2 << 20}};
  every_acc acc = {0, 0, -1, true};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split(g, every_5, &acc, runners, 2, &plan));
  ASSERT_EQ(acc.calls, n);
  ASSERT_TRUE(acc.in_order);
  ASSERT_EQ(loom_plan_stage_count(plan), (n + 4) / 5);
  ASSERT_PLAN_OK(plan, true);
  const loom_graph *pg = loom_plan_graph(plan);
  for (int32_t s = 0; s < loom_plan_stage_count(plan); s++) {
    loom_stage_info st;
    ASSERT_OK(loom_plan_stage(plan, s, &st));
    ASSERT_EQ(st.runner, s % 2);
    ASSERT_STREQ(st.device, "cpu0");
    ASSERT_EQ(st.limit, runners[s % 2].limit);
    ASSERT_EQ(st.n_ops, s < 4 ? 5 : 3);
    for (int32_t k = 0; k < st.n_ops; k++) ASSERT_EQ(st.ops[k], 5 * s + k);
    /* It returns its last result; it takes the previous stage's last result and x. */
    ASSERT_EQ(st.n_outputs, 1);
    char want[16];
    snprintf(want, sizeof want, "c%d", (int)(5 * s + st.n_ops - 1));
    ASSERT_STREQ(loom_value_name(pg, (loom_value){st.outputs[0]}), want);
    ASSERT_EQ(st.n_inputs, s == 0 ? 1 : 2);
    if (s > 0) {
      snprintf(want, sizeof want, "c%d", (int)(5 * s - 1));
      ASSERT_STREQ(loom_value_name(pg, (loom_value){st.inputs[0]}), want);
      ASSERT_STREQ(loom_value_name(pg, (loom_value){st.inputs[1]}), "x");
    }
    ASSERT_EQ(loom_graph_op_count(st.graph), st.n_ops);
    ASSERT_TRUE(st.estimated_peak > 0 && st.estimated_peak <= 4 * 1024);
  }
  loom_tensor *in = NULL, *whole = NULL, *split = NULL;
  ASSERT_OK(su_inputs(g, 1, &in));
  ASSERT_OK(su_run_graph(g, in, &whole));
  ASSERT_OK(su_run_plan(plan, in, &split, NULL));
  ASSERT_EQ(su_worst(&whole[0], &split[0], 0, 0), 0);
  su_tensors_free(in, 1);
  su_tensors_free(whole, 1);
  su_tensors_free(split, 1);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

static bool never(const loom_graph *g, int32_t op, void *acc) {
  return false;
}
static bool always(const loom_graph *g, int32_t op, void *acc) {
  return true;
}

TEST(split_never_and_always) {
  loom_graph *g = chain(7);
  ASSERT_TRUE(g != NULL);
  loom_plan *plan = NULL;
  /* No runners: one cpu0 runner with no limit. */
  ASSERT_OK(loom_plan_split(g, never, NULL, NULL, 0, &plan));
  ASSERT_EQ(loom_plan_stage_count(plan), 1);
  ASSERT_PLAN_OK(plan, false);
  loom_stage_info st;
  ASSERT_OK(loom_plan_stage(plan, 0, &st));
  ASSERT_EQ(st.limit, 0);
  ASSERT_EQ(st.n_ops, 7);
  loom_plan_destroy(plan);
  loom_runner r = {"cpu0", 1 << 20};
  ASSERT_OK(loom_plan_split(g, always, NULL, &r, 1, &plan));
  ASSERT_EQ(loom_plan_stage_count(plan), 7);
  ASSERT_PLAN_OK(plan, true);
  ASSERT_STATUS(loom_plan_stage(plan, 7, &st), LOOM_ERR_INVALID_ARGUMENT);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* ---- what crosses stages ---------------------------------------------------------------- */

/* Sources and cheap views are recomputed by each stage that reads them, never passed: xb
 * (a broadcast of a 16-byte input to 16 KB) and f (a fill) reach every stage as x and as a
 * copy of the fill. The first stage makes only those two, so it has nothing to run. */
static const char *remat_lir =
    "graph remat(x: f32[4], y: f32[1000,4]) {\n"
    "  xb = broadcast x shape=[1000,4]\n"
    "  f  = fill value=2 : f32[1000,4]\n"
    "  a  = add y xb\n"
    "  b  = mul a f\n"
    "  c  = sub b xb\n"
    "  two = constant 2 : f32[]\n"
    "  d  = mul c two\n"
    "  e  = add d xb\n"
    "  s  = slice y start=[0,0] stop=[10,4]\n"
    "  g  = mul e two\n"
    "  h  = reduce_sum s axes=[0]\n"
    "  return g, x, h, f\n"
    "}\n";

static bool every_2(const loom_graph *g, int32_t op, void *p) {
  int32_t *n = p;
  return (*n)++ % 2 == 0;
}

TEST(split_recomputes_sources_and_views) {
  loom_graph *g = su_parse(remat_lir);
  ASSERT_TRUE(g != NULL);
  int32_t count = 0;
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split(g, every_2, &count, NULL, 0, &plan));
  ASSERT_EQ(loom_plan_stage_count(plan), 6);
  ASSERT_PLAN_OK(plan, false);
  const loom_graph *pg = loom_plan_graph(plan);
  int32_t xb = loom_graph_find(pg, "xb").id, f = loom_graph_find(pg, "f").id,
          two = loom_graph_find(pg, "two").id;
  for (int32_t s = 0; s < loom_plan_stage_count(plan); s++) {
    loom_stage_info st;
    ASSERT_OK(loom_plan_stage(plan, s, &st));
    for (int32_t k = 0; k < st.n_inputs; k++) {
      ASSERT_TRUE(st.inputs[k] != xb);
      ASSERT_TRUE(st.inputs[k] != f);
      ASSERT_TRUE(st.inputs[k] != two);
    }
  }
  /* Stage 1 (xb, f): f is returned by the graph, so stage 1 returns it. */
  loom_stage_info st;
  ASSERT_OK(loom_plan_stage(plan, 0, &st));
  ASSERT_EQ(st.n_outputs, 1);
  ASSERT_EQ(st.outputs[0], f);
  /* Stage 2 (a, b) reads x and y, not xb: 16 + 16000 bytes of inputs. */
  ASSERT_OK(loom_plan_stage(plan, 1, &st));
  ASSERT_EQ(st.n_inputs, 2);
  ASSERT_STREQ(loom_value_name(pg, (loom_value){st.inputs[0]}), "y");
  ASSERT_STREQ(loom_value_name(pg, (loom_value){st.inputs[1]}), "x");
  /* The slice of y crosses as itself (160 bytes), not as y. */
  ASSERT_OK(loom_plan_stage(plan, 5, &st));
  ASSERT_EQ(st.n_inputs, 1);
  ASSERT_STREQ(loom_value_name(pg, (loom_value){st.inputs[0]}), "s");
  loom_tensor *in = NULL, *whole = NULL, *split = NULL;
  ASSERT_OK(su_inputs(g, 3, &in));
  ASSERT_OK(su_run_graph(g, in, &whole));
  ASSERT_OK(su_run_plan(plan, in, &split, NULL));
  for (int32_t i = 0; i < 4; i++) ASSERT_EQ(su_worst(&whole[i], &split[i], 0, 0), 0);
  su_tensors_free(in, 2);
  su_tensors_free(whole, 4);
  su_tensors_free(split, 4);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* A stage whose results are all recomputed later has nothing to run. */
TEST(split_stage_with_nothing_to_run) {
  loom_graph *g = su_parse(
      "graph v(x: f32[8]) {\n  r = reshape x shape=[2,4]\n  t = transpose r perm=[1,0]\n"
      "  e = exp t\n  return e\n}\n");
  ASSERT_TRUE(g != NULL);
  int32_t count = 0;
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split(g, every_2, &count, NULL, 0, &plan));
  ASSERT_EQ(loom_plan_stage_count(plan), 2);
  ASSERT_PLAN_OK(plan, false);
  loom_stage_info st;
  ASSERT_OK(loom_plan_stage(plan, 0, &st));
  ASSERT_TRUE(st.graph == NULL);
  ASSERT_EQ(st.n_ops, 2);
  ASSERT_EQ(st.estimated_peak, 0);
  ASSERT_OK(loom_plan_stage(plan, 1, &st));
  ASSERT_EQ(st.n_inputs, 1);
  ASSERT_EQ(loom_graph_op_count(st.graph), 3);
  loom_tensor *in = NULL, *whole = NULL, *split = NULL;
  ASSERT_OK(su_inputs(g, 5, &in));
  ASSERT_OK(su_run_graph(g, in, &whole));
  loom_plan_stats stats = {0};
  ASSERT_OK(su_run_plan(plan, in, &split, &stats));
  ASSERT_EQ(stats.n_stages, 2);
  ASSERT_EQ(stats.stages[0].peak_bytes, 0);
  ASSERT_EQ(su_worst(&whole[0], &split[0], 0, 0), 0);
  loom_plan_stats_deinit(&stats);
  su_tensors_free(in, 1);
  su_tensors_free(whole, 1);
  su_tensors_free(split, 1);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* ---- split_by_memory over three runners ------------------------------------------------- */

enum { PYR_N = 16384 }; /* 64 KiB per f32 value */

/* First n values v_i = exp(x * c_i) are made, all kept, then summed one by one, with the
 * running sum shifted by its maximum every 8 terms: memory grows through the first half
 * and shrinks through the second, so stages of both kinds fill their runners. */
static loom_graph *pyramid(int32_t n) {
  loom_graph *g = NULL;
  if (loom_graph_create("pyramid", &g)) return NULL;
  int64_t dims[1] = {PYR_N}, axes[1] = {0};
  loom_type t;
  loom_type_make(LOOM_F32, 1, dims, &t);
  loom_value x = loom_graph_param(g, "x", &t), v[64];
  for (int32_t i = 0; i < n && i < 64; i++) {
    loom_value c = loom_scalar_f64(g, LOOM_F32, 0.01 * (i + 1));
    v[i] = loom_unary(g, LOOM_OP_EXP, loom_binary(g, LOOM_OP_MUL, x, c));
  }
  loom_value s = v[0], m = s;
  for (int32_t i = 1; i < n && i < 64; i++) {
    s = loom_binary(g, LOOM_OP_ADD, s, v[i]);
    if (i % 8 == 0) {
      m = loom_reduce(g, LOOM_OP_REDUCE_MAX, s, 1, axes, false);
      s = loom_binary(g, LOOM_OP_SUB, s, m);
    }
  }
  loom_value outs[2] = {s, m};
  loom_graph_return(g, outs, 2);
  if (loom_graph_verify(g)) {
    loom_graph_destroy(g);
    return NULL;
  }
  return g;
}

/* The stage could not have taken its next op: that would pass its runner's limit. */
static bool stage_is_full(const loom_plan *plan, int32_t s) {
  loom_stage_info st;
  loom_plan_stage(plan, s, &st);
  loom__split_info si;
  if (loom__split_info_init(&si, loom_plan_graph(plan))) return false;
  loom__stage bigger;
  bool full = false;
  if (!loom__stage_build(&si, st.ops[0], st.ops[0] + st.n_ops + 1, st.runner, &bigger)) {
    full = bigger.graph && bigger.estimated_peak > st.limit;
    loom__stage_deinit(&bigger);
  }
  loom__split_info_deinit(&si);
  return full;
}

TEST(split_by_memory_three_runners) {
  loom_graph *g = pyramid(40);
  ASSERT_TRUE(g != NULL);
  loom_runner runners[3] = {{"cpu0", 1 << 20}, {"cpu0", 512 << 10}, {"cpu0", 768 << 10}};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split_by_memory(g, runners, 3, &plan));
  int32_t n = loom_plan_stage_count(plan);
  ASSERT_TRUE(n >= 6);
  ASSERT_PLAN_OK(plan, true);
  /* Nothing needed chunking: the plan cuts the graph as given. */
  ASSERT_EQ(loom_graph_op_count(loom_plan_graph(plan)), loom_graph_op_count(g));
  for (int32_t s = 0; s < n; s++) {
    loom_stage_info st;
    ASSERT_OK(loom_plan_stage(plan, s, &st));
    ASSERT_EQ(st.runner, s % 3); /* back to the first after the last */
    ASSERT_EQ(st.limit, runners[s % 3].limit);
    ASSERT_TRUE(st.estimated_peak <= st.limit);
    if (s + 1 < n) ASSERT_TRUE(stage_is_full(plan, s));
  }
  loom_tensor *in = NULL, *whole = NULL, *split = NULL;
  ASSERT_OK(su_inputs(g, 7, &in));
  ASSERT_OK(su_run_graph(g, in, &whole));
  loom_plan_stats stats = {0};
  ASSERT_OK(su_run_plan(plan, in, &split, &stats));
  ASSERT_EQ(su_worst(&whole[0], &split[0], 0, 0), 0);
  ASSERT_EQ(su_worst(&whole[1], &split[1], 0, 0), 0);
  /* Measured peaks: at or under each limit, and within 10% of the estimates. */
  ASSERT_EQ(stats.n_stages, n);
  int64_t top = 0;
  for (int32_t s = 0; s < n; s++) {
    const loom_stage_stats *ss = &stats.stages[s];
    ASSERT_EQ(ss->limit_bytes, runners[s % 3].limit);
    ASSERT_TRUE(ss->peak_bytes <= ss->limit_bytes);
    ASSERT_TRUE(ss->peak_bytes > 0);
    ASSERT_NEAR((double)ss->peak_bytes, (double)ss->estimated_peak_bytes,
                0.1 * (double)ss->estimated_peak_bytes);
    top = ss->peak_bytes > top ? ss->peak_bytes : top;
  }
  ASSERT_EQ(stats.peak_bytes, top);
  loom_plan_stats_deinit(&stats);
  su_tensors_free(in, 1);
  su_tensors_free(whole, 2);
  su_tensors_free(split, 2);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* A runner too small for an op on its own is passed over (it gets no stage there). */
TEST(split_by_memory_skips_a_runner_too_small) {
  loom_graph *g = pyramid(12);
  ASSERT_TRUE(g != NULL);
  loom_runner runners[2] = {{"cpu0", 600 << 10}, {"cpu0", 100 << 10}};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split_by_memory(g, runners, 2, &plan));
  ASSERT_PLAN_OK(plan, true);
  for (int32_t s = 0; s < loom_plan_stage_count(plan); s++) {
    loom_stage_info st;
    ASSERT_OK(loom_plan_stage(plan, s, &st));
    ASSERT_EQ(st.runner, 0);
  }
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

TEST(split_by_memory_one_stage_when_it_fits) {
  loom_graph *g = pyramid(10);
  ASSERT_TRUE(g != NULL);
  loom_runner r = {"cpu0", 64 << 20};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split_by_memory(g, &r, 1, &plan));
  ASSERT_EQ(loom_plan_stage_count(plan), 1);
  ASSERT_PLAN_OK(plan, true);
  loom_estimate e;
  ASSERT_OK(loom_graph_estimate(g, NULL, &e));
  loom_stage_info st;
  ASSERT_OK(loom_plan_stage(plan, 0, &st));
  ASSERT_EQ(st.estimated_peak, e.peak_bytes);
  loom_estimate_deinit(&e);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* The whole graph holds 176 KiB at once (no schedule or chunking avoids it), but cut into
 * stages each fits 128 KiB; complex values cross the stages. */
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

TEST(split_by_memory_where_the_whole_graph_does_not_fit) {
  loom_graph *g = su_parse(ffts_lir);
  ASSERT_TRUE(g != NULL);
  loom_runner r = {"cpu0", 128 << 10};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split_by_memory(g, &r, 1, &plan));
  ASSERT_EQ(loom_plan_stage_count(plan), 3);
  ASSERT_PLAN_OK(plan, true);
  loom_tensor *in = NULL, *whole = NULL, *split = NULL;
  ASSERT_OK(su_inputs(g, 13, &in));
  ASSERT_OK(su_run_graph(g, in, &whole));
  loom_plan_stats stats = {0};
  ASSERT_OK(su_run_plan(plan, in, &split, &stats));
  ASSERT_EQ(su_worst(&whole[0], &split[0], 0, 0), 0);
  for (int32_t s = 0; s < stats.n_stages; s++) {
    ASSERT_TRUE(stats.stages[s].peak_bytes <= r.limit);
    ASSERT_EQ(stats.stages[s].peak_bytes, stats.stages[s].estimated_peak_bytes);
  }
  loom_plan_stats_deinit(&stats);
  su_tensors_free(in, 1);
  su_tensors_free(whole, 1);
  su_tensors_free(split, 1);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* ---- ops too big for every runner --------------------------------------------------------- */

/* Unrewritten kNN: the broadcast difference is 2.4 MB, more than any runner; split_by_memory
 * chunks the graph to the largest limit and cuts that. */
static const char *knn_lir =
    "graph knn(x: f32[500,3], y: f32[400,3]) {\n"
    "  xe = reshape x shape=[500,1,3]\n"
    "  ye = reshape y shape=[1,400,3]\n"
    "  diff = sub xe ye\n"
    "  sq = mul diff diff\n"
    "  d2 = reduce_sum sq axes=[2]\n"
    "  val, idx = topk d2 k=5 axis=1 largest=false\n"
    "  return val, idx\n"
    "}\n";

TEST(split_by_memory_chunks_an_op_over_every_limit) {
  loom_graph *g = su_parse(knn_lir);
  ASSERT_TRUE(g != NULL);
  loom_runner runners[2] = {{"cpu0", 256 << 10}, {"cpu0", 192 << 10}};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split_by_memory(g, runners, 2, &plan));
  ASSERT_PLAN_OK(plan, true);
  /* chunked into one loop: the plan's graph is no larger than the graph */
  const loom_graph *pg = loom_plan_graph(plan);
  int32_t loops = 0;
  for (int32_t o = 0; o < loom_graph_op_count(pg); o++) {
    loom_op_info info;
    ASSERT_OK(loom_graph_op_info_get(pg, o, &info));
    loops += info.kind == LOOM_OP_LOOP;
  }
  ASSERT_EQ(loops, 1);
  ASSERT_TRUE(loom_graph_op_count(pg) <= loom_graph_op_count(g));
  loom_tensor *in = NULL, *whole = NULL, *split = NULL;
  ASSERT_OK(su_inputs(g, 11, &in));
  ASSERT_OK(su_run_graph(g, in, &whole));
  loom_plan_stats stats = {0};
  ASSERT_OK(su_run_plan(plan, in, &split, &stats));
  ASSERT_TRUE(su_worst(&whole[0], &split[0], 1e-6, 1e-4) <= 1);
  ASSERT_EQ(su_worst(&whole[1], &split[1], 0, 0), 0);
  for (int32_t s = 0; s < stats.n_stages; s++) {
    ASSERT_TRUE(stats.stages[s].peak_bytes <= stats.stages[s].limit_bytes);
    ASSERT_NEAR((double)stats.stages[s].peak_bytes, (double)stats.stages[s].estimated_peak_bytes,
                0.1 * (double)stats.stages[s].estimated_peak_bytes);
  }
  loom_plan_stats_deinit(&stats);
  su_tensors_free(in, 2);
  su_tensors_free(whole, 2);
  su_tensors_free(split, 2);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* An FFT along its only axis cannot be cut into pieces: 32 KiB in, 32 KiB out and 64 KiB of
 * temporaries pass every limit, so the error names it, its need and the largest limit. */
TEST(split_by_memory_op_that_fits_no_runner) {
  loom_graph *g = su_parse("graph spec(x: c64[4096]) {\n  f = fft x axis=0\n  return f\n}\n");
  ASSERT_TRUE(g != NULL);
  loom_runner runners[3] = {{"cpu0", 64 << 10}, {"cpu0", 100 << 10}, {"cpu0", 48 << 10}};
  int64_t live = loom_testing_live_allocations();
  loom_plan *plan = (loom_plan *)&live;
  ASSERT_STATUS(loom_plan_split_by_memory(g, runners, 3, &plan), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_TRUE(plan == NULL);
  ASSERT_CONTAINS(loom_last_error(),
                  "split_by_memory: fft 'f' needs 128.00 KiB, the largest limit is 100.00 KiB");
  ASSERT_EQ(loom_testing_live_allocations(), live);
  loom_graph_destroy(g);
}

/* An input larger than every limit, read by an op that cannot take it in pieces (an FFT along
 * its only axis), is held whole: refused, naming it. */
TEST(split_by_memory_input_larger_than_every_limit) {
  loom_graph *g = su_parse("graph big(x: f32[65536]) {\n  f = rfft x axis=0\n  return f\n}\n");
  ASSERT_TRUE(g != NULL);
  loom_runner runners[2] = {{"cpu0", 64 << 10}, {"cpu0", 200 << 10}};
  loom_plan *plan = NULL;
  ASSERT_STATUS(loom_plan_split_by_memory(g, runners, 2, &plan), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_CONTAINS(loom_last_error(),
                  "split_by_memory: input 'x' (f32[65536]) needs 256.00 KiB, the largest "
                  "limit is 200.00 KiB (an input is held whole)");
  loom_graph_destroy(g);
}

/* The same input read elementwise is streamed (issue 13): a loop brings in its pieces and
 * sends out its result's, so the plan fits the 64 KiB and 200 KiB runners and gives exp(x). */
TEST(split_by_memory_streams_an_input_larger_than_every_limit) {
  loom_graph *g = su_parse("graph big(x: f32[65536]) {\n  e = exp x\n  return e\n}\n");
  ASSERT_TRUE(g != NULL);
  loom_runner runners[2] = {{"cpu0", 64 << 10}, {"cpu0", 200 << 10}};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split_by_memory(g, runners, 2, &plan));
  ASSERT_PLAN_OK(plan, true);
  loom_tensor *in = NULL, *whole = NULL, *split = NULL;
  ASSERT_OK(su_inputs(g, 3, &in));
  ASSERT_OK(su_run_graph(g, in, &whole));
  loom_plan_stats stats = {0};
  ASSERT_OK(su_run_plan(plan, in, &split, &stats));
  ASSERT_EQ(su_worst(&whole[0], &split[0], 0, 0), 0);
  for (int32_t s = 0; s < stats.n_stages; s++)
    ASSERT_TRUE(stats.stages[s].peak_bytes <= stats.stages[s].limit_bytes);
  loom_plan_stats_deinit(&stats);
  su_tensors_free(in, 1);
  su_tensors_free(whole, 1);
  su_tensors_free(split, 1);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

TEST(split_bad_arguments) {
  loom_graph *g = chain(3);
  ASSERT_TRUE(g != NULL);
  loom_plan *plan = NULL;
  loom_runner zero = {"cpu0", 0}, nameless = {"", 1024};
  ASSERT_STATUS(loom_plan_split_by_memory(NULL, &zero, 1, &plan), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_plan_split_by_memory(g, NULL, 0, &plan), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_plan_split_by_memory(g, &zero, 1, &plan), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "limit must be more than 0 bytes");
  ASSERT_STATUS(loom_plan_split_by_memory(g, &nameless, 1, &plan), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_plan_split_by_memory(g, &zero, 1, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_plan_split(g, NULL, NULL, NULL, 0, &plan), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(plan == NULL);
  loom_graph *unfinished = NULL;
  ASSERT_OK(loom_graph_create("u", &unfinished));
  ASSERT_STATUS(loom_plan_split(unfinished, never, NULL, NULL, 0, &plan), LOOM_ERR_INVALID_ARGUMENT);
  loom_graph_destroy(unfinished);
  loom_plan_destroy(NULL);
  ASSERT_EQ(loom_plan_stage_count(NULL), 0);
  ASSERT_TRUE(loom_plan_graph(NULL) == NULL);
  loom_graph_destroy(g);
}

/* Every allocation failure in split_by_memory is reported and frees what it took. */
TEST(split_by_memory_allocation_failures) {
  loom_graph *g = pyramid(12);
  ASSERT_TRUE(g != NULL);
  loom_runner runners[2] = {{"cpu0", 400 << 10}, {"cpu0", 300 << 10}};
  loom_test_sweep sw;
  SWEEP_ALLOCATIONS(&sw, 0, 100000) {
    loom_plan *plan = NULL;
    if (SWEEP_RUN(&sw, loom_plan_split_by_memory(g, runners, 2, &plan))) ASSERT_TRUE(plan == NULL);
    loom_plan_destroy(plan);
  }
  loom_graph_destroy(g);
}
