/* split_by_memory's running estimate against the estimator: on random graphs of views,
 * sources, broadcasts, reductions and copies, for random runs of ops, the running estimate
 * of a stage is never below the estimated peak of the stage graph the builder makes (so a
 * stage it accepts fits), and it equals it in (nearly) every case (so stages are not cut
 * short). */
#include <stdlib.h>

#include "ir/ir.h"
#include "split_util.h"
#include "splitter/splitter.h"

typedef struct rng {
  uint64_t s;
} rng;

static uint32_t rnd(rng *r, uint32_t n) {
  r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)((r->s >> 33) % n);
}

typedef struct pools {
  loom_value a[256]; /* f32[64,32] */
  int32_t na;
  loom_value b[256]; /* f32[32] */
  int32_t nb;
} pools;

static loom_value pick_a(rng *r, const pools *p) {
  return p->a[rnd(r, (uint32_t)p->na)];
}
static loom_value pick_b(rng *r, const pools *p) {
  return p->b[rnd(r, (uint32_t)p->nb)];
}

/* One random op appended to g; its result joins a pool. */
static void random_op(loom_graph *g, rng *r, pools *p) {
  static const loom_op bin[] = {LOOM_OP_ADD, LOOM_OP_MUL, LOOM_OP_SUB, LOOM_OP_MAXIMUM};
  int64_t shape_a[2] = {64, 32}, shape_t[2] = {32, 64}, axes0[1] = {0};
  loom_type ta, tb;
  loom_type_make(LOOM_F32, 2, shape_a, &ta);
  loom_type_make(LOOM_F32, 1, shape_a + 1, &tb);
  loom_value v;
  switch (rnd(r, 11)) {
    case 0:
      p->a[p->na++] = loom_binary(g, bin[rnd(r, 4)], pick_a(r, p), pick_a(r, p));
      return;
    case 1:
      p->a[p->na++] = loom_binary(g, bin[rnd(r, 4)], pick_a(r, p), pick_b(r, p));
      return;
    case 2:
      p->b[p->nb++] = loom_binary(g, bin[rnd(r, 4)], pick_b(r, p), pick_b(r, p));
      return;
    case 3:
      p->a[p->na++] = loom_unary(g, rnd(r, 2) ? LOOM_OP_EXP : LOOM_OP_NEG, pick_a(r, p));
      return;
    case 4:
      p->a[p->na++] = loom_broadcast(g, pick_b(r, p), 2, shape_a);
      return;
    case 5: /* reshape (a view), transpose (a view), reshape again (a copy) */
      v = loom_reshape(g, pick_a(r, p), 2, shape_t);
      v = loom_transpose(g, v, 2, (int64_t[]){1, 0});
      p->a[p->na++] = rnd(r, 2) ? v : loom_reshape(g, v, 2, shape_a);
      return;
    case 6:
      p->a[p->na++] = loom_fill(g, &ta, 0.5);
      return;
    case 7:
      if (rnd(r, 2)) (void)loom_scalar_f64(g, LOOM_F32, 1.5); /* dead: nobody reads it */
      p->b[p->nb++] = loom_binary(g, LOOM_OP_MUL, pick_b(r, p), loom_scalar_f64(g, LOOM_F32, 2.0));
      return;
    case 8:
      p->b[p->nb++] = loom_reduce(g, LOOM_OP_REDUCE_SUM, pick_a(r, p), 1, axes0, false);
      return;
    case 9: { /* two slices (views) joined by a concat (a copy) */
      loom_value s1 = loom_slice(g, pick_a(r, p), 2, (int64_t[]){0, 0}, (int64_t[]){32, 32}, NULL);
      loom_value s2 = loom_slice(g, pick_a(r, p), 2, (int64_t[]){32, 0}, (int64_t[]){64, 32}, NULL);
      p->a[p->na++] = loom_concat(g, (loom_value[]){s1, s2}, 2, 0);
      return;
    }
    default:
      p->b[p->nb++] = loom_constant(g, &tb, NULL);
      return;
  }
}

static loom_graph *random_graph(rng *r, int32_t n_ops) {
  loom_graph *g = NULL;
  if (loom_graph_create("random", &g)) return NULL;
  int64_t shape_a[2] = {64, 32};
  loom_type ta, tb;
  loom_type_make(LOOM_F32, 2, shape_a, &ta);
  loom_type_make(LOOM_F32, 1, shape_a + 1, &tb);
  pools p = {.na = 0, .nb = 0};
  p.a[p.na++] = loom_graph_param(g, "x", &ta);
  p.a[p.na++] = loom_graph_param(g, "y", &ta);
  p.b[p.nb++] = loom_graph_param(g, "z", &tb);
  while (loom_graph_op_count(g) < n_ops && p.na < 200 && p.nb < 200) random_op(g, r, &p);
  /* Return the last value and up to 11 others: held to the end, they make the graph's
   * memory grow, so that limits under its peak need several stages. */
  loom_value outs[12] = {p.a[p.na - 1]};
  int32_t n_outs = 1 + (int32_t)rnd(r, 12);
  for (int32_t i = 1; i < n_outs; i++) outs[i] = rnd(r, 4) ? pick_a(r, &p) : pick_b(r, &p);
  loom_graph_return(g, outs, n_outs);
  if (loom_graph_verify(g)) {
    loom_test_fail(__FILE__, __LINE__, "random graph: %s", loom_last_error());
    loom_graph_destroy(g);
    return NULL;
  }
  return g;
}

