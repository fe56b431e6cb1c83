/* The two primitives of sharing a loop's pieces (docs/sched.md, "Sharing a loop"): a range of a
 * loop as a graph (ir/loop_range.h) and the host combine of the ranges' results
 * (runtime/combine.h). For loops of every combine kind, a window with stride and halo, and a
 * last shorter piece, the pieces are split into ranges (one, two, three, uneven, one per
 * piece), each range graph is run on cpu0, the partials are combined (given in reverse order),
 * and the result is compared with the loop run whole on cpu0: bit for bit, sums and products
 * within rounding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ir/ir.h"
#include "ir/loop_range.h"
#include "runtime/combine.h"

typedef enum data_kind { DATA_RANDOM, DATA_TIES, DATA_TIES_NAN, DATA_SMALL } data_kind;

typedef struct share_case {
  const char *name;
  const char *lir; /* a graph whose ops are one loop of its parameters */
  data_kind data;
  bool rounding; /* sum or prod results: compared within rounding */
} share_case;

static const share_case cases[] = {
    {"concat axis 0, a whole operand, a last shorter piece",
     "graph g(x: f32[10,3], w: f32[3]) {\n z = loop n=10 piece=4 {\n  in xs = x axis=0\n  in ww = w\n"
     "  y = mul xs xs\n  z = add y ww\n  out z concat axis=0\n }\n return z\n}",
     DATA_RANDOM, false},
    {"concat axis 1 from an offset, two results",
     "graph g(x: f32[3,12]) {\n z, s = loop n=10 piece=3 {\n  in xs = x axis=1 offset=2\n  y = neg xs\n"
     "  z = exp y\n  out z concat axis=1\n  out xs concat axis=1\n }\n return z, s\n}",
     DATA_RANDOM, false},
    {"sum, max and min with ties and NaN",
     "graph g(x: f32[10,3]) {\n s, mx, mn = loop n=10 piece=3 {\n  in xs = x axis=0\n"
     "  s = reduce_sum xs axes=[0]\n  mx = reduce_max xs axes=[0]\n  mn = reduce_min xs axes=[0]\n"
     "  out s sum\n  out mx max\n  out mn min\n }\n return s, mx, mn\n}",
     DATA_TIES_NAN, true},
    {"prod near 1",
     "graph g(x: f32[11,4]) {\n p = loop n=11 piece=2 {\n  in xs = x axis=0\n  p = reduce_prod xs axes=[0]\n"
     "  out p prod\n }\n return p\n}",
     DATA_SMALL, true},
    {"dot over k by summing",
     "graph g(a: f32[5,10], b: f32[10,4]) {\n c = loop n=10 piece=3 {\n  in as = a axis=1\n  in bs = b "
     "axis=0\n"
     "  c = dot as bs\n  out c sum\n }\n return c\n}",
     DATA_RANDOM, true},
    {"argmax and argmin, ties and NaN",
     "graph g(x: f32[11,3]) {\n mv, mi, nv, ni = loop n=11 piece=3 {\n  in xs = x axis=0\n"
     "  mv = reduce_max xs axes=[0]\n  mi = argmax xs axis=0\n  nv = reduce_min xs axes=[0]\n"
     "  ni = argmin xs axis=0\n  out mv argmax\n  out mi index\n  out nv argmin\n  out ni index\n }\n"
     " return mv, mi, nv, ni\n}",
     DATA_TIES_NAN, false},
    {"argmax of i32 along axis 1, ties",
     "graph g(x: i32[4,13]) {\n mv, mi = loop n=13 piece=4 {\n  in xs = x axis=1\n  mv = reduce_max xs "
     "axes=[1]\n"
     "  mi = argmax xs axis=1\n  out mv argmax\n  out mi index\n }\n return mv, mi\n}",
     DATA_TIES, false},
    {"topk largest and smallest along axis 1, ties and NaN",
     "graph g(x: f32[3,20]) {\n a, ai, b, bi = loop n=20 piece=6 {\n  in xs = x axis=1\n"
     "  a, ai = topk xs k=2 axis=1\n  b, bi = topk xs k=2 axis=1 largest=false\n"
     "  out a topk axis=1 k=2\n  out ai index\n  out b topk axis=1 k=2 largest=false\n  out bi index\n }\n"
     " return a, ai, b, bi\n}",
     DATA_TIES_NAN, false},
    {"kNN over the columns: the nearest 3 of each row",
     "graph g(x: f32[7,3], yt: f32[3,23]) {\n v, i = loop n=23 piece=5 {\n  in xs = x\n  in ys = yt axis=1\n"
     "  d = dot xs ys\n  v, i = topk d k=3 axis=1 largest=false\n  out v topk axis=1 k=3 largest=false\n"
     "  out i index\n }\n return v, i\n}",
     DATA_TIES, false},
    {"kNN over the rows, concat of topk",
     "graph g(x: f32[23,3], yt: f32[3,9]) {\n v, i = loop n=23 piece=4 {\n  in xs = x axis=0\n  in ys = yt\n"
     "  d = dot xs ys\n  v, i = topk d k=3 axis=1 largest=false\n  out v concat axis=0\n  out i concat "
     "axis=0\n"
     " }\n return v, i\n}",
     DATA_RANDOM, false},
    {"a conv window with stride and halo, padding at both ends",
     "graph g(x: f32[1,1,41], w: f32[1,1,3]) {\n y = loop n=20 piece=6 {\n  in xs = x axis=2 offset=-1 "
     "stride=2 halo=4\n"
     "  in ws = w\n  y = conv xs ws stride=[2] padding=[0] dilation=[2] : f32[1,1,6]\n  out y concat "
     "axis=2\n }\n"
     " return y\n}",
     DATA_RANDOM, true},
};

