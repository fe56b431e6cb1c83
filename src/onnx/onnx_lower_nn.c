/* ONNX's neural-network ops: MatMul, Gemm, Conv, the pools, and the normalizations. Pools have
 * no IR op: a pool is the max (or sum) of one strided slice of the padded input per kernel
 * offset, which is exact and keeps every piece a view. */
#include <math.h>
#include <string.h>

#include "onnx/onnx_internal.h"

#define G (c->g)
#define IN(k) loom__onnx_value(c, k)
#define TY(v) loom__onnx_type(c, v)
#define UN(op, x) loom_unary(G, LOOM_OP_##op, x)
#define BIN(op, a, b) loom_binary(G, LOOM_OP_##op, a, b)
#define K(v, value) loom__onnx_scalar(c, TY(v)->dtype, value)

#define MAX_SPATIAL 3

/* MatMul of A (batch..., M, K) by a 2-D B (K, N): NumPy's matmul broadcasts B over A's batch,
 * which is one product of all A's rows, so A is reshaped to (batch * M, K), multiplied once and
 * the result reshaped back. A batched dot runs one product per batch entry, each reading all
 * of B: PyTorch's exported encoders multiply [seq, 1, hidden] activations by their weights, a
 * matrix-vector product per token (the transformer's run was a fifth sgemv). */
static loom_status lower_matmul(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value a = IN(0), b = IN(1);
  const loom_type ta = *TY(a), tb = *TY(b);
  if (ta.rank <= 2 || tb.rank != 2) return loom__onnx_out(c, 0, loom_dot(G, a, b));
  int64_t rows[2] = {1, ta.dims[ta.rank - 1]}, dims[LOOM_MAX_RANK];
  for (int32_t i = 0; i < ta.rank - 1; i++) rows[0] *= ta.dims[i], dims[i] = ta.dims[i];
  dims[ta.rank - 1] = tb.dims[1];
  loom_value y = loom_dot(G, loom_reshape(G, a, 2, rows), b);
  return loom__onnx_out(c, 0, loom_reshape(G, y, ta.rank, dims));
}

static loom_value transposed(loom__onnx *c, loom_value x) {
  const loom_type t_copy = *TY(x), *t = &t_copy;
  int64_t perm[2] = {1, 0};
  return t->rank == 2 ? loom_transpose(G, x, 2, perm) : x;
}

static loom_status lower_gemm(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value a = IN(0), b = IN(1);
  if (TY(a)->rank != 2 || TY(b)->rank != 2) return loom__onnx_invalid(c, "Gemm takes 2-D A and B");
  if (loom__onnx_attr_i(n, "transA", 0)) a = transposed(c, a);
  if (loom__onnx_attr_i(n, "transB", 0)) b = transposed(c, b);
  double alpha = loom__onnx_attr_f(n, "alpha", 1.0f), beta = loom__onnx_attr_f(n, "beta", 1.0f);
  loom_value y = loom_dot(G, a, b);
  if (alpha != 1.0) y = BIN(MUL, y, K(y, alpha));
  if (loom__onnx_in(c, 2) && beta != 0.0) {
    loom_value cc = IN(2);
    y = BIN(ADD, y, beta == 1.0 ? cc : BIN(MUL, cc, K(cc, beta)));
  }
  return loom__onnx_out(c, 0, y);
}

/* x with `before` and `after` elements of `value` added along axis (a broadcast fill each). */
static loom_value pad_with(loom__onnx *c, loom_value x, int32_t axis, int64_t before, int64_t after,
                           double value) {
  if (!before && !after) return x;
  const loom_type t_copy = *TY(x), *t = &t_copy;
  loom_value parts[3];
  int32_t np = 0;
  loom_type pt = *t;
  if (before) {
    pt.dims[axis] = before;
    parts[np++] = loom_fill(G, &pt, value);
  }
  parts[np++] = x;
  if (after) {
    pt.dims[axis] = after;
    parts[np++] = loom_fill(G, &pt, value);
  }
  return loom_concat(G, parts, np, axis);
}

