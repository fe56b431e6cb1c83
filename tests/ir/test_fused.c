/* Fused ops in the IR (docs/ir-fusion.md): the text form round-trips byte for byte, a
 * malformed block gets its one-line located message, and loom__fused_check refuses every body
 * that breaks the form, naming the body op. */
#include <stdlib.h>

#include "harness.h"
#include "ir/ir.h"
#include "ir/view.h"
#include "loom/testing.h"
#include "round_trip.h"

static loom_graph *parse_str(const char *text) {
  loom_graph *g = NULL;
  if (loom_graph_parse(text, strlen(text), "t.lir", &g)) return NULL;
  return g;
}

/* Parsing `text` fails with INVALID_ARGUMENT and exactly `msg`, leaving no allocation behind. */
#define ASSERT_PARSE_ERROR(text, msg)                                                               \
  do {                                                                                              \
    int64_t live_ = loom_testing_live_allocations();                                                \
    loom_graph *g_ = (loom_graph *)&live_;                                                          \
    ASSERT_STATUS(loom_graph_parse((text), strlen(text), "t.lir", &g_), LOOM_ERR_INVALID_ARGUMENT); \
    ASSERT_TRUE(g_ == NULL);                                                                        \
    ASSERT_STREQ(loom_last_error(), (msg));                                                         \
    ASSERT_EQ(loom_testing_live_allocations(), live_);                                              \
  } while (0)

/* A fused op (its token at 2:7) over a: f32[4,3] and b: f32[3], its body `lines` from line 3. */
#define F1(lines) "graph g(a: f32[4,3], b: f32[3]) {\n  r = fused {\n" lines "  }\n  return r\n}\n"

/* kernel_mv's region as the pass writes it: a small dot, scalars, elementwise ops, the
 * vector viewed along the reduced axis, the reduction. Printed canonically. */
static const char kmv_text[] =
    "graph kmv(x: f32[6,3], z: f32[5,3], y: f32[6]) {\n"
    "  zt = transpose z perm=[1,0] : f32[3,5]\n"
    "  out = fused {\n"
    "    in a = x\n"
    "    in b = zt\n"
    "    in v = y\n"
    "    d = dot a b : f32[6,5]\n"
    "    h = constant -0.5 : f32[]\n"
    "    e = mul d h : f32[6,5]\n"
    "    k = exp e : f32[6,5]\n"
    "    vb = broadcast v shape=[1,6] : f32[1,6]\n"
    "    vt = transpose vb perm=[1,0] : f32[6,1]\n"
    "    m = mul k vt : f32[6,5]\n"
    "    s = reduce_sum m axes=[0] : f32[5]\n"
    "    out s\n"
    "  }\n"
    "  return out\n"
    "}\n";

TEST(fused_text_round_trip) {
  loom_graph *g = parse_str(kmv_text);
  ASSERT_TRUE(g != NULL);
  char *text;
  ASSERT_ROUND_TRIP(g, &text);
  ASSERT_STREQ(text, kmv_text);
  free(text);
  /* the op: one result typed from the body, the body kept whole */
  const loom__op *op = &g->ops[1];
  ASSERT_EQ(op->kind, LOOM_OP_FUSED);
  ASSERT_TRUE(op->fused != NULL);
  ASSERT_EQ(op->n_inputs, 3);
  ASSERT_EQ(op->n_outputs, 1);
  ASSERT_EQ(g->values[op->outputs[0]].type.dims[0], 5);
  ASSERT_EQ(op->fused->n_ops, 8);
  const loom_graph *body = NULL;
  ASSERT_OK(loom_graph_fused_get(g, 1, &body));
  ASSERT_TRUE(body == op->fused);
  ASSERT_STATUS(loom_graph_fused_get(g, 0, &body), LOOM_ERR_INVALID_ARGUMENT);
  /* memory: the reduction's accumulator (1x the result), no intermediate */
  ASSERT_EQ(loom__op_scratch_bytes(g, op), 5 * 4);
  loom_graph *c = NULL;
  ASSERT_OK(loom_graph_clone(g, &c));
  char why[256];
  ASSERT_TRUE(ir_graph_diff(g, c, why, sizeof why) == NULL);
  loom_graph_destroy(c);
  loom_graph_destroy(g);
}

