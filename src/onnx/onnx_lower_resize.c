/* Resize (opset 11 on), modes nearest and linear. A Loom graph's sizes are fixed, so the input
 * element each output element reads along an axis is known when the model is read: nearest is
 * a gather with known indices per axis (slices and a concat, consecutive indices one slice),
 * linear the two neighbours' gathers weighted by constants. Cubic, tf_crop_and_resize and
 * exclude_outside are refused. */
#include <math.h>
#include <string.h>

#include "onnx/onnx_internal.h"

#define G (c->g)
#define TY(v) loom__onnx_type(c, v)
#define BIN(op, a, b) loom_binary(G, LOOM_OP_##op, a, b)

/* Output elements along one axis this lowering builds at most (one slice each at worst). */
#define MAX_OUT 256

/* x's elements idx[0..n) along axis, in that order. */
static loom_value take(loom__onnx *c, loom_value x, int32_t axis, const int64_t *idx, int32_t n) {
  const loom_type t = *TY(x);
  int64_t lo[LOOM_MAX_RANK] = {0}, hi[LOOM_MAX_RANK];
  for (int32_t i = 0; i < t.rank; i++) hi[i] = t.dims[i];
  loom_value parts[MAX_OUT];
  int32_t np = 0;
  for (int32_t i = 0; i < n; i++) {
    int32_t j = i;
    while (j + 1 < n && idx[j + 1] == idx[i] + (j + 1 - i)) j++;
    lo[axis] = idx[i];
    hi[axis] = idx[i] + (j - i + 1);
    parts[np++] = loom_slice(G, x, t.rank, lo, hi, NULL);
    i = j;
  }
  return np == 1 ? parts[0] : loom_concat(G, parts, np, axis);
}

/* The input coordinate output element o maps to, as coordinate_transformation_mode says
 * (scale: the output's length over the input's, given or from `sizes`). */
static double source_coord(const Onnx__NodeProto *n, int64_t o, int64_t in, int64_t out, double scale) {
  if (loom__onnx_attr_s_is(n, "coordinate_transformation_mode", "asymmetric", false))
    return (double)o / scale;
  if (loom__onnx_attr_s_is(n, "coordinate_transformation_mode", "align_corners", false))
    /* The output's length as the scale gives it, unrounded (as ONNX's reference does). */
    return out == 1 ? 0.0 : (double)o * (double)(in - 1) / ((double)in * scale - 1.0);
  if (loom__onnx_attr_s_is(n, "coordinate_transformation_mode", "pytorch_half_pixel", false))
    return out > 1 ? ((double)o + 0.5) / scale - 0.5 : 0.0;
  if (loom__onnx_attr_s_is(n, "coordinate_transformation_mode", "tf_half_pixel_for_nn", false))
    return ((double)o + 0.5) / scale;
  return ((double)o + 0.5) / scale - 0.5; /* half_pixel */
}

/* Whether coordinate_transformation_mode is one source_coord knows. */
static bool known_mode(const Onnx__NodeProto *n) {
  static const char *modes[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                "tf_half_pixel_for_nn"};
  if (!loom__onnx_attr(n, "coordinate_transformation_mode")) return true;
  for (int i = 0; i < 5; i++)
    if (loom__onnx_attr_s_is(n, "coordinate_transformation_mode", modes[i], false)) return true;
  return false;
}

static int64_t nearest(const Onnx__NodeProto *n, double x, int64_t in) {
  double f = floor(x), frac = x - f;
  int64_t i;
  if (loom__onnx_attr_s_is(n, "nearest_mode", "floor", false))
    i = (int64_t)f;
  else if (loom__onnx_attr_s_is(n, "nearest_mode", "ceil", false))
    i = (int64_t)ceil(x);
  else if (loom__onnx_attr_s_is(n, "nearest_mode", "round_prefer_ceil", false))
    i = (int64_t)(frac >= 0.5 ? f + 1 : f);
  else
    i = (int64_t)(frac > 0.5 ? f + 1 : f); /* round_prefer_floor */
  return i < 0 ? 0 : i >= in ? in - 1 : i;
}