/* The spatial attributes Conv and the pools share, with ONNX's defaults, and the pads that
 * auto_pad or `pads` give for input sizes in[] and kernel k[]. */
typedef struct window {
  int32_t ns;
  int64_t in[MAX_SPATIAL], k[MAX_SPATIAL], stride[MAX_SPATIAL], dil[MAX_SPATIAL];
  int64_t pb[MAX_SPATIAL], pe[MAX_SPATIAL], out[MAX_SPATIAL];
} window;

/* `transposed`: ConvTranspose's, whose pads crop its output: no output size is computed. */
static loom_status window_of(loom__onnx *c, const Onnx__NodeProto *n, const loom_type *x, const int64_t *k,
                             bool ceil_mode, bool transposed, window *w) {
  memset(w, 0, sizeof *w);
  w->ns = x->rank - 2;
  if (w->ns < 1 || w->ns > MAX_SPATIAL)
    return loom__onnx_refuse(c, "%d spatial dimensions (Loom takes 1 to 3)", w->ns);
  int64_t v[2 * MAX_SPATIAL];
  int32_t cnt;
  for (int32_t i = 0; i < w->ns; i++)
    w->in[i] = x->dims[2 + i], w->k[i] = k[i], w->stride[i] = 1, w->dil[i] = 1;
  if ((cnt = loom__onnx_attr_ints(n, "strides", v, MAX_SPATIAL)) >= 0)
    for (int32_t i = 0; i < cnt && i < w->ns; i++) w->stride[i] = v[i];
  if ((cnt = loom__onnx_attr_ints(n, "dilations", v, MAX_SPATIAL)) >= 0)
    for (int32_t i = 0; i < cnt && i < w->ns; i++) w->dil[i] = v[i];
  if ((cnt = loom__onnx_attr_ints(n, "pads", v, 2 * MAX_SPATIAL)) >= 0) {
    if (cnt != 2 * w->ns) return loom__onnx_invalid(c, "%d pads for %d spatial dimensions", cnt, w->ns);
    for (int32_t i = 0; i < w->ns; i++) w->pb[i] = v[i], w->pe[i] = v[i + w->ns];
  }
  bool upper = loom__onnx_attr_s_is(n, "auto_pad", "SAME_UPPER", false);
  bool lower = loom__onnx_attr_s_is(n, "auto_pad", "SAME_LOWER", false);
  bool valid = loom__onnx_attr_s_is(n, "auto_pad", "VALID", false);
  if (!upper && !lower && !valid && !loom__onnx_attr_s_is(n, "auto_pad", "NOTSET", true))
    return loom__onnx_refuse(c, "this auto_pad");
  for (int32_t i = 0; i < w->ns; i++) {
    int64_t span = (w->k[i] - 1) * w->dil[i] + 1;
    if (w->stride[i] < 1 || w->dil[i] < 1 || w->k[i] < 1)
      return loom__onnx_invalid(c, "kernel, strides and dilations must be >= 1");
    if (upper || lower) {
      int64_t o = (w->in[i] + w->stride[i] - 1) / w->stride[i];
      int64_t total = LOOM_MAX((o - 1) * w->stride[i] + span - w->in[i], 0);
      w->pb[i] = upper ? total / 2 : total - total / 2;
      w->pe[i] = total - w->pb[i];
    } else if (valid) {
      w->pb[i] = w->pe[i] = 0;
    }
    if (transposed) continue;
    int64_t room = w->in[i] + w->pb[i] + w->pe[i] - span;
    if (room < 0) return loom__onnx_invalid(c, "the kernel is larger than the padded input");
    w->out[i] = (ceil_mode ? (room + w->stride[i] - 1) / w->stride[i] : room / w->stride[i]) + 1;
    /* The last window must start inside the input or its leading pad (as PyTorch and ONNX's
     * reference do in ceil mode). */
    if (ceil_mode && (w->out[i] - 1) * w->stride[i] >= w->in[i] + w->pb[i]) w->out[i]--;
  }
  return LOOM_OK;
}

