/* The reorder rewrites: dot chains in matrix-chain order (a chain that fits a limit only
 * after reordering) and sums of broadcasts with the small operands added first. */
#include "rw_util.h"

/* ---- dot_chain --------------------------------------------------------------------------- */

#define CHAIN_N 2048
#define CHAIN_K 8

static const char *chain_text(void) {
  static char buf[512];
  snprintf(buf, sizeof buf,
           "graph chain(a: f32[%d,%d], b: f32[%d,%d], v: f32[%d]) {\n"
           "  ab = dot a b     # n x n: 16 MiB\n"
           "  r = dot ab v\n"
           "  return r\n}\n",
           CHAIN_N, CHAIN_K, CHAIN_K, CHAIN_N, CHAIN_N);
  return buf;
}

TEST(dot_chain_fits_limit_only_after_reordering) {
  const int64_t limit = 1 << 20; /* 1 MiB */
  loom_graph *g = rw_parse(chain_text()), *o = NULL;
  loom_rewrite_report rep = {0};
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(rw_optimize_only(g, "dot_chain", &o, &rep));
  const loom_rewrite_entry *e = rw_entry(&rep, "dot_chain");
  ASSERT_TRUE(e != NULL);
  ASSERT_CONTAINS(e->detail, "(a.b).v -> a.(b.v)");
  int64_t before = rw_peak(g), after = rw_peak(o);
  ASSERT_TRUE(before > limit);
  ASSERT_TRUE(after <= limit);
  ASSERT_EQ(e->bytes_saved, before - after);
  ASSERT_STREQ(loom_value_name(o, loom_graph_output_at(o, 0)), "r");
  double worst;
  ASSERT_OK(rw_compare(g, o, 9, 1.0, 1e-4, 1e-4, &worst));
  ASSERT_TRUE(worst <= 1.0);
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(o);

  /* the whole pipeline under the limit: reordering is what makes it fit */
  loom_optimize_options opts;
  loom_optimize_options_init(&opts);
  opts.limit = limit;
  ASSERT_OK(loom_graph_optimize(g, &opts, &o, &rep));
  ASSERT_TRUE(rw_entry(&rep, "dot_chain") != NULL);
  ASSERT_TRUE(rw_peak(o) <= limit);
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(o);
  loom_graph_destroy(g);
}

TEST(dot_chain_longer_chains_equal_results) {
  static const char *const texts[] = {
      /* four matrices: the flop-optimal order is not the written one */
      "graph g(a: f32[10,100], b: f32[100,5], c: f32[5,50], d: f32[50,40]) {\n"
      "  ab = dot a b\n  abc = dot ab c\n  r = dot abc d\n  return r\n}\n",
      /* a row vector first: u.(A.B) -> (u.A).B */
      "graph g(u: f32[60], a: f32[60,70], b: f32[70,80]) {\n  ab = dot a b\n  r = dot u ab\n  return r\n}\n",
      /* both ends vectors, a scalar: u.(a.(b.w)) saves a few flops */
      "graph g(u: f32[60], a: f32[60,70], b: f32[70,80], w: f32[80]) {\n"
      "  ua = dot u a\n  uab = dot ua b\n  r = dot uab w\n  return r\n}\n",
  };
  for (int i = 0; i < 3; i++) {
    loom_graph *g = rw_parse(texts[i]), *o = NULL;
    loom_rewrite_report rep = {0};
    ASSERT_TRUE(g != NULL);
    ASSERT_OK(rw_optimize_only(g, "dot_chain", &o, &rep));
    ASSERT_EQ(rw_count_entries(&rep, "dot_chain"), 1);
    double worst;
    ASSERT_OK(rw_compare(g, o, 5 + i, 1.0, 1e-4, 1e-4, &worst));
    ASSERT_TRUE(worst <= 1.0);
    loom_rewrite_report_deinit(&rep);
    loom_graph_destroy(g);
    loom_graph_destroy(o);
  }
}

