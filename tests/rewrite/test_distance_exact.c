/* The "distance" rewrite's choice of form (issue 17, "Exact distances where they cost
 * nothing"): under a limit at small d, where the graph is chunked anyway, the direct form
 * summed feature by feature keeps every digit of near points' distances; the expanded form
 * is kept where the limit is met without chunking, at large d, without fuse, and when forced;
 * --no-rewrite distance leaves the graph's own direct form. References are computed here in
 * double from the f32 inputs. */
#include <stdlib.h>

#include "ir/passes.h"
#include "runtime/exec.h"
#include "rw_util.h"

enum { KNN_K = 5 };

static const char *knn_text(int n, int m, int d) {
  static char buf[1024];
  snprintf(buf, sizeof buf,
           "graph knn(x: f32[%d,%d], y: f32[%d,%d]) {\n"
           "  xe = reshape x shape=[%d,1,%d]\n  ye = reshape y shape=[1,%d,%d]\n"
           "  diff = sub xe ye\n  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n"
           "  val, idx = topk d2 k=%d axis=1 largest=false\n  return val, idx\n}\n",
           n, d, m, d, n, d, m, d, KNN_K);
  return buf;
}

static uint64_t mix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Points that differ in their fifth significant digit: a common centre of norm about 4.6
 * plus offsets below 2e-4, so squared distances (~1e-8) are far below what f32 keeps of
 * |a|^2 + |b|^2 (~42, one ulp ~4e-6): the expanded form cancels to noise there. */