/* The convolution of x by wt as node n's attributes say (pads beyond the symmetric part added
 * as zeros first); LOOM_VALUE_NONE with the status in *out_status on a refusal. */
static loom_value conv_of(loom__onnx *c, const Onnx__NodeProto *n, loom_value x, loom_value wt,
                          loom_status *out_status) {
  const loom_type xt = *TY(x), wtt = *TY(wt);
  *out_status = LOOM_OK;
  if (xt.rank != wtt.rank || xt.rank < 3) {
    *out_status = loom__onnx_invalid(c, "X and W ranks differ or are below 3");
    return LOOM_VALUE_NONE;
  }
  window w;
  if ((*out_status = window_of(c, n, &xt, wtt.dims + 2, false, false, &w))) return LOOM_VALUE_NONE;
  int64_t pad[MAX_SPATIAL];
  for (int32_t i = 0; i < w.ns; i++) {
    int64_t sym = LOOM_MIN(w.pb[i], w.pe[i]);
    pad[i] = sym;
    x = pad_with(c, x, 2 + i, w.pb[i] - sym, w.pe[i] - sym, 0.0);
  }
  return loom_conv(G, x, wt, w.stride, pad, w.dil, loom__onnx_attr_i(n, "group", 1));
}

static loom_status lower_conv(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_status s;
  loom_value y = conv_of(c, n, IN(0), IN(1), &s);
  if (s) return s;
  if (loom__onnx_in(c, 2)) {
    int64_t dims[2 + MAX_SPATIAL] = {1, TY(y)->dims[1], 1, 1, 1};
    y = BIN(ADD, y, loom_reshape(G, IN(2), TY(y)->rank, dims));
  }
  return loom__onnx_out(c, 0, y);
}

/* Input k less its zero point (input zk, a scalar or one per index of `axis` of a rank-r
 * operand), in dtype d. */
static loom_value less_zero_point(loom__onnx *c, int32_t k, int32_t zk, int32_t axis, loom_dtype d) {
  loom_value v = loom_cast(G, IN(k), d);
  if (!loom__onnx_in(c, zk)) return v;
  loom_value z = loom_cast(G, IN(zk), d);
  const loom_type vt = *TY(v), zt = *TY(z);
  if (zt.rank == 1 && vt.rank > 1 && zt.dims[0] != 1) {
    int64_t dims[LOOM_MAX_RANK];
    for (int32_t i = 0; i < vt.rank; i++) dims[i] = i == (axis < 0 ? axis + vt.rank : axis) ? zt.dims[0] : 1;
    z = loom_reshape(G, z, vt.rank, dims);
  }
  return BIN(SUB, v, z);
}

/* MatMulInteger: (A - a_zero_point) . (B - b_zero_point) in i32 (per-row and per-column zero
 * points broadcast); ConvInteger: the same of a convolution, computed in f64, where every
 * product and sum of 8-bit values is exact, then i32. */
static loom_status lower_integer_op(loom__onnx *c, const Onnx__NodeProto *n, int64_t conv) {
  if (!conv) {
    loom_value a = less_zero_point(c, 0, 2, -2, LOOM_I32), b = less_zero_point(c, 1, 3, -1, LOOM_I32);
    return loom__onnx_out(c, 0, loom_dot(G, a, b));
  }
  loom_status s;
  loom_value y =
      conv_of(c, n, less_zero_point(c, 0, 2, 1, LOOM_F64), less_zero_point(c, 1, 3, 0, LOOM_F64), &s);
  return s ? s : loom__onnx_out(c, 0, loom_cast(G, y, LOOM_I32));
}