TEST(fused_text_topk_and_elementwise_in_a_loop) {
  /* a topk body (two results, no accumulator for an elementwise body) nested in a loop */
  static const char text[] =
      "graph g(x: f32[8,4], y: f32[4]) {\n"
      "  v, i = fused {\n"
      "    in a = x\n"
      "    in b = y\n"
      "    bb = broadcast b shape=[1,4] : f32[1,4]\n"
      "    d = sub a bb : f32[8,4]\n"
      "    q = abs d : f32[8,4]\n"
      "    v, i = topk q k=2 axis=1 largest=false\n"
      "    out v\n"
      "    out i\n"
      "  }\n"
      "  l = loop n=8 piece=3 {\n"
      "    in xs = x axis=0\n"
      "    e = fused {\n"
      "      in p = xs\n"
      "      n = neg p : f32[3,4]\n"
      "      t = tanh n : f32[3,4]\n"
      "      out t\n"
      "    }\n"
      "    out e concat axis=0\n"
      "  }\n"
      "  return v, i, l\n"
      "}\n";
  loom_graph *g = parse_str(text);
  if (!g) loom_test_fail(__FILE__, __LINE__, "%s", loom_last_error());
  ASSERT_TRUE(g != NULL);
  char *p;
  ASSERT_ROUND_TRIP(g, &p);
  ASSERT_STREQ(p, text);
  free(p);
  ASSERT_EQ(g->ops[0].n_outputs, 2);
  ASSERT_EQ(g->values[g->ops[0].outputs[1]].type.dtype, LOOM_I64);
  /* the loop's last piece of 2 retypes the fused body inside it */
  loom_graph *tail = NULL;
  ASSERT_OK(loom__loop_body_for(g->ops[1].loop, 2, &tail));
  ASSERT_EQ(tail->ops[0].kind, LOOM_OP_FUSED);
  ASSERT_EQ(tail->ops[0].fused->values[tail->ops[0].fused->params[0]].type.dims[0], 2);
  ASSERT_EQ(loom__op_scratch_bytes(tail, &tail->ops[0]), 0);
  loom_graph_destroy(tail);
  loom_graph_destroy(g);
}

TEST(fused_cannot_be_added_as_a_plain_op) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_create("g", &g));
  loom_type t;
  int64_t dims[1] = {3};
  ASSERT_OK(loom_type_make(LOOM_F32, 1, dims, &t));
  loom_value x = loom_graph_param(g, "x", &t), out;
  ASSERT_STATUS(loom_graph_add(g, LOOM_OP_FUSED, &x, 1, NULL, NULL, NULL, &out, 1),
                LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "only the fusion pass and the parser make it");
  loom_graph_destroy(g);
}

/* ---- malformed blocks ------------------------------------------------------------------- */

TEST(fused_text_errors) {
  ASSERT_PARSE_ERROR("graph g(a: f32[4,3]) {\n  r = fused\n    in x = a\n    out x\n  }\n  return r\n}\n",
                     "t.lir:2:12: error: expected '{' to open the fused op's body, found end of line");
  ASSERT_PARSE_ERROR("graph g(a: f32[4,3]) {\n  r = fused a {\n    in x = a\n    out x\n  }\n  return r\n}\n",
                     "t.lir:2:13: error: fused: takes no operands or attributes, found 'a' (the body's 'in' "
                     "lines name what it "
                     "reads)");
  ASSERT_PARSE_ERROR(F1("    in x = a axis=0\n    n = neg x\n    out n\n"),
                     "t.lir:3:14: error: in: a fused op's 'in' line takes no attributes, found 'axis'");
  ASSERT_PARSE_ERROR(F1("    in x = q\n    n = neg x\n    out n\n"),
                     "t.lir:3:12: error: 'q' is not defined outside the fused op");
  ASSERT_PARSE_ERROR(
      F1("    in x = a\n    n = neg x\n    out n sum\n"),
      "t.lir:5:11: error: out: a fused op's 'out' line names one value, found 'sum' after 'n'");
  ASSERT_PARSE_ERROR(
      F1("    in x = a\n    n = neg x\n"),
      "t.lir:5:3: error: the fused op's body has no 'out' line: a fused op gives at least one result");
  ASSERT_PARSE_ERROR(
      F1("    in x = a\n    n = neg x\n    out n\n    in y = b\n"),
      "t.lir:6:5: error: 'in' after the body's 'out' lines: a fused op's body starts with its 'in' lines");
  ASSERT_PARSE_ERROR(
      F1("    in x = a\n    n = neg b\n    out n\n"),
      "t.lir:4:13: error: 'b' is not defined in the fused op's body (a value from outside enters it through "
      "an 'in' line)");
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r, s = fused {\n    in x = a\n    n = neg x\n    m = abs n\n    out m\n  }\n"
      "  return r\n}\n",
      "t.lir:2:3: error: fused gives 1 result (its 'out' lines), but 2 names are given");
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = fused {\n    in x = a\n    n = neg x\n    m = abs n\n    out m\n  } : "
      "f32[4,3]\n"
      "  return r\n}\n",
      "t.lir:7:5: error: fused: takes no ': TYPE' annotation (its results' types follow from its body)");
}

