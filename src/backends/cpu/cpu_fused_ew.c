/* The fused evaluator's elementwise kernels (cpu_fused_run.h lists the parts): each body op is one
 * vectorized loop over a block of up to FB elements held in L1, compiled once per x86-64 level,
 * in three kinds of values (f32, f64, i64) whose results match the unfused kernels of
 * cpu_elementwise.c op for op. The transcendental ops call glibc's libmvec from `omp simd` loops;
 * docs/ir-fusion.md gives their measured error. */
#include <stdlib.h>

#include "backends/cpu/cpu_fused_run.h"

/* ---- leaves ---- */

/* ---- leaves ---------------------------------------------------------------------------------- */

/* One dtype's leaf into its kind's buffer: T the storage, K the kind (float, double, int64_t). */
#define PACK_AS(T, K, VALUE)                                     \
  do {                                                           \
    const T *x = (const T *)base + off;                          \
    K *o = dst;                                                  \
    for (int64_t j = 0; j < n; j++) o[j] = (K)(VALUE(x[j * s])); \
    return;                                                      \
  } while (0)
#define AS_IS(v) (v)
#define AS_BOOL(v) ((v) != 0)

/* Copies n elements of a leaf at stride s into a buffer of its kind. A halo cut's row masks are
 * bool leaves packed for every block: through the call per element below, jacobi-1d's pieces
 * of 30,676 spent 36% of their run packing them, so the common dtypes have loops of their own. */
KERNEL void pack_isa_body(const char *base, loom_dtype dt, int64_t off, int64_t s, int64_t n, void *dst) {
  switch (dt) {
    case LOOM_F32:
      PACK_AS(float, float, AS_IS);
    case LOOM_F64:
      PACK_AS(double, double, AS_IS);
    case LOOM_BOOL:
      PACK_AS(uint8_t, int64_t, AS_BOOL);
    case LOOM_U8:
      PACK_AS(uint8_t, int64_t, AS_IS);
    case LOOM_I32:
      PACK_AS(int32_t, int64_t, AS_IS);
    case LOOM_I64:
      PACK_AS(int64_t, int64_t, AS_IS);
    default:
      break;
  }
  if (loom__cfz_kind_of(dt) == K_F32) {
    float *o = dst;
    for (int64_t j = 0; j < n; j++) o[j] = loom__cfz_load_scalar(base, dt, off + j * s).f;
  } else {
    int64_t *o = dst;
    for (int64_t j = 0; j < n; j++) o[j] = loom__cfz_load_scalar(base, dt, off + j * s).i;
  }
}
ISA_VARIANTS_VOID(void, pack_isa,
                  (const char *base, loom_dtype dt, int64_t off, int64_t s, int64_t n, void *dst),
                  (base, dt, off, s, n, dst))

/* Copies n elements of a leaf (base, dtype dt) from element off at stride s into dst, a buffer of
 * the leaf's kind (f32, f64 or i64), by the kernel of the CPU's x86-64 level. */
void loom__cfz_pack(const char *base, loom_dtype dt, int64_t off, int64_t s, int64_t n, void *dst) {
  pack_isa(base, dt, off, s, n, dst);
}

/* ---- elementwise kernels ----------------------------------------------------------------------
 * Each runs one op over n elements (1 for a scalar result); an operand with step 0 is a scalar
 * read once. Float semantics follow cpu_elementwise.c's macros exactly. */
#define SIGN_F(x) ((x) > 0 ? (__typeof__(x))1 : (x) < 0 ? (__typeof__(x))-1 : (x))
#define RELU_F(x) ((x) < 0 ? (__typeof__(x))0 : (x))

/* Kernels with no absorbed operand (TF_A, cpu_fused_run.h). */
#define TF_NONE                                     \
  const bool ta_ = false, tb_ = false;              \
  const int64_t ma_ = 0, aa_ = 0, mb_ = 0, ab_ = 0; \
  (void)ta_, (void)tb_, (void)ma_, (void)aa_, (void)mb_, (void)ab_;
#define TF_FROM(T, tf)                                            \
  const bool ta_ = tf && tf[0].on, tb_ = tf && tf[1].on;          \
  const T ma_ = ta_ ? (T)tf[0].m : 1, aa_ = ta_ ? (T)tf[0].a : 0; \
  const T mb_ = tb_ ? (T)tf[1].m : 1, ab_ = tb_ ? (T)tf[1].a : 0; \
  (void)mb_, (void)ab_;