/* x with s - 1 zeros between neighbours along axis (a transposed convolution's input). */
static loom_value spread(loom__onnx *c, loom_value x, int32_t axis, int64_t s) {
  if (s == 1) return x;
  const loom_type t = *TY(x);
  int64_t dims[LOOM_MAX_RANK], lo[LOOM_MAX_RANK] = {0}, hi[LOOM_MAX_RANK];
  for (int32_t i = 0, j = 0; i <= t.rank; i++) dims[i] = i == axis + 1 ? 1 : t.dims[j++];
  loom_value parts[2] = {loom_reshape(G, x, t.rank + 1, dims), LOOM_VALUE_NONE};
  loom_type zt = t;
  zt.rank = t.rank + 1;
  memcpy(zt.dims, dims, sizeof dims);
  zt.dims[axis + 1] = s - 1;
  parts[1] = loom_fill(G, &zt, 0);
  loom_value y = loom_concat(G, parts, 2, axis + 1);
  for (int32_t i = 0; i < t.rank; i++) dims[i] = t.dims[i], hi[i] = t.dims[i];
  dims[axis] = t.dims[axis] * s;
  hi[axis] = (t.dims[axis] - 1) * s + 1;
  return loom_slice(G, loom_reshape(G, y, t.rank, dims), t.rank, lo, hi, NULL);
}

/* w reversed along axis, one slice per element. */
static loom_value reversed(loom__onnx *c, loom_value w, int32_t axis) {
  const loom_type t = *TY(w);
  int64_t lo[LOOM_MAX_RANK] = {0}, hi[LOOM_MAX_RANK];
  loom_value parts[16];
  if (t.dims[axis] > 16) return LOOM_VALUE_NONE;
  if (t.dims[axis] == 1) return w;
  for (int32_t i = 0; i < t.rank; i++) hi[i] = t.dims[i];
  for (int64_t k = 0; k < t.dims[axis]; k++) {
    lo[axis] = t.dims[axis] - 1 - k;
    hi[axis] = lo[axis] + 1;
    parts[k] = loom_slice(G, w, t.rank, lo, hi, NULL);
  }
  return loom_concat(G, parts, (int32_t)t.dims[axis], axis);
}

/* ConvTranspose as the convolution it is the gradient of: the input spread by the strides,
 * padded by (k - 1) dilation less the pads (output_padding at the end), convolved at stride 1
 * with the kernel reversed and its channel axes swapped per group. */