static void shape_data(loom_tensor *t, data_kind kind) {
  int64_t n = 0;
  loom_type_elements(&t->type, &n);
  if (t->type.dtype == LOOM_I32) {
    for (int64_t i = 0; kind != DATA_RANDOM && i < n; i++) ((int32_t *)t->data)[i] %= 3;
    return;
  }
  float *x = t->data;
  for (int64_t i = 0; i < n; i++) {
    if (kind == DATA_TIES || kind == DATA_TIES_NAN) x[i] = floorf(x[i] * 3);
    if (kind == DATA_SMALL) x[i] = 1.0f + x[i] / 8;
  }
  if (kind == DATA_TIES_NAN)
    for (int64_t i = 5; i < n; i += 7) x[i] = NAN;
}

static int32_t loop_op(const loom_graph *g) {
  for (int32_t i = 0; i < g->n_ops; i++)
    if (g->ops[i].loop) return i;
  return -1;
}

/* Equal bit for bit, or (rounding) floats within a relative 1e-5 with NaN where NaN is. */
static bool same(const loom_tensor *a, const loom_tensor *b, bool rounding, char *why, size_t size) {
  int64_t n = 0, bytes = 0;
  loom_type_elements(&a->type, &n);
  loom_type_bytes(&a->type, &bytes);
  if (!loom_type_equal(&a->type, &b->type)) return snprintf(why, size, "types differ"), false;
  if (!rounding || a->type.dtype != LOOM_F32) {
    if (memcmp(a->data, b->data, (size_t)bytes) == 0) return true;
    if (a->type.dtype != LOOM_F32) return snprintf(why, size, "bytes differ"), false;
  }
  const float *x = a->data, *y = b->data;
  for (int64_t i = 0; i < n; i++) {
    bool ok = (isnan(x[i]) && isnan(y[i])) || x[i] == y[i] ||
              (rounding && fabsf(x[i] - y[i]) <= 1e-5f * fmaxf(1.0f, fabsf(y[i])));
    if (!ok) return snprintf(why, size, "element %lld: %.9g vs %.9g", (long long)i, x[i], y[i]), false;
  }
  return true;
}

/* Runs the ranges cut at cuts[0..n_cuts) (ascending, inside (0, trips)), combines them given in
 * reverse, and compares with `whole`. */
static void check_split(loom_context *ctx, const share_case *c, const loom_graph *g, int32_t op,
                        const loom_tensor *inputs, const loom_tensor *whole, const int64_t *cuts,
                        int32_t n_cuts) {
  int64_t trips = loom__loop_trips(g->ops[op].loop);
  int32_t n_parts = n_cuts + 1, n_out = g->n_outputs;
  loom__partial parts[64];
  loom_tensor results[64][8], outs[8];
  memset(results, 0, sizeof results);
  memset(outs, 0, sizeof outs);
  for (int32_t i = 0; i < n_parts; i++) {
    int64_t first = i == 0 ? 0 : cuts[i - 1], last = i == n_cuts ? trips : cuts[i];
    loom_graph *rg = NULL;
    ASSERT_OK(loom__loop_range_graph(g, op, first, last, &rg));
    loom_status s = loom_graph_run_on_device(ctx, "cpu0", rg, inputs, g->n_params, results[i], n_out, NULL);
    loom_graph_destroy(rg);
    if (s) {
      loom_test_fail(__FILE__, __LINE__, "%s: range [%lld, %lld): %s", c->name, (long long)first,
                     (long long)last, loom_last_error());
      return;
    }
    /* reversed, so the combine sorts them */
    parts[n_parts - 1 - i] = (loom__partial){first, last, results[i]};
  }
  for (int32_t j = 0; j < n_out; j++) ASSERT_OK(loom_tensor_init(&outs[j], &whole[j].type));
  ASSERT_OK(loom__combine_partials(g, op, parts, n_parts, outs));
  for (int32_t j = 0; j < n_out; j++) {
    char why[160] = "";
    if (!same(&outs[j], &whole[j], c->rounding, why, sizeof why))
      loom_test_fail(__FILE__, __LINE__, "%s, %d ranges (first cut %lld): result %d: %s", c->name,
                     (int)n_parts, n_cuts ? (long long)cuts[0] : -1LL, (int)j, why);
  }
  for (int32_t j = 0; j < n_out; j++) loom_tensor_deinit(&outs[j]);
  for (int32_t i = 0; i < n_parts; i++)
    for (int32_t j = 0; j < n_out; j++) loom_tensor_deinit(&results[i][j]);
}

