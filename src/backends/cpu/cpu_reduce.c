/* The cpu backend's reductions: reduce_sum/prod/mean/max/min over a set of axes, and
 * argmax/argmin along one axis (topk is in cpu_topk.c).
 *
 * A plan splits the input view into kept dimensions (the output's, in order) and reduced
 * dimensions, each coalesced into a loop nest. One of four schedules runs it, chosen from the
 * shapes alone, so results do not depend on the number of threads:
 * - rows: each output reduces its own run (the reduced dims are the inner ones); threads
 *   take blocks of outputs.
 * - split: few outputs over a long reduction: the reduced range is cut into chunks reduced
 *   on threads, and the partial results merged in chunk order.
 * - cols: the innermost kept dimension is the one with the smallest stride (a reduction over
 *   leading axes, such as column sums): a tile of TILE consecutive outputs is accumulated
 *   together, so every reduced step reads TILE neighbouring elements.
 * - cols_split: cols with few tiles and a long reduction, chunked as in split.
 * The per-element loops are generated per (op, dtype) from the kind macros below.
 *
 * Semantics: reduce_sum/prod of integers wrap in the integer type; f16/bf16/f32/f64 sums and
 * products accumulate in double (so f32 sums are accurate to about 1e-7 relative to the sum
 * of magnitudes); complex in double complex. reduce_mean of floats is sum / n (NaN over an
 * empty axis); of integers (not accepted by the IR's rules, but run when called directly)
 * the int64 sum divided by n, truncated, 0 over an empty axis. reduce_max/min return NaN
 * when any element is NaN; over an empty axis they, argmax and argmin fail with
 * INVALID_ARGUMENT. argmax/argmin return the lowest index of the best value; a NaN is the
 * best for both (as NumPy): the first NaN wins.
 */
#include <math.h>

#include "backends/cpu/cpu_loops.h"
#include "backends/shapes.h"

/* Outputs accumulated together by the cols schedules. Wide tiles read long runs of each
 * input row (4096^2 f32 column sums: 27 ms with 256, 12 with 1024, 8 with 4096), and the
 * accumulators (up to 16 + 8 bytes each) stay within 48 KiB of stack per thread. */
#define TILE 2048
#define MAX_CHUNKS 16

enum { PATH_ROWS, PATH_SPLIT, PATH_COLS, PATH_COLS_SPLIT };

typedef struct rplan {
  loom__cpu_nest kept; /* the output's dims, operand 0: the input's strides on them */
  loom__cpu_nest red;  /* the reduced dims, innermost with the smallest stride */
  int64_t n_out, n_red;
  const char *in;
  char *out;
  int32_t path, chunks;
  int64_t kdim, ks, tiles_per, n_tiles; /* cols: innermost kept dim, its stride, tiling */
} rplan;

/* Offset in the input of output position o, over the kept dims [0, rank). */
static int64_t kept_offset(const loom__cpu_nest *K, int32_t rank, int64_t o) {
  loom__cpu_nest outer = *K;
  outer.rank = rank;
  return loom__cpu_nest_offset(&outer, 0, o);
}

static int64_t chunk_bound(int64_t n, int32_t chunks, int32_t c) {
  return n / chunks * c + LOOM_MIN(c, n % chunks);
}

/* ---- per-dtype traits of the reductions ---------------------------------------------- */
/* Accumulator of sums and products. */
#define SUMT_i8 uint64_t
#define SUMT_u8 uint64_t
#define SUMT_i16 uint64_t
#define SUMT_i32 uint64_t
#define SUMT_i64 uint64_t
#define SUMT_f16 double
#define SUMT_bf16 double
#define SUMT_f32 double
#define SUMT_f64 double
#define SUMT_c64 double _Complex
#define SUMT_c128 double _Complex
#define CT_(D) LOOM_CPU_C_##D
#define ISNAN_i8(x) 0
#define ISNAN_u8(x) 0
#define ISNAN_i16(x) 0
#define ISNAN_i32(x) 0
#define ISNAN_i64(x) 0
#define ISNAN_f16(x) ((x) != (x))
#define ISNAN_bf16(x) ((x) != (x))
#define ISNAN_f32(x) ((x) != (x))
#define ISNAN_f64(x) ((x) != (x))
#define NANV_i8 0
#define NANV_u8 0
#define NANV_i16 0
#define NANV_i32 0
#define NANV_i64 0
#define NANV_f16 NAN
#define NANV_bf16 NAN
#define NANV_f32 NAN
#define NANV_f64 NAN
#define LOWEST_i8 INT8_MIN
#define LOWEST_u8 0
#define LOWEST_i16 INT16_MIN
#define LOWEST_i32 INT32_MIN
#define LOWEST_i64 INT64_MIN
#define LOWEST_f16 (-INFINITY)
#define LOWEST_bf16 (-INFINITY)
#define LOWEST_f32 (-INFINITY)
#define LOWEST_f64 (-INFINITY)
#define HIGHEST_i8 INT8_MAX
#define HIGHEST_u8 UINT8_MAX
#define HIGHEST_i16 INT16_MAX
#define HIGHEST_i32 INT32_MAX
#define HIGHEST_i64 INT64_MAX
#define HIGHEST_f16 INFINITY
#define HIGHEST_bf16 INFINITY
#define HIGHEST_f32 INFINITY
#define HIGHEST_f64 INFINITY
#define PRAGMA(x) _Pragma(#x)
#define LD(D) LOOM_CPU_LD_##D
#define ST(D) LOOM_CPU_ST_##D
#define ISNAN(D, x) ISNAN_##D(x)

