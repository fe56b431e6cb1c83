/* quantize and dequantize (docs/ir-quant.md), in the dtype-free program: the f32 side, the q8
 * bytes or q4 nibbles and the scales as lm_quant describes them. Each work-item owns whole rows
 * of the quantized side, so no two write the same q4 byte. Divisions run in double where the
 * device has fp64: a float quotient of doubles is the correctly rounded float quotient, as
 * NumPy's (OpenCL's float division may be 2.5 ulp off). */
#if LOOM_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define QDIV(a, b) ((float)((double)(a) / (double)(b)))
#else
#define QDIV(a, b) ((a) / (b))
#endif

/* Row r's start on the f32 and quantized sides, and its index along a leading axis. */
inline void qt_row(const lm_quant *m, long r, long *fo, long *qo, long *ch) {
  *fo = m->f_off;
  *qo = m->q_off;
  *ch = 0;
  for (long d = m->rank - 2; d >= 0; d--) {
    long i = r % m->dims[d];
    r /= m->dims[d];
    *fo += i * m->fst[d];
    *qo += i * m->qst[d];
    if (d == m->axis) *ch = i;
  }
}

inline int qt_get(__global const uchar *q, long e, long q4) {
  if (!q4) return (int)(char)q[e];
  int v = (e & 1) ? (q[e >> 1] >> 4) : (q[e >> 1] & 15);
  return v >= 8 ? v - 16 : v;
}

__kernel void dequantize(__global float *o, __global const uchar *q, __global const float *s, long o_off,
                         lm_quant m) {
  long last = m.rank - 1, fs = m.fst[last], qs = m.qst[last];
  for (long r = get_global_id(0); r < m.rows; r += get_global_size(0)) {
    long fo, qo, ch;
    qt_row(&m, r, &fo, &qo, &ch);
    float sc = s[m.s_off + ch * m.s_st];
    for (long j = 0; j < m.len; j++) {
      float sj = m.axis == last ? s[m.s_off + j * m.s_st] : sc;
      o[o_off + fo + j * fs] = (float)qt_get(q, qo + j * qs, m.q4) * sj;
    }
  }
}

/* scale[c] = max |x| over channel c (NaN ignored, as fmax does) / qmax: one work-item a channel. */
__kernel void quant_absmax(__global float *s, __global const float *x, float qmax, lm_quant m) {
  long last = m.rank - 1, fs = m.fst[last];
  for (long c = get_global_id(0); c < m.channels; c += get_global_size(0)) {
    float a = 0.0f;
    for (long r = 0; r < m.rows; r++) {
      long fo, qo, ch;
      qt_row(&m, r, &fo, &qo, &ch);
      if (m.axis >= 0 && m.axis != last && ch != c) continue;
      if (m.axis == last)
        a = fmax(a, fabs(x[fo + c * fs]));
      else
        for (long j = 0; j < m.len; j++) a = fmax(a, fabs(x[fo + j * fs]));
    }
    s[m.s_off + c * m.s_st] = QDIV(a, qmax);
  }
}

/* q = x / scale rounded half to even (rint), saturated to [lo, hi]; NaN and a 0 scale give 0.
 * q is dense: row r at q_off + r * qst[rank - 2] (bytes of q8, nibbles of q4). */
__kernel void quantize(__global uchar *q, __global const float *x, __global const float *s, int lo, int hi,
                       lm_quant m) {
  long last = m.rank - 1, fs = m.fst[last];
  for (long r = get_global_id(0); r < m.rows; r += get_global_size(0)) {
    long fo, qo, ch;
    qt_row(&m, r, &fo, &qo, &ch);
    float sc = s[m.s_off + ch * m.s_st];
    for (long j = 0; j < m.len; j++) {
      float sj = m.axis == last ? s[m.s_off + j * m.s_st] : sc, v = 0.0f;
      if (sj != 0.0f) v = rint(QDIV(x[fo + j * fs], sj));
      int iv = v != v ? 0 : v < (float)lo ? lo : v > (float)hi ? hi : (int)v;
      long e = qo + j;
      if (!m.q4)
        q[e] = (uchar)(char)iv;
      else if (j & 1)
        q[e >> 1] = (uchar)(q[e >> 1] | ((iv & 15) << 4));
      else
        q[e >> 1] = (uchar)(iv & 15);
    }
  }
}
