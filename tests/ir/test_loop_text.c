/* Loops in .lir text (docs/ir-loops.md): the parser builds what the C builder builds, the
 * printer writes the canonical nested block, print -> parse -> print is byte-identical (nested
 * loops and unnamed values too), and every malformed loop gets its one-line located message. */
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "ir/ir.h"
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

/* A loop over a's 4 rows in pieces of 2 (the loop token at 2:7), its body `lines` from line 3. */
#define L1(lines) "graph g(a: f32[4,3], b: f32[3]) {\n  r = loop n=4 piece=2 {\n" lines "  }\n  return r\n}\n"

#define ASSERT_CANONICAL(text)                            \
  do {                                                    \
    loom_graph *gc_ = parse_str(text);                    \
    ASSERT_OK(gc_ ? LOOM_OK : LOOM_ERR_INVALID_ARGUMENT); \
    char *pc_;                                            \
    ASSERT_ROUND_TRIP(gc_, &pc_);                         \
    ASSERT_STREQ(pc_, (text));                            \
    free(pc_);                                            \
    loom_graph_destroy(gc_);                              \
  } while (0)

static const char *type_of(const loom_graph *g, loom_value v, char *buf) {
  const loom_type *t = loom_value_type(g, v);
  return t ? loom_type_format(t, buf, LOOM_TYPE_STRING_MAX) : "?";
}

/* The loop op of g (the first one). */
static const loom__op *first_loop(const loom_graph *g) {
  for (int32_t i = 0; i < g->n_ops; i++)
    if (g->ops[i].loop) return &g->ops[i];
  return NULL;
}

/* ---- good text -------------------------------------------------------------------------- */

/* The syntax as docs/ir-loops.md introduces it, comments and alignment included. */
static const char knn_loop_text[] =
    "graph knn(x: f32[1000,3], y: f32[500,3]) {\n"
    "  yt = transpose y perm=[1,0]\n"
    "  val, idx = loop n=1000 piece=256 {\n"
    "    in xs = x axis=0            # sliced along axis 0 (offset=O optional, default 0)\n"
    "    in yy = yt                  # passed whole\n"
    "    d = dot xs yy\n"
    "    v, i = topk d k=10 axis=1 largest=false\n"
    "    out v concat axis=0\n"
    "    out i concat axis=0\n"
    "  }\n"
    "  return val, idx\n"
    "}\n";

