/* Quantized values in the IR (docs/ir-quant.md): q8/q4 types and their packed byte sizes, the
 * quantize and dequantize ops through the builder and the text (print -> parse -> print), the
 * estimator's real bytes, and the located message of every malformed use. */
#include <stdlib.h>

#include "harness.h"
#include "ir/ir.h"
#include "loom/plan.h"
#include "loom/testing.h"
#include "round_trip.h"

#define ASSERT_PARSE_ERROR(text, msg)                                                               \
  do {                                                                                              \
    int64_t live_ = loom_testing_live_allocations();                                                \
    loom_graph *g_ = (loom_graph *)&live_;                                                          \
    ASSERT_STATUS(loom_graph_parse((text), strlen(text), "t.lir", &g_), LOOM_ERR_INVALID_ARGUMENT); \
    ASSERT_TRUE(g_ == NULL);                                                                        \
    ASSERT_STREQ(loom_last_error(), (msg));                                                         \
    ASSERT_EQ(loom_testing_live_allocations(), live_);                                              \
  } while (0)

static int64_t bytes_of(loom_dtype dt, int32_t rank, int64_t d0, int64_t d1) {
  loom_type t;
  int64_t dims[2] = {d0, d1}, b = -1;
  if (loom_type_make(dt, rank, dims, &t) || loom_type_bytes(&t, &b)) return -1;
  return b;
}

/* q4 rows take ceil(n/2) bytes each; q8 one byte an element. */
TEST(quant_type_bytes) {
  ASSERT_EQ(bytes_of(LOOM_Q4, 2, 1024, 1024), 1024 * 512);
  ASSERT_EQ(bytes_of(LOOM_Q4, 2, 3, 5), 9);
  ASSERT_EQ(bytes_of(LOOM_Q4, 1, 7, 0), 4);
  ASSERT_EQ(bytes_of(LOOM_Q4, 0, 0, 0), 1);
  ASSERT_EQ(bytes_of(LOOM_Q4, 2, 0, 5), 0);
  ASSERT_EQ(bytes_of(LOOM_Q4, 2, 5, 0), 0);
  ASSERT_EQ(bytes_of(LOOM_Q8, 2, 3, 5), 15);
  ASSERT_TRUE(loom_dtype_is_quantized(LOOM_Q4) && loom_dtype_is_quantized(LOOM_Q8));
  ASSERT_TRUE(!loom_dtype_is_quantized(LOOM_I8) && !loom_dtype_is_integer(LOOM_Q8));
  loom_dtype d;
  ASSERT_TRUE(loom_dtype_parse("q4", 2, &d) && d == LOOM_Q4);
  ASSERT_STREQ(loom_dtype_name(LOOM_Q8), "q8");
}

static const char quant_text[] =
    "graph qdot(x: f32[8,33], w: f32[33,17], wq: q4[33,17], ws: f32[17]) {\n"
    "  q, s = quantize w to=q4 axis=1\n"
    "  q8v, s8 = quantize w to=q8\n"
    "  d = dequantize q s axis=1 : f32[33,17]\n"
    "  d8 = dequantize q8v s8 : f32[33,17]\n"
    "  e = dequantize wq ws axis=-1 : f32[33,17]\n"
    "  y = dot x d : f32[8,17]\n"
    "  return y, d8, e, q\n"
    "}\n";

/* The text reads back as printed, and the C builder makes the same graph. */
TEST(quant_text_round_trip) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_parse(quant_text, strlen(quant_text), "t.lir", &g));
  char *printed;
  ASSERT_ROUND_TRIP(g, &printed);
  ASSERT_STREQ(printed, quant_text);
  free(printed);

  loom_graph *b = NULL;
  int64_t xd[2] = {8, 33}, wd[2] = {33, 17}, sd[1] = {17};
  loom_type xt, wt, qt, st;
  ASSERT_OK(loom_type_make(LOOM_F32, 2, xd, &xt));
  ASSERT_OK(loom_type_make(LOOM_F32, 2, wd, &wt));
  ASSERT_OK(loom_type_make(LOOM_Q4, 2, wd, &qt));
  ASSERT_OK(loom_type_make(LOOM_F32, 1, sd, &st));
  ASSERT_OK(loom_graph_create("qdot", &b));
  loom_value x = loom_graph_param(b, "x", &xt), w = loom_graph_param(b, "w", &wt);
  loom_value wq = loom_graph_param(b, "wq", &qt), ws = loom_graph_param(b, "ws", &st);
  loom_value q, s, q8v, s8;
  ASSERT_OK(loom_quantize(b, w, LOOM_Q4, 1, &q, &s));
  ASSERT_OK(loom_quantize(b, w, LOOM_Q8, -1, &q8v, &s8));
  loom_value d = loom_dequantize(b, q, s, 1), d8 = loom_dequantize(b, q8v, s8, -1);
  loom_attrs a;
  loom_attrs_init(&a);
  a.set = LOOM_ATTR_AXIS;
  a.axis = -1;
  loom_value e, in2[2] = {wq, ws};
  ASSERT_OK(loom_graph_add(b, LOOM_OP_DEQUANTIZE, in2, 2, &a, NULL, NULL, &e, 1));
  loom_value y = loom_dot(b, x, d);
  const char *names[] = {"q", "s", "q8v", "s8", "d", "d8", "e", "y"};
  loom_value vals[] = {q, s, q8v, s8, d, d8, e, y};
  for (int i = 0; i < 8; i++) ASSERT_OK(loom_value_set_name(b, vals[i], names[i]));
  loom_value outs[4] = {y, d8, e, q};
  ASSERT_OK(loom_graph_return(b, outs, 4));
  char why[4096];
  const char *diff = ir_graph_diff(g, b, why, sizeof why);
  if (diff) loom_test_fail(__FILE__, __LINE__, "builder and parser differ: %s", diff);
  loom_graph_destroy(b);

  /* the estimator counts the packed bytes: wq is 33 rows of 9 bytes, q the same, q8v 561 */
  loom_estimate est;
  ASSERT_OK(loom_graph_estimate(g, NULL, &est));
  ASSERT_EQ(est.input_bytes, 8 * 33 * 4 + 33 * 17 * 4 + 33 * 9 + 17 * 4);
  ASSERT_EQ(est.steps[0].output_physical, 33 * 9 + 17 * 4);
  ASSERT_EQ(est.steps[1].output_physical, 33 * 17 + 4);
  loom_estimate_deinit(&est);
  loom_graph_destroy(g);
}

