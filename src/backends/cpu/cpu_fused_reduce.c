/* The fused evaluator's final op (cpu_fused_run.h lists the parts): each block of the folded value
 * is folded into per-lane state (a row's accumulator where the last axis is reduced, one per
 * column where it is kept), as cpu_reduce.c accumulates: floats in double, integers in wrapping
 * uint64; argmax/argmin/topk keep its order (NaN ranks above every number, ties go to the lower
 * index). Then the threads' partial states are merged and the lanes written out. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_fused_run.h"

/* ---- folding ---- */

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

void loom__cfz_state_reset(const plan *P, state *st, int64_t n) {
  st->n = n;
  for (int64_t l = 0; st->acc && l < n; l++) st->acc[l] = 0;
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
        } else if (!any) { /* the run's least number against the root: NaN never enters */               \
          T lo = (T)INFINITY;                                                                            \
          _Pragma("omp simd reduction(min : lo)") for (int64_t q = j; q < end; q++) lo =                 \
              x[q] < lo ? x[q] : lo;                                                                     \
          any = lo <= thr;                                                                               \
        }                                                                                                \
        /* and in a run that has one, only the elements the current root would let in, eight at a        \
         * time for the smallest (a kNN row's run holds one or two that enter) */                        \
        for (int64_t s0 = j; any && s0 < end; s0 += 8) {                                                 \
          int64_t s1 = end - s0 > 8 ? s0 + 8 : end;                                                      \
          if (!P->largest && h[0].v.d == h[0].v.d) {                                                     \
            T m8 = (T)INFINITY;                                                                          \
            for (int64_t q = s0; q < s1; q++) m8 = x[q] < m8 ? x[q] : m8;                                \
            if (!(m8 <= (T)h[0].v.d)) continue;                                                          \
          }                                                                                              \
          for (int64_t q = s0; q < s1; q++) {                                                            \
            double rq = h[0].v.d;                                                                        \
            T tq = (T)rq; /* the root was widened from T: exact */                                       \
            if (rq != rq || (P->largest ? x[q] >= tq || x[q] != x[q] : x[q] <= tq))                      \
              fold_one(P, L, h, widen(P->fkind, xp, q), j0 + q);                                         \
          }                                                                                              \
        }                                                                                                \
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

/* Sums of a block: SUM_LANES partial sums (cpu_fused_run.h), each of a few dozen terms, added in
 * double at the end; sum_prod_ adds the products x[j] * y[j], each rounded to T as the unfused mul
 * stores it. */
#define DEF_SUMS(T)                                                                        \
  KERNEL double sum_##T##_body(const T *restrict x, int64_t n) {                           \
    T acc[SUM_LANES] = {0};                                                                \
    int64_t j = 0;                                                                         \
    for (; j + SUM_LANES <= n; j += SUM_LANES) {                                           \
      _Pragma("omp simd") for (int l = 0; l < SUM_LANES; l++) acc[l] += x[j + l];          \
    }                                                                                      \
    double s = fold_lanes_##T(acc);                                                        \
    for (; j < n; j++) s += x[j];                                                          \
    return s;                                                                              \
  }                                                                                        \
  ISA_VARIANTS(double, sum_##T, (const T *restrict x, int64_t n), (x, n))                  \
  KERNEL double sum_prod_##T##_body(const T *restrict x, const T *restrict y, int64_t n) { \
    T acc[SUM_LANES] = {0};                                                                \
    int64_t j = 0;                                                                         \
    for (; j + SUM_LANES <= n; j += SUM_LANES) {                                           \
      _Pragma("omp simd") for (int l = 0; l < SUM_LANES; l++) {                            \
        T p = x[j + l] * y[j + l];                                                         \
        acc[l] += p;                                                                       \
      }                                                                                    \
    }                                                                                      \
    double s = fold_lanes_##T(acc);                                                        \
    for (; j < n; j++) s += (T)(x[j] * y[j]);                                              \
    return s;                                                                              \
  }                                                                                        \
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

/* Lanes for up to `lanes` outputs (and topk's heaps); false when out of memory. */
/* Whether the lanes' sums are kept in state.acc. */
static bool dense_sums(const plan *P) {
  return !P->last_red && (P->fin == F_SUM || P->fin == F_MEAN) && P->fkind != K_I64;
}

