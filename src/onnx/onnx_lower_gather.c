/* Gather and GatherElements. The IR has no gather: indices known when the model is read become
 * slices and a concat (views where they can be); indices computed at run time become a one-hot
 * mask (index == iota) that selects each value and zeros elsewhere, summed over the indexed
 * axis. Adding zeros is exact (for every value but -0.0, whose sign is lost), so the result is
 * the gathered values themselves. Negative indices count from the end, as ONNX says. */
#include <string.h>

#include "onnx/onnx_internal.h"

#define G (c->g)
#define IN(k) loom__onnx_value(c, k)
#define TY(v) loom__onnx_type(c, v)
#define BIN(op, a, b) loom_binary(G, LOOM_OP_##op, a, b)

/* Indices known now and at most this many are gathered as slices. */
#define SLICED_INDICES 64

/* Gather along axis with known indices: one slice per index, concatenated, reshaped to
 * x.shape[:axis] + indices.shape + x.shape[axis+1:]. */
static loom_status gather_known(loom__onnx *c, loom_value x, int32_t axis, const int64_t *idx, int32_t count,
                                const loom_type *it) {
  const loom_type t_copy = *TY(x), *t = &t_copy;
  int64_t lo[LOOM_MAX_RANK] = {0}, hi[LOOM_MAX_RANK], d = t->dims[axis];
  for (int32_t i = 0; i < t->rank; i++) hi[i] = t->dims[i];
  loom_value parts[SLICED_INDICES];
  int32_t np = 0;
  for (int32_t i = 0; i < count; i++) {
    int64_t at = idx[i] < 0 ? idx[i] + d : idx[i];
    if (at < 0 || at >= d)
      return loom__onnx_invalid(c, "index %lld is outside an axis of %lld", (long long)idx[i], (long long)d);
    /* Runs of consecutive indices are one slice. */
    int32_t j = i;
    while (j + 1 < count && (idx[j + 1] < 0 ? idx[j + 1] + d : idx[j + 1]) == at + (j + 1 - i)) j++;
    lo[axis] = at;
    hi[axis] = at + (j - i + 1);
    parts[np++] = loom_slice(G, x, t->rank, lo, hi, NULL);
    i = j;
  }
  int64_t dims[LOOM_MAX_RANK];
  int32_t r = 0;
  if (t->rank - 1 + it->rank > LOOM_MAX_RANK) return loom__onnx_refuse(c, "a result of rank over 8");
  for (int32_t i = 0; i < axis; i++) dims[r++] = t->dims[i];
  for (int32_t i = 0; i < it->rank; i++) dims[r++] = it->dims[i];
  for (int32_t i = axis + 1; i < t->rank; i++) dims[r++] = t->dims[i];
  loom_value y = np == 1 ? parts[0] : loom_concat(G, parts, np, axis);
  return loom__onnx_out(c, 0, loom_reshape(G, y, r, dims));
}

/* The indices as i64 with negatives made positive for an axis of d. */
static loom_value positive_indices(loom__onnx *c, loom_value idx, int64_t d) {
  if (TY(idx)->dtype != LOOM_I64) idx = loom_cast(G, idx, LOOM_I64);
  loom_value zero = loom__onnx_scalar(c, LOOM_I64, 0);
  return loom_select(G, BIN(LT, idx, zero), BIN(ADD, idx, loom__onnx_scalar(c, LOOM_I64, (double)d)), idx);
}

loom_value loom__onnx_masked_sum(loom__onnx *c, loom_value mask, loom_value values, int64_t axis) {
  loom_dtype d = TY(values)->dtype;
  if (d == LOOM_BOOL) values = loom_cast(G, values, LOOM_U8);
  loom_value sel = loom_select(G, mask, values, loom__onnx_scalar(c, TY(values)->dtype, 0));
  loom_value y = loom_reduce(G, LOOM_OP_REDUCE_SUM, sel, 1, &axis, false);
  return d == LOOM_BOOL ? loom_cast(G, y, LOOM_BOOL) : y;
}

/* Gather with run-time indices: x.shape[:a] + I + [d] + rest against a mask of I + [d]. */
static loom_status gather_onehot(loom__onnx *c, loom_value x, int32_t axis, loom_value idx) {
  const loom_type t = *TY(x), it = *TY(idx);
  int32_t ni = it.rank, r = t.rank + ni;
  if (r > LOOM_MAX_RANK) return loom__onnx_refuse(c, "a result of rank over 8");
  int64_t d = t.dims[axis], xd[LOOM_MAX_RANK], md[LOOM_MAX_RANK], id[LOOM_MAX_RANK];
  for (int32_t i = 0; i < r; i++) {
    bool in_idx = i >= axis && i < axis + ni, at_axis = i == axis + ni;
    xd[i] = in_idx ? 1 : at_axis ? d : t.dims[i < axis ? i : i - ni];
    md[i] = in_idx ? it.dims[i - axis] : at_axis ? d : 1;
    id[i] = in_idx ? it.dims[i - axis] : 1;
  }
  loom_type iot = {LOOM_I64, r, {0}};
  memcpy(iot.dims, md, sizeof md);
  loom_value pos = loom_reshape(G, positive_indices(c, idx, d), r, id);
  loom_value mask = BIN(EQ, pos, loom_iota(G, &iot, axis + ni));
  return loom__onnx_out(c, 0, loom__onnx_masked_sum(c, mask, loom_reshape(G, x, r, xd), axis + ni));
}

