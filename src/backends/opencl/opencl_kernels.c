/* The opencl backend's own kernel families: elementwise (unary, binary, compare, logic,
 * select, cast, iota), layout (materialized by strided copies), reductions, argmax/argmin,
 * topk and conv. Each sets up the shapes and strides on the host (dimensions coalesced, as the
 * cpu backend's loop nests do, so a dense op is one flat loop), picks the kernel of the dtype's
 * program and enqueues it; nothing here waits for the device. */
#include <string.h>

#include "backends/opencl/opencl_backend.h"

/* ---- launching ------------------------------------------------------------------------------ */

/* Work-groups per launch at most; the kernels loop over the rest (GRID_LOOP). */
#define MAX_GROUPS 8192
/* Work-items per group of the flat kernels: 64 on GPUs; 1 on CPU devices, where a group runs
 * on one core (so a small launch still spreads over every core), each work-item already walks
 * a span of elements, and a driver such as PoCL compiles each kernel once per group size. */
#define FLAT_LOCAL (d->is_cpu ? (size_t)1 : (size_t)64)

loom_status loom__cl_unsupported(const loom__cl_device *d, const loom__op *op, loom_dtype dtype) {
  return loom__error(LOOM_ERR_UNSUPPORTED, "%s: %s: unsupported dtype %s", d->id, loom_op_name(op->kind),
                     loom_dtype_name(dtype));
}

loom_status loom__cl_launch(loom__cl_device *d, const loom__cl_kernel *k, const loom__cl_arg *args,
                            int32_t n_args, int64_t items, size_t local) {
  if (items <= 0) return LOOM_OK;
  for (cl_uint i = 0; i < (cl_uint)n_args; i++) {
    cl_int err = clSetKernelArg(k->kernel, i, args[i].size, args[i].value);
    if (err != CL_SUCCESS) {
      loom_status s = loom__cl_status(err, "clSetKernelArg");
      loom__error_prefix("%s: %s argument %u: ", d->id, k->name, (unsigned)i);
      return s;
    }
  }
  while (local > 1 && local > k->max_wg) local /= 2;
  int64_t groups = (items + (int64_t)local - 1) / (int64_t)local;
  size_t global = (size_t)LOOM_MIN(groups, MAX_GROUPS) * local;
  loom_status s =
      loom__cl_status(clEnqueueNDRangeKernel(d->queue, k->kernel, 1, NULL, &global, &local, 0, NULL, NULL),
                      "clEnqueueNDRangeKernel");
  if (s) loom__error_prefix("%s: %s: ", d->id, k->name);
  return s;
}

/* The kernel or a message naming device, op and dtype. */
static loom_status kernel_for(loom__cl_device *d, const loom__op *op, int32_t prog, loom_dtype dtype,
                              const char *name, loom__cl_kernel **out) {
  loom_status s = loom__cl_kernel_get(d, prog, name, out);
  if (s == LOOM_ERR_UNSUPPORTED) return loom__cl_unsupported(d, op, dtype);
  return s;
}

static int64_t elements(const loom_type *t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->rank; i++) n *= t->dims[i];
  return n;
}

static cl_mem mem_of(const loom__dview *v) {
  return (cl_mem)v->buffer;
}

/* ---- nests: one iteration space walked by several operands ---------------------------------- */

#define NEST_MAX_OPERANDS 4
typedef struct nest {
  int32_t rank, n;
  int64_t dims[LM_COPY_RANK];
  int64_t st[NEST_MAX_OPERANDS][LM_COPY_RANK];
} nest;

static void nest_init(nest *L, int32_t rank, const int64_t *dims) {
  memset(L, 0, sizeof *L);
  L->rank = rank;
  for (int32_t d = 0; d < rank; d++) L->dims[d] = dims[d];
}

/* Adds an operand; NULL strides: dense C order over the nest's dims. */
static void nest_add(nest *L, const int64_t *strides) {
  int32_t k = L->n++;
  int64_t dense = 1;
  for (int32_t d = L->rank - 1; d >= 0; d--) {
    L->st[k][d] = strides ? strides[d] : dense;
    dense *= L->dims[d];
  }
}

