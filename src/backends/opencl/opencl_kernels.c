/* The opencl backend's own kernel families: elementwise (unary, binary, compare, logic,
 * select, cast, iota), layout (materialized by strided copies), reductions, argmax/argmin,
 * topk and conv. The checks and the kernel arguments are the GPU layer's
 * (backends/gpu/gpu_setup.h, shared with the cuda backend); each launcher here picks the
 * kernel of the dtype's program and enqueues it; nothing here waits for the device. */
#include <stdio.h>

#include "backends/opencl/opencl_backend.h"

/* ---- launching ------------------------------------------------------------------------------ */

/* Work-groups per launch at most; the kernels loop over the rest (GRID_LOOP). */
#define MAX_GROUPS 8192
/* Work-items per group of the flat kernels: 64 on GPUs; 1 on CPU devices, where a group runs
 * on one core (so a small launch still spreads over every core), each work-item already walks
 * a span of elements, and a driver such as PoCL compiles each kernel once per group size. */
#define FLAT_LOCAL (d->is_cpu ? (size_t)1 : (size_t)64)

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
  if (s == LOOM_ERR_UNSUPPORTED) return loom__gpu_unsupported(d->id, op, dtype);
  return s;
}

static cl_mem mem_of(const loom__dview *v) {
  return (cl_mem)v->buffer;
}

/* ---- copies ------------------------------------------------------------------------------- */

/* The layout program's kernel `<what>_<esize>` (copy, zero): every element size the layout
 * ops use has one, so a missing one is Loom's bug. */
static loom_status layout_kernel(loom__cl_device *d, const char *what, int64_t esize, loom__cl_kernel **k) {
  char name[16];
  snprintf(name, sizeof name, "%s_%d", what, (int)esize);
  loom_status s = loom__cl_kernel_get(d, LOOM__CL_PROG_LAYOUT, name, k);
  if (s == LOOM_ERR_UNSUPPORTED) return loom__error(LOOM_ERR_INTERNAL, "%s: no %s kernel", d->id, name);
  return s;
}

loom_status loom__cl_copy(loom__cl_device *d, int64_t esize, int32_t rank, const int64_t *dims, cl_mem dst,
                          int64_t dst_off, const int64_t *dst_strides, cl_mem src, int64_t src_off,
                          const int64_t *src_strides) {
  lm_copy m;
  loom__gpu_copy_setup(rank, dims, dst_off, dst_strides, src_off, src_strides, d->span, &m);
  if (m.total == 0) return LOOM_OK;
  /* A dense copy of one run is a buffer copy. */
  if (loom__gpu_copy_is_run(&m))
    return loom__cl_status(
        clEnqueueCopyBuffer(d->queue, src, dst, (size_t)(src_off * esize), (size_t)(dst_off * esize),
                            (size_t)(m.total * esize), 0, NULL, NULL),
        "clEnqueueCopyBuffer");
  loom__cl_kernel *k;
  loom_status s = layout_kernel(d, "copy", esize, &k);
  if (s) return s;
  loom__cl_arg args[] = {LOOM__CL_ARG(dst), LOOM__CL_ARG(src), LOOM__CL_ARG(m)};
  return loom__cl_launch(d, k, args, 3, (m.total + m.span - 1) / m.span, FLAT_LOCAL);
}

loom_status loom__cl_zero(loom__cl_device *d, int64_t esize, int32_t rank, const int64_t *dims, cl_mem dst,
                          int64_t dst_off, const int64_t *dst_strides) {
  lm_copy m;
  loom__gpu_zero_setup(rank, dims, dst_off, dst_strides, d->span, &m);
  if (m.total == 0) return LOOM_OK;
  loom__cl_kernel *k;
  loom_status s = layout_kernel(d, "zero", esize, &k);
  if (s) return s;
  loom__cl_arg args[] = {LOOM__CL_ARG(dst), LOOM__CL_ARG(m)};
  return loom__cl_launch(d, k, args, 2, (m.total + m.span - 1) / m.span, FLAT_LOCAL);
}

/* ---- elementwise ---------------------------------------------------------------------------- */

static const char *const ew_kernel_names[] = {[LOOM__GPU_CAST] = "cast",
                                              [LOOM__GPU_UNARY] = "unary",
                                              [LOOM__GPU_BINARY] = "binary",
                                              [LOOM__GPU_COMPARE] = "compare"};

static loom_status run_iota(loom__cl_device *d, const loom__op_call *c, const loom__gpu_ew *e) {
  loom__cl_kernel *k;
  loom_status s = kernel_for(d, c->op, (int32_t)e->dtype, e->dtype, "iota", &k);
  if (s) return s;
  cl_mem o = mem_of(&c->out[0]);
  cl_long off = e->iota_off, total = e->total, dim = e->iota_dim, inner = e->iota_inner;
  loom__cl_arg args[] = {LOOM__CL_ARG(o), LOOM__CL_ARG(off), LOOM__CL_ARG(total), LOOM__CL_ARG(dim),
                         LOOM__CL_ARG(inner)};
  return loom__cl_launch(d, k, args, 5, total, FLAT_LOCAL);
}

static loom_status run_select(loom__cl_device *d, const loom__op_call *c, const loom__gpu_ew *e) {
  char name[16];
  snprintf(name, sizeof name, "select_%d", (int)loom_dtype_size(e->dtype));
  loom__cl_kernel *k;
  loom_status s = kernel_for(d, c->op, LOOM__CL_PROG_LAYOUT, e->dtype, name, &k);
  if (s) return s;
  cl_mem o = mem_of(&c->out[0]), cond = mem_of(&c->in[0]), a = mem_of(&c->in[1]), b = mem_of(&c->in[2]);
  loom__cl_arg args[] = {LOOM__CL_ARG(o), LOOM__CL_ARG(cond), LOOM__CL_ARG(a), LOOM__CL_ARG(b),
                         LOOM__CL_ARG(e->m)};
  return loom__cl_launch(d, k, args, 5, (e->m.total + e->m.span - 1) / e->m.span, FLAT_LOCAL);
}

