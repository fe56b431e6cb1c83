/* Shape arithmetic done when the model is read. Exported models compute Reshape's and Slice's
 * operands from Shape through small integer ops (Gather, Concat, Slice, Add, Mul, Cast, ...);
 * Loom's shapes are fixed, so those values must be known before the graph is built. A node
 * whose inputs are all known integer vectors (scalars or 1-D, at most FOLD_MAX elements) is
 * computed here and its output is known too; any other node goes to its lowering. */
#include <string.h>

#include "onnx/onnx_internal.h"

#define FOLD_MAX 64

typedef struct ivec {
  loom_dtype dtype;
  int32_t rank; /* 0 or 1 */
  int32_t n;
  int64_t v[FOLD_MAX]; /* integer and bool values */
  double f[FOLD_MAX];  /* f32 and f64 values (Add, Sub, Mul, Div, comparisons and Cast only) */
} ivec;

static bool is_int(loom_dtype d) {
  return d == LOOM_BOOL || loom_dtype_is_integer(d);
}

static int64_t load(loom_dtype d, const void *p, int64_t i) {
  switch (d) {
    case LOOM_BOOL:
    case LOOM_U8:
      return ((const uint8_t *)p)[i];
    case LOOM_I8:
      return ((const int8_t *)p)[i];
    case LOOM_I16:
      return ((const int16_t *)p)[i];
    case LOOM_I32:
      return ((const int32_t *)p)[i];
    default:
      return ((const int64_t *)p)[i];
  }
}

static bool is_real(loom_dtype d) {
  return d == LOOM_F32 || d == LOOM_F64;
}

/* Input k as a vector of integers (or, with floats, of f32/f64 too), or false when it is not
 * a known small vector of those. */
static bool in_vec_of(loom__onnx *c, int32_t k, bool floats, ivec *out) {
  loom__onnx_val *x = loom__onnx_in(c, k);
  int64_t n;
  if (!x || !x->host || x->type.rank > 1) return false;
  if (!is_int(x->type.dtype) && !(floats && is_real(x->type.dtype))) return false;
  if (loom_type_elements(&x->type, &n) || n > FOLD_MAX) return false;
  out->dtype = x->type.dtype;
  out->rank = x->type.rank;
  out->n = (int32_t)n;
  for (int64_t i = 0; i < n; i++) {
    if (x->type.dtype == LOOM_F32)
      out->f[i] = ((const float *)x->host)[i];
    else if (x->type.dtype == LOOM_F64)
      out->f[i] = ((const double *)x->host)[i];
    else
      out->v[i] = load(x->type.dtype, x->host, i), out->f[i] = (double)out->v[i];
  }
  return true;
}

static bool in_vec(loom__onnx *c, int32_t k, ivec *out) {
  return in_vec_of(c, k, false, out);
}

static loom_status out_vec(loom__onnx *c, int32_t k, const ivec *r) {
  loom_type t = {r->dtype, r->rank, {r->n}};
  int64_t size = loom_dtype_size(r->dtype);
  uint8_t *data = loom__malloc((size_t)(r->n ? r->n : 1) * (size_t)size);
  if (!data) return loom__oom("a folded value");
  for (int32_t i = 0; i < r->n; i++) {
    if (is_real(r->dtype))
      loom__scalar_store(r->dtype, r->f[i], 0, false, data + i * size);
    else
      loom__scalar_store(r->dtype, (double)r->v[i], r->v[i], true, data + i * size);
  }
  return loom__onnx_out_const(c, k, &t, data);
}

/* The result of a binary fold of a and b (one may be a scalar broadcast against the other):
 * r's rank, length and dtype (bool for a comparison, whose kind *out_cmp says); false where the
 * lengths do not broadcast. */
static bool binary_result(const char *op, const ivec *a, const ivec *b, ivec *r, bool *out_cmp) {
  if (a->n != b->n && a->n != 1 && b->n != 1) return false;
  r->rank = LOOM_MAX(a->rank, b->rank);
  r->n = LOOM_MAX(a->n, b->n);
  *out_cmp = !strcmp(op, "Equal") || !strcmp(op, "Less") || !strcmp(op, "Greater");
  r->dtype = *out_cmp ? LOOM_BOOL : a->dtype;
  return true;
}

/* As fold_binary, on f32/f64 values computed in double (rounded to f32 as each ONNX op's
 * f32 result is). */
