/* quantize and dequantize on the host (docs/ir-quant.md).
 *
 * Both walk their f32 side row by row (a row: the last axis), so a q4 row, whose bytes no
 * other row shares (rows are padded to a whole byte), is written by one thread. Quantized
 * operands arrive as views whose element offsets and strides count q8 bytes or q4 nibbles
 * (low nibble first), so a loop's slice of a weight is read in place.
 */
#include <math.h>

#include "backends/cpu/cpu_loops.h"

/* One row's position: the row's element offsets in each view and its index along the scale's
 * axis (when that axis is not the last). */
typedef struct row_walk {
  int32_t rank; /* >= 1: a rank-0 view is walked as one row of one */
  int64_t dims[LOOM_MAX_RANK];
  int64_t rows, len; /* rows and the length of each */
} row_walk;

static void walk_init(row_walk *w, const loom_type *t) {
  w->rank = t->rank > 0 ? t->rank : 1;
  for (int32_t d = 0; d < w->rank; d++) w->dims[d] = t->rank > 0 ? t->dims[d] : 1;
  w->len = w->dims[w->rank - 1];
  w->rows = 1;
  for (int32_t d = 0; d < w->rank - 1; d++) w->rows *= w->dims[d];
}

/* Row r's start in a view of strides st (rank entries; a rank-0 view has none) and, where
 * axis is a leading axis, its index there (else 0). */
static int64_t row_start(const row_walk *w, const int64_t *st, int32_t view_rank, int64_t r, int32_t axis,
                         int64_t *channel) {
  int64_t off = 0;
  *channel = 0;
  for (int32_t d = w->rank - 2; d >= 0; d--) {
    int64_t i = r % w->dims[d];
    r /= w->dims[d];
    if (view_rank > 0) off += i * st[d];
    if (d == axis) *channel = i;
  }
  return off;
}

static inline int32_t q4_get(const uint8_t *base, int64_t nibble) {
  uint8_t b = base[nibble >> 1];
  int32_t v = (nibble & 1) ? (b >> 4) : (b & 15);
  return v >= 8 ? v - 16 : v; /* two's complement in four bits */
}

/* x / scale rounded half to even and saturated to [lo, hi]; NaN (and a zero scale) gives 0. */
static inline int32_t quantize_one(float x, float scale, int32_t lo, int32_t hi) {
  if (scale == 0.0f) return 0;
  float q = rintf(x / scale);
  if (q != q) return 0;
  return q < (float)lo ? lo : q > (float)hi ? hi : (int32_t)q;
}

/* ---- dequantize --------------------------------------------------------------------------- */

static loom_status dequantize(const loom__op *op, const loom__view *in, const loom__view *out) {
  const loom__view *q = &in[0], *sc = &in[1];
  int32_t axis = -1;
  if ((op->attrs.set & LOOM_ATTR_AXIS) && !loom__axis_normalize(op->attrs.axis, q->type.rank, &axis))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: dequantize: axis %lld out of range",
                       (long long)op->attrs.axis);
  row_walk w;
  walk_init(&w, &q->type);
  const float *scale = sc->data;
  int64_t s_stride = sc->type.rank > 0 ? sc->strides[0] : 0,
          q_inner = q->type.rank > 0 ? q->strides[q->type.rank - 1] : 1;
  bool q4 = q->type.dtype == LOOM_Q4, per_col = axis >= 0 && axis == q->type.rank - 1;
  float *o = out->data;
#pragma omp parallel for schedule(static) if (w.rows * w.len > LOOM_CPU_BLOCK)
  for (int64_t r = 0; r < w.rows; r++) {
    int64_t ch;
    int64_t qo = row_start(&w, q->strides, q->type.rank, r, axis, &ch);
    float *orow = o + r * w.len;
    float s = axis < 0 ? scale[0] : scale[ch * s_stride];
    if (q4) {
      for (int64_t j = 0; j < w.len; j++)
        orow[j] = (float)q4_get(q->data, qo + j * q_inner) * (per_col ? scale[j * s_stride] : s);
    } else {
      const int8_t *qr = (const int8_t *)q->data + qo;
      for (int64_t j = 0; j < w.len; j++)
        orow[j] = (float)qr[j * q_inner] * (per_col ? scale[j * s_stride] : s);
    }
  }
  return LOOM_OK;
}

