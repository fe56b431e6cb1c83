/* A range of a loop as a graph (ir/loop_range.h): its parameters, its loop's length, piece
 * and offsets, its results' lengths, a range of only the last shorter piece, and the ranges
 * refused. tests/share/test_combine.c runs range graphs and combines them. */
#include <string.h>

#include "harness.h"
#include "ir/loop_range.h"

static const char *const concat_lir =
    "graph g(x: f32[10,3], w: f32[3]) {\n z = loop n=10 piece=4 {\n  in xs = x axis=0\n  in ww = w\n"
    "  y = mul xs xs\n  z = add y ww\n  out z concat axis=0\n }\n return z\n}";

TEST(share_range_graph_shape) {
  const char *lir = concat_lir;
  loom_graph *g = NULL, *r = NULL;
  ASSERT_OK(loom_graph_parse(lir, strlen(lir), "t.lir", &g));
  /* pieces [1, 3) of 10 in pieces of 4: elements 4..9, the last piece 2 long */
  ASSERT_OK(loom__loop_range_graph(g, 0, 1, 3, &r));
  int64_t n = 0, piece = 0;
  const loom_graph *body = NULL;
  ASSERT_EQ(loom_graph_param_count(r), 2);
  ASSERT_STREQ(loom_value_name(r, loom_graph_param_at(r, 0)), "x");
  ASSERT_OK(loom_graph_loop_get(r, 0, &body, &n, &piece));
  ASSERT_EQ(n, 6);
  ASSERT_EQ(piece, 4);
  loom_loop_input rule;
  ASSERT_OK(loom_graph_loop_input_rule(r, 0, 0, &rule));
  ASSERT_EQ(rule.offset, 4);
  ASSERT_EQ(loom_value_type(r, loom_graph_output_at(r, 0))->dims[0], 6);
  loom_graph_destroy(r);
  /* only the last piece: a loop of one piece of 2 */
  ASSERT_OK(loom__loop_range_graph(g, 0, 2, 3, &r));
  ASSERT_OK(loom_graph_loop_get(r, 0, &body, &n, &piece));
  ASSERT_EQ(n, 2);
  ASSERT_EQ(piece, 2);
  loom_graph_destroy(r);
  ASSERT_STATUS(loom__loop_range_graph(g, 0, 2, 4, &r), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "pieces [2, 4)");
  ASSERT_TRUE(r == NULL);
  ASSERT_STATUS(loom__loop_range_graph(g, 0, 1, 1, &r), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom__loop_range_graph(g, 1, 0, 1, &r), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "not a loop");
  loom_graph_destroy(g);
}

TEST(share_range_graph_allocation_failures) {
  const char *lir = concat_lir;
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_parse(lir, strlen(lir), "t.lir", &g));
  for (int last_only = 0; last_only < 2; last_only++) {
    loom_test_sweep sw;
    SWEEP_ALLOCATIONS(&sw, 1, 10000) {
      loom_graph *r = NULL;
      loom_status s = SWEEP_RUN(&sw, loom__loop_range_graph(g, 0, last_only ? 2 : 1, 3, &r));
      ASSERT_TRUE(s ? r == NULL : r != NULL);
      loom_graph_destroy(r);
    }
    ASSERT_TRUE(sw.failures > 5);
  }
  loom_graph_destroy(g);
}