static loom_status lower_gather(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  int32_t axis;
  loom_status s = loom__onnx_axis(c, loom__onnx_attr_i(n, "axis", 0), TY(x)->rank, &axis);
  if (s) return s;
  loom__onnx_val *iv = loom__onnx_in(c, 1);
  if (!iv) return loom__onnx_invalid(c, "input 1 is missing");
  int64_t count = 0;
  loom_type_elements(&iv->type, &count);
  if (iv->host && count > 0 && count <= SLICED_INDICES) {
    int64_t idx[SLICED_INDICES];
    int32_t got;
    if ((s = loom__onnx_in_ints(c, 1, idx, SLICED_INDICES, &got))) return s;
    return gather_known(c, x, axis, idx, got, &iv->type);
  }
  return gather_onehot(c, x, axis, loom__onnx_materialize(c, iv));
}

/* GatherElements: out[i..] = x[i.. with idx[i..] on axis]; idx's shape, at most x's on the other
 * axes. The mask is idx with a new last axis of d against an iota, x moved so axis is last. */
static loom_status lower_gather_elements(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0), idx = IN(1);
  const loom_type t = *TY(x), it = *TY(idx);
  int32_t axis, r = t.rank;
  loom_status s = loom__onnx_axis(c, loom__onnx_attr_i(n, "axis", 0), r, &axis);
  if (s) return s;
  if (it.rank != r || r + 1 > LOOM_MAX_RANK)
    return loom__onnx_refuse(c, "indices of another rank, or rank 8");
  int64_t d = t.dims[axis], lo[LOOM_MAX_RANK] = {0}, hi[LOOM_MAX_RANK], perm[LOOM_MAX_RANK],
          dims[LOOM_MAX_RANK + 1];
  for (int32_t i = 0; i < r; i++) hi[i] = i == axis ? d : it.dims[i];
  x = loom_slice(G, x, r, lo, hi, NULL); /* the other axes cut to the indices' */
  for (int32_t i = 0, j = 0; i < r; i++)
    if (i != axis) perm[j++] = i;
  perm[r - 1] = axis;
  x = loom_transpose(G, x, r, perm); /* [other axes in order..., d] */
  loom_value pos = positive_indices(c, idx, d);
  pos = loom_transpose(G, pos, r, perm);
  const loom_type pt_copy = *TY(pos), *pt = &pt_copy;
  for (int32_t i = 0; i < r; i++) dims[i] = pt->dims[i];
  dims[r] = 1;
  loom_value posr = loom_reshape(G, pos, r + 1, dims);
  for (int32_t i = 0; i < r - 1; i++) dims[i] = pt->dims[i];
  dims[r - 1] = 1;
  dims[r] = d;
  loom_value xr = loom_reshape(G, x, r + 1, dims); /* [others..., 1, d] */
  loom_type iot = {LOOM_I64, r + 1, {0}};
  for (int32_t i = 0; i < r; i++) iot.dims[i] = pt->dims[i];
  iot.dims[r] = d;
  loom_value mask = BIN(EQ, posr, loom_iota(G, &iot, r));
  loom_value y = loom__onnx_masked_sum(c, mask, xr, r); /* [others..., k] in the transposed order */
  int64_t inv[LOOM_MAX_RANK];
  for (int32_t i = 0; i < r; i++) inv[perm[i]] = i;
  return loom__onnx_out(c, 0, loom_transpose(G, y, r, inv));
}

/* GatherND (batch_dims 0): the first k axes of data, k the indices' last length, are one axis
 * of their product, and each index tuple its linear index (negative entries counted from their
 * axis' end), gathered through the mask as Gather's run-time indices are. */
static loom_status lower_gather_nd(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0), idx = IN(1);
  const loom_type t = *TY(x), it = *TY(idx);
  if (loom__onnx_attr_i(n, "batch_dims", 0)) return loom__onnx_refuse(c, "batch_dims other than 0");
  if (it.rank < 1) return loom__onnx_invalid(c, "indices of rank 0");
  int64_t k = it.dims[it.rank - 1], prod = 1, dims[LOOM_MAX_RANK], strides[LOOM_MAX_RANK],
          sizes[LOOM_MAX_RANK];
  if (k < 1 || k > t.rank)
    return loom__onnx_invalid(c, "index tuples of %lld for a rank-%d input", (long long)k, t.rank);
  for (int64_t j = k - 1; j >= 0; j--) strides[j] = prod, sizes[j] = t.dims[j], prod *= t.dims[j];
  dims[0] = prod;
  for (int32_t i = (int32_t)k; i < t.rank; i++) dims[i - k + 1] = t.dims[i];
  loom_value flat = loom_reshape(G, x, t.rank - (int32_t)k + 1, dims);
  loom_type kt = {LOOM_I64, 1, {k}};
  loom_value st = loom_constant(G, &kt, strides), sz = loom_constant(G, &kt, sizes);
  loom_value pos = TY(idx)->dtype == LOOM_I64 ? idx : loom_cast(G, idx, LOOM_I64);
  pos = loom_select(G, BIN(LT, pos, loom__onnx_scalar(c, LOOM_I64, 0)), BIN(ADD, pos, sz), pos);
  int64_t last = it.rank - 1;
  loom_value lin = loom_reduce(G, LOOM_OP_REDUCE_SUM, BIN(MUL, pos, st), 1, &last, false);
  return gather_onehot(c, flat, 0, lin);
}

