/* The cpu backend's fused op (docs/ir-fusion.md): a body graph of views, scalar constants, elementwise
 * ops and small dots, ending in at most one reduction, argmax/argmin or topk, evaluated over
 * blocks of the space without ever writing its intermediates to tensor memory.
 *
 * The space S (rank r) is walked as rows (every axis but the last) times blocks of FB
 * elements of the last axis. For one (row, block) every body op runs as one loop over the
 * block, on per-thread buffers of FB elements that stay in L1; a value constant along the
 * block (its last dimension is 1: sx[:,None], a scalar constant) is computed once per row as
 * a scalar, and the loops read it as one. The block is then folded into the final op's
 * per-lane state (a row's scalar accumulator where the last axis is reduced, FB accumulators
 * where it is kept), so the N x M intermediate of a kernel product never exists.
 *
 * Values are computed in three kinds: f32 (f32, and f16/bf16 rounded back after every op as
 * the unfused kernels store them), f64, and i64 (every integer dtype and bool, wrapped back to
 * their width after every op), so results match the unfused kernels (cpu_elementwise.c) op
 * for op; complex bodies are UNSUPPORTED here and run unfused. Reductions accumulate as
 * cpu_reduce.c does (floats in double, integers in wrapping uint64), and argmax/argmin/topk
 * keep its order: NaN ranks above every number, ties go to the lower index.
 *
 * Vector math: glibc's libmvec, through `omp simd` loops over expf/logf/sinf/cosf/tanhf/powf
 * (and the f64 forms) in kernels cloned per x86-64 level, so the AVX-512 clone calls
 * _ZGVeN16v_expf, the AVX2 one _ZGVdN8v_expf, the baseline _ZGVbN4v_expf (this file is built
 * with -O3 -fno-math-errno, CMakeLists.txt; the simd declarations are below). glibc documents
 * at most 4 ulp for libmvec's functions; measured on 2^20 f32 arguments per function against
 * the f64 libm result (the fused_cpu_vector_math_ulps test prints them), error against the
 * exact value: exp 2.6 ulp (-87..88), log 3.7 (1e-30..1e30, the worst near 1), sin 1.8 and
 * cos 1.9 (-100..100), tanh 1.4 (-10..10), pow 0.6, sqrt 0 (the IEEE instruction). The scalar
 * libm the unfused kernels call is within 1 ulp, so fused and unfused f32 results of one
 * transcendental op differ by at most about 4 ulp. SLEEF (Debian's libsleef-dev 3.5.1),
 * measured beside it on this machine (AVX-512, exp * b summed over 1024-element blocks): its
 * Sleef_expf16_u10 0.32 ns an element, 1.0 ulp, against libmvec's 0.35 ns: 10% on the exp,
 * about 5% on a kernel product, not worth a dependency. An inlined Cephes expf (no call, so no
 * spills) was no faster either once NaN and the ranges were handled (measured, not kept). The
 * one-pass kernel sums below do inline their exp (cpu_vmath.h: 1.9 ulp measured, and an
 * AVX-512 form through vscalefps): in a loop with nothing stored, the call's spills are what
 * cost, and the kernel product runs in 0.55 of its time with libmvec's exp.
 *
 * Peepholes, each keeping the unfused roundings: a scalar add/sub/mul or a neg read by one
 * elementwise op is applied as that op reads the block (absorb_scalar_ops); a 3-term f32 dot
 * read by one binary op is computed in its loop (find_dot_epilogues); a sum over the last
 * axis of a product of blocks, and of exp(e) * b, is taken in the same pass
 * (fuse_product_sum). A kernel sum as the distance rewrite writes it, sum_j exp(c max(dot3 + u,
 * lo)) b_j, is one loop per block with nothing stored (find_kernel_sum, kernel_sum_f32).
 *
 * Threads: the tasks (groups of rows, or (row, block) pairs where the last axis is kept) run
 * on OpenMP threads, each writing its own outputs. When there are too few tasks to feed the
 * threads (a reduction to a handful of values), each task's reduced range is split between
 * the threads instead, and their partial states are merged in thread order.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "backends/cpu/cpu_fused_plan.h"
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_vmath.h"
#include "ir/pattern.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define LOOM_KS_AVX512 1
#endif

/* glibc's <math.h> declares libmvec's variants only under -ffast-math, whose finite-math and
 * reassociation would break NaN propagation and the unfused results: declare them here. The
 * kernels are compiled once per x86-64 level (ISA_VARIANTS below), so each variant calls the
 * libmvec function of its width (_ZGVeN16v_expf with AVX-512, _ZGVdN8v_expf with AVX2,
 * _ZGVbN4v_expf with SSE2). */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__GLIBC__)
#if defined(__clang__) /* clang has no `simd` attribute: its loops call the scalar functions */
#define VECMATH
#else
#define VECMATH __attribute__((__simd__("notinbranch")))
#endif
VECMATH extern float expf(float);
VECMATH extern float logf(float);
VECMATH extern float sinf(float);
VECMATH extern float cosf(float);
VECMATH extern float tanhf(float);
VECMATH extern float powf(float, float);
VECMATH extern double exp(double);
VECMATH extern double log(double);
VECMATH extern double sin(double);
VECMATH extern double cos(double);
VECMATH extern double tanh(double);
VECMATH extern double pow(double, double);
#endif

/* Each kernel's body (KERNEL name_body) is inlined into one function per x86-64 level, each
 * compiled for its level by a target attribute, and `name` picks one per call by
 * loom__cpu_isa_level (cpu_isa.h): the CPU's best unless LOOM_CPU_ISA lowers it, so a machine
 * with AVX-512 can run, and test, the AVX2 and baseline code that other machines run. (GCC's
 * target_clones did this with ifunc resolvers, which run at load time, before any setting can
 * be read; they also crashed ThreadSanitizer builds, which now keep every variant.) */
#if defined(__x86_64__) && defined(__GNUC__)
#define KERNEL static inline __attribute__((always_inline))
#define ISA_VARIANTS(ret, name, params, args)                                        \
  __attribute__((target("arch=x86-64-v4"))) static ret name##_v4 params {            \
    return name##_body args;                                                         \
  }                                                                                  \
  __attribute__((target("arch=x86-64-v3"))) static ret name##_v3 params {            \
    return name##_body args;                                                         \
  }                                                                                  \
  static ret name##_v1 params {                                                      \
    return name##_body args;                                                         \
  }                                                                                  \
  static ret name params {                                                           \
    int isa_ = loom__cpu_isa_level();                                                \
    return isa_ >= 4 ? name##_v4 args : isa_ >= 3 ? name##_v3 args : name##_v1 args; \
  }
#define ISA_VARIANTS_VOID(ret, name, params, args)                         \
  __attribute__((target("arch=x86-64-v4"))) static void name##_v4 params { \
    name##_body args;                                                      \
  }                                                                        \
  __attribute__((target("arch=x86-64-v3"))) static void name##_v3 params { \
    name##_body args;                                                      \
  }                                                                        \
  static void name##_v1 params {                                           \
    name##_body args;                                                      \
  }                                                                        \
  static void name params {                                                \
    int isa_ = loom__cpu_isa_level();                                      \
    if (isa_ >= 4)                                                         \
      name##_v4 args;                                                      \
    else if (isa_ >= 3)                                                    \
      name##_v3 args;                                                      \
    else                                                                   \
      name##_v1 args;                                                      \
  }
#else
#define KERNEL static inline
#define ISA_VARIANTS(ret, name, params, args) \
  static ret name params {                    \
    return name##_body args;                  \
  }
#define ISA_VARIANTS_VOID(ret, name, params, args) \
  static void name params {                        \
    name##_body args;                              \
  }
#endif

/* ---- per-thread workspace -------------------------------------------------------------------- */

typedef struct work {
  char *buf;          /* n_slots buffers of FB 8-byte elements */
  const void **ptr;   /* per value: its block (vec) or its scalar */
  scalar *sc;         /* per value: scalar storage */
  tfm *tf;            /* per absorbed value: the op its reader applies */
  int64_t *cache_off; /* per value: offset of the block its buffer holds (leaves, dots' packs) */
  int64_t *cache_n;
} work;

static void work_free(work *w) {
  loom__aligned_free(w->buf);
  free(w->ptr);
  free(w->sc);
  free(w->tf);
  free(w->cache_off);
  free(w->cache_n);
}