/* Hand-aligned: clang-format splits the pragmas inside these macros. */
/* clang-format off */
/* ---- reduction kinds -------------------------------------------------------------------
 * The state of one output is (v, aux): the accumulator, and the NaN flag (max/min) or the
 * best index so far (argmax/argmin; -1 while no element has beaten the start value).
 *   K_INIT(D, v, aux)                 K_ROW(D, v, aux, p, n, s, i0): n elements p[j*s], indices i0+j
 *   K_COL(D, v, aux, p, wn, ks, i):  one reduced step of a tile: v[w] with p[w*ks], index i
 *   K_MERGE(D, v, aux, bv, baux)     K_FINISH(D, v, aux, n): the value stored
 * K_OUT(D) is the output's storage type. */
#define SUM_INIT(D, v, aux) ((v) = 0, (aux) = 0)
#define SUM_ROW(D, v, aux, p, n, s, i0) ARITH_ROW(D, v, p, n, s, +, 0)
#define SUM_COL(D, v, aux, p, wn, ks, i) ARITH_COL(D, v, p, wn, ks, +)
#define SUM_MERGE(D, v, aux, bv, baux) ((v) += (bv))
#define SUM_FINISH(D, v, aux, n) ST(D)(v)
#define SUM_OUT(D) LOOM_CPU_S_##D

#define PROD_INIT(D, v, aux) ((v) = 1, (aux) = 0)
#define PROD_ROW(D, v, aux, p, n, s, i0) ARITH_ROW(D, v, p, n, s, *, 1)
#define PROD_COL(D, v, aux, p, wn, ks, i) ARITH_COL(D, v, p, wn, ks, *)
#define PROD_MERGE(D, v, aux, bv, baux) ((v) *= (bv))
#define PROD_FINISH SUM_FINISH
#define PROD_OUT SUM_OUT

#define MEANF_INIT SUM_INIT
#define MEANF_ROW SUM_ROW
#define MEANF_COL SUM_COL
#define MEANF_MERGE SUM_MERGE
#define MEANF_FINISH(D, v, aux, n) ST(D)((v) / (double)(n))
#define MEANF_OUT SUM_OUT

#define MEANI_INIT SUM_INIT
#define MEANI_ROW SUM_ROW
#define MEANI_COL SUM_COL
#define MEANI_MERGE SUM_MERGE
#define MEANI_FINISH(D, v, aux, n) ST(D)((n) ? (int64_t)(v) / (n) : 0)
#define MEANI_OUT SUM_OUT

/* Integer accumulators are uint64, so sums and products wrap without undefined behaviour. */
#define ARITH_ROW(D, v, p, n, s, OP, ID)                                                    \
  do {                                                                                      \
    SUMT_##D t_ = ID;                                                                       \
    if ((s) == 1) {                                                                         \
      PRAGMA(omp simd reduction(OP : t_)) for (int64_t j_ = 0; j_ < (n); j_++)            \
        t_ OP## = (SUMT_##D)LD(D)((p)[j_]);                                                 \
    } else {                                                                                \
      for (int64_t j_ = 0; j_ < (n); j_++) t_ OP## = (SUMT_##D)LD(D)((p)[j_ * (s)]);        \
    }                                                                                       \
    (v) OP## = t_;                                                                          \
  } while (0)
#define ARITH_COL(D, v, p, wn, ks, OP) \
  _Pragma("omp simd") for (int64_t w_ = 0; w_ < (wn); w_++) (v)[w_] OP## = (SUMT_##D)LD(D)((p)[w_ * (ks)])

