/* Direct DFTs, for when cuFFT is absent or has no room for its work area: one thread per
 * output element, the input read in place (lm_dft), O(n) per element. The twiddle angle is
 * reduced exactly ((j * t) mod n) before the sine and cosine. Forward unnormalized, inverse
 * scaled by 1/n (numpy.fft); complex to real reads the first n/2+1 bins and ignores the
 * imaginary parts of the DC and Nyquist bins. Also the scale kernel that gives cuFFT's
 * unnormalized inverses numpy's 1/n. */
#include "common.cuh"

namespace lc {

template <class R>
struct cx;
template <>
struct cx<float> {
  typedef float2 t;
};
template <>
struct cx<double> {
  typedef double2 t;
};

template <class R>
__device__ inline typename cx<R>::t twiddle(int64_t j, int64_t t, int64_t n, R sign) {
  R s, c;
  sincos((R)6.28318530717958647692 * (R)((j * t) % n) / (R)n, &s, &c);
  return cmake<typename cx<R>::t, R>(c, sign * s);
}

/* Output index i -> (outer, t, inner), and the input's offset at bin 0. */
__device__ inline int64_t dft_index(const lm_dft &m, int64_t i, int64_t *t) {
  int64_t inn = i % m.inner, q = i / m.inner;
  *t = q % m.len_out;
  return m.in_off + (q / m.len_out) * m.is_o + inn * m.is_i;
}

/* kind 0: forward, 1: inverse (scaled). */
template <class R>
__global__ void dft_c2c_k(const typename cx<R>::t *in, typename cx<R>::t *out, lm_dft m) {
  typedef typename cx<R>::t V;
  GRID_LOOP(i, m.total) {
    int64_t t, base = dft_index(m, i, &t);
    R sign = m.kind == 1 ? (R)1 : (R)-1;
    V acc = cmake<V, R>(0, 0);
    for (int64_t j = 0; j < m.n; j++)
      acc = cadd(acc, cmul(in[base + j * m.is_a], twiddle<R>(j, t, m.n, sign)));
    if (m.kind == 1) {
      acc.x /= (R)m.n;
      acc.y /= (R)m.n;
    }
    out[m.out_off + i] = acc;
  }
}

template <class R>
__global__ void dft_r2c_k(const R *in, typename cx<R>::t *out, lm_dft m) {
  typedef typename cx<R>::t V;
  GRID_LOOP(i, m.total) {
    int64_t t, base = dft_index(m, i, &t);
    V acc = cmake<V, R>(0, 0);
    for (int64_t j = 0; j < m.n; j++) {
      V w = twiddle<R>(j, t, m.n, (R)-1);
      R x = in[base + j * m.is_a];
      acc.x += x * w.x;
      acc.y += x * w.y;
    }
    out[m.out_off + i] = acc;
  }
}

template <class R>
__global__ void dft_c2r_k(const typename cx<R>::t *in, R *out, lm_dft m) {
  typedef typename cx<R>::t V;
  GRID_LOOP(i, m.total) {
    int64_t t, base = dft_index(m, i, &t);
    int64_t n = m.n;
    R acc = in[base].x;
    for (int64_t j = 1; j <= (n - 1) / 2; j++) {
      V x = in[base + j * m.is_a];
      V w = twiddle<R>(j, t, n, (R)1);
      acc += (R)2 * (x.x * w.x - x.y * w.y);
    }
    if (n % 2 == 0) acc += in[base + (n / 2) * m.is_a].x * ((t & 1) ? (R)-1 : (R)1);
    out[m.out_off + i] = acc / (R)n;
  }
}

template <class R>
__global__ void scale_k(R *o, int64_t n, R f) {
  GRID_LOOP(i, n) o[i] *= f;
}

}  // namespace lc

using namespace lc;

extern "C" cudaError_t loom__cu_dft(cudaStream_t stream, int dt, const void *in, void *out, const lm_dft *m) {
  unsigned blocks = blocks_for(m->total);
  bool c2r = m->kind == 3;
  switch (dt) {
    case DT_C64:
      if (c2r)
        dft_c2r_k<float><<<blocks, kThreads, 0, stream>>>((const float2 *)in, (float *)out, *m);
      else
        dft_c2c_k<float><<<blocks, kThreads, 0, stream>>>((const float2 *)in, (float2 *)out, *m);
      break;
    case DT_C128:
      if (c2r)
        dft_c2r_k<double><<<blocks, kThreads, 0, stream>>>((const double2 *)in, (double *)out, *m);
      else
        dft_c2c_k<double><<<blocks, kThreads, 0, stream>>>((const double2 *)in, (double2 *)out, *m);
      break;
    case DT_F32:
      dft_r2c_k<float><<<blocks, kThreads, 0, stream>>>((const float *)in, (float2 *)out, *m);
      break;
    case DT_F64:
      dft_r2c_k<double><<<blocks, kThreads, 0, stream>>>((const double *)in, (double2 *)out, *m);
      break;
    default:
      return cudaErrorNotSupported;
  }
  return launched();
}

extern "C" cudaError_t loom__cu_scale(cudaStream_t stream, int dbl, void *out, int64_t n, double f) {
  if (n <= 0) return cudaSuccess;
  if (dbl)
    scale_k<double><<<blocks_for(n), kThreads, 0, stream>>>((double *)out, n, f);
  else
    scale_k<float><<<blocks_for(n), kThreads, 0, stream>>>((float *)out, n, (float)f);
  return launched();
}