static bool work_init(const plan *P, work *w) {
  int32_t nv = P->g->n_values;
  w->buf = loom__aligned_alloc((size_t)(P->n_slots + 1) * FB * 8);
  w->ptr = calloc((size_t)nv, sizeof *w->ptr);
  w->sc = calloc((size_t)nv, sizeof *w->sc);
  w->tf = calloc((size_t)nv, sizeof *w->tf);
  w->cache_off = malloc(sizeof *w->cache_off * (size_t)nv);
  w->cache_n = calloc((size_t)nv, sizeof *w->cache_n);
  if (!w->buf || !w->ptr || !w->sc || !w->tf || !w->cache_off || !w->cache_n) {
    work_free(w);
    return false;
  }
  for (int32_t i = 0; i < nv; i++) {
    w->cache_off[i] = -1;
    if (P->v[i].role == R_CONST) {
      w->sc[i] = P->v[i].c;
      w->ptr[i] = &w->sc[i];
    }
  }
  return true;
}

static inline void *slot(const work *w, int32_t s) {
  return w->buf + (size_t)s * FB * 8;
}

/* ---- leaves ---------------------------------------------------------------------------------- */

/* Copies n elements of a leaf at stride s into a buffer of its kind. */
KERNEL void pack_body(const char *base, loom_dtype dt, int64_t off, int64_t s, int64_t n, void *dst) {
  switch (dt) {
    case LOOM_F32: {
      const float *x = (const float *)base + off;
      float *o = dst;
      for (int64_t j = 0; j < n; j++) o[j] = x[j * s];
      return;
    }
    case LOOM_F64: {
      const double *x = (const double *)base + off;
      double *o = dst;
      for (int64_t j = 0; j < n; j++) o[j] = x[j * s];
      return;
    }
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
ISA_VARIANTS_VOID(void, pack, (const char *base, loom_dtype dt, int64_t off, int64_t s, int64_t n, void *dst),
                  (base, dt, off, s, n, dst))

static void load_leaves(const plan *P, work *w, const int64_t *idx, int64_t n) {
  for (int32_t l = 0; l < P->n_leaves; l++) {
    int32_t id = P->leaves[l];
    const fvalue *fv = &P->v[id];
    int64_t off = 0;
    for (int32_t d = 0; d < P->r; d++) off += idx[d] * fv->strides[d];
    if (!fv->vec) {
      w->sc[id] = loom__cfz_load_scalar(fv->base, fv->dtype, off);
      w->ptr[id] = &w->sc[id];
    } else if (fv->slot < 0) {
      w->ptr[id] = fv->base + off * (int64_t)loom_dtype_size(fv->dtype);
    } else {
      void *b = slot(w, fv->slot);
      /* A block that does not move with the row is packed once for all of them. */
      if (w->cache_off[id] != off || w->cache_n[id] != n) {
        pack(fv->base, fv->dtype, off, fv->strides[P->r - 1], n, b);
        w->cache_off[id] = off;
        w->cache_n[id] = n;
      }
      w->ptr[id] = b;
    }
  }
}

/* ---- elementwise kernels ----------------------------------------------------------------------
 * Each runs one op over n elements (1 for a scalar result); an operand with step 0 is a scalar
 * read once. Float semantics follow cpu_elementwise.c's macros exactly. */
#define SIGN_F(x) ((x) > 0 ? (__typeof__(x))1 : (x) < 0 ? (__typeof__(x))-1 : (x))
#define RELU_F(x) ((x) < 0 ? (__typeof__(x))0 : (x))
#define MAX_F(x, y) ((x) != (x) ? (x) : (x) >= (y) ? (x) : (y))
#define MIN_F(x, y) ((x) != (x) ? (x) : (x) <= (y) ? (x) : (y))

/* An operand's absorbed scalar op (absorb_scalar_ops): x * m + a, exact for each op absorbed
 * (x + c: m = 1; x - c: a = -c; c - x: m = -1; x * c and -x: a = -0, which adds nothing, not
 * even to a -0). Kernels without one have ta_/tb_ false and the compiler drops the test from
 * the loops it unswitches. */
#define TF_A(x) (ta_ ? (x)*ma_ + aa_ : (x))
#define TF_B(x) (tb_ ? (x)*mb_ + ab_ : (x))
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
static void normalize_block(loom_dtype dt, void *o, int64_t n) {
  if (dt == LOOM_F16 || dt == LOOM_BF16) {
    float *x = o;
    for (int64_t j = 0; j < n; j++) x[j] = loom__cfz_round_half(x[j], dt);
  } else if (loom__cfz_kind_of(dt) == K_I64 && dt != LOOM_I64) {
    int64_t *x = o;
    for (int64_t j = 0; j < n; j++) x[j] = loom__cfz_wrap_int(x[j], dt);
  }
}

/* The small dot: k multiply-adds per element. b's k rows are packed once per block (and kept
 * while the block's columns stay the same, across the rows of a group); a's row gives k
 * scalars. Leaves of rank 2 align with S one to one, so a's strides are (row, k) and b's
 * (k, column). */
#define DOT_BLOCK(T, FMA)                                                                                    \
  do {                                                                                                       \
    const T *bp[MAX_K];                                                                                      \
    T av[MAX_K];                                                                                             \
    bool fresh = w->cache_off[io] != boff || w->cache_n[io] != n;                                            \
    for (int64_t t = 0; t < k; t++) {                                                                        \
      av[t] = (T)loom__cfz_load_scalar(A->base, A->dtype, aoff + t * A->strides[1]).KF;                      \
      int64_t off = boff + t * B->strides[0];                                                                \
      if (B->strides[1] == 1 && B->dtype == DT) {                                                            \
        bp[t] = (const T *)B->base + off;                                                                    \
        continue;                                                                                            \
      }                                                                                                      \
      T *bt = slot(w, O->slot + 1 + (int32_t)t);                                                             \
      if (fresh) pack(B->base, B->dtype, off, B->strides[1], n, bt);                                         \
      bp[t] = bt;                                                                                            \
    }                                                                                                        \
    w->cache_off[io] = boff;                                                                                 \
    w->cache_n[io] = n;                                                                                      \
    T *restrict o = slot(w, O->slot);                                                                        \
    const T *restrict b0 = bp[0];                                                                            \
    T a0 = av[0];                                                                                            \
    if (k == 3) { /* points in 3-D: one pass, the roundings of three */                                      \
      const T *restrict b1 = bp[1], *restrict b2 = bp[2];                                                    \
      T a1 = av[1], a2 = av[2];                                                                              \
      _Pragma("omp simd") for (int64_t j = 0; j < n; j++) o[j] = FMA(a2, b2[j], FMA(a1, b1[j], a0 * b0[j])); \
      w->ptr[io] = o;                                                                                        \
      break;                                                                                                 \
    }                                                                                                        \
    _Pragma("omp simd") for (int64_t j = 0; j < n; j++) o[j] = a0 * b0[j];                                   \
    for (int64_t t = 1; t < k; t++) {                                                                        \
      const T *restrict bt = bp[t];                                                                          \
      T x = av[t];                                                                                           \
      _Pragma("omp simd") for (int64_t j = 0; j < n; j++) o[j] = FMA(x, bt[j], o[j]);                        \
    }                                                                                                        \
    w->ptr[io] = o;                                                                                          \
  } while (0)

KERNEL void dot_block_body(const plan *P, work *w, const loom__op *op, const int64_t *idx, int64_t n) {
  int32_t ia = op->inputs[0], ib = op->inputs[1], io = op->outputs[0];
  const fvalue *A = &P->v[ia], *B = &P->v[ib], *O = &P->v[io];
  int64_t k = P->g->values[ia].type.dims[1];
  int64_t aoff = idx[0] * A->strides[0], boff = idx[1] * B->strides[1];
  if (!O->vec) {
    double s = 0;
    for (int64_t t = 0; t < k; t++) {
      scalar x = loom__cfz_load_scalar(A->base, A->dtype, aoff + t * A->strides[1]);
      scalar y = loom__cfz_load_scalar(B->base, B->dtype, boff + t * B->strides[0]);
      s = O->kind == K_F32 ? (double)fmaf(x.f, y.f, (float)s) : fma(x.d, y.d, s);
    }
    if (O->kind == K_F32)
      w->sc[io].f = (float)s;
    else
      w->sc[io].d = s;
    w->ptr[io] = &w->sc[io];
    return;
  }
  if (O->kind == K_F32) {
#define KF f
#define DT LOOM_F32
    DOT_BLOCK(float, fmaf);
#undef KF
#undef DT
  } else {
#define KF d
#define DT LOOM_F64
    DOT_BLOCK(double, fma);
#undef KF
#undef DT
  }
}
ISA_VARIANTS_VOID(void, dot_block,
                  (const plan *P, work *w, const loom__op *op, const int64_t *idx, int64_t n),
                  (P, w, op, idx, n))

/* An f32 dot's k rows of b for the block (packed once while the columns stay) and a's k
 * coefficients for the row. */
static void dot_rows_f32(const plan *P, work *w, const loom__op *op, const int64_t *idx, int64_t n,
                         const float **bp, float *av) {
  int32_t ia = op->inputs[0], ib = op->inputs[1], io = op->outputs[0];
  const fvalue *A = &P->v[ia], *B = &P->v[ib], *O = &P->v[io];
  int64_t k = P->g->values[ia].type.dims[1];
  int64_t aoff = idx[0] * A->strides[0], boff = idx[1] * B->strides[1];
  bool fresh = w->cache_off[io] != boff || w->cache_n[io] != n;
  for (int64_t t = 0; t < k; t++) {
    av[t] = loom__cfz_load_scalar(A->base, A->dtype, aoff + t * A->strides[1]).f;
    int64_t off = boff + t * B->strides[0];
    if (B->strides[1] == 1 && B->dtype == LOOM_F32) {
      bp[t] = (const float *)B->base + off;
      continue;
    }
    float *bt = slot(w, O->slot + 1 + (int32_t)t);
    if (fresh) pack(B->base, B->dtype, off, B->strides[1], n, bt);
    bp[t] = bt;
  }
  w->cache_off[io] = boff;
  w->cache_n[io] = n;
}

/* o = x OP y where one of x, y is the 3-term dot (through its absorbed op, tdot) and the other
 * a block or a scalar (through its own, tother), in one loop. */
#define EPI_LOOPS(EXPR)                                         \
  do {                                                          \
    if (ov) {                                                   \
      _Pragma("omp simd") for (int64_t j = 0; j < n; j++) {     \
        float d = fmaf(a2, b2[j], fmaf(a1, b1[j], a0 * b0[j])); \
        d = td ? d * md + ad : d;                               \
        float u = to ? ou[j] * mo + ao : ou[j];                 \
        float x = left ? d : u, y = left ? u : d;               \
        o[j] = (EXPR);                                          \
      }                                                         \
    } else {                                                    \
      const float u = ou[0];                                    \
      _Pragma("omp simd") for (int64_t j = 0; j < n; j++) {     \
        float d = fmaf(a2, b2[j], fmaf(a1, b1[j], a0 * b0[j])); \
        d = td ? d * md + ad : d;                               \
        float x = left ? d : u, y = left ? u : d;               \
        o[j] = (EXPR);                                          \
      }                                                         \
    }                                                           \
  } while (0)

KERNEL void dot3_epilogue_body(loom_op op, float *restrict o, const float *const *bp, const float *av,
                               tfm tdot, bool left, const float *restrict ou, bool ov, tfm tother,
                               int64_t n) {
  const float *restrict b0 = bp[0], *restrict b1 = bp[1], *restrict b2 = bp[2];
  const float a0 = av[0], a1 = av[1], a2 = av[2];
  const bool td = tdot.on, to = tother.on;
  const float md = (float)tdot.m, ad = (float)tdot.a, mo = (float)tother.m, ao = (float)tother.a;
  switch (op) {
    case LOOM_OP_ADD:
      EPI_LOOPS(x + y);
      break;
    case LOOM_OP_SUB:
      EPI_LOOPS(x - y);
      break;
    case LOOM_OP_MUL:
      EPI_LOOPS(x * y);
      break;
    case LOOM_OP_DIV:
      EPI_LOOPS(x / y);
      break;
    case LOOM_OP_MAXIMUM:
      EPI_LOOPS(MAX_F(x, y));
      break;
    default:
      EPI_LOOPS(MIN_F(x, y));
      break;
  }
}
ISA_VARIANTS_VOID(void, dot3_epilogue,
                  (loom_op op, float *restrict o, const float *const *bp, const float *av, tfm tdot,
                   bool left, const float *restrict ou, bool ov, tfm tother, int64_t n),
                  (op, o, bp, av, tdot, left, ou, ov, tother, n))

/* Binary op c whose one operand is a dot (find_dot_epilogues), over the block. */
static void dot_epilogue(const plan *P, work *w, const loom__op *c, const int64_t *idx, int64_t n) {
  const fvalue *cv = &P->v[c->outputs[0]];
  const loom__op *dot = loom__producer(P->g, cv->epi_dot);
  int32_t mine = cv->epi_via >= 0 ? cv->epi_via : cv->epi_dot;
  bool left = c->inputs[0] == mine;
  int32_t other = c->inputs[left ? 1 : 0];
  const float *bp[MAX_K];
  float av[MAX_K];
  dot_rows_f32(P, w, dot, idx, n, bp, av);
  tfm none = {false, 1, 0};
  tfm tdot = cv->epi_via >= 0 ? w->tf[cv->epi_via] : none;
  tfm tother = P->v[other].absorbed ? w->tf[other] : none;
  float *o = slot(w, cv->slot);
  dot3_epilogue(c->kind, o, bp, av, tdot, left, w->ptr[other], P->v[other].vec, tother, n);
  w->ptr[c->outputs[0]] = o;
}

/* ---- one block --------------------------------------------------------------------------------- */

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

/* An absorbed op: its block is its operand's, read through x * m + a (tfm). */
static void absorbed_op(const plan *P, work *w, const loom__op *op) {
  int32_t io = op->outputs[0], iv = op->inputs[0], is = -1;
  bool left = true; /* the block is the first operand */
  if (op->n_inputs == 2) {
    left = P->v[op->inputs[0]].vec;
    iv = op->inputs[left ? 0 : 1];
    is = op->inputs[left ? 1 : 0];
  }
  double c = 0;
  if (is >= 0) c = P->v[io].kind == K_F32 ? (double)w->sc[is].f : w->sc[is].d;
  if (is >= 0 && w->ptr[is] != &w->sc[is]) /* a scalar read in place (a leaf's element) */
    c = P->v[io].kind == K_F32 ? (double)*(const float *)w->ptr[is] : *(const double *)w->ptr[is];
  tfm t = {true, 1, -0.0};
  switch (op->kind) {
    case LOOM_OP_NEG:
      t.m = -1;
      break;
    case LOOM_OP_ADD:
      t.a = c;
      break;
    case LOOM_OP_SUB:
      if (left)
        t.a = -c;
      else
        t.m = -1, t.a = c;
      break;
    default:
      t.m = c;
      break; /* mul */
  }
  w->tf[io] = t;
  w->ptr[io] = w->ptr[iv];
}

/* Computes every body value over the block of n elements at S index idx (idx[r-1] the first
 * column). */
static void eval_block(const plan *P, work *w, const int64_t *idx, int64_t n) {
  load_leaves(P, w, idx, n);
  for (int32_t q = 0; q < P->n_ops; q++) {
    const loom__op *op = &P->g->ops[P->ops[q]];
    int32_t io = op->outputs[0];
    const fvalue *O = &P->v[io];
    if (op->kind == LOOM_OP_DOT) {
      if (!O->in_epilogue) dot_block(P, w, op, idx, n);
      continue;
    }
    if (O->epi_dot >= 0) {
      dot_epilogue(P, w, op, idx, n);
      continue;
    }
    if (O->absorbed) {
      absorbed_op(P, w, op);
      continue;
    }
    void *o = O->vec ? slot(w, O->slot) : (void *)&w->sc[io];
    int64_t nn = O->vec ? n : 1;
    const void *pin[3];
    bool vin[3];
    tfm tf[3] = {{0}};
    for (int32_t i = 0; i < op->n_inputs; i++) {
      pin[i] = w->ptr[op->inputs[i]];
      vin[i] = P->v[op->inputs[i]].vec;
      if (P->v[op->inputs[i]].absorbed) tf[i] = w->tf[op->inputs[i]];
    }
    loom__cfz_run_ew(P, op, o, pin, vin, tf, nn);
    normalize_block(O->dtype, o, nn);
    w->ptr[io] = o;
  }
  const fvalue *S = &P->v[P->src];
  if (!S->vec && P->M > 1) { /* the folded value is constant along the block: spread it */
    if (S->kind == K_F32) {
      float x = *(const float *)w->ptr[P->src], *o = slot(w, S->slot);
      for (int64_t j = 0; j < n; j++) o[j] = x;
      w->ptr[P->src] = o;
    } else {
      int64_t x = *(const int64_t *)w->ptr[P->src], *o = slot(w, S->slot);
      for (int64_t j = 0; j < n; j++) o[j] = x;
      w->ptr[P->src] = o;
    }
  }
}

/* The S index of row (ko, ro) at column j0: ko over the kept outer axes, ro over the reduced
 * ones, each in C order. */
static void index_of(const plan *P, int64_t ko, int64_t ro, int64_t j0, int64_t *idx) {
  for (int32_t q = P->nk - 1; q >= 0; q--) {
    int32_t d = P->kax[q];
    idx[d] = ko % P->dims[d];
    ko /= P->dims[d];
  }
  for (int32_t q = P->nr - 1; q >= 0; q--) {
    int32_t d = P->rax[q];
    idx[d] = ro % P->dims[d];
    ro /= P->dims[d];
  }
  idx[P->r - 1] = j0;
}

static int64_t out_offset(const plan *P, const int64_t *idx) {
  int64_t off = 0;
  for (int32_t d = 0; d < P->r; d++) off += idx[d] * P->ostrides[d];
  return off;
}

/* ---- the final op's state ------------------------------------------------------------------------
 * One lane per output element being accumulated: sums and products in double (float kinds) or
 * wrapping uint64 (integers); max/min with NaN sticky; argmax/argmin the best value and its
 * index; topk a heap of the k best (worst at the root) in `heap`, `i` entries filled. */
typedef struct lane {
  scalar v;
  int64_t i;
} lane;

typedef struct entry {
  scalar v;
  int64_t i;
} entry;

typedef struct state {
  lane *lanes;
  entry *heap; /* k per lane */
  int64_t n;
} state;

static bool is_nan(const plan *P, scalar s) {
  return P->fkind != K_I64 && s.d != s.d;
}

/* Values of float kinds are held as double in lanes and heaps. */
static inline scalar widen(kind k, const void *x, int64_t j) {
  scalar s;
  if (k == K_F32)
    s.d = ((const float *)x)[j];
  else if (k == K_F64)
    s.d = ((const double *)x)[j];
  else
    s.i = ((const int64_t *)x)[j];
  return s;
}

/* a ranks above b (NaN above every number; ints compare as such), for argmax/topk-largest. */
static inline bool gt(const plan *P, scalar a, scalar b) {
  if (P->fkind == K_I64) return a.i > b.i;
  if (a.d != a.d) return b.d == b.d;
  return b.d == b.d && a.d > b.d;
}

/* Whether entry (a, ia) beats (b, ib) for the final op: argmax and topk-largest rank larger
 * first, argmin and topk-smallest smaller first, except that NaN is the best for argmin (as
 * for NumPy); topk-smallest puts NaN last. Ties go to the lower index. */
static inline bool better(const plan *P, scalar a, int64_t ia, scalar b, int64_t ib) {
  bool ahead, behind;
  if (P->fin == F_ARGMAX || (P->fin == F_TOPK && P->largest)) {
    ahead = gt(P, a, b);
    behind = gt(P, b, a);
  } else if (P->fin == F_ARGMIN) {
    bool an = is_nan(P, a), bn = is_nan(P, b);
    ahead = an ? !bn : (!bn && (P->fkind == K_I64 ? a.i < b.i : a.d < b.d));
    behind = bn ? !an : (!an && (P->fkind == K_I64 ? b.i < a.i : b.d < a.d));
  } else {
    ahead = gt(P, b, a);
    behind = gt(P, a, b);
  }
  return ahead || (!behind && ia < ib);
}

static void state_reset(const plan *P, state *st, int64_t n) {
  st->n = n;
  for (int64_t l = 0; l < n; l++) {
    lane *L = &st->lanes[l];
    L->i = P->fin == F_ARGMAX || P->fin == F_ARGMIN ? -1 : 0;
    bool f = P->fkind != K_I64;
    switch (P->fin) {
      case F_PROD:
        if (f)
          L->v.d = 1;
        else
          L->v.i = 1;
        break;
      case F_MAX:
        if (f)
          L->v.d = -INFINITY;
        else
          L->v.i = INT64_MIN;
        break;
      case F_MIN:
        if (f)
          L->v.d = INFINITY;
        else
          L->v.i = INT64_MAX;
        break;
      default:
        L->v.i = 0; /* 0.0 too */
        break;
    }
  }
}

static void heap_sift(const plan *P, entry *h, int64_t size, int64_t at) {
  entry e = h[at];
  for (;;) {
    int64_t c = 2 * at + 1;
    if (c >= size) break;
    if (c + 1 < size && better(P, h[c].v, h[c].i, h[c + 1].v, h[c + 1].i)) c++;
    if (!better(P, e.v, e.i, h[c].v, h[c].i)) break;
    h[at] = h[c];
    at = c;
  }
  h[at] = e;
}

/* Offers (v, i) to a lane's heap of the k best, worst at the root. */
static inline void heap_offer(const plan *P, lane *L, entry *h, scalar v, int64_t i) {
  int64_t k = P->k;
  if (L->i < k) {
    int64_t at = L->i++;
    while (at > 0) { /* sift up: the parent must not be better than the newcomer */
      int64_t parent = (at - 1) / 2;
      if (!better(P, h[parent].v, h[parent].i, v, i)) break;
      h[at] = h[parent];
      at = parent;
    }
    h[at] = (entry){v, i};
    return;
  }
  if (k == 0 || !better(P, v, i, h[0].v, h[0].i)) return;
  h[0] = (entry){v, i};
  heap_sift(P, h, k, 0);
}

/* Folds lane-wise: (v, i) into lane L. */
static inline void fold_one(const plan *P, lane *L, entry *h, scalar v, int64_t i) {
  bool f = P->fkind != K_I64;
  switch (P->fin) {
    case F_SUM:
    case F_MEAN:
      if (f)
        L->v.d += v.d;
      else
        L->v.i = (int64_t)((uint64_t)L->v.i + (uint64_t)v.i);
      break;
    case F_PROD:
      if (f)
        L->v.d *= v.d;
      else
        L->v.i = (int64_t)((uint64_t)L->v.i * (uint64_t)v.i);
      break;
    case F_MAX:
      if (f)
        L->v.d = L->v.d != L->v.d ? L->v.d : (v.d != v.d || v.d > L->v.d) ? v.d : L->v.d;
      else
        L->v.i = v.i > L->v.i ? v.i : L->v.i;
      break;
    case F_MIN:
      if (f)
        L->v.d = L->v.d != L->v.d ? L->v.d : (v.d != v.d || v.d < L->v.d) ? v.d : L->v.d;
      else
        L->v.i = v.i < L->v.i ? v.i : L->v.i;
      break;
    case F_ARGMAX:
    case F_ARGMIN:
      if (L->i < 0 || better(P, v, i, L->v, L->i)) {
        L->v = v;
        L->i = i;
      }
      break;
    case F_TOPK:
      heap_offer(P, L, h, v, i);
      break;
    default:
      break;
  }
}

/* Reduces a block of n values (index j0 + j along the reduced last axis) into one lane: the
 * common float forms as vectorized reductions, the rest element by element. */
#define ROW_REDUCE(T)                                                                                    \
  do {                                                                                                   \
    const T *restrict x = (const T *)xp;                                                                 \
    if (P->fin == F_SUM || P->fin == F_MEAN) {                                                           \
      L->v.d += P->prod_exp ? sum_exp_prod_##T(x, tf, y, n) : y ? sum_prod_##T(x, y, n) : sum_##T(x, n); \
      return;                                                                                            \
    }                                                                                                    \
    if (P->fin == F_TOPK && P->k > 0) {                                                                  \
      /* Once the heap is full, a run of 64 elements none of which can enter it (each worse              \
       * than the root, or equal: ties need the index) is skipped after one vector compare:              \
       * in a kNN row almost every run is. Which elements enter is fold_one's alone. */                  \
      int64_t j = 0;                                                                                     \
      for (; j < n && L->i < P->k; j++) fold_one(P, L, h, widen(P->fkind, xp, j), j0 + j);               \
      while (j < n) {                                                                                    \
        double r = h[0].v.d;                                                                             \
        int64_t end = n - j > 64 ? j + 64 : n;                                                           \
        int any = r != r; /* a NaN at the root: every element is offered */                              \
        const T thr = (T)r;                                                                              \
        if (!any && P->largest) {                                                                        \
          _Pragma("omp simd reduction(| : any)") for (int64_t q = j; q < end; q++) any |=                \
              (x[q] >= thr) | (x[q] != x[q]);                                                            \
        } else if (!any) {                                                                               \
          _Pragma("omp simd reduction(| : any)") for (int64_t q = j; q < end; q++) any |= x[q] <= thr;   \
        }                                                                                                \
        if (any)                                                                                         \
          for (int64_t q = j; q < end; q++) fold_one(P, L, h, widen(P->fkind, xp, q), j0 + q);           \
        j = end;                                                                                         \
      }                                                                                                  \
      return;                                                                                            \
    }                                                                                                    \
    if (P->fin == F_MAX || P->fin == F_MIN || P->fin == F_ARGMAX || P->fin == F_ARGMIN) {                \
      bool mx = P->fin == F_MAX || P->fin == F_ARGMAX;                                                   \
      T m = mx ? -INFINITY : INFINITY;                                                                   \
      int nan = 0;                                                                                       \
      if (mx) {                                                                                          \
        _Pragma("omp simd reduction(max : m) reduction(| : nan)") for (int64_t j = 0; j < n; j++) {      \
          m = x[j] > m ? x[j] : m;                                                                       \
          nan |= x[j] != x[j];                                                                           \
        }                                                                                                \
      } else {                                                                                           \
        _Pragma("omp simd reduction(min : m) reduction(| : nan)") for (int64_t j = 0; j < n; j++) {      \
          m = x[j] < m ? x[j] : m;                                                                       \
          nan |= x[j] != x[j];                                                                           \
        }                                                                                                \
      }                                                                                                  \
      scalar v;                                                                                          \
      v.d = nan ? NAN : (double)m;                                                                       \
      if (P->fin == F_MAX || P->fin == F_MIN) {                                                          \
        fold_one(P, L, h, v, 0);                                                                         \
        return;                                                                                          \
      }                                                                                                  \
      for (int64_t j = 0; j < n; j++)                                                                    \
        if (nan ? x[j] != x[j] : x[j] == m) {                                                            \
          fold_one(P, L, h, v, j0 + j);                                                                  \
          return;                                                                                        \
        }                                                                                                \
      return; /* only infinities of the wrong sign: the first element decides */                         \
    }                                                                                                    \
  } while (0)

/* Sums of a block: SUM_LANES independent partial sums (a single accumulator would wait on
 * the adder's latency at every vector), each of a few dozen terms, added in double at the end;
 * sum_prod_ adds the products x[j] * y[j], each rounded to T as the unfused mul stores it. */
#define SUM_LANES 64
#define DEF_SUMS(T)                                                                           \
  /* The lanes added as a tree: a chain of 64 scalar adds would cost more than the block. */  \
  static inline double fold_lanes_##T(const T *acc) {                                         \
    T q[16];                                                                                  \
    for (int l = 0; l < 16; l++) q[l] = (acc[l] + acc[l + 16]) + (acc[l + 32] + acc[l + 48]); \
    double s = 0;                                                                             \
    _Pragma("omp simd reduction(+ : s)") for (int l = 0; l < 16; l++) s += q[l];              \
    return s;                                                                                 \
  }                                                                                           \
  KERNEL double sum_##T##_body(const T *restrict x, int64_t n) {                              \
    T acc[SUM_LANES] = {0};                                                                   \
    int64_t j = 0;                                                                            \
    for (; j + SUM_LANES <= n; j += SUM_LANES) {                                              \
      _Pragma("omp simd") for (int l = 0; l < SUM_LANES; l++) acc[l] += x[j + l];             \
    }                                                                                         \
    double s = fold_lanes_##T(acc);                                                           \
    for (; j < n; j++) s += x[j];                                                             \
    return s;                                                                                 \
  }                                                                                           \
  ISA_VARIANTS(double, sum_##T, (const T *restrict x, int64_t n), (x, n))                     \
  KERNEL double sum_prod_##T##_body(const T *restrict x, const T *restrict y, int64_t n) {    \
    T acc[SUM_LANES] = {0};                                                                   \
    int64_t j = 0;                                                                            \
    for (; j + SUM_LANES <= n; j += SUM_LANES) {                                              \
      _Pragma("omp simd") for (int l = 0; l < SUM_LANES; l++) {                               \
        T p = x[j + l] * y[j + l];                                                            \
        acc[l] += p;                                                                          \
      }                                                                                       \
    }                                                                                         \
    double s = fold_lanes_##T(acc);                                                           \
    for (; j < n; j++) s += (T)(x[j] * y[j]);                                                 \
    return s;                                                                                 \
  }                                                                                           \
  ISA_VARIANTS(double, sum_prod_##T, (const T *restrict x, const T *restrict y, int64_t n), (x, y, n))
/* sum of exp(x[j] (transformed by t) ) * y[j]: the exp, the product and the sum of a
 * Gaussian kernel product in one pass, each rounded to T as the unfused ops store them. */
/* One vector of lanes: the vector ABI's call clobbers every vector register, so more
 * accumulators would only be spilled around each call to the exp. */
#define EXP_LANES 16
#define DEF_SUM_EXP(T, F)                                                                                    \
  KERNEL double sum_exp_prod_##T##_body(const T *restrict x, const tfm *t, const T *restrict y, int64_t n) { \
    T acc[EXP_LANES] = {0};                                                                                  \
    const bool ta_ = t && t->on;                                                                             \
    const T ma_ = ta_ ? (T)t->m : 1, aa_ = ta_ ? (T)t->a : 0;                                                \
    int64_t j = 0;                                                                                           \
    for (; j + EXP_LANES <= n; j += EXP_LANES) {                                                             \
      _Pragma("omp simd") for (int l = 0; l < EXP_LANES; l++) {                                              \
        T e = exp##F(TF_A(x[j + l]));                                                                        \
        T p = e * y[j + l];                                                                                  \
        acc[l] += p;                                                                                         \
      }                                                                                                      \
    }                                                                                                        \
    double s = 0;                                                                                            \
    _Pragma("omp simd reduction(+ : s)") for (int l = 0; l < EXP_LANES; l++) s += acc[l];                    \
    for (; j < n; j++) {                                                                                     \
      T e = exp##F(TF_A(x[j]));                                                                              \
      s += (T)(e * y[j]);                                                                                    \
    }                                                                                                        \
    return s;                                                                                                \
  }                                                                                                          \
  ISA_VARIANTS(double, sum_exp_prod_##T,                                                                     \
               (const T *restrict x, const tfm *t, const T *restrict y, int64_t n), (x, t, y, n))
