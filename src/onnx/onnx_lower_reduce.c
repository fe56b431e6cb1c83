/* ONNX reductions and what is built on them: Reduce*, ArgMax/ArgMin, Softmax, LogSoftmax,
 * Hardmax, TopK and CumSum. */
#include <math.h>
#include <string.h>

#include "onnx/onnx_internal.h"

#define G (c->g)
#define IN(k) loom__onnx_value(c, k)
#define TY(v) loom__onnx_type(c, v)
#define UN(op, x) loom_unary(G, LOOM_OP_##op, x)
#define BIN(op, a, b) loom_binary(G, LOOM_OP_##op, a, b)
#define K(v, value) loom__onnx_scalar(c, TY(v)->dtype, value)

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_LOGSUM, R_LOGSUMEXP, R_SUMSQUARE };

/* The axes a Reduce* node names, normalized; all of them when it names none (unless
 * noop_with_empty_axes). *out_noop says the node reduces nothing. */
static loom_status reduce_axes(loom__onnx *c, const Onnx__NodeProto *n, int64_t kind, int32_t rank,
                               int64_t *axes, int32_t *count, bool *out_noop) {
  loom_status s = LOOM_OK;
  *count = -1;
  *out_noop = false;
  if (kind == R_SUM && c->opset >= 13) {
    if (loom__onnx_in(c, 1)) s = loom__onnx_in_ints(c, 1, axes, LOOM_MAX_RANK, count);
  } else {
    *count = loom__onnx_attr_ints(n, "axes", axes, LOOM_MAX_RANK);
    if (*count == -2) return loom__onnx_invalid(c, "more axes than dimensions");
  }
  if (s) return s;
  if (*count <= 0) {
    if (loom__onnx_attr_i(n, "noop_with_empty_axes", 0)) {
      *out_noop = true;
      return LOOM_OK;
    }
    for (int32_t i = 0; i < rank; i++) axes[i] = i;
    *count = rank;
  }
  for (int32_t i = 0; i < *count; i++) {
    int32_t a;
    if ((s = loom__onnx_axis(c, axes[i], rank, &a))) return s;
    axes[i] = a;
  }
  return LOOM_OK;
}

static loom_value reduce(loom__onnx *c, loom_op op, loom_value x, int32_t count, const int64_t *axes,
                         bool keep) {
  return loom_reduce(G, op, x, count, axes, keep);
}

static loom_status lower_reduce(loom__onnx *c, const Onnx__NodeProto *n, int64_t kind) {
  loom_value x = IN(0);
  const loom_type t_copy = *TY(x), *t = &t_copy;
  int64_t axes[LOOM_MAX_RANK];
  int32_t count;
  bool noop, keep = loom__onnx_attr_i(n, "keepdims", 1) != 0;
  loom_status s = reduce_axes(c, n, kind, t->rank, axes, &count, &noop);
  if (s) return s;
  if (noop) return loom__onnx_out(c, 0, loom_reshape(G, x, t->rank, t->dims));
  bool is_float = loom_dtype_is_float(t->dtype);
  if ((kind == R_L2 || kind == R_LOGSUM || kind == R_LOGSUMEXP || kind == R_MEAN) && !is_float)
    return loom__onnx_refuse(c, "this reduction of %s (Loom computes it in floats only)",
                             loom_dtype_name(t->dtype));
  loom_value y = LOOM_VALUE_NONE;
  switch (kind) {
    case R_SUM:
      y = reduce(c, LOOM_OP_REDUCE_SUM, x, count, axes, keep);
      break;
    case R_MEAN:
      y = reduce(c, LOOM_OP_REDUCE_MEAN, x, count, axes, keep);
      break;
    case R_MAX:
      y = reduce(c, LOOM_OP_REDUCE_MAX, x, count, axes, keep);
      break;
    case R_MIN:
      y = reduce(c, LOOM_OP_REDUCE_MIN, x, count, axes, keep);
      break;
    case R_PROD:
      y = reduce(c, LOOM_OP_REDUCE_PROD, x, count, axes, keep);
      break;
    case R_L1:
      y = reduce(c, LOOM_OP_REDUCE_SUM, UN(ABS, x), count, axes, keep);
      break;
    case R_L2:
      y = UN(SQRT, reduce(c, LOOM_OP_REDUCE_SUM, BIN(MUL, x, x), count, axes, keep));
      break;
    case R_LOGSUM:
      y = UN(LOG, reduce(c, LOOM_OP_REDUCE_SUM, x, count, axes, keep));
      break;
    case R_SUMSQUARE:
      y = reduce(c, LOOM_OP_REDUCE_SUM, BIN(MUL, x, x), count, axes, keep);
      break;
    case R_LOGSUMEXP: { /* max + log(sum(exp(x - max))): no overflow */
      loom_value m = reduce(c, LOOM_OP_REDUCE_MAX, x, count, axes, true);
      loom_value sum = reduce(c, LOOM_OP_REDUCE_SUM, UN(EXP, BIN(SUB, x, m)), count, axes, true);
      y = BIN(ADD, UN(LOG, sum), m);
      if (!keep) y = reduce(c, LOOM_OP_REDUCE_SUM, y, count, axes, false); /* drops the 1-long axes */
      break;
    }
  }
  return loom__onnx_out(c, 0, y);
}

