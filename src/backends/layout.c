/* The layout ops (reshape, transpose, broadcast, slice, concat, tile) on a device, for every
 * backend that has a strided copy: each op is one or more copies between strided views, so a
 * backend supplies the copy and this file the index arithmetic and the checks. */
#include "backends/backend.h"
#include "backends/gpu/gpu_meta.h" /* LM_COPY_RANK: the copy kernels' largest rank */

static int64_t elements(const loom_type *t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->rank; i++) n *= t->dims[i];
  return n;
}

bool loom__dview_broadcast_strides(const loom__dview *in, const loom_type *shape, int64_t *st) {
  int32_t shift = shape->rank - in->type.rank;
  if (shift < 0) return false;
  for (int32_t i = 0; i < shape->rank; i++) {
    int32_t j = i - shift;
    if (j >= 0 && in->type.dims[j] != shape->dims[i] && in->type.dims[j] != 1) return false;
    st[i] = (j < 0 || (in->type.dims[j] == 1 && shape->dims[i] != 1)) ? 0 : in->strides[j];
  }
  return true;
}

typedef struct layout_dev {
  void *dev;
  const char *id;
  loom__strided_copy_fn copy;
} layout_dev;

static loom_status layout_bad(const layout_dev *d, const loom__op *op, const loom__dview *in,
                              const loom__dview *out, const char *why) {
  char a[LOOM_TYPE_STRING_MAX], b[LOOM_TYPE_STRING_MAX];
  return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: %s to %s: %s", d->id, loom_op_name(op->kind),
                     loom_type_format(&in->type, a, sizeof a), loom_type_format(&out->type, b, sizeof b),
                     why);
}

static loom_status copy_view(layout_dev *d, int32_t rank, const int64_t *dims, const loom__dview *out,
                             const int64_t *out_strides, int64_t out_off, const loom__dview *in,
                             const int64_t *in_strides, int64_t in_off) {
  return d->copy(d->dev, loom_dtype_size(in->type.dtype), rank, dims, out->buffer, out_off, out_strides,
                 in->buffer, in_off, in_strides);
}

static loom_status run_concat(layout_dev *d, const loom__op_call *c) {
  const loom__dview *out = &c->out[0];
  const loom_type *o = &out->type;
  int32_t axis;
  if (!loom__axis_normalize(c->op->attrs.axis, o->rank, &axis))
    return layout_bad(d, c->op, &c->in[0], out, "axis is out of range");
  int64_t at = 0, strides[LOOM_MAX_RANK];
  loom__view_dense_strides(o, strides);
  for (int32_t j = 0; j < c->op->n_inputs; j++) {
    const loom_type *t = &c->in[j].type;
    bool ok = t->rank == o->rank;
    for (int32_t k = 0; ok && k < t->rank; k++) ok = k == axis || t->dims[k] == o->dims[k];
    if (!ok || at + t->dims[axis] > o->dims[axis])
      return layout_bad(d, c->op, &c->in[j], out, "shapes do not concatenate");
    loom_status s = copy_view(d, t->rank, t->dims, out, strides, out->offset + at * strides[axis], &c->in[j],
                              c->in[j].strides, c->in[j].offset);
    if (s) return s;
    at += t->dims[axis];
  }
  return at == o->dims[axis] ? LOOM_OK
                             : layout_bad(d, c->op, &c->in[0], out, "operands do not fill the output");
}

static loom_status run_tile(layout_dev *d, const loom__op_call *c) {
  const loom__dview *in = &c->in[0], *out = &c->out[0];
  const loom_int_list *reps = &c->op->attrs.reps;
  const loom_type *t = &in->type;
  if (reps->count > t->rank || out->type.rank != t->rank)
    return layout_bad(d, c->op, in, out, "reps do not match the rank");
  int64_t dims[LM_COPY_RANK], dst[LM_COPY_RANK], src[LM_COPY_RANK], ostrides[LOOM_MAX_RANK];
  loom__view_dense_strides(&out->type, ostrides);
  int32_t lead = t->rank - reps->count;
  for (int32_t k = 0; k < t->rank; k++) {
    int64_t rep = k < lead ? 1 : reps->v[k - lead];
    if (rep < 0 || out->type.dims[k] != t->dims[k] * rep)
      return layout_bad(d, c->op, in, out, "shapes do not match reps");
    dims[2 * k] = rep;
    dims[2 * k + 1] = t->dims[k];
    dst[2 * k] = t->dims[k] * ostrides[k];
    dst[2 * k + 1] = ostrides[k];
    src[2 * k] = 0;
    src[2 * k + 1] = in->strides[k];
  }
  return copy_view(d, 2 * t->rank, dims, out, dst, out->offset, in, src, in->offset);
}