/* v grown to `dims` along each of its first r axes by `fill` at the end (a scatter's block
 * back to the data's size). */
static loom_value grow_to(loom__onnx *c, loom_value v, int32_t r, const int64_t *dims, double fill) {
  for (int32_t i = 0; i < r; i++) {
    const loom_type t = *TY(v);
    if (t.dims[i] == dims[i]) continue;
    loom_type pt = t;
    pt.dims[i] = dims[i] - t.dims[i];
    loom_value parts[2] = {v, loom_fill(G, &pt, fill)};
    v = loom_concat(G, parts, 2, i);
  }
  return v;
}

/* ScatterElements (and opset 9's Scatter): data with updates written where indices point along
 * axis. With the axis moved last, a mask [others..., k, d] of index == iota picks, for each
 * data element, the update aimed at it (summed: reduction add adds them to the data; with none,
 * duplicate indices are undefined in ONNX and here give their sum). */
static loom_status lower_scatter_elements(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0), idx = IN(1), upd = IN(2);
  const loom_type t = *TY(x), it = *TY(idx);
  int32_t axis, r = t.rank;
  loom_status s = loom__onnx_axis(c, loom__onnx_attr_i(n, "axis", 0), r, &axis);
  if (s) return s;
  bool add = loom__onnx_attr_s_is(n, "reduction", "add", false);
  if (!add && !loom__onnx_attr_s_is(n, "reduction", "none", true))
    return loom__onnx_refuse(c, "this reduction");
  if (it.rank != r || r + 1 > LOOM_MAX_RANK)
    return loom__onnx_refuse(c, "indices of another rank, or rank 8");
  int64_t d = t.dims[axis], perm[LOOM_MAX_RANK], inv[LOOM_MAX_RANK], dims[LOOM_MAX_RANK + 1],
          full[LOOM_MAX_RANK];
  for (int32_t i = 0, j = 0; i < r; i++)
    if (i != axis) perm[j++] = i;
  perm[r - 1] = axis;
  for (int32_t i = 0; i < r; i++) inv[perm[i]] = i;
  loom_value xt = loom_transpose(G, x, r, perm); /* [others..., d] */
  loom_value pos = loom_transpose(G, positive_indices(c, idx, d), r, perm);
  loom_value ut = loom_transpose(G, upd, r, perm);
  const loom_type pt = *TY(pos), xtt = *TY(xt);
  for (int32_t i = 0; i < r; i++) dims[i] = pt.dims[i], full[i] = xtt.dims[i];
  dims[r] = 1;
  loom_type iot = {LOOM_I64, r + 1, {0}};
  for (int32_t i = 0; i < r; i++) iot.dims[i] = pt.dims[i];
  iot.dims[r] = d;
  loom_value mask = BIN(EQ, loom_reshape(G, pos, r + 1, dims), loom_iota(G, &iot, r)); /* [o..., k, d] */
  loom_value contrib = loom__onnx_masked_sum(c, mask, loom_reshape(G, ut, r + 1, dims), r - 1);
  int64_t kaxis = r - 1;
  loom_value hit = loom_reduce(G, LOOM_OP_REDUCE_MAX, loom_cast(G, mask, LOOM_U8), 1, &kaxis, false);
  full[r - 1] = d;
  contrib = grow_to(c, contrib, r - 1, full, 0);
  hit = BIN(NE, grow_to(c, hit, r - 1, full, 0), loom__onnx_scalar(c, LOOM_U8, 0));
  loom_value y = add ? BIN(ADD, xt, contrib) : loom_select(G, hit, contrib, xt);
  return loom__onnx_out(c, 0, loom_transpose(G, y, r, inv));
}

/* clang-format off */
const loom__onnx_op loom__onnx_ops_gather[] = {
    {"Gather", lower_gather, 0, "axis"}, {"GatherElements", lower_gather_elements, 0, "axis"},
    {"ScatterElements", lower_scatter_elements, 0, "axis,reduction"},
    {"Scatter", lower_scatter_elements, 0, "axis"}, {"GatherND", lower_gather_nd, 0, "batch_dims"},
    {NULL, NULL, 0, NULL},
};
/* clang-format on */