#define UN_LOOP(TO, TI, EXPR)                             \
  do {                                                    \
    TO *restrict o_ = (TO *)o;                            \
    const TI *restrict a_ = (const TI *)a;                \
    _Pragma("omp simd") for (int64_t j = 0; j < n; j++) { \
      TI x = TF_A(a_[j]);                                 \
      o_[j] = (EXPR);                                     \
    }                                                     \
  } while (0)

#define BIN_LOOP(TO, TI, EXPR)                                           \
  do {                                                                   \
    TO *restrict o_ = (TO *)o;                                           \
    const TI *restrict a_ = (const TI *)a, *restrict b_ = (const TI *)b; \
    if (sa && sb) {                                                      \
      _Pragma("omp simd") for (int64_t j = 0; j < n; j++) {              \
        TI x = TF_A(a_[j]), y = TF_B(b_[j]);                             \
        o_[j] = (EXPR);                                                  \
      }                                                                  \
    } else if (sa) {                                                     \
      TI y = b_[0];                                                      \
      _Pragma("omp simd") for (int64_t j = 0; j < n; j++) {              \
        TI x = TF_A(a_[j]);                                              \
        o_[j] = (EXPR);                                                  \
      }                                                                  \
    } else if (sb) {                                                     \
      TI x = a_[0];                                                      \
      _Pragma("omp simd") for (int64_t j = 0; j < n; j++) {              \
        TI y = TF_B(b_[j]);                                              \
        o_[j] = (EXPR);                                                  \
      }                                                                  \
    } else if (n > 0) {                                                  \
      TI x = a_[0], y = b_[0];                                           \
      o_[0] = (EXPR);                                                    \
    }                                                                    \
  } while (0)

