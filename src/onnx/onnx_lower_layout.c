/* ONNX ops that move data without arithmetic: Reshape, Flatten, Squeeze, Unsqueeze, Transpose,
 * Concat, Slice, Split, Expand, Tile, Pad, DepthToSpace, SpaceToDepth, and the sources Shape,
 * Size, Constant and ConstantOfShape, whose contents are known when the model is read. */
#include <math.h>
#include <string.h>

#include "onnx/onnx_internal.h"

#define G (c->g)
#define IN(k) loom__onnx_value(c, k)
#define TY(v) loom__onnx_type(c, v)

/* Constants this small are reshaped by copying their bytes, so a shape computed from them stays
 * known; larger ones are reshaped in the graph, holding their data once. */
#define SMALL_CONSTANT_BYTES 4096

/* Output 0 as input 0 with type `t` (same elements): a copy of known contents where they are
 * small, else a reshape view. */
static loom_status out_reshaped(loom__onnx *c, const loom_type *t) {
  loom__onnx_val *x = loom__onnx_in(c, 0);
  if (!x) return loom__onnx_invalid(c, "input 0 is missing");
  int64_t bytes;
  loom_type_bytes(t, &bytes);
  if (x->host && bytes <= SMALL_CONSTANT_BYTES) {
    void *copy = loom__malloc(bytes ? (size_t)bytes : 1);
    if (!copy) return loom__oom("a constant");
    memcpy(copy, x->host, (size_t)bytes);
    return loom__onnx_out_const(c, 0, t, copy);
  }
  return loom__onnx_out(c, 0, loom_reshape(G, loom__onnx_materialize(c, x), t->rank, t->dims));
}

static loom_status type_of_in(loom__onnx *c, int32_t k, loom_type *out) {
  loom__onnx_val *x = loom__onnx_in(c, k);
  if (!x) return loom__onnx_invalid(c, "input %d is missing", k);
  *out = x->type;
  return LOOM_OK;
}

static loom_status new_shape(loom__onnx *c, loom_type *t, int32_t rank, const int64_t *dims) {
  if (rank < 0 || rank > LOOM_MAX_RANK)
    return loom__onnx_refuse(c, "a result of rank %d (Loom takes 0 to 8)", rank);
  t->rank = rank;
  for (int32_t i = 0; i < rank; i++) t->dims[i] = dims[i];
  int64_t n;
  if (loom_type_elements(t, &n) || loom_type_make(t->dtype, rank, dims, t))
    return loom__onnx_invalid(c, "a result shape that is not a shape");
  return LOOM_OK;
}

