/* The estimator (IR.md, "Memory model") on graphs computed by hand: per step logical and
 * physical output bytes, temporaries, what is live across the step and its peak; the totals;
 * and the same figures measured by the executor's allocator. */
#include <stdlib.h>

#include "mem_util.h"

typedef struct step_want {
  int64_t logical, physical, temporary, live_before;
} step_want;

/* Compares every step of e (graph order) with want[]. */
static bool check_steps(const loom_estimate *e, const step_want *want, int32_t n, const char *file,
                        int line) {
  if (e->n_steps != n) {
    loom_test_fail(file, line, "%d steps, expected %d", (int)e->n_steps, (int)n);
    return false;
  }
  for (int32_t p = 0; p < n; p++) {
    const loom_estimate_step *s = &e->steps[p];
    const step_want *w = &want[p];
    int64_t peak = w->live_before + w->physical + w->temporary;
    if (s->op != p || s->output_logical != w->logical || s->output_physical != w->physical ||
        s->temporary != w->temporary || s->live_before != w->live_before || s->peak != peak) {
      loom_test_fail(
          file, line,
          "step %d (op %d): logical %lld physical %lld temporary %lld live %lld peak %lld; by hand "
          "%lld %lld %lld %lld %lld",
          (int)p, (int)s->op, (long long)s->output_logical, (long long)s->output_physical,
          (long long)s->temporary, (long long)s->live_before, (long long)s->peak, (long long)w->logical,
          (long long)w->physical, (long long)w->temporary, (long long)w->live_before, (long long)peak);
      return false;
    }
  }
  return true;
}
#define CHECK_STEPS(e, want, n)                                     \
  do {                                                              \
    if (!check_steps((e), (want), (n), __FILE__, __LINE__)) return; \
  } while (0)

/* Runs g whole under a generous limit and checks that the allocator's peak is the estimate. */
static bool measured_equals_estimate(const loom_graph *g, int64_t est_peak, const char *file, int line) {
  loom_tensor *in = NULL, *out = NULL;
  mem_run_info info;
  static const char *const none[] = {LOOM_REWRITE_NAMES};
  if (mem_inputs(g, 42, -1.0, 1.0, &in)) {
    loom_test_fail(file, line, "inputs: %s", loom_last_error());
    return false;
  }
  /* Every rewrite off: the plan runs the graph as written, in one stage. */
  bool ok =
      mem_run_under(g, 64 * MIB, none, (int32_t)(sizeof none / sizeof none[0]), in, &out, &info, file, line);
  if (ok && (info.n_stages != 1 || info.peak != est_peak || info.est_peak != est_peak)) {
    loom_test_fail(file, line, "%d stage(s), estimated %lld, measured %lld, by hand %lld", (int)info.n_stages,
                   (long long)info.est_peak, (long long)info.peak, (long long)est_peak);
    ok = false;
  }
  mem_tensors_free(out, loom_graph_output_count(g));
  mem_tensors_free(in, loom_graph_param_count(g));
  return ok;
}
#define MEASURED_EQUALS_ESTIMATE(g, peak)                                   \
  do {                                                                      \
    if (!measured_equals_estimate((g), (peak), __FILE__, __LINE__)) return; \
  } while (0)

/* ---- 8. the chain dot -> add -> sigmoid -------------------------------------------------- */

static const char *chain_text =
    "graph chain(a: f32[64,32], b: f32[32,16], c: f32[16]) {\n"
    "  d = dot a b                                : f32[64,16]\n"
    "  e = add d c\n"
    "  s = sigmoid e\n"
    "  return s\n"
    "}\n";

/* a 8192 B, b 2048 B, c 64 B; d, e, s 4096 B each.
 *   dot:     a, b, c held (inputs, from the start to their last use) = 10304;
 *            output 4096 + temporary 1x its output 4096            -> peak 18496
 *   add:     d 4096 + c 64 = 4160; output 4096, elementwise 0      -> 8256
 *   sigmoid: e 4096; output 4096                                   -> 8192
 * total = 3 x 4096 physical + 4096 temporary = 16384. */
