/* The GPU backends' shared host-side set-up (gpu_setup.h): checks and kernel arguments.
 * Dimensions are coalesced as the cpu backend's loop nests do, so a dense op is one flat loop
 * on the device. The dtype tables follow the kernels (kernels/opencl/ and
 * kernels/cuda/ take the same dtypes per family: keep them in step) and the cpu backend's
 * (src/backends/cpu/cpu_elementwise.c, cpu_reduce.c). */
#include "backends/gpu/gpu_setup.h"

#include <string.h>

#include "backends/shapes.h"

loom_status loom__gpu_unsupported(const char *id, const loom__op *op, loom_dtype dtype) {
  return loom__error(LOOM_ERR_UNSUPPORTED, "%s: %s: unsupported dtype %s", id, loom_op_name(op->kind),
                     loom_dtype_name(dtype));
}

static int64_t elements(const loom_type *t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->rank; i++) n *= t->dims[i];
  return n;
}

/* ---- nests: one iteration space walked by several operands ---------------------------------- */

void loom__nest_init(loom__nest *L, int32_t rank, const int64_t *dims) {
  memset(L, 0, sizeof *L);
  L->rank = rank;
  for (int32_t d = 0; d < rank; d++) L->dims[d] = dims[d];
}

void loom__nest_add(loom__nest *L, const int64_t *strides) {
  int32_t k = L->n++;
  int64_t dense = 1;
  for (int32_t d = L->rank - 1; d >= 0; d--) {
    L->st[k][d] = strides ? strides[d] : dense;
    dense *= L->dims[d];
  }
}

void loom__nest_coalesce(loom__nest *L) {
  int32_t r = 0;
  for (int32_t d = 0; d < L->rank; d++) {
    if (L->dims[d] == 1) continue;
    bool merge = r > 0;
    for (int32_t k = 0; k < L->n && merge; k++) merge = L->st[k][r - 1] == L->st[k][d] * L->dims[d];
    if (merge) {
      L->dims[r - 1] *= L->dims[d];
      for (int32_t k = 0; k < L->n; k++) L->st[k][r - 1] = L->st[k][d];
      continue;
    }
    L->dims[r] = L->dims[d];
    for (int32_t k = 0; k < L->n; k++) L->st[k][r] = L->st[k][d];
    r++;
  }
  if (r == 0) {
    L->dims[0] = 1;
    for (int32_t k = 0; k < L->n; k++) L->st[k][0] = 0;
    r = 1;
  }
  L->rank = r;
}

/* A one-operand nest over dims[0..rank) at strides, coalesced, written to dims_out/st_out;
 * returns the rank left. */
static int32_t nest_one(int32_t rank, const int64_t *dims, const int64_t *strides, lm_long *dims_out,
                        lm_long *st_out) {
  loom__nest L;
  loom__nest_init(&L, rank, dims);
  loom__nest_add(&L, strides);
  loom__nest_coalesce(&L);
  for (int32_t i = 0; i < L.rank; i++) {
    dims_out[i] = L.dims[i];
    st_out[i] = L.st[0][i];
  }
  return L.rank;
}

/* ---- copies ------------------------------------------------------------------------------- */

static void copy_setup(int32_t rank, const int64_t *dims, int64_t dst_off, const int64_t *dst_strides,
                       bool with_src, int64_t src_off, const int64_t *src_strides, int64_t span, lm_copy *m) {
  memset(m, 0, sizeof *m);
  m->total = 1;
  for (int32_t i = 0; i < rank; i++) m->total *= dims[i];
  if (m->total == 0) return;
  loom__nest L;
  loom__nest_init(&L, rank, dims);
  loom__nest_add(&L, dst_strides);
  if (with_src) loom__nest_add(&L, src_strides);
  loom__nest_coalesce(&L);
  m->rank = L.rank;
  m->dst_off = dst_off;
  m->src_off = src_off;
  m->span = span;
  for (int32_t i = 0; i < L.rank; i++) {
    m->dims[i] = L.dims[i];
    m->dst[i] = L.st[0][i];
    m->src[i] = with_src ? L.st[1][i] : 0;
  }
}

