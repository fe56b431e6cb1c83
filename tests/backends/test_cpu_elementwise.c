/* The cpu backend's elementwise kernels (cpu_elementwise.c) against plain loops: every unary,
 * binary and compare op on every dtype the IR accepts, select, every cast, the sources,
 * broadcasting (by the kernel, and through stride-0 views), zero sizes, scalars, 8-d shapes,
 * f16/bf16 rounding, integer division and NaN semantics, and the argument checks. */
#include <complex.h>
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "reference.h"

static const loom_dtype ew_all_dtypes[] = {LOOM_BOOL, LOOM_I8,   LOOM_U8,  LOOM_I16, LOOM_I32, LOOM_I64,
                                           LOOM_F16,  LOOM_BF16, LOOM_F32, LOOM_F64, LOOM_C64, LOOM_C128};
#define EW_N_DTYPES ((int)(sizeof ew_all_dtypes / sizeof ew_all_dtypes[0]))

static bool ew_is_float(loom_dtype dt) {
  return loom_dtype_is_float(dt);
}
static bool ew_is_cplx(loom_dtype dt) {
  return loom_dtype_is_complex(dt);
}
static bool ew_is_int(loom_dtype dt) {
  return dt == LOOM_BOOL || loom_dtype_is_integer(dt);
}

/* ---- test values ----------------------------------------------------------------------- */

#define EW_NV 20
/* Interesting values of dt into buf (EW_NV elements): extremes, signs, NaN and infinities. */
static void ew_values(loom_dtype dt, void *buf) {
  static const double fv[EW_NV] = {0,  -0.0, 1,   -1,  0.5, -0.5,     2.5,       -2.5, 3.75, -3.75,
                                   10, -10,  0.1, 100, NAN, INFINITY, -INFINITY, 1e-3, 7,    -7};
  static const double fim[EW_NV] = {1, 0, -2, 0.5, 3, -1, 0, 0, 2, NAN, 1, -4, 0.25, 1, 0, 0, 1, 2, -3, 0};
  if (ew_is_cplx(dt)) {
    for (int i = 0; i < EW_NV; i++) ref_set_c(dt, buf, i, isinf(fv[i]) ? 5 : fv[i], fim[i]);
  } else if (ew_is_float(dt)) {
    for (int i = 0; i < EW_NV; i++) ref_set(dt, buf, i, fv[i]);
  } else {
    int64_t lo = ref_int_min(dt), hi = ref_int_max(dt);
    int64_t iv[EW_NV] = {0, 1, -1, 2, -2, 3, 7, -7, 100, -100, lo, hi, lo + 1, hi - 1, 5, -5, 64, -64, 13, 1};
    for (int i = 0; i < EW_NV; i++) ref_set_i(dt, buf, i, dt == LOOM_BOOL ? (i % 3 == 1) : iv[i]);
  }
}

/* ---- reference semantics ---------------------------------------------------------------- */

static double ew_unary_f(loom_op op, double x) {
  switch (op) {
    case LOOM_OP_NEG:
      return -x;
    case LOOM_OP_ABS:
      return fabs(x);
    case LOOM_OP_SIGN:
      return x > 0 ? 1 : x < 0 ? -1 : x;
    case LOOM_OP_EXP:
      return exp(x);
    case LOOM_OP_LOG:
      return log(x);
    case LOOM_OP_SQRT:
      return sqrt(x);
    case LOOM_OP_RSQRT:
      return 1 / sqrt(x);
    case LOOM_OP_SIN:
      return sin(x);
    case LOOM_OP_COS:
      return cos(x);
    case LOOM_OP_TANH:
      return tanh(x);
    case LOOM_OP_SIGMOID:
      return 1 / (1 + exp(-x));
    case LOOM_OP_RELU:
      return isnan(x) ? x : x < 0 ? 0 : x;
    case LOOM_OP_FLOOR:
      return floor(x);
    case LOOM_OP_CEIL:
      return ceil(x);
    case LOOM_OP_SQUARE:
      return x * x;
    default:
      return NAN;
  }
}

/* Integer unary ops, wrapped to dt. */
static int64_t ew_unary_i(loom_op op, loom_dtype dt, int64_t x) {
  switch (op) {
    case LOOM_OP_NEG:
      return ref_wrap(dt, 0 - (uint64_t)x);
    case LOOM_OP_ABS:
      return x < 0 ? ref_wrap(dt, 0 - (uint64_t)x) : x;
    case LOOM_OP_SIGN:
      return (x > 0) - (x < 0);
    case LOOM_OP_RELU:
      return x < 0 ? 0 : x;
    case LOOM_OP_FLOOR:
    case LOOM_OP_CEIL:
      return x;
    case LOOM_OP_NOT:
      return dt == LOOM_BOOL ? !x : ref_wrap(dt, ~(uint64_t)x);
    case LOOM_OP_SQUARE:
      return ref_wrap(dt, (uint64_t)x * (uint64_t)x);
    default:
      return 0;
  }
}

static int64_t ew_ipow(int64_t b, int64_t e) {
  if (e < 0) return b == 1 ? 1 : b == -1 ? ((e & 1) ? -1 : 1) : 0;
  uint64_t r = 1;
  for (int64_t i = 0; i < e; i++) r *= (uint64_t)b;
  return (int64_t)r;
}

static int64_t ew_binary_i(loom_op op, loom_dtype dt, int64_t a, int64_t b) {
  switch (op) {
    case LOOM_OP_ADD:
      return ref_wrap(dt, (uint64_t)a + (uint64_t)b);
    case LOOM_OP_SUB:
      return ref_wrap(dt, (uint64_t)a - (uint64_t)b);
    case LOOM_OP_MUL:
      return ref_wrap(dt, (uint64_t)a * (uint64_t)b);
    case LOOM_OP_DIV:
      if (b == 0) return 0;
      if (b == -1) return ref_wrap(dt, 0 - (uint64_t)a);
      return a / b;
    case LOOM_OP_POW:
      return ref_wrap(dt, (uint64_t)ew_ipow(a, b));
    case LOOM_OP_MAXIMUM:
      return a > b ? a : b;
    case LOOM_OP_MINIMUM:
      return a < b ? a : b;
    default:
      return 0;
  }
}