static loom_status lower_argreduce(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  const loom_type t_copy = *TY(x), *t = &t_copy;
  int32_t axis;
  loom_status s = loom__onnx_axis(c, loom__onnx_attr_i(n, "axis", 0), t->rank, &axis);
  if (s) return s;
  loom_value y;
  if (loom__onnx_attr_i(n, "select_last_index", 0)) {
    /* The last index holding the extreme: the largest index among those equal to it (NaN
     * matching NaN, which reduce_max and reduce_min propagate as argmax and argmin do). */
    int64_t a = axis;
    loom_value m =
        loom_reduce(G, op == LOOM_OP_ARGMAX ? LOOM_OP_REDUCE_MAX : LOOM_OP_REDUCE_MIN, x, 1, &a, true);
    loom_value hit = BIN(OR, BIN(EQ, x, m), BIN(AND, BIN(NE, x, x), BIN(NE, m, m)));
    loom_type it = *t;
    it.dtype = LOOM_I64;
    loom_value idx = loom_select(G, hit, loom_iota(G, &it, axis), loom__onnx_scalar(c, LOOM_I64, -1));
    y = loom_reduce(G, LOOM_OP_REDUCE_MAX, idx, 1, &a, false);
  } else {
    y = loom_argreduce(G, (loom_op)op, x, axis);
  }
  if (loom__onnx_attr_i(n, "keepdims", 1)) {
    loom_type kt = *t;
    kt.dims[axis] = 1;
    y = loom_reshape(G, y, kt.rank, kt.dims);
  }
  return loom__onnx_out(c, 0, y);
}

/* Softmax's input as the op sees it: before opset 13 the axes from `axis` on are one (the
 * input coerced to 2-D), from 13 `axis` alone. *out_x is x reshaped where needed. */
static loom_status softmax_axes(loom__onnx *c, const Onnx__NodeProto *n, loom_value x, loom_value *out_x,
                                int64_t *out_axis) {
  const loom_type t_copy = *TY(x), *t = &t_copy;
  int32_t axis;
  loom_status s = loom__onnx_axis(c, loom__onnx_attr_i(n, "axis", c->opset < 13 ? 1 : -1), t->rank, &axis);
  if (s) return s;
  *out_x = x;
  *out_axis = axis;
  if (c->opset < 13) {
    int64_t dims[2] = {1, 1};
    for (int32_t i = 0; i < t->rank; i++) dims[i < axis ? 0 : 1] *= t->dims[i];
    *out_x = loom_reshape(G, x, 2, dims);
    *out_axis = 1;
  }
  return LOOM_OK;
}

enum { SM_SOFT, SM_LOG, SM_HARD };

static loom_status lower_softmax(loom__onnx *c, const Onnx__NodeProto *n, int64_t kind) {
  loom_value x0 = IN(0), x;
  int64_t axis;
  loom_status s = softmax_axes(c, n, x0, &x, &axis);
  if (s) return s;
  loom_value y;
  if (kind == SM_HARD) {
    const loom_type t_copy = *TY(x), *t = &t_copy;
    loom_value idx = loom_argreduce(G, LOOM_OP_ARGMAX, x, axis);
    loom_type kt = *t;
    kt.dims[axis] = 1;
    loom_type it = *t;
    it.dtype = LOOM_I64;
    loom_value hit = BIN(EQ, loom_iota(G, &it, axis), loom_reshape(G, idx, kt.rank, kt.dims));
    y = loom_cast(G, hit, t->dtype);
  } else {
    loom_value m = loom_reduce(G, LOOM_OP_REDUCE_MAX, x, 1, &axis, true);
    loom_value d = BIN(SUB, x, m), e = UN(EXP, d);
    loom_value sum = loom_reduce(G, LOOM_OP_REDUCE_SUM, e, 1, &axis, true);
    y = kind == SM_LOG ? BIN(SUB, d, UN(LOG, sum)) : BIN(DIV, e, sum);
  }
  const loom_type t0_copy = *TY(x0), *t0 = &t0_copy;
  if (c->opset < 13) y = loom_reshape(G, y, t0->rank, t0->dims);
  return loom__onnx_out(c, 0, y);
}

