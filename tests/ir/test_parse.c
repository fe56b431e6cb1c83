/* The .lir parser (src/ir/parse.c): good files, and bad inputs with their exact one-line
 * messages (file:line:col), checking that no error path leaks. */
#include <fcntl.h>
#include <limits.h>
#include <locale.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "ir/ir.h"
#include "loom/testing.h"

/* tests/data/lir: from LOOM_TEST_DATA under ctest, else next to this source file. */
static const char *lir_path(const char *name) {
  static char buf[PATH_MAX];
  const char *data = getenv("LOOM_TEST_DATA");
  if (data) {
    snprintf(buf, sizeof buf, "%s/lir/%s", data, name);
  } else {
    const char *file = __FILE__;
    const char *cut = strstr(file, "ir/test_parse.c");
    int n = cut ? (int)(cut - file) : 0;
    snprintf(buf, sizeof buf, "%.*sdata/lir/%s", n, file, name);
  }
  return buf;
}

static loom_graph *parse_str(const char *text) {
  loom_graph *g = NULL;
  if (loom_graph_parse(text, strlen(text), "t.lir", &g)) return NULL;
  return g;
}

/* Parsing `len` bytes of `text` fails with INVALID_ARGUMENT and exactly `msg`, leaving
 * *out NULL and no allocation behind. */
#define ASSERT_PARSE_ERROR_N(text, len, msg)                                                 \
  do {                                                                                       \
    int64_t live_ = loom_testing_live_allocations();                                         \
    loom_graph *g_ = (loom_graph *)&live_;                                                   \
    ASSERT_STATUS(loom_graph_parse((text), (len), "t.lir", &g_), LOOM_ERR_INVALID_ARGUMENT); \
    ASSERT_TRUE(g_ == NULL);                                                                 \
    ASSERT_STREQ(loom_last_error(), (msg));                                                  \
    ASSERT_EQ(loom_testing_live_allocations(), live_);                                       \
  } while (0)
#define ASSERT_PARSE_ERROR(text, msg) ASSERT_PARSE_ERROR_N((text), strlen(text), (msg))

/* A one-parameter graph around one statement, for the statement-level errors. */
#define G1(stmt) "graph g(a: f32[3]) {\n  " stmt "\n  return a\n}\n"

/* IR.md's example, verbatim. */
static const char knn_text[] =
    "# kNN by brute force: for every row of x, the 10 nearest rows of y\n"
    "graph knn(x: f32[20000,3], y: f32[30000,3]) {\n"
    "  xe       = reshape x shape=[20000,1,3]\n"
    "  ye       = reshape y shape=[1,30000,3]\n"
    "  diff     = sub xe ye                       # f32[20000,30000,3] by broadcasting\n"
    "  sq       = mul diff diff\n"
    "  d2       = reduce_sum sq axes=[2]          : f32[20000,30000]\n"
    "  val, idx = topk d2 k=10 axis=1 largest=false\n"
    "  return val, idx\n"
    "}\n";

static void type_text(const loom_graph *g, const char *name, char *buf, size_t size) {
  const loom_type *t = loom_value_type(g, loom_graph_find(g, name));
  snprintf(buf, size, "%s",
           t ? loom_type_format(t, (char[LOOM_TYPE_STRING_MAX]){0}, LOOM_TYPE_STRING_MAX) : "?");
}

#define ASSERT_TYPE(g, name, want)           \
  do {                                       \
    char tb_[LOOM_TYPE_STRING_MAX];          \
    type_text((g), (name), tb_, sizeof tb_); \
    ASSERT_STREQ(tb_, (want));               \
  } while (0)

/* ---- good files ----------------------------------------------------------------------- */

TEST(parse_knn_from_ir_md) {
  loom_graph *g = parse_str(knn_text);
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(loom_graph_verify(g));
  ASSERT_STREQ(loom_graph_name(g), "knn");
  ASSERT_EQ(loom_graph_param_count(g), 2);
  ASSERT_EQ(loom_graph_op_count(g), 6);
  ASSERT_EQ(loom_graph_output_count(g), 2);
  ASSERT_TYPE(g, "diff", "f32[20000,30000,3]");
  ASSERT_TYPE(g, "d2", "f32[20000,30000]");
  ASSERT_TYPE(g, "val", "f32[20000,10]");
  ASSERT_TYPE(g, "idx", "i64[20000,10]");
  ASSERT_EQ(loom_graph_output_at(g, 1).id, loom_graph_find(g, "idx").id);
  /* Ops remember where they were written: the op name's line and column. */
  ASSERT_EQ(g->ops[2].line, 5);
  ASSERT_EQ(g->ops[2].col, 14);
  ASSERT_EQ(g->ops[5].line, 8);
  ASSERT_EQ(g->ops[5].attrs.k, 10);
  ASSERT_EQ(g->ops[5].attrs.axis, 1);
  ASSERT_TRUE(!g->ops[5].attrs.largest);
  ASSERT_EQ(g->ops[5].attrs.set, LOOM_ATTR_K | LOOM_ATTR_AXIS | LOOM_ATTR_LARGEST);
  ASSERT_EQ(g->cur_line, 0); /* ops built from C later carry no stale place */
  loom_graph_destroy(g);
}