static loom_status lower_conv_transpose(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0), w = IN(1);
  const loom_type xt = *TY(x), wt = *TY(w);
  bool upper = loom__onnx_attr_s_is(n, "auto_pad", "SAME_UPPER", false);
  bool same = upper || loom__onnx_attr_s_is(n, "auto_pad", "SAME_LOWER", false);
  if (!same && !loom__onnx_attr_s_is(n, "auto_pad", "NOTSET", true) &&
      !loom__onnx_attr_s_is(n, "auto_pad", "VALID", false))
    return loom__onnx_refuse(c, "this auto_pad");
  if (xt.rank != wt.rank || xt.rank < 3) return loom__onnx_invalid(c, "X and W ranks differ or are below 3");
  window win;
  loom_status s = window_of(c, n, &xt, wt.dims + 2, false, true, &win);
  if (s) return s;
  int64_t g = loom__onnx_attr_i(n, "group", 1), outpad[MAX_SPATIAL] = {0}, ones[MAX_SPATIAL] = {1, 1, 1};
  int64_t oshape[MAX_SPATIAL];
  int32_t nshape = loom__onnx_attr_ints(n, "output_shape", oshape, MAX_SPATIAL);
  loom__onnx_attr_ints(n, "output_padding", outpad, MAX_SPATIAL);
  if (nshape >= 0 || same) {
    /* The pads that give output_shape (for SAME, the input's length times the stride), split
     * as the spec says: the larger half at the end for SAME_UPPER, else at the start. */
    if (nshape >= 0 && nshape != win.ns)
      return loom__onnx_invalid(c, "output_shape must name every spatial axis");
    for (int32_t i = 0; i < win.ns; i++) {
      int64_t want = nshape >= 0 ? oshape[i] : win.in[i] * win.stride[i];
      int64_t total = win.stride[i] * (win.in[i] - 1) + outpad[i] + (win.k[i] - 1) * win.dil[i] + 1 - want;
      int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2); /* floor, as the spec's Python */
      win.pb[i] = upper ? half : total - half;
      win.pe[i] = total - win.pb[i];
    }
  }
  if (g < 1 || wt.dims[0] % g) return loom__onnx_invalid(c, "group does not divide W's first axis");
  for (int32_t i = 0; i < win.ns; i++) {
    x = spread(c, x, 2 + i, win.stride[i]);
    int64_t span = (win.k[i] - 1) * win.dil[i], before = span - win.pb[i],
            after = span - win.pe[i] + outpad[i];
    const loom_type t = *TY(x);
    int64_t lo[LOOM_MAX_RANK] = {0}, hi[LOOM_MAX_RANK];
    for (int32_t j = 0; j < t.rank; j++) hi[j] = t.dims[j];
    lo[2 + i] = before < 0 ? -before : 0;
    hi[2 + i] = after < 0 ? t.dims[2 + i] + after : t.dims[2 + i];
    if (before < 0 || after < 0) x = loom_slice(G, x, t.rank, lo, hi, NULL);
    x = pad_with(c, x, 2 + i, LOOM_MAX(before, 0), LOOM_MAX(after, 0), 0.0);
  }
  /* W [C_in, C_out/g, k...] -> [g, C_in/g, C_out/g, k...] -> [g, C_out/g, C_in/g, k...]. */
  int64_t d5[LOOM_MAX_RANK], perm[LOOM_MAX_RANK], d4[LOOM_MAX_RANK];
  int32_t r = wt.rank;
  d5[0] = g, d5[1] = wt.dims[0] / g, d5[2] = wt.dims[1];
  perm[0] = 0, perm[1] = 2, perm[2] = 1;
  for (int32_t i = 2; i < r; i++) d5[i + 1] = wt.dims[i], perm[i + 1] = i + 1;
  d4[0] = g * wt.dims[1], d4[1] = wt.dims[0] / g;
  for (int32_t i = 2; i < r; i++) d4[i] = wt.dims[i];
  w = loom_reshape(G, loom_transpose(G, loom_reshape(G, w, r + 1, d5), r + 1, perm), r, d4);
  for (int32_t i = 0; i < win.ns && w.id >= 0; i++) w = reversed(c, w, 2 + i);
  if (w.id < 0 && !G->error) return loom__onnx_refuse(c, "a kernel longer than 16");
  int64_t zero[MAX_SPATIAL] = {0};
  loom_value y = loom_conv(G, x, w, ones, zero, win.dil, g);
  if (loom__onnx_in(c, 2)) {
    int64_t dims[2 + MAX_SPATIAL] = {1, TY(y)->dims[1], 1, 1, 1};
    y = BIN(ADD, y, loom_reshape(G, IN(2), 2 + win.ns, dims));
  }
  return loom__onnx_out(c, 0, y);
}

/* The value a max pool pads with: below everything of the dtype. */
static double lowest(loom_dtype d) {
  switch (d) {
    case LOOM_I8:
      return -128;
    case LOOM_U8:
      return 0;
    case LOOM_I16:
      return -32768;
    case LOOM_I32:
      return -2147483648.0;
    case LOOM_I64:
      return -9223372036854775807.0;
    default:
      return -INFINITY;
  }
}

/* The per-output count of an average pool's window (the elements it divides by), a constant
 * of shape [1, 1, out...] computed now: its factors per axis multiply. */
static loom_value pool_counts(loom__onnx *c, const window *w, loom_dtype d, bool include_pad) {
  int64_t total = 1, dims[2 + MAX_SPATIAL] = {1, 1};
  for (int32_t i = 0; i < w->ns; i++) dims[2 + i] = w->out[i], total *= w->out[i];
  double *cnt = loom__malloc((size_t)total * sizeof *cnt);
  if (!cnt) return LOOM_VALUE_NONE;
  for (int64_t e = 0; e < total; e++) {
    double prod = 1;
    for (int32_t i = w->ns - 1, rest = (int32_t)e; i >= 0; i--) {
      int64_t o = rest % w->out[i];
      rest /= (int32_t)w->out[i];
      int64_t hits = 0;
      for (int64_t kk = 0; kk < w->k[i]; kk++) {
        int64_t p = o * w->stride[i] + kk * w->dil[i] - w->pb[i];
        hits += include_pad ? (p < w->in[i] + w->pe[i]) : (p >= 0 && p < w->in[i]);
      }
      prod *= (double)hits;
    }
    cnt[e] = prod;
  }
  loom_type t = {LOOM_F64, 2 + w->ns, {0}};
  memcpy(t.dims, dims, sizeof dims);
  loom_value v = loom_constant(G, &t, cnt);
  loom__free(cnt);
  return d == LOOM_F64 ? v : loom_cast(G, v, d);
}