/* Drops dimensions of size 1 and merges neighbours every operand walks as one; rank >= 1. */
static void nest_coalesce(nest *L) {
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

/* ---- copies ------------------------------------------------------------------------------- */

loom_status loom__cl_copy(loom__cl_device *d, int64_t esize, int32_t rank, const int64_t *dims, cl_mem dst,
                          int64_t dst_off, const int64_t *dst_strides, cl_mem src, int64_t src_off,
                          const int64_t *src_strides) {
  nest L;
  nest_init(&L, rank, dims);
  int64_t total = 1;
  for (int32_t i = 0; i < rank; i++) total *= dims[i];
  if (total == 0) return LOOM_OK;
  nest_add(&L, dst_strides);
  nest_add(&L, src_strides);
  nest_coalesce(&L);
  lm_copy m;
  memset(&m, 0, sizeof m);
  m.rank = L.rank;
  m.total = total;
  m.dst_off = dst_off;
  m.src_off = src_off;
  m.span = d->span;
  for (int32_t i = 0; i < L.rank; i++) {
    m.dims[i] = L.dims[i];
    m.dst[i] = L.st[0][i];
    m.src[i] = L.st[1][i];
  }
  /* A dense copy of one run is a buffer copy. */
  if (L.rank == 1 && m.dst[0] == 1 && m.src[0] == 1)
    return loom__cl_status(
        clEnqueueCopyBuffer(d->queue, src, dst, (size_t)(src_off * esize), (size_t)(dst_off * esize),
                            (size_t)(total * esize), 0, NULL, NULL),
        "clEnqueueCopyBuffer");
  char name[16];
  snprintf(name, sizeof name, "copy_%d", (int)esize);
  loom__cl_kernel *k;
  loom_status s = loom__cl_kernel_get(d, LOOM__CL_PROG_LAYOUT, name, &k);
  if (s == LOOM_ERR_UNSUPPORTED) return loom__error(LOOM_ERR_INTERNAL, "%s: no %s kernel", d->id, name);
  if (s) return s;
  loom__cl_arg args[] = {LOOM__CL_ARG(dst), LOOM__CL_ARG(src), LOOM__CL_ARG(m)};
  return loom__cl_launch(d, k, args, 3, (total + m.span - 1) / m.span, FLAT_LOCAL);
}

loom_status loom__cl_zero(loom__cl_device *d, int64_t esize, int32_t rank, const int64_t *dims, cl_mem dst,
                          int64_t dst_off, const int64_t *dst_strides) {
  nest L;
  nest_init(&L, rank, dims);
  int64_t total = 1;
  for (int32_t i = 0; i < rank; i++) total *= dims[i];
  if (total == 0) return LOOM_OK;
  nest_add(&L, dst_strides);
  nest_coalesce(&L);
  lm_copy m;
  memset(&m, 0, sizeof m);
  m.rank = L.rank;
  m.total = total;
  m.dst_off = dst_off;
  m.span = d->span;
  for (int32_t i = 0; i < L.rank; i++) {
    m.dims[i] = L.dims[i];
    m.dst[i] = L.st[0][i];
  }
  char name[16];
  snprintf(name, sizeof name, "zero_%d", (int)esize);
  loom__cl_kernel *k;
  loom_status s = loom__cl_kernel_get(d, LOOM__CL_PROG_LAYOUT, name, &k);
  if (s == LOOM_ERR_UNSUPPORTED) return loom__error(LOOM_ERR_INTERNAL, "%s: no %s kernel", d->id, name);
  if (s) return s;
  loom__cl_arg args[] = {LOOM__CL_ARG(dst), LOOM__CL_ARG(m)};
  return loom__cl_launch(d, k, args, 2, (total + m.span - 1) / m.span, FLAT_LOCAL);
}

/* ---- elementwise ---------------------------------------------------------------------------- */

/* Sets up lm_ew for the op's output and its first n_in inputs. */
static loom_status ew_setup(const loom__cl_device *d, const loom__op_call *c, int32_t n_in, lm_ew *m) {
  const loom__dview *out = &c->out[0];
  memset(m, 0, sizeof *m);
  m->total = elements(&out->type);
  nest L;
  nest_init(&L, out->type.rank, out->type.dims);
  nest_add(&L, NULL);
  for (int32_t j = 0; j < n_in; j++) {
    int64_t st[LOOM_MAX_RANK];
    if (!loom__dview_broadcast_strides(&c->in[j], &out->type, st)) {
      char a[LOOM_TYPE_STRING_MAX], b[LOOM_TYPE_STRING_MAX];
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: operand %d of type %s does not broadcast to %s",
                         d->id, loom_op_name(c->op->kind), (int)j + 1,
                         loom_type_format(&c->in[j].type, a, sizeof a),
                         loom_type_format(&out->type, b, sizeof b));
    }
    nest_add(&L, st);
    m->off[j] = c->in[j].offset;
  }
  nest_coalesce(&L);
  m->rank = L.rank;
  m->out_off = out->offset;
  m->span = d->span;
  for (int32_t i = 0; i < L.rank; i++) {
    m->dims[i] = L.dims[i];
    for (int32_t j = 0; j < n_in; j++) m->st[j][i] = L.st[j + 1][i];
  }
  return LOOM_OK;
}