TEST(loop_text_knn_example) {
  loom_graph *g = parse_str(knn_loop_text);
  ASSERT_OK(g ? LOOM_OK : LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_OK(loom_graph_verify(g));
  ASSERT_EQ(loom_graph_op_count(g), 2);
  char tb[LOOM_TYPE_STRING_MAX];
  ASSERT_STREQ(type_of(g, loom_graph_find(g, "val"), tb), "f32[1000,10]");
  ASSERT_STREQ(type_of(g, loom_graph_find(g, "idx"), tb), "i64[1000,10]");
  /* Body names stay in the body. */
  ASSERT_EQ(loom_graph_find(g, "xs").id, -1);
  ASSERT_EQ(loom_graph_find(g, "d").id, -1);
  const loom__op *op = first_loop(g);
  ASSERT_TRUE(op != NULL);
  ASSERT_EQ(op->line, 3);
  ASSERT_EQ(op->col, 14);
  ASSERT_EQ(op->n_inputs, 2);
  ASSERT_EQ(op->inputs[0], loom_graph_find(g, "x").id);
  ASSERT_EQ(op->inputs[1], loom_graph_find(g, "yt").id);
  const loom_graph *body = NULL;
  int64_t n = 0, piece = 0;
  ASSERT_OK(loom_graph_loop_get(g, 1, &body, &n, &piece));
  ASSERT_EQ(n, 1000);
  ASSERT_EQ(piece, 256);
  ASSERT_EQ(loom__loop_trips(op->loop), 4);
  ASSERT_EQ(op->loop->rules[0].axis, 0);
  ASSERT_EQ(op->loop->rules[0].offset, 0);
  ASSERT_EQ(op->loop->rules[1].axis, -1);
  ASSERT_EQ(op->loop->combines[0].combine, LOOM_COMBINE_CONCAT);
  ASSERT_EQ(op->loop->combines[1].combine, LOOM_COMBINE_CONCAT);
  ASSERT_EQ(op->loop->combines[1].axis, 0);
  ASSERT_STREQ(type_of(body, loom_graph_find(body, "xs"), tb), "f32[256,3]");
  ASSERT_STREQ(type_of(body, loom_graph_find(body, "yy"), tb), "f32[3,500]");
  ASSERT_STREQ(type_of(body, loom_graph_find(body, "d"), tb), "f32[256,500]");
  /* Body ops keep their own places. */
  ASSERT_EQ(body->ops[0].line, 6);
  ASSERT_EQ(body->ops[0].col, 9);
  ASSERT_EQ(body->ops[1].line, 7);
  char *text;
  ASSERT_ROUND_TRIP(g, &text);
  ASSERT_STREQ(text,
               "graph knn(x: f32[1000,3], y: f32[500,3]) {\n"
               "  yt = transpose y perm=[1,0] : f32[3,500]\n"
               "  val, idx = loop n=1000 piece=256 {\n"
               "    in xs = x axis=0\n"
               "    in yy = yt\n"
               "    d = dot xs yy : f32[256,500]\n"
               "    v, i = topk d k=10 axis=1 largest=false\n"
               "    out v concat axis=0\n"
               "    out i concat axis=0\n"
               "  }\n"
               "  return val, idx\n"
               "}\n");
  free(text);
  loom_graph_destroy(g);
}

/* Each combine, in canonical text: parsed into the right loom_loop_output, printed back as is.
 * n = 10 in pieces of 4 leaves a last piece of 2, still k long for topk. */
static const char every_combine_text[] =
    "graph combines(x: f32[10,4]) {\n"
    "  c, s, p, mx, mn, av, ai, nv, ni, tv, ti = loop n=10 piece=4 {\n"
    "    in xs = x axis=0\n"
    "    e = exp xs : f32[4,4]\n"
    "    s = reduce_sum xs axes=[0] : f32[4]\n"
    "    p = reduce_prod xs axes=[0] : f32[4]\n"
    "    mx = reduce_max xs axes=[0] : f32[4]\n"
    "    mn = reduce_min xs axes=[0] : f32[4]\n"
    "    av = reduce_max xs axes=[0] : f32[4]\n"
    "    ai = argmax xs axis=0 : i64[4]\n"
    "    nv = reduce_min xs axes=[0] : f32[4]\n"
    "    ni = argmin xs axis=0 : i64[4]\n"
    "    tv, ti = topk xs k=2 axis=0 largest=false\n"
    "    out e concat axis=0\n"
    "    out s sum\n"
    "    out p prod\n"
    "    out mx max\n"
    "    out mn min\n"
    "    out av argmax\n"
    "    out ai index\n"
    "    out nv argmin\n"
    "    out ni index\n"
    "    out tv topk axis=0 k=2 largest=false\n"
    "    out ti index\n"
    "  }\n"
    "  return c, s, p, mx, mn, av, ai, nv, ni, tv, ti\n"
    "}\n";

TEST(loop_text_every_combine) {
  ASSERT_CANONICAL(every_combine_text);
  loom_graph *g = parse_str(every_combine_text);
  ASSERT_TRUE(g != NULL);
  const loom__op *op = first_loop(g);
  ASSERT_EQ(op->n_outputs, 11);
  const loom_combine want[11] = {LOOM_COMBINE_CONCAT, LOOM_COMBINE_SUM,    LOOM_COMBINE_PROD,
                                 LOOM_COMBINE_MAX,    LOOM_COMBINE_MIN,    LOOM_COMBINE_ARGMAX,
                                 LOOM_COMBINE_INDEX,  LOOM_COMBINE_ARGMIN, LOOM_COMBINE_INDEX,
                                 LOOM_COMBINE_TOPK,   LOOM_COMBINE_INDEX};
  for (int j = 0; j < 11; j++) ASSERT_EQ(op->loop->combines[j].combine, want[j]);
  ASSERT_EQ(op->loop->combines[9].axis, 0);
  ASSERT_EQ(op->loop->combines[9].k, 2);
  ASSERT_TRUE(!op->loop->combines[9].largest);
  char tb[LOOM_TYPE_STRING_MAX];
  ASSERT_STREQ(type_of(g, loom_graph_find(g, "c"), tb), "f32[10,4]");
  ASSERT_STREQ(type_of(g, loom_graph_find(g, "s"), tb), "f32[4]");
  ASSERT_STREQ(type_of(g, loom_graph_find(g, "ai"), tb), "i64[4]");
  ASSERT_STREQ(type_of(g, loom_graph_find(g, "tv"), tb), "f32[2,4]");
  ASSERT_STREQ(type_of(g, loom_graph_find(g, "ti"), tb), "i64[2,4]");
  loom_graph_destroy(g);
  /* topk's largest may be left out: true, as topk's own; it prints. */
  loom_graph *h = parse_str(
      "graph g(a: f32[4,3]) {\n  v, i = loop n=4 piece=2 {\n    in x = a axis=0\n"
      "    tv, ti = topk x k=2 axis=0\n    out tv topk k=2 axis=0\n    out ti index\n  }\n"
      "  return v, i\n}\n");
  ASSERT_TRUE(h != NULL);
  ASSERT_TRUE(first_loop(h)->loop->combines[0].largest);
  char *text = NULL;
  ASSERT_OK(loom_graph_to_string(h, &text));
  ASSERT_CONTAINS(text, "    out tv topk axis=0 k=2 largest=true\n");
  free(text);
  loom_graph_destroy(h);
}

/* A loop in a loop's body, the inner one reading a value its enclosing body passes whole; a
 * body may reuse the names of the graph around it. */
static const char nested_text[] =
    "graph nested(x: f32[8,3], y: f32[6,3]) {\n"
    "  r, t = loop n=8 piece=4 {\n"
    "    in xs = x axis=0\n"
    "    in y = y\n"
    "    s = loop n=6 piece=4 {\n"
    "      in x = y axis=0\n"
    "      u = reduce_sum x axes=[0] : f32[3]\n"
    "      out u sum\n"
    "    }\n"
    "    z = add xs s : f32[4,3]\n"
    "    out z concat axis=0\n"
    "    out s max\n"
    "  }\n"
    "  return r, t\n"
    "}\n";

TEST(loop_text_nested) {
  ASSERT_CANONICAL(nested_text);
  loom_graph *g = parse_str(nested_text);
  ASSERT_TRUE(g != NULL);
  const loom_graph *outer = NULL, *inner = NULL;
  ASSERT_OK(loom_graph_loop_get(g, 0, &outer, NULL, NULL));
  int64_t n = 0, piece = 0;
  ASSERT_OK(loom_graph_loop_get(outer, 0, &inner, &n, &piece));
  ASSERT_EQ(n, 6);
  ASSERT_EQ(piece, 4);
  ASSERT_EQ(loom__loop_trips(outer->ops[0].loop), 2); /* 4 and a last piece of 2 */
  char tb[LOOM_TYPE_STRING_MAX];
  ASSERT_STREQ(type_of(inner, loom_graph_find(inner, "x"), tb), "f32[4,3]");
  ASSERT_STREQ(type_of(outer, loom_graph_find(outer, "s"), tb), "f32[3]");
  ASSERT_STREQ(type_of(g, loom_graph_find(g, "r"), tb), "f32[8,3]");
  ASSERT_EQ(inner->ops[0].line, 7);
  ASSERT_EQ(inner->ops[0].col, 11);
  ASSERT_EQ(outer->ops[0].line, 5);
  ASSERT_EQ(outer->ops[0].col, 9);
  loom_graph_destroy(g);
  /* A body's names do not outlive it. */
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop n=4 piece=2 {\n    in x = a axis=0\n"
      "    z = neg x\n    out z concat axis=0\n  }\n  w = neg z\n  return w\n}\n",
      "t.lir:7:11: error: 'z' is not defined");
  /* And an inner body sees neither its enclosing body's names nor the graph's. */
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop n=4 piece=2 {\n    in x = a\n"
      "    s = loop n=4 piece=2 {\n      in w = x axis=0\n      z = add w a\n"
      "      out z concat axis=0\n    }\n    out s max\n  }\n  return r\n}\n",
      "t.lir:6:17: error: 'a' is not defined in the loop's body (a value from outside "
      "enters it through an 'in' line)");
}

/* The last, shorter piece: typed when the loop is built, the body retyped for it. */
TEST(loop_text_last_shorter_piece) {
  loom_graph *g = parse_str(
      "graph g(x: f32[10,4]) {\n  r = loop n=10 piece=4 {\n    in xs = x axis=0\n"
      "    y = reshape xs shape=[4,2,2]\n    out y concat axis=0\n  }\n  return r\n}\n");
  ASSERT_TRUE(g != NULL);
  const loom__op *op = first_loop(g);
  ASSERT_EQ(loom__loop_trips(op->loop), 3);
  loom_graph *tail = NULL;
  ASSERT_OK(loom__loop_body_for(op->loop, 2, &tail));
  char tb[LOOM_TYPE_STRING_MAX];
  ASSERT_STREQ(type_of(tail, loom_graph_find(tail, "xs"), tb), "f32[2,4]");
  ASSERT_STREQ(type_of(tail, loom_graph_find(tail, "y"), tb), "f32[2,2,2]");
  loom_graph_destroy(tail);
  ASSERT_STREQ(type_of(g, loom_graph_find(g, "r"), tb), "f32[10,2,2]");
  char *text;
  ASSERT_ROUND_TRIP(g, &text);
  ASSERT_CONTAINS(text, "    y = reshape xs shape=[4,2,2] : f32[4,2,2]\n");
  free(text);
  loom_graph_destroy(g);
}

/* Offsets: printed where not 0; two slices of one value at different offsets. */
TEST(loop_text_offsets) {
  ASSERT_CANONICAL(
      "graph offs(x: f32[12,2]) {\n"
      "  r = loop n=8 piece=3 {\n"
      "    in a = x axis=0 offset=4\n"
      "    in b = x axis=0\n"
      "    c = sub a b : f32[3,2]\n"
      "    out c concat axis=0\n"
      "  }\n"
      "  return r\n"
      "}\n");
  loom_graph *g = parse_str(
      "graph offs(x: f32[12,2]) {\n  r = loop piece=3 n=8 {\n"
      "    in a = x offset=4 axis=0\n    in b = x axis=0 offset=0\n"
      "    c = sub a b\n    out c concat axis=0\n  }\n  return r\n}\n");
  ASSERT_TRUE(g != NULL);
  const loom__op *op = first_loop(g);
  ASSERT_EQ(op->loop->rules[0].axis, 0);
  ASSERT_EQ(op->loop->rules[0].offset, 4);
  ASSERT_EQ(op->loop->rules[1].offset, 0);
  char *text = NULL;
  ASSERT_OK(loom_graph_to_string(g, &text));
  ASSERT_CONTAINS(text, "  r = loop n=8 piece=3 {\n    in a = x axis=0 offset=4\n    in b = x axis=0\n");
  free(text);
  loom_graph_destroy(g);
  /* An offset past what the axis holds is the builder's error, placed at the loop. */
  ASSERT_PARSE_ERROR(
      "graph offs(x: f32[12,2]) {\n  r = loop n=8 piece=3 {\n    in a = x axis=0 offset=5\n"
      "    out a concat axis=0\n  }\n  return r\n}\n",
      "t.lir:2:7: error: loop: operand 'x' (f32[12,2]): axis 0 holds 12 elements, fewer than offset 5 + n 8");
}

/* A loop built from C with unnamed values: each graph names its own values v<id>, the body's
 * counted in the body, and the text reads back to the same graph. */
TEST(loop_text_unnamed_values_from_c) {
  loom_graph *g = NULL, *b = NULL;
  ASSERT_OK(loom_graph_create("built", &g));
  ASSERT_OK(loom_graph_create("body", &b));
  loom_type xt, yt, pt;
  ASSERT_OK(loom_type_make(LOOM_F32, 2, (int64_t[]){6, 2}, &xt));
  ASSERT_OK(loom_type_make(LOOM_F32, 1, (int64_t[]){2}, &yt));
  ASSERT_OK(loom_type_make(LOOM_F32, 2, (int64_t[]){4, 2}, &pt));
  loom_value x = loom_graph_param(g, NULL, &xt), y = loom_graph_param(g, "y", &yt);
  loom_value bx = loom_graph_param(b, NULL, &pt), by = loom_graph_param(b, NULL, &yt);
  int64_t axis0 = 0;
  loom_value outs[2] = {loom_binary(b, LOOM_OP_ADD, bx, by),
                        loom_reduce(b, LOOM_OP_REDUCE_SUM, bx, 1, &axis0, false)};
  ASSERT_OK(loom_graph_return(b, outs, 2));
  loom_loop_input rules[2] = {{0, 0, 0, 0}, {-1, 0, 0, 0}};
  loom_loop_output comb[2] = {{LOOM_COMBINE_CONCAT, 0, 0, false}, {LOOM_COMBINE_SUM, 0, 0, false}};
  loom_value r[2];
  ASSERT_OK(loom_graph_add_loop(g, 6, 4, b, (loom_value[]){x, y}, rules, 2, comb, 2, r));
  ASSERT_OK(loom_graph_return(g, r, 2));
  loom_graph_destroy(b);
  char *text;
  ASSERT_ROUND_TRIP(g, &text);
  ASSERT_STREQ(text,
               "graph built(v0: f32[6,2], y: f32[2]) {\n"
               "  v2, v3 = loop n=6 piece=4 {\n"
               "    in v0 = v0 axis=0\n"
               "    in v1 = y\n"
               "    v2 = add v0 v1 : f32[4,2]\n"
               "    v3 = reduce_sum v0 axes=[0] : f32[2]\n"
               "    out v2 concat axis=0\n"
               "    out v3 sum\n"
               "  }\n"
               "  return v2, v3\n"
               "}\n");
  free(text);
  loom_graph_destroy(g);
}

/* Like the graph's body, a loop's body takes ';' between statements; it prints canonically. */
TEST(loop_text_one_line_with_semicolons) {
  loom_graph *g = parse_str(
      "graph g(a: f32[4]) { b = loop n=4 piece=2 { in x = a axis=0; y = neg x; out y concat axis=0 }; "
      "return b }");
  ASSERT_TRUE(g != NULL);
  char *text;
  ASSERT_ROUND_TRIP(g, &text);
  ASSERT_STREQ(text,
               "graph g(a: f32[4]) {\n"
               "  b = loop n=4 piece=2 {\n"
               "    in x = a axis=0\n"
               "    y = neg x : f32[2]\n"
               "    out y concat axis=0\n"
               "  }\n"
               "  return b\n"
               "}\n");
  free(text);
  loom_graph_destroy(g);
}

/* Values may still be named in, out or loop, and a body may use them. */
TEST(loop_text_keywords_as_names) {
  ASSERT_CANONICAL(
      "graph g(in: f32[4,3], out: f32[4,3]) {\n"
      "  loop = loop n=4 piece=2 {\n"
      "    in in = out axis=0\n"
      "    out, in2 = topk in k=1 axis=1\n"
      "    out out concat axis=0\n"
      "  }\n"
      "  return loop\n"
      "}\n");
}

/* 16 results, the most a loop has; 32 nested loops, the deepest the parser reads. */
TEST(loop_text_limits) {
  char text[8192];
  int n = snprintf(text, sizeof text, "graph g(a: f32[4]) {\n  ");
  for (int j = 0; j < 16; j++) n += snprintf(text + n, sizeof text - (size_t)n, "%sr%d", j ? ", " : "", j);
  n += snprintf(text + n, sizeof text - (size_t)n, " = loop n=4 piece=2 {\n    in x = a axis=0\n");
  for (int j = 0; j < 16; j++) n += snprintf(text + n, sizeof text - (size_t)n, "    out x concat axis=0\n");
  snprintf(text + n, sizeof text - (size_t)n, "  }\n  return r15\n}\n");
  loom_graph *g = parse_str(text);
  ASSERT_OK(g ? LOOM_OK : LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(first_loop(g)->n_outputs, 16);
  loom_graph_destroy(g);
  /* a 17th out line */
  char *cut = strstr(text, "  }\n  return");
  snprintf(cut, sizeof text - (size_t)(cut - text), "    out x concat axis=0\n  }\n  return r15\n}\n");
  ASSERT_PARSE_ERROR(text, "t.lir:20:5: error: a loop gives at most 16 results");
  /* a 17th name */
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4]) {\n  a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, b0, b1, b2, b3, b4, b5, b6 = "
      "loop\n}\n",
      "t.lir:2:67: error: more than 16 names in one statement");

  static char deep[16384];
  for (int depth = 32; depth <= 33; depth++) {
    n = snprintf(deep, sizeof deep, "graph g(a: f32[2]) {\n");
    for (int d = 0; d < depth; d++)
      n += snprintf(deep + n, sizeof deep - (size_t)n, "r%d = loop n=1 piece=1 {\nin a = a\n", d);
    n += snprintf(deep + n, sizeof deep - (size_t)n, "out a max\n");
    for (int d = depth - 1; d > 0; d--)
      n += snprintf(deep + n, sizeof deep - (size_t)n, "}\nout r%d max\n", d);
    snprintf(deep + n, sizeof deep - (size_t)n, "}\nreturn r0\n}\n");
    if (depth == 32) {
      loom_graph *h = parse_str(deep);
      ASSERT_OK(h ? LOOM_OK : LOOM_ERR_INVALID_ARGUMENT);
      char *printed;
      ASSERT_ROUND_TRIP(h, &printed);
      free(printed);
      loom_graph_destroy(h);
    } else {
      ASSERT_PARSE_ERROR(deep, "t.lir:66:7: error: loops nest more than 32 deep");
    }
  }
}