DEF_SUMS(float)
DEF_SUMS(double)
DEF_SUM_EXP(float, f)
DEF_SUM_EXP(double, )

/* One term of a kernel sum (find_kernel_sum) from d, its dot with the dot's absorbed add or sub
 * of a row scalar a1 taken as the dot's first term (ks_loop: a1 + c0 b0 + c1 b1 + c2 b2, three
 * multiply-adds; the unfused dot's own order of adds is its BLAS's anyway): + u or - u, the
 * maximum with lo (-inf where there is none; a NaN lo never comes here), the scalar op
 * x * me (+ ae), the exp, the product with b, each rounded as the unfused op. `lo > x ? lo : x`
 * keeps a NaN x and, of two zeros, x, as MAX_F does, and is one instruction. */
static inline float ks_term(float d, float u, bool sub, float lo, float me, float ae, bool has_ae, float b) {
  float x = sub ? d - u : d + u;
  x = lo > x ? lo : x;
  x = has_ae ? x * me + ae : x * me;
  return loom__exp_f32(x) * b;
}

/* The loop of a kernel sum over n columns, SUM_LANES accumulators (with no call in the loop
 * they stay in registers); KS_DISPATCH calls it with uvec, sub and has_ae constant. */
#define KS_LANES SUM_LANES
static inline __attribute__((always_inline)) double ks_loop(const float *const *bp, const float *av, float a1,
                                                            const float *restrict u, float su, bool uvec,
                                                            bool sub, float lo, float me, float ae,
                                                            bool has_ae, const float *restrict b, int64_t n) {
  const float *restrict b0 = bp[0], *restrict b1 = bp[1], *restrict b2 = bp[2];
  const float c0 = av[0], c1 = av[1], c2 = av[2];
  float acc[KS_LANES] = {0};
  int64_t j = 0;
  for (; j + KS_LANES <= n; j += KS_LANES) {
    _Pragma("omp simd") for (int l = 0; l < KS_LANES; l++) {
      int64_t i = j + l;
      float d = fmaf(c2, b2[i], fmaf(c1, b1[i], fmaf(c0, b0[i], a1)));
      acc[l] += ks_term(d, uvec ? u[i] : su, sub, lo, me, ae, has_ae, b[i]);
    }
  }
  double s = fold_lanes_float(acc);
  for (; j < n; j++) {
    float d = fmaf(c2, b2[j], fmaf(c1, b1[j], fmaf(c0, b0[j], a1)));
    s += ks_term(d, uvec ? u[j] : su, sub, lo, me, ae, has_ae, b[j]);
  }
  return s;
}