/* ---- what each kernel takes (kernels/opencl/elementwise.cl, reduce.cl: keep in step) ---- */

static bool is_sint(loom_dtype t) {
  return t == LOOM_I8 || t == LOOM_I16 || t == LOOM_I32 || t == LOOM_I64;
}
static bool is_int(loom_dtype t) {
  return is_sint(t) || t == LOOM_U8;
}
static bool is_flt(loom_dtype t) {
  return t == LOOM_F16 || t == LOOM_BF16 || t == LOOM_F32 || t == LOOM_F64;
}
static bool is_cpx(loom_dtype t) {
  return t == LOOM_C64 || t == LOOM_C128;
}

/* The kernel's code for an elementwise op on dtype t, or -1 where it does not take it (the
 * cpu backend's table: src/backends/cpu/cpu_elementwise.c). */
static int32_t ew_code(loom_op op, loom_dtype t) {
  bool num = is_int(t) || is_flt(t), real = num || t == LOOM_BOOL;
  switch (op) {
    case LOOM_OP_NEG:
      return num || is_cpx(t) ? LM_NEG : -1;
    case LOOM_OP_ABS:
      return num ? LM_ABS : -1;
    case LOOM_OP_SIGN:
      return num ? LM_SIGN : -1;
    case LOOM_OP_RELU:
      return num ? LM_RELU : -1;
    case LOOM_OP_FLOOR:
      return num ? LM_FLOOR : -1;
    case LOOM_OP_CEIL:
      return num ? LM_CEIL : -1;
    case LOOM_OP_EXP:
      return is_flt(t) ? LM_EXP : -1;
    case LOOM_OP_LOG:
      return is_flt(t) ? LM_LOG : -1;
    case LOOM_OP_SQRT:
      return is_flt(t) ? LM_SQRT : -1;
    case LOOM_OP_RSQRT:
      return is_flt(t) ? LM_RSQRT : -1;
    case LOOM_OP_SIN:
      return is_flt(t) ? LM_SIN : -1;
    case LOOM_OP_COS:
      return is_flt(t) ? LM_COS : -1;
    case LOOM_OP_TANH:
      return is_flt(t) ? LM_TANH : -1;
    case LOOM_OP_SIGMOID:
      return is_flt(t) ? LM_SIGMOID : -1;
    case LOOM_OP_NOT:
      return t == LOOM_BOOL || is_int(t) ? LM_NOT : -1;
    case LOOM_OP_SQUARE:
      return num || is_cpx(t) ? LM_SQUARE : -1;
    case LOOM_OP_ADD:
      return num || is_cpx(t) ? LM_ADD : -1;
    case LOOM_OP_SUB:
      return num || is_cpx(t) ? LM_SUB : -1;
    case LOOM_OP_MUL:
      return num || is_cpx(t) ? LM_MUL : -1;
    case LOOM_OP_DIV:
      return num || is_cpx(t) ? LM_DIV : -1;
    case LOOM_OP_POW:
      return num ? LM_POW : -1;
    case LOOM_OP_MAXIMUM:
      return num ? LM_MAXIMUM : -1;
    case LOOM_OP_MINIMUM:
      return num ? LM_MINIMUM : -1;
    case LOOM_OP_EQ:
      return real || is_cpx(t) ? LM_EQ : -1;
    case LOOM_OP_NE:
      return real || is_cpx(t) ? LM_NE : -1;
    case LOOM_OP_LT:
      return real ? LM_LT : -1;
    case LOOM_OP_LE:
      return real ? LM_LE : -1;
    case LOOM_OP_GT:
      return real ? LM_GT : -1;
    case LOOM_OP_GE:
      return real ? LM_GE : -1;
    case LOOM_OP_AND:
      return t == LOOM_BOOL ? LM_AND : -1;
    case LOOM_OP_OR:
      return t == LOOM_BOOL ? LM_OR : -1;
    default:
      return -1;
  }
}

