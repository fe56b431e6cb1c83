/* The cuda backend's own kernel families, host side: elementwise (unary, binary, compare, logic,
 * select, cast, iota), layout (materialized by strided copies), reductions, argmax/argmin, topk
 * and conv. The checks and the kernel arguments are the GPU layer's (backends/gpu/gpu_setup.h,
 * shared with the opencl backend, so the two read views alike); each launcher here enqueues
 * the kernel on the device's stream (kernels/cuda/); nothing here waits. */
#include "backends/cuda/cuda_backend.h"

/* A launcher's result: "cuda0: <kernel> launch failed: <CUDA error>". */
static loom_status launched(const loom__cu_device *d, cudaError_t err, const char *kernel) {
  return loom__cu_check(d, err, kernel);
}

/* ---- copies ------------------------------------------------------------------------------- */

loom_status loom__cu_copy_strided(loom__cu_device *d, int64_t esize, int32_t rank, const int64_t *dims,
                                  void *dst, int64_t dst_off, const int64_t *dst_strides, const void *src,
                                  int64_t src_off, const int64_t *src_strides) {
  lm_copy m;
  loom__gpu_copy_setup(rank, dims, dst_off, dst_strides, src_off, src_strides, 1, &m);
  if (m.total == 0) return LOOM_OK;
  /* A dense copy of one run is a memcpy on the stream. */
  if (loom__gpu_copy_is_run(&m))
    return loom__cu_check(d,
                          cudaMemcpyAsync((char *)dst + dst_off * esize, (const char *)src + src_off * esize,
                                          (size_t)(m.total * esize), cudaMemcpyDeviceToDevice, d->stream),
                          "cudaMemcpyAsync (device to device)");
  return launched(d, loom__cu_copy(d->stream, esize, dst, src, &m), "the copy kernel");
}

/* ---- elementwise ---------------------------------------------------------------------------- */

loom_status loom__cu_elementwise(void *dev, const loom__op_call *c) {
  loom__cu_device *d = dev;
  loom__gpu_ew e;
  loom_status s = loom__gpu_ew_setup(d->id, c, 1, &e);
  if (s || e.total == 0) return s;
  void *o = c->out[0].buffer;
  const void *a = c->op->n_inputs > 0 ? c->in[0].buffer : NULL,
             *b = c->op->n_inputs > 1 ? c->in[1].buffer : NULL;
  switch (e.kernel) {
    case LOOM__GPU_IOTA:
      return launched(
          d, loom__cu_iota(d->stream, (int)e.dtype, o, e.iota_off, e.total, e.iota_dim, e.iota_inner),
          "the iota kernel");
    case LOOM__GPU_SELECT:
      return launched(d, loom__cu_select(d->stream, loom_dtype_size(e.dtype), o, a, b, c->in[2].buffer, &e.m),
                      "the select kernel");
    case LOOM__GPU_CAST:
      return launched(d, loom__cu_cast(d->stream, (int)e.dtype, o, a, &e.m, (int)e.code), "the cast kernel");
    case LOOM__GPU_UNARY:
      return launched(d, loom__cu_unary(d->stream, (int)e.dtype, o, a, &e.m, e.code), "the unary kernel");
    case LOOM__GPU_BINARY:
      return launched(d, loom__cu_binary(d->stream, (int)e.dtype, o, a, b, &e.m, e.code),
                      "the binary kernel");
    case LOOM__GPU_COMPARE:
      break;
  }
  return launched(d, loom__cu_compare(d->stream, (int)e.dtype, o, a, b, &e.m, e.code), "the compare kernel");
}

/* ---- layout: every op is one strided copy (concat one per operand) ----------------------- */

static loom_status cu_copy(void *dev, int64_t elem, int32_t rank, const int64_t *dims, void *dst,
                           int64_t dst_off, const int64_t *dst_strides, void *src, int64_t src_off,
                           const int64_t *src_strides) {
  return loom__cu_copy_strided(dev, elem, rank, dims, dst, dst_off, dst_strides, src, src_off, src_strides);
}

loom_status loom__cu_layout(void *dev, const loom__op_call *c) {
  loom__cu_device *d = dev;
  return loom__layout_run(d, d->id, cu_copy, c);
}

/* ---- reductions ----------------------------------------------------------------------------- */

/* Reductions over at least this many elements with few enough outputs to fill the GPU with
 * blocks take a block each; the others a thread each. */
#define GROUP_MIN_REDUCED 1024
#define GROUP_MAX_OUTPUTS 65536

loom_status loom__cu_reduce_op(void *dev, const loom__op_call *c) {
  loom__cu_device *d = dev;
  lm_reduce m;
  int32_t kind;
  loom_status s = loom__gpu_reduce_setup(d->id, c, &m, &kind);
  if (s || m.n_out == 0) return s;
  int group = m.n_red >= GROUP_MIN_REDUCED && m.n_out <= GROUP_MAX_OUTPUTS;
  return launched(d,
                  loom__cu_reduce(d->stream, (int)c->in[0].type.dtype, c->in[0].buffer, c->out[0].buffer, &m,
                                  kind, group),
                  "the reduction kernel");
}

/* ---- topk ------------------------------------------------------------------------------------ */

loom_status loom__cu_topk_op(void *dev, const loom__op_call *c) {
  loom__cu_device *d = dev;
  lm_topk m;
  loom_status s = loom__gpu_topk_setup(d->id, c, &m);
  if (s || m.k == 0 || m.n_rows == 0) return s;
  return launched(d,
                  loom__cu_topk(d->stream, (int)c->in[0].type.dtype, c->in[0].buffer, c->out[0].buffer,
                                c->out[1].buffer, &m),
                  "the topk kernel");
}

/* ---- conv ------------------------------------------------------------------------------------- */

loom_status loom__cu_conv_op(void *dev, const loom__op_call *c) {
  loom__cu_device *d = dev;
  lm_conv m;
  loom_status s = loom__gpu_conv_setup(d->id, c, &m);
  if (s || m.total == 0) return s;
  return launched(d,
                  loom__cu_conv(d->stream, (int)c->in[0].type.dtype, c->in[0].buffer, c->in[1].buffer,
                                c->out[0].buffer, &m),
                  "the conv kernel");
}

/* ---- quantized values (docs/ir-quant.md) ----------------------------------------------------- */

loom_status loom__cu_quant_op(void *dev, const loom__op_call *c) {
  loom__cu_device *d = dev;
  lm_quant m;
  if (c->op->kind == LOOM_OP_QUANTIZE) {
    loom_status s = loom__gpu_quant_setup(c->op, &c->in[0], &c->out[0], &c->out[1], &m);
    if (s) return s;
    return launched(d, loom__cu_quantize(d->stream, c->out[0].buffer, c->out[1].buffer, c->in[0].buffer, &m),
                    "the quantize kernels");
  }
  loom_status s = loom__gpu_quant_setup(c->op, &c->out[0], &c->in[0], &c->in[1], &m);
  if (s || m.rows * m.len == 0) return s;
  /* the output is dense: its offset goes separately, the f32 strides are its own */
  int64_t o_off = m.f_off;
  m.f_off = 0;
  return launched(
      d, loom__cu_dequantize(d->stream, c->out[0].buffer, c->in[0].buffer, c->in[1].buffer, o_off, &m),
      "the dequantize kernel");
}