TEST(estimate_chain_dot_add_sigmoid_by_hand) {
  loom_graph *g = MEM_PARSE(chain_text);
  ASSERT_TRUE(g != NULL);
  loom_estimate e;
  ASSERT_OK(loom_graph_estimate(g, NULL, &e));
  static const step_want want[] = {
      {4096, 4096, 4096, 10304},
      {4096, 4096, 0, 4160},
      {4096, 4096, 0, 4096},
  };
  CHECK_STEPS(&e, want, 3);
  ASSERT_EQ(e.input_bytes, 10304);
  ASSERT_EQ(e.logical_bytes, 12288);
  ASSERT_EQ(e.physical_bytes, 12288);
  ASSERT_EQ(e.temporary_bytes, 4096);
  ASSERT_EQ(e.total_bytes, 16384);
  ASSERT_EQ(e.peak_bytes, 18496);
  ASSERT_EQ(e.peak_step, 0);
  loom_estimate_deinit(&e);
  MEASURED_EQUALS_ESTIMATE(g, 18496);
  loom_graph_destroy(g);
}

/* The same chain returning d too: an output lives until the end, so sigmoid's step holds
 * d and e (8192) under its output (12288); the peak is still the dot's. */
TEST(estimate_chain_outputs_live_to_the_end) {
  loom_graph *g = MEM_PARSE(
      "graph chain2(a: f32[64,32], b: f32[32,16], c: f32[16]) {\n"
      "  d = dot a b\n  e = add d c\n  s = sigmoid e\n  return s, d\n}\n");
  ASSERT_TRUE(g != NULL);
  loom_estimate e;
  ASSERT_OK(loom_graph_estimate(g, NULL, &e));
  static const step_want want[] = {
      {4096, 4096, 4096, 10304},
      {4096, 4096, 0, 4160},
      {4096, 4096, 0, 8192},
  };
  CHECK_STEPS(&e, want, 3);
  ASSERT_EQ(e.total_bytes, 16384);
  ASSERT_EQ(e.peak_bytes, 18496);
  loom_estimate_deinit(&e);
  MEASURED_EQUALS_ESTIMATE(g, 18496);
  loom_graph_destroy(g);
}

/* ---- views and broadcasts ------------------------------------------------------------------ */

/* x 20000 B, y 200 B. Views own nothing and keep their base alive while they live: t (a
 * transpose of x) holds x until neg reads t at step 4; b (a broadcast of e) holds e until
 * add reads b. fill is a view too: 20000 logical, 0 physical.
 *   0 t = transpose x   view                 live x + y = 20200            peak 20200
 *   1 e = exp y         200                  x + y = 20200                 peak 20400
 *   2 b = broadcast e   view, 20000 logical  x + e = 20200 (y died at 1)   peak 20200
 *   3 s = add x b       20000                x + e = 20200                 peak 40200
 *   4 w = neg t         20000                x (via t) + s = 40000         peak 60000
 *   5 f = fill          view, 20000 logical  s + w = 40000                 peak 40000
 *   6 z = mul w f       20000                s + w = 40000                 peak 60000 */
static const char *views_text =
    "graph views(x: f32[100,50], y: f32[50]) {\n"
    "  t = transpose x perm=[1,0]                 : f32[50,100]\n"
    "  e = exp y                                  : f32[50]\n"
    "  b = broadcast e shape=[100,50]             : f32[100,50]\n"
    "  s = add x b                                : f32[100,50]\n"
    "  w = neg t                                  : f32[50,100]\n"
    "  f = fill value=2 : f32[50,100]\n"
    "  z = mul w f                                : f32[50,100]\n"
    "  return s, z\n"
    "}\n";

TEST(estimate_views_and_broadcasts_by_hand) {
  loom_graph *g = MEM_PARSE(views_text);
  ASSERT_TRUE(g != NULL);
  loom_estimate e;
  ASSERT_OK(loom_graph_estimate(g, NULL, &e));
  static const step_want want[] = {
      {20000, 0, 0, 20200},     {200, 200, 0, 20200}, {20000, 0, 0, 20200},     {20000, 20000, 0, 20200},
      {20000, 20000, 0, 40000}, {20000, 0, 0, 40000}, {20000, 20000, 0, 40000},
  };
  CHECK_STEPS(&e, want, 7);
  ASSERT_EQ(e.input_bytes, 20200);
  ASSERT_EQ(e.logical_bytes, 120200);
  ASSERT_EQ(e.physical_bytes, 60200);
  ASSERT_EQ(e.temporary_bytes, 0);
  ASSERT_EQ(e.total_bytes, 60200);
  ASSERT_EQ(e.peak_bytes, 60000);
  ASSERT_EQ(e.peak_step, 4);
  loom_estimate_deinit(&e);
  int64_t logical = 0, physical = -1;
  ASSERT_OK(loom_value_bytes(g, loom_graph_find(g, "b"), &logical, &physical));
  ASSERT_EQ(logical, 20000);
  ASSERT_EQ(physical, 0);
  ASSERT_OK(loom_value_bytes(g, loom_graph_find(g, "s"), &logical, &physical));
  ASSERT_EQ(logical, 20000);
  ASSERT_EQ(physical, 20000);
  MEASURED_EQUALS_ESTIMATE(g, 60000);
  loom_graph_destroy(g);
}

