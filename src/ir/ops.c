/* The op table: class, arity, results and attributes of every op of IR.md. */
#include <string.h>

#include "ir/ir.h"

#define A(x) LOOM_ATTR_##x
#define RED_ATTRS (A(AXES) | A(KEEPDIMS))
#define CONV_ATTRS (A(STRIDE) | A(PADDING) | A(DILATION) | A(GROUPS))

static const loom__op_info op_table[LOOM_OP_COUNT] = {
    [LOOM_OP_CONSTANT] = {"constant", LOOM_CLASS_SOURCE, 0, 0, 1, 0, 0},
    [LOOM_OP_IOTA] = {"iota", LOOM_CLASS_SOURCE, 0, 0, 1, A(AXIS), A(AXIS)},
    [LOOM_OP_FILL] = {"fill", LOOM_CLASS_SOURCE, 0, 0, 1, A(VALUE), A(VALUE)},
#define UN(e, n) [LOOM_OP_##e] = {n, LOOM_CLASS_UNARY, 1, 1, 1, 0, 0}
    UN(NEG, "neg"),
    UN(ABS, "abs"),
    UN(SIGN, "sign"),
    UN(EXP, "exp"),
    UN(LOG, "log"),
    UN(SQRT, "sqrt"),
    UN(RSQRT, "rsqrt"),
    UN(SIN, "sin"),
    UN(COS, "cos"),
    UN(TANH, "tanh"),
    UN(SIGMOID, "sigmoid"),
    UN(RELU, "relu"),
    UN(FLOOR, "floor"),
    UN(CEIL, "ceil"),
    UN(NOT, "not"),
    UN(SQUARE, "square"),
#define BIN(e, n, c) [LOOM_OP_##e] = {n, c, 2, 2, 1, 0, 0}
    BIN(ADD, "add", LOOM_CLASS_BINARY),
    BIN(SUB, "sub", LOOM_CLASS_BINARY),
    BIN(MUL, "mul", LOOM_CLASS_BINARY),
    BIN(DIV, "div", LOOM_CLASS_BINARY),
    BIN(POW, "pow", LOOM_CLASS_BINARY),
    BIN(MAXIMUM, "maximum", LOOM_CLASS_BINARY),
    BIN(MINIMUM, "minimum", LOOM_CLASS_BINARY),
    BIN(EQ, "eq", LOOM_CLASS_COMPARE),
    BIN(NE, "ne", LOOM_CLASS_COMPARE),
    BIN(LT, "lt", LOOM_CLASS_COMPARE),
    BIN(LE, "le", LOOM_CLASS_COMPARE),
    BIN(GT, "gt", LOOM_CLASS_COMPARE),
    BIN(GE, "ge", LOOM_CLASS_COMPARE),
    BIN(AND, "and", LOOM_CLASS_LOGIC),
    BIN(OR, "or", LOOM_CLASS_LOGIC),
    [LOOM_OP_SELECT] = {"select", LOOM_CLASS_SELECT, 3, 3, 1, 0, 0},
    [LOOM_OP_CAST] = {"cast", LOOM_CLASS_CAST, 1, 1, 1, A(TO), A(TO)},
    [LOOM_OP_RESHAPE] = {"reshape", LOOM_CLASS_LAYOUT, 1, 1, 1, A(SHAPE), A(SHAPE)},
    [LOOM_OP_TRANSPOSE] = {"transpose", LOOM_CLASS_LAYOUT, 1, 1, 1, A(PERM), A(PERM)},
    [LOOM_OP_BROADCAST] = {"broadcast", LOOM_CLASS_LAYOUT, 1, 1, 1, A(SHAPE), A(SHAPE)},
    [LOOM_OP_SLICE] = {"slice", LOOM_CLASS_LAYOUT, 1, 1, 1, A(START) | A(STOP) | A(STEP), A(START) | A(STOP)},
    [LOOM_OP_CONCAT] = {"concat", LOOM_CLASS_LAYOUT, 1, -1, 1, A(AXIS), A(AXIS)},
    [LOOM_OP_TILE] = {"tile", LOOM_CLASS_LAYOUT, 1, 1, 1, A(REPS), A(REPS)},
#define RED(e, n) [LOOM_OP_##e] = {n, LOOM_CLASS_REDUCE, 1, 1, 1, RED_ATTRS, A(AXES)}
    RED(REDUCE_SUM, "reduce_sum"),
    RED(REDUCE_MAX, "reduce_max"),
    RED(REDUCE_MIN, "reduce_min"),
    RED(REDUCE_MEAN, "reduce_mean"),
    RED(REDUCE_PROD, "reduce_prod"),
    [LOOM_OP_ARGMAX] = {"argmax", LOOM_CLASS_ARGREDUCE, 1, 1, 1, A(AXIS), A(AXIS)},
    [LOOM_OP_ARGMIN] = {"argmin", LOOM_CLASS_ARGREDUCE, 1, 1, 1, A(AXIS), A(AXIS)},
    [LOOM_OP_TOPK] = {"topk", LOOM_CLASS_TOPK, 1, 1, 2, A(K) | A(AXIS) | A(LARGEST), A(K) | A(AXIS)},
    [LOOM_OP_DOT] = {"dot", LOOM_CLASS_DOT, 2, 2, 1, 0, 0},
    [LOOM_OP_CONV] = {"conv", LOOM_CLASS_CONV, 2, 2, 1, CONV_ATTRS, 0},
    [LOOM_OP_FFT] = {"fft", LOOM_CLASS_FOURIER, 1, 1, 1, A(AXIS), A(AXIS)},
    [LOOM_OP_IFFT] = {"ifft", LOOM_CLASS_FOURIER, 1, 1, 1, A(AXIS), A(AXIS)},
    [LOOM_OP_RFFT] = {"rfft", LOOM_CLASS_FOURIER, 1, 1, 1, A(AXIS), A(AXIS)},
    [LOOM_OP_IRFFT] = {"irfft", LOOM_CLASS_FOURIER, 1, 1, 1, A(AXIS) | A(N), A(AXIS) | A(N)},
    /* results: as many as the loop combines (loom_graph_add_loop) */
    [LOOM_OP_LOOP] = {"loop", LOOM_CLASS_LOOP, 0, -1, 0, 0, 0},
    /* results: its body's outputs (loom__graph_add_fused) */
    [LOOM_OP_FUSED] = {"fused", LOOM_CLASS_FUSED, 0, -1, 0, 0, 0},
    /* docs/ir-quant.md: axis=A makes the scale per channel along A */
    [LOOM_OP_QUANTIZE] = {"quantize", LOOM_CLASS_QUANT, 1, 1, 2, A(TO) | A(AXIS), A(TO)},
    [LOOM_OP_DEQUANTIZE] = {"dequantize", LOOM_CLASS_QUANT, 2, 2, 1, A(AXIS), 0},
};

LOOM_HOT const loom__op_info *loom__op_info_of(loom_op op) {
  if ((int)op < 0 || op >= LOOM_OP_COUNT) return NULL;
  return &op_table[op];
}

const char *loom_op_name(loom_op op) {
  const loom__op_info *info = loom__op_info_of(op);
  return info ? info->name : "?";
}

bool loom_op_parse(const char *text, size_t len, loom_op *out) {
  for (int i = 0; i < LOOM_OP_COUNT; i++) {
    if (strlen(op_table[i].name) == len && memcmp(op_table[i].name, text, len) == 0) {
      *out = (loom_op)i;
      return true;
    }
  }
  return false;
}

void loom_attrs_init(loom_attrs *a) {
  memset(a, 0, sizeof *a);
  a->largest = true;
  a->groups = 1;
}