static double ew_binary_f(loom_op op, double a, double b) {
  switch (op) {
    case LOOM_OP_ADD:
      return a + b;
    case LOOM_OP_SUB:
      return a - b;
    case LOOM_OP_MUL:
      return a * b;
    case LOOM_OP_DIV:
      return a / b;
    case LOOM_OP_POW:
      return pow(a, b);
    case LOOM_OP_MAXIMUM:
      return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    case LOOM_OP_MINIMUM:
      return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    default:
      return NAN;
  }
}

static double complex ew_binary_c(loom_op op, double complex a, double complex b) {
  switch (op) {
    case LOOM_OP_ADD:
      return a + b;
    case LOOM_OP_SUB:
      return a - b;
    case LOOM_OP_MUL:
      return a * b;
    default:
      return a / b;
  }
}

static bool ew_compare(loom_op op, double a, double b) {
  switch (op) {
    case LOOM_OP_EQ:
      return a == b;
    case LOOM_OP_NE:
      return a != b;
    case LOOM_OP_LT:
      return a < b;
    case LOOM_OP_LE:
      return a <= b;
    case LOOM_OP_GT:
      return a > b;
    default:
      return a >= b;
  }
}

static bool ew_compare_i(loom_op op, int64_t a, int64_t b) {
  switch (op) {
    case LOOM_OP_EQ:
      return a == b;
    case LOOM_OP_NE:
      return a != b;
    case LOOM_OP_LT:
      return a < b;
    case LOOM_OP_LE:
      return a <= b;
    case LOOM_OP_GT:
      return a > b;
    case LOOM_OP_GE:
      return a >= b;
    case LOOM_OP_AND:
      return a && b;
    default:
      return a || b;
  }
}

/* The stored result of a float computation, rounded to dt as the kernel stores it. */
static double ew_round(loom_dtype dt, double v) {
  char buf[16];
  ref_set(dt, buf, 0, v);
  return ref_get(dt, buf, 0);
}

/* Checks element i of out against the expected (re, im) or integer. */
static bool ew_check(loom_dtype dt, const void *out, int64_t i, double re, double im, int64_t iv,
                     double tol) {
  if (ew_is_int(dt)) return ref_get_i(dt, out, i) == iv;
  if (!ref_close(ref_get(dt, out, i), re, tol)) return false;
  return !ew_is_cplx(dt) || ref_close(ref_get_im(dt, out, i), im, tol);
}

/* ---- unary -------------------------------------------------------------------------------- */

static const loom_op ew_unary_ops[] = {LOOM_OP_NEG,   LOOM_OP_ABS,  LOOM_OP_SIGN,    LOOM_OP_EXP,
                                       LOOM_OP_LOG,   LOOM_OP_SQRT, LOOM_OP_RSQRT,   LOOM_OP_SIN,
                                       LOOM_OP_COS,   LOOM_OP_TANH, LOOM_OP_SIGMOID, LOOM_OP_RELU,
                                       LOOM_OP_FLOOR, LOOM_OP_CEIL, LOOM_OP_NOT,     LOOM_OP_SQUARE};

TEST(ew_unary_every_op_and_dtype) {
  int64_t n = EW_NV, ran = 0;
  for (size_t k = 0; k < sizeof ew_unary_ops / sizeof ew_unary_ops[0]; k++) {
    loom_op op = ew_unary_ops[k];
    for (int d = 0; d < EW_N_DTYPES; d++) {
      loom_dtype dt = ew_all_dtypes[d];
      loom_type t = ref_type(dt, 1, &n);
      loom_value x;
      loom_graph *g = ref_graph(1, &t, &x);
      loom_value y = loom_unary(g, op, x);
      if (y.id < 0) { /* the IR does not take this dtype for op */
        loom_graph_destroy(g);
        continue;
      }
      char in[EW_NV * 16], out[EW_NV * 16];
      ew_values(dt, in);
      loom__view vi = ref_view(&t, in, NULL), vo = ref_view(&t, out, NULL);
      ASSERT_OK(ref_run(g, ref_op(g, y), &vi, &vo));
      for (int64_t i = 0; i < n; i++) {
        double re = 0, im = 0;
        int64_t iv = 0;
        if (ew_is_int(dt)) {
          iv = ew_unary_i(op, dt, ref_get_i(dt, in, i));
        } else if (ew_is_cplx(dt)) {
          double complex z = CMPLX(ref_get(dt, in, i), ref_get_im(dt, in, i));
          z = op == LOOM_OP_NEG ? -z : z * z;
          re = creal(z);
          im = cimag(z);
        } else {
          re = ew_round(dt, ew_unary_f(op, ref_get(dt, in, i)));
        }
        if (!ew_check(dt, out, i, re, im, iv, ref_tol(dt))) {
          loom_test_fail(__FILE__, __LINE__, "%s on %s, element %lld (input %g): got %g, expected %g / %lld",
                         loom_op_name(op), loom_dtype_name(dt), (long long)i, ref_get(dt, in, i),
                         ref_get(dt, out, i), re, (long long)iv);
          loom_graph_destroy(g);
          return;
        }
      }
      ran++;
      loom_graph_destroy(g);
    }
  }
  ASSERT_EQ(ran, 86);
}

/* ---- binary and compare, with the kernel broadcasting [n,1] x [n] ------------------------- */