/* Returns LOOP's sum with uvec (u is a block), sub and has_ae (ae is not -0) as constants at
 * each of its eight calls, so each is compiled to a loop of its own with no test in it; the
 * portable and the AVX-512 kernel sums both dispatch so. */
#define KS_CALL(LOOP, UVEC, SUB, AE) LOOP(bp, av, a1, u, su, UVEC, SUB, lo, me, ae, AE, b, n)
#define KS_DISPATCH(LOOP)                                                                            \
  do {                                                                                               \
    bool has_ae_ = !(ae == 0 && signbit(ae));                                                        \
    if (u)                                                                                           \
      return sub ? (has_ae_ ? KS_CALL(LOOP, true, true, true) : KS_CALL(LOOP, true, true, false))    \
                 : (has_ae_ ? KS_CALL(LOOP, true, false, true) : KS_CALL(LOOP, true, false, false)); \
    return sub ? (has_ae_ ? KS_CALL(LOOP, false, true, true) : KS_CALL(LOOP, false, true, false))    \
               : (has_ae_ ? KS_CALL(LOOP, false, false, true) : KS_CALL(LOOP, false, false, false)); \
  } while (0)

#ifdef LOOM_KS_AVX512
/* The same loop written for AVX-512 (the x86-64-v4 clone of the portable one above costs about
 * a third more): e^x = (1 + p(r)) 2^n with n rounded by vrndscaleps and 2^n applied by
 * vscalefps, which overflows to infinity, rounds once below the normal range and carries NaN,
 * where the portable exp needs seven integer ops, two multiplies and a select. max(c, x) and
 * min(c, x) return x when it is NaN (maxps gives its second operand then), so the clamps keep
 * NaN too. The polynomial and its reduction are loom__exp_f32's: the results are within 2 ulp
 * of e^x as there (fused_cpu_kernel_sum checks both kernels against f64). */