void loom__gpu_copy_setup(int32_t rank, const int64_t *dims, int64_t dst_off, const int64_t *dst_strides,
                          int64_t src_off, const int64_t *src_strides, int64_t span, lm_copy *m) {
  copy_setup(rank, dims, dst_off, dst_strides, true, src_off, src_strides, span, m);
}

void loom__gpu_zero_setup(int32_t rank, const int64_t *dims, int64_t dst_off, const int64_t *dst_strides,
                          int64_t span, lm_copy *m) {
  copy_setup(rank, dims, dst_off, dst_strides, false, 0, NULL, span, m);
}

bool loom__gpu_copy_is_run(const lm_copy *m) {
  return m->rank == 1 && m->dst[0] == 1 && m->src[0] == 1;
}

/* ---- what each kernel takes ----------------------------------------------------------------- */

static bool is_int(loom_dtype t) {
  return t == LOOM_I8 || t == LOOM_I16 || t == LOOM_I32 || t == LOOM_I64 || t == LOOM_U8;
}
static bool is_flt(loom_dtype t) {
  return t == LOOM_F16 || t == LOOM_BF16 || t == LOOM_F32 || t == LOOM_F64;
}
static bool is_cpx(loom_dtype t) {
  return t == LOOM_C64 || t == LOOM_C128;
}

/* Which dtypes an elementwise op takes, by the set it needs. */
typedef enum takes { NUM_CPX, NUM, FLT, INT_BOOL, REAL, REAL_CPX, BOOL_ONLY } takes;

static bool takes_dtype(takes w, loom_dtype t) {
  bool num = is_int(t) || is_flt(t), real = num || t == LOOM_BOOL;
  switch (w) {
    case NUM_CPX:
      return num || is_cpx(t);
    case NUM:
      return num;
    case FLT:
      return is_flt(t);
    case INT_BOOL:
      return t == LOOM_BOOL || is_int(t);
    case REAL:
      return real;
    case REAL_CPX:
      return real || is_cpx(t);
    case BOOL_ONLY:
      return t == LOOM_BOOL;
  }
  return false;
}

typedef struct ew_entry {
  loom_op op;
  int32_t code;
  takes takes;
} ew_entry;

static const ew_entry ew_table[] = {
    {LOOM_OP_NEG, LM_NEG, NUM_CPX},
    {LOOM_OP_ABS, LM_ABS, NUM},
    {LOOM_OP_SIGN, LM_SIGN, NUM},
    {LOOM_OP_RELU, LM_RELU, NUM},
    {LOOM_OP_FLOOR, LM_FLOOR, NUM},
    {LOOM_OP_CEIL, LM_CEIL, NUM},
    {LOOM_OP_EXP, LM_EXP, FLT},
    {LOOM_OP_LOG, LM_LOG, FLT},
    {LOOM_OP_SQRT, LM_SQRT, FLT},
    {LOOM_OP_RSQRT, LM_RSQRT, FLT},
    {LOOM_OP_SIN, LM_SIN, FLT},
    {LOOM_OP_COS, LM_COS, FLT},
    {LOOM_OP_TANH, LM_TANH, FLT},
    {LOOM_OP_SIGMOID, LM_SIGMOID, FLT},
    {LOOM_OP_NOT, LM_NOT, INT_BOOL},
    {LOOM_OP_SQUARE, LM_SQUARE, NUM_CPX},
    {LOOM_OP_ADD, LM_ADD, NUM_CPX},
    {LOOM_OP_SUB, LM_SUB, NUM_CPX},
    {LOOM_OP_MUL, LM_MUL, NUM_CPX},
    {LOOM_OP_DIV, LM_DIV, NUM_CPX},
    {LOOM_OP_POW, LM_POW, NUM},
    {LOOM_OP_MAXIMUM, LM_MAXIMUM, NUM},
    {LOOM_OP_MINIMUM, LM_MINIMUM, NUM},
    {LOOM_OP_EQ, LM_EQ, REAL_CPX},
    {LOOM_OP_NE, LM_NE, REAL_CPX},
    {LOOM_OP_LT, LM_LT, REAL},
    {LOOM_OP_LE, LM_LE, REAL},
    {LOOM_OP_GT, LM_GT, REAL},
    {LOOM_OP_GE, LM_GE, REAL},
    {LOOM_OP_AND, LM_AND, BOOL_ONLY},
    {LOOM_OP_OR, LM_OR, BOOL_ONLY},
    {LOOM_OP_REDUCE_SUM, LM_SUM, NUM_CPX},
    {LOOM_OP_REDUCE_PROD, LM_PROD, NUM_CPX},
    {LOOM_OP_REDUCE_MEAN, LM_MEAN, NUM_CPX},
    {LOOM_OP_REDUCE_MAX, LM_MAX, NUM},
    {LOOM_OP_REDUCE_MIN, LM_MIN, NUM},
    {LOOM_OP_ARGMAX, LM_ARGMAX, NUM},
    {LOOM_OP_ARGMIN, LM_ARGMIN, NUM},
};

