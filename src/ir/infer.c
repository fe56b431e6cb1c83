/* Result type inference for every op of IR.md (and `square`), one function per op class.
 *
 * Every failure message names the op, its operand types and the rule broken, in the form
 * the parser prefixes with a location: "sub: shapes f32[3,4] and f32[5] do not broadcast".
 * Every size is overflow-checked: a result whose element count or byte size does not fit in
 * int64 is an error, never a wrap-around.
 *
 * Axes (iota, concat, reduce_*, argmax/argmin, topk, fft..) may be negative, Python style:
 * -1 is the last axis. The graph keeps attributes as written, so every pass that reads an
 * axis normalizes it with loom__axis_normalize(). transpose's perm is the exception: it must
 * be a permutation of 0..rank-1 as written, so views can index strides by it directly.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"

#define INVALID LOOM_ERR_INVALID_ARGUMENT

/* Formats a type or a list into a temporary that lives until the end of the enclosing
 * full expression's block, for use inside loom__error's argument list. */
#define TS(t) loom_type_format((t), (char[LOOM_TYPE_STRING_MAX]){0}, LOOM_TYPE_STRING_MAX)
#define LS(v, n) format_list((v), (n), (char[LOOM_TYPE_STRING_MAX]){0}, LOOM_TYPE_STRING_MAX)

static char *format_list(const int64_t *v, int32_t n, char *buf, size_t size) {
  size_t len = (size_t)snprintf(buf, size, "[");
  for (int32_t i = 0; i < n && len < size; i++)
    len += (size_t)snprintf(buf + len, size - len, i ? ",%lld" : "%lld", (long long)v[i]);
  if (len < size) snprintf(buf + len, size - len, "]");
  return buf;
}

/* ---- dtype classes --------------------------------------------------------------------- */

#define M(d) (1u << LOOM_##d)
enum {
  M_BOOL = M(BOOL),
  M_SINT = M(I8) | M(I16) | M(I32) | M(I64),
  M_INT = M_SINT | M(U8),
  M_FLOAT = M(F16) | M(BF16) | M(F32) | M(F64),
  M_COMPLEX = M(C64) | M(C128),
  M_ALL = M_BOOL | M_INT | M_FLOAT | M_COMPLEX,
  M_QUANT = M(Q8) | M(Q4), /* only quantize makes them, only dequantize reads them */
};

typedef struct dtype_rule {
  uint32_t mask;
  const char *what; /* completes "<op>: takes ..." */
} dtype_rule;

static bool dtype_in(loom_dtype d, uint32_t mask) {
  return (int)d >= 0 && d < LOOM_DTYPE_COUNT && ((mask >> d) & 1u);
}

/* The dtypes each op accepts for its (data) operands; ops left out (sources, select, cast,
 * layout) take any dtype. */
/* One line per rule reads better than one line per op. */
/* clang-format off */
#define FLT {M_FLOAT, "a float dtype"}
#define SFLT {M_SINT | M_FLOAT, "a signed integer or float dtype"}
#define NUM {M_INT | M_FLOAT | M_COMPLEX, "an integer, float or complex dtype"}
#define REAL {M_INT | M_FLOAT, "an integer or float dtype"}
#define CPX {M_COMPLEX, "c64 or c128"}
#define OP(e) [LOOM_OP_##e]
static const dtype_rule rules[LOOM_OP_COUNT] = {
    OP(NEG) = {M_SINT | M_FLOAT | M_COMPLEX, "a signed integer, float or complex dtype"},
    OP(ABS) = SFLT, OP(SIGN) = SFLT, OP(RELU) = SFLT,
    OP(EXP) = FLT, OP(LOG) = FLT, OP(SQRT) = FLT, OP(RSQRT) = FLT, OP(SIN) = FLT, OP(COS) = FLT,
    OP(TANH) = FLT, OP(SIGMOID) = FLT, OP(FLOOR) = FLT, OP(CEIL) = FLT, OP(CONV) = FLT,
    OP(NOT) = {M_BOOL, "bool"}, OP(AND) = {M_BOOL, "bool"}, OP(OR) = {M_BOOL, "bool"},
    OP(SQUARE) = NUM, OP(ADD) = NUM, OP(SUB) = NUM, OP(MUL) = NUM, OP(DIV) = NUM,
    OP(REDUCE_SUM) = NUM, OP(REDUCE_PROD) = NUM, OP(DOT) = NUM,
    OP(POW) = REAL, OP(MAXIMUM) = REAL, OP(MINIMUM) = REAL, OP(REDUCE_MAX) = REAL,
    OP(REDUCE_MIN) = REAL, OP(ARGMAX) = REAL, OP(ARGMIN) = REAL, OP(TOPK) = REAL,
    OP(LT) = REAL, OP(LE) = REAL, OP(GT) = REAL, OP(GE) = REAL,
    OP(EQ) = {M_ALL, "any dtype"}, OP(NE) = {M_ALL, "any dtype"},
    OP(REDUCE_MEAN) = {M_FLOAT | M_COMPLEX, "a float or complex dtype"},
    OP(FFT) = CPX, OP(IFFT) = CPX, OP(IRFFT) = CPX,
    OP(RFFT) = {M(F32) | M(F64), "f32 or f64"},
};
#undef FLT
#undef SFLT
#undef NUM
#undef REAL
#undef CPX
#undef OP
/* clang-format on */

