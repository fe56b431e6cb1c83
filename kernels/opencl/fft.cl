/* Direct DFTs of the program's dtype, for lengths clFFT does not take (prime factors above
 * 13) or when clFFT is absent: one work-item per output element, the input read in place
 * (lm_dft), O(n) per element. The twiddle angle is reduced exactly ((j * t) mod n) before the
 * sine and cosine. Forward unnormalized, inverse scaled by 1/n (numpy.fft); complex to real
 * reads the first n/2+1 bins and ignores the imaginary parts of the DC and Nyquist bins.
 */
#if defined(IS_COMPLEX) || LOOM_DT == DT_F32 || LOOM_DT == DT_F64
#if defined(IS_COMPLEX)
#define RT R
#else
#define RT C
#endif
#if LOOM_DT == DT_F32 || LOOM_DT == DT_C64
#define CT float2
#define TWO_PI 6.28318530717958647692f
#else
#define CT double2
#define TWO_PI 6.28318530717958647692
#endif

inline CT twiddle(long j, long t, long n, RT sign) {
  RT c, s = sincos(TWO_PI * (RT)((j * t) % n) / (RT)n, &c);
  return (CT)(c, sign * s);
}

/* Output index i -> (outer, t, inner) and the input's offset at bin 0. */
#define DFT_INDEX(m, i, t, base)                                  \
  long inn_ = (i) % (m).inner, q_ = (i) / (m).inner;             \
  long t = q_ % (m).len_out, ou_ = q_ / (m).len_out;             \
  long base = (m).in_off + ou_ * (m).is_o + inn_ * (m).is_i

#if defined(IS_COMPLEX)
/* kind 0: forward, 1: inverse (scaled). */
__kernel void dft_c2c(__global const S *in, __global S *out, lm_dft m) {
  GRID_LOOP(i, m.total) {
    DFT_INDEX(m, i, t, base);
    RT sign = m.kind == 1 ? (RT)1 : (RT)-1;
    CT acc = (CT)0;
    for (long j = 0; j < m.n; j++) {
      CT x = in[base + j * m.is_a];
      acc += CMUL(CT, x, twiddle(j, t, m.n, sign));
    }
    if (m.kind == 1) acc /= (RT)m.n;
    out[m.out_off + i] = acc;
  }
}

/* Multiplies total complex (or real: scale_real) elements by f: the 1/n of double-precision
 * inverse transforms, which clFFT only scales by a float. */
__kernel void scale_complex(__global S *o, long off, long total, R f) {
  GRID_LOOP(i, total) o[off + i] *= f;
}
__kernel void scale_real(__global R *o, long off, long total, R f) {
  GRID_LOOP(i, total) o[off + i] *= f;
}

__kernel void dft_c2r(__global const S *in, __global RT *out, lm_dft m) {
  GRID_LOOP(i, m.total) {
    DFT_INDEX(m, i, t, base);
    long n = m.n;
    RT acc = in[base].x;
    long last = (n - 1) / 2;
    for (long j = 1; j <= last; j++) {
      CT x = in[base + j * m.is_a];
      CT w = twiddle(j, t, n, (RT)1);
      acc += (RT)2 * (x.x * w.x - x.y * w.y);
    }
    if (n % 2 == 0) acc += in[base + (n / 2) * m.is_a].x * ((t & 1) ? (RT)-1 : (RT)1);
    out[m.out_off + i] = acc / (RT)n;
  }
}
#else
__kernel void dft_r2c(__global const S *in, __global CT *out, lm_dft m) {
  GRID_LOOP(i, m.total) {
    DFT_INDEX(m, i, t, base);
    CT acc = (CT)0;
    for (long j = 0; j < m.n; j++) acc += in[base + j * m.is_a] * twiddle(j, t, m.n, (RT)-1);
    out[m.out_off + i] = acc;
  }
}
#endif
#endif