/* max/min: along a row the comparison ignores NaN and a flag remembers one, so the loop
 * vectorizes as a max reduction; across a tile a NaN is kept in the value itself (it is never
 * replaced, since no comparison with it is true). */
#define MAX_INIT(D, v, aux) ((v) = LOWEST_##D, (aux) = 0)
#define MAX_ROW(D, v, aux, p, n, s, i0) EXTREME_ROW(D, v, aux, p, n, s, >, max)
#define MAX_COL(D, v, aux, p, wn, ks, i) EXTREME_COL(D, v, aux, p, wn, ks, >)
#define MAX_MERGE(D, v, aux, bv, baux) ((v) = (bv) > (v) || ISNAN(D, bv) ? (bv) : (v), (aux) |= (baux))
#define MAX_FINISH(D, v, aux, n) ST(D)((aux) ? NANV_##D : (v))
#define MAX_OUT SUM_OUT

#define MIN_INIT(D, v, aux) ((v) = HIGHEST_##D, (aux) = 0)
#define MIN_ROW(D, v, aux, p, n, s, i0) EXTREME_ROW(D, v, aux, p, n, s, <, min)
#define MIN_COL(D, v, aux, p, wn, ks, i) EXTREME_COL(D, v, aux, p, wn, ks, <)
#define MIN_MERGE(D, v, aux, bv, baux) ((v) = (bv) < (v) || ISNAN(D, bv) ? (bv) : (v), (aux) |= (baux))
#define MIN_FINISH MAX_FINISH
#define MIN_OUT SUM_OUT

#define EXTREME_ROW(D, v, aux, p, n, s, CMP, RED)                                           \
  do {                                                                                      \
    CT_(D) m_ = (v);                                                                        \
    int nan_ = 0;                                                                           \
    if ((s) == 1) {                                                                         \
      PRAGMA(omp simd reduction(RED : m_) reduction(| : nan_))                              \
      for (int64_t j_ = 0; j_ < (n); j_++) {                                                \
        CT_(D) x_ = LD(D)((p)[j_]);                                                         \
        m_ = x_ CMP m_ ? x_ : m_;                                                           \
        nan_ |= ISNAN(D, x_);                                                               \
      }                                                                                     \
    } else {                                                                                \
      for (int64_t j_ = 0; j_ < (n); j_++) {                                                \
        CT_(D) x_ = LD(D)((p)[j_ * (s)]);                                                   \
        m_ = x_ CMP m_ ? x_ : m_;                                                           \
        nan_ |= ISNAN(D, x_);                                                               \
      }                                                                                     \
    }                                                                                       \
    (v) = m_;                                                                               \
    (aux) |= nan_;                                                                          \
  } while (0)
#define EXTREME_COL(D, v, aux, p, wn, ks, CMP)                                              \
  _Pragma("omp simd") for (int64_t w_ = 0; w_ < (wn); w_++) {                               \
    CT_(D) x_ = LD(D)((p)[w_ * (ks)]);                                                      \
    (v)[w_] = x_ CMP (v)[w_] || ISNAN(D, x_) ? x_ : (v)[w_];                                \
  }

/* argmax/argmin: the state starts at the type's lowest (highest) value with no index (-1)
 * and moves only on a strictly better element, so ties keep the lower index; once the best
 * is NaN it stays (the first NaN). No index at the end means every element equals the start
 * value, and the first one, index 0, is the answer. */
#define ARGMAX_INIT(D, v, aux) ((v) = LOWEST_##D, (aux) = -1)
#define ARGMAX_ROW(D, v, aux, p, n, s, i0) ARG_ROW(D, v, aux, p, n, s, i0, >, max)
#define ARGMAX_COL(D, v, aux, p, wn, ks, i) ARG_COL(D, v, aux, p, wn, ks, i, >)
#define ARGMAX_MERGE(D, v, aux, bv, baux) ARG_MERGE(D, v, aux, bv, baux, >)
#define ARGMAX_FINISH(D, v, aux, n) ((aux) < 0 ? 0 : (aux))
#define ARGMAX_OUT(D) int64_t

#define ARGMIN_INIT(D, v, aux) ((v) = HIGHEST_##D, (aux) = -1)
#define ARGMIN_ROW(D, v, aux, p, n, s, i0) ARG_ROW(D, v, aux, p, n, s, i0, <, min)
#define ARGMIN_COL(D, v, aux, p, wn, ks, i) ARG_COL(D, v, aux, p, wn, ks, i, <)
#define ARGMIN_MERGE(D, v, aux, bv, baux) ARG_MERGE(D, v, aux, bv, baux, <)
#define ARGMIN_FINISH ARGMAX_FINISH
#define ARGMIN_OUT ARGMAX_OUT