TEST(dot_chain_near_misses) {
  static const char *const texts[] = {
      /* already in the best order */
      "graph g(a: f32[500,500], b: f32[500,500], v: f32[500]) {\n  bv = dot b v\n  r = dot a bv\n  return "
      "r\n}\n",
      /* the inner product is returned too: no chain */
      "graph g(a: f32[300,4], b: f32[4,300], v: f32[300]) {\n  ab = dot a b\n  r = dot ab v\n  return r, "
      "ab\n}\n",
      /* batched dots are not chains */
      "graph g(a: f32[2,300,4], b: f32[2,4,300], v: f32[2,300,1]) {\n  ab = dot a b\n  r = dot ab v\n  "
      "return r\n}\n",
  };
  for (int i = 0; i < 3; i++) {
    loom_graph *g = rw_parse(texts[i]), *o = NULL;
    loom_rewrite_report rep = {0};
    ASSERT_TRUE(g != NULL);
    ASSERT_OK(rw_optimize_only(g, "dot_chain", &o, &rep));
    ASSERT_EQ(rep.count, 0);
    loom_rewrite_report_deinit(&rep);
    loom_graph_destroy(g);
    loom_graph_destroy(o);
  }
}

/* ---- sum_broadcast ----------------------------------------------------------------------- */

TEST(sum_broadcast_scalar_added_first) {
  loom_graph *g = rw_parse(
                 "graph g(x: f32[1000], y: f32[1000], s: f32[]) {\n"
                 "  xr = reshape x shape=[1000,1]\n  yr = reshape y shape=[1,1000]\n"
                 "  a = add xr yr\n  b = add a s\n  return b\n}\n"),
             *o = NULL;
  loom_rewrite_report rep = {0};
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(rw_optimize_only(g, "sum_broadcast", &o, &rep));
  const loom_rewrite_entry *e = rw_entry(&rep, "sum_broadcast");
  ASSERT_TRUE(e != NULL);
  /* one n x m sum alive instead of two, less the small one (x + s) */
  ASSERT_EQ(e->bytes_saved, rw_peak(g) - rw_peak(o));
  ASSERT_TRUE(e->bytes_saved >= 1000 * 1000 * 4 - 8000);
  ASSERT_STREQ(loom_value_name(o, loom_graph_output_at(o, 0)), "b");
  double worst;
  ASSERT_OK(rw_compare(g, o, 4, 1.0, 1e-5, 1e-4, &worst));
  ASSERT_TRUE(worst <= 1.0);
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(g);
  loom_graph_destroy(o);
}

TEST(sum_broadcast_explicit_broadcasts) {
  loom_graph *g = rw_parse(
                 "graph g(x: f32[300], y: f32[200], z: f32[300,1]) {\n"
                 "  xb = broadcast x shape=[200,300]\n  yr = reshape y shape=[200,1]\n"
                 "  yb = broadcast yr shape=[200,300]\n"
                 "  a = add xb yb\n  zt = reshape z shape=[300]\n  b = add a zt\n  c = add b xb\n"
                 "  return c\n}\n"),
             *o = NULL;
  loom_rewrite_report rep = {0};
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(rw_optimize_only(g, "sum_broadcast", &o, &rep));
  ASSERT_EQ(rw_count_entries(&rep, "sum_broadcast"), 1);
  ASSERT_TRUE(rw_peak(o) < rw_peak(g));
  double worst;
  ASSERT_OK(rw_compare(g, o, 8, 1.0, 1e-5, 1e-4, &worst));
  ASSERT_TRUE(worst <= 1.0);
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(g);
  loom_graph_destroy(o);
}

TEST(sum_broadcast_near_misses) {
  static const char *const texts[] = {
      /* operands of one shape: no order is cheaper */
      ("graph g(x: f32[100,100], y: f32[100,100], z: f32[100,100]) {\n"
       "  a = add x y\n  b = add a z\n  return b\n}\n"),
      /* the inner sum is read elsewhere */
      "graph g(x: f32[100], y: f32[100,1], s: f32[]) {\n  a = add x y\n  b = add a s\n  return b, a\n}\n",
      /* a difference is not a sum */
      "graph g(x: f32[100], y: f32[100,1], s: f32[]) {\n  a = sub x y\n  b = add a s\n  return b\n}\n",
  };
  for (int i = 0; i < 3; i++) {
    loom_graph *g = rw_parse(texts[i]), *o = NULL;
    loom_rewrite_report rep = {0};
    ASSERT_TRUE(g != NULL);
    ASSERT_OK(rw_optimize_only(g, "sum_broadcast", &o, &rep));
    ASSERT_EQ(rep.count, 0);
    loom_rewrite_report_deinit(&rep);
    loom_graph_destroy(g);
    loom_graph_destroy(o);
  }
}
