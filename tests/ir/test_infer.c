/* Result type inference (src/ir/infer.c) through the builders (src/ir/builder.c): for every
 * op class, good cases with their result types and bad cases with their messages. */
#include <stdlib.h>

#include "harness.h"
#include "ir/ir.h"

/* "f32[3,4]" -> a type. Test input only: no validation. */
static loom_type ty(const char *s) {
  loom_type t;
  memset(&t, 0, sizeof t);
  const char *br = strchr(s, '[');
  loom_dtype_parse(s, (size_t)(br - s), &t.dtype);
  for (const char *p = br + 1; *p != ']';) {
    char *end;
    t.dims[t.rank++] = strtoll(p, &end, 10);
    p = *end == ',' ? end + 1 : end;
  }
  return t;
}

/* A graph with one parameter per space-separated type in `types`, written to x[]. */
static loom_graph *graph_of(const char *types, loom_value *x) {
  loom_graph *g = NULL;
  if (loom_graph_create("t", &g)) return NULL;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", types);
  int n = 0;
  for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
    loom_type t = ty(tok);
    x[n++] = loom_graph_param(g, NULL, &t);
  }
  return g;
}

/* The type of v as text, or "error: <message>" when v is no value. */
static void type_str(const loom_graph *g, loom_value v, char *buf, size_t size) {
  const loom_type *t = loom_value_type(g, v);
  if (t)
    loom_type_format(t, buf, size);
  else
    snprintf(buf, size, "error: %s", loom_last_error());
}

/* The builder call (the variadic tail, which may use g and x[]) gives type `want`. */
#define GOOD(types, want, ...)              \
  do {                                      \
    loom_value x[4];                        \
    loom_graph *g = graph_of(types, x);     \
    ASSERT_TRUE(g != NULL);                 \
    loom_value v_ = (__VA_ARGS__);          \
    char got_[LOOM_TYPE_STRING_MAX + 1024]; \
    type_str(g, v_, got_, sizeof got_);     \
    loom_graph_destroy(g);                  \
    ASSERT_STREQ(got_, want);               \
  } while (0)

/* The builder call fails, its message contains `msg`, and verify reports the same. */
#define BAD(types, msg, ...)                                  \
  do {                                                        \
    loom_value x[4];                                          \
    loom_graph *g = graph_of(types, x);                       \
    ASSERT_TRUE(g != NULL);                                   \
    loom_value v_ = (__VA_ARGS__);                            \
    char now_[1024], later_[1024];                            \
    snprintf(now_, sizeof now_, "%s", loom_last_error());     \
    loom_status vs_ = loom_graph_verify(g);                   \
    snprintf(later_, sizeof later_, "%s", loom_last_error()); \
    loom_graph_destroy(g);                                    \
    ASSERT_EQ(v_.id, -1);                                     \
    ASSERT_CONTAINS(now_, msg);                               \
    ASSERT_EQ(vs_, LOOM_ERR_INVALID_ARGUMENT);                \
    ASSERT_CONTAINS(later_, msg);                             \
  } while (0)

#define L(...) ((const int64_t[]){__VA_ARGS__})
#define BIN(op, a, b) loom_binary(g, LOOM_OP_##op, a, b)

/* ---- elementwise ------------------------------------------------------------------------ */

TEST(infer_binary_broadcasting) {
  GOOD("f32[3,4] f32[4]", "f32[3,4]", BIN(ADD, x[0], x[1]));
  GOOD("f32[4] f32[3,4]", "f32[3,4]", BIN(SUB, x[0], x[1]));
  GOOD("f32[2,1,5] f32[3,1]", "f32[2,3,5]", BIN(MUL, x[0], x[1]));
  GOOD("f64[] f64[2,3]", "f64[2,3]", BIN(DIV, x[0], x[1]));
  GOOD("f32[] f32[]", "f32[]", BIN(MAXIMUM, x[0], x[1]));
  GOOD("f32[0,3] f32[1,3]", "f32[0,3]", BIN(MINIMUM, x[0], x[1]));
  GOOD("f32[0] f32[]", "f32[0]", BIN(ADD, x[0], x[1]));
  GOOD("f32[2,1,3,1,4,1,5,1] f32[6,1,7,1,8,1,9]", "f32[2,6,3,7,4,8,5,9]", BIN(ADD, x[0], x[1]));
  GOOD("i32[5] i32[5]", "i32[5]", BIN(DIV, x[0], x[1]));
  GOOD("u8[5] u8[1]", "u8[5]", BIN(POW, x[0], x[1]));
  GOOD("c64[2,3] c64[3]", "c64[2,3]", BIN(MUL, x[0], x[1]));
  GOOD("c128[2] c128[2]", "c128[2]", BIN(DIV, x[0], x[1]));
  GOOD("bf16[2] bf16[2]", "bf16[2]", BIN(SUB, x[0], x[1]));
}

TEST(infer_binary_errors) {
  BAD("f32[3,4] f32[5]", "sub: shapes f32[3,4] and f32[5] do not broadcast", BIN(SUB, x[0], x[1]));
  BAD("f32[3] f64[3]", "add: operand dtypes differ: f32[3] and f64[3]", BIN(ADD, x[0], x[1]));
  BAD("f32[0] f32[3]", "add: shapes f32[0] and f32[3] do not broadcast", BIN(ADD, x[0], x[1]));
  BAD("c64[3] c64[3]", "pow: takes an integer or float dtype, got c64[3] and c64[3]", BIN(POW, x[0], x[1]));
  BAD("c64[3] c64[3]", "maximum: takes an integer or float dtype", BIN(MAXIMUM, x[0], x[1]));
  BAD("bool[3] bool[3]", "add: takes an integer, float or complex dtype, got bool[3]", BIN(ADD, x[0], x[1]));
  BAD("bool[3] bool[3]", "minimum: takes an integer or float dtype", BIN(MINIMUM, x[0], x[1]));
}

