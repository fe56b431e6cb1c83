/* Vector-friendly f32 math written out, so a loop over it compiles to straight vector code
 * with no call: libmvec's functions are calls through the vector ABI, which clobbers every
 * vector register (accumulators and operands are spilled around each one). Alone over a block
 * (exp times b, summed) this exp took 0.29 ns an element against libmvec's 0.37 on this
 * project's machine (AVX-512); in the one-pass kernel sum, where the call's spills are what
 * cost, the whole product ran about 1.3x faster with it. Only the fused evaluator's kernel sums
 * use it (cpu_fused.c, kernel_sum_f32); fused_cpu_inline_exp tests its accuracy. */
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

#endif