/* The kernel's code (LM_*) for an elementwise op or a reduction on dtype t, or -1 where the
 * kernel does not take it. */
static int32_t op_code(loom_op op, loom_dtype t) {
  for (size_t i = 0; i < sizeof ew_table / sizeof ew_table[0]; i++)
    if (ew_table[i].op == op) return takes_dtype(ew_table[i].takes, t) ? ew_table[i].code : -1;
  return -1;
}

/* ---- elementwise ---------------------------------------------------------------------------- */

/* Sets up m for the op's output and its first n_in inputs, each broadcast to the output. */
static loom_status ew_meta(const char *id, const loom__op_call *c, int32_t n_in, int64_t span, lm_ew *m) {
  const loom__dview *out = &c->out[0];
  memset(m, 0, sizeof *m);
  m->total = elements(&out->type);
  loom__nest L;
  loom__nest_init(&L, out->type.rank, out->type.dims);
  loom__nest_add(&L, NULL);
  for (int32_t j = 0; j < n_in; j++) {
    int64_t st[LOOM_MAX_RANK];
    if (!loom__dview_broadcast_strides(&c->in[j], &out->type, st)) {
      char a[LOOM_TYPE_STRING_MAX], b[LOOM_TYPE_STRING_MAX];
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: operand %d of type %s does not broadcast to %s",
                         id, loom_op_name(c->op->kind), (int)j + 1,
                         loom_type_format(&c->in[j].type, a, sizeof a),
                         loom_type_format(&out->type, b, sizeof b));
    }
    loom__nest_add(&L, st);
    m->off[j] = c->in[j].offset;
  }
  loom__nest_coalesce(&L);
  m->rank = L.rank;
  m->out_off = out->offset;
  m->span = span;
  for (int32_t i = 0; i < L.rank; i++) {
    m->dims[i] = L.dims[i];
    for (int32_t j = 0; j < n_in; j++) m->st[j][i] = L.st[j + 1][i];
  }
  return LOOM_OK;
}

static loom_status iota_setup(const char *id, const loom__op_call *c, loom__gpu_ew *e) {
  const loom__dview *out = &c->out[0];
  const loom_type *t = &out->type;
  int32_t axis;
  if (!loom__axis_normalize(c->op->attrs.axis, t->rank, &axis))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: iota: axis %lld is out of range for rank %d", id,
                       (long long)c->op->attrs.axis, (int)t->rank);
  e->kernel = LOOM__GPU_IOTA;
  e->dtype = t->dtype;
  e->total = elements(t);
  e->iota_off = out->offset;
  e->iota_dim = t->dims[axis];
  e->iota_inner = 1;
  for (int32_t i = axis + 1; i < t->rank; i++) e->iota_inner *= t->dims[i];
  return LOOM_OK;
}

