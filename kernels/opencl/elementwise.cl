/* Elementwise kernels of the program's dtype, one per arity: unary, binary, and compare
 * (bool output: compare and logic), each taking the op as a code (LM_* in gpu_meta.h),
 * switched once per row so the inner loop is one expression of x (and y) in the compute
 * type. Inputs are read in place through their strides (broadcasts have stride 0) with the
 * cursor of common.cl; the output is dense. Codes an op does not take for the dtype (the
 * host's table in opencl_kernels.c) write nothing.
 *
 * Semantics follow the cpu backend exactly (src/backends/cpu/cpu_elementwise.c): integer
 * arithmetic wraps (done in an unsigned type), integer div truncates with x/0 = 0 and
 * MIN/-1 = MIN, integer pow by squaring (negative exponents give 0 but for bases 1 and -1),
 * maximum/minimum propagate NaN, sign keeps NaN and signed zeros.
 */
#define AS_BOOL(x) ((uchar)((x) ? 1 : 0))

/* One op's loop over a row: x (and y) read, `out[t]` written. */
#define UN_CASE(ID, EXPR)              \
  case ID:                             \
    for (long t = 0; t < len; t++) {   \
      C x = LD(ap[t * sa]);            \
      out[t] = ST(EXPR);               \
    }                                  \
    break;
#define BIN_CASE(ID, STORE, EXPR)      \
  case ID:                             \
    for (long t = 0; t < len; t++) {   \
      C x = LD(ap[t * sa]);            \
      C y = LD(bp[t * sb]);            \
      out[t] = STORE(EXPR);            \
    }                                  \
    break;

#if defined(IS_INT)
/* The wrapping type: products of narrow integers wrap mod 2^32 and keep the right low bits. */
#if LOOM_DT == DT_I64
#define W ulong
#else
#define W uint
#endif
#define NEG_INT(x) ((C)((W)0 - (W)(x)))
#if defined(IS_SINT)
#define DIV_INT(x, y) ((y) == 0 ? (C)0 : (y) == -1 ? NEG_INT(x) : (C)((x) / (y)))
#else
#define DIV_INT(x, y) ((y) == 0 ? (C)0 : (C)((x) / (y)))
#endif

inline long ipow(long base, long e) {
  if (e < 0) {
    if (base == 1) return 1;
    if (base == -1) return (e & 1) ? -1 : 1;
    return 0;
  }
  ulong result = 1, b = (ulong)base;
  for (ulong k = (ulong)e; k; k >>= 1) {
    if (k & 1) result *= b;
    b *= b;
  }
  return (long)result;
}
#endif

__kernel void unary(__global S *o, __global const S *a, lm_ew m, int op) {
  ew_cursor c;
  long sa = m.st[0][m.rank - 1];
  EW_ROWS(m, 1, c, i, len) {
    __global const S *ap = a + c.off[0];
    __global S *out = o + m.out_off + i;
    switch (op) {
#if defined(IS_INT)
      UN_CASE(LM_NEG, NEG_INT(x))
      UN_CASE(LM_FLOOR, x)
      UN_CASE(LM_CEIL, x)
      UN_CASE(LM_NOT, (C)~x)
      UN_CASE(LM_SQUARE, (C)((W)x * (W)x))
#if defined(IS_SINT)
      UN_CASE(LM_ABS, x < 0 ? NEG_INT(x) : x)
      UN_CASE(LM_SIGN, (C)((x > 0) - (x < 0)))
      UN_CASE(LM_RELU, x < 0 ? (C)0 : x)
#else
      UN_CASE(LM_ABS, x)
      UN_CASE(LM_SIGN, (C)(x > 0))
      UN_CASE(LM_RELU, x)
#endif
#elif defined(IS_FLOAT) /* f16 and bf16 compute in float */
      UN_CASE(LM_NEG, -x)
      UN_CASE(LM_ABS, fabs(x))
      UN_CASE(LM_SIGN, x > 0 ? (C)1 : x < 0 ? (C)-1 : x)
      UN_CASE(LM_EXP, exp(x))
      UN_CASE(LM_LOG, log(x))
      UN_CASE(LM_SQRT, sqrt(x))
      UN_CASE(LM_RSQRT, (C)1 / sqrt(x))
      UN_CASE(LM_SIN, sin(x))
      UN_CASE(LM_COS, cos(x))
      UN_CASE(LM_TANH, tanh(x))
      UN_CASE(LM_SIGMOID, (C)1 / ((C)1 + exp(-x)))
      UN_CASE(LM_RELU, x < 0 ? (C)0 : x)
      UN_CASE(LM_FLOOR, floor(x))
      UN_CASE(LM_CEIL, ceil(x))
      UN_CASE(LM_SQUARE, x * x)
#elif defined(IS_COMPLEX)
      UN_CASE(LM_NEG, -x)
      UN_CASE(LM_SQUARE, CMUL(C, x, x))
#elif defined(IS_BOOL)
      UN_CASE(LM_NOT, (uchar)!x)
#endif
      default:
        break;
    }
  }
}