TEST(model_matches_the_estimator_on_random_graphs) {
  rng r = {12345};
  int32_t cases = 0, equal = 0;
  for (int32_t trial = 0; trial < 150; trial++) {
    loom_graph *g = random_graph(&r, 12 + (int32_t)rnd(&r, 40));
    ASSERT_TRUE(g != NULL);
    loom__split_info si;
    ASSERT_OK(loom__split_info_init(&si, g));
    int32_t n = loom_graph_op_count(g);
    for (int32_t k = 0; k < 12; k++) {
      int32_t first = (int32_t)rnd(&r, (uint32_t)n),
              end = first + 1 + (int32_t)rnd(&r, (uint32_t)(n - first));
      loom__stage st;
      int64_t model = 0;
      ASSERT_OK(loom__stage_build(&si, first, end, 0, &st));
      ASSERT_OK(loom__split_model_peak(&si, first, end, &model));
      if (st.graph) {
        cases++;
        equal += model == st.estimated_peak;
        if (model < st.estimated_peak) {
          loom_graph_print(g, stdout);
          loom_graph_print(st.graph, stdout);
          loom_test_fail(__FILE__, __LINE__,
                         "trial %d, ops %d..%d: running estimate %lld below the estimate %lld", trial, first,
                         end - 1, (long long)model, (long long)st.estimated_peak);
          loom__stage_deinit(&st);
          loom__split_info_deinit(&si);
          loom_graph_destroy(g);
          return;
        }
      }
      loom__stage_deinit(&st);
    }
    loom__split_info_deinit(&si);
    loom_graph_destroy(g);
  }
  printf("    %d of %d stages estimated exactly\n", equal, cases);
  ASSERT_TRUE(cases > 500);
  ASSERT_TRUE(equal >= cases * 95 / 100);
}

/* split_by_memory on random graphs and limits: every stage fits, the measured peaks equal the
 * estimates, and the results equal the whole graph's. */
TEST(split_by_memory_random_graphs_run_exactly) {
  rng r = {777};
  int32_t stages = 0;
  for (int32_t trial = 0; trial < 40; trial++) {
    loom_graph *g = random_graph(&r, 40 + (int32_t)rnd(&r, 60));
    ASSERT_TRUE(g != NULL);
    /* Limits from a quarter of the graph's peak to under 60% of it, and never so low that one
     * op with its operands (at most 3 values of 8 KiB, and a reduction's temporary) could
     * not fit. */
    loom_estimate e;
    ASSERT_OK(loom_graph_estimate(g, NULL, &e));
    int64_t peak = e.peak_bytes;
    loom_estimate_deinit(&e);
    loom_runner runners[3];
    int32_t n_runners = 1 + (int32_t)rnd(&r, 3);
    for (int32_t i = 0; i < n_runners; i++) {
      snprintf(runners[i].device, sizeof runners[i].device, "cpu0");
      runners[i].limit = peak / 4 + (int64_t)rnd(&r, (uint32_t)(peak / 3));
      if (runners[i].limit < (32 << 10)) runners[i].limit = 32 << 10;
    }
    loom_plan *plan = NULL;
    ASSERT_OK(loom_plan_split_by_memory(g, runners, n_runners, &plan));
    ASSERT_PLAN_OK(plan, true);
    stages += loom_plan_stage_count(plan);
    loom_tensor *in = NULL, *whole = NULL, *split = NULL;
    int32_t n_out = loom_graph_output_count(g);
    ASSERT_OK(su_inputs(g, (uint64_t)trial, &in));
    ASSERT_OK(su_run_graph(g, in, &whole));
    loom_plan_stats stats = {0};
    ASSERT_OK(su_run_plan(plan, in, &split, &stats));
    for (int32_t i = 0; i < n_out; i++) ASSERT_EQ(su_worst(&whole[i], &split[i], 0, 0), 0);
    for (int32_t s = 0; s < stats.n_stages; s++) {
      ASSERT_TRUE(stats.stages[s].peak_bytes <= stats.stages[s].limit_bytes);
      ASSERT_EQ(stats.stages[s].peak_bytes, stats.stages[s].estimated_peak_bytes);
    }
    loom_plan_stats_deinit(&stats);
    su_tensors_free(in, 3);
    su_tensors_free(whole, n_out);
    su_tensors_free(split, n_out);
    loom_plan_destroy(plan);
    loom_graph_destroy(g);
  }
  printf("    40 graphs cut into %d stages\n", stages);
  ASSERT_TRUE(stages >= 80);
}