/* Every allocation the parser makes for loops may fail: OUT_OF_MEMORY, nothing leaked. */
TEST(loop_text_allocation_failures) {
  const char *texts[] = {nested_text, knn_loop_text};
  for (int i = 0; i < 2; i++) {
    loom_test_sweep sw;
    SWEEP_ALLOCATIONS(&sw, 0, 5000) {
      loom_graph *g = NULL;
      if (SWEEP_RUN(&sw, loom_graph_parse(texts[i], strlen(texts[i]), "t.lir", &g))) ASSERT_TRUE(g == NULL);
      loom_graph_destroy(g);
    }
    ASSERT_TRUE(!loom_test_failed());
    ASSERT_TRUE(sw.failures > 20);
  }
}

/* ---- malformed loops -------------------------------------------------------------------- */

TEST(loop_text_error_header) {
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop n=4 piece=2\n    in x = a axis=0\n    out x concat axis=0\n  }\n"
      "  return r\n}\n",
      "t.lir:2:23: error: expected '{' to open the loop's body, found end of line");
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop piece=2 {\n    in x = a axis=0\n    out x concat axis=0\n"
      "  }\n  return r\n}\n",
      "t.lir:2:7: error: loop: needs n=N, the length it runs over");
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop n=4 {\n    in x = a axis=0\n    out x concat axis=0\n"
      "  }\n  return r\n}\n",
      "t.lir:2:7: error: loop: needs piece=P, the length of a piece");
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop a n=4 piece=2 {\n    in x = a axis=0\n"
      "    out x concat axis=0\n  }\n  return r\n}\n",
      "t.lir:2:12: error: loop: takes no operands, found 'a' (the body's 'in' lines name what it reads)");
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop n=4 piece=2 axis=0 {\n    in x = a axis=0\n"
      "    out x concat axis=0\n  }\n  return r\n}\n",
      "t.lir:2:24: error: loop: unknown attribute 'axis' (a loop takes n=N piece=P and optionally slices=S)");
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop n=4 n=4 piece=2 {\n    in x = a axis=0\n"
      "    out x concat axis=0\n  }\n  return r\n}\n",
      "t.lir:2:16: error: attribute 'n' is given twice");
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop n=-4 piece=2 {\n    in x = a axis=0\n"
      "    out x concat axis=0\n  }\n  return r\n}\n",
      "t.lir:2:14: error: loop: n=-4 is negative");
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop n=four piece=2 {\n    in x = a axis=0\n"
      "    out x concat axis=0\n  }\n  return r\n}\n",
      "t.lir:2:14: error: loop: attribute 'n' takes an integer, found 'four'");
}

