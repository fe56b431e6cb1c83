/* conv (float dtypes): cross-correlation as ONNX/PyTorch, one thread per output element, x and w
 * read in place through their strides, so it needs no temporaries. Accumulates in float (f32,
 * f16, bf16) or double (f64), as the cpu backend's gemm does. */
#include "common.cuh"

namespace lc {

template <int DT>
__global__ void conv_k(const typename T<DT>::S *x, const typename T<DT>::S *w, typename T<DT>::S *out,
                       lm_conv m) {
  typedef typename T<DT>::DOTT A;
  GRID_LOOP(i, m.total) {
    int64_t t = i;
    int64_t p2 = t % m.out[2];
    t /= m.out[2];
    int64_t p1 = t % m.out[1];
    t /= m.out[1];
    int64_t p0 = t % m.out[0];
    t /= m.out[0];
    int64_t o = t % m.O, n = t / m.O;
    int64_t g = o / m.Og;
    A acc = 0;
    for (int64_t c = 0; c < m.Cg; c++) {
      int64_t xc = m.x_off + n * m.xs_n + (g * m.Cg + c) * m.xs_c;
      int64_t wc = m.w_off + o * m.ws_o + c * m.ws_c;
      for (int64_t k0 = 0; k0 < m.k[0]; k0++) {
        int64_t i0 = p0 * m.stride[0] - m.pad[0] + k0 * m.dil[0];
        if (i0 < 0 || i0 >= m.in[0]) continue;
        for (int64_t k1 = 0; k1 < m.k[1]; k1++) {
          int64_t i1 = p1 * m.stride[1] - m.pad[1] + k1 * m.dil[1];
          if (i1 < 0 || i1 >= m.in[1]) continue;
          for (int64_t k2 = 0; k2 < m.k[2]; k2++) {
            int64_t i2 = p2 * m.stride[2] - m.pad[2] + k2 * m.dil[2];
            if (i2 < 0 || i2 >= m.in[2]) continue;
            A xv = T<DT>::ld(x[xc + i0 * m.xs[0] + i1 * m.xs[1] + i2 * m.xs[2]]);
            A wv = T<DT>::ld(w[wc + k0 * m.ws[0] + k1 * m.ws[1] + k2 * m.ws[2]]);
            acc = fma(xv, wv, acc);
          }
        }
      }
    }
    out[m.o_off + i] = T<DT>::st(acc);
  }
}

}  // namespace lc

using namespace lc;

#define LAUNCH_CONV(DTV)                                                                                 \
  conv_k<DTV><<<blocks_for(m->total), kThreads, 0, stream>>>((const T<DTV>::S *)x, (const T<DTV>::S *)w, \
                                                             (T<DTV>::S *)out, *m)
#define CASE_CONV(DTV) LC_CASE(LAUNCH_CONV, DTV)

extern "C" cudaError_t loom__cu_conv(cudaStream_t stream, int dt, const void *x, const void *w, void *out,
                                     const lm_conv *m) {
  switch (dt) {
    CASE_CONV(DT_F16)
    CASE_CONV(DT_BF16)
    CASE_CONV(DT_F32)
    CASE_CONV(DT_F64)
    default:
      return cudaErrorNotSupported;
  }
  return launched();
}