__attribute__((target("avx512f"))) static inline __m512 ks_exp512(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(0x1.715476p+0f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0x1.62e4p-1f), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0x1.7f7d1cp-20f), r);
  __m512 r2 = _mm512_mul_ps(r, r);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), r, _mm512_set1_ps(0x1.573e2ep-5f));
  __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), r, _mm512_set1_ps(0x1.fffdb6p-2f));
  q = _mm512_fmadd_ps(p, r2, q);
  __m512 poly = _mm512_fmadd_ps(q, r2, _mm512_mul_ps(_mm512_set1_ps(0x1.ffffecp-1f), r));
  return _mm512_scalef_ps(_mm512_add_ps(poly, _mm512_set1_ps(1.0f)), n);
}

/* Sixteen terms at column i (m: the lanes that exist), as ks_term computes each. */
__attribute__((target("avx512f"))) static inline __m512 ks_terms512(
    const float *const *bp, __m512 c0, __m512 c1, __m512 c2, __m512 a1, const float *u, __m512 su, bool uvec,
    bool sub, __m512 lo, __m512 me, __m512 ae, bool has_ae, const float *b, int64_t i, __mmask16 m) {
  __m512 d = _mm512_fmadd_ps(c0, _mm512_maskz_loadu_ps(m, bp[0] + i), a1);
  d = _mm512_fmadd_ps(c1, _mm512_maskz_loadu_ps(m, bp[1] + i), d);
  d = _mm512_fmadd_ps(c2, _mm512_maskz_loadu_ps(m, bp[2] + i), d);
  __m512 uu = uvec ? _mm512_maskz_loadu_ps(m, u + i) : su;
  __m512 x = sub ? _mm512_sub_ps(d, uu) : _mm512_add_ps(d, uu);
  x = _mm512_max_ps(lo, x); /* lo > x ? lo : x: x when NaN (a NaN lo never comes here) */
  x = _mm512_mul_ps(x, me);
  if (has_ae) x = _mm512_add_ps(x, ae);
  return _mm512_mul_ps(ks_exp512(x), _mm512_maskz_loadu_ps(m, b + i));
}

