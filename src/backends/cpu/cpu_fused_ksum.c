/* The fused evaluator's kernel sum in one pass, the kmv fast path (cpu_fused_run.h lists the parts):
 * sum_j exp(c max(dot3 + u, lo)) b_j as the distance rewrite writes it (find_kernel_sum) is one
 * loop per block with nothing stored, its exp inline (cpu_vmath.h), in a portable form compiled
 * per x86-64 level and an AVX-512 one through vscalefps. docs/ir-fusion.md has the measurements
 * behind the choice of exp. */
#include "backends/cpu/cpu_fused_run.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_vmath.h"
#include "ir/pattern.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define LOOM_KS_AVX512 1
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
/* The same loop written for AVX-512 (faster than the x86-64-v4 clone of the portable one:
 * docs/ir-fusion.md, "The cpu evaluator"): e^x = (1 + p(r)) 2^n with n rounded by vrndscaleps and 2^n applied
 * by vscalefps, which overflows to infinity, rounds once below the normal range and carries NaN, where the
 * portable exp needs seven integer ops, two multiplies and a select. max(c, x) and min(c, x) return x when it
 * is NaN (maxps gives its second operand then), so the clamps keep NaN too. The polynomial and its reduction
 * are loom__exp_f32's: the results are within 2 ulp of e^x as there (fused_cpu_kernel_sum checks both kernels
 * against f64). */
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

bool loom__cpu_ks_portable = false, loom__cpu_ks_taken = false, loom__cpu_ks_wide_taken = false;

KERNEL double kernel_sum_f32_body(const float *const *bp, const float *av, float a1, const float *u, float su,
                                  bool sub, float lo, float me, float ae, const float *b, int64_t n) {
  KS_DISPATCH(ks_loop);
}
ISA_VARIANTS(double, kernel_sum_f32,
             (const float *const *bp, const float *av, float a1, const float *u, float su, bool sub, float lo,
              float me, float ae, const float *b, int64_t n),
             (bp, av, a1, u, su, sub, lo, me, ae, b, n))

/* The sum over one block of a kernel sum's row (find_kernel_sum): the leaves, the dot's rows
 * and the absorbed ops' scalars as eval_block finds them, then one loop. */
double loom__cfz_kernel_sum_block(const plan *P, work *w, const int64_t *idx, int64_t n) {
  loom__cfz_load_leaves(P, w, idx, n);
  const float *bp[MAX_K];
  float av[MAX_K];
  loom__cfz_dot_rows_f32(P, w, loom__producer(P->g, P->ks_dot), idx, n, bp, av);
  float a1 = -0.0f, me = 1, ae = -0.0f;
  if (P->ks_via >= 0) { /* an add or a sub of a scalar (find_kernel_sum): m is 1 */
    loom__cfz_absorbed_op(P, w, loom__producer(P->g, P->ks_via));
    a1 = (float)w->tf[P->ks_via].a;
  }
  if (P->ks_aff >= 0) {
    loom__cfz_absorbed_op(P, w, loom__producer(P->g, P->ks_aff));
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
