/* The match-and-replace rewrites other than distance: tile_broadcast, reduce_broadcast and
 * dot_transpose, each matched (report entry, op pattern changed), not matched on near misses,
 * and with the same results as the unrewritten graph. */
#include "rw_util.h"

/* Optimizes text with only rewrite `name`; checks the number of its applications and equal
 * results. *out keeps the rewritten graph when out is not NULL. */
static void check_rw(const char *text, const char *name, int expect, double scale, loom_graph **out) {
  loom_graph *g = rw_parse(text), *o = NULL;
  loom_rewrite_report rep = {0};
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(rw_optimize_only(g, name, &o, &rep));
  ASSERT_EQ(rw_count_entries(&rep, name), expect);
  ASSERT_EQ(rep.count, expect);
  for (int32_t i = 0; i < rep.count; i++) ASSERT_TRUE(rep.entries[i].detail[0] != '\0');
  double worst;
  ASSERT_OK(rw_compare(g, o, 42, scale, 1e-5, 1e-4, &worst));
  ASSERT_TRUE(worst <= 1.0);
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(g);
  if (out)
    *out = o;
  else
    loom_graph_destroy(o);
}

/* ---- tile_broadcast ---------------------------------------------------------------------- */

TEST(tile_broadcast_matched) {
  loom_graph *o = NULL;
  check_rw("graph g(x: f32[1,50], y: f32[40,50]) {\n  t = tile x reps=[40,1]\n  s = add t y\n  return s\n}\n",
           "tile_broadcast", 1, 1.0, &o);
  ASSERT_TRUE(o != NULL);
  ASSERT_EQ(rw_count_ops(o, LOOM_OP_TILE), 0);
  ASSERT_EQ(rw_count_ops(o, LOOM_OP_BROADCAST), 1);
  loom_graph_destroy(o);
  /* fewer reps than dimensions (leading reps are 1), a returned tile keeps its name */
  check_rw("graph g(x: f32[3,1,1]) {\n  t = tile x reps=[6,7]\n  return t\n}\n", "tile_broadcast", 1, 1.0,
           &o);
  ASSERT_TRUE(o != NULL);
  ASSERT_STREQ(loom_value_name(o, loom_graph_output_at(o, 0)), "t");
  loom_graph_destroy(o);
}

TEST(tile_broadcast_saves_bytes) {
  loom_graph *g = rw_parse(
                 "graph g(x: f32[1,1000]) {\n  t = tile x reps=[1000,1]\n  s = reduce_max t axes=[1]\n"
                 "  return s\n}\n"),
             *o = NULL;
  loom_rewrite_report rep = {0};
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(rw_optimize_only(g, "tile_broadcast", &o, &rep));
  ASSERT_EQ(rep.count, 1);
  /* the tile's 4 MB less the reduction's now reading x itself */
  ASSERT_EQ(rep.entries[0].bytes_saved, rw_peak(g) - rw_peak(o));
  ASSERT_EQ(rep.entries[0].bytes_saved, 1000 * 1000 * 4 - 4000);
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(g);
  loom_graph_destroy(o);
}

TEST(tile_broadcast_near_miss) {
  /* a repeated axis of size 2 must be copied */
  check_rw("graph g(x: f32[2,50]) {\n  t = tile x reps=[3,1]\n  return t\n}\n", "tile_broadcast", 0, 1.0,
           NULL);
}

/* ---- reduce_broadcast -------------------------------------------------------------------- */