static dtype_rule rule_of(loom_op op) {
  dtype_rule any = {M_ALL, "any dtype"};
  return ((int)op >= 0 && op < LOOM_OP_COUNT && rules[op].mask) ? rules[op] : any;
}

static loom_status check_dtype(loom_op op, const loom_type *t) {
  dtype_rule r = rule_of(op);
  if (dtype_in(t->dtype, r.mask)) return LOOM_OK;
  return loom__error(INVALID, "%s: takes %s, got %s", loom_op_name(op), r.what, TS(t));
}

/* ---- shared checks ------------------------------------------------------------------- */

/* Builds a result type, with the overflow checks of loom_type_bytes and messages that name
 * the op. Sequential products, exactly as loom_type_elements computes them, so any type
 * accepted here is accepted by every later size computation. */
static loom_status make_result(loom_op op, loom_dtype dtype, int32_t rank, const int64_t *dims,
                               loom_type *out) {
  const char *name = loom_op_name(op);
  loom_type r; /* built aside: dims may point into *out */
  memset(&r, 0, sizeof r);
  if (!dtype_in(dtype, M_ALL | M_QUANT))
    return loom__error(INVALID, "%s: unknown dtype %d", name, (int)dtype);
  if (rank < 0 || rank > LOOM_MAX_RANK)
    return loom__error(INVALID, "%s: rank %d is outside 0..%d", name, (int)rank, LOOM_MAX_RANK);
  r.dtype = dtype;
  r.rank = rank;
  for (int32_t i = 0; i < rank; i++) {
    if (dims[i] < 0)
      return loom__error(INVALID, "%s: dimension %d of the result is negative (%lld)", name, (int)i,
                         (long long)dims[i]);
    r.dims[i] = dims[i];
  }
  int64_t n = 1;
  for (int32_t i = 0; i < rank; i++)
    if (!loom__mul_i64(n, r.dims[i], &n))
      return loom__error(INVALID, "%s: result %s overflows int64: too many elements", name, TS(&r));
  if (!loom__mul_i64(n, loom_dtype_size(dtype), &n))
    return loom__error(INVALID, "%s: result %s overflows int64: its byte size does not fit", name, TS(&r));
  *out = r;
  return LOOM_OK;
}

bool loom__axis_normalize(int64_t axis, int32_t rank, int32_t *out_axis) {
  if (axis < -(int64_t)rank || axis >= rank) return false;
  *out_axis = (int32_t)(axis < 0 ? axis + rank : axis);
  return true;
}

static loom_status get_axis(loom_op op, int64_t axis, const loom_type *t, int32_t *out) {
  if (loom__axis_normalize(axis, t->rank, out)) return LOOM_OK;
  return loom__error(INVALID, "%s: axis %lld is out of range for %s (rank %d)", loom_op_name(op),
                     (long long)axis, TS(t), (int)t->rank);
}

/* A list attribute holds `want` entries (any count 0..8 when want < 0). */
static loom_status check_list(loom_op op, const char *key, const loom_int_list *l, int32_t want,
                              const char *why) {
  if (l->count < 0 || l->count > LOOM_MAX_RANK)
    return loom__error(INVALID, "%s: %s has %d entries, at most %d are allowed", loom_op_name(op), key,
                       (int)l->count, LOOM_MAX_RANK);
  if (want >= 0 && l->count != want)
    return loom__error(INVALID, "%s: %s=%s has %d entr%s, %s needs %d", loom_op_name(op), key,
                       LS(l->v, l->count), (int)l->count, l->count == 1 ? "y" : "ies", why, (int)want);
  return LOOM_OK;
}

bool loom__broadcast_shapes(const loom_type *a, const loom_type *b, loom_type *out) {
  loom_type r;
  memset(&r, 0, sizeof r);
  r.dtype = a->dtype;
  r.rank = LOOM_MAX(a->rank, b->rank);
  for (int32_t i = 0; i < r.rank; i++) {
    int64_t da = i < a->rank ? a->dims[a->rank - 1 - i] : 1;
    int64_t db = i < b->rank ? b->dims[b->rank - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) return false;
    r.dims[r.rank - 1 - i] = da == 1 ? db : da;
  }
  *out = r;
  return true;
}

/* ---- sources ----------------------------------------------------------------------------- */

/* fill's value must be representable in an integer or bool dtype; floats take anything. */
static loom_status check_fill_value(const loom_type *t, const loom_attrs *a) {
  static const int64_t lo[] = {[LOOM_BOOL] = 0,        [LOOM_I8] = INT8_MIN,   [LOOM_U8] = 0,
                               [LOOM_I16] = INT16_MIN, [LOOM_I32] = INT32_MIN, [LOOM_I64] = INT64_MIN};
  static const int64_t hi[] = {[LOOM_BOOL] = 1,        [LOOM_I8] = INT8_MAX,   [LOOM_U8] = UINT8_MAX,
                               [LOOM_I16] = INT16_MAX, [LOOM_I32] = INT32_MAX, [LOOM_I64] = INT64_MAX};
  if (!dtype_in(t->dtype, M_BOOL | M_INT)) return LOOM_OK;
  int64_t v = a->ivalue;
  if (!a->value_is_int) {
    /* 0x1p63 is exactly 2^63: anything at or past it does not fit in int64. */
    if (!isfinite(a->value) || a->value != trunc(a->value) || fabs(a->value) >= 0x1p63)
      return loom__error(INVALID, "fill: value %g is not an integer, as %s needs", a->value, TS(t));
    v = (int64_t)a->value;
  }
  if (v < lo[t->dtype] || v > hi[t->dtype])
    return loom__error(INVALID, "fill: value %lld does not fit %s (%lld..%lld)", (long long)v, TS(t),
                       (long long)lo[t->dtype], (long long)hi[t->dtype]);
  return LOOM_OK;
}