TEST(parse_knn_file_equals_text) {
  loom_graph *a = parse_str(knn_text), *b = NULL;
  ASSERT_TRUE(a != NULL);
  ASSERT_OK(loom_graph_load(lir_path("knn.lir"), &b));
  char *ta = NULL, *tb = NULL;
  ASSERT_OK(loom_graph_to_string(a, &ta));
  ASSERT_OK(loom_graph_to_string(b, &tb));
  ASSERT_STREQ(ta, tb);
  free(ta);
  free(tb);
  loom_graph_destroy(a);
  loom_graph_destroy(b);
}

TEST(parse_every_op) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_load(lir_path("all_ops.lir"), &g));
  bool seen[LOOM_OP_COUNT] = {0};
  uint32_t attrs = 0;
  for (int32_t i = 0; i < g->n_ops; i++) {
    seen[g->ops[i].kind] = true;
    attrs |= g->ops[i].attrs.set;
  }
  /* the quantized ops have a file of their own: backends without their kernels run all_ops */
  loom_graph *qg = NULL;
  ASSERT_OK(loom_graph_load(lir_path("quant_ops.lir"), &qg));
  for (int32_t i = 0; i < qg->n_ops; i++) seen[qg->ops[i].kind] = true;
  loom_graph_destroy(qg);
  for (int op = 0; op < LOOM_OP_COUNT; op++) {
    if (!seen[op])
      loom_test_fail(__FILE__, __LINE__, "op %s is missing from all_ops.lir", loom_op_name((loom_op)op));
  }
  ASSERT_EQ(attrs, (1u << 18) - 1); /* every attribute key too */
  ASSERT_TYPE(g, "cv", "f32[1,4,8]");
  ASSERT_TYPE(g, "rf", "c64[1,3,5]");
  ASSERT_TYPE(g, "tix", "i64[2,2]");
  ASSERT_TYPE(g, "cc", "f32[6,3]");
  loom_graph_destroy(g);
}

TEST(parse_constants_every_dtype) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_load(lir_path("constants.lir"), &g));
  const loom__op *o = &g->ops[g->values[loom_graph_find(g, "cb").id].op];
  ASSERT_EQ(o->const_bytes, 4);
  ASSERT_TRUE(memcmp(o->const_data, "\1\0\1\0", 4) == 0);
  const int64_t *i64 = g->ops[g->values[loom_graph_find(g, "ci64").id].op].const_data;
  ASSERT_TRUE(i64[0] == INT64_MIN && i64[1] == INT64_MAX);
  const uint8_t *u8 = g->ops[g->values[loom_graph_find(g, "cu8").id].op].const_data;
  ASSERT_EQ(u8[2], 100);
  const uint16_t *f16 = g->ops[g->values[loom_graph_find(g, "cf16").id].op].const_data;
  ASSERT_EQ(f16[0], loom_f32_to_f16(0.1f));
  ASSERT_EQ(f16[2], 0x7bff); /* 65504, the largest f16 */
  ASSERT_EQ(f16[3], 0x7c00);
  ASSERT_EQ(f16[5], 0x8000);
  const uint16_t *bf16 = g->ops[g->values[loom_graph_find(g, "cbf16").id].op].const_data;
  ASSERT_EQ(bf16[0], loom_f32_to_bf16(0.1f));
  const float *f32 = g->ops[g->values[loom_graph_find(g, "cf32").id].op].const_data;
  ASSERT_TRUE(f32[0] == 0.1f && f32[1] > 0 && f32[2] == 3.4028234663852886e38f && isnan(f32[3]));
  const float *c64 = g->ops[g->values[loom_graph_find(g, "cc64").id].op].const_data;
  ASSERT_TRUE(c64[0] == 1 && c64[1] == 0 && c64[2] == 2 && c64[3] == 0); /* real parts only */
  const double *c128 = g->ops[g->values[loom_graph_find(g, "cc128").id].op].const_data;
  ASSERT_TRUE(c128[0] == 1 && c128[1] == -2 && c128[2] == 3.5 && c128[3] == 4e100);
  const double *f64 = g->ops[g->values[loom_graph_find(g, "cf64").id].op].const_data;
  ASSERT_TRUE(f64[1] == 5e-324 && signbit(f64[3]) && f64[4] == 1.5e-3);
  ASSERT_TYPE(g, "cc64s", "c64[]");
  ASSERT_TYPE(g, "empty", "f32[0,3]");
  const int64_t *big = g->ops[g->values[loom_graph_find(g, "big").id].op].const_data;
  ASSERT_TRUE(big[0] == 1 && big[5] == 6);
  loom_graph_destroy(g);
}

TEST(parse_comments_blank_lines_spacing) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_load(lir_path("comments.lir"), &g));
  ASSERT_STREQ(loom_graph_name(g), "spaced");
  ASSERT_EQ(loom_graph_output_count(g), 3);
  ASSERT_TYPE(g, "i", "i64[4,1]");
  ASSERT_TYPE(g, "i2", "i64[4,2]");
  ASSERT_TYPE(g, "p", "f32[4,1]");
  ASSERT_EQ(loom_graph_output_at(g, 2).id, loom_graph_param_at(g, 0).id);
  loom_graph_destroy(g);
}