static void ew_binary_case(loom_op op, loom_dtype dt, int64_t *ran) {
  int64_t n = EW_NV, ad[2] = {EW_NV, 1};
  loom_type ta = ref_type(dt, 2, ad), tb = ref_type(dt, 1, &n), types[2] = {ta, tb};
  loom_value p[2];
  loom_graph *g = ref_graph(2, types, p);
  loom_value y = loom_binary(g, op, p[0], p[1]);
  if (y.id < 0) {
    loom_graph_destroy(g);
    return;
  }
  loom_type to = ref_value_type(g, y);
  char a[EW_NV * 16], b[EW_NV * 16], *out = ref_alloc(&to);
  ew_values(dt, a);
  ew_values(dt, b);
  if (op == LOOM_OP_POW && ew_is_int(dt))
    for (int64_t i = 0; i < n; i++) ref_set_i(dt, b, i, i - 3); /* exponents -3..16 */
  loom__view in[2] = {ref_view(&ta, a, NULL), ref_view(&tb, b, NULL)}, vo = ref_view(&to, out, NULL);
  loom_status s = ref_run(g, ref_op(g, y), in, &vo);
  if (s) {
    loom_test_fail(__FILE__, __LINE__, "%s on %s: %s", loom_op_name(op), loom_dtype_name(dt),
                   loom_last_error());
    goto done;
  }
  bool cmp = loom__op_info_of(op)->cls != LOOM_CLASS_BINARY;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      int64_t e = i * n + j, iv = 0;
      double re = 0, im = 0;
      if (cmp) {
        if (ew_is_int(dt)) {
          iv = ew_compare_i(op, ref_get_i(dt, a, i), ref_get_i(dt, b, j));
        } else if (ew_is_cplx(dt)) { /* eq and ne only */
          bool eq = ref_get(dt, a, i) == ref_get(dt, b, j) && ref_get_im(dt, a, i) == ref_get_im(dt, b, j);
          iv = op == LOOM_OP_EQ ? eq : !eq;
        } else {
          iv = ew_compare(op, ref_get(dt, a, i), ref_get(dt, b, j));
        }
        if (ref_get_i(LOOM_BOOL, out, e) != iv) {
          loom_test_fail(__FILE__, __LINE__, "%s on %s: element (%lld,%lld) is %lld", loom_op_name(op),
                         loom_dtype_name(dt), (long long)i, (long long)j,
                         (long long)ref_get_i(LOOM_BOOL, out, e));
          goto done;
        }
        continue;
      }
      if (ew_is_int(dt)) {
        iv = ew_binary_i(op, dt, ref_get_i(dt, a, i), ref_get_i(dt, b, j));
      } else if (ew_is_cplx(dt)) {
        double complex z = ew_binary_c(op, CMPLX(ref_get(dt, a, i), ref_get_im(dt, a, i)),
                                       CMPLX(ref_get(dt, b, j), ref_get_im(dt, b, j)));
        re = creal(z);
        im = cimag(z);
        if (!isfinite(re) || !isfinite(im)) continue; /* Annex G picks among NaN/inf forms */
        /* Products cancel: the error scales with the operands, not the result. */
        double scale = fmax(1, cabs(CMPLX(ref_get(dt, a, i), ref_get_im(dt, a, i))) *
                                   fmax(1, cabs(CMPLX(ref_get(dt, b, j), ref_get_im(dt, b, j)))));
        if (op == LOOM_OP_DIV) scale *= fmax(1, 1 / cabs(CMPLX(ref_get(dt, b, j), ref_get_im(dt, b, j))));
        bool ok = fabs(ref_get(dt, out, e) - re) <= 1e-5 * scale &&
                  fabs(ref_get_im(dt, out, e) - im) <= 1e-5 * scale;
        if (!ok) {
          loom_test_fail(__FILE__, __LINE__, "%s on %s: element (%lld,%lld) is %g%+gi, expected %g%+gi",
                         loom_op_name(op), loom_dtype_name(dt), (long long)i, (long long)j,
                         ref_get(dt, out, e), ref_get_im(dt, out, e), re, im);
          goto done;
        }
        continue;
      } else {
        re = ew_round(dt, ew_binary_f(op, ref_get(dt, a, i), ref_get(dt, b, j)));
      }
      if (!ew_check(dt, out, e, re, im, iv, ref_tol(dt))) {
        loom_test_fail(__FILE__, __LINE__, "%s on %s: (%g, %g) gave %g%+gi, expected %g%+gi / %lld",
                       loom_op_name(op), loom_dtype_name(dt), ref_get(dt, a, i), ref_get(dt, b, j),
                       ref_get(dt, out, e), ref_get_im(dt, out, e), re, im, (long long)iv);
        goto done;
      }
    }
  (*ran)++;
done:
  free(out);
  loom_graph_destroy(g);
}

TEST(ew_binary_every_op_and_dtype) {
  static const loom_op ops[] = {LOOM_OP_ADD, LOOM_OP_SUB,     LOOM_OP_MUL,    LOOM_OP_DIV,
                                LOOM_OP_POW, LOOM_OP_MAXIMUM, LOOM_OP_MINIMUM};
  int64_t ran = 0;
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
    for (int d = 0; d < EW_N_DTYPES && !loom_test_failed(); d++)
      ew_binary_case(ops[k], ew_all_dtypes[d], &ran);
  ASSERT_EQ(ran, 4 * 11 + 3 * 9);
}

TEST(ew_compare_every_op_and_dtype) {
  static const loom_op ops[] = {LOOM_OP_EQ, LOOM_OP_NE, LOOM_OP_LT,  LOOM_OP_LE,
                                LOOM_OP_GT, LOOM_OP_GE, LOOM_OP_AND, LOOM_OP_OR};
  int64_t ran = 0;
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
    for (int d = 0; d < EW_N_DTYPES && !loom_test_failed(); d++)
      ew_binary_case(ops[k], ew_all_dtypes[d], &ran);
  ASSERT_EQ(ran, 4 * 9 + 2 * 12 + 2);
}

/* ---- integer and NaN semantics, f16 rounding ------------------------------------------------ */