/* Every misuse gets one located line naming the op and the rule. */
TEST(quant_text_errors) {
  ASSERT_PARSE_ERROR("graph g(w: q5[4,3]) {\n  return w\n}\n", "t.lir:1:12: error: unknown dtype 'q5'");
  ASSERT_PARSE_ERROR("graph g(w: q4[4,3]) {\n  r = reshape w shape=[12]\n  return r\n}\n",
                     "t.lir:2:7: error: reshape: operand 1 is q4[4,3]: quantized values are read only by "
                     "dequantize");
  ASSERT_PARSE_ERROR(
      "graph g(w: q4[4,3]) {\n  r = add w w\n  return r\n}\n",
      "t.lir:2:7: error: add: operand 1 is q4[4,3]: quantized values are read only by dequantize");
  ASSERT_PARSE_ERROR(
      "graph g(w: f32[4,3]) {\n  r = cast w to=q4\n  return r\n}\n",
      "t.lir:2:7: error: cast: cannot cast f32[4,3] to q4 (quantize makes quantized values, with "
      "their scale)");
  ASSERT_PARSE_ERROR(
      "graph g() {\n  c = constant [1,2] : q4[2]\n  return c\n}\n",
      "t.lir:2:7: error: constant: cannot make q4 values (quantize makes them, with their scale)");
  ASSERT_PARSE_ERROR("graph g() {\n  c = fill value=1 : q8[2]\n  return c\n}\n",
                     "t.lir:2:7: error: fill: cannot make q8 values (quantize makes them, with their scale)");
  ASSERT_PARSE_ERROR(
      "graph g(w: q4[4,3], s: f32[4]) {\n  r = dequantize w s axis=1\n  return r\n}\n",
      "t.lir:2:7: error: dequantize: the scale of q4[4,3] per channel along axis 1 must be f32[3], "
      "got f32[4]");
  ASSERT_PARSE_ERROR("graph g(w: q4[4,3], s: f32[3]) {\n  r = dequantize w s\n  return r\n}\n",
                     "t.lir:2:7: error: dequantize: a per-tensor scale (no axis=A) is f32[], got f32[3]");
  ASSERT_PARSE_ERROR("graph g(w: i8[4,3], s: f32[]) {\n  r = dequantize w s\n  return r\n}\n",
                     "t.lir:2:7: error: dequantize: takes a quantized value (q8 or q4) first, got i8[4,3]");
  ASSERT_PARSE_ERROR("graph g(w: f32[4,3]) {\n  q, s = quantize w to=i8\n  return q\n}\n",
                     "t.lir:2:10: error: quantize: to=i8 is not a quantized dtype (q8 or q4)");
  ASSERT_PARSE_ERROR("graph g(w: f32[4,3]) {\n  q, s = quantize w\n  return q\n}\n",
                     "t.lir:2:10: error: quantize: needs attribute 'to'");
  ASSERT_PARSE_ERROR("graph g(w: f64[4,3]) {\n  q, s = quantize w to=q8\n  return q\n}\n",
                     "t.lir:2:10: error: quantize: takes f32, got f64[4,3]");
  ASSERT_PARSE_ERROR("graph g(w: f32[4,3]) {\n  q, s = quantize w to=q4 axis=2\n  return q\n}\n",
                     "t.lir:2:10: error: quantize: axis 2 is out of range for f32[4,3] (rank 2)");
  ASSERT_PARSE_ERROR(
      "graph g(w: q4[4,3], s: f32[3]) {\n  r = dequantize w s axis=1 : f32[4,4]\n  return r\n}\n",
      "t.lir:2:31: error: dequantize: declared type f32[4,4] does not equal the inferred type "
      "f32[4,3]");
  /* a loop cuts q4 rows at whole bytes only */
  ASSERT_PARSE_ERROR(
      "graph g(w: q4[2,6], s: f32[]) {\n  r = loop n=6 piece=3 {\n    in ws = w axis=1\n"
      "    in ss = s\n    d = dequantize ws ss\n    out d concat axis=1\n  }\n  return r\n}\n",
      "t.lir:2:7: error: loop: operand 'w' (q4[2,6]): a q4 row is sliced at whole bytes: piece 3 "
      "and offset 0 must be even");
}