loom_status loom__cl_elementwise(void *dev, const loom__op_call *c) {
  loom__cl_device *d = dev;
  loom__gpu_ew e;
  loom_status s = loom__gpu_ew_setup(d->id, c, d->span, &e);
  if (s || e.total == 0) return s;
  if (e.kernel == LOOM__GPU_IOTA) return run_iota(d, c, &e);
  if (e.kernel == LOOM__GPU_SELECT) return run_select(d, c, &e);
  loom__cl_kernel *k;
  if ((s = kernel_for(d, c->op, (int32_t)e.dtype, e.dtype, ew_kernel_names[e.kernel], &k))) return s;
  cl_int code = e.code;
  cl_mem o = mem_of(&c->out[0]), a = mem_of(&c->in[0]), b = c->op->n_inputs > 1 ? mem_of(&c->in[1]) : NULL;
  loom__cl_arg args[] = {LOOM__CL_ARG(o), LOOM__CL_ARG(a), LOOM__CL_ARG(b), LOOM__CL_ARG(e.m),
                         LOOM__CL_ARG(code)};
  int64_t items = (e.m.total + e.m.span - 1) / e.m.span;
  if (c->op->n_inputs == 1) {
    args[2] = args[3];
    args[3] = args[4];
    return loom__cl_launch(d, k, args, 4, items, FLAT_LOCAL);
  }
  return loom__cl_launch(d, k, args, 5, items, FLAT_LOCAL);
}

/* ---- layout: every op is one strided copy (concat one per operand) ----------------------- */

static loom_status cl_copy(void *dev, int64_t elem, int32_t rank, const int64_t *dims, void *dst,
                           int64_t dst_off, const int64_t *dst_strides, void *src, int64_t src_off,
                           const int64_t *src_strides) {
  return loom__cl_copy(dev, elem, rank, dims, (cl_mem)dst, dst_off, dst_strides, (cl_mem)src, src_off,
                       src_strides);
}

loom_status loom__cl_layout(void *dev, const loom__op_call *c) {
  loom__cl_device *d = dev;
  return loom__layout_run(d, d->id, cl_copy, c);
}

/* ---- reductions ----------------------------------------------------------------------------- */

/* Reductions over at least this many elements with few outputs take a work-group each. */
#define GROUP_MIN_REDUCED 1024
#define GROUP_MAX_OUTPUTS 4096
#define GROUP_LOCAL 64

loom_status loom__cl_reduce(void *dev, const loom__op_call *c) {
  loom__cl_device *d = dev;
  const loom__op *op = c->op;
  loom_dtype dt = c->in[0].type.dtype;
  lm_reduce m;
  int32_t kind32;
  loom_status s = loom__gpu_reduce_setup(d->id, c, &m, &kind32);
  if (s || m.n_out == 0) return s;
  bool group = m.n_red >= GROUP_MIN_REDUCED && m.n_out <= GROUP_MAX_OUTPUTS;
  cl_int kind = kind32;
  loom__cl_kernel *k;
  const char *name = !group                                                 ? "red_item"
                     : kind == LM_SUM || kind == LM_PROD || kind == LM_MEAN ? "red_group_arith"
                     : kind == LM_MAX || kind == LM_MIN                     ? "red_group_extreme"
                                                                            : "red_group_arg";
  if ((s = kernel_for(d, op, (int32_t)dt, dt, name, &k))) return s;
  cl_mem a = mem_of(&c->in[0]), o = mem_of(&c->out[0]);
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

loom_status loom__cl_topk(void *dev, const loom__op_call *c) {
  loom__cl_device *d = dev;
  lm_topk m;
  loom_status s = loom__gpu_topk_setup(d->id, c, &m);
  if (s || m.k == 0 || m.n_rows == 0) return s;
  loom_dtype dt = c->in[0].type.dtype;
  loom__cl_kernel *k;
  if ((s = kernel_for(d, c->op, (int32_t)dt, dt, "topk_rows", &k))) return s;
  cl_mem a = mem_of(&c->in[0]), v = mem_of(&c->out[0]), ix = mem_of(&c->out[1]);
  loom__cl_arg args[] = {LOOM__CL_ARG(a), LOOM__CL_ARG(v), LOOM__CL_ARG(ix), LOOM__CL_ARG(m)};
  return loom__cl_launch(d, k, args, 4, m.n_rows, FLAT_LOCAL);
}

/* ---- conv ------------------------------------------------------------------------------------- */

loom_status loom__cl_conv(void *dev, const loom__op_call *c) {
  loom__cl_device *d = dev;
  lm_conv m;
  loom_status s = loom__gpu_conv_setup(d->id, c, &m);
  if (s || m.total == 0) return s;
  loom_dtype dt = c->in[0].type.dtype;
  loom__cl_kernel *k;
  if ((s = kernel_for(d, c->op, (int32_t)dt, dt, "conv", &k))) return s;
  cl_mem x = mem_of(&c->in[0]), w = mem_of(&c->in[1]), o = mem_of(&c->out[0]);
  loom__cl_arg args[] = {LOOM__CL_ARG(x), LOOM__CL_ARG(w), LOOM__CL_ARG(o), LOOM__CL_ARG(m)};
  return loom__cl_launch(d, k, args, 4, m.total, FLAT_LOCAL);
}