TEST(infer_compare_and_logic) {
  GOOD("f32[3,1] f32[4]", "bool[3,4]", BIN(LT, x[0], x[1]));
  GOOD("i64[2] i64[]", "bool[2]", BIN(GE, x[0], x[1]));
  GOOD("c64[2] c64[2]", "bool[2]", BIN(EQ, x[0], x[1]));
  GOOD("bool[2] bool[2]", "bool[2]", BIN(NE, x[0], x[1]));
  GOOD("bool[2,1] bool[3]", "bool[2,3]", BIN(AND, x[0], x[1]));
  GOOD("bool[] bool[3]", "bool[3]", BIN(OR, x[0], x[1]));
  BAD("c64[2] c64[2]", "lt: takes an integer or float dtype, got c64[2] and c64[2]", BIN(LT, x[0], x[1]));
  BAD("f32[2] i32[2]", "eq: operand dtypes differ: f32[2] and i32[2]", BIN(EQ, x[0], x[1]));
  BAD("f32[2] f32[2]", "and: takes bool, got f32[2] and f32[2]", BIN(AND, x[0], x[1]));
  BAD("bool[2] bool[3]", "or: shapes bool[2] and bool[3] do not broadcast", BIN(OR, x[0], x[1]));
}

TEST(infer_unary_dtypes) {
  GOOD("f32[3,0]", "f32[3,0]", loom_unary(g, LOOM_OP_EXP, x[0]));
  GOOD("f16[2]", "f16[2]", loom_unary(g, LOOM_OP_SIGMOID, x[0]));
  GOOD("i8[2]", "i8[2]", loom_unary(g, LOOM_OP_NEG, x[0]));
  GOOD("c64[2]", "c64[2]", loom_unary(g, LOOM_OP_NEG, x[0]));
  GOOD("i32[]", "i32[]", loom_unary(g, LOOM_OP_ABS, x[0]));
  GOOD("f64[2]", "f64[2]", loom_unary(g, LOOM_OP_SIGN, x[0]));
  GOOD("i16[2]", "i16[2]", loom_unary(g, LOOM_OP_RELU, x[0]));
  GOOD("bool[2]", "bool[2]", loom_unary(g, LOOM_OP_NOT, x[0]));
  GOOD("u8[2]", "u8[2]", loom_unary(g, LOOM_OP_SQUARE, x[0]));
  GOOD("c128[2]", "c128[2]", loom_unary(g, LOOM_OP_SQUARE, x[0]));
  BAD("i32[3]", "exp: takes a float dtype, got i32[3]", loom_unary(g, LOOM_OP_EXP, x[0]));
  BAD("c64[3]", "sqrt: takes a float dtype, got c64[3]", loom_unary(g, LOOM_OP_SQRT, x[0]));
  BAD("u8[3]", "neg: takes a signed integer, float or complex dtype, got u8[3]",
      loom_unary(g, LOOM_OP_NEG, x[0]));
  BAD("c64[3]", "abs: takes a signed integer or float dtype, got c64[3]", loom_unary(g, LOOM_OP_ABS, x[0]));
  BAD("u8[3]", "relu: takes a signed integer or float dtype", loom_unary(g, LOOM_OP_RELU, x[0]));
  BAD("f32[3]", "not: takes bool, got f32[3]", loom_unary(g, LOOM_OP_NOT, x[0]));
  BAD("bool[3]", "square: takes an integer, float or complex dtype, got bool[3]",
      loom_unary(g, LOOM_OP_SQUARE, x[0]));
  BAD("i32[3]", "floor: takes a float dtype", loom_unary(g, LOOM_OP_FLOOR, x[0]));
}

/* ---- sources, select, cast ---------------------------------------------------------------- */

TEST(infer_sources) {
  loom_type t = ty("f32[2,3]"), b = ty("bool[4]"), u = ty("u8[4]"), i = ty("i32[4]");
  GOOD("f32[1]", "f32[2,3]", loom_constant(g, &t, NULL));
  GOOD("f32[1]", "f32[2,3]", loom_iota(g, &t, 1));
  GOOD("f32[1]", "f32[2,3]", loom_iota(g, &t, -2));
  GOOD("f32[1]", "f32[2,3]", loom_fill(g, &t, NAN));
  GOOD("f32[1]", "bool[4]", loom_fill(g, &b, 1));
  GOOD("f32[1]", "u8[4]", loom_fill(g, &u, 255));
  BAD("f32[1]", "constant: needs a result type", loom_constant(g, NULL, NULL));
  BAD("f32[1]", "fill: needs a result type", loom_fill(g, NULL, 1.0));
  BAD("f32[1]", "iota: axis 2 is out of range for f32[2,3] (rank 2)", loom_iota(g, &t, 2));
  BAD("f32[1]", "iota: axis -3 is out of range", loom_iota(g, &t, -3));
  BAD("f32[1]", "iota: cannot count in bool[4]", loom_iota(g, &b, 0));
  BAD("f32[1]", "fill: value 2 does not fit bool[4]", loom_fill(g, &b, 2));
  BAD("f32[1]", "fill: value -1 does not fit u8[4]", loom_fill(g, &u, -1));
  BAD("f32[1]", "fill: value 1.5 is not an integer, as i32[4] needs", loom_fill(g, &i, 1.5));
  loom_type big = ty("f64[1099511627776,1099511627776]"), neg = ty("f32[-1]");
  BAD("f32[1]", "constant: result f64[1099511627776,1099511627776] overflows int64",
      loom_constant(g, &big, NULL));
  BAD("f32[1]", "fill: dimension 0 of the result is negative", loom_fill(g, &neg, 0));
}