/* The kernel's kind for a reduction on dtype t, or -1 (cpu_reduce.c's table). */
static int32_t reduce_code(loom_op op, loom_dtype t) {
  bool num = is_int(t) || is_flt(t);
  switch (op) {
    case LOOM_OP_REDUCE_SUM:
      return num || is_cpx(t) ? LM_SUM : -1;
    case LOOM_OP_REDUCE_PROD:
      return num || is_cpx(t) ? LM_PROD : -1;
    case LOOM_OP_REDUCE_MEAN:
      return num || is_cpx(t) ? LM_MEAN : -1;
    case LOOM_OP_REDUCE_MAX:
      return num ? LM_MAX : -1;
    case LOOM_OP_REDUCE_MIN:
      return num ? LM_MIN : -1;
    case LOOM_OP_ARGMAX:
      return num ? LM_ARGMAX : -1;
    case LOOM_OP_ARGMIN:
      return num ? LM_ARGMIN : -1;
    default:
      return -1;
  }
}

/* The kernel of an elementwise op and its code: unary, binary or compare with an op code,
 * cast with the target dtype. */
static loom_status ew_kernel(loom__cl_device *d, const loom__op_call *c, loom__cl_kernel **k, cl_int *code) {
  const loom__op *op = c->op;
  loom_dtype dt = c->in[0].type.dtype;
  const char *name;
  for (int32_t i = 1; i < op->n_inputs; i++)
    if (c->in[i].type.dtype != dt)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: operand dtypes %s and %s differ", d->id,
                         loom_op_name(op->kind), loom_dtype_name(dt), loom_dtype_name(c->in[i].type.dtype));
  switch (loom__op_info_of(op->kind)->cls) {
    case LOOM_CLASS_UNARY:
      name = "unary";
      break;
    case LOOM_CLASS_BINARY:
      name = "binary";
      break;
    case LOOM_CLASS_CAST:
      name = "cast";
      break;
    default:
      name = "compare";
      break;
  }
  *code = loom__op_info_of(op->kind)->cls == LOOM_CLASS_CAST ? (cl_int)c->out[0].type.dtype
                                                             : ew_code(op->kind, dt);
  if (*code < 0) return loom__cl_unsupported(d, op, dt);
  return kernel_for(d, op, (int32_t)dt, dt, name, k);
}

static loom_status run_iota(loom__cl_device *d, const loom__op_call *c) {
  const loom__dview *out = &c->out[0];
  const loom_type *t = &out->type;
  int32_t axis;
  if (!loom__axis_normalize(c->op->attrs.axis, t->rank, &axis))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: iota: axis %lld is out of range for rank %d", d->id,
                       (long long)c->op->attrs.axis, (int)t->rank);
  cl_long total = elements(t), inner = 1, dim = t->dims[axis], off = out->offset;
  for (int32_t i = axis + 1; i < t->rank; i++) inner *= t->dims[i];
  if (total == 0) return LOOM_OK;
  loom__cl_kernel *k;
  loom_status s = kernel_for(d, c->op, (int32_t)t->dtype, t->dtype, "iota", &k);
  if (s) return s;
  cl_mem o = mem_of(out);
  loom__cl_arg args[] = {LOOM__CL_ARG(o), LOOM__CL_ARG(off), LOOM__CL_ARG(total), LOOM__CL_ARG(dim),
                         LOOM__CL_ARG(inner)};
  return loom__cl_launch(d, k, args, 5, total, FLAT_LOCAL);
}

