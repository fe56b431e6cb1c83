/* Fused attention on OpenCL devices: the f32 program's `attention` kernel
 * (kernels/opencl/attention.cl), a work-item per query row, launched as every flat kernel. */
#include "backends/opencl/opencl_attention.h"

loom_status loom__cl_attention_supported(const loom__attention *a) {
  if (a->dtype != LOOM_F32)
    return loom__error(LOOM_ERR_UNSUPPORTED, "opencl: fused attention: %s (f32 only)",
                       loom_dtype_name(a->dtype));
  return LOOM_OK;
}

loom_status loom__cl_attention(loom__cl_device *d, const loom__attention *a, const loom__dview *in,
                               const loom__dview *out) {
  loom_status s = loom__cl_attention_supported(a);
  if (s) return s;
  if (a->m == 0 && a->n > 0 && a->dv > 0)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "%s: fused attention: the softmax's reduce_max runs over 0 keys (an empty axis)",
                       d->id);
  if (a->n == 0 || a->dv == 0) return LOOM_OK;
  loom__cl_kernel *k = NULL;
  s = loom__cl_kernel_get(d, LOOM_F32, "attention", &k);
  if (s == LOOM_ERR_UNSUPPORTED)
    return loom__error(LOOM_ERR_INTERNAL, "%s: the f32 program has no attention kernel", d->id);
  if (s) return s;
  cl_mem q = (cl_mem)in[0].buffer, kt = (cl_mem)in[1].buffer, v = (cl_mem)in[2].buffer;
  cl_mem o = (cl_mem)out[0].buffer;
  cl_long qo = in[0].offset, qr = in[0].strides[0], qc = in[0].strides[1];
  cl_long ko = in[1].offset, kr = in[1].strides[0], kc = in[1].strides[1];
  cl_long vo = in[2].offset, vr = in[2].strides[0], vc = in[2].strides[1];
  cl_long oo = out[0].offset, n = a->n, m = a->m, dd = a->d, dv = a->dv;
  cl_float scale = (cl_float)a->scale;
  loom__cl_arg args[] = {LOOM__CL_ARG(q),  LOOM__CL_ARG(qo), LOOM__CL_ARG(qr),   LOOM__CL_ARG(qc),
                         LOOM__CL_ARG(kt), LOOM__CL_ARG(ko), LOOM__CL_ARG(kr),   LOOM__CL_ARG(kc),
                         LOOM__CL_ARG(v),  LOOM__CL_ARG(vo), LOOM__CL_ARG(vr),   LOOM__CL_ARG(vc),
                         LOOM__CL_ARG(o),  LOOM__CL_ARG(oo), LOOM__CL_ARG(n),    LOOM__CL_ARG(m),
                         LOOM__CL_ARG(dd), LOOM__CL_ARG(dv), LOOM__CL_ARG(scale)};
  /* a group of 1 on CPU devices (a row per core at a time), 64 on GPUs, as the flat kernels */
  return loom__cl_launch(d, k, args, LOOM_ARRAY_SIZE(args), a->n, d->is_cpu ? 1 : 64);
}