TEST(infer_scalar_f64_conversions) {
  loom_graph *g;
  ASSERT_OK(loom_graph_create("s", &g));
  struct {
    loom_dtype dt;
    double v;
  } cases[] = {{LOOM_I8, 300},   {LOOM_U8, -3},    {LOOM_I32, NAN}, {LOOM_I64, 1e30},
               {LOOM_I16, -7.9}, {LOOM_BOOL, 0.5}, {LOOM_F16, 1.5}, {LOOM_BF16, -2},
               {LOOM_C64, 2.5},  {LOOM_C128, -1},  {LOOM_F64, 0.1}};
  for (int32_t i = 0; i < LOOM_ARRAY_SIZE(cases); i++) {
    loom_value v = loom_scalar_f64(g, cases[i].dt, cases[i].v);
    ASSERT_TRUE(v.id >= 0);
    ASSERT_EQ(loom_value_type(g, v)->rank, 0);
    ASSERT_EQ(loom_value_type(g, v)->dtype, cases[i].dt);
  }
  const loom__op *o = g->ops;
  ASSERT_EQ(*(int8_t *)o[0].const_data, 127);
  ASSERT_EQ(*(uint8_t *)o[1].const_data, 0);
  ASSERT_EQ(*(int32_t *)o[2].const_data, 0);
  ASSERT_TRUE(*(int64_t *)o[3].const_data == INT64_MAX);
  ASSERT_EQ(*(int16_t *)o[4].const_data, -7);
  ASSERT_EQ(*(uint8_t *)o[5].const_data, 1);
  ASSERT_EQ(*(uint16_t *)o[6].const_data, 0x3e00);
  ASSERT_NEAR(loom_bf16_to_f32(*(uint16_t *)o[7].const_data), -2.0, 0);
  ASSERT_NEAR(((float *)o[8].const_data)[0], 2.5, 0);
  ASSERT_NEAR(((float *)o[8].const_data)[1], 0.0, 0);
  ASSERT_NEAR(((double *)o[9].const_data)[0], -1.0, 0);
  ASSERT_NEAR(((double *)o[9].const_data)[1], 0.0, 0);
  ASSERT_NEAR(*(double *)o[10].const_data, 0.1, 0);
  ASSERT_EQ(o[3].const_bytes, 8);
  ASSERT_EQ(o[9].const_bytes, 16);
  loom_graph_destroy(g);
}

TEST(infer_select) {
  GOOD("bool[3,1] f32[4] f32[1]", "f32[3,4]", loom_select(g, x[0], x[1], x[2]));
  GOOD("bool[] i32[2] i32[]", "i32[2]", loom_select(g, x[0], x[1], x[2]));
  BAD("f32[3] f32[3] f32[3]", "select: the condition must be bool, got f32[3]",
      loom_select(g, x[0], x[1], x[2]));
  BAD("bool[3] f32[3] f64[3]", "select: operand dtypes differ: f32[3] and f64[3]",
      loom_select(g, x[0], x[1], x[2]));
  BAD("bool[3] f32[4] f32[3]", "select: shapes bool[3], f32[4] and f32[3] do not broadcast",
      loom_select(g, x[0], x[1], x[2]));
}

TEST(infer_cast) {
  GOOD("f32[2,3]", "i8[2,3]", loom_cast(g, x[0], LOOM_I8));
  GOOD("i32[2]", "c64[2]", loom_cast(g, x[0], LOOM_C64));
  GOOD("c64[2]", "c128[2]", loom_cast(g, x[0], LOOM_C128));
  GOOD("bool[]", "f16[]", loom_cast(g, x[0], LOOM_F16));
  BAD("c64[3]", "cast: cannot cast complex c64[3] to non-complex f32", loom_cast(g, x[0], LOOM_F32));
  BAD("f32[3]", "cast: unknown dtype 99", loom_cast(g, x[0], (loom_dtype)99));
}

/* ---- layout -------------------------------------------------------------------------------- */

TEST(infer_reshape) {
  GOOD("f32[2,6]", "f32[3,4]", loom_reshape(g, x[0], 2, L(-1, 4)));
  GOOD("f32[2,6]", "f32[12]", loom_reshape(g, x[0], 1, L(-1)));
  GOOD("f32[1,1]", "f32[]", loom_reshape(g, x[0], 0, NULL));
  GOOD("f32[0,3]", "f32[0,3]", loom_reshape(g, x[0], 2, L(-1, 3)));
  GOOD("f32[2,1,2,1,2,1,2,1]", "f32[16]", loom_reshape(g, x[0], 1, L(16)));
  GOOD("f32[16]", "f32[2,1,2,1,2,1,2,1]", loom_reshape(g, x[0], 8, L(2, 1, 2, 1, 2, -1, 2, 1)));
  BAD("f32[6]", "reshape: cannot reshape f32[6] (6 elements) to [4,2] (8 elements)",
      loom_reshape(g, x[0], 2, L(4, 2)));
  BAD("f32[6]", "reshape: cannot reshape f32[6] (6 elements) to [-1,4]", loom_reshape(g, x[0], 2, L(-1, 4)));
  BAD("f32[0,3]", "reshape: cannot reshape f32[0,3] (0 elements) to [0,-1]",
      loom_reshape(g, x[0], 2, L(0, -1)));
  BAD("f32[6]", "reshape: shape [-1,-1] has more than one -1", loom_reshape(g, x[0], 2, L(-1, -1)));
  BAD("f32[6]", "reshape: dimension 1 of shape [2,-3] is negative", loom_reshape(g, x[0], 2, L(2, -3)));
  BAD("f64[4]", "reshape: shape [1099511627776,1099511627776] overflows int64",
      loom_reshape(g, x[0], 2, L(1LL << 40, 1LL << 40)));
  BAD("f32[6]", "reshape: shape has 9 entries, it may have 0..8",
      loom_reshape(g, x[0], 9, L(1, 1, 1, 1, 1, 1, 1, 1, 6)));
}

TEST(infer_transpose) {
  GOOD("f32[2,3,4]", "f32[3,2,4]", loom_transpose(g, x[0], 3, L(1, 0, 2)));
  GOOD("f32[2,3,4]", "f32[4,2,3]", loom_transpose(g, x[0], 3, L(2, 0, 1)));
  GOOD("f32[]", "f32[]", loom_transpose(g, x[0], 0, NULL));
  BAD("f32[3,4]", "transpose: perm [0,0] is not a permutation of 0..1 for f32[3,4]",
      loom_transpose(g, x[0], 2, L(0, 0)));
  BAD("f32[3,4]", "transpose: perm [-1,0] is not a permutation", loom_transpose(g, x[0], 2, L(-1, 0)));
  BAD("f32[3,4]", "transpose: perm [0,2] is not a permutation", loom_transpose(g, x[0], 2, L(0, 2)));
  BAD("f32[3,4]", "transpose: perm=[0] has 1 entry, f32[3,4] needs 2", loom_transpose(g, x[0], 1, L(0)));
}

