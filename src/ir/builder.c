/* The convenience builders of loom/graph.h: each fills a loom_attrs and makes one
 * loom_graph_add call, so the rules and messages live in one place (infer.c).
 *
 * Errors follow the graph's sticky-error rule: a failing call records the first error in the
 * graph and returns LOOM_VALUE_NONE; once a graph holds an error every builder returns
 * LOOM_VALUE_NONE without doing work. Passing LOOM_VALUE_NONE as an operand is reported by
 * loom_graph_add ("operand 1 is not a value of graph ..."), unless an error is already held.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"

/* Records a misuse of a builder (wrong op kind, bad list) as the graph's sticky error,
 * unless the graph already holds one: the first error wins. */
static loom_value misuse(loom_graph *g, const char *fmt, ...) LOOM_PRINTF(2, 3);
static loom_value misuse(loom_graph *g, const char *fmt, ...) {
  if (g && g->error) return LOOM_VALUE_NONE;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  loom_status s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s", msg);
  if (g) loom__graph_fail(g, s);
  return LOOM_VALUE_NONE;
}

static loom_value add1(loom_graph *g, loom_op op, const loom_value *in, int32_t n, const loom_attrs *attrs,
                       const loom_type *result_type, const void *data) {
  loom_value out = LOOM_VALUE_NONE;
  loom_graph_add(g, op, in, n, attrs, result_type, data, &out, 1);
  return out;
}

static bool op_is(loom_op op, loom__op_class cls) {
  const loom__op_info *info = loom__op_info_of(op);
  return info && info->cls == cls;
}

/* Copies n entries into a list attribute and marks it set; false (error recorded) when n is
 * not 0..LOOM_MAX_RANK or v is NULL with n > 0. */
static bool set_list(loom_graph *g, loom_op op, const char *key, loom_attrs *a, uint32_t bit,
                     loom_int_list *l, int32_t n, const int64_t *v) {
  if (n < 0 || n > LOOM_MAX_RANK) {
    misuse(g, "%s: %s has %d entries, it may have 0..%d", loom_op_name(op), key, (int)n, LOOM_MAX_RANK);
    return false;
  }
  if (n > 0 && !v) {
    misuse(g, "%s: %s is NULL but has %d entries", loom_op_name(op), key, (int)n);
    return false;
  }
  l->count = n;
  if (n > 0) memcpy(l->v, v, sizeof(int64_t) * (size_t)n);
  a->set |= bit;
  return true;
}

loom_value loom_unary(loom_graph *g, loom_op op, loom_value x) {
  if (!op_is(op, LOOM_CLASS_UNARY)) return misuse(g, "loom_unary: %s is not a unary op", loom_op_name(op));
  return add1(g, op, &x, 1, NULL, NULL, NULL);
}

loom_value loom_binary(loom_graph *g, loom_op op, loom_value a, loom_value b) {
  if (!op_is(op, LOOM_CLASS_BINARY) && !op_is(op, LOOM_CLASS_COMPARE) && !op_is(op, LOOM_CLASS_LOGIC))
    return misuse(g, "loom_binary: %s is not a binary op", loom_op_name(op));
  loom_value in[2] = {a, b};
  return add1(g, op, in, 2, NULL, NULL, NULL);
}

loom_value loom_constant(loom_graph *g, const loom_type *type, const void *data) {
  return add1(g, LOOM_OP_CONSTANT, NULL, 0, NULL, type, data);
}

/* double -> int64 as C converts in range (toward zero), saturating outside it, NaN -> 0:
 * a C cast of an out-of-range double is undefined behaviour. */
static int64_t saturate(double v, int64_t lo, int64_t hi) {
  if (isnan(v)) return 0;
  if (v <= (double)lo) return lo;
  if (v >= (double)hi) return hi;
  return (int64_t)v;
}