static loom_status infer_source(loom_op op, const loom_attrs *a, const loom_type *rt, loom_type *out) {
  if (!rt) return loom__error(INVALID, "%s: needs a result type", loom_op_name(op));
  if (dtype_in(rt->dtype, M_QUANT))
    return loom__error(INVALID, "%s: cannot make %s values (quantize makes them, with their scale)",
                       loom_op_name(op), loom_dtype_name(rt->dtype));
  loom_status s = make_result(op, rt->dtype, rt->rank, rt->dims, out);
  if (s) return s;
  if (op == LOOM_OP_IOTA) {
    if (out->dtype == LOOM_BOOL) return loom__error(INVALID, "iota: cannot count in %s", TS(out));
    int32_t axis = 0;
    return get_axis(op, a->axis, out, &axis);
  }
  if (op == LOOM_OP_FILL) return check_fill_value(out, a);
  return LOOM_OK;
}

/* ---- elementwise ------------------------------------------------------------------------ */

static loom_status infer_unary(loom_op op, const loom_type *x, loom_type *out) {
  loom_status s = check_dtype(op, x);
  if (!s) *out = *x;
  return s;
}

/* Binary arithmetic, compare (-> bool) and logic. */
static loom_status infer_binary(loom_op op, const loom_type *a, const loom_type *b, loom_type *out) {
  const char *name = loom_op_name(op);
  if (a->dtype != b->dtype)
    return loom__error(INVALID, "%s: operand dtypes differ: %s and %s", name, TS(a), TS(b));
  dtype_rule r = rule_of(op);
  if (!dtype_in(a->dtype, r.mask))
    return loom__error(INVALID, "%s: takes %s, got %s and %s", name, r.what, TS(a), TS(b));
  loom_type shape;
  if (!loom__broadcast_shapes(a, b, &shape))
    return loom__error(INVALID, "%s: shapes %s and %s do not broadcast", name, TS(a), TS(b));
  bool compare = loom__op_info_of(op)->cls == LOOM_CLASS_COMPARE;
  return make_result(op, compare ? LOOM_BOOL : a->dtype, shape.rank, shape.dims, out);
}

static loom_status infer_select(const loom_type *c, const loom_type *a, const loom_type *b, loom_type *out) {
  if (c->dtype != LOOM_BOOL) return loom__error(INVALID, "select: the condition must be bool, got %s", TS(c));
  if (a->dtype != b->dtype)
    return loom__error(INVALID, "select: operand dtypes differ: %s and %s", TS(a), TS(b));
  loom_type ca, shape;
  if (!loom__broadcast_shapes(c, a, &ca) || !loom__broadcast_shapes(&ca, b, &shape))
    return loom__error(INVALID, "select: shapes %s, %s and %s do not broadcast", TS(c), TS(a), TS(b));
  return make_result(LOOM_OP_SELECT, a->dtype, shape.rank, shape.dims, out);
}

static loom_status infer_cast(const loom_type *x, const loom_attrs *a, loom_type *out) {
  if (dtype_in(a->to, M_QUANT))
    return loom__error(INVALID,
                       "cast: cannot cast %s to %s (quantize makes quantized values, with their scale)",
                       TS(x), loom_dtype_name(a->to));
  if (!dtype_in(a->to, M_ALL)) return loom__error(INVALID, "cast: unknown dtype %d", (int)a->to);
  if (loom_dtype_is_complex(x->dtype) && !loom_dtype_is_complex(a->to))
    return loom__error(INVALID, "cast: cannot cast complex %s to non-complex %s", TS(x),
                       loom_dtype_name(a->to));
  *out = *x;
  out->dtype = a->to;
  return LOOM_OK;
}

/* ---- layout ------------------------------------------------------------------------------ */