TEST(infer_broadcast) {
  GOOD("f32[3,1]", "f32[2,3,4]", loom_broadcast(g, x[0], 3, L(2, 3, 4)));
  GOOD("f32[]", "f32[5]", loom_broadcast(g, x[0], 1, L(5)));
  GOOD("f32[1]", "f32[0]", loom_broadcast(g, x[0], 1, L(0)));
  GOOD("f32[3]", "f32[3]", loom_broadcast(g, x[0], 1, L(3)));
  BAD("f32[3,4]", "broadcast: cannot broadcast f32[3,4] to [5,4]: dimension 0 is 3, must be 1 or 5",
      loom_broadcast(g, x[0], 2, L(5, 4)));
  BAD("f32[3,4]", "broadcast: cannot broadcast f32[3,4] to [4]: the shape has fewer dimensions",
      loom_broadcast(g, x[0], 1, L(4)));
  BAD("f32[1]", "broadcast: dimension 0 of shape [-1,1] is negative", loom_broadcast(g, x[0], 2, L(-1, 1)));
  BAD("f64[1]", "broadcast: result f64[1099511627776,1099511627776] overflows int64: too many elements",
      loom_broadcast(g, x[0], 2, L(1LL << 40, 1LL << 40)));
  BAD("f64[1]", "broadcast: result f64[2147483648,2147483648] overflows int64: its byte size",
      loom_broadcast(g, x[0], 2, L(1LL << 31, 1LL << 31)));
}

TEST(infer_slice) {
  GOOD("f32[10,8]", "f32[3,4]", loom_slice(g, x[0], 2, L(1, 0), L(9, 8), L(3, 2)));
  GOOD("f32[10,8]", "f32[8,8]", loom_slice(g, x[0], 2, L(1, 0), L(9, 8), NULL));
  GOOD("f32[10]", "f32[0]", loom_slice(g, x[0], 1, L(4), L(4), NULL));
  GOOD("f32[10]", "f32[1]", loom_slice(g, x[0], 1, L(9), L(10), L(100)));
  GOOD("f32[]", "f32[]", loom_slice(g, x[0], 0, NULL, NULL, NULL));
  BAD("f32[4]", "slice: step must be >= 1", loom_slice(g, x[0], 1, L(0), L(4), L(0)));
  BAD("f32[4]",
      "slice: step must be >= 1, got -1 in dimension 0 of f32[4] (negative steps are not supported)",
      loom_slice(g, x[0], 1, L(3), L(0), L(-1)));
  BAD("f32[4,5]", "slice: dimension 1 of f32[4,5] needs 0 <= start <= stop <= 5, got start 0, stop 6",
      loom_slice(g, x[0], 2, L(0, 0), L(4, 6), NULL));
  BAD("f32[4]", "slice: dimension 0 of f32[4] needs 0 <= start <= stop <= 4, got start 3, stop 2",
      loom_slice(g, x[0], 1, L(3), L(2), NULL));
  BAD("f32[4]", "got start -1", loom_slice(g, x[0], 1, L(-1), L(2), NULL));
  BAD("f32[4,5]", "slice: start=[0] has 1 entry, f32[4,5] needs 2", loom_slice(g, x[0], 1, L(0), L(4), NULL));
}

TEST(infer_concat) {
  GOOD("f32[2,3] f32[4,3]", "f32[6,3]", loom_concat(g, x, 2, 0));
  GOOD("f32[2,3] f32[2,5] f32[2,0]", "f32[2,8]", loom_concat(g, x, 3, -1));
  GOOD("i8[7]", "i8[7]", loom_concat(g, x, 1, 0));
  BAD("f32[2,3] f32[2,4]",
      "concat: operand 2 f32[2,4] does not match operand 1 f32[2,3] outside axis 0 "
      "(dimension 1: 4 vs 3)",
      loom_concat(g, x, 2, 0));
  BAD("f32[2] f64[2]", "concat: operand 2 f64[2] does not match operand 1 f32[2] in dtype",
      loom_concat(g, x, 2, 0));
  BAD("f32[2] f32[2,1]", "in rank", loom_concat(g, x, 2, 0));
  BAD("f32[] f32[]", "concat: axis 0 is out of range for f32[] (rank 0)", loom_concat(g, x, 2, 0));
  BAD("f32[2,3] f32[2,3]", "concat: axis -3 is out of range for f32[2,3] (rank 2)", loom_concat(g, x, 2, -3));
  BAD("f32[2]", "concat: takes at least 1 operand, got 0", loom_concat(g, x, 0, 0));
}

TEST(infer_tile) {
  GOOD("f32[2,3]", "f32[4,6]", loom_tile(g, x[0], 2, L(2, 2)));
  GOOD("f32[2,3]", "f32[2,9]", loom_tile(g, x[0], 1, L(3)));
  GOOD("f32[2,3]", "f32[0,3]", loom_tile(g, x[0], 2, L(0, 1)));
  GOOD("f32[2,3]", "f32[2,3]", loom_tile(g, x[0], 0, NULL));
  BAD("f32[2,3]", "tile: reps=[1,-1] has a negative entry for f32[2,3]", loom_tile(g, x[0], 2, L(1, -1)));
  BAD("f32[3]", "tile: reps=[1,2] has more entries than f32[3] has dimensions",
      loom_tile(g, x[0], 2, L(1, 2)));
  BAD("f64[1024,1024]", "tile: result f64[1099511627776,1099511627776] overflows int64",
      loom_tile(g, x[0], 2, L(1LL << 30, 1LL << 30)));
  BAD("f64[2]", "tile: dimension 0 of f64[2] times 9223372036854775807 overflows int64",
      loom_tile(g, x[0], 1, L(INT64_MAX)));
}

/* ---- reductions ---------------------------------------------------------------------------- */

#define RED(op, x, n, axes, keep) loom_reduce(g, LOOM_OP_##op, x, n, axes, keep)