/* One element of any dtype, in loom_tensor's layout. */
typedef union scalar {
  uint8_t u8;
  int8_t i8;
  int16_t i16;
  int32_t i32;
  int64_t i64;
  uint16_t half;
  float f32[2];
  double f64[2];
} scalar;

static scalar scalar_of(loom_dtype dtype, double v) {
  scalar s;
  memset(&s, 0, sizeof s);
  switch (dtype) {
    case LOOM_BOOL:
      s.u8 = v != 0.0;
      break; /* NaN is true, as in C and NumPy */
    case LOOM_I8:
      s.i8 = (int8_t)saturate(v, INT8_MIN, INT8_MAX);
      break;
    case LOOM_U8:
      s.u8 = (uint8_t)saturate(v, 0, UINT8_MAX);
      break;
    case LOOM_I16:
      s.i16 = (int16_t)saturate(v, INT16_MIN, INT16_MAX);
      break;
    case LOOM_I32:
      s.i32 = (int32_t)saturate(v, INT32_MIN, INT32_MAX);
      break;
    case LOOM_I64:
      s.i64 = saturate(v, INT64_MIN, INT64_MAX);
      break;
    case LOOM_F16:
      s.half = loom_f32_to_f16((float)v);
      break;
    case LOOM_BF16:
      s.half = loom_f32_to_bf16((float)v);
      break;
    case LOOM_F32:
    case LOOM_C64:
      s.f32[0] = (float)v;
      break; /* imaginary part 0 */
    case LOOM_F64:
    case LOOM_C128:
      s.f64[0] = v;
      break;
    default:
      break; /* a bad dtype: loom_graph_add reports it */
  }
  return s;
}

loom_value loom_scalar_f64(loom_graph *g, loom_dtype dtype, double value) {
  scalar data = scalar_of(dtype, value);
  loom_type type;
  memset(&type, 0, sizeof type);
  type.dtype = dtype;
  return add1(g, LOOM_OP_CONSTANT, NULL, 0, NULL, &type, &data);
}

loom_value loom_fill(loom_graph *g, const loom_type *type, double value) {
  loom_attrs a;
  loom_attrs_init(&a);
  a.set = LOOM_ATTR_VALUE;
  a.value = value;
  /* An integral value for an integer or bool fill keeps its exact integer form, so the
   * printer writes `value=3` and the rules check its range exactly. */
  bool int_type = type && (type->dtype == LOOM_BOOL || loom_dtype_is_integer(type->dtype));
  if (int_type && isfinite(value) && value == trunc(value) && fabs(value) < 0x1p63) {
    a.ivalue = (int64_t)value;
    a.value_is_int = true;
  }
  return add1(g, LOOM_OP_FILL, NULL, 0, &a, type, NULL);
}

loom_value loom_iota(loom_graph *g, const loom_type *type, int64_t axis) {
  loom_attrs a;
  loom_attrs_init(&a);
  a.set = LOOM_ATTR_AXIS;
  a.axis = axis;
  return add1(g, LOOM_OP_IOTA, NULL, 0, &a, type, NULL);
}

loom_value loom_select(loom_graph *g, loom_value cond, loom_value a, loom_value b) {
  loom_value in[3] = {cond, a, b};
  return add1(g, LOOM_OP_SELECT, in, 3, NULL, NULL, NULL);
}

loom_value loom_cast(loom_graph *g, loom_value x, loom_dtype to) {
  loom_attrs a;
  loom_attrs_init(&a);
  a.set = LOOM_ATTR_TO;
  a.to = to;
  return add1(g, LOOM_OP_CAST, &x, 1, &a, NULL, NULL);
}

loom_value loom_reshape(loom_graph *g, loom_value x, int32_t rank, const int64_t *shape) {
  loom_attrs a;
  loom_attrs_init(&a);
  if (!set_list(g, LOOM_OP_RESHAPE, "shape", &a, LOOM_ATTR_SHAPE, &a.shape, rank, shape))
    return LOOM_VALUE_NONE;
  return add1(g, LOOM_OP_RESHAPE, &x, 1, &a, NULL, NULL);
}

