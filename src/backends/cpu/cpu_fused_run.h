/* What the parts of the cpu backend's fused evaluator share (private to src/backends/cpu/cpu_fused*.c):
 * the macros that compile each kernel once per x86-64 level, the per-thread workspace, the final op's
 * per-lane state, and the functions one part calls in another. The parts, each with one job:
 *   cpu_fused.c         the evaluator: workspace, leaves, one block of the body, tasks on threads
 *   cpu_fused_plan.c    the plan of a body (cpu_fused_plan.h)
 *   cpu_fused_ew.c      the elementwise kernels, one vectorized loop per op over a block
 *   cpu_fused_dot.c     the small dots (k <= MAX_K) and the binary op that reads one (epilogue)
 *   cpu_fused_ksum.c    the kernel sum in one pass (the kmv fast path), portable and AVX-512
 *   cpu_fused_gemm.c    a topk over a large dot: GEMM tiles through the host BLAS, k best merged per row
 *   cpu_fused_reduce.c  the final op: folding blocks into lanes, merging, writing results */
#ifndef LOOM_BACKENDS_CPU_FUSED_RUN_H
#define LOOM_BACKENDS_CPU_FUSED_RUN_H

#include <math.h>

#include "backends/cpu/cpu_fused_plan.h"
#include "backends/cpu/cpu_isa.h"

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

/* ---- per-thread workspace ---- */

typedef struct work {
  char *buf;          /* n_slots buffers of FB 8-byte elements */
  const void **ptr;   /* per value: its block (vec) or its scalar */
  scalar *sc;         /* per value: scalar storage */
  tfm *tf;            /* per absorbed value: the op its reader applies */
  int64_t *cache_off; /* per value: offset of the block its buffer holds (leaves, dots' packs) */
  int64_t *cache_n;
} work;

static inline void *slot(const work *w, int32_t s) {
  return w->buf + (size_t)s * FB * 8;
}

/* Float semantics of cpu_elementwise.c's macros: NaN propagates through max and min. */
#define MAX_F(x, y) ((x) != (x) ? (x) : (x) >= (y) ? (x) : (y))
#define MIN_F(x, y) ((x) != (x) ? (x) : (x) <= (y) ? (x) : (y))

/* An operand's absorbed scalar op (absorb_scalar_ops): x * m + a, exact for each op absorbed
 * (x + c: m = 1; x - c: a = -c; c - x: m = -1; x * c and -x: a = -0, which adds nothing, not
 * even to a -0). Kernels without one have ta_/tb_ false and the compiler drops the test from
 * the loops it unswitches. */
#define TF_A(x) (ta_ ? (x)*ma_ + aa_ : (x))
#define TF_B(x) (tb_ ? (x)*mb_ + ab_ : (x))

/* ---- the final op's state ----
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
  /* Float sums where the last axis is kept: dense, so a block is added in one vector loop (the
   * lanes' doubles lie 16 bytes apart); moved into the lanes by loom__cfz_state_settle. */
  double *acc;
  int64_t n;
} state;

/* Sums keep SUM_LANES independent partial sums (a single accumulator would wait on the adder's
 * latency at every vector), added at the end as a tree: a chain of 64 scalar adds would cost
 * more than the block. */
#define SUM_LANES 64
#define DEF_FOLD_LANES(T)                                                                     \
  static inline double fold_lanes_##T(const T *acc) {                                         \
    T q[16];                                                                                  \
    for (int l = 0; l < 16; l++) q[l] = (acc[l] + acc[l + 16]) + (acc[l + 32] + acc[l + 48]); \
    double s = 0;                                                                             \
    _Pragma("omp simd reduction(+ : s)") for (int l = 0; l < 16; l++) s += q[l];              \
    return s;                                                                                 \
  }
DEF_FOLD_LANES(float)
DEF_FOLD_LANES(double)

/* ---- between the parts (each documented at its definition) ---- */

/* cpu_fused.c; unit_index: the S index of kept row ko at unit u (u / nb the reduced row, u % nb
 * the column block), as run_units walks them */
