/* The fused evaluator's kernel sum in one pass, the kmv fast path (cpu_fused_run.h lists the parts):
 * sum_j exp(c max(dot3 + u, lo)) b_j as the distance rewrite writes it (find_kernel_sum) is one
 * loop per block with nothing stored. On x86-64 with AVX2 or AVX-512 (cpu_isa.h) a row's
 * constants are folded once per block so that each pair costs four FMAs, a 2^t with range
 * reduction and one FMA into the sum (the exp2 form below); elsewhere, and for a row whose
 * constants cannot be folded, a portable loop compiled per x86-64 level keeps the unfused ops'
 * roundings with loom__exp_f32 (cpu_vmath.h). docs/ir-fusion.md has the measurements. */
#include "backends/cpu/cpu_fused_run.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_vmath.h"
#include "ir/pattern.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define LOOM_KS_X86 1
#endif

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
 * portable kernel sum dispatches so. */
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

/* ---- the exp2 form (AVX-512 and AVX2) ----
 * e^(me max(v, lo) + ae), v = a1 + av.y +- u, is 2^t with t = L me v + L ae clamped to where
 * L me lo + L ae lies (L = log2 e; me > 0 keeps the maximum, me < 0 makes it a minimum). Folding
 * L me into the row's constants once per row (loom__cfz_kernel_sum_units) leaves per pair, in one
 * vector of columns: four FMAs for t, two clamps, a rounding to n, t - n (exact), five FMAs of 2^(t-n) on
 * [-1/2, 1/2], the scale by 2^n and the FMA into the sum. The loop of ks_loop above keeps the
 * unfused ops' roundings and takes about 22 such ops; the terms here differ from those by the
 * roundings of the folded constants (a few ulp of t, so a relative 1e-6 of a term where the
 * distances are of order 10), inside the suite's tolerance (fused_cpu_kernel_sum,
 * fused_cpu_kmv_against_float64; fused_cpu_exp2_vectors checks the 2^t alone, cpu_vmath.h). */
typedef struct ks_row {
  float c0, c1, c2; /* L me av[k] */
  float cu;         /* u's coefficient: L me, negated where the epilogue subtracts u */
  float a;          /* L (me a1 + ae), plus cu u where u is one scalar */
  float lo, hi;     /* t's clamps, lo <= hi, inside [-152, 129] */
} ks_row;

/* Below -152 every lane's 2^t rounds to 0 and from 129 on to infinity (2^(t-n) is at least
 * 0.7), so the clamps change no result; they keep t - n finite. */
#define KS_T_MIN (-152.0)
#define KS_T_MAX 129.0

/* The row's constants, or false where the fold would not keep the unfused results (a scale me
 * of 0, infinity or NaN, or a constant that overflows); such a row runs ks_loop. */
static bool ks_fold(const float *av, float a1, bool uvec, float su, bool sub, float lo, float me, float ae,
                    ks_row *r) {
  const double L = 1.4426950408889634074, s = L * (double)me;
  double cu = sub ? -s : s, a = s * (double)a1 + L * (double)ae, bound = s * (double)lo + L * (double)ae;
  if (!uvec) a += cu * (double)su;
  *r = (ks_row){(float)(s * av[0]), (float)(s * av[1]), (float)(s * av[2]), (float)cu, (float)a, 0, 0};
  /* the bound is a maximum of t where me > 0 and a minimum where me < 0 (lo = -inf: none) */
  double tlo = s > 0 && bound > KS_T_MIN ? bound : KS_T_MIN,
         thi = s < 0 && bound < KS_T_MAX ? bound : KS_T_MAX;
  r->lo = (float)(tlo < KS_T_MAX ? tlo : KS_T_MAX); /* ternaries: fmin and fmax are calls here */
  r->hi = (float)(thi > KS_T_MIN ? thi : KS_T_MIN);
  return s != 0 && isfinite(s) && isfinite(r->a) && isfinite(r->cu) && isfinite(r->c0) && isfinite(r->c1) &&
         isfinite(r->c2);
}