static loom_status lower_pool(loom__onnx *c, const Onnx__NodeProto *n, int64_t is_max) {
  loom_value x = IN(0);
  const loom_type xt = *TY(x);
  int64_t k[MAX_SPATIAL];
  int32_t nk = loom__onnx_attr_ints(n, "kernel_shape", k, MAX_SPATIAL);
  if (nk != xt.rank - 2) return loom__onnx_invalid(c, "kernel_shape must name every spatial dimension");
  if (is_max && n->n_output > 1 && n->output[1][0]) return loom__onnx_refuse(c, "the Indices output");
  if (loom__onnx_attr_i(n, "storage_order", 0)) return loom__onnx_refuse(c, "storage_order=1");
  window w;
  loom_status s = window_of(c, n, &xt, k, loom__onnx_attr_i(n, "ceil_mode", 0) != 0, false, &w);
  if (s) return s;
  if (!is_max && !loom_dtype_is_float(xt.dtype)) return loom__onnx_refuse(c, "an average pool of integers");
  double fill = is_max ? lowest(xt.dtype) : 0.0;
  for (int32_t i = 0; i < w.ns; i++) {
    int64_t need = (w.out[i] - 1) * w.stride[i] + (w.k[i] - 1) * w.dil[i] + 1;
    x = pad_with(c, x, 2 + i, w.pb[i], LOOM_MAX(need - w.in[i] - w.pb[i], 0), fill);
  }
  const loom_type pt_copy = *TY(x), *pt = &pt_copy;
  int64_t offs = 1, lo[LOOM_MAX_RANK] = {0}, hi[LOOM_MAX_RANK], step[LOOM_MAX_RANK];
  for (int32_t i = 0; i < w.ns; i++) offs *= w.k[i];
  if (offs > 512)
    return loom__onnx_refuse(c, "a pool window of %lld elements (at most 512)", (long long)offs);
  loom_value acc = LOOM_VALUE_NONE;
  for (int64_t o = 0; o < offs; o++) {
    hi[0] = pt->dims[0], hi[1] = pt->dims[1], step[0] = step[1] = 1;
    for (int32_t i = w.ns - 1, rest = (int32_t)o; i >= 0; i--) {
      int64_t kk = rest % w.k[i];
      rest /= (int32_t)w.k[i];
      lo[2 + i] = kk * w.dil[i];
      hi[2 + i] = lo[2 + i] + (w.out[i] - 1) * w.stride[i] + 1;
      step[2 + i] = w.stride[i];
    }
    loom_value piece = loom_slice(G, x, xt.rank, lo, hi, step);
    acc = o == 0 ? piece : loom_binary(G, is_max ? LOOM_OP_MAXIMUM : LOOM_OP_ADD, acc, piece);
  }
  if (!is_max)
    acc = BIN(DIV, acc, pool_counts(c, &w, xt.dtype, loom__onnx_attr_i(n, "count_include_pad", 0) != 0));
  else if (offs == 1)
    acc = loom_reshape(G, acc, xt.rank, TY(acc)->dims);
  return loom__onnx_out(c, 0, acc);
}

