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
#include <string.h>

#include "backends/opencl/opencl_backend.h"
#include "backends/opencl/opencl_fft.h"

/* ---- the problem ------------------------------------------------------------------------ */

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

static loom_status fft_setup(const loom__cl_device *d, const loom__op_call *c, fft_problem *p) {
  const loom__op *op = c->op;
  const loom__dview *in = &c->in[0], *out = &c->out[0];
  memset(p, 0, sizeof *p);
  if (!loom__axis_normalize(op->attrs.axis, in->type.rank, &p->axis))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: axis %lld is out of range", d->id,
                       loom_op_name(op->kind), (long long)op->attrs.axis);
  p->kind = op->kind == LOOM_OP_FFT    ? FFT_FORWARD
            : op->kind == LOOM_OP_IFFT ? FFT_INVERSE
            : op->kind == LOOM_OP_RFFT ? FFT_R2C
                                       : FFT_C2R;
  loom_dtype want_in = out->type.dtype;
  if (p->kind == FFT_R2C) want_in = out->type.dtype == LOOM_C64 ? LOOM_F32 : LOOM_F64;
  if (p->kind == FFT_C2R) want_in = out->type.dtype == LOOM_F32 ? LOOM_C64 : LOOM_C128;
  loom_dtype t = in->type.dtype;
  bool ok = p->kind == FFT_R2C ? (t == LOOM_F32 || t == LOOM_F64) : (t == LOOM_C64 || t == LOOM_C128);
  if (!ok || t != want_in) return loom__cl_unsupported(d, op, t);
  p->dbl = t == LOOM_F64 || t == LOOM_C128;
  p->len_in = in->type.dims[p->axis];
  p->len_out = out->type.dims[p->axis];
  p->n = p->kind == FFT_C2R ? p->len_out : p->len_in;
  p->outer = p->inner = 1;
  for (int32_t k = 0; k < p->axis; k++) p->outer *= in->type.dims[k];
  for (int32_t k = p->axis + 1; k < in->type.rank; k++) p->inner *= in->type.dims[k];
  p->is_a = in->strides[p->axis];
  p->merged = merge_dims(in, 0, p->axis, &p->is_o) && merge_dims(in, p->axis + 1, in->type.rank, &p->is_i);
  p->in_es = loom_dtype_size(t);
  p->out_es = loom_dtype_size(out->type.dtype);
  return LOOM_OK;
}

/* ---- the DFT kernel ------------------------------------------------------------------------- */

static loom_status run_dft(loom__cl_device *d, const loom__op_call *c, const fft_problem *p, cl_mem in,
                           int64_t in_off) {
  lm_dft m;
  memset(&m, 0, sizeof m);
  m.kind = p->kind == FFT_FORWARD ? 0 : p->kind == FFT_INVERSE ? 1 : p->kind == FFT_R2C ? 2 : 3;
  m.n = p->n;
  m.len_in = p->len_in;
  m.len_out = p->len_out;
  m.outer = p->outer;
  m.inner = p->inner;
  m.total = p->outer * p->len_out * p->inner;
  m.is_o = p->is_o;
  m.is_a = p->is_a;
  m.is_i = p->is_i;
  m.in_off = in_off;
  m.out_off = c->out[0].offset;
  const char *name = p->kind == FFT_R2C ? "dft_r2c" : p->kind == FFT_C2R ? "dft_c2r" : "dft_c2c";
  loom_dtype dt = c->in[0].type.dtype;
  loom__cl_kernel *k;
  loom_status s = loom__cl_kernel_get(d, (int32_t)dt, name, &k);
  if (s == LOOM_ERR_UNSUPPORTED) return loom__cl_unsupported(d, c->op, dt);
  if (s) return s;
  cl_mem o = (cl_mem)c->out[0].buffer;
  loom__cl_arg args[] = {LOOM__CL_ARG(in), LOOM__CL_ARG(o), LOOM__CL_ARG(m)};
  return loom__cl_launch(d, k, args, 3, m.total, d->is_cpu ? 1 : 64);
}

loom_status loom__cl_fourier(loom__cl_device *d, const loom__op_call *c) {
  fft_problem p;
  loom_status s = fft_setup(d, c, &p);
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
