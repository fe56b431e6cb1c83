/* The "distance" rewrite: every spelling IR.md lists matches and gives the same results, the
 * look-alikes do not match, self-distances come out exactly 0, and the kNN example of IR.md
 * saves bytes. */
#include <stdlib.h>

#include "rw_util.h"

/* Optimizes text with only "distance"; checks that it applied (or not) and that the results
 * equal the unrewritten graph's on random inputs. */
static void check(const char *text, bool expect_match) {
  loom_graph *g = rw_parse(text), *o = NULL;
  loom_rewrite_report rep = {0};
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(rw_optimize_only(g, "distance", &o, &rep));
  ASSERT_EQ(rw_count_entries(&rep, "distance"), expect_match ? 1 : 0);
  if (expect_match) {
    ASSERT_EQ(rw_count_ops(o, LOOM_OP_SUB), 0); /* no n x m x d difference left */
    ASSERT_EQ(rw_count_ops(o, LOOM_OP_DOT), 1);
    ASSERT_EQ(rw_count_ops(o, LOOM_OP_MAXIMUM), 1);
    ASSERT_TRUE(rep.entries[0].bytes_saved >= 0);
    ASSERT_CONTAINS(rep.entries[0].detail, "d2");
  } else {
    ASSERT_EQ(rw_count_ops(o, LOOM_OP_DOT), rw_count_ops(g, LOOM_OP_DOT));
  }
  double worst;
  ASSERT_OK(rw_compare(g, o, 7, 1.0, 1e-5, 1e-4, &worst));
  ASSERT_TRUE(worst <= 1.0);
  for (int32_t i = 0; i < o->n_outputs; i++) /* returned values keep their names */
    ASSERT_STREQ(loom_value_name(o, loom_graph_output_at(o, i)),
                 loom_value_name(g, loom_graph_output_at(g, i)));
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(g);
  loom_graph_destroy(o);
}

TEST(distance_reshape_mul) {
  check(
      "graph g(x: f32[7,3], y: f32[5,3]) {\n"
      "  xe = reshape x shape=[7,1,3]\n  ye = reshape y shape=[1,5,3]\n"
      "  diff = sub xe ye\n  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n  return d2\n}\n",
      true);
}

TEST(distance_broadcast_only_rows_from_second_operand) {
  /* x broadcast on the left: the result's rows are y's, d2[j,i] = |y_j - x_i|^2 */
  check(
      "graph g(x: f32[7,3], y: f32[5,3]) {\n"
      "  xb = broadcast x shape=[5,7,3]\n  yr = reshape y shape=[5,1,3]\n  yb = broadcast yr shape=[5,7,3]\n"
      "  diff = sub xb yb\n  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n  return d2\n}\n",
      true);
}

TEST(distance_both_swapped_pow_constant_keepdims) {
  check(
      "graph g(x: f32[7,3], y: f32[5,3]) {\n"
      "  xe = reshape x shape=[7,1,3]\n  xb = broadcast xe shape=[7,5,3]\n  yb = broadcast y shape=[7,5,3]\n"
      "  two = constant 2 : f32[]\n"
      "  diff = sub yb xb\n  sq = pow diff two\n  d2 = reduce_sum sq axes=[-1] keepdims=true\n  return "
      "d2\n}\n",
      true);
}

TEST(distance_pow_fill_square_sqrt) {
  check(
      "graph g(x: f32[7,3], y: f32[5,3]) {\n"
      "  xe = reshape x shape=[7,1,3]\n  ye = reshape y shape=[1,5,3]\n  two = fill value=2 : f32[7,5,3]\n"
      "  diff = sub xe ye\n  sq = pow diff two\n  d2 = reduce_sum sq axes=[2]\n  return d2\n}\n",
      true);
  if (loom_test_failed()) return;
  check(
      "graph g(x: f32[7,3], y: f32[5,3]) {\n"
      "  xe = reshape x shape=[7,1,3]\n  ye = reshape y shape=[1,5,3]\n"
      "  diff = sub xe ye\n  sq = square diff\n  d2 = reduce_sum sq axes=[2]\n  d = sqrt d2\n  return d\n}\n",
      true);
}

