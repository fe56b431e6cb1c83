/* The cpu evaluator's GEMM top-k (cpu_fused_gemm.c): a topk of the smallest over an elementwise
 * chain of one large f32 dot, as the fuse rewrite leaves a kNN's expanded distances, against the
 * same body run op by op (every value materialized): short bodies whose columns are split among
 * threads and tall ones in row blocks, columns past a tile, a transposed operand, exact ties
 * (repeated points: the lower index first) and NaN rows (NaN last); and the fuse rewrite taking
 * such a dot into the region only below a topk of the smallest. */
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/cpu_kernels.h"
#include "fused_util.h"
#include "harness.h"

/* Every op of g on dense buffers (vals[value], owned by the caller); params[] the parameters. */
static loom_status run_unfused(const loom_graph *g, void *const *params, void **vals) {
  for (int32_t p = 0; p < g->n_params; p++) vals[g->params[p]] = params[p];
  for (int32_t i = 0; i < g->n_ops; i++) {
    const loom__op *op = &g->ops[i];
    loom__view in[4], out[2];
    for (int32_t k = 0; k < op->n_inputs; k++)
      in[k] = dense_view(&g->values[op->inputs[k]].type, vals[op->inputs[k]]);
    for (int32_t r = 0; r < op->n_outputs; r++) {
      const loom_type *t = &g->values[op->outputs[r]].type;
      vals[op->outputs[r]] = malloc((size_t)(elems(t) * loom_dtype_size(t->dtype)) + 16);
      out[r] = dense_view(t, vals[op->outputs[r]]);
    }
    int64_t sb = loom__op_scratch_bytes(g, op);
    void *scratch = sb ? malloc((size_t)sb) : NULL;
    loom_status s = loom__cpu_run_op(g, op, in, out, scratch, sb);
    free(scratch);
    if (s) return s;
  }
  return LOOM_OK;
}

/* max((x . y^T) + sx + sy, 0), the k smallest per row; y as [m,K] read through a transpose, or
 * already [K,m] (yt). */
static loom_graph *knn_body(int64_t n, int64_t m, int64_t kd, int64_t k, bool transposed) {
  char text[1024];
  long long N = (long long)n, M = (long long)m, K = (long long)kd;
  if (transposed)
    snprintf(text, sizeof text,
             "graph b(x: f32[%lld,%lld], y: f32[%lld,%lld], sx: f32[%lld,1], sy: f32[%lld]) {\n"
             "  yt = transpose y perm=[1,0]\n  d = dot x yt\n",
             N, K, M, K, N, M);
  else
    snprintf(text, sizeof text,
             "graph b(x: f32[%lld,%lld], yt: f32[%lld,%lld], sx: f32[%lld,1], sy: f32[%lld]) {\n"
             "  d = dot x yt\n",
             N, K, K, M, N, M);
  size_t len = strlen(text);
  snprintf(text + len, sizeof text - len,
           "  a = add d sx\n  c = add a sy\n  z = constant 0 : f32[]\n  e = maximum c z\n"
           "  val, idx = topk e k=%lld axis=1 largest=false\n  return val, idx\n}\n",
           (long long)k);
  loom_graph *g = NULL;
  return loom_graph_parse(text, strlen(text), "gemm_topk.lir", &g) ? NULL : g;
}

static uint64_t rng = 88172645463325252ull;
static float unif(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((rng >> 11) * 0x1.0p-53);
}

/* Runs the body fused and unfused on random points (rows of x with NaN where nan_rows; points
 * of y repeated every `repeat` columns, so exact ties) and compares values and neighbours. */