static loom_status select_setup(const char *id, const loom__op_call *c, int64_t span, loom__gpu_ew *e) {
  const loom__dview *out = &c->out[0];
  if (c->in[0].type.dtype != LOOM_BOOL || c->in[1].type.dtype != out->type.dtype ||
      c->in[2].type.dtype != out->type.dtype)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: select: operand dtypes (%s, %s, %s) do not fit the op",
                       id, loom_dtype_name(c->in[0].type.dtype), loom_dtype_name(c->in[1].type.dtype),
                       loom_dtype_name(c->in[2].type.dtype));
  e->kernel = LOOM__GPU_SELECT;
  e->dtype = out->type.dtype;
  loom_status s = ew_meta(id, c, 3, span, &e->m);
  e->total = e->m.total;
  return s;
}

static loom__gpu_ew_kernel ew_kernel_of(loom__op_class cls) {
  switch (cls) {
    case LOOM_CLASS_CAST:
      return LOOM__GPU_CAST;
    case LOOM_CLASS_UNARY:
      return LOOM__GPU_UNARY;
    case LOOM_CLASS_BINARY:
      return LOOM__GPU_BINARY;
    default:
      return LOOM__GPU_COMPARE;
  }
}

loom_status loom__gpu_ew_setup(const char *id, const loom__op_call *c, int64_t span, loom__gpu_ew *e) {
  const loom__op *op = c->op;
  loom__op_class cls = loom__op_info_of(op->kind)->cls;
  memset(e, 0, sizeof *e);
  if (cls == LOOM_CLASS_SOURCE) {
    if (op->kind == LOOM_OP_IOTA) return iota_setup(id, c, e);
    return loom__error(LOOM_ERR_INTERNAL, "%s: %s is the executor's, not a kernel's", id,
                       loom_op_name(op->kind));
  }
  if (cls == LOOM_CLASS_SELECT) return select_setup(id, c, span, e);
  loom_dtype dt = c->in[0].type.dtype;
  for (int32_t i = 1; i < op->n_inputs; i++)
    if (c->in[i].type.dtype != dt)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: operand dtypes %s and %s differ", id,
                         loom_op_name(op->kind), loom_dtype_name(dt), loom_dtype_name(c->in[i].type.dtype));
  bool to_bool = cls == LOOM_CLASS_COMPARE || cls == LOOM_CLASS_LOGIC;
  loom_dtype want = to_bool ? LOOM_BOOL : cls == LOOM_CLASS_CAST ? c->out[0].type.dtype : dt;
  if (c->out[0].type.dtype != want)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: output dtype %s for %s operands", id,
                       loom_op_name(op->kind), loom_dtype_name(c->out[0].type.dtype), loom_dtype_name(dt));
  e->kernel = ew_kernel_of(cls);
  e->dtype = dt;
  e->code = cls == LOOM_CLASS_CAST ? (int32_t)want : op_code(op->kind, dt);
  if (e->code < 0) return loom__gpu_unsupported(id, op, dt);
  loom_status s = ew_meta(id, c, op->n_inputs, span, &e->m);
  e->total = e->m.total;
  return s;
}

/* ---- reductions ----------------------------------------------------------------------------- */

static bool is_arg(const loom__op *op) {
  return op->kind == LOOM_OP_ARGMAX || op->kind == LOOM_OP_ARGMIN;
}

/* The output's shape must be what the reduced axes (bits of mask) leave. */
static bool reduced_shape_ok(const loom__op *op, const loom_type *t, const loom_type *out, uint32_t mask) {
  bool keep = !is_arg(op) && (op->attrs.set & LOOM_ATTR_KEEPDIMS) && op->attrs.keepdims;
  int32_t r = 0;
  for (int32_t k = 0; k < t->rank; k++) {
    if ((mask & (1u << k)) && !keep) continue;
    int64_t want = (mask & (1u << k)) ? 1 : t->dims[k];
    if (r >= out->rank || out->dims[r++] != want) return false;
  }
  return r == out->rank;
}

