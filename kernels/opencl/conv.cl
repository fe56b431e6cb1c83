/* conv of the program's (float) dtype: cross-correlation as ONNX/PyTorch, one work-item per
 * output element, x and w read in place through their strides, so it needs no temporaries.
 * Accumulates in float (f32, f16, bf16) or double (f64), as the cpu backend's gemm does.
 */
#if defined(IS_FLOAT)
__kernel void conv(__global const S *x, __global const S *w, __global S *out, lm_conv m) {
  GRID_LOOP(i, m.total) {
    long t = i;
    long p2 = t % m.out[2];
    t /= m.out[2];
    long p1 = t % m.out[1];
    t /= m.out[1];
    long p0 = t % m.out[0];
    t /= m.out[0];
    long o = t % m.O, n = t / m.O;
    long g = o / m.Og;
    DOTT acc = 0;
    for (long c = 0; c < m.Cg; c++) {
      long xc = m.x_off + n * m.xs_n + (g * m.Cg + c) * m.xs_c;
      long wc = m.w_off + o * m.ws_o + c * m.ws_c;
      for (long k0 = 0; k0 < m.k[0]; k0++) {
        long i0 = p0 * m.stride[0] - m.pad[0] + k0 * m.dil[0];
        if (i0 < 0 || i0 >= m.in[0]) continue;
        for (long k1 = 0; k1 < m.k[1]; k1++) {
          long i1 = p1 * m.stride[1] - m.pad[1] + k1 * m.dil[1];
          if (i1 < 0 || i1 >= m.in[1]) continue;
          for (long k2 = 0; k2 < m.k[2]; k2++) {
            long i2 = p2 * m.stride[2] - m.pad[2] + k2 * m.dil[2];
            if (i2 < 0 || i2 >= m.in[2]) continue;
            C xv = LD(x[xc + i0 * m.xs[0] + i1 * m.xs[1] + i2 * m.xs[2]]);
            C wv = LD(w[wc + k0 * m.ws[0] + k1 * m.ws[1] + k2 * m.ws[2]]);
            acc = fma((DOTT)xv, (DOTT)wv, acc);
          }
        }
      }
    }
    out[m.o_off + i] = ST(acc);
  }
}
#endif
