/* Loops in the IR (graph.h "loops"): the builder's checks, result types and the retyped last
 * piece. Running loops is tested in tests/runtime; .lir loops in test_loop_text.c. */
#include <string.h>

#include "harness.h"
#include "ir/ir.h"
#include "loom/graph.h"

static loom_type type2(loom_dtype dt, int64_t a, int64_t b) {
  loom_type t;
  loom_type_make(dt, 2, (int64_t[]){a, b}, &t);
  return t;
}

/* body(xs: f32[piece,3]) -> (neg xs, reduce_sum xs over axis 0) */
static loom_graph *rows_body(int64_t piece) {
  loom_graph *b = NULL;
  loom_graph_create("body", &b);
  loom_type t = type2(LOOM_F32, piece, 3);
  loom_value xs = loom_graph_param(b, "xs", &t);
  int64_t ax = 0;
  loom_value outs[2] = {loom_unary(b, LOOM_OP_NEG, xs),
                        loom_reduce(b, LOOM_OP_REDUCE_SUM, xs, 1, &ax, false)};
  loom_graph_return(b, outs, 2);
  return b;
}

TEST(loop_result_types_and_last_piece) {
  loom_graph *g = NULL, *b = rows_body(4);
  ASSERT_OK(loom_graph_create("main", &g));
  loom_type xt = type2(LOOM_F32, 10, 3);
  loom_value x = loom_graph_param(g, "x", &xt);
  loom_loop_input rule = {0, 0, 0, 0};
  loom_loop_output comb[2] = {{LOOM_COMBINE_CONCAT, 0, 0, false}, {LOOM_COMBINE_SUM, 0, 0, false}};
  loom_value r[2];
  ASSERT_OK(loom_graph_add_loop(g, 10, 4, b, &x, &rule, 1, comb, 2, r));
  char buf[LOOM_TYPE_STRING_MAX];
  ASSERT_STREQ(loom_type_format(loom_value_type(g, r[0]), buf, sizeof buf), "f32[10,3]");
  ASSERT_STREQ(loom_type_format(loom_value_type(g, r[1]), buf, sizeof buf), "f32[3]");
  ASSERT_OK(loom_graph_return(g, r, 2));
  ASSERT_OK(loom_graph_verify(g));
  const loom__op *op = &g->ops[g->n_ops - 1];
  ASSERT_EQ(loom__loop_trips(op->loop), 3);
  loom_graph *tail = NULL;
  ASSERT_OK(loom__loop_body_for(op->loop, 2, &tail));
  ASSERT_STREQ(loom_type_format(&tail->values[tail->params[0]].type, buf, sizeof buf), "f32[2,3]");
  ASSERT_STREQ(loom_type_format(&tail->values[tail->outputs[0]].type, buf, sizeof buf), "f32[2,3]");
  loom_graph_destroy(tail);
  loom_graph *c = NULL;
  ASSERT_OK(loom_graph_clone(g, &c));
  ASSERT_EQ(c->ops[c->n_ops - 1].loop->n, 10);
  loom_graph_destroy(c);
  loom_graph_destroy(g);
  loom_graph_destroy(b);
}

TEST(loop_refuses_bad_rules_and_combines) {
  loom_graph *g = NULL, *b = rows_body(4);
  ASSERT_OK(loom_graph_create("main", &g));
  loom_type xt = type2(LOOM_F32, 10, 3);
  loom_value x = loom_graph_param(g, "x", &xt), r[2];
  loom_loop_input rule = {0, 0, 0, 0};
  /* a result that varies with the piece must be concatenated */
  loom_loop_output sum_both[2] = {{LOOM_COMBINE_SUM, 0, 0, false}, {LOOM_COMBINE_SUM, 0, 0, false}};
  ASSERT_EQ(loom_graph_add_loop(g, 10, 4, b, &x, &rule, 1, sum_both, 2, r), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(strstr(loom_last_error(), "varies with the piece") != NULL);
  loom_graph_destroy(g);
  ASSERT_OK(loom_graph_create("main", &g));
  x = loom_graph_param(g, "x", &xt);
  /* offset past the end */
  loom_loop_input late = {0, 1, 0, 0};
  loom_loop_output ok[2] = {{LOOM_COMBINE_CONCAT, 0, 0, false}, {LOOM_COMBINE_SUM, 0, 0, false}};
  ASSERT_EQ(loom_graph_add_loop(g, 10, 4, b, &x, &late, 1, ok, 2, r), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(strstr(loom_last_error(), "offset") != NULL);
  loom_graph_destroy(g);
  ASSERT_OK(loom_graph_create("main", &g));
  x = loom_graph_param(g, "x", &xt);
  /* piece larger than n; an op added as a plain op */
  ASSERT_EQ(loom_graph_add_loop(g, 10, 11, b, &x, &rule, 1, ok, 2, r), LOOM_ERR_INVALID_ARGUMENT);
  loom_graph_destroy(g);
  ASSERT_OK(loom_graph_create("main", &g));
  x = loom_graph_param(g, "x", &xt);
  loom_value out;
  ASSERT_EQ(loom_graph_add(g, LOOM_OP_LOOP, &x, 1, NULL, NULL, NULL, &out, 1), LOOM_ERR_INVALID_ARGUMENT);
  loom_graph_destroy(g);
  loom_graph_destroy(b);
}

TEST(loop_estimate_does_not_grow_with_trips) {
  int64_t peaks[2];
  for (int i = 0; i < 2; i++) {
    int64_t n = i == 0 ? 100 : 100000;
    loom_graph *g = NULL, *b = rows_body(4);
    ASSERT_OK(loom_graph_create("main", &g));
    loom_type xt = type2(LOOM_F32, n, 3);
    loom_value x = loom_graph_param(g, "x", &xt), r[2];
    loom_loop_input rule = {0, 0, 0, 0};
    loom_loop_output comb[2] = {{LOOM_COMBINE_CONCAT, 0, 0, false}, {LOOM_COMBINE_SUM, 0, 0, false}};
    ASSERT_OK(loom_graph_add_loop(g, n, 4, b, &x, &rule, 1, comb, 2, r));
    /* x is streamed in (read only by the loop) and r[0] out (only returned) */
    ASSERT_OK(loom_graph_return(g, r, 2));
    loom_estimate e;
    ASSERT_OK(loom_graph_estimate(g, NULL, &e));
    peaks[i] = e.peak_bytes;
    ASSERT_EQ(e.input_bytes, 0);
    loom_estimate_deinit(&e);
    loom_graph_destroy(g);
    loom_graph_destroy(b);
  }
  ASSERT_EQ(peaks[0], peaks[1]);
}