/* The reduced axes as a bit mask, checked against the output's shape. */
static loom_status reduced_axes(const char *id, const loom__op *op, const loom__dview *in,
                                const loom__dview *out, uint32_t *mask) {
  const loom_type *t = &in->type;
  const char *name = loom_op_name(op->kind);
  int32_t n = is_arg(op) ? 1 : op->attrs.axes.count;
  *mask = 0;
  for (int32_t i = 0; i < n; i++) {
    int32_t axis;
    if (!loom__axis_normalize(is_arg(op) ? op->attrs.axis : op->attrs.axes.v[i], t->rank, &axis) ||
        (*mask & (1u << axis)))
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: bad axes for rank %d", id, name, (int)t->rank);
    *mask |= 1u << axis;
  }
  if (!reduced_shape_ok(op, t, &out->type, *mask)) {
    char a[LOOM_TYPE_STRING_MAX], b[LOOM_TYPE_STRING_MAX];
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: output %s does not match input %s", id, name,
                       loom_type_format(&out->type, a, sizeof a), loom_type_format(t, b, sizeof b));
  }
  return LOOM_OK;
}

/* Splits the input view into kept dims (output order) and reduced dims (decreasing stride, so
 * the innermost has the smallest), each coalesced. */
static void reduce_plan(const loom__dview *in, uint32_t mask, lm_reduce *m) {
  int64_t kd[LOOM_MAX_RANK], ks[LOOM_MAX_RANK], rd[LOOM_MAX_RANK], rs[LOOM_MAX_RANK];
  int32_t nk = 0, nr = 0;
  memset(m, 0, sizeof *m);
  m->n_out = 1;
  m->n_red = 1;
  for (int32_t k = 0; k < in->type.rank; k++) {
    bool red = (mask & (1u << k)) != 0;
    int64_t *dims = red ? rd : kd, *st = red ? rs : ks;
    int32_t *n = red ? &nr : &nk;
    dims[*n] = in->type.dims[k];
    st[(*n)++] = in->strides[k];
    *(red ? &m->n_red : &m->n_out) *= in->type.dims[k];
  }
  loom__sort_by_stride(nr, rd, rs);
  m->kr = nest_one(nk, kd, ks, m->kdims, m->kst);
  m->rr = nest_one(nr, rd, rs, m->rdims, m->rst);
  m->in_off = in->offset;
}

loom_status loom__gpu_reduce_setup(const char *id, const loom__op_call *c, lm_reduce *m, int32_t *kind) {
  const loom__op *op = c->op;
  const loom__dview *in = &c->in[0], *out = &c->out[0];
  loom_dtype dt = in->type.dtype;
  memset(m, 0, sizeof *m);
  if (out->type.dtype != (is_arg(op) ? LOOM_I64 : dt))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: output dtype %s for %s input", id,
                       loom_op_name(op->kind), loom_dtype_name(out->type.dtype), loom_dtype_name(dt));
  uint32_t mask;
  loom_status s = reduced_axes(id, op, in, out, &mask);
  if (s) return s;
  *kind = op_code(op->kind, dt);
  if (*kind < 0) return loom__gpu_unsupported(id, op, dt);
  reduce_plan(in, mask, m);
  m->out_off = out->offset;
  if (m->n_out == 0) return LOOM_OK;
  bool identity = *kind == LM_SUM || *kind == LM_PROD || *kind == LM_MEAN;
  if (m->n_red == 0 && !identity)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: reduction over an empty axis", loom_op_name(op->kind));
  return LOOM_OK;
}

/* ---- topk ------------------------------------------------------------------------------------ */

loom_status loom__gpu_topk_setup(const char *id, const loom__op_call *c, lm_topk *m) {
  const loom__op *op = c->op;
  const loom__dview *in = &c->in[0], *out = c->out;
  const loom_type *t = &in->type;
  memset(m, 0, sizeof *m);
  if (!is_int(t->dtype) && !is_flt(t->dtype)) return loom__gpu_unsupported(id, op, t->dtype);
  int32_t axis;
  if (!loom__axis_normalize(op->attrs.axis, t->rank, &axis))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: topk: axis %lld is out of range for rank %d", id,
                       (long long)op->attrs.axis, (int)t->rank);
  if (!loom__topk_outputs_fit(op, t, &out[0].type, &out[1].type, axis)) {
    char a[LOOM_TYPE_STRING_MAX];
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: topk: outputs do not match k=%lld of %s", id,
                       (long long)op->attrs.k, loom_type_format(t, a, sizeof a));
  }
  int64_t dims[LOOM_MAX_RANK], strides[LOOM_MAX_RANK];
  int32_t nr = 0;
  m->inner = 1;
  m->n_rows = 1;
  for (int32_t k = 0; k < t->rank; k++) {
    if (k == axis) continue;
    dims[nr] = t->dims[k];
    strides[nr++] = in->strides[k];
    m->n_rows *= t->dims[k];
    if (k > axis) m->inner *= t->dims[k];
  }
  m->rr = nest_one(nr, dims, strides, m->rdims, m->rst);
  m->n = t->dims[axis];
  m->stride = in->strides[axis];
  m->k = op->attrs.k;
  m->largest = (op->attrs.set & LOOM_ATTR_LARGEST) ? op->attrs.largest : true;
  m->in_off = in->offset;
  m->v_off = out[0].offset;
  m->i_off = out[1].offset;
  return LOOM_OK;
}