static loom_status lower_global_pool(loom__onnx *c, const Onnx__NodeProto *n, int64_t is_max) {
  loom_value x = IN(0);
  const loom_type t_copy = *TY(x), *t = &t_copy;
  int64_t axes[LOOM_MAX_RANK];
  for (int32_t i = 2; i < t->rank; i++) axes[i - 2] = i;
  loom_op op = is_max ? LOOM_OP_REDUCE_MAX : LOOM_OP_REDUCE_MEAN;
  return loom__onnx_out(c, 0, loom_reduce(G, op, x, t->rank - 2, axes, true));
}

/* LRN: x / (bias + alpha / size * the sum of squares over `size` neighbouring channels)^beta,
 * the channel window as one slice of the zero-padded squares per offset. */
static loom_status lower_lrn(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  const loom_type t = *TY(x);
  int64_t size = loom__onnx_attr_i(n, "size", 0);
  if (t.rank < 3 || size < 1 || size > 64)
    return loom__onnx_refuse(c, "LRN of rank below 3 or size outside 1 to 64");
  double alpha = loom__onnx_attr_f(n, "alpha", 1e-4f), beta = loom__onnx_attr_f(n, "beta", 0.75f);
  double bias = loom__onnx_attr_f(n, "bias", 1.0f);
  int64_t before = (size - 1) / 2, after = size - 1 - before;
  loom_value sq = pad_with(c, BIN(MUL, x, x), 1, before, after, 0.0);
  int64_t lo[LOOM_MAX_RANK] = {0}, hi[LOOM_MAX_RANK];
  for (int32_t i = 0; i < t.rank; i++) hi[i] = t.dims[i];
  loom_value sum = LOOM_VALUE_NONE;
  for (int64_t k = 0; k < size; k++) {
    lo[1] = k;
    hi[1] = k + t.dims[1];
    loom_value piece = loom_slice(G, sq, t.rank, lo, hi, NULL);
    sum = k ? BIN(ADD, sum, piece) : piece;
  }
  loom_value base = BIN(ADD, BIN(MUL, sum, K(x, alpha / (double)size)), K(x, bias));
  return loom__onnx_out(c, 0, BIN(DIV, x, BIN(POW, base, K(x, beta))));
}

/* A per-channel parameter ([C]) shaped to broadcast over [N, C, spatial...]. */
static loom_value per_channel(loom__onnx *c, int32_t k, int32_t rank) {
  loom_value p = IN(k);
  int64_t dims[LOOM_MAX_RANK];
  for (int32_t i = 0; i < rank; i++) dims[i] = i == 1 ? TY(p)->dims[0] : 1;
  if (TY(p)->rank != 1) return p;
  return loom_reshape(G, p, rank, dims);
}

static loom_status lower_batchnorm(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  if (loom__onnx_attr_i(n, "training_mode", 0) || (n->n_output > 1 && n->output[1][0]))
    return loom__onnx_refuse(c, "training mode (Loom runs inference only)");
  if (!loom__onnx_attr_i(n, "spatial", 1)) return loom__onnx_refuse(c, "spatial=0");
  if (loom__onnx_attr(n, "is_test") && !loom__onnx_attr_i(n, "is_test", 0))
    return loom__onnx_refuse(c, "is_test=0 (training; Loom runs inference only)");
  loom_value x = IN(0);
  int32_t r = TY(x)->rank;
  double eps = loom__onnx_attr_f(n, "epsilon", 1e-5f);
  loom_value scale = per_channel(c, 1, r), b = per_channel(c, 2, r), mean = per_channel(c, 3, r);
  loom_value var = per_channel(c, 4, r);
  loom_value inv = UN(RSQRT, BIN(ADD, var, K(var, eps)));
  loom_value y = BIN(ADD, BIN(MUL, BIN(SUB, x, mean), BIN(MUL, scale, inv)), b);
  return loom__onnx_out(c, 0, y);
}