TEST(loop_text_error_type_annotation) {
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop n=4 piece=2 : f32[4,3] {\n    in x = a axis=0\n"
      "    out x concat axis=0\n  }\n  return r\n}\n",
      "t.lir:2:24: error: loop: takes no ': TYPE' annotation (its results' types follow from its body)");
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop n=4 piece=2 {\n    in x = a axis=0\n"
      "    out x concat axis=0\n  } : f32[4,3]\n  return r\n}\n",
      "t.lir:5:5: error: loop: takes no ': TYPE' annotation (its results' types follow from its body)");
}

TEST(loop_text_error_names_and_results) {
  ASSERT_PARSE_ERROR(L1("    in x = a axis=0\n    out x concat axis=0\n    out x concat axis=0\n"),
                     "t.lir:2:3: error: loop gives 2 results (its 'out' lines), but 1 name is given");
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r, s = loop n=4 piece=2 {\n    in x = a axis=0\n    y = neg x\n"
      "    out y concat axis=0\n  }\n  return r\n}\n",
      "t.lir:2:3: error: loop gives 1 result (its 'out' lines), but 2 names are given");
  ASSERT_PARSE_ERROR(L1("    in x = a axis=0\n    y = neg x\n"),
                     "t.lir:5:3: error: the loop's body has no 'out' line: a loop gives at least one result");
  ASSERT_PARSE_ERROR("graph g(a: f32[4,3]) {\n  r = loop n=4 piece=2 {\n  }\n  return r\n}\n",
                     "t.lir:3:3: error: the loop's body has no 'out' line: a loop gives at least one result");
}