/* ---- conv ------------------------------------------------------------------------------------- */

static int64_t attr_or(const loom_attrs *a, uint32_t bit, const loom_int_list *l, int32_t i, int64_t dflt) {
  return ((a->set & bit) && i < l->count) ? l->v[i] : dflt;
}

/* Spatial dim k of three (the op's nsp dims right-aligned, size 1 before them). */
static bool conv_spatial(const loom__op_call *c, int32_t nsp, int32_t k, lm_conv *p) {
  const loom_attrs *a = &c->op->attrs;
  const loom__dview *x = &c->in[0], *w = &c->in[1], *out = &c->out[0];
  int32_t i = k - (3 - nsp); /* index among the op's spatial dims; < 0 for padding dims */
  bool real = i >= 0;
  p->in[k] = real ? x->type.dims[2 + i] : 1;
  p->k[k] = real ? w->type.dims[2 + i] : 1;
  p->out[k] = real ? out->type.dims[2 + i] : 1;
  p->xs[k] = real ? x->strides[2 + i] : 0;
  p->ws[k] = real ? w->strides[2 + i] : 0;
  p->stride[k] = real ? attr_or(a, LOOM_ATTR_STRIDE, &a->stride, i, 1) : 1;
  p->pad[k] = real ? attr_or(a, LOOM_ATTR_PADDING, &a->padding, i, 0) : 0;
  p->dil[k] = real ? attr_or(a, LOOM_ATTR_DILATION, &a->dilation, i, 1) : 1;
  return p->stride[k] >= 1 && p->dil[k] >= 1 && p->pad[k] >= 0;
}

loom_status loom__gpu_conv_setup(const char *id, const loom__op_call *c, lm_conv *p) {
  const loom_attrs *a = &c->op->attrs;
  const loom__dview *x = &c->in[0], *w = &c->in[1], *out = &c->out[0];
  int32_t nsp = x->type.rank - 2;
  memset(p, 0, sizeof *p);
  if (!is_flt(x->type.dtype)) return loom__gpu_unsupported(id, c->op, x->type.dtype);
  if (nsp < 1 || nsp > 3 || w->type.rank != x->type.rank || out->type.rank != x->type.rank)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: conv: x and w need 1 to 3 spatial dims", id);
  p->N = x->type.dims[0];
  p->C = x->type.dims[1];
  p->O = w->type.dims[0];
  p->G = (a->set & LOOM_ATTR_GROUPS) ? a->groups : 1;
  if (p->G < 1 || p->C % p->G || p->O % p->G || w->type.dims[1] != p->C / p->G || out->type.dims[0] != p->N ||
      out->type.dims[1] != p->O || w->type.dtype != x->type.dtype || out->type.dtype != x->type.dtype)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: conv: operand and result types do not agree", id);
  p->Cg = p->C / p->G;
  p->Og = p->O / p->G;
  p->xs_n = x->strides[0];
  p->xs_c = x->strides[1];
  p->ws_o = w->strides[0];
  p->ws_c = w->strides[1];
  p->total = p->N * p->O;
  for (int32_t k = 0; k < 3; k++) {
    if (!conv_spatial(c, nsp, k, p))
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: conv: bad stride, padding or dilation", id);
    p->total *= p->out[k];
  }
  p->x_off = x->offset;
  p->w_off = w->offset;
  p->o_off = out->offset;
  return LOOM_OK;
}

