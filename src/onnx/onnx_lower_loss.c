/* ONNX's losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (LogSoftmax over the
 * classes, then the same loss). The class each element takes is a one-hot mask of the target
 * against an iota over axis 1, summed with the input (loom__onnx_masked_sum: exact). */
#include <string.h>

#include "onnx/onnx_internal.h"

#define G (c->g)
#define TY(v) loom__onnx_type(c, v)
#define UN(op, x) loom_unary(G, LOOM_OP_##op, x)
#define BIN(op, a, b) loom_binary(G, LOOM_OP_##op, a, b)
#define K(v, value) loom__onnx_scalar(c, TY(v)->dtype, value)

enum { RED_NONE, RED_SUM, RED_MEAN };

/* The reduction attribute; -1 for one the spec does not define. */
static int reduction_of(const Onnx__NodeProto *n) {
  if (loom__onnx_attr_s_is(n, "reduction", "mean", true)) return RED_MEAN;
  if (loom__onnx_attr_s_is(n, "reduction", "sum", false)) return RED_SUM;
  if (loom__onnx_attr_s_is(n, "reduction", "none", false)) return RED_NONE;
  return -1;
}

/* The loss of log-probabilities x [N, C, d...] against targets t [N, d...], weighted by w [C]
 * (w.id < 0: none), with targets equal to ignore_index (when has_ignore) counting nothing. */
static loom_status nll(loom__onnx *c, const Onnx__NodeProto *n, loom_value x, loom_value t, loom_value w,
                       loom_value *out) {
  const loom_type xt = *TY(x), tt = *TY(t);
  int red = reduction_of(n);
  if (red < 0) return loom__onnx_refuse(c, "this reduction");
  if (xt.rank < 2 || tt.rank != xt.rank - 1)
    return loom__onnx_invalid(c, "input [N, C, d...] and target [N, d...]");
  if (!loom_dtype_is_float(xt.dtype)) return loom__onnx_refuse(c, "a loss of %s", loom_dtype_name(xt.dtype));
  bool has_ignore = loom__onnx_attr(n, "ignore_index") != NULL;
  int64_t ignore = loom__onnx_attr_i(n, "ignore_index", 0);
  int64_t dims[LOOM_MAX_RANK], wdims[LOOM_MAX_RANK];
  for (int32_t i = 0; i < xt.rank; i++) dims[i] = i == 1 ? 1 : tt.dims[i < 1 ? i : i - 1];
  for (int32_t i = 0; i < xt.rank; i++) wdims[i] = i == 1 ? xt.dims[1] : 1;
  if (tt.dtype != LOOM_I64) t = loom_cast(G, t, LOOM_I64);
  loom_type it = xt;
  it.dtype = LOOM_I64;
  loom_value mask = BIN(EQ, loom_reshape(G, t, xt.rank, dims), loom_iota(G, &it, 1));
  loom_value loss = UN(NEG, loom__onnx_masked_sum(c, mask, x, 1));
  loom_value weight = LOOM_VALUE_NONE; /* per element of the loss; none means 1 */
  if (w.id >= 0) weight = loom__onnx_masked_sum(c, mask, loom_reshape(G, w, xt.rank, wdims), 1);
  if (has_ignore) {
    loom_value keep = BIN(NE, t, loom__onnx_scalar(c, LOOM_I64, (double)ignore));
    weight = loom_select(G, keep, weight.id >= 0 ? weight : K(x, 1), K(x, 0));
  }
  if (weight.id >= 0) loss = BIN(MUL, loss, weight);
  if (red == RED_NONE) {
    *out = loss;
    return LOOM_OK;
  }
  int64_t axes[LOOM_MAX_RANK];
  for (int32_t i = 0; i < tt.rank; i++) axes[i] = i;
  loom_value sum = loom_reduce(G, LOOM_OP_REDUCE_SUM, loss, tt.rank, axes, false);
  if (red == RED_SUM) {
    *out = sum;
  } else if (weight.id < 0) {
    *out = loom_reduce(G, LOOM_OP_REDUCE_MEAN, loss, tt.rank, axes, false);
  } else {
    if (TY(weight)->rank != tt.rank) weight = loom_broadcast(G, weight, tt.rank, tt.dims);
    *out = BIN(DIV, sum, loom_reduce(G, LOOM_OP_REDUCE_SUM, weight, tt.rank, axes, false));
  }
  return LOOM_OK;
}

static loom_status lower_nll(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value w = loom__onnx_in(c, 2) ? loom__onnx_value(c, 2) : LOOM_VALUE_NONE, y;
  loom_status s = nll(c, n, loom__onnx_value(c, 0), loom__onnx_value(c, 1), w, &y);
  return s ? s : loom__onnx_out(c, 0, y);
}

static loom_status lower_sce(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = loom__onnx_value(c, 0);
  if (TY(x)->rank < 2) return loom__onnx_invalid(c, "scores must be [N, C, d...]");
  int64_t axis = 1;
  loom_value m = loom_reduce(G, LOOM_OP_REDUCE_MAX, x, 1, &axis, true);
  loom_value d = BIN(SUB, x, m);
  loom_value lse = UN(LOG, loom_reduce(G, LOOM_OP_REDUCE_SUM, UN(EXP, d), 1, &axis, true));
  loom_value logp = BIN(SUB, d, lse);
  loom_value w = loom__onnx_in(c, 2) ? loom__onnx_value(c, 2) : LOOM_VALUE_NONE, y;
  loom_status s = nll(c, n, logp, loom__onnx_value(c, 1), w, &y);
  if (!s) s = loom__onnx_out(c, 0, y);
  if (!s) s = loom__onnx_out(c, 1, logp);
  return s;
}

/* clang-format off */
const loom__onnx_op loom__onnx_ops_loss[] = {
    {"NegativeLogLikelihoodLoss", lower_nll, 0, "ignore_index,reduction"},
    {"SoftmaxCrossEntropyLoss", lower_sce, 0, "ignore_index,reduction"},
    {NULL, NULL, 0, NULL},
};
/* clang-format on */