#define ARG_BETTER(D, x, best, CMP) ((x) CMP (best) || ISNAN(D, x))
/* A unit-stride row takes two passes: the best value by a vectorized reduction (with a NaN
 * flag), then the first index holding it. */
#define ARG_ROW(D, v, aux, p, n, s, i0, CMP, RED)                                           \
  do {                                                                                      \
    if (ISNAN(D, v)) break;                                                                 \
    if ((s) == 1) {                                                                         \
      CT_(D) m_ = (v);                                                                      \
      int nan_ = 0;                                                                         \
      int64_t at_ = -1;                                                                     \
      PRAGMA(omp simd reduction(RED : m_) reduction(| : nan_))                              \
      for (int64_t j_ = 0; j_ < (n); j_++) {                                                \
        CT_(D) x_ = LD(D)((p)[j_]);                                                         \
        m_ = x_ CMP m_ ? x_ : m_;                                                           \
        nan_ |= ISNAN(D, x_);                                                               \
      }                                                                                     \
      if (nan_ || m_ CMP (v))                                                               \
        for (int64_t j_ = 0; j_ < (n) && at_ < 0; j_++) {                                   \
          CT_(D) x_ = LD(D)((p)[j_]);                                                       \
          if (nan_ ? ISNAN(D, x_) : x_ == m_) at_ = j_;                                     \
        }                                                                                   \
      if (at_ >= 0) {                                                                       \
        (v) = LD(D)((p)[at_]);                                                              \
        (aux) = (i0) + at_;                                                                 \
      }                                                                                     \
      break;                                                                                \
    }                                                                                       \
    for (int64_t j_ = 0; j_ < (n); j_++) {                                                  \
      CT_(D) x_ = LD(D)((p)[j_ * (s)]);                                                     \
      if (ARG_BETTER(D, x_, v, CMP)) {                                                      \
        (v) = x_;                                                                           \
        (aux) = (i0) + j_;                                                                  \
        if (ISNAN(D, x_)) break;                                                            \
      }                                                                                     \
    }                                                                                       \
  } while (0)
#define ARG_COL(D, v, aux, p, wn, ks, i, CMP)                                               \
  _Pragma("omp simd") for (int64_t w_ = 0; w_ < (wn); w_++) {                               \
    CT_(D) x_ = LD(D)((p)[w_ * (ks)]);                                                      \
    bool take_ = !ISNAN(D, (v)[w_]) && ARG_BETTER(D, x_, (v)[w_], CMP);                     \
    (v)[w_] = take_ ? x_ : (v)[w_];                                                         \
    (aux)[w_] = take_ ? (i) : (aux)[w_];                                                    \
  }
#define ARG_MERGE(D, v, aux, bv, baux, CMP)                                                 \
  do {                                                                                      \
    if ((baux) >= 0 && ((aux) < 0 || (!ISNAN(D, v) && ARG_BETTER(D, bv, v, CMP)))) {       \
      (v) = (bv);                                                                           \
      (aux) = (baux);                                                                       \
    }                                                                                       \
  } while (0)

/* clang-format on */

/* ---- the generated kernels ------------------------------------------------------------
 * NAME_span: one output's state over reduced positions [lo, hi) from base.
 * NAME_tile: the states of wn outputs (a tile) over reduced positions [lo, hi).
 * NAME_run:  the schedule. */