static loom_status infer_reshape(const loom_type *x, const loom_attrs *a, loom_type *out) {
  const loom_int_list *sh = &a->shape;
  loom_status s = check_list(LOOM_OP_RESHAPE, "shape", sh, -1, "");
  if (s) return s;
  int64_t n_in, known = 1, dims[LOOM_MAX_RANK];
  if ((s = loom_type_elements(x, &n_in))) return s;
  int32_t hole = -1;
  for (int32_t i = 0; i < sh->count; i++) {
    dims[i] = sh->v[i];
    if (dims[i] == -1 && hole >= 0)
      return loom__error(INVALID, "reshape: shape %s has more than one -1", LS(sh->v, sh->count));
    if (dims[i] == -1) {
      hole = i;
    } else if (dims[i] < 0) {
      return loom__error(INVALID, "reshape: dimension %d of shape %s is negative", (int)i,
                         LS(sh->v, sh->count));
    } else if (!loom__mul_i64(known, dims[i], &known)) {
      return loom__error(INVALID, "reshape: shape %s overflows int64: too many elements",
                         LS(sh->v, sh->count));
    }
  }
  if (hole >= 0 && (known == 0 || n_in % known != 0))
    return loom__error(INVALID, "reshape: cannot reshape %s (%lld elements) to %s: no size for -1 fits",
                       TS(x), (long long)n_in, LS(sh->v, sh->count));
  if (hole >= 0)
    dims[hole] = n_in / known;
  else if (known != n_in)
    return loom__error(INVALID, "reshape: cannot reshape %s (%lld elements) to %s (%lld elements)", TS(x),
                       (long long)n_in, LS(sh->v, sh->count), (long long)known);
  return make_result(LOOM_OP_RESHAPE, x->dtype, sh->count, dims, out);
}

static loom_status infer_transpose(const loom_type *x, const loom_attrs *a, loom_type *out) {
  const loom_int_list *p = &a->perm;
  loom_status s = check_list(LOOM_OP_TRANSPOSE, "perm", p, x->rank, TS(x));
  if (s) return s;
  uint32_t seen = 0;
  *out = *x;
  for (int32_t i = 0; i < p->count; i++) {
    if (p->v[i] < 0 || p->v[i] >= x->rank || (seen & (1u << p->v[i])))
      return loom__error(INVALID, "transpose: perm %s is not a permutation of 0..%d for %s",
                         LS(p->v, p->count), (int)x->rank - 1, TS(x));
    seen |= 1u << p->v[i];
    out->dims[i] = x->dims[p->v[i]];
  }
  return LOOM_OK;
}

static loom_status infer_broadcast(const loom_type *x, const loom_attrs *a, loom_type *out) {
  const loom_int_list *sh = &a->shape;
  loom_status s = check_list(LOOM_OP_BROADCAST, "shape", sh, -1, "");
  if (s) return s;
  if (sh->count < x->rank)
    return loom__error(INVALID, "broadcast: cannot broadcast %s to %s: the shape has fewer dimensions", TS(x),
                       LS(sh->v, sh->count));
  int32_t lead = sh->count - x->rank;
  for (int32_t i = 0; i < sh->count; i++) {
    if (sh->v[i] < 0)
      return loom__error(INVALID, "broadcast: dimension %d of shape %s is negative", (int)i,
                         LS(sh->v, sh->count));
    if (i < lead) continue;
    int64_t d = x->dims[i - lead];
    if (d != sh->v[i] && d != 1)
      return loom__error(INVALID,
                         "broadcast: cannot broadcast %s to %s: dimension %d is %lld, must be 1 or %lld",
                         TS(x), LS(sh->v, sh->count), (int)(i - lead), (long long)d, (long long)sh->v[i]);
  }
  return make_result(LOOM_OP_BROADCAST, x->dtype, sh->count, sh->v, out);
}

/* One dimension of a slice: 0 <= start <= stop <= dim, step >= 1. */
static loom_status slice_dim(const loom_type *x, int32_t i, int64_t start, int64_t stop, int64_t step,
                             int64_t *out) {
  if (step < 1)
    return loom__error(INVALID,
                       "slice: step must be >= 1, got %lld in dimension %d of %s "
                       "(negative steps are not supported)",
                       (long long)step, (int)i, TS(x));
  if (start < 0 || start > stop || stop > x->dims[i])
    return loom__error(INVALID,
                       "slice: dimension %d of %s needs 0 <= start <= stop <= %lld, got "
                       "start %lld, stop %lld",
                       (int)i, TS(x), (long long)x->dims[i], (long long)start, (long long)stop);
  int64_t len = stop - start;
  *out = len / step + (len % step != 0);
  return LOOM_OK;
}

static loom_status infer_slice(const loom_type *x, const loom_attrs *a, loom_type *out) {
  bool has_step = (a->set & LOOM_ATTR_STEP) != 0;
  loom_status s = check_list(LOOM_OP_SLICE, "start", &a->start, x->rank, TS(x));
  if (!s) s = check_list(LOOM_OP_SLICE, "stop", &a->stop, x->rank, TS(x));
  if (!s && has_step) s = check_list(LOOM_OP_SLICE, "step", &a->step, x->rank, TS(x));
  *out = *x;
  for (int32_t i = 0; !s && i < x->rank; i++)
    s = slice_dim(x, i, a->start.v[i], a->stop.v[i], has_step ? a->step.v[i] : 1, &out->dims[i]);
  return s;
}