TEST(loop_text_error_order_of_lines) {
  ASSERT_PARSE_ERROR(
      L1("    in x = a axis=0\n    y = neg x\n    in z = b\n    out y concat axis=0\n"),
      "t.lir:5:5: error: 'in' after the body's statements: a loop's body starts with its 'in' lines");
  ASSERT_PARSE_ERROR(
      L1("    in x = a axis=0\n    out x concat axis=0\n    in z = b\n"),
      "t.lir:5:5: error: 'in' after the body's 'out' lines: a loop's body starts with its 'in' lines");
  ASSERT_PARSE_ERROR(L1("    in x = a axis=0\n    out x concat axis=0\n    y = neg x\n"),
                     "t.lir:5:5: error: 'y' after the 'out' lines: they end the loop's body");
  ASSERT_PARSE_ERROR(
      L1("    in x = a axis=0\n    return x\n"),
      "t.lir:4:5: error: 'return' in a loop's body: the body gives its results with 'out' lines");
  ASSERT_PARSE_ERROR("graph g(a: f32[4,3]) {\n  in x = a\n  return a\n}\n",
                     "t.lir:2:3: error: 'in' outside a loop's body: only a body has 'in' and 'out' lines");
  ASSERT_PARSE_ERROR("graph g(a: f32[4,3]) {\n  out a sum\n  return a\n}\n",
                     "t.lir:2:3: error: 'out' outside a loop's body: only a body has 'in' and 'out' lines");
  ASSERT_PARSE_ERROR("graph g(a: f32[4,3]) {\n  r = loop n=4 piece=2 {\n    in x = a axis=0\n    y = neg x\n",
                     "t.lir:5:1: error: end of input before the '}' closing the loop at 2:7");
}

TEST(loop_text_error_in_lines) {
  ASSERT_PARSE_ERROR(L1("    in x = q axis=0\n    out x concat axis=0\n"),
                     "t.lir:3:12: error: 'q' is not defined outside the loop");
  ASSERT_PARSE_ERROR(
      L1("    in x = a axis=0\n    y = add x b\n    out y concat axis=0\n"),
      "t.lir:4:15: error: 'b' is not defined in the loop's body (a value from outside enters it "
      "through an 'in' line)");
  ASSERT_PARSE_ERROR(L1("    in x = a axis=2\n    out x concat axis=0\n"),
                     "t.lir:3:19: error: in: axis 2 is out of range for 'a' (f32[4,3])");
  ASSERT_PARSE_ERROR(L1("    in x = a axis=-1\n    out x concat axis=0\n"),
                     "t.lir:3:19: error: in: axis=-1 is negative");
  ASSERT_PARSE_ERROR(L1("    in x = a offset=1\n    out x concat axis=0\n"),
                     "t.lir:3:14: error: in: offset=O needs axis=A (a value passed whole has no offset)");
  ASSERT_PARSE_ERROR(
      L1("    in x = a axis=0 step=1\n    out x concat axis=0\n"),
      "t.lir:3:21: error: in: unknown attribute 'step' (in takes axis=A, offset=O, stride=S and "
      "halo=H)");
  ASSERT_PARSE_ERROR(L1("    in x = a halo=1\n    out x concat axis=0\n"),
                     "t.lir:3:14: error: in: halo=H needs axis=A (a value passed whole has no window)");
  ASSERT_PARSE_ERROR(L1("    in x = a axis=0\n    in x = b\n    out x concat axis=0\n"),
                     "t.lir:4:8: error: 'x' is already defined");
  ASSERT_PARSE_ERROR(L1("    in x a\n    out x concat axis=0\n"),
                     "t.lir:3:10: error: in: expected '=' after 'x', found 'a'");
  ASSERT_PARSE_ERROR(L1("    in x = 3\n    out x concat axis=0\n"),
                     "t.lir:3:12: error: expected the name of a value outside the loop, found '3'");
}