TEST(infer_reduce) {
  GOOD("f32[2,3,4]", "f32[2,4]", RED(REDUCE_SUM, x[0], 1, L(1), false));
  GOOD("f32[2,3,4]", "f32[2,1,4]", RED(REDUCE_MEAN, x[0], 1, L(1), true));
  GOOD("f32[2,3,4]", "f32[3]", RED(REDUCE_MAX, x[0], 2, L(-1, 0), false));
  GOOD("f32[2,3,4]", "f32[1,3,1]", RED(REDUCE_MIN, x[0], 2, L(-1, 0), true));
  GOOD("f32[2,3,4]", "f32[2,3,4]", RED(REDUCE_PROD, x[0], 0, NULL, false));
  GOOD("f32[2,3,4]", "f32[]", RED(REDUCE_SUM, x[0], 3, L(0, 1, 2), false));
  GOOD("i32[5,0]", "i32[5]", RED(REDUCE_SUM, x[0], 1, L(1), false));
  GOOD("c64[5]", "c64[]", RED(REDUCE_MEAN, x[0], 1, L(0), false));
  GOOD("u8[5]", "u8[1]", RED(REDUCE_PROD, x[0], 1, L(0), true));
  GOOD("f32[1,2,1,2,1,2,1,2]", "f32[2,2,2,2]", RED(REDUCE_SUM, x[0], 4, L(0, 2, 4, 6), false));
  BAD("f32[2,3]", "reduce_sum: axes=[1,-1] names axis 1 twice for f32[2,3]",
      RED(REDUCE_SUM, x[0], 2, L(1, -1), false));
  BAD("f32[2,3]", "reduce_max: axis 2 is out of range for f32[2,3] (rank 2)",
      RED(REDUCE_MAX, x[0], 1, L(2), false));
  BAD("i32[3]", "reduce_mean: takes a float or complex dtype, got i32[3]",
      RED(REDUCE_MEAN, x[0], 1, L(0), false));
  BAD("c64[3]", "reduce_max: takes an integer or float dtype, got c64[3]",
      RED(REDUCE_MAX, x[0], 1, L(0), false));
  BAD("bool[3]", "reduce_sum: takes an integer, float or complex dtype, got bool[3]",
      RED(REDUCE_SUM, x[0], 1, L(0), false));
  BAD("f32[3,0]", "reduce_min: axis 1 of f32[3,0] is empty and reduce_min has no identity",
      RED(REDUCE_MIN, x[0], 1, L(1), false));
  BAD("f32[3]", "loom_reduce: add is not a reduce_* op", RED(ADD, x[0], 1, L(0), false));
}

TEST(infer_argreduce) {
  GOOD("f32[3,4]", "i64[3]", loom_argreduce(g, LOOM_OP_ARGMAX, x[0], -1));
  GOOD("i8[3,4,5]", "i64[3,5]", loom_argreduce(g, LOOM_OP_ARGMIN, x[0], 1));
  GOOD("f32[0,4]", "i64[0]", loom_argreduce(g, LOOM_OP_ARGMAX, x[0], 1));
  BAD("f32[3,4]", "argmax: axis 2 is out of range for f32[3,4] (rank 2)",
      loom_argreduce(g, LOOM_OP_ARGMAX, x[0], 2));
  BAD("f32[]", "argmin: axis 0 is out of range for f32[] (rank 0)",
      loom_argreduce(g, LOOM_OP_ARGMIN, x[0], 0));
  BAD("f32[3,0]", "argmax: axis 1 of f32[3,0] is empty", loom_argreduce(g, LOOM_OP_ARGMAX, x[0], 1));
  BAD("bool[3]", "argmax: takes an integer or float dtype, got bool[3]",
      loom_argreduce(g, LOOM_OP_ARGMAX, x[0], 0));
  BAD("c64[3]", "argmin: takes an integer or float dtype, got c64[3]",
      loom_argreduce(g, LOOM_OP_ARGMIN, x[0], 0));
  BAD("f32[3]", "loom_argreduce: reduce_max is not argmax or argmin",
      loom_argreduce(g, LOOM_OP_REDUCE_MAX, x[0], 0));
}

TEST(infer_topk_two_results) {
  loom_graph *g;
  ASSERT_OK(loom_graph_create("k", &g));
  loom_type t = ty("f32[5,7]");
  loom_value x = loom_graph_param(g, "x", &t), val, idx;
  char buf[LOOM_TYPE_STRING_MAX];
  ASSERT_OK(loom_topk(g, x, 3, 1, false, &val, &idx));
  ASSERT_STREQ(loom_type_format(loom_value_type(g, val), buf, sizeof buf), "f32[5,3]");
  ASSERT_STREQ(loom_type_format(loom_value_type(g, idx), buf, sizeof buf), "i64[5,3]");
  ASSERT_OK(loom_topk(g, x, 5, -2, true, &val, NULL));
  ASSERT_STREQ(loom_type_format(loom_value_type(g, val), buf, sizeof buf), "f32[5,7]");
  ASSERT_OK(loom_topk(g, x, 0, 0, true, NULL, &idx));
  ASSERT_STREQ(loom_type_format(loom_value_type(g, idx), buf, sizeof buf), "i64[0,7]");
  ASSERT_EQ(g->ops[0].n_outputs, 2);
  ASSERT_STATUS(loom_topk(g, x, 8, 1, true, &val, &idx), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "topk: k=8 is outside 0..7 for axis 1 of f32[5,7]");
  ASSERT_EQ(val.id, -1);
  ASSERT_EQ(idx.id, -1);
  loom_graph_destroy(g);
}

TEST(infer_topk_errors) {
  BAD("f32[5,7]", "topk: k=-1 is outside 0..5",
      (loom_topk(g, x[0], -1, 0, true, NULL, NULL), LOOM_VALUE_NONE));
  BAD("f32[5,7]", "topk: axis 2 is out of range",
      (loom_topk(g, x[0], 1, 2, true, NULL, NULL), LOOM_VALUE_NONE));
  BAD("c64[5]", "topk: takes an integer or float dtype, got c64[5]",
      (loom_topk(g, x[0], 1, 0, true, NULL, NULL), LOOM_VALUE_NONE));
  BAD("bool[5]", "topk: takes an integer or float dtype, got bool[5]",
      (loom_topk(g, x[0], 1, 0, true, NULL, NULL), LOOM_VALUE_NONE));
}

/* ---- dot, conv, fourier -------------------------------------------------------------------- */