/* ---- the body's form (loom__fused_check, placed at the fused token by the parser) -------- */

TEST(fused_check_rejections) {
  /* a reduction before the last op */
  ASSERT_PARSE_ERROR(
      F1("    in x = a\n    s = reduce_sum x axes=[1]\n    n = neg s\n    out n\n"),
      "t.lir:2:7: error: fused: fused body: reduce_sum 's': a reduction before the body's last op "
      "(a fused body ends in its one reduction)");
  /* an op outside the form */
  ASSERT_PARSE_ERROR(
      F1("    in x = a\n    c = concat x x axis=0\n    n = neg c\n    out n\n"),
      "t.lir:2:7: error: fused: fused body: concat 'c': is not allowed in a fused body (views of "
      "parameters, scalar constants, elementwise ops, dots of k <= 16, then one reduction, "
      "argmax/argmin or topk)");
  /* a view of a computed value */
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[3,3]) {\n  r = fused {\n    in x = a\n    n = neg x\n    t = transpose n perm=[1,0]\n"
      "    m = abs t\n    out m\n  }\n  return r\n}\n",
      "t.lir:2:7: error: fused: fused body: transpose 't': is a view of a computed value; a fused "
      "body views only its parameters");
  /* an operand of another rank than the space */
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3], b: f32[3]) {\n  r = fused {\n    in x = a\n    in y = b\n    n = add x y\n"
      "    s = reduce_sum n axes=[1]\n    out s\n  }\n  return r\n}\n",
      "t.lir:2:7: error: fused: fused body: add 'n': operand 2 'y' is f32[3], which does not have the rank "
      "of "
      "the space f32[4,3] and broadcast to it");
  /* a dot contracting more than 16 */
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,17], b: f32[17,2]) {\n  r = fused {\n    in x = a\n    in y = b\n    d = dot x y\n"
      "    e = exp d\n    out e\n  }\n  return r\n}\n",
      "t.lir:2:7: error: fused: fused body: dot 'd': contracts 17 elements; a fused dot contracts at most "
      "16");
  /* a dot of a computed value */
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,4], b: f32[4,4]) {\n  r = fused {\n    in x = a\n    in y = b\n    n = neg x\n"
      "    d = dot n y\n    e = exp d\n    out e\n  }\n  return r\n}\n",
      "t.lir:2:7: error: fused: fused body: dot 'd': operand 1 is not a parameter or a view of one (a fused "
      "dot "
      "reads its inputs)");
  /* the final op reading a parameter: nothing computed before it */
  ASSERT_PARSE_ERROR(F1("    in x = a\n    s = reduce_sum x axes=[1]\n    out s\n"),
                     "t.lir:2:7: error: fused: fused body: reduce_sum 's': reads 'x', which is not the last "
                     "elementwise or dot value of the body");
  /* a value computed and never read */
  ASSERT_PARSE_ERROR(F1("    in x = a\n    u = exp x\n    n = neg x\n    m = abs n\n    out m\n"),
                     "t.lir:2:7: error: fused: fused body: exp 'u': its result is never read");
  /* an elementwise body returning something other than its last op */
  ASSERT_PARSE_ERROR(
      F1("    in x = a\n    n = neg x\n    m = abs n\n    out n\n"),
      "t.lir:2:7: error: fused: fused body: abs 'm': a body without a final reduction returns one "
      "value, the result of its last op");
  /* reduce_mean is not a final op */
  ASSERT_PARSE_ERROR(
      F1("    in x = a\n    n = neg x\n    s = reduce_mean n axes=[1]\n    out s\n"),
      "t.lir:2:7: error: fused: fused body: reduce_mean 's': is not an op a fused body may end in "
      "(an elementwise op, a small dot, reduce_sum/prod/max/min, argmax/argmin or topk)");
  /* a rank-0 space */
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[]) {\n  r = fused {\n    in x = a\n    n = neg x\n    m = abs n\n    out m\n  }\n"
      "  return r\n}\n",
      "t.lir:2:7: error: fused: fused body: its space f32[] has rank 0 (a fused op needs rank >= 1)");
}