static loom_status run_select(loom__cl_device *d, const loom__op_call *c) {
  const loom__dview *out = &c->out[0];
  if (c->in[0].type.dtype != LOOM_BOOL || c->in[1].type.dtype != out->type.dtype ||
      c->in[2].type.dtype != out->type.dtype)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: select: operand dtypes (%s, %s, %s) do not fit the op",
                       d->id, loom_dtype_name(c->in[0].type.dtype), loom_dtype_name(c->in[1].type.dtype),
                       loom_dtype_name(c->in[2].type.dtype));
  lm_ew m;
  loom_status s = ew_setup(d, c, 3, &m);
  if (s || m.total == 0) return s;
  char name[16];
  snprintf(name, sizeof name, "select_%d", (int)loom_dtype_size(out->type.dtype));
  loom__cl_kernel *k;
  if ((s = kernel_for(d, c->op, LOOM__CL_PROG_LAYOUT, out->type.dtype, name, &k))) return s;
  cl_mem o = mem_of(out), cond = mem_of(&c->in[0]), a = mem_of(&c->in[1]), b = mem_of(&c->in[2]);
  loom__cl_arg args[] = {LOOM__CL_ARG(o), LOOM__CL_ARG(cond), LOOM__CL_ARG(a), LOOM__CL_ARG(b),
                         LOOM__CL_ARG(m)};
  return loom__cl_launch(d, k, args, 5, (m.total + m.span - 1) / m.span, FLAT_LOCAL);
}

loom_status loom__cl_elementwise(loom__cl_device *d, const loom__op_call *c) {
  const loom__op *op = c->op;
  loom__op_class cls = loom__op_info_of(op->kind)->cls;
  if (cls == LOOM_CLASS_SOURCE) {
    if (op->kind == LOOM_OP_IOTA) return run_iota(d, c);
    return loom__error(LOOM_ERR_INTERNAL, "%s: %s is the executor's, not a kernel's", d->id,
                       loom_op_name(op->kind));
  }
  if (cls == LOOM_CLASS_SELECT) return run_select(d, c);
  bool to_bool = cls == LOOM_CLASS_COMPARE || cls == LOOM_CLASS_LOGIC;
  loom_dtype want = to_bool ? LOOM_BOOL : cls == LOOM_CLASS_CAST ? c->out[0].type.dtype : c->in[0].type.dtype;
  if (c->out[0].type.dtype != want)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: output dtype %s for %s operands", d->id,
                       loom_op_name(op->kind), loom_dtype_name(c->out[0].type.dtype),
                       loom_dtype_name(c->in[0].type.dtype));
  lm_ew m;
  loom_status s = ew_setup(d, c, op->n_inputs, &m);
  if (s || m.total == 0) return s;
  loom__cl_kernel *k;
  cl_int code;
  if ((s = ew_kernel(d, c, &k, &code))) return s;
  cl_mem o = mem_of(&c->out[0]), a = mem_of(&c->in[0]), b = op->n_inputs > 1 ? mem_of(&c->in[1]) : NULL;
  loom__cl_arg args[] = {LOOM__CL_ARG(o), LOOM__CL_ARG(a), LOOM__CL_ARG(b), LOOM__CL_ARG(m),
                         LOOM__CL_ARG(code)};
  int64_t items = (m.total + m.span - 1) / m.span;
  if (op->n_inputs == 1) {
    args[2] = args[3];
    args[3] = args[4];
    return loom__cl_launch(d, k, args, 4, items, FLAT_LOCAL);
  }
  return loom__cl_launch(d, k, args, 5, items, FLAT_LOCAL);
}

/* ---- layout: every op is one strided copy (concat one per operand) ----------------------- */

static loom_status cl_copy(void *dev, int64_t elem, int32_t rank, const int64_t *dims, void *dst, int64_t dst_off,
                           const int64_t *dst_strides, void *src, int64_t src_off, const int64_t *src_strides) {
  return loom__cl_copy(dev, elem, rank, dims, (cl_mem)dst, dst_off, dst_strides, (cl_mem)src, src_off, src_strides);
}

loom_status loom__cl_layout(loom__cl_device *d, const loom__op_call *c) {
  return loom__layout_run(d, d->id, cl_copy, c);
}

/* ---- reductions ----------------------------------------------------------------------------- */