TEST(loop_text_error_out_lines) {
  ASSERT_PARSE_ERROR(
      L1("    in x = a axis=0\n    out x avg\n"),
      "t.lir:4:11: error: unknown combine 'avg' (concat, sum, prod, max, min, argmax, argmin, topk or "
      "index)");
  ASSERT_PARSE_ERROR(L1("    in x = a axis=0\n    out q concat axis=0\n"),
                     "t.lir:4:9: error: 'q' is not defined");
  ASSERT_PARSE_ERROR(
      L1("    in x = a axis=0\n    out x 3\n"),
      "t.lir:4:11: error: out: expected how the pieces of 'x' combine (concat, sum, prod, max, min, "
      "argmax, argmin, topk or index), found '3'");
  ASSERT_PARSE_ERROR(
      L1("    in x = a axis=0\n    out x\n"),
      "t.lir:4:10: error: out: expected how the pieces of 'x' combine (concat, sum, prod, max, min, "
      "argmax, argmin, topk or index), found end of line");
  ASSERT_PARSE_ERROR(L1("    in x = a axis=0\n    out x concat axis=8\n"),
                     "t.lir:4:23: error: out: axis=8 is out of range (a tensor has at most 8 axes)");
  ASSERT_PARSE_ERROR(
      L1("    in x = a axis=0\n    out x concat axis=1\n"),
      "t.lir:2:7: error: loop: result 1 (f32[2,3]): concat along axis 1 needs a result that holds "
      "the piece there");
  ASSERT_PARSE_ERROR(L1("    in x = a axis=0\n    out x concat\n"),
                     "t.lir:4:11: error: out: combine 'concat' needs axis=A");
  ASSERT_PARSE_ERROR(L1("    in x = a axis=0\n    out x sum axis=0\n"),
                     "t.lir:4:15: error: out: combine 'sum' takes no attribute 'axis'");
  ASSERT_PARSE_ERROR(
      L1("    in x = a axis=0\n    v, i = topk x k=1 axis=0\n    out v topk axis=0\n    out i index\n"),
      "t.lir:5:11: error: out: combine 'topk' needs k=K");
  ASSERT_PARSE_ERROR(L1("    in x = a axis=0\n    v, i = topk x k=1 axis=0\n    out v topk axis=0 k=1 "
                        "largest=1\n    out i index\n"),
                     "t.lir:5:35: error: out: attribute 'largest' takes true or false, found '1'");
  ASSERT_PARSE_ERROR(L1("    in x = a axis=0\n    out x concat axis=-1\n"),
                     "t.lir:4:23: error: out: axis=-1 is negative");
  ASSERT_PARSE_ERROR(L1("    in x = a axis=0\n    out x concat axis=0 axis=0\n"),
                     "t.lir:4:25: error: attribute 'axis' is given twice");
  ASSERT_PARSE_ERROR(L1("    in x = a axis=0\n    out x concat axis=0 foo\n"),
                     "t.lir:4:25: error: expected the end of the statement, found 'foo'");
}

/* The builder's rules (loop.c), placed at the loop token; a body op's own error at its op. */
TEST(loop_text_error_builder_rules) {
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop n=4 piece=5 {\n    in x = a axis=0\n"
      "    out x concat axis=0\n  }\n  return r\n}\n",
      "t.lir:2:7: error: loop: n 4 in pieces of 5: needs 1 <= piece <= n");
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop n=4 piece=2 {\n    in x = a axis=0\n    y = neg x\n"
      "    out y sum\n  }\n  return r\n}\n",
      "t.lir:2:7: error: loop: result 1 (f32[2,3]) varies with the piece along axis 0: only concat "
      "combines such a result");
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop n=4 piece=2 {\n    in x = a\n    y = neg x\n"
      "    out y concat axis=0\n  }\n  return r\n}\n",
      "t.lir:2:7: error: loop: result 1 (f32[4,3]): concat along axis 0 needs a result that holds the "
      "piece there");
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[5,3]) {\n  v, i = loop n=5 piece=2 {\n    in x = a axis=0\n"
      "    tv, ti = topk x k=2 axis=0\n    out tv topk axis=0 k=2\n    out ti index\n  }\n"
      "  return v, i\n}\n",
      "t.lir:2:10: error: loop: result 1: topk of 2 needs pieces of at least that many; the last "
      "piece has 1");
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop n=4 piece=2 {\n    in x = a axis=0\n"
      "    s = slice x start=[0,0] stop=[1,3]\n    out s sum\n  }\n  return r\n}\n",
      "t.lir:2:7: error: loop body: slice 's' cannot take a piece of another length along the loop's "
      "axis");
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop n=4 piece=2 {\n    in x = a axis=0\n"
      "    v, i = topk x k=1 axis=1\n    out v concat axis=0\n    out i concat axis=0\n  }\n"
      "  return r\n}\n",
      "t.lir:2:3: error: loop gives 2 results (its 'out' lines), but 1 name is given");
  /* The body is rebuilt for the last piece, and must type there too. */
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[5,3]) {\n  r = loop n=5 piece=3 {\n    in x = a axis=0\n"
      "    f = fill value=1 : f32[3,3]\n    y = add x f\n    out y concat axis=0\n  }\n"
      "  return r\n}\n",
      "t.lir:2:7: error: the loop's last piece of 2: add: shapes f32[2,3] and f32[3,3] do not "
      "broadcast");
  ASSERT_PARSE_ERROR(L1("    in x = a axis=0\n    y = add x x x\n    out y concat axis=0\n"),
                     "t.lir:4:9: error: add: takes 2 operands, got 3");
}