static bool fold_real_binary(const char *op, const ivec *a, const ivec *b, ivec *r) {
  bool cmp = false;
  if (!binary_result(op, a, b, r, &cmp)) return false;
  for (int32_t i = 0; i < r->n; i++) {
    double x = a->f[a->n == 1 ? 0 : i], y = b->f[b->n == 1 ? 0 : i];
    if (!strcmp(op, "Add"))
      r->f[i] = x + y;
    else if (!strcmp(op, "Sub"))
      r->f[i] = x - y;
    else if (!strcmp(op, "Mul"))
      r->f[i] = x * y;
    else if (!strcmp(op, "Div"))
      r->f[i] = x / y;
    else if (cmp)
      r->v[i] = !strcmp(op, "Equal") ? x == y : !strcmp(op, "Less") ? x < y : x > y;
    else
      return false;
    if (!cmp && a->dtype == LOOM_F32) r->f[i] = (float)r->f[i];
  }
  return true;
}

/* Elementwise binary ops with a scalar broadcast against a vector. */
static bool fold_binary(const char *op, const ivec *a, const ivec *b, ivec *r) {
  if (is_real(a->dtype)) return fold_real_binary(op, a, b, r);
  bool cmp = false;
  if (!binary_result(op, a, b, r, &cmp)) return false;
  for (int32_t i = 0; i < r->n; i++) {
    int64_t x = a->v[a->n == 1 ? 0 : i], y = b->v[b->n == 1 ? 0 : i];
    if (!strcmp(op, "Add"))
      r->v[i] = x + y;
    else if (!strcmp(op, "Sub"))
      r->v[i] = x - y;
    else if (!strcmp(op, "Mul"))
      r->v[i] = x * y;
    else if (!strcmp(op, "Div")) {
      if (!y) return false;
      r->v[i] = x / y;
    } else if (!strcmp(op, "Equal"))
      r->v[i] = x == y;
    else if (!strcmp(op, "Less"))
      r->v[i] = x < y;
    else if (!strcmp(op, "Greater"))
      r->v[i] = x > y;
    else if (!strcmp(op, "Max"))
      r->v[i] = x > y ? x : y;
    else if (!strcmp(op, "Min"))
      r->v[i] = x < y ? x : y;
    else
      return false;
  }
  return true;
}

static bool fold_concat(loom__onnx *c, const Onnx__NodeProto *n, ivec *r) {
  r->n = 0;
  r->rank = 1;
  for (int32_t k = 0; k < (int32_t)n->n_input; k++) {
    ivec a;
    if (!in_vec(c, k, &a) || a.rank != 1 || r->n + a.n > FOLD_MAX) return false;
    r->dtype = a.dtype;
    memcpy(r->v + r->n, a.v, (size_t)a.n * sizeof a.v[0]);
    r->n += a.n;
  }
  return r->n > 0 || n->n_input > 0;
}

static bool fold_gather(loom__onnx *c, const Onnx__NodeProto *n, ivec *r) {
  ivec x, idx;
  if (!in_vec(c, 0, &x) || !in_vec(c, 1, &idx) || x.rank != 1 || loom__onnx_attr_i(n, "axis", 0) != 0)
    return false;
  *r = idx;
  r->dtype = x.dtype;
  for (int32_t i = 0; i < idx.n; i++) {
    int64_t at = idx.v[i] < 0 ? idx.v[i] + x.n : idx.v[i];
    if (at < 0 || at >= x.n) return false;
    r->v[i] = x.v[at];
  }
  return true;
}

static bool fold_slice(loom__onnx *c, const Onnx__NodeProto *n, ivec *r) {
  ivec x, st, en, ax, sp;
  if (c->opset < 10 || !in_vec(c, 0, &x) || x.rank != 1 || !in_vec(c, 1, &st) || !in_vec(c, 2, &en))
    return false;
  if (st.n != 1 || en.n != 1) return false;
  if (loom__onnx_in(c, 3) && (!in_vec(c, 3, &ax) || ax.n != 1 || (ax.v[0] != 0 && ax.v[0] != -1)))
    return false;
  int64_t step = 1;
  if (loom__onnx_in(c, 4) && (!in_vec(c, 4, &sp) || sp.n != 1 || (step = sp.v[0]) < 1)) return false;
  int64_t lo = st.v[0] < 0 ? st.v[0] + x.n : st.v[0], hi = en.v[0] < 0 ? en.v[0] + x.n : en.v[0];
  lo = LOOM_MAX(0, LOOM_MIN(lo, x.n));
  hi = LOOM_MAX(lo, LOOM_MIN(hi, x.n));
  *r = x;
  r->n = 0;
  for (int64_t i = lo; i < hi; i += step) r->v[r->n++] = x.v[i];
  return true;
}