/* Runs `op` on two dense 1-D operands of n elements of dt; out has the result's dtype. */
static loom_status ew_run2(loom_op op, loom_dtype dt, int64_t n, void *a, void *b, void *out) {
  loom_type t = ref_type(dt, 1, &n), types[2] = {t, t};
  loom_value p[2];
  loom_graph *g = ref_graph(2, types, p);
  loom_value y = loom_binary(g, op, p[0], p[1]);
  if (y.id < 0) {
    loom_graph_destroy(g);
    return LOOM_ERR_INVALID_ARGUMENT;
  }
  loom_type to = ref_value_type(g, y);
  loom__view in[2] = {ref_view(&t, a, NULL), ref_view(&t, b, NULL)}, vo = ref_view(&to, out, NULL);
  loom_status s = ref_run(g, ref_op(g, y), in, &vo);
  loom_graph_destroy(g);
  return s;
}

TEST(ew_integer_division) {
  int32_t a[] = {7, -7, 7, -7, 5, INT32_MIN, INT32_MIN, 0, 9, -9}, b[] = {2, 2, -2, -2, 0, -1, 1, 3, 0, -3},
          o[10];
  int32_t want[] = {3, -3, -3, 3, 0, INT32_MIN, INT32_MIN, 0, 0, 3};
  ASSERT_OK(ew_run2(LOOM_OP_DIV, LOOM_I32, 10, a, b, o));
  for (int i = 0; i < 10; i++) ASSERT_EQ(o[i], want[i]);
  int64_t a64[] = {INT64_MIN, -1, INT64_MAX}, b64[] = {-1, 0, -1}, o64[3];
  ASSERT_OK(ew_run2(LOOM_OP_DIV, LOOM_I64, 3, a64, b64, o64));
  ASSERT_TRUE(o64[0] == INT64_MIN && o64[1] == 0 && o64[2] == -INT64_MAX);
  int8_t a8[] = {-128, -128, 100}, b8[] = {-1, 0, -3}, o8[3];
  ASSERT_OK(ew_run2(LOOM_OP_DIV, LOOM_I8, 3, a8, b8, o8));
  ASSERT_TRUE(o8[0] == -128 && o8[1] == 0 && o8[2] == -33);
  uint8_t au[] = {200, 7, 255}, bu[] = {0, 2, 16}, ou[3];
  ASSERT_OK(ew_run2(LOOM_OP_DIV, LOOM_U8, 3, au, bu, ou));
  ASSERT_TRUE(ou[0] == 0 && ou[1] == 3 && ou[2] == 15);
}

TEST(ew_integer_pow_and_wrap) {
  int64_t a[] = {2, 3, -2, 1, -1, -1, 0, 0, 5, 2}, b[] = {10, 3, 3, -5, -3, -4, 0, -1, -1, 64}, o[10];
  int64_t want[] = {1024, 27, -8, 1, -1, 1, 1, 0, 0, 0};
  ASSERT_OK(ew_run2(LOOM_OP_POW, LOOM_I64, 10, a, b, o));
  for (int i = 0; i < 10; i++) ASSERT_EQ(o[i], want[i]);
  int8_t a8[] = {127, -128, 2}, b8[] = {1, 1, 7}, o8[3];
  ASSERT_OK(ew_run2(LOOM_OP_ADD, LOOM_I8, 3, a8, b8, o8));
  ASSERT_TRUE(o8[0] == -128 && o8[1] == -127 && o8[2] == 9);
  ASSERT_OK(ew_run2(LOOM_OP_POW, LOOM_I8, 3, a8, b8, o8));
  ASSERT_TRUE(o8[0] == 127 && o8[1] == -128 && o8[2] == (int8_t)128);
  int32_t a32[] = {INT32_MAX, INT32_MIN}, b32[] = {2, -1}, o32[2];
  ASSERT_OK(ew_run2(LOOM_OP_MUL, LOOM_I32, 2, a32, b32, o32));
  ASSERT_TRUE(o32[0] == -2 && o32[1] == INT32_MIN);
}

TEST(ew_nan_in_maximum_minimum_and_sign) {
  float a[] = {NAN, 1, NAN, -0.0f, 2}, b[] = {1, NAN, NAN, 3, -INFINITY}, o[5];
  ASSERT_OK(ew_run2(LOOM_OP_MAXIMUM, LOOM_F32, 5, a, b, o));
  ASSERT_TRUE(isnan(o[0]) && isnan(o[1]) && isnan(o[2]) && o[3] == 3 && o[4] == 2);
  ASSERT_OK(ew_run2(LOOM_OP_MINIMUM, LOOM_F32, 5, a, b, o));
  ASSERT_TRUE(isnan(o[0]) && isnan(o[1]) && isnan(o[2]) && o[3] == -0.0f && o[4] == -INFINITY);
  double d[] = {NAN, -0.0, 0.0, -3}, od[4];
  int64_t n = 4;
  loom_type t = ref_type(LOOM_F64, 1, &n);
  loom_value x;
  loom_graph *g = ref_graph(1, &t, &x);
  loom_value y = loom_unary(g, LOOM_OP_SIGN, x);
  loom__view vi = ref_view(&t, d, NULL), vo = ref_view(&t, od, NULL);
  ASSERT_OK(ref_run(g, ref_op(g, y), &vi, &vo));
  loom_graph_destroy(g);
  ASSERT_TRUE(isnan(od[0]) && od[1] == 0 && signbit(od[1]) && od[2] == 0 && !signbit(od[2]) && od[3] == -1);
}

