/* fft ifft rfft irfft on an OpenCL device, with numpy.fft's semantics (unnormalized forward,
 * 1/n on inverse; irfft reads n/2+1 bins and ignores the imaginary parts of the DC and
 * Nyquist bins), through clFFT where it takes the length (factors 2, 3, 5, 7, 11, 13) and the
 * direct DFT kernel (kernels/opencl/fft.cl) elsewhere.
 *
 * The transform runs along one axis of data seen as [outer, len, inner]. clFFT needs its
 * batch as one dimension with a distance, so:
 * - direct: a dense input at offset 0 with inner = 1 (the common case: the last axis) goes
 *   out-of-place from the input into the output (c2c and r2c only: c2r may overwrite its input,
 *   which the graph may still read);
 * - packed: otherwise the input is gathered into the scratch as [outer, inner, len] rows in
 *   clFFT's in-place layout (real rows padded to 2(n/2+1)), transformed in place, and scattered
 *   into the output. That row layout never takes more than the op's scratch (IR.md: 2x the
 *   output): complex rows are the output's size, padded real rows too, and an irfft's
 *   n/2+1 complex bins are at most twice its n reals.
 * clFFT's own temporary buffer takes the rest of the scratch (from a sub-buffer at the device's
 * alignment), else, without a limit, memory from the executor's meter; when neither has room the
 * DFT kernel runs instead. Plans are baked once per device and problem and cached until the
 * device closes.
 */
#include "backends/opencl/opencl_fft.h"
#include "backends/opencl/opencl_backend.h"

/* ---- the DFT kernel ------------------------------------------------------------------------- */

static loom_status run_dft(loom__cl_device *d, const loom__op_call *c, const loom__gpu_fft *p, cl_mem in,
                           int64_t in_off) {
  lm_dft m;
  loom__gpu_dft_setup(p, in_off, c->out[0].offset, &m);
  const char *name = p->kind == LOOM__FFT_R2C ? "dft_r2c" : p->kind == LOOM__FFT_C2R ? "dft_c2r" : "dft_c2c";
  loom_dtype dt = c->in[0].type.dtype;
  loom__cl_kernel *k;
  loom_status s = loom__cl_kernel_get(d, (int32_t)dt, name, &k);
  if (s == LOOM_ERR_UNSUPPORTED) return loom__gpu_unsupported(d->id, c->op, dt);
  if (s) return s;
  cl_mem o = (cl_mem)c->out[0].buffer;
  loom__cl_arg args[] = {LOOM__CL_ARG(in), LOOM__CL_ARG(o), LOOM__CL_ARG(m)};
  return loom__cl_launch(d, k, args, 3, m.total, d->is_cpu ? 1 : 64);
}

loom_status loom__cl_fourier(void *dev, const loom__op_call *c) {
  loom__cl_device *d = dev;
  loom__gpu_fft p;
  loom_status s = loom__gpu_fft_setup(d->id, c, &p);
  if (s) return s;
  if (p.outer * p.len_out * p.inner == 0) return LOOM_OK;
  bool ran = false;
  if (loom__cl_testing_fft_path() != 1) {
    s = loom__cl_clfft_run(d, c, &p, &ran);
    if (s || ran) return s;
  }
  if (p.merged) return run_dft(d, c, &p, (cl_mem)c->in[0].buffer, c->in[0].offset);
  /* Outer or inner dims that do not walk as one stride: the DFT reads a dense copy in the
   * scratch (the input is at most twice the output's bytes, the scratch's size). */
  const loom__dview *in = &c->in[0];
  int64_t bytes = p.in_es * p.outer * p.len_in * p.inner;
  if (bytes > c->scratch_bytes || !c->scratch)
    return loom__error(LOOM_ERR_INTERNAL, "%s: %s: the input does not fit the scratch", d->id,
                       loom_op_name(c->op->kind));
  s = loom__cl_copy(d, p.in_es, in->type.rank, in->type.dims, (cl_mem)c->scratch, 0, NULL, (cl_mem)in->buffer,
                    in->offset, in->strides);
  if (s) return s;
  p.is_o = p.len_in * p.inner;
  p.is_a = p.inner;
  p.is_i = 1;
  return run_dft(d, c, &p, (cl_mem)c->scratch, 0);
}
