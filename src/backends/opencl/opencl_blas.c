/* dot on an OpenCL device: NumPy matmul ([..,n,k] x [..,k,m] -> [..,n,m], batch dims broadcast,
 * 1-D operands as NumPy).
 *
 * f32, f64, c64 and c128 products big enough to pay for a library call go to CLBlast, one
 * GEMM per batch element on the device's queue, transposes folded into the call as flags: a
 * matrix that is dense row-major (NoTrans) or dense column-major (a transposed view, Trans) is
 * passed as it is, at its element offset, with its leading dimension; broadcast batch dims are
 * just the same offset again. CLBlast's temporary buffer (for padding) comes from the op's
 * scratch (IR.md: 1x the output) when it fits, else, when the executor runs without a limit,
 * from the executor's meter (temp_take); otherwise, and for every other dtype or layout, the
 * gemm kernel (kernels/opencl/dot.cl) reads the operands in place. CLBlastXgemmBatched is not
 * used: it allocates its temporaries itself, outside any limit.
 */
#include "backends/opencl/opencl_backend.h"

#define TILE 16

/* ---- the gemm kernel ---------------------------------------------------------------------- */

/* CPU devices: gemm_flat, a plain loop per output. */
static loom_status run_flat(loom__cl_device *d, const loom__op_call *c, const lm_gemm *p) {
  loom_dtype dt = c->out[0].type.dtype;
  loom__cl_kernel *k;
  loom_status s = loom__cl_kernel_get(d, (int32_t)dt, "gemm_flat", &k);
  if (s == LOOM_ERR_UNSUPPORTED) return loom__gpu_unsupported(d->id, c->op, dt);
  if (s) return s;
  cl_mem a = (cl_mem)c->in[0].buffer, b = (cl_mem)c->in[1].buffer, o = (cl_mem)c->out[0].buffer;
  cl_long span = 16, total = p->batch * p->n * p->m;
  loom__cl_arg args[] = {
      LOOM__CL_ARG(a), LOOM__CL_ARG(b), LOOM__CL_ARG(o), {sizeof *p, p}, LOOM__CL_ARG(span)};
  return loom__cl_launch(d, k, args, 5, (total + span - 1) / span, 1);
}

static loom_status run_kernel(loom__cl_device *d, const loom__op_call *c, const lm_gemm *p) {
  loom_dtype dt = c->out[0].type.dtype;
  if (d->is_cpu && loom__cl_testing_blas_path() != 3) return run_flat(d, c, p);
  loom__cl_kernel *k;
  loom_status s = loom__cl_kernel_get(d, (int32_t)dt, "gemm", &k);
  if (s == LOOM_ERR_UNSUPPORTED) return loom__gpu_unsupported(d->id, c->op, dt);
  if (s) return s;
  if (k->max_wg < TILE * TILE)
    return loom__error(
        LOOM_ERR_UNSUPPORTED,
        "%s (%s): dot on %s: the gemm kernel needs %d work-items per group, the device allows %zu", d->id,
        d->name, loom_dtype_name(dt), TILE * TILE, k->max_wg);
  cl_mem a = (cl_mem)c->in[0].buffer, b = (cl_mem)c->in[1].buffer, o = (cl_mem)c->out[0].buffer;
  cl_int err = clSetKernelArg(k->kernel, 0, sizeof a, &a);
  err |= clSetKernelArg(k->kernel, 1, sizeof b, &b);
  err |= clSetKernelArg(k->kernel, 2, sizeof o, &o);
  err |= clSetKernelArg(k->kernel, 3, sizeof *p, p);
  if (err != CL_SUCCESS) return loom__error(LOOM_ERR_INTERNAL, "%s: gemm: clSetKernelArg failed", d->id);
  size_t local[3] = {TILE, TILE, 1};
  size_t global[3] = {(size_t)((p->m + TILE - 1) / TILE * TILE), (size_t)((p->n + TILE - 1) / TILE * TILE),
                      (size_t)LOOM_MIN(p->batch, 65535)};
  s = loom__cl_status(clEnqueueNDRangeKernel(d->queue, k->kernel, 3, NULL, global, local, 0, NULL, NULL),
                      "clEnqueueNDRangeKernel");
  if (s) loom__error_prefix("%s: gemm: ", d->id);
  return s;
}

loom_status loom__cl_dot(void *dev, const loom__op_call *c) {
  loom__cl_device *d = dev;
  lm_gemm p;
  loom_status s = loom__gpu_dot_setup(d->id, c, &p);
  if (s) return s;
  if (p.batch == 0 || p.n == 0 || p.m == 0) return LOOM_OK;
  int64_t es = loom_dtype_size(c->out[0].type.dtype);
  if (p.k == 0) {
    cl_uchar zero = 0;
    s = loom__cl_status(
        clEnqueueFillBuffer(d->queue, (cl_mem)c->out[0].buffer, &zero, 1, (size_t)(p.c_off * es),
                            (size_t)(p.batch * p.n * p.m * es), 0, NULL, NULL),
        "clEnqueueFillBuffer");
    if (s) loom__error_prefix("%s: dot: ", d->id);
    return s;
  }
  bool ran = false;
  s = loom__cl_clblast_dot(d, c, &p, &ran);
  if (s || ran) return s;
  return run_kernel(d, c, &p);
}