TEST(ew_half_rounding_to_even) {
  /* 1 + 2^-11 lies halfway between two f16 values: it rounds to even (1.0); 1 + 3*2^-11 rounds
   * up to 1 + 2^-9. bf16 likewise at 2^-8. */
  uint16_t a[] = {loom_f32_to_f16(1.0f), loom_f32_to_f16(1.0f + 0x1p-10f), loom_f32_to_f16(2048.0f)};
  uint16_t b[] = {loom_f32_to_f16(0x1p-11f), loom_f32_to_f16(0x1p-11f), loom_f32_to_f16(1.0f)}, o[3];
  ASSERT_OK(ew_run2(LOOM_OP_ADD, LOOM_F16, 3, a, b, o));
  ASSERT_EQ(o[0], 0x3C00);
  ASSERT_EQ(o[1], 0x3C02);
  ASSERT_EQ(o[2], loom_f32_to_f16(2048.0f)); /* 2049 is a tie: to even, 2048 */
  uint16_t ab[] = {loom_f32_to_bf16(1.0f), loom_f32_to_bf16(1.0f + 0x1p-7f)};
  uint16_t bb[] = {loom_f32_to_bf16(0x1p-8f), loom_f32_to_bf16(0x1p-8f)};
  ASSERT_OK(ew_run2(LOOM_OP_ADD, LOOM_BF16, 2, ab, bb, o));
  ASSERT_EQ(o[0], 0x3F80);
  ASSERT_EQ(o[1], 0x3F82);
  /* f16 overflow goes to infinity. */
  uint16_t big[] = {loom_f32_to_f16(60000.0f)}, two[] = {loom_f32_to_f16(2.0f)};
  ASSERT_OK(ew_run2(LOOM_OP_MUL, LOOM_F16, 1, big, two, o));
  ASSERT_EQ(o[0], 0x7C00);
}

TEST(ew_complex_arithmetic) {
  float a[] = {1, 2, 3, -1}, b[] = {0.5f, -1, 0, 2}, o[4];
  ASSERT_OK(ew_run2(LOOM_OP_MUL, LOOM_C64, 2, a, b, o));
  /* (1+2i)(0.5-i) = 0.5 - i + i - 2i^2 = 2.5; (3-i)(2i) = 2 + 6i */
  ASSERT_NEAR(o[0], 2.5, 1e-6);
  ASSERT_NEAR(o[1], 0, 1e-6);
  ASSERT_NEAR(o[2], 2, 1e-6);
  ASSERT_NEAR(o[3], 6, 1e-6);
  ASSERT_OK(ew_run2(LOOM_OP_DIV, LOOM_C64, 2, a, b, o));
  /* (1+2i)/(0.5-i) = (1+2i)(0.5+i)/1.25 = (0.5 + i + i - 2)/1.25 = -1.2 + 1.6i */
  ASSERT_NEAR(o[0], -1.2, 1e-6);
  ASSERT_NEAR(o[1], 1.6, 1e-6);
}

/* ---- broadcasting, shapes ------------------------------------------------------------------ */

/* out = a + b over 8-d shapes, a and b passed at their own shapes (the kernel broadcasts) or
 * pre-broadcast with stride-0 views (as the runtime passes them). */
TEST(ew_broadcast_8d_both_ways) {
  int64_t ad[8] = {2, 1, 3, 1, 2, 1, 2, 3}, bd[7] = {2, 1, 2, 1, 3, 2, 1};
  loom_type ta = ref_type(LOOM_F32, 8, ad), tb = ref_type(LOOM_F32, 7, bd), types[2] = {ta, tb};
  loom_value p[2];
  loom_graph *g = ref_graph(2, types, p);
  loom_value y = loom_binary(g, LOOM_OP_SUB, p[0], p[1]);
  ASSERT_TRUE(y.id >= 0);
  loom_type to = ref_value_type(g, y);
  ASSERT_EQ(to.rank, 8);
  float *a = ref_alloc(&ta), *b = ref_alloc(&tb), *o1 = ref_alloc(&to), *o2 = ref_alloc(&to);
  for (int64_t i = 0; i < ref_elements(&ta); i++) a[i] = (float)i;
  for (int64_t i = 0; i < ref_elements(&tb); i++) b[i] = (float)(1000 * i);
  loom__view in[2] = {ref_view(&ta, a, NULL), ref_view(&tb, b, NULL)}, vo = ref_view(&to, o1, NULL);
  ASSERT_OK(ref_run(g, ref_op(g, y), in, &vo));
  loom__view bin[2];
  loom__view_broadcast_to(&in[0], &to, &bin[0]);
  loom__view_broadcast_to(&in[1], &to, &bin[1]);
  vo.data = o2;
  ASSERT_OK(ref_run(g, ref_op(g, y), bin, &vo));
  int64_t total = ref_elements(&to), bad = 0;
  for (int64_t e = 0; e < total; e++) {
    int64_t idx[8], rem = e, ao = 0, bo = 0, as = 1, bs = 1;
    for (int d = 7; d >= 0; d--) {
      idx[d] = rem % to.dims[d];
      rem /= to.dims[d];
    }
    for (int d = 7; d >= 0; d--) {
      ao += (ad[d] == 1 ? 0 : idx[d]) * as;
      as *= ad[d];
      if (d >= 1) {
        bo += (bd[d - 1] == 1 ? 0 : idx[d]) * bs;
        bs *= bd[d - 1];
      }
    }
    float want = a[ao] - b[bo];
    bad += o1[e] != want || o2[e] != want;
  }
  free(a), free(b), free(o1), free(o2);
  loom_graph_destroy(g);
  ASSERT_EQ(bad, 0);
}