TEST(parse_returns_a_parameter) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_load(lir_path("passthrough.lir"), &g));
  ASSERT_EQ(loom_graph_op_count(g), 0);
  ASSERT_EQ(loom_graph_output_at(g, 0).id, loom_graph_param_at(g, 0).id);
  loom_graph_destroy(g);
}

TEST(parse_bom_crlf_semicolons_tabs) {
  const char text[] = "\xef\xbb\xbfgraph g(a: f32[2]) {\r\n\tb = neg a; c = abs b\r\n  return c\r\n}\r\n";
  loom_graph *g = parse_str(text);
  ASSERT_TRUE(g != NULL);
  ASSERT_TYPE(g, "c", "f32[2]");
  loom_graph_destroy(g);
}

TEST(parse_names_that_look_like_keywords) {
  /* "return", "graph", op names and "inf" are fine value names. */
  loom_graph *g = parse_str(
      "graph graph(inf: f32[2]) {\n  return = neg inf\n  add = abs return\n  graph, nan = topk add k=1 "
      "axis=0\n"
      "  return add, graph\n}\n");
  ASSERT_TRUE(g != NULL);
  ASSERT_TYPE(g, "return", "f32[2]");
  ASSERT_TYPE(g, "nan", "i64[1]");
  ASSERT_EQ(loom_graph_output_count(g), 2);
  loom_graph_destroy(g);
}

TEST(parse_numbers) {
  loom_graph *g = parse_str(
      "graph g() {\n"
      "  a = fill value=-1.5 : f32[2]\n"
      "  b = fill value=1e-3 : f64[]\n"
      "  c = fill value=-inf : f32[]\n"
      "  d = fill value=nan : f64[]\n"
      "  e = fill value=-9223372036854775808 : i64[]\n"
      "  f = fill value=.5 : f32[]\n"
      "  h = fill value=+2 : i8[]\n"
      "  i = fill value=true : bool[]\n"
      "  j = reshape a shape=[-1, 1]\n"
      "  return a, b, c, d, e, f, h, i, j\n}\n");
  ASSERT_TRUE(g != NULL);
  ASSERT_TRUE(g->ops[0].attrs.value == -1.5 && !g->ops[0].attrs.value_is_int);
  ASSERT_TRUE(g->ops[1].attrs.value == 1e-3);
  ASSERT_TRUE(isinf(g->ops[2].attrs.value) && g->ops[2].attrs.value < 0);
  ASSERT_TRUE(isnan(g->ops[3].attrs.value));
  ASSERT_TRUE(g->ops[4].attrs.value_is_int && g->ops[4].attrs.ivalue == INT64_MIN);
  ASSERT_TRUE(g->ops[5].attrs.value == 0.5);
  ASSERT_TRUE(g->ops[6].attrs.ivalue == 2);
  ASSERT_TRUE(g->ops[7].attrs.value_is_int && g->ops[7].attrs.ivalue == 1);
  ASSERT_TYPE(g, "j", "f32[2,1]");
  loom_graph_destroy(g);
}

TEST(parse_numbers_ignore_the_locale) {
  const char *locales[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "C.UTF-8"};
  const char *old = setlocale(LC_NUMERIC, NULL);
  char saved[64];
  snprintf(saved, sizeof saved, "%s", old ? old : "C");
  for (int i = 0; i < 4 && !setlocale(LC_NUMERIC, locales[i]); i++) {
  }
  loom_graph *g = parse_str("graph g() {\n  a = constant [0.5, 1e-3] : f64[2]\n  return a\n}\n");
  setlocale(LC_NUMERIC, saved);
  ASSERT_TRUE(g != NULL);
  const double *d = g->ops[0].const_data;
  ASSERT_TRUE(d[0] == 0.5 && d[1] == 1e-3);
  loom_graph_destroy(g);
}

TEST(parse_many_operands_and_long_names) {
  /* concat of 100 operands, and a 300-character name. */
  static char text[40000];
  char name[301];
  memset(name, 'n', 300);
  name[300] = '\0';
  int n = snprintf(text, sizeof text, "graph g(%s: f32[1]) {\n  c = concat", name);
  for (int i = 0; i < 100; i++) n += snprintf(text + n, sizeof text - (size_t)n, " %s", name);
  snprintf(text + n, sizeof text - (size_t)n, " axis=0\n  return c\n}\n");
  loom_graph *g = parse_str(text);
  ASSERT_TRUE(g != NULL);
  ASSERT_TYPE(g, "c", "f32[100]");
  loom_graph_destroy(g);
}

/* Every allocation the parser makes may fail: each failure is OUT_OF_MEMORY and leaks nothing. */
TEST(parse_allocation_failures) {
  const char *text =
      "graph g(a: f32[2,3], b: f32[3]) {\n  c = constant [1,2,3] : f32[3]\n  d = add a b\n"
      "  e = concat a a d axis=0\n  v, i = topk e k=1 axis=1\n  return v, i\n}\n";
  loom_test_sweep sw;
  SWEEP_ALLOCATIONS(&sw, 0, 1000) {
    loom_graph *g = NULL;
    if (SWEEP_RUN(&sw, loom_graph_parse(text, strlen(text), "t.lir", &g))) ASSERT_TRUE(g == NULL);
    loom_graph_destroy(g);
  }
  ASSERT_TRUE(sw.nth > 5);
}

