/* The kernel sums' vector 2^t (cpu_vmath.h, loom__exp2_f32x16 and loom__exp2_f32x8), which the
 * one-pass kernel sum (cpu_fused_ksum.c) runs on AVX-512 and AVX2, against f64 exp2 over the
 * whole range its callers give it, [-152, 129], and at its edges. The kernel sums' results
 * through it are checked in test_fused_cpu.c (fused_cpu_kernel_sum, fused_cpu_kmv_*). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/cpu_vmath.h"
#include "harness.h"

#if defined(__x86_64__) && defined(__GNUC__)
/* One form over n arguments (a multiple of 16); the wrappers carry the target each needs. */
__attribute__((target("avx512f"))) static void exp2_x16(const float *t, float *o, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) _mm512_storeu_ps(o + i, loom__exp2_f32x16(_mm512_loadu_ps(t + i)));
}

__attribute__((target("avx2,fma"))) static void exp2_x8(const float *t, float *o, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) _mm256_storeu_ps(o + i, loom__exp2_f32x8(_mm256_loadu_ps(t + i)));
}

typedef void (*exp2_form)(const float *t, float *o, int64_t n);

/* The largest error over 2^22 + 16 arguments spread over [-152, 129], in ulps of the f64
 * result's f32 neighbourhood (below the normal range, in the least subnormal); fails at once on
 * a result that should overflow and does not, or one that does and should not. */
static double worst_ulps(exp2_form form, const char *name, double *at) {
  const int64_t n = (1 << 22) + 16;
  float *t = malloc(sizeof(float) * (size_t)n), *o = malloc(sizeof(float) * (size_t)n);
  if (!t || !o) {
    free(t), free(o);
    loom_test_fail(__FILE__, __LINE__, "%s: out of memory", name);
    return 0;
  }
  for (int64_t i = 0; i < n; i++) t[i] = (float)(-152.0 + 281.0 * (double)i / (double)(n - 1));
  form(t, o, n);
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double want = exp2((double)t[i]);
    if (want > 0x1.fffffep127 || isinf(o[i])) {
      if (!(want > 0x1.fffffep127 && isinf(o[i]))) {
        loom_test_fail(__FILE__, __LINE__, "%s: 2^%.9g = %.9g, want %.9g", name, t[i], o[i], want);
        break;
      }
      continue;
    }
    double ulp = want < 0x1p-126 ? 0x1p-149 : ldexp(1.0, ilogb(want) - 23);
    double e = fabs((double)o[i] - want) / ulp;
    if (e > worst) worst = e, *at = t[i];
  }
  free(t), free(o);
  return worst;
}

/* The edges: exact powers, the clamps' ends, NaN. */
static void check_edges(exp2_form form, const char *name) {
  float t[16] = {0, -1, 1, -152, 129, 128, 127.5f, -149, -126, -0.0f, NAN, 0.5f, -0.5f, 64, -64, 10};
  float o[16];
  form(t, o, 16);
  ASSERT_TRUE(o[0] == 1 && o[1] == 0.5f && o[2] == 2);
  ASSERT_TRUE(o[3] == 0); /* 2^-152: below half the least subnormal */
  ASSERT_TRUE(isinf(o[4]) && isinf(o[5]));
  ASSERT_TRUE(isfinite(o[6]) && fabs((double)o[6] - exp2(127.5)) <= ldexp(2.0, 127 - 23));
  ASSERT_TRUE(o[7] == 0x1p-149f && o[8] == 0x1p-126f && o[9] == 1);
  ASSERT_TRUE(isnan(o[10]));
  ASSERT_TRUE(o[13] == 0x1p64f && o[14] == 0x1p-64f && o[15] == 1024);
  if (loom_test_failed()) printf("    %s: an edge is wrong\n", name);
}

TEST(fused_cpu_exp2_vectors) {
  int isa = loom__cpu_isa_level();
  if (isa < 3) {
    loom_test_skip("no AVX2 here (ISA level %d): the kernel sums run their portable loop", isa);
    return;
  }
  struct {
    exp2_form form;
    const char *name;
    int level;
  } forms[] = {{exp2_x16, "AVX-512", 4}, {exp2_x8, "AVX2", 3}};
  for (int f = 0; f < 2 && !loom_test_failed(); f++) {
    if (isa < forms[f].level) continue;
    double at = 0, worst = worst_ulps(forms[f].form, forms[f].name, &at);
    printf("    2^t, %s: %.2f ulp at most (at %.7g)\n", forms[f].name, worst, at);
    if (worst > 2)
      loom_test_fail(__FILE__, __LINE__, "%s: %.2f ulp at %.7g, more than 2", forms[f].name, worst, at);
    check_edges(forms[f].form, forms[f].name);
  }
}
#else
TEST(fused_cpu_exp2_vectors) {
  loom_test_skip("not x86-64 with GCC or clang: the kernel sums run their portable loop");
}
#endif