#ifdef LOOM_KS_X86
/* Sixteen terms at column i added to acc (m: the lanes that exist; the others keep acc, since
 * a term of a missing column may be infinite). max(lo, t) and min(hi, t) return t when it is
 * NaN (maxps and minps give their second operand then). */
__attribute__((target("avx512f"))) static inline __m512 ks_add512(const float *const *bp, const ks_row *r,
                                                                  const float *u, bool uvec, const float *b,
                                                                  int64_t i, __mmask16 m, __m512 acc) {
  __m512 t = _mm512_set1_ps(r->a);
  if (uvec) t = _mm512_fmadd_ps(_mm512_set1_ps(r->cu), _mm512_maskz_loadu_ps(m, u + i), t);
  t = _mm512_fmadd_ps(_mm512_set1_ps(r->c0), _mm512_maskz_loadu_ps(m, bp[0] + i), t);
  t = _mm512_fmadd_ps(_mm512_set1_ps(r->c1), _mm512_maskz_loadu_ps(m, bp[1] + i), t);
  t = _mm512_fmadd_ps(_mm512_set1_ps(r->c2), _mm512_maskz_loadu_ps(m, bp[2] + i), t);
  t = _mm512_min_ps(_mm512_set1_ps(r->hi), _mm512_max_ps(_mm512_set1_ps(r->lo), t));
  return _mm512_mask3_fmadd_ps(loom__exp2_f32x16(t), _mm512_maskz_loadu_ps(m, b + i), acc, m);
}

__attribute__((target("avx512f"), always_inline)) static inline double ks_sum512(const float *const *bp,
                                                                                 const ks_row *r,
                                                                                 const float *u, bool uvec,
                                                                                 const float *b, int64_t n) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  int64_t j = 0;
  for (; j + 64 <= n; j += 64)
    for (int v = 0; v < 4; v++) acc[v] = ks_add512(bp, r, u, uvec, b, j + 16 * v, (__mmask16)0xffff, acc[v]);
  /* the last columns, sixteen at a time under a mask, into one accumulator: an index that varies
   * would keep every accumulator in memory through the main loop */
  for (; j < n; j += 16)
    acc[0] = ks_add512(bp, r, u, uvec, b, j, (__mmask16)(n - j >= 16 ? 0xffff : (1u << (n - j)) - 1), acc[0]);
  float lanes[SUM_LANES];
  for (int v = 0; v < 4; v++) _mm512_storeu_ps(lanes + 16 * v, acc[v]);
  return fold_lanes_float(lanes);
}

__attribute__((target("avx512f"))) static double kernel_sum_avx512(const float *const *bp, const ks_row *r,
                                                                   const float *u, const float *b,
                                                                   int64_t n) {
  return u ? ks_sum512(bp, r, u, true, b, n) : ks_sum512(bp, r, NULL, false, b, n);
}

/* Eight terms at column i added to acc; m: the lanes that exist (all ones, or a mask whose other
 * lanes read nothing and add nothing). */
__attribute__((target("avx2,fma"))) static inline __m256 ks_add256(const float *const *bp, const ks_row *r,
                                                                   const float *u, bool uvec, const float *b,
                                                                   int64_t i, __m256i m, bool full,
                                                                   __m256 acc) {
#define KS_LOAD256(p) (full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m))
  __m256 t = _mm256_set1_ps(r->a);
  if (uvec) t = _mm256_fmadd_ps(_mm256_set1_ps(r->cu), KS_LOAD256(u + i), t);
  t = _mm256_fmadd_ps(_mm256_set1_ps(r->c0), KS_LOAD256(bp[0] + i), t);
  t = _mm256_fmadd_ps(_mm256_set1_ps(r->c1), KS_LOAD256(bp[1] + i), t);
  t = _mm256_fmadd_ps(_mm256_set1_ps(r->c2), KS_LOAD256(bp[2] + i), t);
  t = _mm256_min_ps(_mm256_set1_ps(r->hi), _mm256_max_ps(_mm256_set1_ps(r->lo), t));
  __m256 e = loom__exp2_f32x8(t);
  if (!full) e = _mm256_and_ps(e, _mm256_castsi256_ps(m));
  return _mm256_fmadd_ps(e, KS_LOAD256(b + i), acc);
#undef KS_LOAD256
}