static loom_status infer_concat(const loom_graph *g, const int32_t *inputs, int32_t n, const loom_attrs *a,
                                loom_type *out) {
  const loom_type *x0 = &loom__val(g, inputs[0])->type;
  int32_t axis = 0;
  loom_status s = get_axis(LOOM_OP_CONCAT, a->axis, x0, &axis);
  if (s) return s;
  *out = *x0;
  for (int32_t k = 1; k < n; k++) {
    const loom_type *x = &loom__val(g, inputs[k])->type;
    if (x->dtype != x0->dtype || x->rank != x0->rank)
      return loom__error(INVALID, "concat: operand %d %s does not match operand 1 %s in %s", (int)k + 1,
                         TS(x), TS(x0), x->dtype != x0->dtype ? "dtype" : "rank");
    for (int32_t i = 0; i < x->rank; i++)
      if (i != axis && x->dims[i] != x0->dims[i])
        return loom__error(INVALID,
                           "concat: operand %d %s does not match operand 1 %s outside axis %d "
                           "(dimension %d: %lld vs %lld)",
                           (int)k + 1, TS(x), TS(x0), (int)axis, (int)i, (long long)x->dims[i],
                           (long long)x0->dims[i]);
    if (!loom__add_i64(out->dims[axis], x->dims[axis], &out->dims[axis]))
      return loom__error(INVALID, "concat: the length along axis %d overflows int64", (int)axis);
  }
  return make_result(LOOM_OP_CONCAT, out->dtype, out->rank, out->dims, out);
}

static loom_status infer_tile(const loom_type *x, const loom_attrs *a, loom_type *out) {
  const loom_int_list *r = &a->reps;
  loom_status s = check_list(LOOM_OP_TILE, "reps", r, -1, "");
  if (s) return s;
  if (r->count > x->rank)
    return loom__error(INVALID, "tile: reps=%s has more entries than %s has dimensions", LS(r->v, r->count),
                       TS(x));
  int64_t dims[LOOM_MAX_RANK];
  int32_t lead = x->rank - r->count; /* missing reps are 1, NumPy style */
  for (int32_t i = 0; i < x->rank; i++) {
    int64_t rep = i < lead ? 1 : r->v[i - lead];
    if (rep < 0)
      return loom__error(INVALID, "tile: reps=%s has a negative entry for %s", LS(r->v, r->count), TS(x));
    if (!loom__mul_i64(x->dims[i], rep, &dims[i]))
      return loom__error(INVALID, "tile: dimension %d of %s times %lld overflows int64", (int)i, TS(x),
                         (long long)rep);
  }
  return make_result(LOOM_OP_TILE, x->dtype, x->rank, dims, out);
}

/* ---- reductions -------------------------------------------------------------------------- */

/* max/min/argmax/argmin/topk have no identity: an empty reduced axis has no answer. */
static loom_status check_nonempty(loom_op op, const loom_type *x, int32_t axis) {
  if (x->dims[axis] > 0) return LOOM_OK;
  return loom__error(INVALID, "%s: axis %d of %s is empty and %s has no identity", loom_op_name(op),
                     (int)axis, TS(x), loom_op_name(op));
}

static loom_status infer_reduce(loom_op op, const loom_type *x, const loom_attrs *a, loom_type *out) {
  loom_status s = check_dtype(op, x);
  if (!s) s = check_list(op, "axes", &a->axes, -1, "");
  if (s) return s;
  uint32_t reduced = 0;
  for (int32_t i = 0; i < a->axes.count; i++) {
    int32_t axis = 0;
    if ((s = get_axis(op, a->axes.v[i], x, &axis))) return s;
    if (reduced & (1u << axis))
      return loom__error(INVALID, "%s: axes=%s names axis %d twice for %s", loom_op_name(op),
                         LS(a->axes.v, a->axes.count), (int)axis, TS(x));
    if ((op == LOOM_OP_REDUCE_MAX || op == LOOM_OP_REDUCE_MIN) && (s = check_nonempty(op, x, axis))) return s;
    reduced |= 1u << axis;
  }
  bool keep = (a->set & LOOM_ATTR_KEEPDIMS) && a->keepdims;
  int64_t dims[LOOM_MAX_RANK];
  int32_t rank = 0;
  for (int32_t i = 0; i < x->rank; i++) {
    if (!(reduced & (1u << i)))
      dims[rank++] = x->dims[i];
    else if (keep)
      dims[rank++] = 1;
  }
  return make_result(op, x->dtype, rank, dims, out);
}

static loom_status infer_argreduce(loom_op op, const loom_type *x, const loom_attrs *a, loom_type *out) {
  int32_t axis = 0;
  loom_status s = check_dtype(op, x);
  if (!s) s = get_axis(op, a->axis, x, &axis);
  if (!s) s = check_nonempty(op, x, axis);
  if (s) return s;
  int64_t dims[LOOM_MAX_RANK];
  int32_t rank = 0;
  for (int32_t i = 0; i < x->rank; i++)
    if (i != axis) dims[rank++] = x->dims[i];
  return make_result(op, LOOM_I64, rank, dims, out);
}

static loom_status infer_topk(const loom_type *x, const loom_attrs *a, loom_type *out) {
  int32_t axis = 0;
  loom_status s = check_dtype(LOOM_OP_TOPK, x);
  if (!s) s = get_axis(LOOM_OP_TOPK, a->axis, x, &axis);
  if (s) return s;
  if (a->k < 0 || a->k > x->dims[axis])
    return loom__error(INVALID, "topk: k=%lld is outside 0..%lld for axis %d of %s", (long long)a->k,
                       (long long)x->dims[axis], (int)axis, TS(x));
  out[0] = *x;
  out[0].dims[axis] = a->k;
  out[1] = out[0];
  out[1].dtype = LOOM_I64;
  return LOOM_OK;
}