#define DEF_REDUCE(D, E, OP, KIND, AT)                                                                     \
  static inline void OP##_##D##_span(const rplan *P, const LOOM_CPU_S_##D *base, int64_t lo, int64_t hi,   \
                                     AT *vp, int64_t *auxp) {                                              \
    const loom__cpu_nest *R = &P->red;                                                                     \
    int64_t s = loom__cpu_inner_stride(R, 0);                                                              \
    AT v = *vp;                                                                                            \
    int64_t aux = *auxp;                                                                                   \
    if (lo >= hi) return;                                                                                  \
    if (R->rank == 1) {                                                                                    \
      KIND##_ROW(D, v, aux, base + lo * s, hi - lo, s, lo);                                                \
    } else {                                                                                               \
      loom__cpu_cursor c;                                                                                  \
      loom__cpu_cursor_init(R, &c, lo);                                                                    \
      for (int64_t pos = lo; pos < hi;) {                                                                  \
        int64_t n = loom__cpu_cursor_span(R, &c, hi - pos);                                                \
        KIND##_ROW(D, v, aux, base + loom__cpu_cursor_off(R, &c, 0), n, s, pos);                           \
        pos += n;                                                                                          \
        loom__cpu_cursor_next(R, &c, n);                                                                   \
      }                                                                                                    \
    }                                                                                                      \
    *vp = v;                                                                                               \
    *auxp = aux;                                                                                           \
  }                                                                                                        \
  static void OP##_##D##_tile(const rplan *P, const LOOM_CPU_S_##D *base, int64_t wn, int64_t lo,          \
                              int64_t hi, AT *v, int64_t *aux) {                                           \
    const loom__cpu_nest *R = &P->red;                                                                     \
    int64_t s = loom__cpu_inner_stride(R, 0), ks = P->ks;                                                  \
    (void)aux; /* sums and products keep no index or flag */                                               \
    if (lo >= hi) return;                                                                                  \
    loom__cpu_cursor c;                                                                                    \
    loom__cpu_cursor_init(R, &c, lo);                                                                      \
    for (int64_t pos = lo; pos < hi;) {                                                                    \
      int64_t n = loom__cpu_cursor_span(R, &c, hi - pos);                                                  \
      const LOOM_CPU_S_##D *row = base + loom__cpu_cursor_off(R, &c, 0);                                   \
      for (int64_t j = 0; j < n; j++) {                                                                    \
        const LOOM_CPU_S_##D *p = row + j * s;                                                             \
        if (ks == 1) {                                                                                     \
          KIND##_COL(D, v, aux, p, wn, 1, pos + j);                                                        \
        } else {                                                                                           \
          KIND##_COL(D, v, aux, p, wn, ks, pos + j);                                                       \
        }                                                                                                  \
      }                                                                                                    \
      pos += n;                                                                                            \
      loom__cpu_cursor_next(R, &c, n);                                                                     \
    }                                                                                                      \
  }                                                                                                        \
  static void OP##_##D##_rows(const rplan *P, int64_t lo, int64_t hi) {                                    \
    const LOOM_CPU_S_##D *in = (const LOOM_CPU_S_##D *)P->in;                                              \
    KIND##_OUT(D) *out = (KIND##_OUT(D) *)P->out;                                                          \
    const loom__cpu_nest *K = &P->kept;                                                                    \
    int64_t ks = loom__cpu_inner_stride(K, 0);                                                             \
    loom__cpu_cursor c;                                                                                    \
    loom__cpu_cursor_init(K, &c, lo);                                                                      \
    for (int64_t pos = lo; pos < hi;) {                                                                    \
      int64_t n = loom__cpu_cursor_span(K, &c, hi - pos);                                                  \
      const LOOM_CPU_S_##D *row = in + loom__cpu_cursor_off(K, &c, 0);                                     \
      for (int64_t j = 0; j < n; j++) {                                                                    \
        AT v;                                                                                              \
        int64_t aux;                                                                                       \
        KIND##_INIT(D, v, aux);                                                                            \
        OP##_##D##_span(P, row + j * ks, 0, P->n_red, &v, &aux);                                           \
        out[pos + j] = KIND##_FINISH(D, v, aux, P->n_red);                                                 \
      }                                                                                                    \
      pos += n;                                                                                            \
      loom__cpu_cursor_next(K, &c, n);                                                                     \
    }                                                                                                      \
  }                                                                                                        \
  static void OP##_##D##_split(const rplan *P, int64_t o) {                                                \
    const LOOM_CPU_S_##D *base = (const LOOM_CPU_S_##D *)P->in + kept_offset(&P->kept, P->kept.rank, o);   \
    AT v[MAX_CHUNKS];                                                                                      \
    int64_t aux[MAX_CHUNKS];                                                                               \
    int32_t chunks = P->chunks;                                                                            \
    _Pragma("omp parallel for schedule(static)") for (int32_t c = 0; c < chunks; c++) {                    \
      KIND##_INIT(D, v[c], aux[c]);                                                                        \
      OP##_##D##_span(P, base, chunk_bound(P->n_red, chunks, c), chunk_bound(P->n_red, chunks, c + 1),     \
                      &v[c], &aux[c]);                                                                     \
    }                                                                                                      \
    for (int32_t c = 1; c < chunks; c++) KIND##_MERGE(D, v[0], aux[0], v[c], aux[c]);                      \
    ((KIND##_OUT(D) *)P->out)[o] = KIND##_FINISH(D, v[0], aux[0], P->n_red);                               \
  }                                                                                                        \
  /* Tile t: outputs [o, o + wn) and the input they start from. */                                         \
  static int64_t OP##_##D##_tile_at(const rplan *P, int64_t t, const LOOM_CPU_S_##D **base, int64_t *wn) { \
    int64_t q = t / P->tiles_per, j0 = t % P->tiles_per * TILE;                                            \
    *wn = LOOM_MIN(TILE, P->kdim - j0);                                                                    \
    *base = (const LOOM_CPU_S_##D *)P->in + kept_offset(&P->kept, P->kept.rank - 1, q) + j0 * P->ks;       \
    return q * P->kdim + j0;                                                                               \
  }                                                                                                        \
  static void OP##_##D##_cols(const rplan *P, int64_t t) {                                                 \
    const LOOM_CPU_S_##D *base;                                                                            \
    int64_t wn, o = OP##_##D##_tile_at(P, t, &base, &wn);                                                  \
    AT v[TILE];                                                                                            \
    int64_t aux[TILE];                                                                                     \
    for (int64_t w = 0; w < wn; w++) KIND##_INIT(D, v[w], aux[w]);                                         \
    OP##_##D##_tile(P, base, wn, 0, P->n_red, v, aux);                                                     \
    KIND##_OUT(D) *out = (KIND##_OUT(D) *)P->out + o;                                                      \
    for (int64_t w = 0; w < wn; w++) out[w] = KIND##_FINISH(D, v[w], aux[w], P->n_red);                    \
  }                                                                                                        \
  /* Each chunk's partial tile lives on its thread's stack; the merges run in chunk order                  \
   * (omp ordered), so the result does not depend on the number of threads. */                             \
  static void OP##_##D##_cols_split(const rplan *P, int64_t t) {                                           \
    const LOOM_CPU_S_##D *base;                                                                            \
    int64_t wn, o = OP##_##D##_tile_at(P, t, &base, &wn);                                                  \
    AT v[TILE];                                                                                            \
    int64_t aux[TILE];                                                                                     \
    int32_t chunks = P->chunks;                                                                            \
    for (int64_t w = 0; w < wn; w++) KIND##_INIT(D, v[w], aux[w]);                                         \
    (void)aux;                                                                                             \
    _Pragma("omp parallel for ordered schedule(static, 1)") for (int32_t c = 0; c < chunks; c++) {         \
      AT pv[TILE];                                                                                         \
      int64_t pa[TILE];                                                                                    \
      for (int64_t w = 0; w < wn; w++) KIND##_INIT(D, pv[w], pa[w]);                                       \
      OP##_##D##_tile(P, base, wn, chunk_bound(P->n_red, chunks, c), chunk_bound(P->n_red, chunks, c + 1), \
                      pv, pa);                                                                             \
      _Pragma("omp ordered") for (int64_t w = 0; w < wn; w++) KIND##_MERGE(D, v[w], aux[w], pv[w], pa[w]); \
    }                                                                                                      \
    KIND##_OUT(D) *out = (KIND##_OUT(D) *)P->out + o;                                                      \
    for (int64_t w = 0; w < wn; w++) out[w] = KIND##_FINISH(D, v[w], aux[w], P->n_red);                    \
  }                                                                                                        \
  static void OP##_##D##_empty(const rplan *P) {                                                           \
    AT v;                                                                                                  \
    int64_t aux;                                                                                           \
    KIND##_INIT(D, v, aux);                                                                                \
    (void)v;                                                                                               \
    (void)aux;                                                                                             \
    KIND##_OUT(D) *out = (KIND##_OUT(D) *)P->out;                                                          \
    for (int64_t o = 0; o < P->n_out; o++) out[o] = KIND##_FINISH(D, v, aux, 0);                           \
  }                                                                                                        \
  static void OP##_##D##_run(const rplan *P) {                                                             \
    if (P->n_red == 0) {                                                                                   \
      OP##_##D##_empty(P);                                                                                 \
      return;                                                                                              \
    }                                                                                                      \
    switch (P->path) {                                                                                     \
      case PATH_ROWS: {                                                                                    \
        int64_t per = LOOM_MAX(1, LOOM_CPU_BLOCK / P->n_red);                                              \
        int64_t blocks = (P->n_out + per - 1) / per;                                                       \
        _Pragma("omp parallel for schedule(static) if (blocks > 1)") for (int64_t b = 0; b < blocks; b++)  \
            OP##_##D##_rows(P, b *per, LOOM_MIN(P->n_out, (b + 1) * per));                                 \
        break;                                                                                             \
      }                                                                                                    \
      case PATH_SPLIT:                                                                                     \
        for (int64_t o = 0; o < P->n_out; o++) OP##_##D##_split(P, o);                                     \
        break;                                                                                             \
      case PATH_COLS: {                                                                                    \
        int64_t tiles = P->n_tiles;                                                                        \
        _Pragma("omp parallel for schedule(static) if (tiles > 1)") for (int64_t t = 0; t < tiles; t++)    \
            OP##_##D##_cols(P, t);                                                                         \
        break;                                                                                             \
      }                                                                                                    \
      default:                                                                                             \
        for (int64_t t = 0; t < P->n_tiles; t++) OP##_##D##_cols_split(P, t);                              \
    }                                                                                                      \
  }