/* T: float or double; F: the libm suffix (f or nothing). */
#define DEF_FLOAT_KERNELS(T, F)                                                                      \
  KERNEL bool unary_##T##_body(loom_op op, void *o, const void *a, const tfm *tf, int64_t n) {       \
    TF_FROM(T, tf)                                                                                   \
    switch (op) {                                                                                    \
      case LOOM_OP_NEG:                                                                              \
        UN_LOOP(T, T, -x);                                                                           \
        return true;                                                                                 \
      case LOOM_OP_ABS:                                                                              \
        UN_LOOP(T, T, fabs##F(x));                                                                   \
        return true;                                                                                 \
      case LOOM_OP_SIGN:                                                                             \
        UN_LOOP(T, T, SIGN_F(x));                                                                    \
        return true;                                                                                 \
      case LOOM_OP_EXP:                                                                              \
        UN_LOOP(T, T, exp##F(x));                                                                    \
        return true;                                                                                 \
      case LOOM_OP_LOG:                                                                              \
        UN_LOOP(T, T, log##F(x));                                                                    \
        return true;                                                                                 \
      case LOOM_OP_SQRT:                                                                             \
        UN_LOOP(T, T, sqrt##F(x));                                                                   \
        return true;                                                                                 \
      case LOOM_OP_RSQRT:                                                                            \
        UN_LOOP(T, T, (T)1 / sqrt##F(x));                                                            \
        return true;                                                                                 \
      case LOOM_OP_SIN:                                                                              \
        UN_LOOP(T, T, sin##F(x));                                                                    \
        return true;                                                                                 \
      case LOOM_OP_COS:                                                                              \
        UN_LOOP(T, T, cos##F(x));                                                                    \
        return true;                                                                                 \
      case LOOM_OP_TANH:                                                                             \
        UN_LOOP(T, T, tanh##F(x));                                                                   \
        return true;                                                                                 \
      case LOOM_OP_SIGMOID:                                                                          \
        UN_LOOP(T, T, (T)1 / ((T)1 + exp##F(-x)));                                                   \
        return true;                                                                                 \
      case LOOM_OP_RELU:                                                                             \
        UN_LOOP(T, T, RELU_F(x));                                                                    \
        return true;                                                                                 \
      case LOOM_OP_FLOOR:                                                                            \
        UN_LOOP(T, T, floor##F(x));                                                                  \
        return true;                                                                                 \
      case LOOM_OP_CEIL:                                                                             \
        UN_LOOP(T, T, ceil##F(x));                                                                   \
        return true;                                                                                 \
      case LOOM_OP_SQUARE:                                                                           \
        UN_LOOP(T, T, x *x);                                                                         \
        return true;                                                                                 \
      default:                                                                                       \
        return false;                                                                                \
    }                                                                                                \
  }                                                                                                  \
  ISA_VARIANTS(bool, unary_##T, (loom_op op, void *o, const void *a, const tfm *tf, int64_t n),      \
               (op, o, a, tf, n))                                                                    \
  KERNEL bool binary_##T##_body(loom_op op, void *o, const void *a, int sa, const void *b, int sb,   \
                                const tfm *tf, int64_t n) {                                          \
    TF_FROM(T, tf)                                                                                   \
    switch (op) {                                                                                    \
      case LOOM_OP_ADD:                                                                              \
        BIN_LOOP(T, T, x + y);                                                                       \
        return true;                                                                                 \
      case LOOM_OP_SUB:                                                                              \
        BIN_LOOP(T, T, x - y);                                                                       \
        return true;                                                                                 \
      case LOOM_OP_MUL:                                                                              \
        BIN_LOOP(T, T, x *y);                                                                        \
        return true;                                                                                 \
      case LOOM_OP_DIV:                                                                              \
        BIN_LOOP(T, T, x / y);                                                                       \
        return true;                                                                                 \
      case LOOM_OP_POW:                                                                              \
        BIN_LOOP(T, T, pow##F(x, y));                                                                \
        return true;                                                                                 \
      case LOOM_OP_MAXIMUM:                                                                          \
        BIN_LOOP(T, T, MAX_F(x, y));                                                                 \
        return true;                                                                                 \
      case LOOM_OP_MINIMUM:                                                                          \
        BIN_LOOP(T, T, MIN_F(x, y));                                                                 \
        return true;                                                                                 \
      case LOOM_OP_EQ:                                                                               \
        BIN_LOOP(int64_t, T, x == y);                                                                \
        return true;                                                                                 \
      case LOOM_OP_NE:                                                                               \
        BIN_LOOP(int64_t, T, x != y);                                                                \
        return true;                                                                                 \
      case LOOM_OP_LT:                                                                               \
        BIN_LOOP(int64_t, T, x < y);                                                                 \
        return true;                                                                                 \
      case LOOM_OP_LE:                                                                               \
        BIN_LOOP(int64_t, T, x <= y);                                                                \
        return true;                                                                                 \
      case LOOM_OP_GT:                                                                               \
        BIN_LOOP(int64_t, T, x > y);                                                                 \
        return true;                                                                                 \
      case LOOM_OP_GE:                                                                               \
        BIN_LOOP(int64_t, T, x >= y);                                                                \
        return true;                                                                                 \
      default:                                                                                       \
        return false;                                                                                \
    }                                                                                                \
  }                                                                                                  \
  ISA_VARIANTS(                                                                                      \
      bool, binary_##T,                                                                              \
      (loom_op op, void *o, const void *a, int sa, const void *b, int sb, const tfm *tf, int64_t n), \
      (op, o, a, sa, b, sb, tf, n))
/* clang-format off */
DEF_FLOAT_KERNELS(float, f)
DEF_FLOAT_KERNELS(double, )
/* clang-format on */

/* Integer power by repeated squaring, wrapping, as cpu_elementwise.c's ipow. */
static inline int64_t ipow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp & 1) ? -1 : 1;
    return 0;
  }
  uint64_t result = 1, b = (uint64_t)base;
  for (uint64_t e = (uint64_t)exp; e; e >>= 1) {
    if (e & 1) result *= b;
    b *= b;
  }
  return (int64_t)result;
}

#define NEG_I(x) ((int64_t)(0 - (uint64_t)(x)))
/* Signed division truncates; by 0 gives 0; by -1 negates (INT_MIN / -1 wraps to INT_MIN). */
#define DIV_I(x, y) ((y) == 0 ? 0 : (y) == -1 ? NEG_I(x) : (x) / (y))

/* Integers and bool, held in int64 and wrapped to their dtype afterwards (u8 is never
 * negative there, so the signed forms give its results too). */
KERNEL bool unary_int_body(loom_op op, loom_dtype dt, void *o, const void *a, int64_t n) {
  TF_NONE
  bool uns = dt == LOOM_U8;
  switch (op) {
    case LOOM_OP_NEG:
      UN_LOOP(int64_t, int64_t, NEG_I(x));
      return dt != LOOM_BOOL;
    case LOOM_OP_ABS:
      UN_LOOP(int64_t, int64_t, x < 0 ? NEG_I(x) : x);
      return dt != LOOM_BOOL;
    case LOOM_OP_SIGN:
      UN_LOOP(int64_t, int64_t, (x > 0) - (x < 0));
      return dt != LOOM_BOOL;
    case LOOM_OP_RELU:
      UN_LOOP(int64_t, int64_t, x < 0 ? 0 : x);
      return dt != LOOM_BOOL;
    case LOOM_OP_FLOOR:
    case LOOM_OP_CEIL:
      UN_LOOP(int64_t, int64_t, x);
      return dt != LOOM_BOOL;
    case LOOM_OP_NOT:
      if (dt == LOOM_BOOL)
        UN_LOOP(int64_t, int64_t, !x);
      else
        UN_LOOP(int64_t, int64_t, ~x);
      return true;
    case LOOM_OP_SQUARE:
      UN_LOOP(int64_t, int64_t, (int64_t)((uint64_t)x * (uint64_t)x));
      return dt != LOOM_BOOL;
    default:
      (void)uns;
      return false;
  }
}
ISA_VARIANTS(bool, unary_int, (loom_op op, loom_dtype dt, void *o, const void *a, int64_t n),
             (op, dt, o, a, n))

KERNEL bool binary_int_body(loom_op op, loom_dtype dt, void *o, const void *a, int sa, const void *b, int sb,
                            int64_t n) {
  TF_NONE
  bool arith = dt != LOOM_BOOL;
  switch (op) {
    case LOOM_OP_ADD:
      BIN_LOOP(int64_t, int64_t, (int64_t)((uint64_t)x + (uint64_t)y));
      return arith;
    case LOOM_OP_SUB:
      BIN_LOOP(int64_t, int64_t, (int64_t)((uint64_t)x - (uint64_t)y));
      return arith;
    case LOOM_OP_MUL:
      BIN_LOOP(int64_t, int64_t, (int64_t)((uint64_t)x * (uint64_t)y));
      return arith;
    case LOOM_OP_DIV:
      BIN_LOOP(int64_t, int64_t, DIV_I(x, y));
      return arith;
    case LOOM_OP_POW:
      BIN_LOOP(int64_t, int64_t, ipow(x, y));
      return arith;
    case LOOM_OP_MAXIMUM:
      BIN_LOOP(int64_t, int64_t, x >= y ? x : y);
      return arith;
    case LOOM_OP_MINIMUM:
      BIN_LOOP(int64_t, int64_t, x <= y ? x : y);
      return arith;
    case LOOM_OP_EQ:
      BIN_LOOP(int64_t, int64_t, x == y);
      return true;
    case LOOM_OP_NE:
      BIN_LOOP(int64_t, int64_t, x != y);
      return true;
    case LOOM_OP_LT:
      BIN_LOOP(int64_t, int64_t, x < y);
      return true;
    case LOOM_OP_LE:
      BIN_LOOP(int64_t, int64_t, x <= y);
      return true;
    case LOOM_OP_GT:
      BIN_LOOP(int64_t, int64_t, x > y);
      return true;
    case LOOM_OP_GE:
      BIN_LOOP(int64_t, int64_t, x >= y);
      return true;
    case LOOM_OP_AND:
      BIN_LOOP(int64_t, int64_t, x & y);
      return dt == LOOM_BOOL;
    case LOOM_OP_OR:
      BIN_LOOP(int64_t, int64_t, x | y);
      return dt == LOOM_BOOL;
    default:
      return false;
  }
}
ISA_VARIANTS(bool, binary_int,
             (loom_op op, loom_dtype dt, void *o, const void *a, int sa, const void *b, int sb, int64_t n),
             (op, dt, o, a, sa, b, sb, n))

/* Truncates toward zero and saturates to [lo, hi]; NaN gives 0 (cpu_elementwise.c's cast). */
int64_t loom__cfz_f64_to_int(double v, int64_t lo, int64_t hi) {
  if (v != v) return 0;
  if (v <= (double)lo) return lo;
  if (v >= (double)hi) return hi;
  return (int64_t)v;
}

void loom__cfz_int_range(loom_dtype dt, int64_t *lo, int64_t *hi) {
  switch (dt) {
    case LOOM_I8:
      *lo = INT8_MIN, *hi = INT8_MAX;
      break;
    case LOOM_U8:
      *lo = 0, *hi = UINT8_MAX;
      break;
    case LOOM_I16:
      *lo = INT16_MIN, *hi = INT16_MAX;
      break;
    case LOOM_I32:
      *lo = INT32_MIN, *hi = INT32_MAX;
      break;
    default:
      *lo = INT64_MIN, *hi = INT64_MAX;
      break;
  }
}

KERNEL void cast_block_body(kind from, loom_dtype to, void *o, const void *a, int64_t n) {
  TF_NONE
  kind tk = loom__cfz_kind_of(to);
  if (from == K_F32 && tk == K_F32)
    UN_LOOP(float, float, x);
  else if (from == K_F32 && tk == K_F64)
    UN_LOOP(double, float, (double)x);
  else if (from == K_F64 && tk == K_F32)
    UN_LOOP(float, double, (float)x);
  else if (from == K_F64 && tk == K_F64)
    UN_LOOP(double, double, x);
  else if (from == K_I64 && tk == K_F32)
    UN_LOOP(float, int64_t, (float)x);
  else if (from == K_I64 && tk == K_F64)
    UN_LOOP(double, int64_t, (double)x);
  else if (from == K_I64)
    UN_LOOP(int64_t, int64_t, x); /* wrapped below */
  else if (to == LOOM_BOOL && from == K_F32)
    UN_LOOP(int64_t, float, x != 0);
  else if (to == LOOM_BOOL)
    UN_LOOP(int64_t, double, x != 0);
  else {
    int64_t lo, hi;
    loom__cfz_int_range(to, &lo, &hi);
    if (from == K_F32)
      UN_LOOP(int64_t, float, loom__cfz_f64_to_int(x, lo, hi));
    else
      UN_LOOP(int64_t, double, loom__cfz_f64_to_int(x, lo, hi));
  }
}
ISA_VARIANTS_VOID(void, cast_block, (kind from, loom_dtype to, void *o, const void *a, int64_t n),
                  (from, to, o, a, n))

KERNEL void select_block_body(kind k, void *o, const int64_t *c, int sc, const void *a, int sa, const void *b,
                              int sb, int64_t n) {
  if (k == K_F32) {
    float *restrict o_ = o;
    const float *a_ = a, *b_ = b;
    for (int64_t j = 0; j < n; j++) o_[j] = c[sc ? j : 0] ? a_[sa ? j : 0] : b_[sb ? j : 0];
  } else {
    int64_t *restrict o_ = o; /* f64 and i64: the same 8 bytes moved */
    const int64_t *a_ = a, *b_ = b;
    for (int64_t j = 0; j < n; j++) o_[j] = c[sc ? j : 0] ? a_[sa ? j : 0] : b_[sb ? j : 0];
  }
}
ISA_VARIANTS_VOID(void, select_block,
                  (kind k, void *o, const int64_t *c, int sc, const void *a, int sa, const void *b, int sb,
                   int64_t n),
                  (k, o, c, sc, a, sa, b, sb, n))

/* Rounds a block to its dtype, as the unfused kernel's store does. */
void loom__cfz_normalize_block(loom_dtype dt, void *o, int64_t n) {
  if (dt == LOOM_F16 || dt == LOOM_BF16) {
    float *x = o;
    for (int64_t j = 0; j < n; j++) x[j] = loom__cfz_round_half(x[j], dt);
  } else if (loom__cfz_kind_of(dt) == K_I64 && dt != LOOM_I64) {
    int64_t *x = o;
    for (int64_t j = 0; j < n; j++) x[j] = loom__cfz_wrap_int(x[j], dt);
  }
}

/* ---- one op over a block ---- */

/* Runs op's kernel over n elements (n == 0 only asks whether the kernel exists). */
bool loom__cfz_run_ew(const plan *P, const loom__op *op, void *o, const void *const *pin, const bool *vin,
                      const tfm *tf, int64_t n) {
  const fvalue *a = &P->v[op->inputs[0]];
  switch (loom__op_info_of(op->kind)->cls) {
    case LOOM_CLASS_UNARY:
      if (a->kind == K_F32) return unary_float(op->kind, o, pin[0], tf, n);
      if (a->kind == K_F64) return unary_double(op->kind, o, pin[0], tf, n);
      return unary_int(op->kind, a->dtype, o, pin[0], n);
    case LOOM_CLASS_BINARY:
    case LOOM_CLASS_COMPARE:
    case LOOM_CLASS_LOGIC:
      if (P->v[op->inputs[1]].dtype != a->dtype) return false;
      if (a->kind == K_F32) return binary_float(op->kind, o, pin[0], vin[0], pin[1], vin[1], tf, n);
      if (a->kind == K_F64) return binary_double(op->kind, o, pin[0], vin[0], pin[1], vin[1], tf, n);
      return binary_int(op->kind, a->dtype, o, pin[0], vin[0], pin[1], vin[1], n);
    case LOOM_CLASS_SELECT:
      if (a->dtype != LOOM_BOOL || P->v[op->inputs[1]].kind != P->v[op->outputs[0]].kind) return false;
      select_block(P->v[op->outputs[0]].kind, o, pin[0], vin[0], pin[1], vin[1], pin[2], vin[2], n);
      return true;
    case LOOM_CLASS_CAST:
      cast_block(a->kind, P->v[op->outputs[0]].dtype, o, pin[0], n);
      return true;
    default:
      return false;
  }
}