/* Reductions over at least this many elements with few outputs take a work-group each. */
#define GROUP_MIN_REDUCED 1024
#define GROUP_MAX_OUTPUTS 4096
#define GROUP_LOCAL 64

static int64_t abs64(int64_t x) {
  return x < 0 ? -x : x;
}

/* The reduced axes as a bit mask; the output's shape must be what they leave. */
static loom_status reduced_axes(const loom__cl_device *d, const loom__op *op, const loom__dview *in,
                                const loom__dview *out, uint32_t *mask) {
  const loom_type *t = &in->type;
  const char *name = loom_op_name(op->kind);
  bool arg = op->kind == LOOM_OP_ARGMAX || op->kind == LOOM_OP_ARGMIN;
  int32_t n = arg ? 1 : op->attrs.axes.count;
  *mask = 0;
  for (int32_t i = 0; i < n; i++) {
    int32_t axis;
    if (!loom__axis_normalize(arg ? op->attrs.axis : op->attrs.axes.v[i], t->rank, &axis) ||
        (*mask & (1u << axis)))
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: bad axes for rank %d", d->id, name,
                         (int)t->rank);
    *mask |= 1u << axis;
  }
  bool keep = !arg && (op->attrs.set & LOOM_ATTR_KEEPDIMS) && op->attrs.keepdims;
  int32_t r = 0;
  bool ok = true;
  for (int32_t k = 0; k < t->rank && ok; k++) {
    if ((*mask & (1u << k)) && !keep) continue;
    int64_t want = (*mask & (1u << k)) ? 1 : t->dims[k];
    ok = r < out->type.rank && out->type.dims[r++] == want;
  }
  if (!ok || r != out->type.rank) {
    char a[LOOM_TYPE_STRING_MAX], b[LOOM_TYPE_STRING_MAX];
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: output %s does not match input %s", d->id, name,
                       loom_type_format(&out->type, a, sizeof a), loom_type_format(t, b, sizeof b));
  }
  return LOOM_OK;
}

/* Splits the input view into kept dims (output order) and reduced dims (decreasing stride,
 * so the innermost has the smallest), each coalesced. */
static void reduce_plan(const loom__dview *in, uint32_t mask, lm_reduce *m) {
  int64_t kd[LOOM_MAX_RANK], ks[LOOM_MAX_RANK], rd[LOOM_MAX_RANK], rs[LOOM_MAX_RANK];
  int32_t nk = 0, nr = 0;
  for (int32_t k = 0; k < in->type.rank; k++) {
    if (mask & (1u << k)) {
      rd[nr] = in->type.dims[k];
      rs[nr++] = in->strides[k];
    } else {
      kd[nk] = in->type.dims[k];
      ks[nk++] = in->strides[k];
    }
  }
  for (int32_t i = 1; i < nr; i++)
    for (int32_t j = i; j > 0 && abs64(rs[j - 1]) < abs64(rs[j]); j--) {
      int64_t t = rd[j];
      rd[j] = rd[j - 1];
      rd[j - 1] = t;
      t = rs[j];
      rs[j] = rs[j - 1];
      rs[j - 1] = t;
    }
  nest K, R;
  nest_init(&K, nk, kd);
  nest_add(&K, ks);
  nest_init(&R, nr, rd);
  nest_add(&R, rs);
  memset(m, 0, sizeof *m);
  m->n_out = 1;
  m->n_red = 1;
  for (int32_t i = 0; i < nk; i++) m->n_out *= kd[i];
  for (int32_t i = 0; i < nr; i++) m->n_red *= rd[i];
  nest_coalesce(&K);
  nest_coalesce(&R);
  m->kr = K.rank;
  m->rr = R.rank;
  for (int32_t i = 0; i < K.rank; i++) {
    m->kdims[i] = K.dims[i];
    m->kst[i] = K.st[0][i];
  }
  for (int32_t i = 0; i < R.rank; i++) {
    m->rdims[i] = R.dims[i];
    m->rst[i] = R.st[0][i];
  }
  m->in_off = in->offset;
}