/* ---- dot ------------------------------------------------------------------------------------ */

loom_status loom__gpu_dot_setup(const char *id, const loom__op_call *c, lm_gemm *p) {
  const loom__dview *va = &c->in[0], *vb = &c->in[1], *out = &c->out[0];
  int32_t ra = va->type.rank, rb = vb->type.rank;
  memset(p, 0, sizeof *p);
  if (ra < 1 || rb < 1)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: dot: operands must have at least one dimension", id);
  p->n = ra >= 2 ? va->type.dims[ra - 2] : 1;
  p->k = va->type.dims[ra - 1];
  p->m = rb >= 2 ? vb->type.dims[rb - 1] : 1;
  int64_t kb = rb >= 2 ? vb->type.dims[rb - 2] : vb->type.dims[0];
  p->nb = out->type.rank - (ra >= 2) - (rb >= 2);
  if (kb != p->k || p->nb < 0 || p->nb > LM_RANK || va->type.dtype != out->type.dtype ||
      vb->type.dtype != out->type.dtype)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: dot: operand and result types do not agree", id);
  p->batch = 1;
  for (int32_t i = 0; i < p->nb; i++) {
    p->bdims[i] = out->type.dims[i];
    p->batch *= p->bdims[i];
  }
  p->a_rs = ra >= 2 ? va->strides[ra - 2] : 0;
  p->a_cs = va->strides[ra - 1];
  p->b_rs = rb >= 2 ? vb->strides[rb - 2] : vb->strides[0];
  p->b_cs = rb >= 2 ? vb->strides[rb - 1] : 0;
  loom__batch_strides(&va->type, va->strides, ra >= 2 ? 2 : 1, (int32_t)p->nb, p->a_bs);
  loom__batch_strides(&vb->type, vb->strides, rb >= 2 ? 2 : 1, (int32_t)p->nb, p->b_bs);
  p->a_off = va->offset;
  p->b_off = vb->offset;
  p->c_off = out->offset;
  return LOOM_OK;
}

bool loom__gpu_fold_matrix(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool *transposed,
                           int64_t *ld) {
  int64_t r = rows == 1 ? cols : rs, q = cols == 1 ? 1 : cs;
  if (q == 1 && r >= LOOM_MAX(cols, 1)) {
    *transposed = false;
    *ld = r;
    return true;
  }
  r = rows == 1 ? 1 : rs;
  q = cols == 1 ? rows : cs;
  if (r == 1 && q >= LOOM_MAX(rows, 1)) {
    *transposed = true;
    *ld = q;
    return true;
  }
  return false;
}

/* ---- transforms ------------------------------------------------------------------------------ */

/* The stride that walks dims [from, to) of v as one dimension (0 when all have size 1); false
 * when they do not merge. */
static bool merge_dims(const loom__dview *v, int32_t from, int32_t to, int64_t *stride) {
  int64_t expect = 0;
  *stride = 0;
  for (int32_t k = to - 1; k >= from; k--) {
    if (v->type.dims[k] == 1) continue;
    if (expect && v->strides[k] != expect) return false;
    if (!expect) *stride = v->strides[k];
    expect = v->strides[k] * v->type.dims[k];
  }
  return true;
}

/* The input dtype kind k of a transform takes, given its output's dtype. */
static bool fft_dtypes_ok(loom__fft_kind k, loom_dtype in, loom_dtype out) {
  loom_dtype want_in = out;
  if (k == LOOM__FFT_R2C) want_in = out == LOOM_C64 ? LOOM_F32 : LOOM_F64;
  if (k == LOOM__FFT_C2R) want_in = out == LOOM_F32 ? LOOM_C64 : LOOM_C128;
  bool ok = k == LOOM__FFT_R2C ? (in == LOOM_F32 || in == LOOM_F64) : (in == LOOM_C64 || in == LOOM_C128);
  return ok && in == want_in;
}