/* Windows (docs/ir-loops.md "Windows"): a conv's x read through overlapping windows with
 * padding at the ends; the text round-trips, the parameter is typed for a full piece's window
 * and the last piece's body is retyped for its shorter window. */
TEST(loop_text_windows) {
  static const char text[] =
      "graph tiles(x: f32[1,1,41], w: f32[1,1,3]) {\n"
      "  y = loop n=20 piece=8 {\n"
      "    in xs = x axis=2 offset=-1 stride=2 halo=4\n"
      "    in ws = w\n"
      "    y = conv xs ws stride=[2] padding=[0] dilation=[2] : f32[1,1,8]\n"
      "    out y concat axis=2\n"
      "  }\n"
      "  return y\n"
      "}\n";
  ASSERT_CANONICAL(text);
  loom_graph *g = parse_str(text);
  ASSERT_TRUE(g != NULL);
  const loom__op *op = first_loop(g);
  ASSERT_EQ(op->loop->rules[0].offset, -1);
  ASSERT_EQ(op->loop->rules[0].stride, 2);
  ASSERT_EQ(op->loop->rules[0].halo, 4);
  char tb[LOOM_TYPE_STRING_MAX];
  /* (8 - 1) 2 + 1 + 4 elements of x for 8 outputs */
  ASSERT_STREQ(type_of(op->loop->body, loom_graph_find(op->loop->body, "xs"), tb), "f32[1,1,19]");
  ASSERT_STREQ(type_of(g, loom_graph_find(g, "y"), tb), "f32[1,1,20]");
  ASSERT_TRUE(loom__loop_window_pads(op->loop, 0, 41)); /* -1 and 41 are padding */
  ASSERT_TRUE(!loom__loop_window_pads(op->loop, 1, 1)); /* w is passed whole */
  int64_t first, count;
  loom__loop_window(&op->loop->rules[0], 16, 4, &first, &count);
  ASSERT_EQ(first, 31);
  ASSERT_EQ(count, 11);
  loom_graph *tail = NULL;
  ASSERT_OK(loom__loop_body_for(op->loop, 4, &tail));
  ASSERT_STREQ(type_of(tail, loom_graph_find(tail, "xs"), tb), "f32[1,1,11]");
  ASSERT_STREQ(type_of(tail, loom_graph_find(tail, "y"), tb), "f32[1,1,4]");
  loom_graph_destroy(tail);
  loom_graph_destroy(g);
  /* elementwise ops carry a window into the conv; a 2-D window along the rows */
  ASSERT_CANONICAL(
      "graph rows(x: f32[1,2,9,5], w: f32[3,2,3,3]) {\n"
      "  y = loop n=9 piece=4 {\n"
      "    in xs = x axis=2 offset=-1 halo=2\n"
      "    in ws = w\n"
      "    r = relu xs : f32[1,2,6,5]\n"
      "    y = conv r ws padding=[0,1] : f32[1,3,4,5]\n"
      "    out y concat axis=2\n"
      "  }\n"
      "  return y\n"
      "}\n");
  /* a plain slice reads no padding; a window reads some but not only padding */
  ASSERT_PARSE_ERROR(L1("    in x = a axis=0 offset=-1\n    out x concat axis=0\n"),
                     "t.lir:2:7: error: loop: operand 'a' (f32[4,3]): axis 0 holds 4 elements, fewer than "
                     "offset -1 + n 4");
  ASSERT_PARSE_ERROR(
      "graph g(x: f32[1,1,8], w: f32[1,1,3]) {\n  y = loop n=4 piece=2 {\n"
      "    in xs = x axis=2 offset=-20 halo=2\n    in ws = w\n    y = conv xs ws\n"
      "    out y concat axis=2\n  }\n  return y\n}\n",
      "t.lir:2:7: error: loop: operand 'x' (f32[1,1,8]): a window from -20 over n 4 (stride 1, "
      "halo 2) along axis 2 reads none of its 8 elements");
  /* a window goes into a conv's x or elementwise ops, and never out as a result */
  ASSERT_PARSE_ERROR(
      "graph g(x: f32[1,1,8]) {\n  y = loop n=6 piece=2 {\n"
      "    in xs = x axis=2 halo=2\n    s = reduce_sum xs axes=[2]\n"
      "    out s sum\n  }\n  return y\n}\n",
      "t.lir:2:7: error: loop body: reduce_sum 's' cannot read a window of the piece (only "
      "elementwise ops and a conv's x can)");
  ASSERT_PARSE_ERROR(
      "graph g(x: f32[1,1,8]) {\n  y = loop n=6 piece=2 {\n"
      "    in xs = x axis=2 halo=2\n    out xs concat axis=2\n  }\n  return y\n}\n",
      "t.lir:2:7: error: loop: result 1 (f32[1,1,4]): concat along axis 2 needs a result that "
      "holds the piece there");
}

/* ---- slices (docs/ir-loops.md, Memory) -------------------------------------------------- */

/* A loop over 10 rows in pieces of 4 (a last piece of 2) holding one slice of x, its body a
 * loop over 3 columns holding the default two: only the outer one prints its slices. */
static const char slices_text[] =
    "graph slices(x: f32[10,3]) {\n"
    "  r = loop n=10 piece=4 slices=1 {\n"
    "    in xs = x axis=0\n"
    "    s = loop n=3 piece=2 {\n"
    "      in c = xs axis=1\n"
    "      u = reduce_sum c axes=[1] : f32[4]\n"
    "      out u sum\n"
    "    }\n"
    "    out s concat axis=0\n"
    "  }\n"
    "  return r\n"
    "}\n";

