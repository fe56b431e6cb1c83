/* topk of the program's dtype: one work-item per row keeps a bounded heap of the k best
 * entries (worst at the root) directly in the row's place in the two outputs, so it needs no
 * temporary memory, then sorts it best first. The order is the cpu backend's
 * (src/backends/cpu/cpu_topk.c): NaN ranks above every number, ties go to the lower index.
 */
#if defined(IS_INT) || defined(IS_FLOAT)

inline bool tk_gt(C a, C b) {
  if (ISNAN(a)) return !ISNAN(b);
  return !ISNAN(b) && a > b;
}

inline bool tk_better(C av, long ai, C bv, long bi, long largest) {
  bool ahead = largest ? tk_gt(av, bv) : tk_gt(bv, av);
  bool behind = largest ? tk_gt(bv, av) : tk_gt(av, bv);
  return ahead || (!behind && ai < bi);
}

/* Restores the heap (worst at the root) below position at; entries are step apart. */
inline void tk_sift(__global S *hv, __global long *hi, long step, long size, long at, long largest) {
  S es = hv[at * step];
  long ei = hi[at * step];
  C ev = LD(es);
  for (;;) {
    long c = 2 * at + 1;
    if (c >= size) break;
    if (c + 1 < size && tk_better(LD(hv[c * step]), hi[c * step], LD(hv[(c + 1) * step]), hi[(c + 1) * step], largest)) c++;
    if (!tk_better(ev, ei, LD(hv[c * step]), hi[c * step], largest)) break;
    hv[at * step] = hv[c * step];
    hi[at * step] = hi[c * step];
    at = c;
  }
  hv[at * step] = es;
  hi[at * step] = ei;
}

__kernel void topk_rows(__global const S *in, __global S *vals, __global long *idx, lm_topk m) {
  GRID_LOOP(r, m.n_rows) {
    __global const S *x = in + m.in_off + nest_offset(r, m.rr, m.rdims, m.rst);
    long o = (r / m.inner) * m.k * m.inner + r % m.inner;
    __global S *hv = vals + m.v_off + o;
    __global long *hi = idx + m.i_off + o;
    long k = m.k, s = m.stride, step = m.inner, size = 0;
    for (long j = 0; j < m.n; j++) {
      S raw = x[j * s];
      if (size < k) {
        hv[size * step] = raw;
        hi[size * step] = j;
        if (++size == k)
          for (long p = k / 2 - 1; p >= 0; p--) tk_sift(hv, hi, step, k, p, m.largest);
      } else if (tk_better(LD(raw), j, LD(hv[0]), hi[0], m.largest)) {
        hv[0] = raw;
        hi[0] = j;
        tk_sift(hv, hi, step, k, 0, m.largest);
      }
    }
    for (long end = k - 1; end > 0; end--) {
      S tv = hv[0];
      long ti = hi[0];
      hv[0] = hv[end * step];
      hi[0] = hi[end * step];
      hv[end * step] = tv;
      hi[end * step] = ti;
      tk_sift(hv, hi, step, end, 0, m.largest);
    }
  }
}
#endif