loom_value loom_transpose(loom_graph *g, loom_value x, int32_t rank, const int64_t *perm) {
  loom_attrs a;
  loom_attrs_init(&a);
  if (!set_list(g, LOOM_OP_TRANSPOSE, "perm", &a, LOOM_ATTR_PERM, &a.perm, rank, perm))
    return LOOM_VALUE_NONE;
  return add1(g, LOOM_OP_TRANSPOSE, &x, 1, &a, NULL, NULL);
}

loom_value loom_broadcast(loom_graph *g, loom_value x, int32_t rank, const int64_t *shape) {
  loom_attrs a;
  loom_attrs_init(&a);
  if (!set_list(g, LOOM_OP_BROADCAST, "shape", &a, LOOM_ATTR_SHAPE, &a.shape, rank, shape))
    return LOOM_VALUE_NONE;
  return add1(g, LOOM_OP_BROADCAST, &x, 1, &a, NULL, NULL);
}

loom_value loom_slice(loom_graph *g, loom_value x, int32_t rank, const int64_t *start, const int64_t *stop,
                      const int64_t *step) {
  loom_attrs a;
  loom_attrs_init(&a);
  if (!set_list(g, LOOM_OP_SLICE, "start", &a, LOOM_ATTR_START, &a.start, rank, start) ||
      !set_list(g, LOOM_OP_SLICE, "stop", &a, LOOM_ATTR_STOP, &a.stop, rank, stop) ||
      (step && !set_list(g, LOOM_OP_SLICE, "step", &a, LOOM_ATTR_STEP, &a.step, rank, step)))
    return LOOM_VALUE_NONE;
  return add1(g, LOOM_OP_SLICE, &x, 1, &a, NULL, NULL);
}

loom_value loom_concat(loom_graph *g, const loom_value *xs, int32_t n, int64_t axis) {
  loom_attrs a;
  loom_attrs_init(&a);
  a.set = LOOM_ATTR_AXIS;
  a.axis = axis;
  return add1(g, LOOM_OP_CONCAT, xs, n, &a, NULL, NULL);
}

loom_value loom_tile(loom_graph *g, loom_value x, int32_t rank, const int64_t *reps) {
  loom_attrs a;
  loom_attrs_init(&a);
  if (!set_list(g, LOOM_OP_TILE, "reps", &a, LOOM_ATTR_REPS, &a.reps, rank, reps)) return LOOM_VALUE_NONE;
  return add1(g, LOOM_OP_TILE, &x, 1, &a, NULL, NULL);
}

loom_value loom_reduce(loom_graph *g, loom_op op, loom_value x, int32_t n_axes, const int64_t *axes,
                       bool keepdims) {
  if (!op_is(op, LOOM_CLASS_REDUCE))
    return misuse(g, "loom_reduce: %s is not a reduce_* op", loom_op_name(op));
  loom_attrs a;
  loom_attrs_init(&a);
  if (!set_list(g, op, "axes", &a, LOOM_ATTR_AXES, &a.axes, n_axes, axes)) return LOOM_VALUE_NONE;
  if (keepdims) {
    a.set |= LOOM_ATTR_KEEPDIMS;
    a.keepdims = true;
  }
  return add1(g, op, &x, 1, &a, NULL, NULL);
}

loom_value loom_argreduce(loom_graph *g, loom_op op, loom_value x, int64_t axis) {
  if (!op_is(op, LOOM_CLASS_ARGREDUCE))
    return misuse(g, "loom_argreduce: %s is not argmax or argmin", loom_op_name(op));
  loom_attrs a;
  loom_attrs_init(&a);
  a.set = LOOM_ATTR_AXIS;
  a.axis = axis;
  return add1(g, op, &x, 1, &a, NULL, NULL);
}