static loom_status run_slice(layout_dev *d, const loom__op_call *c) {
  const loom__dview *in = &c->in[0], *out = &c->out[0];
  const loom_attrs *a = &c->op->attrs;
  const loom_type *t = &in->type;
  bool has_step = (a->set & LOOM_ATTR_STEP) != 0;
  if (a->start.count != t->rank || out->type.rank != t->rank || (has_step && a->step.count != t->rank))
    return layout_bad(d, c->op, in, out, "start/step do not match the rank");
  int64_t strides[LOOM_MAX_RANK], offset = in->offset;
  for (int32_t k = 0; k < t->rank; k++) {
    int64_t start = a->start.v[k], step = has_step ? a->step.v[k] : 1, n = out->type.dims[k];
    if (start < 0 || step < 1 || (n > 0 && (start >= t->dims[k] || (t->dims[k] - 1 - start) / step < n - 1)))
      return layout_bad(d, c->op, in, out, "the slice reads outside the input");
    offset += start * in->strides[k];
    strides[k] = in->strides[k] * step;
  }
  return copy_view(d, t->rank, out->type.dims, out, NULL, out->offset, in, strides, offset);
}

static loom_status run_transpose(layout_dev *d, const loom__op_call *c) {
  const loom__dview *in = &c->in[0], *out = &c->out[0];
  const loom_int_list *perm = &c->op->attrs.perm;
  int64_t strides[LOOM_MAX_RANK];
  uint32_t seen = 0;
  if (perm->count != in->type.rank || out->type.rank != in->type.rank)
    return layout_bad(d, c->op, in, out, "perm does not match the rank");
  for (int32_t k = 0; k < perm->count; k++) {
    int64_t p = perm->v[k];
    if (p < 0 || p >= in->type.rank || (seen & (1u << p)))
      return layout_bad(d, c->op, in, out, "perm is not a permutation");
    seen |= 1u << p;
    if (out->type.dims[k] != in->type.dims[p])
      return layout_bad(d, c->op, in, out, "shapes do not match perm");
    strides[k] = in->strides[p];
  }
  return copy_view(d, out->type.rank, out->type.dims, out, NULL, out->offset, in, strides, in->offset);
}

static loom_status run_layout(layout_dev *d, const loom__op_call *c) {
  const loom__dview *in = &c->in[0], *out = &c->out[0];
  for (int32_t j = 0; j < c->op->n_inputs; j++)
    if (c->in[j].type.dtype != out->type.dtype) return layout_bad(d, c->op, &c->in[j], out, "dtypes differ");
  switch (c->op->kind) {
    case LOOM_OP_RESHAPE:
      if (elements(&in->type) != elements(&out->type))
        return layout_bad(d, c->op, in, out, "element counts differ");
      return copy_view(d, in->type.rank, in->type.dims, out, NULL, out->offset, in, in->strides, in->offset);
    case LOOM_OP_TRANSPOSE:
      return run_transpose(d, c);
    case LOOM_OP_BROADCAST: {
      int64_t st[LOOM_MAX_RANK];
      if (!loom__dview_broadcast_strides(in, &out->type, st))
        return layout_bad(d, c->op, in, out, "shapes do not broadcast");
      return copy_view(d, out->type.rank, out->type.dims, out, NULL, out->offset, in, st, in->offset);
    }
    case LOOM_OP_SLICE:
      return run_slice(d, c);
    case LOOM_OP_CONCAT:
      return run_concat(d, c);
    case LOOM_OP_TILE:
      return run_tile(d, c);
    default:
      return loom__error(LOOM_ERR_INTERNAL, "%s: %s is not a layout op", d->id, loom_op_name(c->op->kind));
  }
}

loom_status loom__layout_run(void *dev, const char *id, loom__strided_copy_fn copy, const loom__op_call *c) {
  layout_dev d = {dev, id, copy};
  return run_layout(&d, c);
}
