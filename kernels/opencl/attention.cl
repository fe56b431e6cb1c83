/* Fused softmax attention (src/ir/attention.h): o = softmax(q kt * scale) v, the scores never
 * stored. A work-item per query row walks the keys once per run of ATT_DV output columns
 * with an online softmax: the running maximum mx and sum l, the row's partial output in
 * private memory multiplied by e^(old - new) when the maximum grows. Scores are recomputed per
 * run of columns, which costs d more multiply-adds per key and column run and keeps private
 * memory fixed for any dv. Operands are read in place through their strides; o is dense.
 * f32 only (the program of LOOM_DT f32 holds it).
 */
#if LOOM_DT == DT_F32
#define ATT_DV 32

__kernel void attention(__global const float *q, long q_off, long q_rs, long q_cs, __global const float *kt,
                        long k_off, long k_rs, long k_cs, __global const float *v, long v_off, long v_rs,
                        long v_cs, __global float *o, long o_off, long n, long m, long d, long dv,
                        float scale) {
  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {
    __global const float *qi = q + q_off + i * q_rs;
    for (long c0 = 0; c0 < dv; c0 += ATT_DV) {
      int nc = (int)min((long)ATT_DV, dv - c0);
      float acc[ATT_DV];
      for (int c = 0; c < ATT_DV; c++) acc[c] = 0.0f;
      float mx = -INFINITY, l = 0.0f;
      for (long j = 0; j < m; j++) {
        __global const float *kj = kt + k_off + j * k_cs;
        float s = 0.0f;
        for (long t = 0; t < d; t++) s = fma(qi[t * q_cs], kj[t * k_rs], s);
        s *= scale;
        /* fmax passes over a NaN score; its exp below makes the row NaN, as the ops would */
        float mn = fmax(mx, s);
        float corr = mx == -INFINITY ? 1.0f : exp(mx - mn);
        float p = exp(s - mn);
        l = l * corr + p;
        __global const float *vj = v + v_off + j * v_rs + c0 * v_cs;
        for (int c = 0; c < nc; c++) acc[c] = fma(p, vj[c * v_cs], acc[c] * corr);
        mx = mn;
      }
      for (int c = 0; c < nc; c++) o[o_off + i * dv + c0 + c] = acc[c] / l;
    }
  }
}
#endif