/* ---- bad inputs ----------------------------------------------------------------------- */

TEST(parse_error_unknown_op) {
  ASSERT_PARSE_ERROR(G1("b = foo a"), "t.lir:2:7: error: unknown op 'foo'");
}

TEST(parse_error_wrong_arity) {
  ASSERT_PARSE_ERROR(G1("b = add a"), "t.lir:2:7: error: add: takes 2 operands, got 1");
  ASSERT_PARSE_ERROR(G1("b = select a a"), "t.lir:2:7: error: select: takes 3 operands, got 2");
}

TEST(parse_error_broadcast) {
  ASSERT_PARSE_ERROR("graph g(a: f32[3,4], b: f32[5]) {\n  c = sub a b\n  return c\n}\n",
                     "t.lir:2:7: error: sub: shapes f32[3,4] and f32[5] do not broadcast");
  ASSERT_STATUS(loom_graph_load(lir_path("bad_broadcast.lir"), &(loom_graph *){NULL}),
                LOOM_ERR_INVALID_ARGUMENT);
  char want[PATH_MAX + 100];
  snprintf(want, sizeof want, "%s:4:7: error: sub: shapes f32[3,4] and f32[5] do not broadcast",
           lir_path("bad_broadcast.lir"));
  ASSERT_STREQ(loom_last_error(), want);
}

TEST(parse_error_duplicate_name) {
  ASSERT_PARSE_ERROR(G1("a = neg a"), "t.lir:2:3: error: 'a' is already defined");
  ASSERT_PARSE_ERROR("graph g(a: f32[3], a: f32[3]) {\n  return a\n}\n",
                     "t.lir:1:20: error: 'a' is already defined");
  ASSERT_PARSE_ERROR(G1("v, v = topk a k=1 axis=0"), "t.lir:2:6: error: 'v' is already defined");
  ASSERT_PARSE_ERROR("graph g(a: f32[3]) {\n  b = neg a\n  b = abs a\n  return b\n}\n",
                     "t.lir:3:3: error: 'b' is already defined");
}

TEST(parse_error_undefined_name) {
  ASSERT_PARSE_ERROR(G1("b = add a q"), "t.lir:2:13: error: 'q' is not defined");
  ASSERT_PARSE_ERROR("graph g(a: f32[3]) {\n  return a, q\n}\n", "t.lir:2:13: error: 'q' is not defined");
  /* A value is defined only after its statement. */
  ASSERT_PARSE_ERROR(G1("b = add a b"), "t.lir:2:13: error: 'b' is not defined");
}

TEST(parse_error_shape_overflow) {
  ASSERT_PARSE_ERROR(
      "graph g(a: f32[9223372036854775807,2]) {\n  return a\n}\n",
      "t.lir:1:12: error: shape f32[9223372036854775807,2] has more elements than fit in int64");
  ASSERT_PARSE_ERROR("graph g(a: f64[2305843009213693952]) {\n  return a\n}\n",
                     "t.lir:1:12: error: f64[2305843009213693952] is larger than int64 bytes");
  ASSERT_PARSE_ERROR("graph g(a: f32[9223372036854775808]) {\n  return a\n}\n",
                     "t.lir:1:16: error: integer literal '9223372036854775808' does not fit in int64");
  ASSERT_PARSE_ERROR("graph g(a: f32[1,1,1,1,1,1,1,1,1]) {\n  return a\n}\n",
                     "t.lir:1:32: error: a shape has at most 8 dimensions");
  ASSERT_PARSE_ERROR("graph g(a: f32[-1]) {\n  return a\n}\n",
                     "t.lir:1:16: error: dimension '-1' is negative");
}

/* No elements, yet an axis of 2^63 - 1 beside the empty one (the fuzzer's q4[9223372036854775807,0],
 * whose dense strides overflowed): parsed, estimated at 0 bytes, no overflow on the way (the
 * sanitized suite runs this under UBSan). */
TEST(empty_shapes_with_huge_axes) {
  static const char *const texts[] = {
      "graph g(w: q4[9223372036854775807,0]) {\n  return w\n}\n",
      "graph g(w: q4[0,9223372036854775807]) {\n  return w\n}\n",
      "graph g(w: f32[0,9223372036854775807,3]) {\n  v = neg w\n  return v\n}\n",
  };
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    loom_graph *g = NULL;
    ASSERT_OK(loom_graph_parse(texts[i], strlen(texts[i]), "t.lir", &g));
    loom_estimate e;
    memset(&e, 0, sizeof e);
    ASSERT_OK(loom_graph_estimate(g, NULL, &e));
    ASSERT_TRUE(e.peak_bytes == 0);
    loom_estimate_deinit(&e);
    loom_graph_destroy(g);
  }
}