/* One line per dtype group reads better than clang-format's wrapping. */
/* clang-format off */
#define REDUCE_KERNELS(M)                                                                   \
  LOOM_CPU_REALS(M, REDUCE_SUM, SUM, SUMT) LOOM_CPU_COMPLEX(M, REDUCE_SUM, SUM, SUMT)       \
  LOOM_CPU_REALS(M, REDUCE_PROD, PROD, SUMT) LOOM_CPU_COMPLEX(M, REDUCE_PROD, PROD, SUMT)   \
  LOOM_CPU_FLOATS(M, REDUCE_MEAN, MEANF, SUMT) LOOM_CPU_COMPLEX(M, REDUCE_MEAN, MEANF, SUMT) \
  LOOM_CPU_INTS(M, REDUCE_MEAN, MEANI, SUMT)                                                \
  LOOM_CPU_REALS(M, REDUCE_MAX, MAX, CT) LOOM_CPU_REALS(M, REDUCE_MIN, MIN, CT)             \
  LOOM_CPU_REALS(M, ARGMAX, ARGMAX, CT) LOOM_CPU_REALS(M, ARGMIN, ARGMIN, CT)
/* clang-format on */

#define CT_i8 int8_t
#define CT_u8 uint8_t
#define CT_i16 int16_t
#define CT_i32 int32_t
#define CT_i64 int64_t
#define CT_f16 float
#define CT_bf16 float
#define CT_f32 float
#define CT_f64 double
#define INST_REDUCE(D, E, OP, KIND, ATK) DEF_REDUCE(D, E, OP, KIND, ATK##_##D)
REDUCE_KERNELS(INST_REDUCE)