loom_status loom__cl_reduce(loom__cl_device *d, const loom__op_call *c) {
  const loom__op *op = c->op;
  const loom__dview *in = &c->in[0], *out = &c->out[0];
  loom_dtype dt = in->type.dtype;
  bool arg = op->kind == LOOM_OP_ARGMAX || op->kind == LOOM_OP_ARGMIN;
  if (out->type.dtype != (arg ? LOOM_I64 : dt))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: output dtype %s for %s input", d->id,
                       loom_op_name(op->kind), loom_dtype_name(out->type.dtype), loom_dtype_name(dt));
  uint32_t mask;
  loom_status s = reduced_axes(d, op, in, out, &mask);
  if (s) return s;
  lm_reduce m;
  reduce_plan(in, mask, &m);
  m.out_off = out->offset;
  if (m.n_out == 0) return LOOM_OK;
  bool identity =
      op->kind == LOOM_OP_REDUCE_SUM || op->kind == LOOM_OP_REDUCE_PROD || op->kind == LOOM_OP_REDUCE_MEAN;
  if (m.n_red == 0 && !identity)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: reduction over an empty axis", loom_op_name(op->kind));
  bool group = m.n_red >= GROUP_MIN_REDUCED && m.n_out <= GROUP_MAX_OUTPUTS;
  cl_int kind = reduce_code(op->kind, dt);
  if (kind < 0) return loom__cl_unsupported(d, op, dt);
  loom__cl_kernel *k;
  const char *name = !group                                                 ? "red_item"
                     : kind == LM_SUM || kind == LM_PROD || kind == LM_MEAN ? "red_group_arith"
                     : kind == LM_MAX || kind == LM_MIN                     ? "red_group_extreme"
                                                                            : "red_group_arg";
  if ((s = kernel_for(d, op, (int32_t)dt, dt, name, &k))) return s;
  cl_mem a = mem_of(in), o = mem_of(out);
  if (!group) {
    loom__cl_arg args[] = {LOOM__CL_ARG(a), LOOM__CL_ARG(o), LOOM__CL_ARG(m), LOOM__CL_ARG(kind)};
    return loom__cl_launch(d, k, args, 4, m.n_out, FLAT_LOCAL);
  }
  size_t local = GROUP_LOCAL;
  while (local > 1 && local > k->max_wg) local /= 2;
  /* One group per output: the launch covers n_out groups (capped; the kernel loops). */
  loom__cl_arg args[] = {LOOM__CL_ARG(a),
                         LOOM__CL_ARG(o),
                         LOOM__CL_ARG(m),
                         LOOM__CL_ARG(kind),
                         LOOM__CL_LOCAL(local * 16),
                         LOOM__CL_LOCAL(local * sizeof(cl_long))};
  return loom__cl_launch(d, k, args, 6, m.n_out * (int64_t)local, local);
}

/* ---- topk ------------------------------------------------------------------------------------ */

loom_status loom__cl_topk(loom__cl_device *d, const loom__op_call *c) {
  const loom__op *op = c->op;
  const loom__dview *in = &c->in[0], *out = c->out;
  const loom_type *t = &in->type;
  int32_t axis;
  if (!loom__axis_normalize(op->attrs.axis, t->rank, &axis))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: topk: axis %lld is out of range for rank %d", d->id,
                       (long long)op->attrs.axis, (int)t->rank);
  bool ok = out[0].type.dtype == t->dtype && out[1].type.dtype == LOOM_I64 && op->attrs.k >= 0 &&
            op->attrs.k <= t->dims[axis];
  for (int32_t r = 0; r < 2 && ok; r++) {
    ok = out[r].type.rank == t->rank;
    for (int32_t k = 0; k < t->rank && ok; k++)
      ok = out[r].type.dims[k] == (k == axis ? op->attrs.k : t->dims[k]);
  }
  if (!ok) {
    char a[LOOM_TYPE_STRING_MAX];
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: topk: outputs do not match k=%lld of %s", d->id,
                       (long long)op->attrs.k, loom_type_format(t, a, sizeof a));
  }
  lm_topk m;
  memset(&m, 0, sizeof m);
  int64_t dims[LOOM_MAX_RANK], strides[LOOM_MAX_RANK];
  int32_t nr = 0;
  m.inner = 1;
  m.n_rows = 1;
  for (int32_t k = 0; k < t->rank; k++) {
    if (k == axis) continue;
    dims[nr] = t->dims[k];
    strides[nr++] = in->strides[k];
    m.n_rows *= t->dims[k];
    if (k > axis) m.inner *= t->dims[k];
  }
  nest R;
  nest_init(&R, nr, dims);
  nest_add(&R, strides);
  nest_coalesce(&R);
  m.rr = R.rank;
  for (int32_t i = 0; i < R.rank; i++) {
    m.rdims[i] = R.dims[i];
    m.rst[i] = R.st[0][i];
  }
  m.n = t->dims[axis];
  m.stride = in->strides[axis];
  m.k = op->attrs.k;
  m.largest = (op->attrs.set & LOOM_ATTR_LARGEST) ? op->attrs.largest : true;
  m.in_off = in->offset;
  m.v_off = out[0].offset;
  m.i_off = out[1].offset;
  if (m.k == 0 || m.n_rows == 0) return LOOM_OK;
  loom__cl_kernel *k;
  loom_status s = kernel_for(d, op, (int32_t)t->dtype, t->dtype, "topk_rows", &k);
  if (s) return s;
  cl_mem a = mem_of(in), v = mem_of(&out[0]), ix = mem_of(&out[1]);
  loom__cl_arg args[] = {LOOM__CL_ARG(a), LOOM__CL_ARG(v), LOOM__CL_ARG(ix), LOOM__CL_ARG(m)};
  return loom__cl_launch(d, k, args, 4, m.n_rows, FLAT_LOCAL);
}