loom_status loom_topk(loom_graph *g, loom_value x, int64_t k, int64_t axis, bool largest,
                      loom_value *out_values, loom_value *out_indices) {
  loom_attrs a;
  loom_attrs_init(&a);
  a.set = LOOM_ATTR_K | LOOM_ATTR_AXIS | LOOM_ATTR_LARGEST;
  a.k = k;
  a.axis = axis;
  a.largest = largest;
  loom_value outs[2];
  loom_status s = loom_graph_add(g, LOOM_OP_TOPK, &x, 1, &a, NULL, NULL, outs, 2);
  if (out_values) *out_values = outs[0];
  if (out_indices) *out_indices = outs[1];
  return s;
}

loom_status loom_quantize(loom_graph *g, loom_value x, loom_dtype to, int64_t axis, loom_value *out_q,
                          loom_value *out_scale) {
  loom_attrs a;
  loom_attrs_init(&a);
  a.set = LOOM_ATTR_TO | (axis >= 0 ? LOOM_ATTR_AXIS : 0);
  a.to = to;
  if (axis >= 0) a.axis = axis; /* unset attributes keep their defaults, as the parser's */
  loom_value outs[2];
  loom_status s = loom_graph_add(g, LOOM_OP_QUANTIZE, &x, 1, &a, NULL, NULL, outs, 2);
  if (out_q) *out_q = outs[0];
  if (out_scale) *out_scale = outs[1];
  return s;
}

loom_value loom_dequantize(loom_graph *g, loom_value q, loom_value scale, int64_t axis) {
  loom_attrs a;
  loom_attrs_init(&a);
  a.set = axis >= 0 ? LOOM_ATTR_AXIS : 0;
  if (axis >= 0) a.axis = axis;
  loom_value in[2] = {q, scale};
  return add1(g, LOOM_OP_DEQUANTIZE, in, 2, &a, NULL, NULL);
}

loom_value loom_dot(loom_graph *g, loom_value a, loom_value b) {
  loom_value in[2] = {a, b};
  return add1(g, LOOM_OP_DOT, in, 2, NULL, NULL, NULL);
}

loom_value loom_conv(loom_graph *g, loom_value x, loom_value w, const int64_t *stride, const int64_t *padding,
                     const int64_t *dilation, int64_t groups) {
  loom_attrs a;
  loom_attrs_init(&a);
  const loom_type *xt = loom_value_type(g, x);
  /* With x missing or of a bad rank the lists are left out: loom_graph_add then reports
   * the operand or the rank, which is the real problem. */
  int32_t ns = xt ? xt->rank - 2 : 0;
  if (ns >= 1 && ns <= 3) {
    if ((stride && !set_list(g, LOOM_OP_CONV, "stride", &a, LOOM_ATTR_STRIDE, &a.stride, ns, stride)) ||
        (padding && !set_list(g, LOOM_OP_CONV, "padding", &a, LOOM_ATTR_PADDING, &a.padding, ns, padding)) ||
        (dilation &&
         !set_list(g, LOOM_OP_CONV, "dilation", &a, LOOM_ATTR_DILATION, &a.dilation, ns, dilation)))
      return LOOM_VALUE_NONE;
  }
  if (groups != 1) {
    a.set |= LOOM_ATTR_GROUPS;
    a.groups = groups;
  }
  loom_value in[2] = {x, w};
  return add1(g, LOOM_OP_CONV, in, 2, &a, NULL, NULL);
}

loom_value loom_fourier(loom_graph *g, loom_op op, loom_value x, int64_t axis, int64_t n) {
  if (!op_is(op, LOOM_CLASS_FOURIER))
    return misuse(g, "loom_fourier: %s is not fft, ifft, rfft or irfft", loom_op_name(op));
  loom_attrs a;
  loom_attrs_init(&a);
  a.set = LOOM_ATTR_AXIS;
  a.axis = axis;
  if (op == LOOM_OP_IRFFT) {
    a.set |= LOOM_ATTR_N;
    a.n = n;
  }
  return add1(g, op, &x, 1, &a, NULL, NULL);
}