static void check(int64_t n, int64_t m, int64_t kd, int64_t k, bool transposed, int64_t repeat,
                  bool nan_rows) {
  loom_graph *g = knn_body(n, m, kd, k, transposed);
  ASSERT_TRUE(g != NULL);
  float *x = malloc(sizeof(float) * (size_t)(n * kd)), *y = malloc(sizeof(float) * (size_t)(m * kd));
  float *sx = malloc(sizeof(float) * (size_t)n), *sy = malloc(sizeof(float) * (size_t)m);
  /* -2x . y within (-2, 0], the norms within [0, 4): some distances clamp at 0, most do not */
  for (int64_t i = 0; i < n * kd; i++) x[i] = -2 * unif() / (float)kd;
  for (int64_t j = 0; j < m; j++) /* point j, a copy of point j % repeat past the first repeat */
    for (int64_t t = 0; t < kd; t++) {
      int64_t src = repeat > 0 ? j % repeat : j;
      float v = src == j ? unif() : (transposed ? y[src * kd + t] : y[t * m + src]);
      if (transposed)
        y[j * kd + t] = v;
      else
        y[t * m + j] = v;
    }
  for (int64_t i = 0; i < n; i++) sx[i] = 4 * unif();
  for (int64_t j = 0; j < m; j++) sy[j] = repeat > 0 && j >= repeat ? sy[j % repeat] : 4 * unif();
  if (nan_rows) x[3 * kd + 5] = NAN; /* row 3: every distance NaN */
  void **vals = calloc((size_t)g->n_values, sizeof *vals);
  void *params[4] = {x, y, sx, sy};
  ASSERT_OK(run_unfused(g, params, vals));
  loom__view in[4], out[2];
  for (int32_t p = 0; p < 4; p++) in[p] = dense_view(&g->values[g->params[p]].type, params[p]);
  float *fv = malloc(sizeof(float) * (size_t)(n * k));
  int64_t *fi = malloc(sizeof(int64_t) * (size_t)(n * k));
  out[0] = dense_view(&g->values[g->outputs[0]].type, fv);
  out[1] = dense_view(&g->values[g->outputs[1]].type, fi);
  ASSERT_OK(loom__cpu_fused(g, in, out, NULL, 0));
  const float *uv = vals[g->outputs[0]];
  const int64_t *ui = vals[g->outputs[1]];
  for (int64_t e = 0; e < n * k && !loom_test_failed(); e++) {
    bool same_v = (isnan(uv[e]) && isnan(fv[e])) || fabsf(uv[e] - fv[e]) <= 1e-5f * (1 + fabsf(uv[e]));
    /* a BLAS rounds a column by its place in the kernel's tile, so two copies of a point may
     * differ by an ulp and trade places: neighbours may differ only where values tie so */
    if (!same_v)
      loom_test_fail(__FILE__, __LINE__,
                     "n %lld m %lld: row %lld rank %lld: fused %g at %lld, unfused %g at %lld", (long long)n,
                     (long long)m, (long long)(e / k), (long long)(e % k), fv[e], (long long)fi[e], uv[e],
                     (long long)ui[e]);
  }
  if (nan_rows)
    for (int64_t t = 0; t < k; t++) ASSERT_EQ(fi[3 * k + t], t); /* all NaN: the lowest indices */
  if (repeat > 0) /* the nearest of repeated points is a copy of the first's distance */
    for (int64_t i = 0; i < n; i++)
      if ((i != 3 || !nan_rows) && fi[i * k] >= repeat) {
        int64_t j = fi[i * k] % repeat, e = i * k;
        bool near = false;
        for (int64_t t = 0; t < k; t++) near |= ui[e + t] == j || fi[e + t] == j;
        ASSERT_TRUE(near);
      }
  for (int32_t v = 0; v < g->n_values; v++)
    if (g->values[v].op >= 0) free(vals[v]);
  free(vals), free(fv), free(fi), free(x), free(y), free(sx), free(sy);
  loom_graph_destroy(g);
}

TEST(fused_gemm_topk_short_rows_split_columns) {
  check(5, 2500, 40, 10, false, 0, false);
  check(19, 3000, 128, 10, true, 0, true);
}

TEST(fused_gemm_topk_row_blocks) {
  check(700, 2100, 33, 10, true, 0, true);
  check(600, 1500, 64, 1, false, 0, false);
}

/* Past 2^26 multiply-adds the work goes to a team: row blocks, or with few rows the columns
 * split among the threads and their k best merged (serial below: one BLAS call per block). */
TEST(fused_gemm_topk_threads) {
  check(1100, 2000, 40, 10, true, 0, true);
  check(100, 20000, 40, 10, false, 0, true);
}

TEST(fused_gemm_topk_exact_ties_to_the_lower_index) {
  check(300, 2000, 24, 7, true, 500, false);
  check(9, 4096, 20, 12, false, 1024, false);
}

/* The fuse rewrite: a dot of 128 terms joins a region rooted at a topk of the smallest, and
 * stays outside one of the largest. */
static int32_t fused_dots(bool largest) {
  char text[768];
  snprintf(text, sizeof text,
           "graph knn(x: f32[64,128], y: f32[300,128]) {\n"
           "  yt = transpose y perm=[1,0]\n  d = dot x yt\n  z = constant 0 : f32[]\n  e = maximum d z\n"
           "  val, idx = topk e k=5 axis=1 largest=%s\n  return val, idx\n}\n",
           largest ? "true" : "false");
  loom_graph *g = NULL, *opt = NULL;
  if (loom_graph_parse(text, strlen(text), "knn.lir", &g)) return -1;
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  int32_t dots = -1;
  if (!loom_graph_optimize(g, &o, &opt, NULL)) {
    dots = 0;
    for (int32_t i = 0; i < opt->n_ops; i++) {
      const loom_graph *b = opt->ops[i].fused;
      for (int32_t j = 0; b && j < b->n_ops; j++) dots += b->ops[j].kind == LOOM_OP_DOT;
    }
  }
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
  return dots;
}