TEST(infer_dot) {
  GOOD("f32[3,4] f32[4,5]", "f32[3,5]", loom_dot(g, x[0], x[1]));
  GOOD("f32[4] f32[4]", "f32[]", loom_dot(g, x[0], x[1]));
  GOOD("f32[4] f32[4,5]", "f32[5]", loom_dot(g, x[0], x[1]));
  GOOD("f32[3,4] f32[4]", "f32[3]", loom_dot(g, x[0], x[1]));
  GOOD("f64[2,1,3,4] f64[5,4,6]", "f64[2,5,3,6]", loom_dot(g, x[0], x[1]));
  GOOD("f32[7,3,4] f32[4]", "f32[7,3]", loom_dot(g, x[0], x[1]));
  GOOD("f32[4] f32[2,4,5]", "f32[2,5]", loom_dot(g, x[0], x[1]));
  GOOD("f32[0,4] f32[4,0]", "f32[0,0]", loom_dot(g, x[0], x[1]));
  GOOD("f32[3,0] f32[0,5]", "f32[3,5]", loom_dot(g, x[0], x[1]));
  GOOD("i32[3,4] i32[4,2]", "i32[3,2]", loom_dot(g, x[0], x[1]));
  GOOD("c64[2,2] c64[2,2]", "c64[2,2]", loom_dot(g, x[0], x[1]));
  GOOD("bf16[1,1,1,1,1,1,2,3] bf16[3,4]", "bf16[1,1,1,1,1,1,2,4]", loom_dot(g, x[0], x[1]));
  BAD("f32[3,4] f32[5,6]", "dot: contracting dimensions differ: f32[3,4] x f32[5,6] (4 vs 5)",
      loom_dot(g, x[0], x[1]));
  BAD("f32[3] f32[4]", "dot: contracting dimensions differ: f32[3] x f32[4] (3 vs 4)",
      loom_dot(g, x[0], x[1]));
  BAD("f32[2,3,4] f32[5,4,6]", "dot: batch dimensions of f32[2,3,4] and f32[5,4,6] do not broadcast",
      loom_dot(g, x[0], x[1]));
  BAD("f32[] f32[3]", "dot: operands need rank >= 1, got f32[] x f32[3]", loom_dot(g, x[0], x[1]));
  BAD("f32[3] f64[3]", "dot: operand dtypes differ: f32[3] and f64[3]", loom_dot(g, x[0], x[1]));
  BAD("bool[3] bool[3]", "dot: takes an integer, float or complex dtype, got bool[3]",
      loom_dot(g, x[0], x[1]));
}

#define CONV(s, p, d, gr) loom_conv(g, x[0], x[1], s, p, d, gr)

TEST(infer_conv) {
  GOOD("f32[1,3,32,32] f32[8,3,3,3]", "f32[1,8,30,30]", CONV(NULL, NULL, NULL, 1));
  GOOD("f32[1,3,32,32] f32[8,3,3,3]", "f32[1,8,16,16]", CONV(L(2, 2), L(1, 1), NULL, 1));
  GOOD("f32[1,3,32,32] f32[8,3,3,3]", "f32[1,8,28,34]", CONV(NULL, L(0, 2), L(2, 1), 1));
  GOOD("f32[4,6,10,10] f32[9,2,3,3]", "f32[4,9,8,8]", CONV(NULL, NULL, NULL, 3));
  GOOD("f32[2,4,10] f32[5,4,3]", "f32[2,5,3]", CONV(L(3), NULL, NULL, 1));
  GOOD("f32[2,4,10] f32[5,4,3]", "f32[2,5,4]", CONV(L(3), L(1), NULL, 1));
  GOOD("f64[1,2,5,6,7] f64[3,2,1,2,3]", "f64[1,3,5,5,5]", CONV(NULL, NULL, NULL, 1));
  GOOD("f16[0,2,5] f16[0,2,5]", "f16[0,0,1]", CONV(NULL, NULL, NULL, 1));
  GOOD("f32[1,1,1] f32[1,1,3]", "f32[1,1,1]", CONV(NULL, L(1), NULL, 1));
  BAD("f32[1,3,4,4] f32[8,3,5,3]",
      "conv: effective kernel 5 (kernel 5, dilation 1) is larger than the "
      "padded input 4 in spatial dimension 0",
      CONV(NULL, NULL, NULL, 1));
  BAD("f32[1,3,4,4] f32[8,3,3,3]", "conv: effective kernel 5 (kernel 3, dilation 2)",
      CONV(NULL, NULL, L(1, 2), 1));
  BAD("f32[1,6,8] f32[8,3,3]", "conv: groups=4 must divide the input channels of x f32[1,6,8] (6)",
      CONV(NULL, NULL, NULL, 4));
  BAD("f32[1,6,8] f32[8,3,3]",
      "conv: w f32[8,3,3] has 3 input channels per group; x f32[1,6,8] with "
      "groups=1 needs 6",
      CONV(NULL, NULL, NULL, 1));
  BAD("f32[1,6,8] f32[8,6,3]", "conv: groups=0 must be >= 1", CONV(NULL, NULL, NULL, 0));
  BAD("f32[1,6] f32[8,6]", "conv: x must be [N,C,spatial..] with 1 to 3 spatial dimensions",
      CONV(NULL, NULL, NULL, 1));
  BAD("f32[1,1,2,2,2,2] f32[1,1,1,1,1,1]", "got x f32[1,1,2,2,2,2], w f32[1,1,1,1,1,1]",
      CONV(NULL, NULL, NULL, 1));
  BAD("f32[1,6,8] f32[8,6,3,3]", "conv: x must be", CONV(NULL, NULL, NULL, 1));
  BAD("i32[1,6,8] i32[8,6,3]", "conv: takes a float dtype, got i32[1,6,8]", CONV(NULL, NULL, NULL, 1));
  BAD("f32[1,6,8] f64[8,6,3]", "conv: operand dtypes differ: f32[1,6,8] and f64[8,6,3]",
      CONV(NULL, NULL, NULL, 1));
  BAD("f32[1,6,8] f32[8,6,3]", "conv: spatial dimension 0 needs stride >= 1", CONV(L(0), NULL, NULL, 1));
  BAD("f32[1,6,8] f32[8,6,3]", "got 1, -1 and 1", CONV(NULL, L(-1), NULL, 1));
  BAD("f32[1,6,8] f32[8,6,0]", "conv: kernel of w f32[8,6,0] is empty", CONV(NULL, NULL, NULL, 1));
  BAD("f32[1,6,8] f32[8,6,3]", "conv: spatial dimension 0 overflows int64",
      CONV(NULL, L(INT64_MAX / 2), NULL, 1));
}