void loom__cfz_load_leaves(const plan *P, work *w, const int64_t *idx, int64_t n);
void loom__cfz_unit_index(const plan *P, int64_t ko, int64_t u, int64_t *idx);
void loom__cfz_absorbed_op(const plan *P, work *w, const loom__op *op);
/* cpu_fused_ew.c */
void loom__cfz_pack(const char *base, loom_dtype dt, int64_t off, int64_t s, int64_t n, void *dst);
void loom__cfz_normalize_block(loom_dtype dt, void *o, int64_t n);
/* cpu_fused_dot.c */
void loom__cfz_dot_block(const plan *P, work *w, const loom__op *op, const int64_t *idx, int64_t n);
void loom__cfz_dot_rows_f32(const plan *P, work *w, const loom__op *op, const int64_t *idx, int64_t n,
                            const float **bp, float *av);
void loom__cfz_dot_epilogue(const plan *P, work *w, const loom__op *c, const int64_t *idx, int64_t n);
/* cpu_fused_ksum.c: a kernel sum's units [u0, u1) (as run_units counts them) for the rows
 * ko0 .. ko0 + rows - 1 of a group (at most KS_ROW_GROUP), each added into its lane. Its groups
 * are larger than ROW_GROUP: the packing of a column block, once a group, cost about a tenth of
 * the kernel's time at 64 rows (kmv, d = 3). */
#define KS_ROW_GROUP 256
void loom__cfz_kernel_sum_units(const plan *P, work *w, lane *lanes, int64_t ko0, int64_t rows, int64_t u0,
                                int64_t u1);
/* cpu_fused_gemm.c: a row's k smallest (value, index), best first, as a topk of the smallest
 * orders them (NaN last, ties to the lower index), kept where the topk writes them (a row of its
 * two outputs, through their strides) or in the op's scratch: no memory of their own. init
 * fills the k places with placeholders (NaN, INT64_MAX) that every real entry displaces; offer
 * puts one entry where it belongs; merge offers a row of n values (indices c0..) behind a
 * vector threshold test; row is row i of a topk's outputs. */
typedef struct loom__cfz_best {
  float *v;
  int64_t *i;
  int64_t sv, si; /* element strides along the row */
} loom__cfz_best;
void loom__cfz_best_init(const loom__cfz_best *h, int64_t k);
void loom__cfz_best_offer(const loom__cfz_best *h, int64_t k, float v, int64_t i);
void loom__cfz_best_merge(const loom__cfz_best *h, int64_t k, const float *v, int64_t c0, int64_t n);
loom__cfz_best loom__cfz_best_row(const loom__view *out, int64_t i);
/* cpu_fused_distance.c */
bool loom__cfz_distance_topk_matches(const loom_graph *body, const loom__view *in, const loom__view *out);
loom_status loom__cfz_distance_topk(const loom_graph *body, const loom__view *in, const loom__view *out,
                                    void *scratch, int64_t scratch_bytes, bool *taken);
/* cpu_fused_gemm.c */
bool loom__cfz_gemm_topk_matches(const loom_graph *body, const loom__view *in, const loom__view *out);
loom_status loom__cfz_gemm_topk(const loom_graph *body, const loom__view *in, const loom__view *out,
                                void *scratch, int64_t scratch_bytes, bool *taken);
/* cpu_fused_reduce.c */
bool loom__cfz_state_init(const plan *P, state *st, int64_t lanes);
void loom__cfz_state_free(state *st);
void loom__cfz_state_reset(const plan *P, state *st, int64_t n);
void loom__cfz_state_merge(const plan *P, state *dst, const state *src);
void loom__cfz_state_settle(state *st);
void loom__cfz_fold_row(const plan *P, lane *L, entry *h, const void *xp, const void *y, const tfm *tf,
                        int64_t n, int64_t j0);
void loom__cfz_fold_cols(const plan *P, state *st, const void *xp, int64_t n, int64_t i);
void loom__cfz_store_lane(const plan *P, const lane *L, entry *h, int64_t off);
void loom__cfz_store_block(const plan *P, const void *x, int64_t n, int64_t off);

#endif