static void near_points(loom_tensor *t, int64_t rows, int d, uint64_t seed) {
  float *p = t->data;
  for (int64_t i = 0; i < rows; i++)
    for (int k = 0; k < d; k++) {
      double u = (double)(mix(&seed) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
      p[i * d + k] = (float)(1.234567 * (k % 4 + 1) + 2e-4 * u);
    }
}

static double d2_ref(const float *x, const float *y, int64_t i, int64_t j, int d) {
  double s = 0;
  for (int k = 0; k < d; k++) {
    double t = (double)x[i * d + k] - (double)y[j * d + k];
    s += t * t;
  }
  return s;
}

/* The worst relative error of the returned squared distances against the float64 reference:
 * each row's k values against the k smallest reference distances in order, and against the
 * reference distance of the index returned beside each. */
static double worst_knn_error(const loom_tensor *x, const loom_tensor *y, const loom_tensor *val,
                              const loom_tensor *idx, int64_t n, int64_t m, int d) {
  const float *xs = x->data, *ys = y->data, *v = val->data;
  const int64_t *ix = idx->data;
  double *row = malloc(sizeof(double) * (size_t)m), worst = 0;
  for (int64_t i = 0; i < n; i++) {
    for (int64_t j = 0; j < m; j++) row[j] = d2_ref(xs, ys, i, j, d);
    for (int64_t r = 0; r < KNN_K; r++) { /* selection: the r-th smallest moves to row[r] */
      int64_t best = r;
      for (int64_t j = r + 1; j < m; j++)
        if (row[j] < row[best]) best = j;
      double t = row[r];
      row[r] = row[best];
      row[best] = t;
      double got = v[i * KNN_K + r], at = ix[i * KNN_K + r];
      double at_ref = at >= 0 && at < m ? d2_ref(xs, ys, i, (int64_t)at, d) : INFINITY;
      worst = fmax(worst, fabs(got - row[r]) / row[r]);
      worst = fmax(worst, fabs(got - at_ref) / row[r]); /* an index out of range: infinite */
    }
  }
  free(row);
  return worst;
}

typedef struct knn_run {
  loom_rewrite_report rep;
  double worst;   /* worst relative error of the distances */
  int64_t peak;   /* measured by the executor's meter */
  int dots;       /* dot ops left at the top level */
  int reductions; /* reduce_sum ops over rank-3 values (the graph's own direct form) */
} knn_run;

/* Optimizes the kNN graph under `limit` (0: none) with `form` and the rewrites in `off` disabled,
 * runs it on near points under the limit's meter and measures its error. */
static loom_status knn_try(int n, int m, int d, int64_t limit, loom_distance_form form,
                           const char *const *off, int32_t n_off, knn_run *out) {
  memset(out, 0, sizeof *out);
  loom_graph *g = rw_parse(knn_text(n, m, d)), *o = NULL;
  if (!g) return LOOM_ERR_INVALID_ARGUMENT;
  loom_optimize_options opts;
  loom_optimize_options_init(&opts);
  opts.limit = limit;
  opts.distance_form = form;
  opts.disabled = off;
  opts.n_disabled = n_off;
  loom_tensor in[2] = {0}, res[2] = {0};
  loom_status s = loom_graph_optimize(g, &opts, &o, &out->rep);
  for (int32_t p = 0; !s && p < 2; p++) {
    s = loom_tensor_init(&in[p], loom_value_type(g, loom_graph_param_at(g, p)));
    if (!s) near_points(&in[p], p == 0 ? n : m, d, 17 + (uint64_t)p);
  }
  loom_context *ctx = NULL;
  loom__exec_options eo = {0};
  loom__meter meter = {0};
  meter.limit = limit;
  if (!s) s = loom_context_create(NULL, &ctx);
  if (!s) s = loom__context_exec_device(ctx, "cpu0", &eo.device);
  if (!s) s = loom__execute(o, &eo, in, res, &meter);
  if (!s) {
    out->worst = worst_knn_error(&in[0], &in[1], &res[0], &res[1], n, m, d);
    out->peak = meter.peak;
    out->dots = rw_count_ops(o, LOOM_OP_DOT);
    for (int32_t i = 0; i < o->n_ops; i++)
      out->reductions +=
          o->ops[i].kind == LOOM_OP_REDUCE_SUM && o->values[o->ops[i].inputs[0]].type.rank == 3;
  }
  loom_context_destroy(ctx);
  for (int32_t p = 0; p < 2; p++) {
    loom_tensor_deinit(&in[p]);
    loom_tensor_deinit(&res[p]);
  }
  loom_graph_destroy(o);
  loom_graph_destroy(g);
  return s;
}

/* 300 x 400 points: the graph as written needs 1.4 MB for its difference, the expanded form
 * about 1 MB for its n x m product: both pass 256 KiB, so the graph is chunked either way. */
enum { N = 300, M = 400, LIMIT = 256 << 10 };

TEST(distance_exact_knn_d3_under_limit) {
  knn_run r;
  ASSERT_OK(knn_try(N, M, 3, LIMIT, LOOM_DISTANCE_AUTO, NULL, 0, &r));
  const loom_rewrite_entry *e = rw_entry(&r.rep, "distance");
  ASSERT_TRUE(e != NULL);
  ASSERT_CONTAINS(e->detail, "direct form kept");
  ASSERT_CONTAINS(e->detail, "d = 3 <= 4");
  ASSERT_CONTAINS(e->detail, "exact to rounding");
  ASSERT_TRUE(rw_entry(&r.rep, "chunk") != NULL);
  ASSERT_TRUE(r.peak > 0 && r.peak <= LIMIT);
  printf("    direct form: worst relative error %.3g\n", r.worst);
  ASSERT_TRUE(r.worst <= 1e-6); /* issue 17's acceptance */
  loom_rewrite_report_deinit(&r.rep);
}

/* The same points through the expanded form: what the direct form is for. */
TEST(distance_exact_expanded_form_loses_near_points) {
  knn_run r;
  ASSERT_OK(knn_try(N, M, 3, LIMIT, LOOM_DISTANCE_EXPANDED, NULL, 0, &r));
  const loom_rewrite_entry *e = rw_entry(&r.rep, "distance");
  ASSERT_TRUE(e != NULL);
  ASSERT_CONTAINS(e->detail, "|a|^2 + |b|^2 - 2 a.b^T");
  printf("    expanded form: worst relative error %.3g\n", r.worst);
  ASSERT_TRUE(r.worst > 1e-2); /* noise of the norms, larger than a percent of the distances */
  loom_rewrite_report_deinit(&r.rep);
}

/* Past 4 features the expanded form is kept under the limit too (its dot is cheaper); with a
 * GEMM past 16. */
TEST(distance_exact_larger_d_keeps_expanded) {
  const int dims[] = {5, 24};
  for (int i = 0; i < 2; i++) {
    knn_run r;
    ASSERT_OK(knn_try(120, 150, dims[i], 64 << 10, LOOM_DISTANCE_AUTO, NULL, 0, &r));
    const loom_rewrite_entry *e = rw_entry(&r.rep, "distance");
    ASSERT_TRUE(e != NULL);
    ASSERT_CONTAINS(e->detail, "|a|^2 + |b|^2 - 2 a.b^T");
    char want[64];
    snprintf(want, sizeof want, "d = %d > 4: the dot is cheaper", dims[i]);
    ASSERT_CONTAINS(e->detail, want);
    ASSERT_TRUE(rw_entry(&r.rep, "chunk") != NULL);
    ASSERT_TRUE(r.peak <= 64 << 10);
    loom_rewrite_report_deinit(&r.rep);
  }
}

/* A limit the expanded form meets without chunking: it is kept, and nothing is chunked. */
TEST(distance_exact_expanded_when_it_fits_unchunked) {
  loom_graph *g = rw_parse(knn_text(N, M, 3)), *o = NULL;
  ASSERT_TRUE(g != NULL);
  loom_rewrite_report rep0 = {0};
  ASSERT_OK(rw_optimize_only(g, "distance", &o, &rep0));
  int64_t expanded_peak = rw_peak(o), as_written = rw_peak(g);
  ASSERT_TRUE(expanded_peak > LIMIT && expanded_peak < as_written);
  loom_rewrite_report_deinit(&rep0);
  loom_graph_destroy(o);
  loom_graph_destroy(g);
  knn_run r;
  ASSERT_OK(knn_try(N, M, 3, expanded_peak, LOOM_DISTANCE_AUTO, NULL, 0, &r));
  const loom_rewrite_entry *e = rw_entry(&r.rep, "distance");
  ASSERT_TRUE(e != NULL);
  ASSERT_CONTAINS(e->detail, "d = 3 but the limit is met unchunked");
  ASSERT_TRUE(rw_entry(&r.rep, "chunk") == NULL);
  ASSERT_TRUE(r.peak <= expanded_peak);
  loom_rewrite_report_deinit(&r.rep);
}

/* Without fuse the direct form would be 3d passes over n x m memory: the expanded form stays. */
TEST(distance_exact_fuse_off_keeps_expanded) {
  const char *off[] = {"fuse"};
  knn_run r;
  ASSERT_OK(knn_try(N, M, 3, LIMIT, LOOM_DISTANCE_AUTO, off, 1, &r));
  const loom_rewrite_entry *e = rw_entry(&r.rep, "distance");
  ASSERT_TRUE(e != NULL);
  ASSERT_CONTAINS(e->detail, "fuse off");
  ASSERT_TRUE(r.peak <= LIMIT);
  loom_rewrite_report_deinit(&r.rep);
}

/* --no-rewrite distance: no report entry, the graph's own sub, mul and reduce_sum over n x m x d
 * (in the chunk's loop), exact too. */
TEST(distance_exact_disabled_by_name_gives_direct_form) {
  const char *off[] = {"distance", "fuse"}; /* fuse would hide the reduce_sum in a fused body */
  knn_run r;
  ASSERT_OK(knn_try(60, 80, 3, 0, LOOM_DISTANCE_AUTO, off, 2, &r));
  ASSERT_TRUE(rw_entry(&r.rep, "distance") == NULL);
  ASSERT_EQ(r.reductions, 1);
  ASSERT_EQ(r.dots, 0);
  ASSERT_TRUE(r.worst <= 1e-6);
  loom_rewrite_report_deinit(&r.rep);
  ASSERT_OK(knn_try(N, M, 3, LIMIT, LOOM_DISTANCE_AUTO, off, 1, &r)); /* under the limit, fused */
  ASSERT_TRUE(rw_entry(&r.rep, "distance") == NULL);
  ASSERT_TRUE(r.peak <= LIMIT);
  ASSERT_TRUE(r.worst <= 1e-6);
  loom_rewrite_report_deinit(&r.rep);
}

/* Forced direct without a limit: no dot, one sub per feature, exact; up to 32 features. */
TEST(distance_exact_forced_direct) {
  const char *off[] = {"fuse"};
  knn_run r;
  ASSERT_OK(knn_try(60, 80, 5, 0, LOOM_DISTANCE_DIRECT, off, 1, &r));
  const loom_rewrite_entry *e = rw_entry(&r.rep, "distance");
  ASSERT_TRUE(e != NULL);
  ASSERT_CONTAINS(e->detail, "direct form kept (forced)");
  ASSERT_EQ(r.dots, 0);
  ASSERT_EQ(r.reductions, 0);
  ASSERT_TRUE(r.worst <= 1e-6);
  loom_rewrite_report_deinit(&r.rep);
  /* past 32 features the graph's own reduce_sum is the direct form: no match */
  ASSERT_OK(knn_try(20, 30, 40, 0, LOOM_DISTANCE_DIRECT, off, 1, &r));
  ASSERT_TRUE(rw_entry(&r.rep, "distance") == NULL);
  ASSERT_EQ(r.reductions, 1);
  loom_rewrite_report_deinit(&r.rep);
}

/* The direct form of a self-distance has an exact 0 diagonal and the rows of x^T in any
 * layout: x given as [d,n] (feature axis 0) through a transpose. */
TEST(distance_exact_direct_self_distance_transposed) {
  loom_graph *g = rw_parse(
      "graph g(x: f32[3,40]) {\n  xt = transpose x perm=[1,0]\n  xe = reshape xt shape=[40,1,3]\n"
      "  xf = reshape xt shape=[1,40,3]\n  diff = sub xe xf\n  sq = mul diff diff\n"
      "  d2 = reduce_sum sq axes=[2]\n  return d2\n}\n");
  ASSERT_TRUE(g != NULL);
  loom_optimize_options opts;
  loom_optimize_options_init(&opts);
  opts.distance_form = LOOM_DISTANCE_DIRECT;
  loom_graph *o = NULL;
  loom_rewrite_report rep = {0};
  ASSERT_OK(loom_graph_optimize(g, &opts, &o, &rep));
  ASSERT_TRUE(rw_entry(&rep, "distance") != NULL);
  loom_tensor in, got;
  ASSERT_OK(rw_random_inputs(g, 3, 1000.0, &in));
  ASSERT_OK(rw_run(o, &in, 1, &got, 1));
  const float *x = in.data;
  for (int i = 0; i < 40; i++)
    for (int j = 0; j < 40; j++) {
      double want = 0;
      for (int k = 0; k < 3; k++) {
        double t = (double)x[k * 40 + i] - (double)x[k * 40 + j];
        want += t * t;
      }
      double v = rw_get(&got, i * 40 + j);
      if (i == j) ASSERT_TRUE(v == 0.0);
      ASSERT_NEAR(v, want, 1e-6 * want);
    }
  loom_tensor_deinit(&in);
  loom_tensor_deinit(&got);
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(o);
  loom_graph_destroy(g);
}

TEST(distance_exact_bad_form) {
  loom_graph *g = rw_parse(knn_text(4, 5, 3)), *o = NULL;
  ASSERT_TRUE(g != NULL);
  loom_optimize_options opts;
  loom_optimize_options_init(&opts);
  opts.distance_form = (loom_distance_form)7;
  ASSERT_STATUS(loom_graph_optimize(g, &opts, &o, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "distance_form 7");
  ASSERT_TRUE(o == NULL);
  loom_graph_destroy(g);
}

/* Ops of `kind` in g's fused bodies, loops' bodies included. */
static int in_fused_bodies(const loom_graph *g, loom_op kind) {
  int n = 0;
  for (int32_t i = 0; i < g->n_ops; i++) {
    if (g->ops[i].fused) n += rw_count_ops(g->ops[i].fused, kind);
    if (g->ops[i].loop) n += in_fused_bodies(g->ops[i].loop->body, kind);
  }
  return n;
}

/* The direct form under the limit: one loop over rows of x, x itself sliced (streamed), its
 * body one fused op holding the three features' differences and the topk. */
TEST(distance_exact_direct_form_is_one_fused_op_in_the_loop) {
  loom_graph *g = rw_parse(knn_text(N, M, 3)), *o = NULL;
  ASSERT_TRUE(g != NULL);
  loom_optimize_options opts;
  loom_optimize_options_init(&opts);
  opts.limit = LIMIT;
  ASSERT_OK(loom_graph_optimize(g, &opts, &o, NULL));
  const loom__op *loop = NULL;
  for (int32_t i = 0; i < o->n_ops; i++)
    if (o->ops[i].loop) loop = &o->ops[i];
  ASSERT_TRUE(loop != NULL);
  int32_t x = loom_graph_param_at(o, 0).id;
  bool streams_x = false;
  for (int32_t i = 0; i < loop->n_inputs; i++)
    streams_x |= loop->inputs[i] == x && loop->loop->rules[i].axis == 0;
  ASSERT_TRUE(streams_x);
  int fused = 0;
  for (int32_t i = 0; i < loop->loop->body->n_ops; i++) fused += loop->loop->body->ops[i].fused != NULL;
  ASSERT_EQ(fused, 1);
  ASSERT_EQ(in_fused_bodies(o, LOOM_OP_SUB), 3);
  ASSERT_EQ(in_fused_bodies(o, LOOM_OP_TOPK), 1);
  ASSERT_EQ(in_fused_bodies(o, LOOM_OP_DOT), 0);
  loom_graph_destroy(o);
  loom_graph_destroy(g);
}

/* A Gaussian kernel's distances decide no order (exp, then a dot): the expanded form stays, and
 * the report says why, at the d and limit where a kNN keeps the direct form. */
TEST(distance_exact_kernel_product_keeps_expanded) {
  loom_graph *g = rw_parse(
      "graph kmv(x: f32[300,3], y: f32[400,3], b: f32[400]) {\n"
      "  xe = reshape x shape=[300,1,3]\n  ye = reshape y shape=[1,400,3]\n  diff = sub xe ye\n"
      "  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n  half = constant 0.5 : f32[]\n"
      "  e = mul d2 half\n  ne = neg e\n  k = exp ne\n  out = dot k b\n  return out\n}\n");
  ASSERT_TRUE(g != NULL);
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.limit = 64 << 10;
  loom_graph *f = NULL;
  loom_rewrite_report rep = {0};
  ASSERT_OK(loom_graph_optimize(g, &o, &f, &rep));
  const loom_rewrite_entry *e = rw_entry(&rep, "distance");
  ASSERT_TRUE(e != NULL);
  ASSERT_CONTAINS(e->detail, "|a|^2 + |b|^2 - 2 a.b^T");
  ASSERT_CONTAINS(e->detail, "no order is taken from it");
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(f);
  loom_graph_destroy(g);
}