static loom_status lower_instancenorm(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  int32_t r = TY(x)->rank;
  int64_t axes[LOOM_MAX_RANK];
  for (int32_t i = 2; i < r; i++) axes[i - 2] = i;
  loom_value mean = loom_reduce(G, LOOM_OP_REDUCE_MEAN, x, r - 2, axes, true);
  loom_value d = BIN(SUB, x, mean);
  loom_value var = loom_reduce(G, LOOM_OP_REDUCE_MEAN, BIN(MUL, d, d), r - 2, axes, true);
  loom_value inv = UN(RSQRT, BIN(ADD, var, K(var, loom__onnx_attr_f(n, "epsilon", 1e-5f))));
  loom_value y = BIN(ADD, BIN(MUL, BIN(MUL, d, inv), per_channel(c, 1, r)), per_channel(c, 2, r));
  return loom__onnx_out(c, 0, y);
}

/* LayerNormalization over the axes from `axis` on; f16/bf16 inputs are normalized in f32
 * (stash_type 1, the only one ONNX defines). Mean and InvStdDev outputs where asked. */
static loom_status lower_layernorm(loom__onnx *c, const Onnx__NodeProto *n, int64_t op) {
  loom_value x = IN(0);
  const loom_type t = *TY(x);
  int32_t axis;
  loom_status s = loom__onnx_axis(c, loom__onnx_attr_i(n, "axis", -1), t.rank, &axis);
  if (s) return s;
  if (loom__onnx_attr_i(n, "stash_type", 1) != 1)
    return loom__onnx_refuse(c, "stash_type other than 1 (float)");
  bool narrow = t.dtype == LOOM_F16 || t.dtype == LOOM_BF16;
  if (narrow) x = loom_cast(G, x, LOOM_F32);
  int64_t axes[LOOM_MAX_RANK];
  for (int32_t i = axis; i < t.rank; i++) axes[i - axis] = i;
  loom_value mean = loom_reduce(G, LOOM_OP_REDUCE_MEAN, x, t.rank - axis, axes, true);
  loom_value d = BIN(SUB, x, mean);
  loom_value var = loom_reduce(G, LOOM_OP_REDUCE_MEAN, BIN(MUL, d, d), t.rank - axis, axes, true);
  loom_value inv = UN(RSQRT, BIN(ADD, var, K(var, loom__onnx_attr_f(n, "epsilon", 1e-5f))));
  loom_value y = BIN(MUL, d, inv);
  if (narrow) y = loom_cast(G, y, t.dtype);
  y = BIN(MUL, y, IN(1));
  if (loom__onnx_in(c, 2)) y = BIN(ADD, y, IN(2));
  s = loom__onnx_out(c, 0, y);
  if (!s) s = loom__onnx_out(c, 1, mean);
  if (!s) s = loom__onnx_out(c, 2, inv);
  return s;
}

/* clang-format off */
const loom__onnx_op loom__onnx_ops_nn[] = {
    {"MatMul", lower_matmul, 0, ""}, {"Gemm", lower_gemm, 0, "alpha,beta,transA,transB,broadcast"},
    {"Conv", lower_conv, 0, "auto_pad,dilations,group,kernel_shape,pads,strides"},
    {"ConvInteger", lower_integer_op, 1, "auto_pad,dilations,group,kernel_shape,pads,strides"},
    {"MatMulInteger", lower_integer_op, 0, ""},
    {"ConvTranspose", lower_conv_transpose, 0,
     "auto_pad,dilations,group,kernel_shape,output_padding,output_shape,pads,strides"},
    {"MaxPool", lower_pool, 1, "auto_pad,ceil_mode,dilations,kernel_shape,pads,storage_order,strides"},
    {"AveragePool", lower_pool, 0, "auto_pad,ceil_mode,count_include_pad,kernel_shape,pads,strides"},
    {"GlobalMaxPool", lower_global_pool, 1, ""}, {"GlobalAveragePool", lower_global_pool, 0, ""},
    {"BatchNormalization", lower_batchnorm, 0, "epsilon,is_test,momentum,spatial,training_mode"},
    {"InstanceNormalization", lower_instancenorm, 0, "epsilon"},
    {"LRN", lower_lrn, 0, "alpha,beta,bias,size"},
    {"LayerNormalization", lower_layernorm, 0, "axis,epsilon,stash_type"},
    {NULL, NULL, 0, NULL},
};
/* clang-format on */