TEST(infer_conv_list_counts) {
  /* Through loom_graph_add, as the parser calls it: a list must have one entry per spatial dim. */
  loom_value x[2];
  loom_graph *g = graph_of("f32[1,3,8,8] f32[4,3,3,3]", x);
  loom_attrs a;
  loom_attrs_init(&a);
  a.set = LOOM_ATTR_STRIDE;
  a.stride.count = 1;
  a.stride.v[0] = 2;
  loom_value out;
  ASSERT_STATUS(loom_graph_add(g, LOOM_OP_CONV, x, 2, &a, NULL, NULL, &out, 1), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "conv: stride=[2] has 1 entry, one per spatial dimension, conv needs 2");
  loom_graph_destroy(g);
}

TEST(infer_fourier) {
  GOOD("c64[4,8]", "c64[4,8]", loom_fourier(g, LOOM_OP_FFT, x[0], 1, 0));
  GOOD("c128[4,8]", "c128[4,8]", loom_fourier(g, LOOM_OP_IFFT, x[0], -2, 0));
  GOOD("f32[4,8]", "c64[4,5]", loom_fourier(g, LOOM_OP_RFFT, x[0], -1, 0));
  GOOD("f64[7]", "c128[4]", loom_fourier(g, LOOM_OP_RFFT, x[0], 0, 0));
  GOOD("f32[1]", "c64[1]", loom_fourier(g, LOOM_OP_RFFT, x[0], 0, 0));
  GOOD("c64[4,5]", "f32[4,8]", loom_fourier(g, LOOM_OP_IRFFT, x[0], 1, 8));
  GOOD("c64[4,5]", "f32[4,9]", loom_fourier(g, LOOM_OP_IRFFT, x[0], -1, 9));
  GOOD("c128[1,3]", "f64[1,3]", loom_fourier(g, LOOM_OP_IRFFT, x[0], 0, 1));
  BAD("c64[4,5]", "irfft: axis 1 of c64[4,5] has length 5; n=10 needs n/2+1 = 6",
      loom_fourier(g, LOOM_OP_IRFFT, x[0], 1, 10));
  BAD("c64[1]", "irfft: n=0 must be >= 1", loom_fourier(g, LOOM_OP_IRFFT, x[0], 0, 0));
  BAD("f32[8]", "fft: takes c64 or c128, got f32[8]", loom_fourier(g, LOOM_OP_FFT, x[0], 0, 0));
  BAD("c64[8]", "rfft: takes f32 or f64, got c64[8]", loom_fourier(g, LOOM_OP_RFFT, x[0], 0, 0));
  BAD("f16[8]", "rfft: takes f32 or f64, got f16[8]", loom_fourier(g, LOOM_OP_RFFT, x[0], 0, 0));
  BAD("f32[8]", "irfft: takes c64 or c128, got f32[8]", loom_fourier(g, LOOM_OP_IRFFT, x[0], 0, 14));
  BAD("c64[3,0]", "ifft: axis 1 of c64[3,0] is empty", loom_fourier(g, LOOM_OP_IFFT, x[0], 1, 0));
  BAD("c64[3]", "fft: axis 1 is out of range for c64[3] (rank 1)", loom_fourier(g, LOOM_OP_FFT, x[0], 1, 0));
  BAD("c64[3]", "loom_fourier: dot is not fft, ifft, rfft or irfft",
      loom_fourier(g, LOOM_OP_DOT, x[0], 0, 0));
}

/* ---- graph-level behaviour ----------------------------------------------------------------- */