/* The output sizes and scales: from `sizes` (input 3) or `scales` (input 2). */
static loom_status out_sizes(loom__onnx *c, const loom_type *t, int64_t *out, double *scale) {
  int32_t cnt;
  loom__onnx_val *sv = loom__onnx_in(c, 2);
  if (loom__onnx_in(c, 3)) {
    loom_status s = loom__onnx_in_ints(c, 3, out, LOOM_MAX_RANK, &cnt);
    if (s) return s;
    if (cnt != t->rank) return loom__onnx_invalid(c, "sizes has %d entries for rank %d", cnt, t->rank);
    for (int32_t i = 0; i < t->rank; i++) scale[i] = t->dims[i] ? (double)out[i] / (double)t->dims[i] : 1.0;
    return LOOM_OK;
  }
  int64_t n = 0;
  if (sv) loom_type_elements(&sv->type, &n);
  if (!sv || !sv->host || sv->type.dtype != LOOM_F32 || n != t->rank)
    return loom__onnx_refuse(c, "scales (one float per axis) must be known when the model is read");
  for (int32_t i = 0; i < t->rank; i++) {
    scale[i] = ((const float *)sv->host)[i];
    out[i] = (int64_t)floor((double)t->dims[i] * scale[i]);
  }
  return LOOM_OK;
}

/* One axis resized linearly: (1 - w) x[i0] + w x[i1], w a constant along the axis. */
static loom_value linear_axis(loom__onnx *c, const Onnx__NodeProto *n, loom_value x, int32_t axis,
                              int64_t out, double scale) {
  const loom_type t = *TY(x);
  int64_t in = t.dims[axis], i0[MAX_OUT], i1[MAX_OUT];
  double w[MAX_OUT];
  for (int64_t o = 0; o < out; o++) {
    double s = source_coord(n, o, in, out, scale);
    s = s < 0 ? 0 : s > (double)(in - 1) ? (double)(in - 1) : s;
    i0[o] = (int64_t)floor(s);
    i1[o] = i0[o] + 1 < in ? i0[o] + 1 : in - 1;
    w[o] = s - (double)i0[o];
  }
  loom_type wt = {LOOM_F64, t.rank, {0}};
  for (int32_t i = 0; i < t.rank; i++) wt.dims[i] = i == axis ? out : 1;
  loom_value wv = loom_constant(G, &wt, w);
  if (t.dtype != LOOM_F64) wv = loom_cast(G, wv, t.dtype);
  loom_value a = take(c, x, axis, i0, (int32_t)out), b = take(c, x, axis, i1, (int32_t)out);
  return BIN(ADD, a, BIN(MUL, BIN(SUB, b, a), wv));
}

static loom_status lower_resize(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  if (c->opset < 11) return loom__onnx_refuse(c, "Resize before opset 11");
  bool linear = loom__onnx_attr_s_is(n, "mode", "linear", false);
  if (!linear && !loom__onnx_attr_s_is(n, "mode", "nearest", true)) return loom__onnx_refuse(c, "mode cubic");
  if (loom__onnx_attr_i(n, "exclude_outside", 0)) return loom__onnx_refuse(c, "exclude_outside=1");
  if (!known_mode(n)) return loom__onnx_refuse(c, "this coordinate_transformation_mode (tf_crop_and_resize)");
  loom_value x = loom__onnx_value(c, 0);
  const loom_type t = *TY(x);
  if (linear && !loom_dtype_is_float(t.dtype))
    return loom__onnx_refuse(c, "linear resize of %s", loom_dtype_name(t.dtype));
  int64_t out[LOOM_MAX_RANK];
  double scale[LOOM_MAX_RANK];
  loom_status s = out_sizes(c, &t, out, scale);
  if (s) return s;
  for (int32_t a = 0; a < t.rank && x.id >= 0; a++) {
    if (out[a] == t.dims[a] && scale[a] == 1.0) continue;
    if (out[a] < 1 || out[a] > MAX_OUT)
      return loom__onnx_refuse(c, "an axis resized to %lld (1 to %d)", (long long)out[a], MAX_OUT);
    if (linear) {
      x = linear_axis(c, n, x, a, out[a], scale[a]);
      continue;
    }
    int64_t idx[MAX_OUT];
    for (int64_t o = 0; o < out[a]; o++)
      idx[o] = nearest(n, source_coord(n, o, t.dims[a], out[a], scale[a]), t.dims[a]);
    x = take(c, x, a, idx, (int32_t)out[a]);
  }
  if (x.id >= 0 && loom_value_name(G, x)) x = loom_reshape(G, x, t.rank, TY(x)->dims);
  return loom__onnx_out(c, 0, x);
}

/* clang-format off */
const loom__onnx_op loom__onnx_ops_resize[] = {
    {"Resize", lower_resize, 0,
     "coordinate_transformation_mode,cubic_coeff_a,exclude_outside,extrapolation_value,mode,nearest_mode"},
    {NULL, NULL, 0, NULL},
};
/* clang-format on */
