/* quantize and dequantize (docs/ir-quant.md), as kernels/opencl/quant.cl: the f32 side, the q8
 * bytes or q4 nibbles (low nibble first, rows padded to a byte) and the scales as lm_quant
 * describes them. A thread owns whole rows of the quantized side, so no two write the same q4
 * byte. Divisions are __fdiv_rn, IEEE's correctly rounded float division, as NumPy's. */
#include "common.cuh"

namespace lc {

/* Row r's start on the f32 and quantized sides, and its index along a leading axis. */
__device__ inline void qt_row(const lm_quant &m, int64_t r, int64_t *fo, int64_t *qo, int64_t *ch) {
  *fo = m.f_off;
  *qo = m.q_off;
  *ch = 0;
  for (int64_t d = m.rank - 2; d >= 0; d--) {
    int64_t i = r % m.dims[d];
    r /= m.dims[d];
    *fo += i * m.fst[d];
    *qo += i * m.qst[d];
    if (d == m.axis) *ch = i;
  }
}

__device__ inline int qt_get(const uint8_t *q, int64_t e, int64_t q4) {
  if (!q4) return (int)(int8_t)q[e];
  int v = (e & 1) ? (q[e >> 1] >> 4) : (q[e >> 1] & 15);
  return v >= 8 ? v - 16 : v;
}

__global__ void dequantize_k(float *o, const uint8_t *q, const float *s, int64_t o_off, lm_quant m) {
  int64_t last = m.rank - 1, fs = m.fst[last], qs = m.qst[last];
  GRID_LOOP(r, m.rows) {
    int64_t fo, qo, ch;
    qt_row(m, r, &fo, &qo, &ch);
    float sc = s[m.s_off + ch * m.s_st];
    for (int64_t j = 0; j < m.len; j++) {
      float sj = m.axis == last ? s[m.s_off + j * m.s_st] : sc;
      o[o_off + fo + j * fs] = __fmul_rn((float)qt_get(q, qo + j * qs, m.q4), sj);
    }
  }
}

/* scale[c] = max |x| over channel c (NaN ignored, as fmaxf does) / qmax: a thread a channel. */
__global__ void absmax_k(float *s, const float *x, float qmax, lm_quant m) {
  int64_t last = m.rank - 1, fs = m.fst[last];
  GRID_LOOP(c, m.channels) {
    float a = 0.0f;
    for (int64_t r = 0; r < m.rows; r++) {
      int64_t fo, qo, ch;
      qt_row(m, r, &fo, &qo, &ch);
      if (m.axis >= 0 && m.axis != last && ch != c) continue;
      if (m.axis == last)
        a = fmaxf(a, fabsf(x[fo + c * fs]));
      else
        for (int64_t j = 0; j < m.len; j++) a = fmaxf(a, fabsf(x[fo + j * fs]));
    }
    s[m.s_off + c * m.s_st] = __fdiv_rn(a, qmax);
  }
}

/* q = x / scale rounded half to even (rintf), saturated to [lo, hi]; NaN and a 0 scale give 0.
 * q is dense: row r at q_off + r * qst[rank - 2]. */
__global__ void quantize_k(uint8_t *q, const float *x, const float *s, int lo, int hi, lm_quant m) {
  int64_t last = m.rank - 1, fs = m.fst[last];
  GRID_LOOP(r, m.rows) {
    int64_t fo, qo, ch;
    qt_row(m, r, &fo, &qo, &ch);
    float sc = s[m.s_off + ch * m.s_st];
    for (int64_t j = 0; j < m.len; j++) {
      float sj = m.axis == last ? s[m.s_off + j * m.s_st] : sc, v = 0.0f;
      if (sj != 0.0f) v = rintf(__fdiv_rn(x[fo + j * fs], sj));
      int iv = v != v ? 0 : v < (float)lo ? lo : v > (float)hi ? hi : (int)v;
      int64_t e = qo + j;
      if (!m.q4)
        q[e] = (uint8_t)(int8_t)iv;
      else if (j & 1)
        q[e >> 1] = (uint8_t)(q[e >> 1] | ((iv & 15) << 4));
      else
        q[e >> 1] = (uint8_t)(iv & 15);
    }
  }
}

}  // namespace lc

using namespace lc;

extern "C" cudaError_t loom__cu_dequantize(cudaStream_t stream, float *out, const void *q, const float *scale,
                                           int64_t out_off, const lm_quant *m) {
  dequantize_k<<<blocks_for(m->rows), kThreads, 0, stream>>>(out, (const uint8_t *)q, scale, out_off, *m);
  return launched();
}

extern "C" cudaError_t loom__cu_quantize(cudaStream_t stream, void *q, float *scale, const float *x,
                                         const lm_quant *m) {
  int lo = m->q4 ? -8 : -128, hi = m->q4 ? 7 : 127;
  absmax_k<<<blocks_for(m->channels), kThreads, 0, stream>>>(scale, x, (float)hi, *m);
  cudaError_t err = launched();
  if (err != cudaSuccess || m->rows * m->len == 0) return err;
  quantize_k<<<blocks_for(m->rows), kThreads, 0, stream>>>((uint8_t *)q, x, scale, lo, hi, *m);
  return launched();
}