/* A kNN-like broadcast large enough for several threads: [n,1,3] - [1,m,3]. */
TEST(ew_broadcast_large_threaded) {
  int64_t ad[3] = {300, 1, 3}, bd[3] = {1, 200, 3};
  loom_type ta = ref_type(LOOM_F64, 3, ad), tb = ref_type(LOOM_F64, 3, bd), types[2] = {ta, tb};
  loom_value p[2];
  loom_graph *g = ref_graph(2, types, p);
  loom_value y = loom_binary(g, LOOM_OP_SUB, p[0], p[1]);
  loom_type to = ref_value_type(g, y);
  double *a = ref_alloc(&ta), *b = ref_alloc(&tb), *o = ref_alloc(&to);
  for (int64_t i = 0; i < 900; i++) a[i] = ref_rand();
  for (int64_t i = 0; i < 600; i++) b[i] = ref_rand();
  loom__view in[2] = {ref_view(&ta, a, NULL), ref_view(&tb, b, NULL)}, vo = ref_view(&to, o, NULL);
  ASSERT_OK(ref_run(g, ref_op(g, y), in, &vo));
  int64_t bad = 0;
  for (int64_t i = 0; i < 300; i++)
    for (int64_t j = 0; j < 200; j++)
      for (int64_t c = 0; c < 3; c++) bad += o[(i * 200 + j) * 3 + c] != a[i * 3 + c] - b[j * 3 + c];
  free(a), free(b), free(o);
  loom_graph_destroy(g);
  ASSERT_EQ(bad, 0);
}

/* A strided (transposed, stepped) input to a unary op, and a big dense one. */
TEST(ew_strided_and_dense_inputs) {
  int64_t d[2] = {4, 3}, n = 100003;
  loom_type t = ref_type(LOOM_F32, 2, d), tl = ref_type(LOOM_F32, 1, &n);
  loom_value x;
  loom_graph *g = ref_graph(1, &t, &x);
  loom_value y = loom_unary(g, LOOM_OP_SQUARE, x);
  float base[40], o[12];
  for (int i = 0; i < 40; i++) base[i] = (float)i;
  int64_t strides[2] = {1, 8}; /* element (i,j) at i + 8j: a stepped transpose */
  loom__view vi = ref_view(&t, base, strides), vo = ref_view(&t, o, NULL);
  ASSERT_OK(ref_run(g, ref_op(g, y), &vi, &vo));
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) ASSERT_EQ(o[i * 3 + j], base[i + 8 * j] * base[i + 8 * j]);
  loom_graph_destroy(g);
  g = ref_graph(1, &tl, &x);
  y = loom_unary(g, LOOM_OP_NEG, x);
  float *big = ref_alloc(&tl), *bo = ref_alloc(&tl);
  for (int64_t i = 0; i < n; i++) big[i] = (float)i;
  vi = ref_view(&tl, big, NULL);
  vo = ref_view(&tl, bo, NULL);
  ASSERT_OK(ref_run(g, ref_op(g, y), &vi, &vo));
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) bad += bo[i] != -(float)i;
  free(big), free(bo);
  loom_graph_destroy(g);
  ASSERT_EQ(bad, 0);
}

TEST(ew_zero_size_and_scalars) {
  int64_t zd[3] = {3, 0, 2};
  loom_type tz = ref_type(LOOM_F32, 3, zd), ts = ref_type(LOOM_F32, 0, NULL), types[2] = {tz, ts};
  loom_value p[2];
  loom_graph *g = ref_graph(2, types, p);
  loom_value y = loom_binary(g, LOOM_OP_MUL, p[0], p[1]);
  loom_value z = loom_binary(g, LOOM_OP_ADD, p[1], p[1]);
  loom_type to = ref_value_type(g, y);
  ASSERT_EQ(ref_elements(&to), 0);
  float s = 2.5f, so = 0;
  loom__view in[2] = {ref_view(&tz, NULL, NULL), ref_view(&ts, &s, NULL)}, vo = ref_view(&to, NULL, NULL);
  ASSERT_OK(ref_run(g, ref_op(g, y), in, &vo));
  loom__view sin2[2] = {ref_view(&ts, &s, NULL), ref_view(&ts, &s, NULL)}, svo = ref_view(&ts, &so, NULL);
  ASSERT_OK(ref_run(g, ref_op(g, z), sin2, &svo));
  ASSERT_EQ(so, 5);
  loom_graph_destroy(g);
  /* A scalar broadcast against a vector, by the kernel. */
  int64_t n = 5;
  loom_type tv = ref_type(LOOM_I32, 1, &n), ti = ref_type(LOOM_I32, 0, NULL), t2[2] = {ti, tv};
  g = ref_graph(2, t2, p);
  y = loom_binary(g, LOOM_OP_SUB, p[0], p[1]);
  int32_t sc = 10, v[5] = {1, 2, 3, 4, 5}, o[5];
  loom__view vin[2] = {ref_view(&ti, &sc, NULL), ref_view(&tv, v, NULL)};
  vo = ref_view(&tv, o, NULL);
  ASSERT_OK(ref_run(g, ref_op(g, y), vin, &vo));
  for (int i = 0; i < 5; i++) ASSERT_EQ(o[i], 10 - v[i]);
  loom_graph_destroy(g);
}

/* ---- select ---------------------------------------------------------------------------------- */

TEST(ew_select_every_size) {
  for (int d = 0; d < EW_N_DTYPES; d++) {
    loom_dtype dt = ew_all_dtypes[d];
    int64_t cd[2] = {4, 1}, ad[1] = {5}, bd[2] = {1, 1};
    loom_type tc = ref_type(LOOM_BOOL, 2, cd), ta = ref_type(dt, 1, ad), tb = ref_type(dt, 2, bd);
    loom_type types[3] = {tc, ta, tb};
    loom_value p[3];
    loom_graph *g = ref_graph(3, types, p);
    loom_value y = loom_select(g, p[0], p[1], p[2]);
    ASSERT_TRUE(y.id >= 0);
    loom_type to = ref_value_type(g, y);
    uint8_t c[4] = {1, 0, 1, 0};
    char a[5 * 16], b[16], *o = ref_alloc(&to);
    for (int i = 0; i < 5; i++) ref_set_c(dt, a, i, i + 1, -i);
    ref_set_c(dt, b, 0, 0, 7);
    loom__view in[3] = {ref_view(&tc, c, NULL), ref_view(&ta, a, NULL), ref_view(&tb, b, NULL)};
    loom__view vo = ref_view(&to, o, NULL);
    ASSERT_OK(ref_run(g, ref_op(g, y), in, &vo));
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 5; j++) {
        int64_t src = c[i] ? j : 0;
        const char *from = c[i] ? a : b;
        ASSERT_TRUE(memcmp(o + (i * 5 + j) * loom_dtype_size(dt), from + src * loom_dtype_size(dt),
                           (size_t)loom_dtype_size(dt)) == 0);
      }
    free(o);
    loom_graph_destroy(g);
  }
}