static loom_status lower_reshape(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_type t;
  int64_t shape[LOOM_MAX_RANK + 1];
  int32_t rank;
  loom_status s = type_of_in(c, 0, &t);
  if (!s) s = loom__onnx_in_ints(c, 1, shape, LOOM_MAX_RANK, &rank);
  if (s) return s;
  int64_t total, known = 1;
  int32_t infer = -1;
  loom_type_elements(&t, &total);
  bool allowzero = loom__onnx_attr_i(n, "allowzero", 0);
  for (int32_t i = 0; i < rank; i++) {
    if (shape[i] == 0 && !allowzero) {
      if (i >= t.rank) return loom__onnx_invalid(c, "shape entry %d is 0 (copy) past the input's rank", i);
      shape[i] = t.dims[i];
    }
    if (shape[i] == -1 && infer < 0) {
      infer = i;
    } else if (shape[i] < 0) {
      return loom__onnx_invalid(c, "shape entry %d is %lld", i, (long long)shape[i]);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) shape[infer] = known ? total / known : 0;
  return !(s = new_shape(c, &t, rank, shape)) ? out_reshaped(c, &t) : s;
}

static loom_status lower_flatten(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_type t;
  loom_status s = type_of_in(c, 0, &t);
  if (s) return s;
  int64_t axis = loom__onnx_attr_i(n, "axis", 1);
  if (axis < 0) axis += t.rank;
  if (axis < 0 || axis > t.rank)
    return loom__onnx_invalid(c, "axis %lld outside rank %d", (long long)axis, t.rank);
  int64_t dims[2] = {1, 1};
  for (int32_t i = 0; i < t.rank; i++) dims[i < axis ? 0 : 1] *= t.dims[i];
  return !(s = new_shape(c, &t, 2, dims)) ? out_reshaped(c, &t) : s;
}

/* The axes of Squeeze/Unsqueeze: an attribute before opset 13, an input from 13. */
static loom_status axes_of(loom__onnx *c, const Onnx__NodeProto *n, int64_t *axes, int32_t *count) {
  if (c->opset < 13) {
    *count = loom__onnx_attr_ints(n, "axes", axes, LOOM_MAX_RANK);
    if (*count == -2) return loom__onnx_refuse(c, "more than 8 axes");
    return LOOM_OK;
  }
  if (!loom__onnx_in(c, 1)) {
    *count = -1;
    return LOOM_OK;
  }
  return loom__onnx_in_ints(c, 1, axes, LOOM_MAX_RANK, count);
}

static loom_status lower_squeeze(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_type t;
  int64_t axes[LOOM_MAX_RANK], dims[LOOM_MAX_RANK];
  int32_t count, rank = 0;
  loom_status s = type_of_in(c, 0, &t);
  if (!s) s = axes_of(c, n, axes, &count);
  if (s) return s;
  bool drop[LOOM_MAX_RANK] = {false};
  for (int32_t i = 0; i < count; i++) {
    int32_t a;
    if ((s = loom__onnx_axis(c, axes[i], t.rank, &a))) return s;
    if (t.dims[a] != 1)
      return loom__onnx_invalid(c, "axis %d has %lld elements, not 1", a, (long long)t.dims[a]);
    drop[a] = true;
  }
  for (int32_t i = 0; i < t.rank; i++)
    if (!(count < 0 ? t.dims[i] == 1 : drop[i])) dims[rank++] = t.dims[i];
  return !(s = new_shape(c, &t, rank, dims)) ? out_reshaped(c, &t) : s;
}

static loom_status lower_unsqueeze(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_type t;
  int64_t axes[LOOM_MAX_RANK], dims[LOOM_MAX_RANK];
  int32_t count;
  loom_status s = type_of_in(c, 0, &t);
  if (!s) s = axes_of(c, n, axes, &count);
  if (s) return s;
  if (count < 0) return loom__onnx_invalid(c, "Unsqueeze needs axes");
  int32_t rank = t.rank + count;
  if (rank > LOOM_MAX_RANK) return loom__onnx_refuse(c, "a result of rank %d (Loom takes 0 to 8)", rank);
  bool added[LOOM_MAX_RANK] = {false};
  for (int32_t i = 0; i < count; i++) {
    int32_t a;
    if ((s = loom__onnx_axis(c, axes[i], rank, &a))) return s;
    if (added[a]) return loom__onnx_invalid(c, "axis %d given twice", a);
    added[a] = true;
  }
  for (int32_t i = 0, j = 0; i < rank; i++) dims[i] = added[i] ? 1 : t.dims[j++];
  return !(s = new_shape(c, &t, rank, dims)) ? out_reshaped(c, &t) : s;
}

static loom_status lower_transpose(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  const loom_type t_copy = *TY(x), *t = &t_copy;
  int64_t perm[LOOM_MAX_RANK];
  int32_t count = loom__onnx_attr_ints(n, "perm", perm, LOOM_MAX_RANK);
  if (count < 0)
    for (int32_t i = 0; i < t->rank; i++) perm[i] = t->rank - 1 - i;
  return loom__onnx_out(c, 0, loom_transpose(G, x, t->rank, perm));
}

static loom_status lower_concat(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value xs[64];
  int32_t k = 0;
  if (n->n_input > 64) return loom__onnx_refuse(c, "more than 64 inputs");
  for (int32_t i = 0; i < (int32_t)n->n_input; i++) {
    loom__onnx_val *v = loom__onnx_in(c, i);
    int64_t elems = 0;
    if (v) loom_type_elements(&v->type, &elems);
    if (v && (elems > 0 || n->n_input == 1)) xs[k++] = loom__onnx_materialize(c, v);
  }
  if (!k) return loom__onnx_refuse(c, "every input is empty");
  int32_t axis;
  loom_status s =
      loom__onnx_axis(c, loom__onnx_attr_i(n, "axis", c->opset < 4 ? 1 : 0), TY(xs[0])->rank, &axis);
  return s ? s : loom__onnx_out(c, 0, loom_concat(G, xs, k, axis));
}

/* Clamps an ONNX slice bound as the spec does for a positive step. */
static int64_t clamp_bound(int64_t v, int64_t dim) {
  if (v < 0) v += dim;
  return v < 0 ? 0 : v > dim ? dim : v;
}

static loom_status lower_slice(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  const loom_type t_copy = *TY(x), *t = &t_copy;
  int64_t starts[LOOM_MAX_RANK], ends[LOOM_MAX_RANK], axes[LOOM_MAX_RANK], steps[LOOM_MAX_RANK];
  int32_t ns, ne, na = -1, nt = -1;
  loom_status s = LOOM_OK;
  if (c->opset < 10) {
    ns = loom__onnx_attr_ints(n, "starts", starts, LOOM_MAX_RANK);
    ne = loom__onnx_attr_ints(n, "ends", ends, LOOM_MAX_RANK);
    na = loom__onnx_attr_ints(n, "axes", axes, LOOM_MAX_RANK);
    if (ns < 0 || ne < 0) return loom__onnx_invalid(c, "starts and ends are required");
  } else {
    s = loom__onnx_in_ints(c, 1, starts, LOOM_MAX_RANK, &ns);
    if (!s) s = loom__onnx_in_ints(c, 2, ends, LOOM_MAX_RANK, &ne);
    if (!s && loom__onnx_in(c, 3)) s = loom__onnx_in_ints(c, 3, axes, LOOM_MAX_RANK, &na);
    if (!s && loom__onnx_in(c, 4)) s = loom__onnx_in_ints(c, 4, steps, LOOM_MAX_RANK, &nt);
    if (s) return s;
  }
  if (ns != ne || (na >= 0 && na != ns) || (nt >= 0 && nt != ns))
    return loom__onnx_invalid(c, "starts, ends, axes and steps differ in length");
  int64_t lo[LOOM_MAX_RANK], hi[LOOM_MAX_RANK], step[LOOM_MAX_RANK];
  for (int32_t i = 0; i < t->rank; i++) lo[i] = 0, hi[i] = t->dims[i], step[i] = 1;
  for (int32_t i = 0; i < ns; i++) {
    int32_t a;
    if ((s = loom__onnx_axis(c, na >= 0 ? axes[i] : i, t->rank, &a))) return s;
    int64_t st = nt >= 0 ? steps[i] : 1, d = t->dims[a];
    if (st < 1)
      return loom__onnx_refuse(c, "step %lld on axis %d (Loom slices forward only)", (long long)st, a);
    lo[a] = clamp_bound(starts[i], d);
    hi[a] = clamp_bound(ends[i], d);
    if (hi[a] < lo[a]) hi[a] = lo[a];
    step[a] = st;
  }
  return loom__onnx_out(c, 0, loom_slice(G, x, t->rank, lo, hi, step));
}

/* Split: along `axis` into the sizes given (attribute before opset 13, input from 13), or into
 * equal parts. */
static loom_status lower_split(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  const loom_type t_copy = *TY(x), *t = &t_copy;
  int32_t axis, count = -1, parts = (int32_t)n->n_output;
  loom_status s = loom__onnx_axis(c, loom__onnx_attr_i(n, "axis", 0), t->rank, &axis);
  int64_t sizes[64];
  if (parts > 64) return loom__onnx_refuse(c, "more than 64 outputs");
  if (!s && c->opset < 13) count = loom__onnx_attr_ints(n, "split", sizes, 64);
  if (!s && c->opset >= 13 && loom__onnx_in(c, 1)) s = loom__onnx_in_ints(c, 1, sizes, 64, &count);
  if (s) return s;
  if (count < 0) {
    int64_t d = t->dims[axis], each = (d + parts - 1) / parts;
    for (int32_t i = 0; i < parts; i++) sizes[i] = LOOM_MAX(0, LOOM_MIN(each, d - i * each));
    count = parts;
  }
  if (count != parts) return loom__onnx_invalid(c, "%d sizes for %d outputs", count, parts);
  int64_t lo[LOOM_MAX_RANK] = {0}, hi[LOOM_MAX_RANK];
  for (int32_t i = 0; i < t->rank; i++) hi[i] = t->dims[i];
  int64_t at = 0;
  for (int32_t i = 0; !s && i < parts; i++) {
    lo[axis] = at;
    hi[axis] = at + sizes[i];
    if (sizes[i] < 0 || hi[axis] > t->dims[axis])
      return loom__onnx_invalid(c, "the sizes pass the axis' length");
    s = loom__onnx_out(c, i, loom_slice(G, x, t->rank, lo, hi, NULL));
    at += sizes[i];
  }
  return s;
}

/* Expand: broadcasting both ways, so the result is the broadcast of the input and the shape. */
static loom_status lower_expand(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  const loom_type t_copy = *TY(x), *t = &t_copy;
  int64_t shape[LOOM_MAX_RANK], out[LOOM_MAX_RANK];
  int32_t rank;
  loom_status s = loom__onnx_in_ints(c, 1, shape, LOOM_MAX_RANK, &rank);
  if (s) return s;
  int32_t r = LOOM_MAX(rank, t->rank);
  for (int32_t i = 0; i < r; i++) {
    int32_t ix = i - (r - t->rank), is = i - (r - rank);
    int64_t a = ix >= 0 ? t->dims[ix] : 1, b = is >= 0 ? shape[is] : 1;
    if (a != b && a != 1 && b != 1) return loom__onnx_invalid(c, "shapes do not broadcast on axis %d", i);
    out[i] = a == 1 ? b : a;
  }
  if (t->rank < r) {
    int64_t d[LOOM_MAX_RANK];
    for (int32_t i = 0; i < r; i++) d[i] = i < r - t->rank ? 1 : t->dims[i - (r - t->rank)];
    x = loom_reshape(G, x, r, d);
  }
  return loom__onnx_out(c, 0, loom_broadcast(G, x, r, out));
}

static loom_status lower_tile(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  int64_t reps[LOOM_MAX_RANK];
  int32_t count;
  loom_status s = loom__onnx_in_ints(c, 1, reps, LOOM_MAX_RANK, &count);
  return s ? s : loom__onnx_out(c, 0, loom_tile(G, x, count, reps));
}

/* Shape: known from the type, so a constant (with the start/end of opset 15). */
static loom_status lower_shape(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_type t;
  loom_status s = type_of_in(c, 0, &t);
  if (s) return s;
  int64_t start = loom__onnx_attr_i(n, "start", 0), end = loom__onnx_attr_i(n, "end", t.rank);
  start = clamp_bound(start, t.rank);
  end = clamp_bound(end, t.rank);
  int64_t count = end > start ? end - start : 0;
  loom_type rt = {LOOM_I64, 1, {count}};
  int64_t *data = loom__malloc(sizeof(int64_t) * (size_t)(count ? count : 1));
  if (!data) return loom__oom("a shape");
  for (int64_t i = 0; i < count; i++) data[i] = t.dims[start + i];
  if (op) { /* Size */
    int64_t elems;
    loom_type_elements(&t, &elems);
    data[0] = elems;
    rt.rank = 0;
  }
  return loom__onnx_out_const(c, 0, &rt, data);
}

/* Constant: the tensor of whichever value attribute it has. */
static loom_status lower_constant(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  const Onnx__AttributeProto *a = n->n_attribute == 1 ? n->attribute[0] : NULL;
  if (!a) return loom__onnx_invalid(c, "a Constant has exactly one attribute");
  loom_type t = {LOOM_F32, 0, {0}};
  void *data = NULL;
  if (!strcmp(a->name, "value") && a->t) {
    loom_status s = loom__onnx_tensor_decode(a->t, c->path, "its value", &t, &data);
    if (s) return loom__onnx_refuse(c, "%s", loom_last_error());
    if (!data && !(data = loom__malloc(1))) return loom__oom("a constant");
    return loom__onnx_out_const(c, 0, &t, data);
  }
  bool is_float = !strcmp(a->name, "value_float") || !strcmp(a->name, "value_floats");
  bool list = !strcmp(a->name, "value_floats") || !strcmp(a->name, "value_ints");
  size_t count = list ? (is_float ? a->n_floats : a->n_ints) : 1;
  t.dtype = is_float ? LOOM_F32 : LOOM_I64;
  t.rank = list ? 1 : 0;
  t.dims[0] = (int64_t)count;
  if (!(data = loom__malloc(count * 8 + 1))) return loom__oom("a constant");
  for (size_t i = 0; i < count; i++) {
    if (is_float)
      ((float *)data)[i] = list ? a->floats[i] : a->f;
    else
      ((int64_t *)data)[i] = list ? a->ints[i] : a->i;
  }
  return loom__onnx_out_const(c, 0, &t, data);
}

static loom_status lower_constant_of_shape(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  int64_t shape[LOOM_MAX_RANK];
  int32_t rank;
  loom_status s = loom__onnx_in_ints(c, 0, shape, LOOM_MAX_RANK, &rank);
  if (s) return s;
  loom_type vt = {LOOM_F32, 0, {0}}, t;
  void *value = NULL;
  const Onnx__AttributeProto *a = loom__onnx_attr(n, "value");
  if (a && a->t && (s = loom__onnx_tensor_decode(a->t, c->path, "its value", &vt, &value)))
    return loom__onnx_refuse(c, "%s", loom_last_error());
  if (loom_type_make(vt.dtype, rank, shape, &t)) {
    loom__free(value);
    return loom__onnx_invalid(c, "shape is not a shape");
  }
  int64_t elems, size = loom_dtype_size(t.dtype);
  loom_type_elements(&t, &elems);
  if (elems * size <= SMALL_CONSTANT_BYTES) {
    uint8_t *data = loom__calloc((size_t)(elems ? elems * size : 1), 1);
    for (int64_t i = 0; data && value && i < elems; i++) memcpy(data + i * size, value, (size_t)size);
    loom__free(value);
    return data ? loom__onnx_out_const(c, 0, &t, data) : loom__oom("a constant");
  }
  loom_value one = loom_constant(G, &vt, value ? value : &(double){0});
  loom__free(value);
  int64_t ones[LOOM_MAX_RANK];
  for (int32_t i = 0; i < rank; i++) ones[i] = 1;
  return loom__onnx_out(c, 0, loom_broadcast(G, loom_reshape(G, one, rank, ones), rank, shape));
}

/* Range: start, limit and delta known now, so the result is too. */
static loom_status lower_range(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom__onnx_val *v[3];
  double f[3];
  for (int32_t i = 0; i < 3; i++) {
    v[i] = loom__onnx_in(c, i);
    if (!v[i] || !v[i]->host)
      return loom__onnx_refuse(c, "input %d ('%s') must be known when the model is read", i,
                               v[i] ? v[i]->name : "");
    switch (v[i]->type.dtype) {
      case LOOM_F32:
        f[i] = ((const float *)v[i]->host)[0];
        break;
      case LOOM_F64:
        f[i] = ((const double *)v[i]->host)[0];
        break;
      case LOOM_I32:
        f[i] = ((const int32_t *)v[i]->host)[0];
        break;
      case LOOM_I64:
        f[i] = (double)((const int64_t *)v[i]->host)[0];
        break;
      case LOOM_I16:
        f[i] = ((const int16_t *)v[i]->host)[0];
        break;
      default:
        return loom__onnx_refuse(c, "Range of %s", loom_dtype_name(v[i]->type.dtype));
    }
  }
  double count = ceil((f[1] - f[0]) / f[2]);
  if (!(count >= 0)) count = 0;
  if (count > 1e8) return loom__onnx_refuse(c, "a range of %g elements", count);
  loom_type t = {v[0]->type.dtype, 1, {(int64_t)count}};
  uint8_t *data = loom__malloc((size_t)count * 8 + 8);
  if (!data) return loom__oom("a range");
  for (int64_t i = 0; i < (int64_t)count; i++) {
    double x = f[0] + (double)i * f[2];
    loom__scalar_store(t.dtype, x, (int64_t)x, !loom_dtype_is_float(t.dtype),
                       data + i * loom_dtype_size(t.dtype));
  }
  /* A float range accumulates as the reference does: start + i * delta in the dtype. */
  if (t.dtype == LOOM_F32)
    for (int64_t i = 0; i < (int64_t)count; i++) ((float *)data)[i] = (float)f[0] + (float)i * (float)f[2];
  return loom__onnx_out_const(c, 0, &t, data);
}

/* Pad: zeros, a constant, the edge or a reflection, built from slices and concats along each
 * axis in turn; negative pads crop. */
static loom_value pad_axis(loom__onnx *c, loom_value x, int32_t axis, int64_t before, int64_t after, int mode,
                           loom_value value) {
  const loom_type t_copy = *TY(x), *t = &t_copy;
  int32_t r = t->rank;
  int64_t lo[LOOM_MAX_RANK] = {0}, hi[LOOM_MAX_RANK], d = t->dims[axis];
  for (int32_t i = 0; i < r; i++) hi[i] = t->dims[i];
  if (before < 0 || after < 0) {
    lo[axis] = before < 0 ? -before : 0;
    hi[axis] = after < 0 ? d + after : d;
    x = loom_slice(G, x, r, lo, hi, NULL);
    return pad_axis(c, x, axis, LOOM_MAX(before, 0), LOOM_MAX(after, 0), mode, value);
  }
  loom_value parts[3];
  int32_t np = 0;
  for (int side = 0; side < 2; side++) {
    int64_t p = side ? after : before;
    if (side) parts[np++] = x;
    if (!p) continue;
    if (mode == 0) {
      loom_type pt = *t;
      pt.dims[axis] = p;
      int64_t ones[LOOM_MAX_RANK];
      for (int32_t i = 0; i < r; i++) ones[i] = 1;
      parts[np++] = loom_broadcast(G, loom_reshape(G, value, r, ones), r, pt.dims);
    } else if (mode == 1) { /* edge */
      lo[axis] = side ? d - 1 : 0;
      hi[axis] = lo[axis] + 1;
      int64_t reps[LOOM_MAX_RANK];
      for (int32_t i = 0; i < r; i++) reps[i] = i == axis ? p : 1;
      parts[np++] = loom_tile(G, loom_slice(G, x, r, lo, hi, NULL), r, reps);
    } else { /* reflect: the elements next to the edge, mirrored, one slice each */
      loom_value one[64];
      if (p > 64 || p >= d) return LOOM_VALUE_NONE;
      for (int64_t k = 0; k < p; k++) {
        int64_t at = side ? d - 2 - k : p - k; /* mirrored about the edge element */
        lo[axis] = at;
        hi[axis] = at + 1;
        one[k] = loom_slice(G, x, r, lo, hi, NULL);
      }
      parts[np++] = p == 1 ? one[0] : loom_concat(G, one, (int32_t)p, axis);
    }
  }
  if (np == 1) return x;
  return loom_concat(G, parts, np, axis);
}

static loom_status lower_pad(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  const loom_type t_copy = *TY(x), *t = &t_copy;
  int32_t r = t->rank;
  int64_t pads[2 * LOOM_MAX_RANK];
  int32_t count;
  loom_status s = LOOM_OK;
  double cval = 0;
  loom_value value = LOOM_VALUE_NONE;
  if (c->opset < 11) {
    count = loom__onnx_attr_ints(n, "pads", pads, 2 * LOOM_MAX_RANK);
    cval = loom__onnx_attr_f(n, "value", 0);
  } else {
    s = loom__onnx_in_ints(c, 1, pads, 2 * LOOM_MAX_RANK, &count);
    if (!s && loom__onnx_in(c, 2)) value = loom_reshape(G, IN(2), 0, NULL);
  }
  if (s) return s;
  if (count != 2 * r) return loom__onnx_invalid(c, "%d pads for rank %d", count, r);
  if (value.id < 0) value = loom__onnx_scalar(c, t->dtype, cval);
  int mode = loom__onnx_attr_s_is(n, "mode", "constant", true)   ? 0
             : loom__onnx_attr_s_is(n, "mode", "edge", false)    ? 1
             : loom__onnx_attr_s_is(n, "mode", "reflect", false) ? 2
                                                                 : -1;
  if (mode < 0) return loom__onnx_refuse(c, "this pad mode");
  for (int32_t a = 0; a < r && x.id >= 0; a++)
    if (pads[a] || pads[a + r]) x = pad_axis(c, x, a, pads[a], pads[a + r], mode, value);
  if (x.id < 0 && !G->error) return loom__onnx_refuse(c, "a reflection longer than its axis or than 64");
  if (x.id >= 0 && loom_value_name(G, x)) x = loom_reshape(G, x, r, t->dims);
  return loom__onnx_out(c, 0, x);
}

/* DepthToSpace (DCR or CRD) and SpaceToDepth: reshape, transpose, reshape. */
static loom_status lower_depth_space(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  const loom_type t_copy = *TY(x), *t = &t_copy;
  int64_t b = loom__onnx_attr_i(n, "blocksize", 0);
  if (t->rank != 4 || b < 1) return loom__onnx_invalid(c, "needs a rank-4 input and blocksize >= 1");
  int64_t N = t->dims[0], C = t->dims[1], H = t->dims[2], W = t->dims[3];
  if (op == 0) {
    bool crd = loom__onnx_attr_s_is(n, "mode", "CRD", false);
    int64_t d1[6] = {N, b, b, C / (b * b), H, W}, p1[6] = {0, 3, 4, 1, 5, 2};
    int64_t d2[6] = {N, C / (b * b), b, b, H, W}, p2[6] = {0, 1, 4, 2, 5, 3};
    int64_t out[4] = {N, C / (b * b), H * b, W * b};
    x = loom_reshape(G, x, 6, crd ? d2 : d1);
    x = loom_transpose(G, x, 6, crd ? p2 : p1);
    return loom__onnx_out(c, 0, loom_reshape(G, x, 4, out));
  }
  int64_t d[6] = {N, C, H / b, b, W / b, b}, p[6] = {0, 3, 5, 1, 2, 4}, out[4] = {N, C * b * b, H / b, W / b};
  x = loom_transpose(G, loom_reshape(G, x, 6, d), 6, p);
  return loom__onnx_out(c, 0, loom_reshape(G, x, 4, out));
}

/* clang-format off */
const loom__onnx_op loom__onnx_ops_layout[] = {
    {"Reshape", lower_reshape, 0, "allowzero"}, {"Flatten", lower_flatten, 0, "axis"},
    {"Squeeze", lower_squeeze, 0, "axes"}, {"Unsqueeze", lower_unsqueeze, 0, "axes"},
    {"Transpose", lower_transpose, 0, "perm"}, {"Concat", lower_concat, 0, "axis"},
    {"Slice", lower_slice, 0, "starts,ends,axes"}, {"Split", lower_split, 0, "axis,split"},
    {"Expand", lower_expand, 0, ""}, {"Tile", lower_tile, 0, ""},
    {"Shape", lower_shape, 0, "start,end"}, {"Size", lower_shape, 1, ""},
    {"Constant", lower_constant, 0, "value,value_float,value_floats,value_int,value_ints"},
    {"ConstantOfShape", lower_constant_of_shape, 0, "value"}, {"Range", lower_range, 0, ""},
    {"Pad", lower_pad, 0, "mode,pads,value"},
    {"DepthToSpace", lower_depth_space, 0, "blocksize,mode"},
    {"SpaceToDepth", lower_depth_space, 1, "blocksize"},
    {NULL, NULL, 0, NULL},
};
/* clang-format on */
