/* Vector-friendly f32 math written out, so a loop over it compiles to straight vector code
 * with no call: libmvec's functions are calls through the vector ABI, which clobbers every
 * vector register (accumulators and operands are spilled around each one). Alone over a block
 * (exp times b, summed) this exp took 0.29 ns an element against libmvec's 0.37 on this
 * project's machine (AVX-512); in the one-pass kernel sum, where the call's spills are what
 * cost, the whole product ran about 1.3x faster with it. The fused kernel sums' portable loop
 * (cpu_fused_ksum.c) and the attention (cpu_attention.c) use it; fused_cpu_inline_exp tests its
 * accuracy. The vector 2^t below is the kernel sums' exp on AVX2 and AVX-512. */
#ifndef LOOM_CPU_VMATH_H
#define LOOM_CPU_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* e^x for f32, within 2 ulp of the exact value over the whole range (subnormal results
 * included; the test fused_cpu_inline_exp prints the worst case): x = n ln2 + r with
 * |r| <= ln2 / 2 (Cody-Waite: ln2 in two parts, so r is exact to f32's precision), e^r - 1 by
 * a degree-5 minimax polynomial (the coefficients of Arm's optimized-routines v_expf, 1.45 ulp),
 * then 2^n applied as two powers of two, so results that overflow round to infinity and those
 * below the normal range round once, to the nearest subnormal or zero. A NaN argument is
 * returned as it came; -inf gives 0, +inf infinity. */
static inline float loom__exp_f32(float x) {
  float x0 = x;
  /* written as x86's maxps and minps compute (a > b ? a : b), one instruction each; a NaN
   * becomes -104 here and is given back at the end */
  x = x > -104.0f ? x : -104.0f; /* e^-104 is below half the least subnormal: 0 */
  x = x < 89.0f ? x : 89.0f;     /* e^89 is above the largest float: infinity */
  const float shift = 0x1.8p23f; /* adding it rounds to an integer, kept in the low bits */
  float z = fmaf(x, 0x1.715476p+0f, shift);
  float n = z - shift;
  float r = fmaf(n, -0x1.62e4p-1f, x);
  r = fmaf(n, -0x1.7f7d1cp-20f, r);
  int32_t zi;
  memcpy(&zi, &z, sizeof zi);
  int32_t ni = zi - 0x4b400000; /* n as an integer: z's bits less the shift's */
  /* e^r - 1 = c4 r + c3 r^2 + c2 r^3 + c1 r^4 + c0 r^5, in pairs (shorter chains than Horner's) */
  float r2 = r * r;
  float p = fmaf(0x1.0e4020p-7f, r, 0x1.573e2ep-5f);
  float q = fmaf(0x1.555e66p-3f, r, 0x1.fffdb6p-2f);
  q = fmaf(p, r2, q);
  float poly = fmaf(q, r2, 0x1.ffffecp-1f * r);
  /* (1 + poly) 2^n as ((1 + poly) 2^h) 2^(n-h): the first by adding h to the exponent's bits
   * (an integer add, not a multiply), a normal float for h in [-75, 64]; the second a
   * multiply that overflows to infinity or rounds once below the normal range. Unsigned
   * arithmetic: a NaN's n is any integer (its result is x itself, below). */
  int32_t h = ni >> 1; /* an arithmetic shift in GCC and clang (C leaves it to them) */
  float p1 = poly + 1.0f;
  uint32_t pb, b2 = (uint32_t)(ni - h + 127) << 23;
  memcpy(&pb, &p1, sizeof pb);
  pb += (uint32_t)h << 23;
  float y, s2;
  memcpy(&y, &pb, sizeof y);
  memcpy(&s2, &b2, sizeof s2);
  return x0 != x0 ? x0 : y * s2;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* 2^t for vectors, the kernel sums' exp (cpu_fused_ksum.c: e^x folded into 2^t with log2 e in
 * the row's constants), for t already clamped to [-152, 129] (below, every result rounds to 0;
 * from 129 on, to infinity), or NaN, which is returned as NaN. t = n + f with n the nearest
 * integer (f = t - n is exact, |f| <= 1/2); 2^f = 1 + f p(f) by Horner's order (a block's sum
 * gives it independent chains enough), p with loom__exp_f32's minimax coefficients for e^r,
 * r = f ln 2, times ln2^k; then 2^n applied so that results overflow to infinity and round once
 * below the normal range. Within 2 ulp of 2^t (fused_cpu_exp2_vectors checks both forms over
 * the whole range, and their edges). */
#define LOOM_EXP2_P1 0x1.62e422p-1f
#define LOOM_EXP2_P2 0x1.ebf9acp-3f
#define LOOM_EXP2_P3 0x1.c6bca0p-5f
#define LOOM_EXP2_P4 0x1.3cee16p-7f
#define LOOM_EXP2_P5 0x1.59ed2cp-10f

/* Sixteen lanes: vscalefps applies 2^n with one rounding. */
__attribute__((target("avx512f"))) static inline __m512 loom__exp2_f32x16(__m512 t) {
  __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 f = _mm512_sub_ps(t, n);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(LOOM_EXP2_P5), f, _mm512_set1_ps(LOOM_EXP2_P4));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(LOOM_EXP2_P3));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(LOOM_EXP2_P2));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(LOOM_EXP2_P1));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

/* Eight lanes with AVX2, which has no vscalefps: 2^n applied as 2^h 2^(n-h), h = n / 2, the
 * first added to the exponent's bits and the second a multiply, as loom__exp_f32 does. A NaN's
 * n converts to INT_MIN, whose two halves leave the NaN as it is. */
__attribute__((target("avx2,fma"))) static inline __m256 loom__exp2_f32x8(__m256 t) {
  __m256 n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 f = _mm256_sub_ps(t, n);
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(LOOM_EXP2_P5), f, _mm256_set1_ps(LOOM_EXP2_P4));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(LOOM_EXP2_P3));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(LOOM_EXP2_P2));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(LOOM_EXP2_P1));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
  __m256i ni = _mm256_cvtps_epi32(n), h = _mm256_srai_epi32(ni, 1);
  __m256i ph = _mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(h, 23));
  __m256i s2 = _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, h), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(_mm256_castsi256_ps(ph), _mm256_castsi256_ps(s2));
}
#endif

#endif