static bool fold_cast(loom__onnx *c, const Onnx__NodeProto *n, ivec *r) {
  loom_dtype to;
  if (!in_vec_of(c, 0, true, r) || !loom__onnx_dtype((int32_t)loom__onnx_attr_i(n, "to", 0), &to))
    return false;
  if (!is_int(to) && !is_real(to)) return false;
  for (int32_t i = 0; i < r->n; i++) {
    if (is_real(r->dtype) && is_int(to)) { /* C's conversion, toward zero; out of range: not folded */
      if (!(r->f[i] > -9e18 && r->f[i] < 9e18)) return false;
      r->v[i] = to == LOOM_BOOL ? r->f[i] != 0 : (int64_t)r->f[i];
    }
    if (to == LOOM_BOOL && !is_real(r->dtype)) r->v[i] = r->v[i] != 0;
    if (to == LOOM_F32) r->f[i] = (float)r->f[i];
  }
  r->dtype = to;
  return true;
}

static bool fold_unary(loom__onnx *c, const char *op, ivec *r) {
  if (!in_vec(c, 0, r)) return false;
  for (int32_t i = 0; i < r->n; i++) {
    if (!strcmp(op, "Neg"))
      r->v[i] = -r->v[i];
    else if (!strcmp(op, "Abs"))
      r->v[i] = r->v[i] < 0 ? -r->v[i] : r->v[i];
    else if (!strcmp(op, "Not") && r->dtype == LOOM_BOOL)
      r->v[i] = !r->v[i];
    else
      return false;
  }
  return true;
}

static bool fold_where(loom__onnx *c, ivec *r) {
  ivec cond, a, b;
  if (!in_vec(c, 0, &cond) || !in_vec(c, 1, &a) || !in_vec(c, 2, &b)) return false;
  int32_t n = LOOM_MAX(cond.n, LOOM_MAX(a.n, b.n));
  if ((cond.n != n && cond.n != 1) || (a.n != n && a.n != 1) || (b.n != n && b.n != 1)) return false;
  *r = a;
  r->n = n;
  r->rank = LOOM_MAX(cond.rank, LOOM_MAX(a.rank, b.rank));
  for (int32_t i = 0; i < n; i++)
    r->v[i] = cond.v[cond.n == 1 ? 0 : i] ? a.v[a.n == 1 ? 0 : i] : b.v[b.n == 1 ? 0 : i];
  return true;
}

static bool fold_reduce(loom__onnx *c, const Onnx__NodeProto *n, ivec *r) {
  ivec x;
  if (!in_vec(c, 0, &x) || x.rank != 1 || n->n_input > 1 || loom__onnx_attr(n, "axes")) return false;
  bool prod = !strcmp(n->op_type, "ReduceProd");
  int64_t acc = prod ? 1 : 0;
  for (int32_t i = 0; i < x.n; i++) acc = prod ? acc * x.v[i] : acc + x.v[i];
  *r = x;
  r->n = 1;
  r->v[0] = acc;
  r->rank = loom__onnx_attr_i(n, "keepdims", 1) ? 1 : 0;
  return true;
}

bool loom__onnx_fold(loom__onnx *c, const Onnx__NodeProto *n, loom_status *out_status) {
  const char *op = n->op_type;
  ivec r, a, b;
  bool done = false;
  if (n->n_output != 1) return false;
  if (!strcmp(op, "Concat"))
    done = fold_concat(c, n, &r);
  else if (!strcmp(op, "Gather"))
    done = fold_gather(c, n, &r);
  else if (!strcmp(op, "Slice"))
    done = fold_slice(c, n, &r);
  else if (!strcmp(op, "Cast"))
    done = fold_cast(c, n, &r);
  else if (!strcmp(op, "Where"))
    done = fold_where(c, &r);
  else if (!strcmp(op, "ReduceProd") || !strcmp(op, "ReduceSum"))
    done = fold_reduce(c, n, &r);
  else if (!strcmp(op, "Neg") || !strcmp(op, "Abs") || !strcmp(op, "Not"))
    done = fold_unary(c, op, &r);
  else if (n->n_input == 2 && in_vec_of(c, 0, true, &a) && in_vec_of(c, 1, true, &b) && a.dtype == b.dtype)
    done = fold_binary(op, &a, &b, &r);
  if (done) *out_status = out_vec(c, 0, &r);
  return done;
}