static void check_case(loom_context *ctx, const share_case *c) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_parse(c->lir, strlen(c->lir), c->name, &g));
  int32_t op = loop_op(g), np = g->n_params, n_out = g->n_outputs;
  loom_tensor inputs[4], whole[8];
  memset(whole, 0, sizeof whole);
  for (int32_t p = 0; p < np; p++) {
    ASSERT_OK(loom_tensor_init(&inputs[p], &g->values[g->params[p]].type));
    ASSERT_OK(loom_tensor_fill_random(&inputs[p], 15, (uint64_t)p));
    shape_data(&inputs[p], c->data);
  }
  ASSERT_OK(loom_graph_run_on_device(ctx, "cpu0", g, inputs, np, whole, n_out, NULL));
  int64_t trips = loom__loop_trips(g->ops[op].loop), cuts[64] = {0};
  ASSERT_TRUE(trips >= 3 && trips < 64);
  /* one range; halves; thirds; uneven (1, the middle, the last); every piece on its own */
  check_split(ctx, c, g, op, inputs, whole, cuts, 0);
  cuts[0] = trips / 2;
  check_split(ctx, c, g, op, inputs, whole, cuts, 1);
  cuts[0] = trips / 3, cuts[1] = 2 * trips / 3;
  if (cuts[0] > 0 && cuts[1] > cuts[0]) check_split(ctx, c, g, op, inputs, whole, cuts, 2);
  cuts[0] = 1, cuts[1] = trips - 1;
  check_split(ctx, c, g, op, inputs, whole, cuts, 2);
  for (int32_t i = 0; i < trips - 1; i++) cuts[i] = i + 1;
  check_split(ctx, c, g, op, inputs, whole, cuts, (int32_t)trips - 1);
  for (int32_t p = 0; p < np; p++) loom_tensor_deinit(&inputs[p]);
  for (int32_t j = 0; j < n_out; j++) loom_tensor_deinit(&whole[j]);
  loom_graph_destroy(g);
}

TEST(share_ranges_combine_to_the_whole_loop) {
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  for (size_t i = 0; i < sizeof cases / sizeof cases[0] && !loom_test_failed(); i++)
    check_case(ctx, &cases[i]);
  loom_context_destroy(ctx);
}

TEST(share_combine_refuses_gaps_overlaps_and_bad_shapes) {
  const char *lir = cases[0].lir;
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_parse(lir, strlen(lir), "t.lir", &g));
  loom_type t4, t6, t10;
  ASSERT_OK(loom_type_make(LOOM_F32, 2, (int64_t[]){4, 3}, &t4));
  ASSERT_OK(loom_type_make(LOOM_F32, 2, (int64_t[]){6, 3}, &t6));
  ASSERT_OK(loom_type_make(LOOM_F32, 2, (int64_t[]){10, 3}, &t10));
  loom_tensor a, b, out;
  ASSERT_OK(loom_tensor_init(&a, &t4));
  ASSERT_OK(loom_tensor_init(&b, &t6));
  ASSERT_OK(loom_tensor_init(&out, &t10));
  loom__partial gap[2] = {{0, 1, &a}, {2, 3, &b}};
  ASSERT_STATUS(loom__combine_partials(g, 0, gap, 2, &out), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "leave out pieces [1, 2)");
  loom__partial overlap[3] = {{0, 1, &a}, {1, 3, &b}, {0, 1, &a}};
  ASSERT_STATUS(loom__combine_partials(g, 0, overlap, 3, &out), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "overlap on pieces [0, 1)");
  loom__partial shape[2] = {{0, 1, &b}, {1, 3, &b}};
  ASSERT_STATUS(loom__combine_partials(g, 0, shape, 2, &out), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "the partial of pieces [0, 1): result 0 is f32[6,3], expected f32[4,3]");
  loom__partial ok[2] = {{0, 1, &a}, {1, 3, &b}};
  ASSERT_OK(loom__combine_partials(g, 0, ok, 2, &out));
  loom_tensor_deinit(&a);
  loom_tensor_deinit(&b);
  loom_tensor_deinit(&out);
  loom_graph_destroy(g);
}