typedef void (*reduce_fn)(const rplan *P);
#define TAB_REDUCE(D, E, OP, KIND, ATK) [LOOM_OP_##OP][LOOM_##E] = OP##_##D##_run,
static const reduce_fn reduce_kernels[LOOM_OP_COUNT][LOOM_DTYPE_COUNT] = {REDUCE_KERNELS(TAB_REDUCE)};

/* ---- planning ----------------------------------------------------------------------------- */

static int64_t abs64(int64_t x) {
  return x < 0 ? -x : x;
}

static void choose_path(rplan *P) {
  const loom__cpu_nest *K = &P->kept, *R = &P->red;
  int64_t ks = loom__cpu_inner_stride(K, 0), rs = loom__cpu_inner_stride(R, 0);
  int64_t kdim = K->dims[K->rank - 1];
  if (kdim > 1 && R->dims[R->rank - 1] > 1 && abs64(ks) < abs64(rs)) {
    P->kdim = kdim;
    P->ks = ks;
    P->tiles_per = (kdim + TILE - 1) / TILE;
    P->n_tiles = P->n_out / kdim * P->tiles_per;
    bool split = P->n_tiles < MAX_CHUNKS && P->n_red >= 2048;
    P->path = split ? PATH_COLS_SPLIT : PATH_COLS;
    P->chunks = (int32_t)LOOM_MIN(MAX_CHUNKS, P->n_red / 1024);
  } else {
    bool split = P->n_out < MAX_CHUNKS && P->n_red >= 4 * LOOM_CPU_BLOCK;
    P->path = split ? PATH_SPLIT : PATH_ROWS;
    P->chunks = (int32_t)LOOM_MIN(MAX_CHUNKS, P->n_red / (2 * LOOM_CPU_BLOCK));
  }
}