/* ---- cast ----------------------------------------------------------------------------------- */

/* The expected cast of element i of src (dtype from) into element 0 of want (dtype to). */
static void ew_cast_ref(loom_dtype from, const void *src, int64_t i, loom_dtype to, void *want) {
  bool from_int = ew_is_int(from), to_int = ew_is_int(to);
  double re = ref_get(from, src, i), im = ref_get_im(from, src, i);
  if (to == LOOM_BOOL) {
    ref_set_i(to, want, 0, from_int ? ref_get_i(from, src, i) != 0 : (re != 0 || im != 0));
  } else if (to_int && from_int) {
    ref_set_i(to, want, 0, ref_get_i(from, src, i));
  } else if (to_int) {
    int64_t lo = ref_int_min(to), hi = ref_int_max(to), v;
    if (isnan(re))
      v = 0;
    else if (re <= (double)lo)
      v = lo;
    else if (re >= (double)hi)
      v = hi;
    else
      v = (int64_t)re;
    ref_set_i(to, want, 0, v);
  } else if (from_int) {
    int64_t v = ref_get_i(from, src, i);
    if (to == LOOM_F16 || to == LOOM_BF16)
      ref_set(to, want, 0, (double)(float)v);
    else if (to == LOOM_F32 || to == LOOM_C64)
      ref_set_c(to, want, 0, (double)(float)v, 0);
    else
      ref_set_c(to, want, 0, (double)v, 0);
  } else {
    if (to == LOOM_F16 || to == LOOM_BF16) re = (double)(float)re; /* the values are exact in f32 */
    ref_set_c(to, want, 0, re, loom_dtype_is_complex(to) ? im : 0);
  }
}

TEST(ew_cast_every_pair) {
  int64_t n = 0, ran = 0;
  for (int f = 0; f < EW_N_DTYPES; f++) {
    loom_dtype from = ew_all_dtypes[f];
    char src[64 * 16];
    if (ew_is_int(from)) {
      int64_t iv[] = {0,     1,      -1,        127,       128,       -129,      255, 256,
                      65535, -65536, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, 3,   1000000007};
      n = (int64_t)(sizeof iv / sizeof iv[0]);
      for (int64_t i = 0; i < n; i++) ref_set_i(from, src, i, from == LOOM_BOOL ? (i % 2) : iv[i]);
    } else {
      double fv[] = {0,   -0.0, 1.5,   -1.5, 2.5, -2.7,     127.9,     128,  -129, 255.5,
                     256, 1e10, -1e10, 3e9,  NAN, INFINITY, -INFINITY, 1e30, 0.75, -65504};
      n = (int64_t)(sizeof fv / sizeof fv[0]);
      for (int64_t i = 0; i < n; i++) ref_set_c(from, src, i, fv[i], i % 3 ? 0 : 0.5);
    }
    for (int d = 0; d < EW_N_DTYPES; d++) {
      loom_dtype to = ew_all_dtypes[d];
      loom_type t = ref_type(from, 1, &n);
      loom_value x;
      loom_graph *g = ref_graph(1, &t, &x);
      loom_value y = loom_cast(g, x, to);
      if (y.id < 0) {
        loom_graph_destroy(g);
        continue;
      }
      loom_type to_t = ref_value_type(g, y);
      char out[64 * 16], want[16];
      loom__view vi = ref_view(&t, src, NULL), vo = ref_view(&to_t, out, NULL);
      ASSERT_OK(ref_run(g, ref_op(g, y), &vi, &vo));
      loom_graph_destroy(g);
      int64_t es = loom_dtype_size(to);
      for (int64_t i = 0; i < n; i++) {
        ew_cast_ref(from, src, i, to, want);
        bool nan_ok = !ew_is_int(to) && isnan(ref_get(to, want, 0)) && isnan(ref_get(to, out, i));
        if (!nan_ok && memcmp(want, out + i * es, (size_t)es) != 0) {
          loom_test_fail(__FILE__, __LINE__, "cast %s -> %s of element %lld (%g): got %g, expected %g",
                         loom_dtype_name(from), loom_dtype_name(to), (long long)i, ref_get(from, src, i),
                         ref_get(to, out, i), ref_get(to, want, 0));
          return;
        }
      }
      ran++;
    }
  }
  ASSERT_EQ(ran, 12 * 12 - 2 * 10); /* the IR forbids complex -> real */
}

/* Casts round once: f64 and i64 sources to f16/bf16 do not double-round through f32. */
TEST(ew_cast_rounds_once) {
  int64_t n = 2;
  loom_type t = ref_type(LOOM_F64, 1, &n), ti = ref_type(LOOM_I64, 1, &n);
  loom_value x;
  loom_graph *g = ref_graph(1, &t, &x);
  loom_value y = loom_cast(g, x, LOOM_F16);
  double d[2] = {1 + 0x1p-11 + 0x1p-40, -(1 + 0x1p-11 + 0x1p-40)};
  uint16_t o[2];
  loom_type th = ref_value_type(g, y);
  loom__view vi = ref_view(&t, d, NULL), vo = ref_view(&th, o, NULL);
  ASSERT_OK(ref_run(g, ref_op(g, y), &vi, &vo));
  ASSERT_EQ(o[0], 0x3C01);
  ASSERT_EQ(o[1], 0xBC01);
  loom_graph_destroy(g);
  g = ref_graph(1, &ti, &x);
  y = loom_cast(g, x, LOOM_BF16);
  int64_t iv[2] = {(1 << 24) + (1 << 16) + 1, (1 << 24) + (1 << 16)};
  th = ref_value_type(g, y);
  vi = ref_view(&ti, iv, NULL);
  vo = ref_view(&th, o, NULL);
  ASSERT_OK(ref_run(g, ref_op(g, y), &vi, &vo));
  ASSERT_EQ(o[0], loom_f32_to_bf16((float)((1 << 24) + (1 << 17)))); /* above the tie: up */
  ASSERT_EQ(o[1], loom_f32_to_bf16((float)(1 << 24)));               /* the tie: to even */
  loom_graph_destroy(g);
}