__attribute__((target("avx2,fma"), always_inline)) static inline double ks_sum256(const float *const *bp,
                                                                                  const ks_row *r,
                                                                                  const float *u, bool uvec,
                                                                                  const float *b, int64_t n) {
  /* four accumulators (32 columns a step): with eight, the sixteen ymm registers no longer hold
   * the row's constants and GCC keeps the accumulators in memory */
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  const __m256i ones = _mm256_set1_epi32(-1);
  int64_t j = 0;
  for (; j + 32 <= n; j += 32)
    for (int v = 0; v < 4; v++) acc[v] = ks_add256(bp, r, u, uvec, b, j + 8 * v, ones, true, acc[v]);
  for (; j < n; j += 8) { /* the last columns, eight at a time under a mask, as ks_sum512 */
    __m256i m =
        _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - j)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    acc[0] = ks_add256(bp, r, u, uvec, b, j, m, false, acc[0]);
  }
  float lanes[SUM_LANES] = {0};
  for (int v = 0; v < 4; v++) _mm256_storeu_ps(lanes + 8 * v, acc[v]);
  return fold_lanes_float(lanes);
}

__attribute__((target("avx2,fma"))) static double kernel_sum_avx2(const float *const *bp, const ks_row *r,
                                                                  const float *u, const float *b, int64_t n) {
  return u ? ks_sum256(bp, r, u, true, b, n) : ks_sum256(bp, r, NULL, false, b, n);
}
#endif

bool loom__cpu_ks_portable = false, loom__cpu_ks_taken = false, loom__cpu_ks_wide_taken = false;

KERNEL double kernel_sum_f32_body(const float *const *bp, const float *av, float a1, const float *u, float su,
                                  bool sub, float lo, float me, float ae, const float *b, int64_t n) {
  KS_DISPATCH(ks_loop);
}
ISA_VARIANTS(double, kernel_sum_f32,
             (const float *const *bp, const float *av, float a1, const float *u, float su, bool sub, float lo,
              float me, float ae, const float *b, int64_t n),
             (bp, av, a1, u, su, sub, lo, me, ae, b, n))

/* One row of a kernel sum at one block as eval_block finds it (find_kernel_sum): the leaves (a
 * packed block once for all rows), the dot's rows and the absorbed ops' scalars. */
typedef struct ks_args {
  const float *bp[MAX_K], *u, *b;
  float av[MAX_K], a1, su, lo, me, ae;
  bool uvec;
} ks_args;

static void ks_load(const plan *P, work *w, const int64_t *idx, int64_t n, ks_args *k) {
  loom__cfz_load_leaves(P, w, idx, n);
  loom__cfz_dot_rows_f32(P, w, loom__producer(P->g, P->ks_dot), idx, n, k->bp, k->av);
  k->a1 = -0.0f, k->me = 1, k->ae = -0.0f;
  if (P->ks_via >= 0) { /* an add or a sub of a scalar (find_kernel_sum): m is 1 */
    loom__cfz_absorbed_op(P, w, loom__producer(P->g, P->ks_via));
    k->a1 = (float)w->tf[P->ks_via].a;
  }
  if (P->ks_aff >= 0) {
    loom__cfz_absorbed_op(P, w, loom__producer(P->g, P->ks_aff));
    k->me = (float)w->tf[P->ks_aff].m;
    k->ae = (float)w->tf[P->ks_aff].a;
  }
  k->lo = P->ks_lo >= 0 ? *(const float *)w->ptr[P->ks_lo] : -INFINITY;
  k->u = w->ptr[P->ks_u];
  k->b = w->ptr[P->prod_b];
  k->uvec = P->v[P->ks_u].vec;
  k->su = k->uvec ? 0 : k->u[0];
}