/* Splits the input view by `reduced` (a bit per axis) into the plan's two nests. */
static void build_plan(const loom__view *in, uint32_t reduced, const loom__view *out, rplan *P) {
  int64_t kd[LOOM_MAX_RANK], kst[LOOM_MAX_RANK], rd[LOOM_MAX_RANK], rst[LOOM_MAX_RANK];
  int32_t nk = 0, nr = 0;
  for (int32_t d = 0; d < in->type.rank; d++) {
    if (reduced & (1u << d)) {
      rd[nr] = in->type.dims[d];
      rst[nr++] = in->strides[d];
    } else {
      kd[nk] = in->type.dims[d];
      kst[nk++] = in->strides[d];
    }
  }
  loom__sort_by_stride(nr, rd, rst);
  memset(P, 0, sizeof *P);
  loom__cpu_nest_init(&P->kept, nk, kd);
  loom__cpu_nest_add(&P->kept, NULL, kst);
  loom__cpu_nest_init(&P->red, nr, rd);
  loom__cpu_nest_add(&P->red, NULL, rst);
  P->n_out = P->kept.total;
  P->n_red = P->red.total;
  loom__cpu_nest_coalesce(&P->kept);
  loom__cpu_nest_coalesce(&P->red);
  P->in = (const char *)in->data;
  P->out = (char *)out->data;
  choose_path(P);
}

/* The reduced axes of op as a bit mask; the output's shape must be what they leave. */
static loom_status reduced_axes(const loom__op *op, const loom__view *in, const loom__view *out,
                                uint32_t *mask) {
  const loom_type *t = &in->type;
  const char *name = loom_op_name(op->kind);
  bool arg = op->kind == LOOM_OP_ARGMAX || op->kind == LOOM_OP_ARGMIN;
  int32_t n = arg ? 1 : op->attrs.axes.count;
  *mask = 0;
  for (int32_t i = 0; i < n; i++) {
    int32_t axis;
    if (!loom__axis_normalize(arg ? op->attrs.axis : op->attrs.axes.v[i], t->rank, &axis) ||
        (*mask & (1u << axis)))
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: %s: bad axes for rank %d", name, (int)t->rank);
    *mask |= 1u << axis;
  }
  bool keep = !arg && (op->attrs.set & LOOM_ATTR_KEEPDIMS) && op->attrs.keepdims;
  int32_t r = 0;
  bool ok = true;
  for (int32_t d = 0; d < t->rank && ok; d++) {
    if ((*mask & (1u << d)) && !keep) continue;
    int64_t want = (*mask & (1u << d)) ? 1 : t->dims[d];
    ok = r < out->type.rank && out->type.dims[r++] == want;
  }
  if (!ok || r != out->type.rank) {
    char a[LOOM_TYPE_STRING_MAX], b[LOOM_TYPE_STRING_MAX];
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: %s: output %s does not match input %s", name,
                       loom_type_format(&out->type, a, sizeof a), loom_type_format(t, b, sizeof b));
  }
  return LOOM_OK;
}

static loom_status run_reduce(const loom__op *op, const loom__view *in, const loom__view *out) {
  loom_dtype dt = in->type.dtype;
  bool arg = op->kind == LOOM_OP_ARGMAX || op->kind == LOOM_OP_ARGMIN;
  if (out->type.dtype != (arg ? LOOM_I64 : dt))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: %s: output dtype %s for %s input",
                       loom_op_name(op->kind), loom_dtype_name(out->type.dtype), loom_dtype_name(dt));
  reduce_fn fn = reduce_kernels[op->kind][dt];
  if (!fn) return loom__cpu_unsupported(op, dt);
  uint32_t mask;
  loom_status s = reduced_axes(op, in, out, &mask);
  if (s) return s;
  rplan P;
  build_plan(in, mask, out, &P);
  if (P.n_out == 0) return LOOM_OK;
  bool identity =
      op->kind == LOOM_OP_REDUCE_SUM || op->kind == LOOM_OP_REDUCE_PROD || op->kind == LOOM_OP_REDUCE_MEAN;
  if (P.n_red == 0 && !identity)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: reduction over an empty axis", loom_op_name(op->kind));
  fn(&P);
  return LOOM_OK;
}

loom_status loom__cpu_reduce(const loom_graph *g, const loom__op *op, const loom__view *in,
                             const loom__view *out, void *scratch, int64_t scratch_bytes) {
  /* The accumulators live in registers and on the stack (O(1) per thread), so the scratch
   * the estimator grants (1x the output) is left unused. */
  (void)g;
  (void)scratch;
  (void)scratch_bytes;
  if (op->kind == LOOM_OP_TOPK) return loom__cpu_topk(g, op, in, out);
  return run_reduce(op, in, out);
}