#if defined(IS_INT) || defined(IS_FLOAT) || defined(IS_COMPLEX)
__kernel void binary(__global S *o, __global const S *a, __global const S *b, lm_ew m, int op) {
  ew_cursor c;
  long sa = m.st[0][m.rank - 1], sb = m.st[1][m.rank - 1];
  EW_ROWS(m, 2, c, i, len) {
    __global const S *ap = a + c.off[0];
    __global const S *bp = b + c.off[1];
    __global S *out = o + m.out_off + i;
    switch (op) {
#if defined(IS_INT)
      BIN_CASE(LM_ADD, ST, (C)((W)x + (W)y))
      BIN_CASE(LM_SUB, ST, (C)((W)x - (W)y))
      BIN_CASE(LM_MUL, ST, (C)((W)x * (W)y))
      BIN_CASE(LM_DIV, ST, DIV_INT(x, y))
      BIN_CASE(LM_POW, ST, (C)ipow((long)x, (long)y))
      BIN_CASE(LM_MAXIMUM, ST, x >= y ? x : y)
      BIN_CASE(LM_MINIMUM, ST, x <= y ? x : y)
#elif defined(IS_FLOAT)
      BIN_CASE(LM_ADD, ST, x + y)
      BIN_CASE(LM_SUB, ST, x - y)
      BIN_CASE(LM_MUL, ST, x * y)
      BIN_CASE(LM_DIV, ST, x / y)
      BIN_CASE(LM_POW, ST, pow(x, y))
      BIN_CASE(LM_MAXIMUM, ST, x != x ? x : x >= y ? x : y)
      BIN_CASE(LM_MINIMUM, ST, x != x ? x : x <= y ? x : y)
#else
      BIN_CASE(LM_ADD, ST, x + y)
      BIN_CASE(LM_SUB, ST, x - y)
      BIN_CASE(LM_MUL, ST, CMUL(C, x, y))
      BIN_CASE(LM_DIV, ST, CDIV(x, y))
#endif
      default:
        break;
    }
  }
}
#endif

__kernel void compare(__global uchar *o, __global const S *a, __global const S *b, lm_ew m, int op) {
  ew_cursor c;
  long sa = m.st[0][m.rank - 1], sb = m.st[1][m.rank - 1];
  EW_ROWS(m, 2, c, i, len) {
    __global const S *ap = a + c.off[0];
    __global const S *bp = b + c.off[1];
    __global uchar *out = o + m.out_off + i;
    switch (op) {
#if defined(IS_COMPLEX)
      BIN_CASE(LM_EQ, AS_BOOL, x.x == y.x && x.y == y.y)
      BIN_CASE(LM_NE, AS_BOOL, x.x != y.x || x.y != y.y)
#else
      BIN_CASE(LM_EQ, AS_BOOL, x == y)
      BIN_CASE(LM_NE, AS_BOOL, x != y)
      BIN_CASE(LM_LT, AS_BOOL, x < y)
      BIN_CASE(LM_LE, AS_BOOL, x <= y)
      BIN_CASE(LM_GT, AS_BOOL, x > y)
      BIN_CASE(LM_GE, AS_BOOL, x >= y)
#endif
#if defined(IS_BOOL)
      BIN_CASE(LM_AND, AS_BOOL, x & y)
      BIN_CASE(LM_OR, AS_BOOL, x | y)
#endif
      default:
        break;
    }
  }
}