/* ---- linear algebra ---------------------------------------------------------------------- */

static loom_status infer_dot(const loom_type *a, const loom_type *b, loom_type *out) {
  if (a->rank < 1 || b->rank < 1)
    return loom__error(INVALID, "dot: operands need rank >= 1, got %s x %s", TS(a), TS(b));
  if (a->dtype != b->dtype)
    return loom__error(INVALID, "dot: operand dtypes differ: %s and %s", TS(a), TS(b));
  loom_status s = check_dtype(LOOM_OP_DOT, a);
  if (s) return s;
  /* NumPy matmul: 1-D a is [1,k], 1-D b is [k,1]; the added 1 is removed from the result. */
  int64_t ka = a->dims[a->rank - 1];
  int64_t kb = b->dims[b->rank == 1 ? 0 : b->rank - 2];
  if (ka != kb)
    return loom__error(INVALID, "dot: contracting dimensions differ: %s x %s (%lld vs %lld)", TS(a), TS(b),
                       (long long)ka, (long long)kb);
  loom_type ba = *a, bb = *b, batch;
  ba.rank = LOOM_MAX(a->rank - 2, 0);
  bb.rank = LOOM_MAX(b->rank - 2, 0);
  if (!loom__broadcast_shapes(&ba, &bb, &batch))
    return loom__error(INVALID, "dot: batch dimensions of %s and %s do not broadcast", TS(a), TS(b));
  if (a->rank > 1) batch.dims[batch.rank++] = a->dims[a->rank - 2];
  if (b->rank > 1) batch.dims[batch.rank++] = b->dims[b->rank - 1];
  return make_result(LOOM_OP_DOT, a->dtype, batch.rank, batch.dims, out);
}

/* ---- convolution ------------------------------------------------------------------------- */

static int64_t list_or(const loom_attrs *a, uint32_t bit, const loom_int_list *l, int32_t i, int64_t dflt) {
  return (a->set & bit) ? l->v[i] : dflt;
}

/* Output length of spatial dimension i: floor((s + 2p - d*(k-1) - 1) / stride) + 1. */
static loom_status conv_spatial(const loom_type *x, const loom_type *w, const loom_attrs *a, int32_t i,
                                int64_t *out) {
  int64_t st = list_or(a, LOOM_ATTR_STRIDE, &a->stride, i, 1);
  int64_t p = list_or(a, LOOM_ATTR_PADDING, &a->padding, i, 0);
  int64_t d = list_or(a, LOOM_ATTR_DILATION, &a->dilation, i, 1);
  int64_t s = x->dims[2 + i], k = w->dims[2 + i], padded, eff;
  if (st < 1 || p < 0 || d < 1)
    return loom__error(INVALID,
                       "conv: spatial dimension %d needs stride >= 1, padding >= 0 and "
                       "dilation >= 1, got %lld, %lld and %lld",
                       (int)i, (long long)st, (long long)p, (long long)d);
  if (k < 1)
    return loom__error(INVALID, "conv: kernel of w %s is empty in spatial dimension %d", TS(w), (int)i);
  if (!loom__mul_i64(p, 2, &padded) || !loom__add_i64(padded, s, &padded) || !loom__mul_i64(d, k - 1, &eff) ||
      !loom__add_i64(eff, 1, &eff))
    return loom__error(INVALID, "conv: spatial dimension %d overflows int64 (x %s, w %s)", (int)i, TS(x),
                       TS(w));
  if (eff > padded)
    return loom__error(INVALID,
                       "conv: effective kernel %lld (kernel %lld, dilation %lld) is larger "
                       "than the padded input %lld in spatial dimension %d: x %s, w %s",
                       (long long)eff, (long long)k, (long long)d, (long long)padded, (int)i, TS(x), TS(w));
  *out = (padded - eff) / st + 1;
  return LOOM_OK;
}

static loom_status conv_channels(const loom_type *x, const loom_type *w, int64_t groups) {
  int64_t c = x->dims[1], o = w->dims[0];
  if (groups < 1) return loom__error(INVALID, "conv: groups=%lld must be >= 1", (long long)groups);
  if (c % groups != 0 || o % groups != 0)
    return loom__error(INVALID,
                       "conv: groups=%lld must divide the input channels of x %s (%lld) "
                       "and the output channels of w %s (%lld)",
                       (long long)groups, TS(x), (long long)c, TS(w), (long long)o);
  if (w->dims[1] != c / groups)
    return loom__error(INVALID,
                       "conv: w %s has %lld input channels per group; x %s with groups=%lld "
                       "needs %lld",
                       TS(w), (long long)w->dims[1], TS(x), (long long)groups, (long long)(c / groups));
  return LOOM_OK;
}