/* The vector width of the exp2 form this plan runs (16 with AVX-512, 8 with AVX2), or 0 for the
 * portable loop (level 1, or loom__cpu_ks_portable set by a test). */
static int ks_width(const plan *P) {
#ifdef LOOM_KS_X86
  if (loom__cpu_ks_portable) return 0;
  return P->ks_avx512 ? 16 : loom__cpu_isa_level() >= 3 ? 8 : 0;
#else
  (void)P;
  return 0;
#endif
}

/* The row's constants for the exp2 form where it applies (true), from a loaded row. */
static bool ks_prepare(const plan *P, int width, const ks_args *k, ks_row *r) {
  return width && !isnan(k->lo) && ks_fold(k->av, k->a1, k->uvec, k->su, P->ks_sub, k->lo, k->me, k->ae, r);
}

/* The sum over a block of one row: the exp2 form with constants r (prepared), else the loop that
 * keeps the unfused roundings. */
static double ks_block(const plan *P, int width, const ks_args *k, const ks_row *r, bool prepared,
                       int64_t n) {
#ifdef LOOM_KS_X86
  if (prepared)
    return width == 16 ? kernel_sum_avx512(k->bp, r, k->uvec ? k->u : NULL, k->b, n)
                       : kernel_sum_avx2(k->bp, r, k->uvec ? k->u : NULL, k->b, n);
#endif
  if (isnan(k->lo)) return NAN; /* every term is the maximum's NaN */
  return kernel_sum_f32(k->bp, k->av, k->a1, k->uvec ? k->u : NULL, k->su, P->ks_sub, k->lo, k->me, k->ae,
                        k->b, n);
}

/* Whether every block the kernel sum reads along the columns (u, b: the dot's operands are read
 * through the dot) is the same for each kept row of a group, so the rows after the first can run
 * on the first one's blocks. */
static bool ks_columns_shared(const plan *P) {
  const loom__op *dot = loom__producer(P->g, P->ks_dot);
  for (int32_t l = 0; l < P->n_leaves; l++) {
    int32_t id = P->leaves[l];
    const fvalue *f = &P->v[id];
    if (!f->vec || id == dot->inputs[0] || id == dot->inputs[1]) continue;
    for (int32_t q = 0; q < P->nk; q++)
      if (f->strides[P->kax[q]] != 0) return false;
  }
  return true;
}

void loom__cfz_kernel_sum_units(const plan *P, work *w, lane *lanes, int64_t ko0, int64_t rows, int64_t u0,
                                int64_t u1) {
  ks_row rc[KS_ROW_GROUP];
  bool prepared[KS_ROW_GROUP];
  ks_args first, k; /* the block's first row (its block pointers serve the others), a row loaded */
  int width = ks_width(P);
  bool shared = ks_columns_shared(P);
  int64_t ro_loaded = -1;
  for (int64_t u = u0; u < u1; u++) {
    int64_t ro = u / P->nb, n = LOOM_MIN(FB, P->M - (u % P->nb) * FB), idx[LOOM_MAX_RANK];
    /* Each row's scalars once per reduced row ro (its first block), then only the first row
     * loads each further block, and the others run on its blocks with their own constants. */
    bool fresh = ro != ro_loaded;
    ro_loaded = ro;
    for (int64_t kk = 0; kk < rows; kk++) {
      if (!fresh && kk > 0 && shared && prepared[kk]) {
        lanes[kk].v.d += ks_block(P, width, &first, &rc[kk], true, n);
        continue;
      }
      loom__cfz_unit_index(P, ko0 + kk, u, idx);
      ks_load(P, w, idx, n, &k);
      prepared[kk] = ks_prepare(P, width, &k, &rc[kk]);
      if (kk == 0) first = k;
      lanes[kk].v.d += ks_block(P, width, &k, &rc[kk], prepared[kk], n);
    }
  }
}