TEST(distance_transposed_sources_and_feature_axis_first) {
  /* sources stored feature-major, read through transposes */
  check(
      "graph g(xt: f32[3,7], yt: f32[3,5]) {\n"
      "  x = transpose xt perm=[1,0]\n  y = transpose yt perm=[1,0]\n"
      "  xe = reshape x shape=[7,1,3]\n  ye = reshape y shape=[1,5,3]\n"
      "  diff = sub xe ye\n  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n  return d2\n}\n",
      true);
  if (loom_test_failed()) return;
  /* the feature axis first in the difference */
  check(
      "graph g(xt: f32[3,7], yt: f32[3,5]) {\n"
      "  xe = reshape xt shape=[3,7,1]\n  ye = reshape yt shape=[3,1,5]\n"
      "  diff = sub xe ye\n  sq = mul diff diff\n  d2 = reduce_sum sq axes=[0]\n  return d2\n}\n",
      true);
}

TEST(distance_f64) {
  check(
      "graph g(x: f64[9,4], y: f64[6,4]) {\n"
      "  xe = reshape x shape=[9,1,4]\n  ye = reshape y shape=[1,6,4]\n"
      "  diff = sub xe ye\n  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n  return d2\n}\n",
      true);
}

/* ---- near misses ------------------------------------------------------------------------- */

#define PRE \
  "graph g(x: f32[7,3], y: f32[5,3]) {\n  xe = reshape x shape=[7,1,3]\n  ye = reshape y shape=[1,5,3]\n"

TEST(distance_near_misses_do_not_match) {
  static const char *const misses[] = {
      /* exponent 3 */
      PRE
      "  three = constant 3 : f32[]\n  diff = sub xe ye\n  sq = pow diff three\n"
      "  d2 = reduce_sum sq axes=[2]\n  return d2\n}\n",
      /* reduce_max */
      PRE "  diff = sub xe ye\n  sq = mul diff diff\n  d2 = reduce_max sq axes=[2]\n  return d2\n}\n",
      /* abs: L1 */
      PRE "  diff = sub xe ye\n  sq = abs diff\n  d2 = reduce_sum sq axes=[2]\n  return d2\n}\n",
      /* a product of two different differences */
      PRE
      "  diff = sub xe ye\n  dif2 = sub ye xe\n  sq = mul diff dif2\n  d2 = reduce_sum sq axes=[2]\n"
      "  return d2\n}\n",
      /* reduced over a row axis instead of the feature axis */
      PRE "  diff = sub xe ye\n  sq = mul diff diff\n  d2 = reduce_sum sq axes=[1]\n  return d2\n}\n",
      /* reduced over the features and another axis */
      PRE "  diff = sub xe ye\n  sq = mul diff diff\n  d2 = reduce_sum sq axes=[1,2]\n  return d2\n}\n",
      /* the difference also returned: it must stay, so nothing is saved */
      PRE "  diff = sub xe ye\n  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n  return d2, diff\n}\n",
      /* the square also read by another op */
      PRE
      "  diff = sub xe ye\n  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n  m = reduce_max sq "
      "axes=[2]\n"
      "  return d2, m\n}\n",
      /* an add, not a difference */
      PRE "  diff = add xe ye\n  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n  return d2\n}\n",
      /* both operands vary along the same axis: elementwise, not pairwise */
      "graph g(x: f32[7,3], y: f32[7,3]) {\n  xe = reshape x shape=[7,1,3]\n  ye = reshape y shape=[7,1,3]\n"
      "  diff = sub xe ye\n  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n  return d2\n}\n",
      /* interleaved axes: y's rows along the features of x (x[i,k] - y[k,j]) reduced over j */
      "graph g(x: f32[7,3], y: f32[3,3]) {\n  xe = reshape x shape=[7,3,1]\n  ye = reshape y shape=[1,3,3]\n"
      "  diff = sub xe ye\n  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n  return d2\n}\n",
      /* x varies along every axis (a batch of differences) */
      "graph g(x: f32[7,5,3], y: f32[5,3]) {\n  ye = reshape y shape=[1,5,3]\n"
      "  diff = sub x ye\n  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n  return d2\n}\n",
      /* integers are left alone */
      "graph g(x: i32[7,3], y: i32[5,3]) {\n  xe = reshape x shape=[7,1,3]\n  ye = reshape y shape=[1,5,3]\n"
      "  diff = sub xe ye\n  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n  return d2\n}\n",
  };
  for (int i = 0; i < (int)(sizeof misses / sizeof misses[0]); i++) {
    check(misses[i], false);
    if (loom_test_failed()) {
      printf("    near miss %d matched or failed\n", i);
      return;
    }
  }
}