static loom_status infer_conv(const loom_type *x, const loom_type *w, const loom_attrs *a, loom_type *out) {
  if (x->rank < 3 || x->rank > 5 || w->rank != x->rank)
    return loom__error(INVALID,
                       "conv: x must be [N,C,spatial..] with 1 to 3 spatial dimensions and w "
                       "[O,C/G,kernel..] of the same rank, got x %s, w %s",
                       TS(x), TS(w));
  if (x->dtype != w->dtype)
    return loom__error(INVALID, "conv: operand dtypes differ: %s and %s", TS(x), TS(w));
  int32_t ns = x->rank - 2;
  const char *why = "one per spatial dimension, conv";
  loom_status s = check_dtype(LOOM_OP_CONV, x);
  if (!s && (a->set & LOOM_ATTR_STRIDE)) s = check_list(LOOM_OP_CONV, "stride", &a->stride, ns, why);
  if (!s && (a->set & LOOM_ATTR_PADDING)) s = check_list(LOOM_OP_CONV, "padding", &a->padding, ns, why);
  if (!s && (a->set & LOOM_ATTR_DILATION)) s = check_list(LOOM_OP_CONV, "dilation", &a->dilation, ns, why);
  if (!s) s = conv_channels(x, w, (a->set & LOOM_ATTR_GROUPS) ? a->groups : 1);
  int64_t dims[LOOM_MAX_RANK] = {x->dims[0], w->dims[0]};
  for (int32_t i = 0; !s && i < ns; i++) s = conv_spatial(x, w, a, i, &dims[2 + i]);
  if (s) return s;
  return make_result(LOOM_OP_CONV, x->dtype, x->rank, dims, out);
}

/* ---- fourier ----------------------------------------------------------------------------- */

static loom_status infer_fourier(loom_op op, const loom_type *x, const loom_attrs *a, loom_type *out) {
  const char *name = loom_op_name(op);
  int32_t axis = 0;
  loom_status s = check_dtype(op, x);
  if (!s) s = get_axis(op, a->axis, x, &axis);
  if (s) return s;
  int64_t len = x->dims[axis];
  *out = *x;
  if (op == LOOM_OP_IRFFT) {
    if (a->n < 1) return loom__error(INVALID, "irfft: n=%lld must be >= 1", (long long)a->n);
    if (len != a->n / 2 + 1)
      return loom__error(INVALID, "irfft: axis %d of %s has length %lld; n=%lld needs n/2+1 = %lld",
                         (int)axis, TS(x), (long long)len, (long long)a->n, (long long)(a->n / 2 + 1));
    out->dims[axis] = a->n;
    out->dtype = x->dtype == LOOM_C64 ? LOOM_F32 : LOOM_F64;
    return make_result(op, out->dtype, out->rank, out->dims, out);
  }
  if (len < 1) return loom__error(INVALID, "%s: axis %d of %s is empty", name, (int)axis, TS(x));
  if (op == LOOM_OP_RFFT) {
    out->dims[axis] = len / 2 + 1;
    out->dtype = x->dtype == LOOM_F32 ? LOOM_C64 : LOOM_C128;
    return make_result(op, out->dtype, out->rank, out->dims, out);
  }
  return LOOM_OK;
}

/* ---- quantized values (docs/ir-quant.md) ------------------------------------------------- */

/* A per-channel axis: absent (per tensor) gives -1. */
static loom_status quant_axis(loom_op op, const loom_attrs *a, const loom_type *x, int32_t *out) {
  *out = -1;
  return (a->set & LOOM_ATTR_AXIS) ? get_axis(op, a->axis, x, out) : LOOM_OK;
}

/* quantize x to=q8|q4 [axis=A] -> q (x's shape), scale f32 ([] or [dims[A]]) */
static loom_status infer_quantize(const loom_type *x, const loom_attrs *a, loom_type *out) {
  if (x->dtype != LOOM_F32) return loom__error(INVALID, "quantize: takes f32, got %s", TS(x));
  if (!dtype_in(a->to, M_QUANT))
    return loom__error(INVALID, "quantize: to=%s is not a quantized dtype (q8 or q4)",
                       loom_dtype_name(a->to));
  int32_t axis;
  loom_status s = quant_axis(LOOM_OP_QUANTIZE, a, x, &axis);
  if (!s) s = make_result(LOOM_OP_QUANTIZE, a->to, x->rank, x->dims, &out[0]);
  if (!s)
    s = make_result(LOOM_OP_QUANTIZE, LOOM_F32, axis < 0 ? 0 : 1, axis < 0 ? NULL : &x->dims[axis], &out[1]);
  return s;
}

/* dequantize q scale [axis=A] -> f32 of q's shape */
static loom_status infer_dequantize(const loom_type *q, const loom_type *scale, const loom_attrs *a,
                                    loom_type *out) {
  if (!dtype_in(q->dtype, M_QUANT))
    return loom__error(INVALID, "dequantize: takes a quantized value (q8 or q4) first, got %s", TS(q));
  if (scale->dtype != LOOM_F32)
    return loom__error(INVALID, "dequantize: the scale must be f32, got %s", TS(scale));
  int32_t axis;
  loom_status s = quant_axis(LOOM_OP_DEQUANTIZE, a, q, &axis);
  if (s) return s;
  if (axis < 0 && scale->rank != 0)
    return loom__error(INVALID, "dequantize: a per-tensor scale (no axis=A) is f32[], got %s", TS(scale));
  if (axis >= 0 && (scale->rank != 1 || scale->dims[0] != q->dims[axis]))
    return loom__error(INVALID,
                       "dequantize: the scale of %s per channel along axis %d must be f32[%lld], got %s",
                       TS(q), (int)axis, (long long)q->dims[axis], TS(scale));
  return make_result(LOOM_OP_DEQUANTIZE, LOOM_F32, q->rank, q->dims, out);
}