TEST(infer_sticky_error_keeps_the_first) {
  loom_value x[2];
  loom_graph *g = graph_of("f32[3,4] f32[5]", x);
  loom_value bad = loom_binary(g, LOOM_OP_SUB, x[0], x[1]);
  ASSERT_EQ(bad.id, -1);
  /* Later calls, good or bad, do nothing and keep the first error. */
  ASSERT_EQ(loom_unary(g, LOOM_OP_EXP, x[0]).id, -1);
  ASSERT_EQ(loom_dot(g, x[0], x[1]).id, -1);
  ASSERT_EQ(loom_reduce(g, LOOM_OP_ADD, x[0], 0, NULL, false).id, -1);
  ASSERT_EQ(loom_reshape(g, x[0], 99, NULL).id, -1);
  ASSERT_STATUS(loom_graph_return(g, x, 1), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(loom_graph_op_count(g), 0);
  ASSERT_STATUS(loom_graph_verify(g), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STREQ(loom_last_error(), "sub: shapes f32[3,4] and f32[5] do not broadcast");
  loom_graph_destroy(g);
}

TEST(infer_sticky_error_after_good_ops) {
  loom_value x[2];
  loom_graph *g = graph_of("f32[3,4] f32[4]", x);
  loom_value s = loom_binary(g, LOOM_OP_ADD, x[0], x[1]);
  ASSERT_TRUE(s.id >= 0);
  loom_value e = loom_unary(g, LOOM_OP_EXP, s);
  ASSERT_TRUE(e.id >= 0);
  loom_value bad = loom_dot(g, e, e); /* [3,4] x [3,4] */
  ASSERT_EQ(bad.id, -1);
  ASSERT_EQ(loom_fourier(g, LOOM_OP_FFT, e, 0, 0).id, -1);
  ASSERT_EQ(loom_graph_op_count(g), 2);
  ASSERT_STATUS(loom_graph_verify(g), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STREQ(loom_last_error(), "dot: contracting dimensions differ: f32[3,4] x f32[3,4] (4 vs 3)");
  loom_graph_destroy(g);
}

TEST(infer_none_operand_does_not_crash) {
  BAD("f32[3]", "exp: operand 1 is not a value", loom_unary(g, LOOM_OP_EXP, LOOM_VALUE_NONE));
  BAD("f32[3]", "add: operand 2 is not a value", loom_binary(g, LOOM_OP_ADD, x[0], LOOM_VALUE_NONE));
  BAD("f32[3]", "conv: operand 1 is not a value", loom_conv(g, LOOM_VALUE_NONE, x[0], L(1), NULL, NULL, 1));
  BAD("f32[3]", "concat: operand 2 is not a value",
      loom_concat(g, ((loom_value[]){x[0], LOOM_VALUE_NONE}), 2, 0));
  BAD("f32[3]", "topk: operand 1 is not a value",
      (loom_topk(g, LOOM_VALUE_NONE, 1, 0, true, NULL, NULL), LOOM_VALUE_NONE));
  BAD("f32[3]", "dot: operand 1 is not a value", loom_dot(g, (loom_value){12345}, x[0]));
  /* A NULL graph is an error too, not a crash. */
  ASSERT_EQ(loom_unary(NULL, LOOM_OP_EXP, LOOM_VALUE_NONE).id, -1);
  ASSERT_EQ(loom_unary(NULL, LOOM_OP_ADD, LOOM_VALUE_NONE).id, -1);
  ASSERT_EQ(loom_conv(NULL, LOOM_VALUE_NONE, LOOM_VALUE_NONE, NULL, NULL, NULL, 1).id, -1);
  ASSERT_STATUS(loom_topk(NULL, LOOM_VALUE_NONE, 1, 0, true, NULL, NULL), LOOM_ERR_INVALID_ARGUMENT);
}

TEST(infer_builder_misuse) {
  BAD("f32[3]", "loom_unary: add is not a unary op", loom_unary(g, LOOM_OP_ADD, x[0]));
  BAD("f32[3]", "loom_binary: exp is not a binary op", loom_binary(g, LOOM_OP_EXP, x[0], x[0]));
  BAD("f32[3]", "reshape: shape has -1 entries, it may have 0..8", loom_reshape(g, x[0], -1, NULL));
  BAD("f32[3]", "transpose: perm is NULL but has 1 entries", loom_transpose(g, x[0], 1, NULL));
}

TEST(infer_declared_type_must_match) {
  loom_value x[2], out;
  loom_graph *g = graph_of("f32[3,4] f32[4]", x);
  loom_type want = ty("f32[3,4]"), wrong = ty("f32[3,5]"), wrong_dtype = ty("f64[3,4]");
  ASSERT_OK(loom_graph_add(g, LOOM_OP_ADD, x, 2, NULL, &want, NULL, &out, 1));
  ASSERT_STATUS(loom_graph_add(g, LOOM_OP_ADD, x, 2, NULL, &wrong, NULL, &out, 1), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "add: declared type f32[3,5] does not equal the inferred type f32[3,4]");
  ASSERT_EQ(out.id, -1);
  loom_graph_destroy(g);
  g = graph_of("f32[3,4] f32[4]", x);
  ASSERT_STATUS(loom_graph_add(g, LOOM_OP_MUL, x, 2, NULL, &wrong_dtype, NULL, &out, 1),
                LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "mul: declared type f64[3,4] does not equal the inferred type f32[3,4]");
  ASSERT_STATUS(loom_graph_verify(g), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "mul: declared type");
  loom_graph_destroy(g);
}

TEST(infer_graph_without_return_fails_verify) {
  loom_value x[1];
  loom_graph *g = graph_of("f32[3]", x);
  loom_value e = loom_unary(g, LOOM_OP_EXP, x[0]);
  ASSERT_TRUE(e.id >= 0);
  ASSERT_STATUS(loom_graph_verify(g), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "has no return");
  ASSERT_OK(loom_graph_return(g, &e, 1));
  ASSERT_OK(loom_graph_verify(g));
  loom_graph_destroy(g);
}

TEST(infer_knn_example_from_ir_md) {
  loom_graph *g;
  ASSERT_OK(loom_graph_create("knn", &g));
  loom_type tx = ty("f32[20000,3]"), tyy = ty("f32[30000,3]");
  loom_value x = loom_graph_param(g, "x", &tx), y = loom_graph_param(g, "y", &tyy);
  loom_value xe = loom_reshape(g, x, 3, L(20000, 1, 3));
  loom_value ye = loom_reshape(g, y, 3, L(1, 30000, 3));
  loom_value diff = loom_binary(g, LOOM_OP_SUB, xe, ye);
  loom_value sq = loom_binary(g, LOOM_OP_MUL, diff, diff);
  loom_value d2 = loom_reduce(g, LOOM_OP_REDUCE_SUM, sq, 1, L(2), false);
  loom_value out[2];
  ASSERT_OK(loom_topk(g, d2, 10, 1, false, &out[0], &out[1]));
  ASSERT_OK(loom_graph_return(g, out, 2));
  ASSERT_OK(loom_graph_verify(g));
  char buf[LOOM_TYPE_STRING_MAX];
  ASSERT_STREQ(loom_type_format(loom_value_type(g, diff), buf, sizeof buf), "f32[20000,30000,3]");
  ASSERT_STREQ(loom_type_format(loom_value_type(g, d2), buf, sizeof buf), "f32[20000,30000]");
  ASSERT_STREQ(loom_type_format(loom_value_type(g, out[0]), buf, sizeof buf), "f32[20000,10]");
  ASSERT_STREQ(loom_type_format(loom_value_type(g, out[1]), buf, sizeof buf), "i64[20000,10]");
  loom_graph_destroy(g);
}

TEST(infer_helpers) {
  loom_type a = ty("f32[2,1,3]"), b = ty("i8[4,1]"), out;
  ASSERT_TRUE(loom__broadcast_shapes(&a, &b, &out));
  char buf[LOOM_TYPE_STRING_MAX];
  ASSERT_STREQ(loom_type_format(&out, buf, sizeof buf), "f32[2,4,3]");
  b = ty("i8[2,2]");
  ASSERT_TRUE(!loom__broadcast_shapes(&a, &b, &out));
  int32_t axis = -9;
  ASSERT_TRUE(loom__axis_normalize(-1, 3, &axis));
  ASSERT_EQ(axis, 2);
  ASSERT_TRUE(loom__axis_normalize(-3, 3, &axis));
  ASSERT_EQ(axis, 0);
  ASSERT_TRUE(!loom__axis_normalize(3, 3, &axis));
  ASSERT_TRUE(!loom__axis_normalize(-4, 3, &axis));
  ASSERT_TRUE(!loom__axis_normalize(0, 0, &axis));
  ASSERT_TRUE(!loom__axis_normalize(INT64_MIN, 8, &axis));
}
