/* The fused evaluator's vector math (cpu_fused_ew.c, cpu_vmath.h): libmvec's functions as a fused
 * body of one op runs them, and the kernel sums' inline exp, against f64 libm. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_vmath.h"
#include "fused_util.h"
#include "harness.h"

/* ---- the vector math's accuracy ------------------------------------------------------------------
 * Each f32 function as the evaluator runs it (a fused body of that one op, so through libmvec)
 * against the f64 libm result rounded to f32, in ulps of the f32 result, on 2^20 arguments
 * spread over its range. glibc documents at most 4 ulp for libmvec's functions: asserted here,
 * and the measured maximum printed. */
static double ulps(float got, double want) {
  float w = (float)want;
  if (isnan(w) || isnan(got)) return isnan(w) && isnan(got) ? 0 : 1e9;
  if (isinf(w) || isinf(got)) return w == got ? 0 : 1e9;
  float up = nextafterf(fabsf(w), INFINITY);
  double ulp = (double)up - fabs((double)w);
  return fabs((double)got - want) / ulp;
}

TEST(fused_cpu_vector_math_ulps) {
  typedef struct fn {
    loom_op op;
    const char *name;
    double lo, hi;
  } fn;
  static const fn fns[] = {
      {LOOM_OP_EXP, "exp", -87, 88},   {LOOM_OP_LOG, "log", 1e-30, 1e30}, {LOOM_OP_SIN, "sin", -100, 100},
      {LOOM_OP_COS, "cos", -100, 100}, {LOOM_OP_TANH, "tanh", -10, 10},   {LOOM_OP_SQRT, "sqrt", 0, 1e6},
      {LOOM_OP_POW, "pow", 0.01, 10},
  };
  const int64_t n = 1 << 20;
  float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
  float *z = malloc(sizeof(float) * (size_t)n);
  for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
    const fn *F = &fns[f];
    bool log_spread = F->op == LOOM_OP_LOG || F->op == LOOM_OP_SQRT;
    for (int64_t i = 0; i < n; i++) {
      double u = (double)i / (double)n;
      x[i] = (float)(log_spread ? F->lo * pow(F->hi / fmax(F->lo, 1e-30), u) : F->lo + (F->hi - F->lo) * u);
      y[i] = (float)(-8 + 16 * u * u);
    }
    loom_graph *g = NULL;
    loom_graph_create("f", &g);
    loom_type t;
    loom_type_make(LOOM_F32, 1, &n, &t);
    loom_value a = loom_graph_param(g, "x", &t), b = loom_graph_param(g, "y", &t);
    loom_value r = F->op == LOOM_OP_POW ? loom_binary(g, F->op, a, b) : loom_unary(g, F->op, a);
    loom_graph_return(g, &r, 1);
    loom__view in[2] = {dense_view(&t, x), dense_view(&t, y)}, out = dense_view(&t, z);
    ASSERT_OK(loom__cpu_fused(g, in, &out, NULL, 0));
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
      double xd = x[i], want;
      switch (F->op) {
        case LOOM_OP_EXP:
          want = exp(xd);
          break;
        case LOOM_OP_LOG:
          want = log(xd);
          break;
        case LOOM_OP_SIN:
          want = sin(xd);
          break;
        case LOOM_OP_COS:
          want = cos(xd);
          break;
        case LOOM_OP_TANH:
          want = tanh(xd);
          break;
        case LOOM_OP_SQRT:
          want = sqrt(xd);
          break;
        default:
          want = pow(xd, (double)y[i]);
          break;
      }
      /* results below the normal range have fewer bits: not counted */
      if (fabs(want) < 1.2e-38 && want != 0) continue;
      worst = fmax(worst, ulps(z[i], want));
    }
    printf("    %s: %.2f ulp at most\n", F->name, worst);
    loom_graph_destroy(g);
    if (worst > 4) {
      loom_test_fail(__FILE__, __LINE__, "%s: %.2f ulp, more than libmvec's documented 4", F->name, worst);
      break;
    }
  }
  free(x), free(y), free(z);
}

/* The kernel sums' exp alone (cpu_vmath.h): every result within 2 ulp of the f64 one over its
 * whole range (subnormal results counted in the subnormals' ulp), and its edges exact. */
TEST(fused_cpu_inline_exp) {
  double worst = 0, at = 0;
  const int64_t n = 1 << 22;
  for (int64_t i = 0; i <= n; i++) {
    float x = (float)(-104.0 + 193.0 * (double)i / (double)n);
    double want = exp((double)x);
    float got = loom__exp_f32(x);
    double ulp = want < 0x1p-126 ? 0x1p-149 : ldexp(1.0, ilogb(want) - 23);
    if (want > 0x1.fffffep127) {
      if (!isinf(got)) {
        loom_test_fail(__FILE__, __LINE__, "exp(%.9g) = %.9g, want infinity", x, got);
        return;
      }
      continue;
    }
    double e = fabs((double)got - want) / ulp;
    if (e > worst) worst = e, at = x;
  }
  printf("    exp: %.2f ulp at most (at %.7g)\n", worst, at);
  if (worst > 2) loom_test_fail(__FILE__, __LINE__, "exp: %.2f ulp at %.7g, more than 2", worst, at);
  ASSERT_TRUE(isnan(loom__exp_f32(NAN)));
  ASSERT_TRUE(isnan(loom__exp_f32(-NAN)));
  ASSERT_TRUE(loom__exp_f32(INFINITY) == INFINITY);
  ASSERT_TRUE(loom__exp_f32(-INFINITY) == 0);
  ASSERT_TRUE(loom__exp_f32(0) == 1);
  ASSERT_TRUE(loom__exp_f32(-0.0f) == 1);
  ASSERT_TRUE(loom__exp_f32(88.72f) == (float)exp(88.72f)); /* the largest results, finite */
  ASSERT_TRUE(loom__exp_f32(1000) == INFINITY);
  ASSERT_TRUE(loom__exp_f32(-1000) == 0);
  ASSERT_TRUE(loom__exp_f32(-103.9f) == 0x1p-149f); /* the least subnormal, by one rounding */
}