/* Quantized values are packed integers without their scale: every op but dequantize refuses
 * them, so no kernel ever reads a q4 byte as an element. */
static loom_status check_no_quantized(loom_op op, const loom_type *const *t, int32_t n) {
  for (int32_t i = 0; i < n && i < 3; i++)
    if (op != LOOM_OP_DEQUANTIZE && dtype_in(t[i]->dtype, M_QUANT))
      return loom__error(INVALID, "%s: operand %d is %s: quantized values are read only by dequantize",
                         loom_op_name(op), (int)i + 1, TS(t[i]));
  return LOOM_OK;
}

/* ---- dispatch ---------------------------------------------------------------------------- */

static loom_status infer_layout(const loom_graph *g, loom_op op, const int32_t *inputs, int32_t n,
                                const loom_attrs *a, loom_type *out) {
  const loom_type *x = &loom__val(g, inputs[0])->type;
  switch (op) {
    case LOOM_OP_RESHAPE:
      return infer_reshape(x, a, out);
    case LOOM_OP_TRANSPOSE:
      return infer_transpose(x, a, out);
    case LOOM_OP_BROADCAST:
      return infer_broadcast(x, a, out);
    case LOOM_OP_SLICE:
      return infer_slice(x, a, out);
    case LOOM_OP_CONCAT:
      return infer_concat(g, inputs, n, a, out);
    case LOOM_OP_TILE:
      return infer_tile(x, a, out);
    default:
      return loom__error(LOOM_ERR_INTERNAL, "%s: not a layout op", loom_op_name(op));
  }
}

/* The rule of op's class, over operand types t[0..2] (all operands through g and inputs). */
static loom_status infer_class(const loom_graph *g, loom_op op, const loom_type *const *t,
                               const int32_t *inputs, int32_t n_inputs, const loom_attrs *attrs,
                               const loom_type *result_type, loom_type *out) {
  switch (loom__op_info_of(op)->cls) {
    case LOOM_CLASS_SOURCE:
      return infer_source(op, attrs, result_type, out);
    case LOOM_CLASS_UNARY:
      return infer_unary(op, t[0], out);
    case LOOM_CLASS_BINARY:  /* fall through */
    case LOOM_CLASS_COMPARE: /* fall through */
    case LOOM_CLASS_LOGIC:
      return infer_binary(op, t[0], t[1], out);
    case LOOM_CLASS_SELECT:
      return infer_select(t[0], t[1], t[2], out);
    case LOOM_CLASS_CAST:
      return infer_cast(t[0], attrs, out);
    case LOOM_CLASS_LAYOUT:
      return infer_layout(g, op, inputs, n_inputs, attrs, out);
    case LOOM_CLASS_REDUCE:
      return infer_reduce(op, t[0], attrs, out);
    case LOOM_CLASS_ARGREDUCE:
      return infer_argreduce(op, t[0], attrs, out);
    case LOOM_CLASS_TOPK:
      return infer_topk(t[0], attrs, out);
    case LOOM_CLASS_DOT:
      return infer_dot(t[0], t[1], out);
    case LOOM_CLASS_CONV:
      return infer_conv(t[0], t[1], attrs, out);
    case LOOM_CLASS_FOURIER:
      return infer_fourier(op, t[0], attrs, out);
    case LOOM_CLASS_QUANT:
      return op == LOOM_OP_QUANTIZE ? infer_quantize(t[0], attrs, out)
                                    : infer_dequantize(t[0], t[1], attrs, out);
    case LOOM_CLASS_LOOP:  /* typed by loom_graph_add_loop from its body */
    case LOOM_CLASS_FUSED: /* typed by loom__graph_add_fused from its body */
      break;
  }
  return loom__error(LOOM_ERR_INTERNAL, "%s: no type rule", loom_op_name(op));
}

loom_status loom__infer(const loom_graph *g, loom_op op, const int32_t *inputs, int32_t n_inputs,
                        const loom_attrs *attrs, const loom_type *result_type, loom_type *out_types) {
  /* loom_graph_add checked all this already; rewrites calling in directly get the same net. */
  const loom__op_info *info = loom__op_info_of(op);
  if (!info) return loom__error(INVALID, "unknown op %d", (int)op);
  if (n_inputs < info->min_inputs || (info->max_inputs >= 0 && n_inputs > info->max_inputs))
    return loom__error(INVALID, "%s: wrong number of operands (%d)", info->name, (int)n_inputs);
  for (int32_t i = 0; i < n_inputs; i++)
    if (inputs[i] < 0 || inputs[i] >= g->n_values)
      return loom__error(INVALID, "%s: operand %d is not a value of the graph", info->name, (int)i + 1);
  loom_attrs defaults;
  if (!attrs) {
    loom_attrs_init(&defaults);
    attrs = &defaults;
  }
  const loom_type *t[3] = {NULL, NULL, NULL};
  for (int32_t i = 0; i < n_inputs && i < 3; i++) t[i] = &loom__val(g, inputs[i])->type;
  loom_status s = check_no_quantized(op, t, n_inputs);
  if (s) return s;
  return infer_class(g, op, t, inputs, n_inputs, attrs, result_type, out_types);
}