/* ---- self-distance ----------------------------------------------------------------------- */

TEST(distance_to_itself_is_exactly_zero) {
  /* points far from the origin: the expanded form cancels worst there */
  loom_graph *g = rw_parse(
      "graph g(x: f32[64,3]) {\n  xe = reshape x shape=[64,1,3]\n  xf = reshape x shape=[1,64,3]\n"
      "  diff = sub xe xf\n  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n  return d2\n}\n");
  loom_graph *o = NULL;
  loom_rewrite_report rep = {0};
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(rw_optimize_only(g, "distance", &o, &rep));
  ASSERT_TRUE(rw_entry(&rep, "distance") != NULL);
  ASSERT_CONTAINS(rw_entry(&rep, "distance")->detail, "diagonal");
  loom_tensor in, a, b;
  ASSERT_OK(rw_random_inputs(g, 11, 1000.0, &in));
  for (int i = 0; i < 64 * 3; i++) ((float *)in.data)[i] += 5000.0f;
  ASSERT_OK(rw_run(g, &in, 1, &a, 1));
  ASSERT_OK(rw_run(o, &in, 1, &b, 1));
  for (int i = 0; i < 64; i++) ASSERT_TRUE(rw_get(&b, i * 64 + i) == 0.0);
  for (int i = 0; i < 64 * 64; i++) {
    ASSERT_TRUE(rw_get(&b, i) >= 0.0);
    /* f32 keeps about 7 digits of the norms (~1e8 here): the error is bounded by them */
    ASSERT_NEAR(rw_get(&b, i), rw_get(&a, i), 1e-6 * 4e8 + 1e-4 * rw_get(&a, i));
  }
  loom_tensor_deinit(&in);
  loom_tensor_deinit(&a);
  loom_tensor_deinit(&b);
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(g);
  loom_graph_destroy(o);
}

TEST(distance_same_points_in_two_inputs_never_negative) {
  loom_graph *g = rw_parse(
      "graph g(x: f32[50,3], y: f32[50,3]) {\n  xe = reshape x shape=[50,1,3]\n"
      "  ye = reshape y shape=[1,50,3]\n  diff = sub xe ye\n  sq = mul diff diff\n"
      "  d2 = reduce_sum sq axes=[2]\n  return d2\n}\n");
  loom_graph *o = NULL;
  loom_rewrite_report rep = {0};
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(rw_optimize_only(g, "distance", &o, &rep));
  ASSERT_TRUE(rw_entry(&rep, "distance") != NULL);
  loom_tensor in[2], b;
  ASSERT_OK(rw_random_inputs(g, 5, 100.0, in));
  memcpy(in[1].data, in[0].data, 50 * 3 * sizeof(float));
  ASSERT_OK(rw_run(o, in, 2, &b, 1));
  for (int i = 0; i < 50; i++) {
    double x2 = 0;
    for (int k = 0; k < 3; k++) x2 += rw_get(&in[0], i * 3 + k) * rw_get(&in[0], i * 3 + k);
    double d = rw_get(&b, i * 50 + i);
    ASSERT_TRUE(d >= 0.0);
    ASSERT_TRUE(d <= 1e-6 * x2); /* noise of the norms, not a distance */
  }
  for (int i = 0; i < 50 * 50; i++) ASSERT_TRUE(rw_get(&b, i) >= 0.0);
  loom_tensor_deinit(&in[0]);
  loom_tensor_deinit(&in[1]);
  loom_tensor_deinit(&b);
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(g);
  loom_graph_destroy(o);
}