loom_status loom__gpu_fft_setup(const char *id, const loom__op_call *c, loom__gpu_fft *p) {
  const loom__op *op = c->op;
  const loom__dview *in = &c->in[0], *out = &c->out[0];
  memset(p, 0, sizeof *p);
  if (!loom__axis_normalize(op->attrs.axis, in->type.rank, &p->axis))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: axis %lld is out of range", id,
                       loom_op_name(op->kind), (long long)op->attrs.axis);
  p->kind = op->kind == LOOM_OP_FFT    ? LOOM__FFT_FORWARD
            : op->kind == LOOM_OP_IFFT ? LOOM__FFT_INVERSE
            : op->kind == LOOM_OP_RFFT ? LOOM__FFT_R2C
                                       : LOOM__FFT_C2R;
  loom_dtype t = in->type.dtype;
  if (!fft_dtypes_ok(p->kind, t, out->type.dtype)) return loom__gpu_unsupported(id, op, t);
  p->dbl = t == LOOM_F64 || t == LOOM_C128;
  p->len_in = in->type.dims[p->axis];
  p->len_out = out->type.dims[p->axis];
  p->n = p->kind == LOOM__FFT_C2R ? p->len_out : p->len_in;
  p->outer = p->inner = 1;
  for (int32_t k = 0; k < p->axis; k++) p->outer *= in->type.dims[k];
  for (int32_t k = p->axis + 1; k < in->type.rank; k++) p->inner *= in->type.dims[k];
  p->is_a = in->strides[p->axis];
  p->merged = merge_dims(in, 0, p->axis, &p->is_o) && merge_dims(in, p->axis + 1, in->type.rank, &p->is_i);
  p->in_es = loom_dtype_size(t);
  p->out_es = loom_dtype_size(out->type.dtype);
  return LOOM_OK;
}

void loom__gpu_dft_setup(const loom__gpu_fft *p, int64_t in_off, int64_t out_off, lm_dft *m) {
  memset(m, 0, sizeof *m);
  m->kind = p->kind == LOOM__FFT_FORWARD   ? 0
            : p->kind == LOOM__FFT_INVERSE ? 1
            : p->kind == LOOM__FFT_R2C     ? 2
                                           : 3;
  m->n = p->n;
  m->len_in = p->len_in;
  m->len_out = p->len_out;
  m->outer = p->outer;
  m->inner = p->inner;
  m->total = p->outer * p->len_out * p->inner;
  m->is_o = p->is_o;
  m->is_a = p->is_a;
  m->is_i = p->is_i;
  m->in_off = in_off;
  m->out_off = out_off;
}

/* ---- quantized values ------------------------------------------------------------------------ */

loom_status loom__gpu_quant_setup(const loom__op *op, const loom__dview *f, const loom__dview *q,
                                  const loom__dview *s, lm_quant *m) {
  memset(m, 0, sizeof *m);
  int32_t rank = q->type.rank, axis = -1;
  if (rank > LM_RANK)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: rank %d is past %d", loom_op_name(op->kind), (int)rank,
                       LM_RANK);
  if ((op->attrs.set & LOOM_ATTR_AXIS) && !loom__axis_normalize(op->attrs.axis, rank, &axis))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: axis %lld is out of range", loom_op_name(op->kind),
                       (long long)op->attrs.axis);
  /* a rank-0 value is one row of one */
  m->rank = rank > 0 ? rank : 1;
  m->axis = axis;
  m->q4 = q->type.dtype == LOOM_Q4;
  m->rows = 1;
  for (int32_t d = 0; d < m->rank; d++) {
    m->dims[d] = rank > 0 ? q->type.dims[d] : 1;
    m->fst[d] = rank > 0 ? f->strides[d] : 1;
    m->qst[d] = rank > 0 ? q->strides[d] : 1;
    if (d < m->rank - 1) m->rows *= m->dims[d];
  }
  m->len = m->dims[m->rank - 1];
  m->channels = axis < 0 ? 1 : m->dims[axis];
  m->f_off = f->offset;
  m->q_off = q->offset;
  m->s_off = s->offset;
  m->s_st = s->type.rank > 0 ? s->strides[0] : 0;
  return LOOM_OK;
}