/* ---- conv ------------------------------------------------------------------------------------- */

static int64_t attr_or(const loom_attrs *a, uint32_t bit, const loom_int_list *l, int32_t i, int64_t dflt) {
  return ((a->set & bit) && i < l->count) ? l->v[i] : dflt;
}

static loom_status conv_setup(const loom__cl_device *d, const loom__op_call *c, lm_conv *p) {
  const loom_attrs *a = &c->op->attrs;
  const loom__dview *x = &c->in[0], *w = &c->in[1], *out = &c->out[0];
  int32_t nsp = x->type.rank - 2;
  memset(p, 0, sizeof *p);
  if (nsp < 1 || nsp > 3 || w->type.rank != x->type.rank || out->type.rank != x->type.rank)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: conv: x and w need 1 to 3 spatial dims", d->id);
  p->N = x->type.dims[0];
  p->C = x->type.dims[1];
  p->O = w->type.dims[0];
  p->G = (a->set & LOOM_ATTR_GROUPS) ? a->groups : 1;
  if (p->G < 1 || p->C % p->G || p->O % p->G || w->type.dims[1] != p->C / p->G || out->type.dims[0] != p->N ||
      out->type.dims[1] != p->O || w->type.dtype != x->type.dtype || out->type.dtype != x->type.dtype)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: conv: operand and result types do not agree", d->id);
  p->Cg = p->C / p->G;
  p->Og = p->O / p->G;
  p->xs_n = x->strides[0];
  p->xs_c = x->strides[1];
  p->ws_o = w->strides[0];
  p->ws_c = w->strides[1];
  p->total = p->N * p->O;
  for (int32_t k = 0; k < 3; k++) {
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
    if (p->stride[k] < 1 || p->dil[k] < 1 || p->pad[k] < 0)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: conv: bad stride, padding or dilation", d->id);
    p->total *= p->out[k];
  }
  p->x_off = x->offset;
  p->w_off = w->offset;
  p->o_off = out->offset;
  return LOOM_OK;
}

loom_status loom__cl_conv(loom__cl_device *d, const loom__op_call *c) {
  lm_conv m;
  loom_status s = conv_setup(d, c, &m);
  if (s || m.total == 0) return s;
  loom_dtype dt = c->in[0].type.dtype;
  loom__cl_kernel *k;
  if ((s = kernel_for(d, c->op, (int32_t)dt, dt, "conv", &k))) return s;
  cl_mem x = mem_of(&c->in[0]), w = mem_of(&c->in[1]), o = mem_of(&c->out[0]);
  loom__cl_arg args[] = {LOOM__CL_ARG(x), LOOM__CL_ARG(w), LOOM__CL_ARG(o), LOOM__CL_ARG(m)};
  return loom__cl_launch(d, k, args, 4, m.total, FLAT_LOCAL);
}