/* ---- the kNN example --------------------------------------------------------------------- */

static const char *knn_text(int n, int m) {
  static char buf[1024];
  snprintf(buf, sizeof buf,
           "# kNN by brute force: for every row of x, the 10 nearest rows of y\n"
           "graph knn(x: f32[%d,3], y: f32[%d,3]) {\n"
           "  xe       = reshape x shape=[%d,1,3]\n"
           "  ye       = reshape y shape=[1,%d,3]\n"
           "  diff     = sub xe ye                       # f32[%d,%d,3] by broadcasting\n"
           "  sq       = mul diff diff\n"
           "  d2       = reduce_sum sq axes=[2]          : f32[%d,%d]\n"
           "  val, idx = topk d2 k=10 axis=1 largest=false\n"
           "  return val, idx\n"
           "}\n",
           n, m, n, m, n, m, n, m);
  return buf;
}

TEST(distance_knn_example_saves_bytes) {
  loom_graph *g = rw_parse(knn_text(20000, 30000)), *o = NULL;
  loom_rewrite_report rep = {0};
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(loom_graph_optimize(g, NULL, &o, &rep)); /* every rewrite, no limit */
  const loom_rewrite_entry *e = rw_entry(&rep, "distance");
  ASSERT_TRUE(e != NULL);
  ASSERT_TRUE(e->bytes_saved > 0);
  ASSERT_CONTAINS(e->detail, "d2");
  ASSERT_CONTAINS(e->detail, "x f32[20000,3]");
  ASSERT_CONTAINS(e->detail, "y f32[30000,3]");
  int64_t before = rw_peak(g), after = rw_peak(o);
  ASSERT_TRUE(after > 0 && after < before);
  /* n x m x d = 7.2 GB of difference gone: what is left is about n x m floats, twice */
  ASSERT_TRUE(after <= 3 * (int64_t)20000 * 30000 * 4);
  ASSERT_EQ(rw_count_ops(o, LOOM_OP_SUB), 0);
  ASSERT_TRUE(loom_graph_find(o, "val").id >= 0 && loom_graph_find(o, "idx").id >= 0);
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(g);
  loom_graph_destroy(o);
}

TEST(distance_knn_small_same_neighbours) {
  loom_graph *g = rw_parse(knn_text(300, 400)), *o = NULL;
  loom_rewrite_report rep = {0};
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(loom_graph_optimize(g, NULL, &o, &rep));
  ASSERT_TRUE(rw_entry(&rep, "distance") != NULL);
  double worst;
  /* values within tolerance, indices exact (random points: no ties) */
  ASSERT_OK(rw_compare(g, o, 3, 1.0, 1e-5, 1e-4, &worst));
  ASSERT_TRUE(worst <= 1.0);
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(g);
  loom_graph_destroy(o);
}

TEST(distance_disabled_by_name) {
  loom_graph *g = rw_parse(knn_text(300, 400)), *o = NULL;
  loom_rewrite_report rep = {0};
  ASSERT_TRUE(g != NULL);
  const char *off[] = {"distance", "fuse"}; /* fuse would hide the sub in a fused body */
  loom_optimize_options opts;
  loom_optimize_options_init(&opts);
  opts.disabled = off;
  opts.n_disabled = 2;
  ASSERT_OK(loom_graph_optimize(g, &opts, &o, &rep));
  ASSERT_TRUE(rw_entry(&rep, "distance") == NULL);
  ASSERT_EQ(rw_count_ops(o, LOOM_OP_SUB), 1);
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(g);
  loom_graph_destroy(o);
}