TEST(parse_error_integer_literal_overflow) {
  ASSERT_PARSE_ERROR(G1("b = reshape a shape=[99999999999999999999]"),
                     "t.lir:2:24: error: integer literal '99999999999999999999' does not fit in int64");
  ASSERT_PARSE_ERROR(G1("b = fill value=-9223372036854775809 : i64[]"),
                     "t.lir:2:18: error: integer literal '-9223372036854775809' does not fit in int64");
  ASSERT_PARSE_ERROR(G1("b = fill value=1e999 : f64[]"),
                     "t.lir:2:18: error: number '1e999' is out of the range of f64");
}

TEST(parse_error_unterminated_graph) {
  ASSERT_PARSE_ERROR("graph g(a: f32[3]) {\n  b = neg a\n  return b\n",
                     "t.lir:4:1: error: end of input before the '}' closing graph 'g'");
  ASSERT_PARSE_ERROR("graph g(a: f32[3]) {\n  b = neg a",
                     "t.lir:2:12: error: end of input before the '}' closing graph 'g'");
  ASSERT_PARSE_ERROR("graph g(a: f32[3]",
                     "t.lir:1:18: error: expected ',' or ')' in the parameters, found end of input");
  ASSERT_PARSE_ERROR(G1("b = reshape a shape=[3"),
                     "t.lir:3:3: error: expected ',' or ']' in 'shape', found 'return'");
  ASSERT_STATUS(loom_graph_load(lir_path("bad_unterminated.lir"), &(loom_graph *){NULL}),
                LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(),
                  "bad_unterminated.lir:4:1: error: end of input before the '}' closing graph 'open'");
}

TEST(parse_error_missing_return) {
  ASSERT_PARSE_ERROR("graph g(a: f32[3]) {\n  b = neg a\n}\n", "t.lir:3:1: error: graph 'g' has no return");
  ASSERT_PARSE_ERROR("graph g(a: f32[3]) {}", "t.lir:1:21: error: graph 'g' has no return");
  ASSERT_PARSE_ERROR("graph g(a: f32[3]) {\n  return\n}\n",
                     "t.lir:2:9: error: expected a name to return, found end of line");
  ASSERT_PARSE_ERROR("graph g(a: f32[3]) {\n  return a\n  b = neg a\n}\n",
                     "t.lir:3:3: error: 'b' after the return: 'return' is the last statement");
}

TEST(parse_error_text_after_graph) {
  ASSERT_PARSE_ERROR("graph g(a: f32[3]) {\n  return a\n}\ngraph h(a: f32[3]) {\n  return a\n}\n",
                     "t.lir:4:1: error: 'graph' after the end of graph 'g' (a file holds one graph)");
  ASSERT_PARSE_ERROR("graph g(a: f32[3]) {\n  return a\n} x",
                     "t.lir:3:3: error: 'x' after the end of graph 'g' (a file holds one graph)");
}

TEST(parse_error_binary_garbage) {
  ASSERT_PARSE_ERROR_N("\x00\xff\x13\x80graph", 9,
                       "t.lir:1:1: error: NUL byte in the text (is this a binary file?)");
  ASSERT_PARSE_ERROR_N("\xff\xfe\x00\x01", 4,
                       "t.lir:1:1: error: invalid UTF-8 byte 0xff (is this a binary file?)");
  /* A NUL inside a comment, or after the graph, is still found, at its place. */
  const char with_nul[] = "graph g(a: f32[3]) {\n  # x\0y\n  return a\n}\n";
  ASSERT_PARSE_ERROR_N(with_nul, sizeof with_nul - 1,
                       "t.lir:2:6: error: NUL byte in the text (is this a binary file?)");
  const char trailing_nul[] = "graph g(a: f32[3]) {\n  return a\n}\n\0";
  ASSERT_PARSE_ERROR_N(trailing_nul, sizeof trailing_nul - 1,
                       "t.lir:4:1: error: NUL byte in the text (is this a binary file?)");
  /* Overlong and surrogate encodings are invalid UTF-8; valid UTF-8 in a comment is fine. */
  ASSERT_PARSE_ERROR(G1("# \xc0\xaf"), "t.lir:2:5: error: invalid UTF-8 byte 0xc0 (is this a binary file?)");
  ASSERT_PARSE_ERROR(G1("# \xed\xa0\x80"),
                     "t.lir:2:5: error: invalid UTF-8 byte 0xed (is this a binary file?)");
  ASSERT_PARSE_ERROR(G1("# \xe2\x9c"), "t.lir:2:5: error: invalid UTF-8 byte 0xe2 (is this a binary file?)");
  ASSERT_PARSE_ERROR(G1("b = neg \xc3\xa9"),
                     "t.lir:2:11: error: unexpected character U+00E9 (outside comments, .lir text is ASCII)");
  ASSERT_PARSE_ERROR(G1("b = neg \x13"), "t.lir:2:11: error: unexpected control character 0x13");
  ASSERT_PARSE_ERROR(G1("b = neg a @"), "t.lir:2:13: error: unexpected character '@'");
  /* Random bytes never crash, and always give one located line. */
  unsigned seed = 12345;
  for (int round = 0; round < 2000; round++) {
    char buf[64];
    size_t n = (size_t)(round % 63) + 1;
    for (size_t i = 0; i < n; i++) buf[i] = (char)((seed = seed * 1103515245u + 12345u) >> 16);
    loom_graph *g = NULL;
    ASSERT_STATUS(loom_graph_parse(buf, n, "r.lir", &g), LOOM_ERR_INVALID_ARGUMENT);
    ASSERT_TRUE(strncmp(loom_last_error(), "r.lir:", 6) == 0 && !strchr(loom_last_error(), '\n'));
  }
}