TEST(fuse_takes_a_large_dot_below_a_topk_of_the_smallest) {
  ASSERT_EQ(fused_dots(false), 1);
  ASSERT_EQ(fused_dots(true), 0);
}

/* ---- the direct distance top-k (cpu_fused_distance.c) ---- */

/* sum over d features of (x_f - y_f)^2, x_f a column [n,1] and y_f a row [1,m], as the distance
 * rewrite's direct form writes it, then the k smallest per row: fused against unfused, values
 * bit for bit (the same roundings) and neighbours equal. */
static void check_direct(int64_t n, int64_t m, int32_t d, int64_t k) {
  char text[2048];
  int len = snprintf(text, sizeof text, "graph b(");
  for (int32_t f = 0; f < d; f++)
    len += snprintf(text + len, sizeof text - (size_t)len, "%sx%d: f32[%lld,1], y%d: f32[1,%lld]",
                    f ? ", " : "", (int)f, (long long)n, (int)f, (long long)m);
  len += snprintf(text + len, sizeof text - (size_t)len, ") {\n");
  for (int32_t f = 0; f < d; f++) {
    len += snprintf(text + len, sizeof text - (size_t)len, "  s%d = sub x%d y%d\n  q%d = square s%d\n",
                    (int)f, (int)f, (int)f, (int)f, (int)f);
    if (f == 1) len += snprintf(text + len, sizeof text - (size_t)len, "  a1 = add q0 q1\n");
    if (f > 1)
      len += snprintf(text + len, sizeof text - (size_t)len, "  a%d = add a%d q%d\n", (int)f, (int)f - 1,
                      (int)f);
  }
  snprintf(text + len, sizeof text - (size_t)len,
           "  val, idx = topk %s%d k=%lld axis=1 largest=false\n  return val, idx\n}\n", d == 1 ? "q" : "a",
           d == 1 ? 0 : (int)d - 1, (long long)k);
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_parse(text, strlen(text), "direct.lir", &g));
  void *params[16];
  for (int32_t f = 0; f < d; f++) {
    float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)m);
    for (int64_t i = 0; i < n; i++) x[i] = unif();
    for (int64_t j = 0; j < m; j++) y[j] = j >= 700 ? y[j % 700] : unif(); /* repeated points: ties */
    params[2 * f] = x;
    params[2 * f + 1] = y;
  }
  ((float *)params[0])[4] = NAN; /* row 4: NaN distances, last */
  void **vals = calloc((size_t)g->n_values, sizeof *vals);
  ASSERT_OK(run_unfused(g, params, vals));
  loom__view in[16], out[2];
  for (int32_t p = 0; p < 2 * d; p++) in[p] = dense_view(&g->values[g->params[p]].type, params[p]);
  float *fv = malloc(sizeof(float) * (size_t)(n * k));
  int64_t *fi = malloc(sizeof(int64_t) * (size_t)(n * k));
  out[0] = dense_view(&g->values[g->outputs[0]].type, fv);
  out[1] = dense_view(&g->values[g->outputs[1]].type, fi);
  ASSERT_OK(loom__cpu_fused(g, in, out, NULL, 0));
  const float *uv = vals[g->outputs[0]];
  const int64_t *ui = vals[g->outputs[1]];
  for (int64_t e = 0; e < n * k && !loom_test_failed(); e++)
    if (ui[e] != fi[e] || (memcmp(&uv[e], &fv[e], sizeof(float)) != 0 && !(isnan(uv[e]) && isnan(fv[e]))))
      loom_test_fail(__FILE__, __LINE__, "d %d: row %lld rank %lld: fused %.9g at %lld, unfused %.9g at %lld",
                     (int)d, (long long)(e / k), (long long)(e % k), fv[e], (long long)fi[e], uv[e],
                     (long long)ui[e]);
  for (int32_t v = 0; v < g->n_values; v++)
    if (g->values[v].op >= 0) free(vals[v]);
  for (int32_t p = 0; p < 2 * d; p++) free(params[p]);
  free(vals), free(fv), free(fi);
  loom_graph_destroy(g);
}

TEST(fused_distance_topk_against_unfused) {
  check_direct(300, 5000, 3, 10);
  check_direct(70, 2500, 2, 7);
  check_direct(9, 4100, 5, 1);
  check_direct(37, 50, 3, 12); /* d = 3: a short last group of rows, one run past the columns */
  check_direct(6, 2111, 3, 64);
}