/* ---- each temporary rule ------------------------------------------------------------------- */

/* dot 1x its output, conv 2x, fft/ifft/rfft/irfft 2x, reductions, argmax/argmin and topk 1x
 * (of all their results), elementwise and views 0. Every op reads the inputs only, so what
 * is held across step p is the inputs still to be read plus the outputs made so far. */
static const char *temps_text =
    "graph temps(x: f32[2,3,16,16], w: f32[4,3,3,3], c: c64[256], m: f32[32,64], n: f32[64,8]) {\n"
    "  y    = conv x w padding=[1,1]              : f32[2,4,16,16]\n"
    "  f    = fft c axis=0                        : c64[256]\n"
    "  fi   = ifft c axis=0                       : c64[256]\n"
    "  rf   = rfft m axis=1                       : c64[32,33]\n"
    "  ir   = irfft rf axis=1 n=64                : f32[32,64]\n"
    "  d    = dot m n                             : f32[32,8]\n"
    "  r    = reduce_sum m axes=[1]               : f32[32]\n"
    "  mx   = reduce_max m axes=[0,1]             : f32[]\n"
    "  am   = argmax m axis=1                     : i64[32]\n"
    "  an   = argmin m axis=0                     : i64[64]\n"
    "  v, i = topk m k=4 axis=1                   : f32[32,4]\n"
    "  ex   = exp m                               : f32[32,64]\n"
    "  tr   = transpose m perm=[1,0]              : f32[64,32]\n"
    "  return y, f, fi, ir, d, r, mx, am, an, v, i, ex, tr\n"
    "}\n";

TEST(estimate_each_temporary_rule) {
  loom_graph *g = MEM_PARSE(temps_text);
  ASSERT_TRUE(g != NULL);
  /* Result bytes per op and the temporary factor. rf is read by ir (step 4) and not returned. */
  static const struct {
    int64_t out, factor;
  } ops[] = {
      {2 * 4 * 16 * 16 * 4, 2},     /* conv */
      {256 * 8, 2},                 /* fft */
      {256 * 8, 2},                 /* ifft */
      {32 * 33 * 8, 2},             /* rfft */
      {32 * 64 * 4, 2},             /* irfft */
      {32 * 8 * 4, 1},              /* dot */
      {32 * 4, 1},                  /* reduce_sum */
      {4, 1},                       /* reduce_max to a scalar */
      {32 * 8, 1},                  /* argmax */
      {64 * 8, 1},                  /* argmin */
      {32 * 4 * 4 + 32 * 4 * 8, 1}, /* topk: values and indices */
      {32 * 64 * 4, 0},             /* exp */
      {32 * 64 * 4, 0},             /* transpose: a view */
  };
  enum { N_OPS = sizeof ops / sizeof ops[0] };
  const int64_t x = 2 * 3 * 16 * 16 * 4, w = 4 * 3 * 3 * 3 * 4, c = 256 * 8, m = 32 * 64 * 4, n = 64 * 8 * 4;
  step_want want[N_OPS];
  int64_t made = 0, physical = 0, temporary = 0, logical = 0, peak = 0;
  int32_t peak_step = -1;
  for (int32_t p = 0; p < N_OPS; p++) {
    bool view = p == N_OPS - 1;
    int64_t inputs = (p < 1 ? x + w : 0) + (p < 3 ? c : 0) + m + (p < 6 ? n : 0);
    int64_t rf_live = p == 4 ? ops[3].out : 0; /* rf from its creation until irfft reads it */
    want[p].logical = ops[p].out;
    want[p].physical = view ? 0 : ops[p].out;
    want[p].temporary = ops[p].factor * ops[p].out;
    want[p].live_before = inputs + made + rf_live;
    if (p != 3) made += want[p].physical; /* every result but rf is returned */
    physical += want[p].physical;
    temporary += want[p].temporary;
    logical += want[p].logical;
    int64_t step_peak = want[p].live_before + want[p].physical + want[p].temporary;
    if (step_peak > peak) {
      peak = step_peak;
      peak_step = p;
    }
  }
  loom_estimate e;
  ASSERT_OK(loom_graph_estimate(g, NULL, &e));
  CHECK_STEPS(&e, want, N_OPS);
  ASSERT_EQ(e.input_bytes, x + w + c + m + n);
  ASSERT_EQ(e.logical_bytes, logical);
  ASSERT_EQ(e.physical_bytes, physical);
  ASSERT_EQ(e.temporary_bytes, temporary);
  ASSERT_EQ(e.total_bytes, physical + temporary);
  ASSERT_EQ(e.peak_bytes, peak);
  ASSERT_EQ(e.peak_step, peak_step);
  loom_estimate_deinit(&e);
  MEASURED_EQUALS_ESTIMATE(g, peak);
  loom_graph_destroy(g);
}