TEST(parse_error_empty_input) {
  ASSERT_PARSE_ERROR("", "t.lir:1:1: error: expected 'graph NAME(...) { ... }', found end of input");
  ASSERT_PARSE_ERROR("\n# only a comment\n\n",
                     "t.lir:4:1: error: expected 'graph NAME(...) { ... }', found end of input");
  loom_graph *g = NULL;
  ASSERT_STATUS(loom_graph_parse(NULL, 0, NULL, &g), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STREQ(loom_last_error(),
               "<input>:1:1: error: expected 'graph NAME(...) { ... }', found end of input");
  ASSERT_STATUS(loom_graph_parse(NULL, 1, NULL, &g), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_graph_parse("", 0, NULL, NULL), LOOM_ERR_INVALID_ARGUMENT);
}

TEST(parse_error_bad_attribute_value) {
  ASSERT_PARSE_ERROR(G1("v, i = topk a k=true axis=0"),
                     "t.lir:2:19: error: attribute 'k' takes an integer, found 'true'");
  ASSERT_PARSE_ERROR(G1("v, i = topk a k=1 axis=0 largest=1"),
                     "t.lir:2:36: error: attribute 'largest' takes true or false, found '1'");
  ASSERT_PARSE_ERROR(G1("b = cast a to=f33"), "t.lir:2:17: error: unknown dtype 'f33'");
  ASSERT_PARSE_ERROR(G1("b = cast a to=1"),
                     "t.lir:2:17: error: attribute 'to' takes a dtype such as f32, found '1'");
  ASSERT_PARSE_ERROR(
      G1("b = reshape a shape=3"),
      "t.lir:2:23: error: attribute 'shape' takes a list of integers such as [1,2], found '3'");
  ASSERT_PARSE_ERROR(G1("b = reshape a shape=[1.5]"),
                     "t.lir:2:24: error: attribute 'shape' takes a list of integers, found '1.5'");
  ASSERT_PARSE_ERROR(G1("b = reshape a shape=[1,1,1,1,1,1,1,1,3]"),
                     "t.lir:2:40: error: attribute 'shape' has more than 8 entries");
  ASSERT_PARSE_ERROR(G1("b = fill value=x : f32[]"),
                     "t.lir:2:18: error: attribute 'value' takes a number, found 'x'");
  ASSERT_PARSE_ERROR(G1("b = reshape a shape=[3] shape=[3]"),
                     "t.lir:2:27: error: attribute 'shape' is given twice");
  ASSERT_PARSE_ERROR(G1("b = reshape a shape=[3,]"),
                     "t.lir:2:26: error: attribute 'shape' takes a list of integers, found ']'");
  ASSERT_PARSE_ERROR(G1("b = reshape a shape=[3 1]"),
                     "t.lir:2:26: error: expected ',' or ']' in 'shape', found '1'");
  ASSERT_PARSE_ERROR(G1("b = reshape a shape=[3abc]"), "t.lir:2:24: error: bad number '3abc'");
  ASSERT_PARSE_ERROR(G1("b = reshape a shape=[1e]"), "t.lir:2:24: error: bad number '1e'");
  /* The builder's rules on values, placed at the op. */
  ASSERT_PARSE_ERROR(G1("b = reshape a shape=[4]"),
                     "t.lir:2:7: error: reshape: cannot reshape f32[3] (3 elements) to [4] (4 elements)");
}

TEST(parse_error_unknown_or_unallowed_attribute) {
  ASSERT_PARSE_ERROR(G1("b = neg a foo=1"), "t.lir:2:13: error: unknown attribute 'foo'");
  ASSERT_PARSE_ERROR(G1("b = add a a axis=1"), "t.lir:2:15: error: add: takes no attribute 'axis'");
  ASSERT_PARSE_ERROR(G1("b = reshape a"), "t.lir:2:7: error: reshape: needs attribute 'shape'");
}

TEST(parse_error_type_annotation) {
  ASSERT_PARSE_ERROR(G1("b = neg a : f32[4]"),
                     "t.lir:2:15: error: neg: declared type f32[4] does not equal the inferred type f32[3]");
  ASSERT_PARSE_ERROR(G1("v, i = topk a k=1 axis=0 : f32[1], f32[1]"),
                     "t.lir:2:38: error: topk: declared type f32[1] does not equal the inferred type i64[1]");
  ASSERT_PARSE_ERROR(G1("v, i = topk a k=1 axis=0 : i64[1]"),
                     "t.lir:2:30: error: topk: declared type i64[1] does not equal the inferred type f32[1]");
  ASSERT_PARSE_ERROR(G1("b = neg a : f32[3], f32[3]"),
                     "t.lir:2:21: error: expected the end of the statement, found ','");
  ASSERT_PARSE_ERROR(G1("b = neg a :"),
                     "t.lir:2:14: error: expected a type such as f32[3], found end of line");
  ASSERT_PARSE_ERROR(G1("b = iota axis=0"),
                     "t.lir:2:7: error: iota: needs its result type, as in 'x = iota ... : f32[4]'");
  ASSERT_PARSE_ERROR(G1("b = fill value=1"),
                     "t.lir:2:7: error: fill: needs its result type, as in 'x = fill ... : f32[4]'");
}

TEST(parse_error_bad_dtype) {
  ASSERT_PARSE_ERROR("graph g(a: f33[3]) {\n  return a\n}\n", "t.lir:1:12: error: unknown dtype 'f33'");
  ASSERT_PARSE_ERROR("graph g(a: f32) {\n  return a\n}\n",
                     "t.lir:1:15: error: expected '[' after 'f32' (a scalar is f32[]), found ')'");
  ASSERT_PARSE_ERROR("graph g(a: [3]) {\n  return a\n}\n",
                     "t.lir:1:12: error: expected a type such as f32[3], found '['");
}

TEST(parse_error_missing_equals_and_other_syntax) {
  ASSERT_PARSE_ERROR(G1("b neg a"), "t.lir:2:5: error: expected '=' after 'b', found 'neg'");
  ASSERT_PARSE_ERROR(G1("b ="), "t.lir:2:6: error: expected an op name after '=', found end of line");
  ASSERT_PARSE_ERROR(G1("b = neg a 2"), "t.lir:2:13: error: expected the end of the statement, found '2'");
  ASSERT_PARSE_ERROR(G1("= neg a"), "t.lir:2:3: error: expected a name, found '='");
  ASSERT_PARSE_ERROR("grph g() {}", "t.lir:1:1: error: expected 'graph NAME(...) { ... }', found 'grph'");
  ASSERT_PARSE_ERROR("graph (a: f32[3]) {}",
                     "t.lir:1:7: error: expected the graph's name after 'graph', found '('");
  ASSERT_PARSE_ERROR("graph g a: f32[3]) {}",
                     "t.lir:1:9: error: expected '(' after the graph's name, found 'a'");
  ASSERT_PARSE_ERROR("graph g(a f32[3]) {}",
                     "t.lir:1:11: error: expected ':' after parameter 'a', found 'f32'");
  ASSERT_PARSE_ERROR("graph g(a: f32[3])\n  return a\n}\n",
                     "t.lir:2:3: error: expected '{' to open the graph's body, found 'return'");
  ASSERT_PARSE_ERROR("graph g(1: f32[3]) {}", "t.lir:1:9: error: expected a parameter name, found '1'");
  ASSERT_PARSE_ERROR("graph g(a: f32[3]) {\n  b = neg -a\n}\n",
                     "t.lir:2:11: error: unexpected character '-'");
}

TEST(parse_error_result_count) {
  ASSERT_PARSE_ERROR(G1("v = topk a k=1 axis=0"),
                     "t.lir:2:3: error: topk gives 2 results, but 1 name is given");
  ASSERT_PARSE_ERROR(G1("b, c = neg a"), "t.lir:2:3: error: neg gives 1 result, but 2 names are given");
}

TEST(parse_error_constants) {
  ASSERT_PARSE_ERROR(G1("c = constant [1,2,3] : f32[2,2]"),
                     "t.lir:2:16: error: constant: 3 numbers for f32[2,2], which has 4 elements");
  ASSERT_PARSE_ERROR(G1("c = constant 1 : f32[2]"),
                     "t.lir:2:16: error: constant: 1 number for f32[2], which has 2 elements");
  ASSERT_PARSE_ERROR(
      G1("c = constant [1,2,3] : c64[2]"),
      "t.lir:2:16: error: constant: 3 numbers for c64[2], which takes 2 real parts or 4 (re,im) numbers");
  ASSERT_PARSE_ERROR(G1("c = constant [1,300] : u8[2]"),
                     "t.lir:2:19: error: constant: '300' is out of range for u8");
  ASSERT_PARSE_ERROR(G1("c = constant [-1] : u8[1]"),
                     "t.lir:2:17: error: constant: '-1' is out of range for u8");
  ASSERT_PARSE_ERROR(G1("c = constant [128] : i8[1]"),
                     "t.lir:2:17: error: constant: '128' is out of range for i8");
  ASSERT_PARSE_ERROR(G1("c = constant [9223372036854775808] : i64[1]"),
                     "t.lir:2:17: error: constant: '9223372036854775808' is out of range for i64");
  ASSERT_PARSE_ERROR(G1("c = constant [2.5] : i32[1]"),
                     "t.lir:2:17: error: constant: '2.5' is not an integer, as i32 needs");
  ASSERT_PARSE_ERROR(G1("c = constant [inf] : i32[1]"),
                     "t.lir:2:17: error: constant: i32 takes integers, found 'inf'");
  ASSERT_PARSE_ERROR(G1("c = constant [2] : bool[1]"),
                     "t.lir:2:17: error: constant: bool takes true, false, 0 or 1, found '2'");
  ASSERT_PARSE_ERROR(G1("c = constant [true] : f32[1]"),
                     "t.lir:2:17: error: constant: f32 takes numbers, found 'true'");
  ASSERT_PARSE_ERROR(G1("c = constant [70000] : f16[1]"),
                     "t.lir:2:17: error: constant: '70000' overflows f16");
  ASSERT_PARSE_ERROR(G1("c = constant [1e39] : f32[1]"), "t.lir:2:17: error: constant: '1e39' overflows f32");
  ASSERT_PARSE_ERROR(G1("c = constant [1e39] : bf16[1]"),
                     "t.lir:2:17: error: constant: '1e39' overflows bf16");
  ASSERT_PARSE_ERROR(G1("c = constant [1,,2] : f32[2]"),
                     "t.lir:2:19: error: constant: expected a number, found ','");
  ASSERT_PARSE_ERROR(G1("c = constant [1 2] : f32[2]"),
                     "t.lir:2:19: error: constant: expected ',' or ']' in the data, found '2'");
  ASSERT_PARSE_ERROR(G1("c = constant a : f32[3]"),
                     "t.lir:2:16: error: constant: expected a number or a list of numbers, found 'a'");
  ASSERT_PARSE_ERROR(G1("c = constant [1]"),
                     "t.lir:2:7: error: constant: needs its result type, as in 'x = constant ... : f32[4]'");
  ASSERT_PARSE_ERROR(G1("c = constant [1] a : f32[1]"),
                     "t.lir:2:7: error: constant: takes 0 operands, got 1");
  /* Deep nesting is not recursion: no stack to exhaust. */
  size_t depth = 100000;
  char *deep = malloc(2 * depth + 64);
  ASSERT_TRUE(deep != NULL);
  size_t n = (size_t)sprintf(deep, "graph g() {\n  c = constant ");
  memset(deep + n, '[', depth);
  n += depth;
  n += (size_t)sprintf(deep + n, "1");
  memset(deep + n, ']', depth);
  n += depth;
  n += (size_t)sprintf(deep + n, " : f32[]\n  return c\n}\n");
  loom_graph *g = NULL;
  loom_status s = loom_graph_parse(deep, n, "t.lir", &g);
  free(deep);
  ASSERT_OK(s);
  ASSERT_EQ(((float *)g->ops[0].const_data)[0], 1);
  loom_graph_destroy(g);
}

TEST(parse_error_long_token_is_cut_in_messages) {
  char text[512];
  snprintf(text, sizeof text, G1("b = %s a"), "a_very_long_op_name_that_goes_on_and_on_and_on_forever");
  ASSERT_PARSE_ERROR(text, "t.lir:2:7: error: unknown op 'a_very_long_op_name_that_goes_on_and_on_...'");
}

/* ---- files ---------------------------------------------------------------------------- */

TEST(load_missing_file) {
  loom_graph *g = (loom_graph *)1;
  ASSERT_STATUS(loom_graph_load("/nonexistent/dir/x.lir", &g), LOOM_ERR_NOT_FOUND);
  ASSERT_TRUE(g == NULL);
  ASSERT_STREQ(loom_last_error(), "/nonexistent/dir/x.lir: No such file or directory");
}

TEST(load_directory) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", lir_path(""));
  loom_graph *g = (loom_graph *)1;
  ASSERT_STATUS(loom_graph_load(dir, &g), LOOM_ERR_IO);
  ASSERT_TRUE(g == NULL);
  char want[PATH_MAX + 64];
  snprintf(want, sizeof want, "%s: Is a directory", dir);
  ASSERT_STREQ(loom_last_error(), want);
}