__attribute__((target("avx512f"), always_inline)) static inline double ks_loop512(
    const float *const *bp, const float *av, float a1f, const float *u, float suf, bool uvec, bool sub,
    float lof, float mef, float aef, bool has_ae, const float *b, int64_t n) {
  const __m512 c0 = _mm512_set1_ps(av[0]), c1 = _mm512_set1_ps(av[1]), c2 = _mm512_set1_ps(av[2]);
  const __m512 a1 = _mm512_set1_ps(a1f), su = _mm512_set1_ps(suf), lo = _mm512_set1_ps(lof);
  const __m512 me = _mm512_set1_ps(mef), ae = _mm512_set1_ps(aef);
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  int64_t j = 0;
  for (; j + 64 <= n; j += 64)
    for (int v = 0; v < 4; v++)
      acc[v] = _mm512_add_ps(acc[v], ks_terms512(bp, c0, c1, c2, a1, u, su, uvec, sub, lo, me, ae, has_ae, b,
                                                 j + 16 * v, (__mmask16)0xffff));
  /* the last columns, sixteen at a time under a mask: lanes past n add nothing */
  for (int v = 0; j < n; j += 16, v++) {
    __mmask16 m = (__mmask16)(n - j >= 16 ? 0xffff : (1u << (n - j)) - 1);
    __m512 t = ks_terms512(bp, c0, c1, c2, a1, u, su, uvec, sub, lo, me, ae, has_ae, b, j, m);
    acc[v] = _mm512_mask_add_ps(acc[v], m, acc[v], t);
  }
  float lanes[SUM_LANES];
  for (int v = 0; v < 4; v++) _mm512_storeu_ps(lanes + 16 * v, acc[v]);
  return fold_lanes_float(lanes);
}

__attribute__((target("avx512f"))) static double kernel_sum_avx512(const float *const *bp, const float *av,
                                                                   float a1, const float *u, float su,
                                                                   bool sub, float lo, float me, float ae,
                                                                   const float *b, int64_t n) {
  KS_DISPATCH(ks_loop512);
}
#endif

bool loom__cpu_ks_portable = false, loom__cpu_ks_taken = false;

KERNEL double kernel_sum_f32_body(const float *const *bp, const float *av, float a1, const float *u, float su,
                                  bool sub, float lo, float me, float ae, const float *b, int64_t n) {
  KS_DISPATCH(ks_loop);
}
ISA_VARIANTS(double, kernel_sum_f32,
             (const float *const *bp, const float *av, float a1, const float *u, float su, bool sub, float lo,
              float me, float ae, const float *b, int64_t n),
             (bp, av, a1, u, su, sub, lo, me, ae, b, n))

KERNEL void fold_row_body(const plan *P, lane *L, entry *h, const void *xp, const void *y, const tfm *tf,
                          int64_t n, int64_t j0) {
  if (P->fkind == K_F32) ROW_REDUCE(float);
  if (P->fkind == K_F64) ROW_REDUCE(double);
  if ((P->fin == F_ARGMAX || P->fin == F_ARGMIN) && P->fkind != K_I64) {
    /* every element was +-inf against the start value: fall through element by element */
  }
  for (int64_t j = 0; j < n; j++) fold_one(P, L, h, widen(P->fkind, xp, j), j0 + j);
}
ISA_VARIANTS_VOID(void, fold_row,
                  (const plan *P, lane *L, entry *h, const void *xp, const void *y, const tfm *tf, int64_t n,
                   int64_t j0),
                  (P, L, h, xp, y, tf, n, j0))

/* Element j of the block into lane j; i is the index along the reduced axis. */
KERNEL void fold_cols_body(const plan *P, state *st, const void *xp, int64_t n, int64_t i) {
  if (P->fin == F_SUM && P->fkind == K_F32) {
    const float *x = xp;
    for (int64_t j = 0; j < n; j++) st->lanes[j].v.d += x[j];
    return;
  }
  for (int64_t j = 0; j < n; j++)
    fold_one(P, &st->lanes[j], st->heap ? st->heap + j * P->k : NULL, widen(P->fkind, xp, j), i);
}
ISA_VARIANTS_VOID(void, fold_cols, (const plan *P, state *st, const void *xp, int64_t n, int64_t i),
                  (P, st, xp, n, i))