/* ---- sources -------------------------------------------------------------------------------- */

TEST(ew_iota_every_dtype_and_axis) {
  int64_t d[3] = {3, 4, 2};
  for (int k = 0; k < EW_N_DTYPES; k++)
    for (int axis = -3; axis < 3; axis++) {
      loom_dtype dt = ew_all_dtypes[k];
      loom_type t = ref_type(dt, 3, d);
      loom_graph *g = ref_graph(0, NULL, NULL);
      loom_value y = loom_iota(g, &t, axis);
      if (y.id < 0) {
        loom_graph_destroy(g);
        ASSERT_EQ(dt, LOOM_BOOL);
        continue;
      }
      char o[24 * 16];
      loom__view vo = ref_view(&t, o, NULL);
      ASSERT_OK(ref_run(g, ref_op(g, y), NULL, &vo));
      loom_graph_destroy(g);
      int a = axis < 0 ? axis + 3 : axis;
      for (int64_t i = 0; i < 24; i++) {
        int64_t idx[3] = {i / 8, i / 2 % 4, i % 2};
        ASSERT_EQ(ref_get(dt, o, i), (double)idx[a]);
        ASSERT_EQ(ref_get_im(dt, o, i), 0);
      }
    }
}

TEST(ew_fill_and_constant) {
  int64_t d[2] = {3, 5};
  for (int k = 0; k < EW_N_DTYPES; k++) {
    loom_dtype dt = ew_all_dtypes[k];
    loom_type t = ref_type(dt, 2, d);
    loom_graph *g = ref_graph(0, NULL, NULL);
    double value = ew_is_int(dt) ? 1 : 0.1;
    loom_value y = loom_fill(g, &t, value);
    ASSERT_TRUE(y.id >= 0);
    char o[15 * 16], want[16];
    loom__view vo = ref_view(&t, o, NULL);
    ASSERT_OK(ref_run(g, ref_op(g, y), NULL, &vo));
    ref_set(dt, want, 0, value);
    for (int64_t i = 0; i < 15; i++)
      ASSERT_TRUE(memcmp(o + i * loom_dtype_size(dt), want, (size_t)loom_dtype_size(dt)) == 0);
    char data[15 * 16];
    for (int64_t i = 0; i < 15; i++) ref_set(dt, data, i, (double)(i % 2));
    loom_value c = loom_constant(g, &t, data);
    ASSERT_OK(ref_run(g, ref_op(g, c), NULL, &vo));
    ASSERT_TRUE(memcmp(o, data, (size_t)(15 * loom_dtype_size(dt))) == 0);
    loom_graph_destroy(g);
  }
  /* An exact int64 fill, beyond what a double holds. */
  int64_t n = 2, big[2];
  loom_type t = ref_type(LOOM_I64, 1, &n);
  loom_attrs a;
  loom_attrs_init(&a);
  a.set = LOOM_ATTR_VALUE;
  a.ivalue = INT64_MAX - 1;
  a.value = (double)a.ivalue;
  a.value_is_int = true;
  loom_graph *g = ref_graph(0, NULL, NULL);
  loom_value y;
  ASSERT_OK(loom_graph_add(g, LOOM_OP_FILL, NULL, 0, &a, &t, NULL, &y, 1));
  loom__view vo = ref_view(&t, big, NULL);
  ASSERT_OK(ref_run(g, ref_op(g, y), NULL, &vo));
  ASSERT_TRUE(big[0] == INT64_MAX - 1 && big[1] == INT64_MAX - 1);
  loom_graph_destroy(g);
}

/* ---- argument checks ------------------------------------------------------------------------ */

TEST(ew_checks_and_unsupported) {
  int64_t d[2] = {2, 3};
  loom_type t = ref_type(LOOM_F32, 2, d);
  loom_value x;
  loom_graph *g = ref_graph(1, &t, &x);
  loom_value y = loom_unary(g, LOOM_OP_EXP, x);
  float in[6] = {0}, out[12];
  int64_t strided[2] = {6, 2};
  loom__view vi = ref_view(&t, in, NULL), vo = ref_view(&t, out, strided);
  ASSERT_STATUS(ref_run(g, ref_op(g, y), &vi, &vo), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "not dense");
  loom_type wrong = ref_type(LOOM_F32, 1, d);
  vo = ref_view(&wrong, out, NULL);
  ASSERT_STATUS(ref_run(g, ref_op(g, y), &vi, &vo), LOOM_ERR_INVALID_ARGUMENT);
  /* A dtype the kernels do not run: exp over integers (the IR rejects it; force it here). */
  g->values[x.id].type.dtype = LOOM_I32;
  g->values[y.id].type.dtype = LOOM_I32;
  loom_type ti = ref_type(LOOM_I32, 2, d);
  vi = ref_view(&ti, in, NULL);
  vo = ref_view(&ti, out, NULL);
  ASSERT_STATUS(ref_run(g, ref_op(g, y), &vi, &vo), LOOM_ERR_UNSUPPORTED);
  ASSERT_CONTAINS(loom_last_error(), "exp");
  ASSERT_CONTAINS(loom_last_error(), "i32");
  loom_graph_destroy(g);
}