TEST(load_refuses_files_over_1_gib) {
  char path[] = "/tmp/loom_test_big_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_TRUE(fd >= 0);
  int rc = ftruncate(fd, ((off_t)1 << 30) + 1); /* sparse: takes no disk */
  close(fd);
  loom_graph *g = NULL;
  loom_status s = loom_graph_load(path, &g);
  unlink(path);
  ASSERT_EQ(rc, 0);
  ASSERT_STATUS(s, LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "larger than 1 GiB");
}

TEST(load_empty_file_and_arguments) {
  char path[] = "/tmp/loom_test_empty_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_TRUE(fd >= 0);
  close(fd);
  loom_graph *g = NULL;
  loom_status s = loom_graph_load(path, &g);
  char want[128];
  snprintf(want, sizeof want, "%s:1:1: error: expected 'graph NAME(...) { ... }', found end of input", path);
  unlink(path);
  ASSERT_STATUS(s, LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STREQ(loom_last_error(), want);
  ASSERT_STATUS(loom_graph_load(NULL, &g), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_graph_load(path, NULL), LOOM_ERR_INVALID_ARGUMENT);
}

TEST(load_bad_sample_files) {
  loom_graph *g = NULL;
  ASSERT_STATUS(loom_graph_load(lir_path("bad_no_return.lir"), &g), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "bad_no_return.lir:3:1: error: graph 'g' has no return");
}