/* Merges src's lanes into dst's (a thread's partial after the threads before it). */
static void state_merge(const plan *P, state *dst, const state *src) {
  for (int64_t l = 0; l < dst->n; l++) {
    lane *L = &dst->lanes[l];
    const lane *S = &src->lanes[l];
    if (P->fin == F_TOPK) {
      for (int64_t e = 0; e < S->i; e++) {
        const entry *x = &src->heap[l * P->k + e];
        heap_offer(P, L, dst->heap + l * P->k, x->v, x->i);
      }
    } else if (P->fin == F_ARGMAX || P->fin == F_ARGMIN) {
      if (S->i >= 0) fold_one(P, L, NULL, S->v, S->i);
    } else {
      fold_one(P, L, NULL, S->v, 0);
    }
  }
}

/* ---- writing results ------------------------------------------------------------------------------ */

static void store_scalar(void *base, loom_dtype dt, int64_t off, scalar v, kind k) {
  double d = k == K_I64 ? (double)v.i : v.d;
  int64_t i = k == K_I64 ? v.i : 0;
  switch (dt) {
    case LOOM_BOOL:
      ((uint8_t *)base)[off] = k == K_I64 ? i != 0 : d != 0;
      break;
    case LOOM_I8:
      ((int8_t *)base)[off] = (int8_t)i;
      break;
    case LOOM_U8:
      ((uint8_t *)base)[off] = (uint8_t)i;
      break;
    case LOOM_I16:
      ((int16_t *)base)[off] = (int16_t)i;
      break;
    case LOOM_I32:
      ((int32_t *)base)[off] = (int32_t)i;
      break;
    case LOOM_I64:
      ((int64_t *)base)[off] = i;
      break;
    case LOOM_F16:
      ((uint16_t *)base)[off] = loom_f32_to_f16((float)d);
      break;
    case LOOM_BF16:
      ((uint16_t *)base)[off] = loom_f32_to_bf16((float)d);
      break;
    case LOOM_F32:
      ((float *)base)[off] = (float)d;
      break;
    case LOOM_F64:
      ((double *)base)[off] = d;
      break;
    default:
      break;
  }
}

/* Sorts a lane's heap best first (k is small: insertion sort). */
static void heap_sort(const plan *P, entry *h, int64_t n) {
  for (int64_t a = 1; a < n; a++) {
    entry e = h[a];
    int64_t b = a;
    for (; b > 0 && better(P, e.v, e.i, h[b - 1].v, h[b - 1].i); b--) h[b] = h[b - 1];
    h[b] = e;
  }
}

static void store_lane(const plan *P, const lane *L, entry *h, int64_t off) {
  const loom__view *out = P->out;
  loom_dtype dt = out[0].type.dtype;
  scalar v = L->v;
  switch (P->fin) {
    case F_MEAN:
      if (P->fkind == K_I64)
        v.i = P->count ? v.i / P->count : 0;
      else
        v.d = v.d / (double)P->count;
      store_scalar(out[0].data, dt, off, v, P->fkind);
      return;
    case F_ARGMAX:
    case F_ARGMIN:
      ((int64_t *)out[0].data)[off] = L->i;
      return;
    case F_TOPK:
      heap_sort(P, h, L->i);
      for (int64_t t = 0; t < L->i; t++) {
        store_scalar(out[0].data, dt, off + t * P->kstride, h[t].v, P->fkind);
        ((int64_t *)out[1].data)[off + t * P->kstride] = h[t].i;
      }
      return;
    default:
      store_scalar(out[0].data, dt, off, v, P->fkind);
      return;
  }
}

/* No final op: the block is the result. */
static void store_block(const plan *P, const void *x, int64_t n, int64_t off) {
  loom_dtype dt = P->out[0].type.dtype;
  char *o = (char *)P->out[0].data;
  if (dt == LOOM_F32 || dt == LOOM_F64 || dt == LOOM_I64) {
    memcpy(o + off * (int64_t)loom_dtype_size(dt), x, (size_t)n * loom_dtype_size(dt));
    return;
  }
  for (int64_t j = 0; j < n; j++)
    store_scalar(o, dt, off + j, widen(P->fkind, x, j), P->fkind == K_F32 ? K_F64 : P->fkind);
}

/* ---- tasks ---------------------------------------------------------------------------------------- */

/* A task's output rows: where the last axis is reduced, up to ROW_GROUP kept rows whose blocks
 * are walked together (lanes: one per row); where it is kept, one kept row and one block
 * (lanes: one per column). With no final op a task is one (row, block) written out. */
static int64_t task_count(const plan *P, int64_t *group) {
  *group = 1;
  if (P->fin != F_NONE && P->last_red) {
    *group = P->Ok < ROW_GROUP ? (P->Ok > 0 ? P->Ok : 1) : ROW_GROUP;
    return (P->Ok + *group - 1) / *group;
  }
  return P->Ok * P->nb;
}

static int64_t lanes_of(const plan *P, int64_t group) {
  return P->last_red ? group : FB;
}

static bool state_init(const plan *P, state *st, int64_t lanes) {
  st->lanes = malloc(sizeof *st->lanes * (size_t)lanes);
  st->heap = P->fin == F_TOPK && P->k > 0 ? malloc(sizeof *st->heap * (size_t)(lanes * P->k)) : NULL;
  st->n = 0;
  return st->lanes && (st->heap || !(P->fin == F_TOPK && P->k > 0));
}

static void state_free(state *st) {
  free(st->lanes);
  free(st->heap);
}

/* The sum over one block of a kernel sum's row (find_kernel_sum): the leaves, the dot's rows
 * and the absorbed ops' scalars as eval_block finds them, then one loop. */
static double kernel_sum_block(const plan *P, work *w, const int64_t *idx, int64_t n) {
  load_leaves(P, w, idx, n);
  const float *bp[MAX_K];
  float av[MAX_K];
  dot_rows_f32(P, w, loom__producer(P->g, P->ks_dot), idx, n, bp, av);
  float a1 = -0.0f, me = 1, ae = -0.0f;
  if (P->ks_via >= 0) { /* an add or a sub of a scalar (find_kernel_sum): m is 1 */
    absorbed_op(P, w, loom__producer(P->g, P->ks_via));
    a1 = (float)w->tf[P->ks_via].a;
  }
  if (P->ks_aff >= 0) {
    absorbed_op(P, w, loom__producer(P->g, P->ks_aff));
    me = (float)w->tf[P->ks_aff].m;
    ae = (float)w->tf[P->ks_aff].a;
  }
  float lo = P->ks_lo >= 0 ? *(const float *)w->ptr[P->ks_lo] : -INFINITY;
  if (isnan(lo)) return NAN; /* every term is the maximum's NaN */
  const float *u = w->ptr[P->ks_u];
  bool uv = P->v[P->ks_u].vec;
#ifdef LOOM_KS_AVX512
  if (P->ks_avx512)
    return kernel_sum_avx512(bp, av, a1, uv ? u : NULL, uv ? 0 : u[0], P->ks_sub, lo, me, ae,
                             w->ptr[P->prod_b], n);
#endif
  return kernel_sum_f32(bp, av, a1, uv ? u : NULL, uv ? 0 : u[0], P->ks_sub, lo, me, ae, w->ptr[P->prod_b],
                        n);
}

/* Runs units [u0, u1) of a task into st: where the last axis is reduced a unit is one block of
 * the reduced rows, (ro, jb) with jb fastest, for every row of the group; where it is kept a
 * unit is one reduced row ro of the task's block. */
static void run_units(const plan *P, work *w, state *st, int64_t task, int64_t group, int64_t u0,
                      int64_t u1) {
  int64_t idx[LOOM_MAX_RANK];
  if (P->last_red) {
    int64_t ko0 = task * group, rows = LOOM_MIN(group, P->Ok - ko0);
    /* Blocks outer, rows inner: a block that depends only on the column is packed once. */
    for (int64_t u = u0; u < u1; u++) {
      int64_t ro = u / P->nb, jb = u % P->nb, j0 = jb * FB, n = LOOM_MIN(FB, P->M - j0);
      for (int64_t kk = 0; kk < rows; kk++) {
        index_of(P, ko0 + kk, ro, j0, idx);
        if (P->ks) {
          st->lanes[kk].v.d += kernel_sum_block(P, w, idx, n);
          continue;
        }
        eval_block(P, w, idx, n);
        int64_t ri = P->fin >= F_ARGMAX ? idx[P->axis] : 0; /* axis is the last one here */
        (void)ri;
        fold_row(P, &st->lanes[kk], st->heap ? st->heap + kk * P->k : NULL, w->ptr[P->src],
                 P->prod_b >= 0 ? w->ptr[P->prod_b] : NULL, P->v[P->src].absorbed ? &w->tf[P->src] : NULL, n,
                 j0);
      }
    }
    return;
  }
  int64_t ko = task / P->nb, jb = task % P->nb, j0 = jb * FB, n = LOOM_MIN(FB, P->M - j0);
  for (int64_t ro = u0; ro < u1; ro++) {
    index_of(P, ko, ro, j0, idx);
    eval_block(P, w, idx, n);
    fold_cols(P, st, w->ptr[P->src], n, P->fin >= F_ARGMAX ? idx[P->axis] : 0);
  }
}