bool loom__cfz_state_init(const plan *P, state *st, int64_t lanes) {
  st->lanes = malloc(sizeof *st->lanes * (size_t)lanes);
  st->heap = P->fin == F_TOPK && P->k > 0 ? malloc(sizeof *st->heap * (size_t)(lanes * P->k)) : NULL;
  st->acc = dense_sums(P) ? malloc(sizeof *st->acc * (size_t)lanes) : NULL;
  st->n = 0;
  return st->lanes && (st->heap || !(P->fin == F_TOPK && P->k > 0)) && (st->acc || !dense_sums(P));
}

void loom__cfz_state_free(state *st) {
  free(st->lanes);
  free(st->heap);
  free(st->acc);
}

/* Moves the dense sums into the lanes, before they are merged into another state or stored. */
void loom__cfz_state_settle(state *st) {
  for (int64_t l = 0; st->acc && l < st->n; l++) {
    st->lanes[l].v.d += st->acc[l];
    st->acc[l] = 0;
  }
}

KERNEL void fold_row_isa_body(const plan *P, lane *L, entry *h, const void *xp, const void *y, const tfm *tf,
                              int64_t n, int64_t j0) {
  if (P->fkind == K_F32) ROW_REDUCE(float);
  if (P->fkind == K_F64) ROW_REDUCE(double);
  if ((P->fin == F_ARGMAX || P->fin == F_ARGMIN) && P->fkind != K_I64) {
    /* every element was +-inf against the start value: fall through element by element */
  }
  for (int64_t j = 0; j < n; j++) fold_one(P, L, h, widen(P->fkind, xp, j), j0 + j);
}
ISA_VARIANTS_VOID(void, fold_row_isa,
                  (const plan *P, lane *L, entry *h, const void *xp, const void *y, const tfm *tf, int64_t n,
                   int64_t j0),
                  (P, L, h, xp, y, tf, n, j0))

/* Element j of the block into lane j; i is the index along the reduced axis. */
KERNEL void fold_cols_isa_body(const plan *P, state *st, const void *xp, int64_t n, int64_t i) {
  if (st->acc && P->fkind == K_F32) {
    const float *restrict x = xp;
    double *restrict acc = st->acc;
    _Pragma("omp simd") for (int64_t j = 0; j < n; j++) acc[j] += x[j];
    return;
  }
  if (st->acc) {
    const double *restrict x = xp;
    double *restrict acc = st->acc;
    _Pragma("omp simd") for (int64_t j = 0; j < n; j++) acc[j] += x[j];
    return;
  }
  for (int64_t j = 0; j < n; j++)
    fold_one(P, &st->lanes[j], st->heap ? st->heap + j * P->k : NULL, widen(P->fkind, xp, j), i);
}
ISA_VARIANTS_VOID(void, fold_cols_isa, (const plan *P, state *st, const void *xp, int64_t n, int64_t i),
                  (P, st, xp, n, i))

/* Folds a block of n values of the folded value (xp; y the second factor of a product sum, tf the
 * value's absorbed op) into lane L where the last axis is reduced, j0 the block's first index
 * along it; by the kernel of the CPU's x86-64 level. */
void loom__cfz_fold_row(const plan *P, lane *L, entry *h, const void *xp, const void *y, const tfm *tf,
                        int64_t n, int64_t j0) {
  fold_row_isa(P, L, h, xp, y, tf, n, j0);
}

/* Folds a block of n values into lanes 0..n-1 where the last axis is kept, i the index along the
 * reduced axis; by the kernel of the CPU's x86-64 level. */
void loom__cfz_fold_cols(const plan *P, state *st, const void *xp, int64_t n, int64_t i) {
  fold_cols_isa(P, st, xp, n, i);
}

/* Merges src's lanes into dst's (a thread's partial after the threads before it). */
void loom__cfz_state_merge(const plan *P, state *dst, const state *src) {
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

void loom__cfz_store_lane(const plan *P, const lane *L, entry *h, int64_t off) {
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
void loom__cfz_store_block(const plan *P, const void *x, int64_t n, int64_t off) {
  loom_dtype dt = P->out[0].type.dtype;
  char *o = (char *)P->out[0].data;
  if (dt == LOOM_F32 || dt == LOOM_F64 || dt == LOOM_I64) {
    memcpy(o + off * (int64_t)loom_dtype_size(dt), x, (size_t)n * loom_dtype_size(dt));
    return;
  }
  for (int64_t j = 0; j < n; j++)
    store_scalar(o, dt, off + j, widen(P->fkind, x, j), P->fkind == K_F32 ? K_F64 : P->fkind);
}