/* A schedule other than the graph's order: the estimate follows it. Two branches each make
 * a 40000 B value from a 4000 B input and reduce it; running one branch to its end first
 * holds one big value at a time.
 *   graph order bx by ea eb ra rb s: eb's step holds y (via by) + ea = 44000, + 40000
 *   bx ea ra by eb rb s:             ea's step holds x + y = 8000, + 40000 */
TEST(estimate_follows_the_schedule) {
  loom_graph *g = MEM_PARSE(
      "graph two(x: f32[1000], y: f32[1000]) {\n"
      "  bx = broadcast x shape=[10,1000]\n  by = broadcast y shape=[10,1000]\n"
      "  ea = exp bx\n  eb = exp by\n"
      "  ra = reduce_sum ea axes=[0,1]\n  rb = reduce_sum eb axes=[0,1]\n"
      "  s = add ra rb\n  return s\n}\n");
  ASSERT_TRUE(g != NULL);
  loom_estimate e;
  ASSERT_OK(loom_graph_estimate(g, NULL, &e));
  static const step_want in_order[] = {
      {40000, 0, 0, 8000},
      {40000, 0, 0, 8000},
      {40000, 40000, 0, 8000},
      {40000, 40000, 0, 44000},
      {4, 4, 4, 80000},
      {4, 4, 4, 40004},
      {4, 4, 0, 8},
  };
  CHECK_STEPS(&e, in_order, 7);
  ASSERT_EQ(e.peak_bytes, 84000);
  ASSERT_EQ(e.peak_step, 3);
  loom_estimate_deinit(&e);
  static const int32_t order[] = {0, 2, 4, 1, 3, 5, 6};
  ASSERT_OK(loom_graph_estimate(g, order, &e));
  static const step_want want[] = {
      {40000, 0, 0, 8000},     {40000, 40000, 0, 8000}, {4, 4, 4, 44000}, {40000, 0, 0, 4004},
      {40000, 40000, 0, 4004}, {4, 4, 4, 40004},        {4, 4, 0, 8},
  };
  ASSERT_EQ(e.n_steps, 7);
  for (int32_t p = 0; p < 7; p++) {
    ASSERT_EQ(e.steps[p].op, order[p]);
    ASSERT_EQ(e.steps[p].output_logical, want[p].logical);
    ASSERT_EQ(e.steps[p].output_physical, want[p].physical);
    ASSERT_EQ(e.steps[p].temporary, want[p].temporary);
    ASSERT_EQ(e.steps[p].live_before, want[p].live_before);
    ASSERT_EQ(e.steps[p].peak, want[p].live_before + want[p].physical + want[p].temporary);
  }
  ASSERT_EQ(e.peak_bytes, 48000);
  ASSERT_EQ(e.peak_step, 1);
  ASSERT_EQ(e.total_bytes, 80000 + 8 + 4 + 8);
  loom_estimate_deinit(&e);
  /* Not a topological order: ea before the broadcast it reads. */
  static const int32_t bad[] = {2, 0, 1, 3, 4, 5, 6};
  ASSERT_STATUS(loom_graph_estimate(g, bad, &e), LOOM_ERR_INVALID_ARGUMENT);
  loom_graph_destroy(g);
}