static int64_t units_of(const plan *P) {
  return P->last_red ? P->Or * P->nb : P->Or;
}

static void store_task(const plan *P, const state *st, int64_t task, int64_t group) {
  int64_t idx[LOOM_MAX_RANK];
  if (P->last_red) {
    int64_t ko0 = task * group;
    for (int64_t kk = 0; kk < st->n; kk++) {
      index_of(P, ko0 + kk, 0, 0, idx);
      store_lane(P, &st->lanes[kk], st->heap ? st->heap + kk * P->k : NULL, out_offset(P, idx));
    }
    return;
  }
  int64_t ko = task / P->nb, jb = task % P->nb;
  index_of(P, ko, 0, jb * FB, idx);
  int64_t off = out_offset(P, idx);
  for (int64_t j = 0; j < st->n; j++)
    store_lane(P, &st->lanes[j], st->heap ? st->heap + j * P->k : NULL, off + j * P->ostrides[P->r - 1]);
}

static int64_t task_lanes(const plan *P, int64_t task, int64_t group) {
  if (P->last_red) return LOOM_MIN(group, P->Ok - task * group);
  int64_t j0 = (task % P->nb) * FB;
  return LOOM_MIN(FB, P->M - j0);
}

/* No final op: every (row, block) is written where it belongs. */
static void elementwise_tasks(const plan *P, work *w, int64_t t0, int64_t t1) {
  for (int64_t t = t0; t < t1; t++) {
    int64_t idx[LOOM_MAX_RANK], ko = t / P->nb, j0 = (t % P->nb) * FB, n = LOOM_MIN(FB, P->M - j0);
    index_of(P, ko, 0, j0, idx);
    eval_block(P, w, idx, n);
    int64_t off = 0, s = 1;
    for (int32_t d = P->r - 1; d >= 0; d--) {
      off += idx[d] * s;
      s *= P->dims[d];
    }
    store_block(P, w->ptr[P->src], n, off);
  }
}

static loom_status run_elementwise(const plan *P) {
  int64_t tasks = P->Ok * P->nb;
  bool failed = false;
  /* Little work runs here, outside any parallel region: libgomp starts a team even under a
   * false `if`, which costs more than a small body (cpu_loops.h says the same of the kernels). */
  if (tasks == 1 || P->Ok * P->M * (P->n_ops + 1) < 16 * LOOM_CPU_BLOCK) {
    work w;
    if (!work_init(P, &w)) return loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory for blocks");
    elementwise_tasks(P, &w, 0, tasks);
    work_free(&w);
    return LOOM_OK;
  }
#pragma omp parallel
  {
    work w;
    bool ok = work_init(P, &w);
    if (!ok) {
#pragma omp atomic write
      failed = true;
    }
#pragma omp for schedule(dynamic, 4)
    for (int64_t t = 0; t < tasks; t++)
      if (ok) elementwise_tasks(P, &w, t, t + 1);
    if (ok) work_free(&w);
  }
  return failed ? loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory for a thread's blocks")
                : LOOM_OK;
}

/* Many tasks: each thread runs whole tasks and writes their outputs. */
static loom_status run_by_tasks(const plan *P, int64_t tasks, int64_t group) {
  bool failed = false;
  int64_t units = units_of(P);
#pragma omp parallel if (tasks > 1)
  {
    work w;
    state st;
    bool ok = work_init(P, &w);
    if (ok && !state_init(P, &st, lanes_of(P, group))) {
      work_free(&w);
      ok = false;
    }
    if (!ok) {
#pragma omp atomic write
      failed = true;
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; t++) {
      if (!ok) continue;
      state_reset(P, &st, task_lanes(P, t, group));
      run_units(P, &w, &st, t, group, 0, units);
      store_task(P, &st, t, group);
    }
    if (ok) {
      work_free(&w);
      state_free(&st);
    }
  }
  return failed ? loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory for a thread's blocks")
                : LOOM_OK;
}

/* Few tasks: the threads split each task's units, and their partial states are merged in
 * thread order (so argmax/topk ties still go to the lower index). */
static loom_status run_split(const plan *P, int64_t tasks, int64_t group, int nt) {
  int64_t units = units_of(P), lanes = lanes_of(P, group);
  state *parts = calloc((size_t)nt, sizeof *parts);
  work *ws = calloc((size_t)nt, sizeof *ws);
  bool failed = !parts || !ws;
  for (int t = 0; t < nt && !failed; t++) failed = !state_init(P, &parts[t], lanes) || !work_init(P, &ws[t]);
  for (int64_t task = 0; task < tasks && !failed; task++) {
    int64_t n = task_lanes(P, task, group);
    for (int t = 0; t < nt; t++) state_reset(P, &parts[t], n);
#pragma omp parallel num_threads(nt)
    {
      int t = omp_get_thread_num(), got = omp_get_num_threads();
      int64_t u0 = units * t / got, u1 = units * (t + 1) / got;
      run_units(P, &ws[t], &parts[t], task, group, u0, u1);
    }
    for (int t = 1; t < nt; t++) state_merge(P, &parts[0], &parts[t]);
    store_task(P, &parts[0], task, group);
  }
  for (int t = 0; parts && ws && t < nt; t++) {
    state_free(&parts[t]);
    if (ws[t].buf) work_free(&ws[t]);
  }
  free(parts);
  free(ws);
  return failed ? loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory for a thread's blocks")
                : LOOM_OK;
}

loom_status loom__cpu_fused_supported(const loom_graph *body) {
  if (!body) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: fused: body is NULL");
  int32_t np = body->n_params, no = body->n_outputs;
  loom__view *views = calloc((size_t)(np + no) + 1, sizeof *views);
  loom__layout *lay = malloc(sizeof *lay * (size_t)(body->n_values + 1));
  if (!views || !lay) {
    free(views);
    free(lay);
    return loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory");
  }
  for (int32_t i = 0; i < np + no; i++) {
    int32_t v = i < np ? body->params[i] : body->outputs[i - np];
    views[i].type = body->values[v].type;
    loom__view_dense_strides(&views[i].type, views[i].strides);
  }
  plan P;
  loom_status s = loom__cfz_build_plan(body, views, views + np, &P, lay);
  loom__cfz_plan_free(&P);
  free(lay);
  free(views);
  return s;
}

loom_status loom__cpu_fused(const loom_graph *body, const loom__view *in, const loom__view *out,
                            void *scratch, int64_t scratch_bytes) {
  (void)scratch; /* accumulators live per task, in registers and per-thread lanes */
  (void)scratch_bytes;
  if (!body || (body->n_params > 0 && !in) || !out)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: fused: body, operands or outputs are NULL");
  loom__layout *lay = malloc(sizeof *lay * (size_t)(body->n_values + 1));
  if (!lay) return loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory");
  plan P;
  loom_status s = loom__cfz_build_plan(body, in, out, &P, lay);
  free(lay);
  if (s) {
    loom__cfz_plan_free(&P);
    return s;
  }
  __atomic_store_n(&loom__cpu_ks_taken, P.ks, __ATOMIC_RELAXED);
  int64_t total = 1, outputs = 1;
  for (int32_t d = 0; d < P.r; d++) total *= P.dims[d];
  for (int32_t r = 0; r < body->n_outputs; r++) outputs = LOOM_MIN(outputs, loom__cpu_elements(&out[r].type));
  if (outputs == 0) {
    loom__cfz_plan_free(&P);
    return LOOM_OK;
  }
  if (P.fin == F_NONE) {
    s = total ? run_elementwise(&P) : LOOM_OK;
    loom__cfz_plan_free(&P);
    return s;
  }
  int64_t group, tasks = task_count(&P, &group);
  int nt = omp_get_max_threads();
  /* Split a task between threads only where there are too few tasks and enough work in each. */
  if (nt > 1 && tasks < 4 * (int64_t)nt && total / (tasks ? tasks : 1) >= 4 * FB)
    s = run_split(&P, tasks, group, nt);
  else
    s = run_by_tasks(&P, tasks, group);
  loom__cfz_plan_free(&P);
  return s;
}