TEST(loop_text_slices) {
  ASSERT_CANONICAL(slices_text);
  loom_graph *g = parse_str(slices_text);
  ASSERT_TRUE(g != NULL);
  ASSERT_EQ(loom_graph_loop_slices(g, 0), 1);
  const loom_graph *outer = NULL;
  ASSERT_OK(loom_graph_loop_get(g, 0, &outer, NULL, NULL));
  ASSERT_EQ(loom_graph_loop_slices(outer, 0), LOOM_LOOP_SLICES_DEFAULT);
  ASSERT_EQ(loom_graph_loop_slices(outer, 1), 0); /* not a loop */
  ASSERT_EQ(loom_graph_loop_slices(g, 1), 0);     /* no such op */
  /* The inner loop's slices survive a clone and the body rebuilt for the last piece. */
  loom_graph *inner_one = NULL, *tail = NULL;
  ASSERT_OK(loom_graph_clone(outer, &inner_one));
  ASSERT_OK(loom_graph_loop_set_slices(inner_one, 0, 1));
  loom__loop l = *first_loop(g)->loop;
  l.body = inner_one;
  ASSERT_OK(loom__loop_body_for(&l, 2, &tail));
  ASSERT_EQ(loom_graph_loop_slices(tail, 0), 1);
  loom_graph_destroy(tail);
  loom_graph_destroy(inner_one);
  loom_graph *c = NULL;
  ASSERT_OK(loom_graph_clone(g, &c));
  ASSERT_EQ(loom_graph_loop_slices(c, 0), 1);
  loom_graph_destroy(c);
  /* The setter's refusals leave the loop as it was. */
  ASSERT_STATUS(loom_graph_loop_set_slices(g, 0, 3), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STREQ(loom_last_error(),
               "loop: slices=3: a loop holds 1 or 2 slices of a streamed operand (2: the next piece's is "
               "brought in while a piece runs)");
  ASSERT_STATUS(loom_graph_loop_set_slices(g, 0, 0), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_graph_loop_set_slices(g, 1, 1), LOOM_ERR_INVALID_ARGUMENT); /* no such op */
  ASSERT_STATUS(loom_graph_loop_set_slices(NULL, 0, 1), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(loom_graph_loop_slices(g, 0), 1);
  loom_graph_destroy(g);
  /* slices=2 is the default, so it is not printed; the attributes come in any order. */
  loom_graph *h = parse_str(
      "graph g(a: f32[4,3]) {\n  r = loop slices=2 piece=2 n=4 {\n    in x = a axis=0\n"
      "    out x concat axis=0\n  }\n  return r\n}\n");
  ASSERT_TRUE(h != NULL);
  char *text = NULL;
  ASSERT_OK(loom_graph_to_string(h, &text));
  ASSERT_CONTAINS(text, "  r = loop n=4 piece=2 {\n");
  free(text);
  loom_graph_destroy(h);
}

TEST(loop_text_error_slices) {
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop n=4 piece=2 slices=3 {\n    in x = a axis=0\n"
      "    out x concat axis=0\n  }\n  return r\n}\n",
      "t.lir:2:31: error: loop: slices=3: a loop holds 1 or 2 slices of a streamed operand (2: the next "
      "piece's is brought in while a piece runs)");
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop n=4 piece=2 slices=0 {\n    in x = a axis=0\n"
      "    out x concat axis=0\n  }\n  return r\n}\n",
      "t.lir:2:31: error: loop: slices=0: a loop holds 1 or 2 slices of a streamed operand (2: the next "
      "piece's is brought in while a piece runs)");
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop n=4 slices=1 piece=2 slices=1 {\n    in x = a axis=0\n"
      "    out x concat axis=0\n  }\n  return r\n}\n",
      "t.lir:2:33: error: attribute 'slices' is given twice");
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[4,3]) {\n  r = loop n=4 piece=2 slices=two {\n    in x = a axis=0\n"
      "    out x concat axis=0\n  }\n  return r\n}\n",
      "t.lir:2:31: error: loop: attribute 'slices' takes an integer, found 'two'");
}

/* The estimate counts what slices says: a loop streaming x holds one more slice of it with
 * slices=2 than with slices=1 where it runs several pieces, and the same in one piece. */
TEST(loop_estimate_counts_the_slices) {
  static const char *const texts[] = {
      "graph g(x: f32[16,4]) {\n  r = loop n=16 piece=4 slices=%d {\n    in xs = x axis=0\n"
      "    s = reduce_sum xs axes=[0] : f32[4]\n    out s sum\n  }\n  return r\n}\n",
      "graph g(x: f32[16,4]) {\n  r = loop n=16 piece=16 slices=%d {\n    in xs = x axis=0\n"
      "    s = reduce_sum xs axes=[0] : f32[4]\n    out s sum\n  }\n  return r\n}\n"};
  const int64_t slice[] = {4 * 4 * 4, 16 * 4 * 4};
  for (int32_t t = 0; t < 2; t++) {
    int64_t peak[3] = {0};
    for (int32_t k = 1; k <= 2; k++) {
      char text[512];
      snprintf(text, sizeof text, texts[t], (int)k);
      loom_graph *g = parse_str(text);
      ASSERT_TRUE(g != NULL);
      loom_estimate e;
      ASSERT_OK(loom_graph_estimate(g, NULL, &e));
      ASSERT_EQ(e.input_bytes, 0); /* x is streamed */
      peak[k] = e.peak_bytes;
      loom_estimate_deinit(&e);
      loom_graph_destroy(g);
    }
    ASSERT_EQ(peak[2] - peak[1], t == 0 ? slice[0] : 0);
    ASSERT_TRUE(peak[1] >= slice[t]);
  }
}
