/* The opencl backend's quantize and dequantize (docs/ir-quant.md): the layout program's
 * kernels of kernels/opencl/quant.cl, with lm_quant from the GPU layer (gpu_setup.c). A q4
 * operand's buffer is addressed in bytes by the kernels, its offset and strides in nibbles. */
#include "backends/opencl/opencl_backend.h"

/* Flat kernels' work-group: one work-item a group on CPU devices (opencl_kernels.c says why). */
#define QUANT_LOCAL(d) ((d)->is_cpu ? (size_t)1 : (size_t)64)

static loom_status quant_kernel(loom__cl_device *d, const char *name, loom__cl_kernel **k) {
  loom_status s = loom__cl_kernel_get(d, LOOM__CL_PROG_LAYOUT, name, k);
  if (s == LOOM_ERR_UNSUPPORTED) return loom__error(LOOM_ERR_INTERNAL, "%s: no %s kernel", d->id, name);
  return s;
}

static loom_status cl_dequantize(loom__cl_device *d, const loom__op_call *c) {
  lm_quant m;
  loom_status s = loom__gpu_quant_setup(c->op, &c->out[0], &c->in[0], &c->in[1], &m);
  loom__cl_kernel *k;
  if (!s) s = quant_kernel(d, "dequantize", &k);
  if (s || m.rows * m.len == 0) return s;
  /* the output is dense: its offset goes separately, the f32 strides are its own */
  cl_long o_off = m.f_off;
  m.f_off = 0;
  cl_mem o = c->out[0].buffer, q = c->in[0].buffer, sc = c->in[1].buffer;
  loom__cl_arg args[] = {LOOM__CL_ARG(o), LOOM__CL_ARG(q), LOOM__CL_ARG(sc), LOOM__CL_ARG(o_off),
                         LOOM__CL_ARG(m)};
  return loom__cl_launch(d, k, args, 5, m.rows, QUANT_LOCAL(d));
}

static loom_status cl_quantize(loom__cl_device *d, const loom__op_call *c) {
  lm_quant m;
  loom_status s = loom__gpu_quant_setup(c->op, &c->in[0], &c->out[0], &c->out[1], &m);
  loom__cl_kernel *kmax, *kq;
  if (!s) s = quant_kernel(d, "quant_absmax", &kmax);
  if (!s) s = quant_kernel(d, "quantize", &kq);
  if (s) return s;
  cl_int lo = m.q4 ? -8 : -128, hi = m.q4 ? 7 : 127;
  cl_float qmax = (cl_float)hi;
  cl_mem q = c->out[0].buffer, x = c->in[0].buffer, sc = c->out[1].buffer;
  loom__cl_arg margs[] = {LOOM__CL_ARG(sc), LOOM__CL_ARG(x), LOOM__CL_ARG(qmax), LOOM__CL_ARG(m)};
  s = loom__cl_launch(d, kmax, margs, 4, m.channels, QUANT_LOCAL(d));
  if (s || m.rows * m.len == 0) return s;
  loom__cl_arg qargs[] = {LOOM__CL_ARG(q),  LOOM__CL_ARG(x),  LOOM__CL_ARG(sc),
                          LOOM__CL_ARG(lo), LOOM__CL_ARG(hi), LOOM__CL_ARG(m)};
  return loom__cl_launch(d, kq, qargs, 6, m.rows, QUANT_LOCAL(d));
}

loom_status loom__cl_quant(void *dev, const loom__op_call *c) {
  loom__cl_device *d = dev;
  return c->op->kind == LOOM_OP_QUANTIZE ? cl_quantize(d, c) : cl_dequantize(d, c);
}