/* ---- quantize ----------------------------------------------------------------------------- */

/* scale[c] = max |x| over channel c (NaN ignored, as fmaxf does), then / qmax. One channel of
 * one per tensor. */
static void absmax_scales(const loom__view *x, const row_walk *w, int32_t axis, float qmax, float *scale,
                          int64_t channels) {
  int64_t inner = x->type.rank > 0 ? x->strides[x->type.rank - 1] : 1;
  bool per_col = axis >= 0 && axis == x->type.rank - 1;
  for (int64_t c = 0; c < channels; c++) scale[c] = 0.0f;
  for (int64_t r = 0; r < w->rows; r++) {
    int64_t ch;
    const float *row = (const float *)x->data + row_start(w, x->strides, x->type.rank, r, axis, &ch);
    for (int64_t j = 0; j < w->len; j++) {
      float *m = &scale[per_col ? j : axis < 0 ? 0 : ch];
      *m = fmaxf(*m, fabsf(row[j * inner]));
    }
  }
  for (int64_t c = 0; c < channels; c++) scale[c] = scale[c] / qmax;
}

static loom_status quantize(const loom__op *op, const loom__view *in, const loom__view *out) {
  const loom__view *x = &in[0];
  int32_t axis = -1;
  if ((op->attrs.set & LOOM_ATTR_AXIS) && !loom__axis_normalize(op->attrs.axis, x->type.rank, &axis))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: quantize: axis %lld out of range",
                       (long long)op->attrs.axis);
  bool q4 = out[0].type.dtype == LOOM_Q4, per_col = axis >= 0 && axis == x->type.rank - 1;
  int32_t hi = q4 ? 7 : 127, lo = q4 ? -8 : -128;
  row_walk w;
  walk_init(&w, &x->type);
  float *scale = out[1].data;
  absmax_scales(x, &w, axis, (float)hi, scale, axis < 0 ? 1 : x->type.dims[axis]);
  int64_t inner = x->type.rank > 0 ? x->strides[x->type.rank - 1] : 1;
  int64_t row_bytes = q4 ? loom__q4_row_nibbles(w.len) / 2 : w.len;
#pragma omp parallel for schedule(static) if (w.rows * w.len > LOOM_CPU_BLOCK)
  for (int64_t r = 0; r < w.rows; r++) {
    int64_t ch;
    const float *row = (const float *)x->data + row_start(&w, x->strides, x->type.rank, r, axis, &ch);
    uint8_t *qrow = (uint8_t *)out[0].data + r * row_bytes;
    float s = axis < 0 ? scale[0] : scale[ch];
    for (int64_t j = 0; j < w.len; j++) {
      int32_t v = quantize_one(row[j * inner], per_col ? scale[j] : s, lo, hi);
      if (!q4)
        qrow[j] = (uint8_t)(int8_t)v;
      else if (j & 1)
        qrow[j >> 1] = (uint8_t)(qrow[j >> 1] | (uint8_t)((v & 15) << 4));
      else
        qrow[j >> 1] = (uint8_t)(v & 15); /* the high nibble stays 0 where an odd row is padded */
    }
  }
  return LOOM_OK;
}

loom_status loom__cpu_quant(const loom_graph *g, const loom__op *op, const loom__view *in,
                            const loom__view *out, void *scratch, int64_t scratch_bytes) {
  (void)g;
  (void)scratch;
  (void)scratch_bytes;
  return op->kind == LOOM_OP_QUANTIZE ? quantize(op, in, out) : dequantize(op, in, out);
}