TEST(reduce_broadcast_sum_mean_max_min) {
  static const char *const ops[] = {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min"};
  for (int i = 0; i < 4; i++) {
    char text[512];
    snprintf(text, sizeof text,
             "graph g(x: f32[30]) {\n  b = broadcast x shape=[20,30]\n  r = %s b axes=[0]\n  return r\n}\n",
             ops[i]);
    loom_graph *o = NULL;
    check_rw(text, "reduce_broadcast", 1, 1.0, &o);
    ASSERT_TRUE(o != NULL);
    ASSERT_EQ(rw_count_ops(o, LOOM_OP_MUL), i == 0 ? 1 : 0);
    loom_graph_destroy(o);
  }
}

TEST(reduce_broadcast_chain_keepdims_and_other_axes) {
  /* x[:,None] broadcast to [n,m,k], summed over the broadcast axis and a real one */
  check_rw(
      "graph g(x: f32[8,5]) {\n  r = reshape x shape=[8,1,5]\n  b = broadcast r shape=[8,6,5]\n"
      "  s = reduce_sum b axes=[1,2] keepdims=true\n  return s\n}\n",
      "reduce_broadcast", 1, 1.0, NULL);
  /* a fill reduced: every axis is broadcast */
  check_rw(
      "graph g(x: f32[4]) {\n  f = fill value=1.5 : f32[9,4]\n  s = reduce_sum f axes=[0]\n  t = add s x\n"
      "  return t\n}\n",
      "reduce_broadcast", 1, 1.0, NULL);
  /* integers: exact, with the length wrapping as the sum would */
  check_rw(
      "graph g(x: i32[30]) {\n  b = broadcast x shape=[20,30]\n  r = reduce_sum b axes=[0]\n  return r\n}\n",
      "reduce_broadcast", 1, 1.0, NULL);
}

TEST(reduce_broadcast_near_miss) {
  /* the reduced axis is the input's own */
  check_rw(
      "graph g(x: f32[30]) {\n  b = broadcast x shape=[20,30]\n  r = reduce_sum b axes=[1]\n  return r\n}\n",
      "reduce_broadcast", 0, 1.0, NULL);
  /* a materialized sum of broadcasts is not a broadcast */
  check_rw("graph g(x: f32[30], y: f32[20,1]) {\n  b = add x y\n  r = reduce_sum b axes=[0]\n  return r\n}\n",
           "reduce_broadcast", 0, 1.0, NULL);
}

/* ---- dot_transpose ----------------------------------------------------------------------- */

TEST(dot_transpose_transpose_of_dot_under_reshape) {
  loom_graph *g = rw_parse(
                 "graph g(a: f32[40,16], b: f32[16,30]) {\n  c = dot a b\n  t = transpose c perm=[1,0]\n"
                 "  f = reshape t shape=[1200]\n  return f\n}\n"),
             *o = NULL;
  loom_rewrite_report rep = {0};
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(rw_optimize_only(g, "dot_transpose", &o, &rep));
  ASSERT_EQ(rw_count_entries(&rep, "dot_transpose"), 1);
  ASSERT_TRUE(rep.entries[0].bytes_saved >= 0);
  ASSERT_CONTAINS(rep.entries[0].detail, "t f32[30,40]");
  /* the transposed copy is gone: the reshape reads the new dot's dense result */
  loom_estimate before, after;
  ASSERT_OK(loom_graph_estimate(g, NULL, &before));
  ASSERT_OK(loom_graph_estimate(o, NULL, &after));
  ASSERT_EQ(before.physical_bytes - after.physical_bytes, 30 * 40 * 4);
  loom_estimate_deinit(&before);
  loom_estimate_deinit(&after);
  double worst;
  ASSERT_OK(rw_compare(g, o, 1, 1.0, 1e-5, 1e-4, &worst));
  ASSERT_TRUE(worst <= 1.0);
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(g);
  loom_graph_destroy(o);
}

TEST(dot_transpose_batched_and_reshaped_operand) {
  check_rw(
      "graph g(a: f32[3,8,5], b: f32[3,5,6]) {\n  c = dot a b\n  t = transpose c perm=[0,2,1]\n"
      "  f = reshape t shape=[3,48]\n  return f\n}\n",
      "dot_transpose", 1, 1.0, NULL);
  /* dot(reshape(transpose x)) with the reshape only adding a leading 1: read the view */
  loom_graph *o = NULL;
  check_rw(
      "graph g(x: f32[12,9], b: f32[12,4]) {\n  t = transpose x perm=[1,0]\n  r = reshape t shape=[1,9,12]\n"
      "  c = dot r b\n  return c\n}\n",
      "dot_transpose", 1, 1.0, &o);
  ASSERT_TRUE(o != NULL);
  ASSERT_EQ(rw_count_ops(o, LOOM_OP_DOT), 1);
  ASSERT_STREQ(loom_value_name(o, loom_graph_output_at(o, 0)), "c");
  loom_graph_destroy(o);
}

TEST(dot_transpose_near_misses) {
  /* the transposed product is only read as a view: nothing is materialized */
  check_rw(
      "graph g(a: f32[40,16], b: f32[16,30]) {\n  c = dot a b\n  t = transpose c perm=[1,0]\n"
      "  s = exp t\n  return s\n}\n",
      "dot_transpose", 0, 1.0, NULL);
  /* the product is read elsewhere too */
  check_rw(
      "graph g(a: f32[40,16], b: f32[16,30]) {\n  c = dot a b\n  t = transpose c perm=[1,0]\n"
      "  f = reshape t shape=[1200]\n  return f, c\n}\n",
      "dot_transpose", 0, 1.0, NULL);
  /* a transpose that permutes batch axes */
  check_rw(
      "graph g(a: f32[3,4,5], b: f32[3,5,6]) {\n  c = dot a b\n  t = transpose c perm=[1,0,2]\n"
      "  f = reshape t shape=[72]\n  return f\n}\n",
      "dot_transpose", 0, 1.0, NULL);
}