static loom_status lower_topk(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  const loom_type t_copy = *TY(x), *t = &t_copy;
  int64_t k;
  int32_t count = 1, axis;
  loom_status s = c->opset < 10
                      ? ((k = loom__onnx_attr_i(n, "k", -1)) < 0 ? loom__onnx_invalid(c, "no k") : LOOM_OK)
                      : loom__onnx_in_ints(c, 1, &k, 1, &count);
  if (!s && count != 1) s = loom__onnx_invalid(c, "k must hold one value");
  if (!s) s = loom__onnx_axis(c, loom__onnx_attr_i(n, "axis", -1), t->rank, &axis);
  if (s) return s;
  if (!loom__onnx_attr_i(n, "sorted", 1)) return loom__onnx_refuse(c, "sorted=0");
  loom_value v, i;
  s = loom_topk(G, x, k, axis, loom__onnx_attr_i(n, "largest", 1) != 0, &v, &i);
  if (!s) s = loom__onnx_out(c, 0, v);
  if (!s) s = loom__onnx_out(c, 1, i);
  return s;
}

/* x moved `by` places along axis (towards its start where back), zeros shifted in. */
static loom_value shift_along(loom__onnx *c, loom_value x, int32_t axis, int64_t by, bool back) {
  const loom_type t = *TY(x);
  int64_t lo[LOOM_MAX_RANK] = {0}, hi[LOOM_MAX_RANK];
  for (int32_t i = 0; i < t.rank; i++) hi[i] = t.dims[i];
  lo[axis] = back ? by : 0;
  hi[axis] = back ? t.dims[axis] : t.dims[axis] - by;
  loom_type zt = t;
  zt.dims[axis] = by;
  loom_value kept = loom_slice(G, x, t.rank, lo, hi, NULL), zeros = loom_fill(G, &zt, 0);
  loom_value parts[2] = {back ? kept : zeros, back ? zeros : kept};
  return loom_concat(G, parts, 2, axis);
}

/* CumSum by doubling steps: each adds the sum shifted by 1, 2, 4, ... along the axis, so
 * log2(n) adds; exclusive shifts the input by one first; reverse shifts the other way. */
static loom_status lower_cumsum(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  const loom_type t = *TY(x);
  int64_t a;
  int32_t count, axis;
  loom_status s = loom__onnx_in_ints(c, 1, &a, 1, &count);
  if (!s) s = loom__onnx_axis(c, a, t.rank, &axis);
  if (s) return s;
  bool back = loom__onnx_attr_i(n, "reverse", 0) != 0; /* sums from the end */
  int64_t d = t.dims[axis];
  if (loom__onnx_attr_i(n, "exclusive", 0) && d > 0) x = shift_along(c, x, axis, 1, back);
  for (int64_t by = 1; by < d; by *= 2) x = BIN(ADD, x, shift_along(c, x, axis, by, back));
  return loom__onnx_out(c, 0, loom_reshape(G, x, t.rank, t.dims));
}

/* clang-format off */
const loom__onnx_op loom__onnx_ops_reduce[] = {
    {"ReduceSum", lower_reduce, R_SUM, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceMean", lower_reduce, R_MEAN, "axes,keepdims"}, {"ReduceMax", lower_reduce, R_MAX, "axes,keepdims"},
    {"ReduceMin", lower_reduce, R_MIN, "axes,keepdims"}, {"ReduceProd", lower_reduce, R_PROD, "axes,keepdims"},
    {"ReduceL1", lower_reduce, R_L1, "axes,keepdims"}, {"ReduceL2", lower_reduce, R_L2, "axes,keepdims"},
    {"ReduceLogSum", lower_reduce, R_LOGSUM, "axes,keepdims"},
    {"ReduceLogSumExp", lower_reduce, R_LOGSUMEXP, "axes,keepdims"},
    {"ReduceSumSquare", lower_reduce, R_SUMSQUARE, "axes,keepdims"},
    {"ArgMax", lower_argreduce, LOOM_OP_ARGMAX, "axis,keepdims,select_last_index"},
    {"ArgMin", lower_argreduce, LOOM_OP_ARGMIN, "axis,keepdims,select_last_index"},
    {"Softmax", lower_softmax, SM_SOFT, "axis"}, {"LogSoftmax", lower_softmax, SM_LOG, "axis"},
    {"Hardmax", lower_softmax, SM_HARD, "axis"}, {"TopK", lower_topk, 0, "axis,largest,sorted,k"},
    {"CumSum", lower_cumsum, 0, "exclusive,reverse"},
    {NULL, NULL, 0, NULL},
};
/* clang-format on */
