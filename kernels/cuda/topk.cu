/* topk: one thread per row keeps a bounded heap of the k best entries (worst at the root)
 * directly in the row's place in the two outputs, so it needs no temporary memory, then sorts
 * it best first. The order is the cpu backend's (src/backends/cpu/cpu_topk.c): NaN ranks above
 * every number, ties go to the lower index. Rows are independent, so a kNN's 20000 rows keep
 * the GPU busy; one long row runs on one thread (correct, not fast). */
#include "common.cuh"

namespace lc {

template <class C>
__device__ inline bool tk_gt(C a, C b) {
  if (is_nan(a)) return !is_nan(b);
  return !is_nan(b) && a > b;
}

template <class C>
__device__ inline bool tk_better(C av, int64_t ai, C bv, int64_t bi, int64_t largest) {
  bool ahead = largest ? tk_gt(av, bv) : tk_gt(bv, av);
  bool behind = largest ? tk_gt(bv, av) : tk_gt(av, bv);
  return ahead || (!behind && ai < bi);
}

/* Restores the heap (worst at the root) below position at; entries are step apart. */
template <int DT>
__device__ void tk_sift(typename T<DT>::S *hv, int64_t *hi, int64_t step, int64_t size, int64_t at,
                        int64_t largest) {
  typedef typename T<DT>::S S;
  S es = hv[at * step];
  int64_t ei = hi[at * step];
  typename T<DT>::C ev = T<DT>::ld(es);
  for (;;) {
    int64_t c = 2 * at + 1;
    if (c >= size) break;
    if (c + 1 < size && tk_better(T<DT>::ld(hv[c * step]), hi[c * step], T<DT>::ld(hv[(c + 1) * step]),
                                  hi[(c + 1) * step], largest))
      c++;
    if (!tk_better(ev, ei, T<DT>::ld(hv[c * step]), hi[c * step], largest)) break;
    hv[at * step] = hv[c * step];
    hi[at * step] = hi[c * step];
    at = c;
  }
  hv[at * step] = es;
  hi[at * step] = ei;
}

template <int DT>
__global__ void topk_k(const typename T<DT>::S *in, typename T<DT>::S *vals, int64_t *idx, lm_topk m) {
  typedef typename T<DT>::S S;
  GRID_LOOP(r, m.n_rows) {
    const S *x = in + m.in_off + nest_offset(r, m.rr, m.rdims, m.rst);
    int64_t o = (r / m.inner) * m.k * m.inner + r % m.inner;
    S *hv = vals + m.v_off + o;
    int64_t *hi = idx + m.i_off + o;
    int64_t k = m.k, s = m.stride, step = m.inner, size = 0;
    for (int64_t j = 0; j < m.n; j++) {
      S raw = x[j * s];
      if (size < k) {
        hv[size * step] = raw;
        hi[size * step] = j;
        if (++size == k)
          for (int64_t p = k / 2 - 1; p >= 0; p--) tk_sift<DT>(hv, hi, step, k, p, m.largest);
      } else if (tk_better(T<DT>::ld(raw), j, T<DT>::ld(hv[0]), hi[0], m.largest)) {
        hv[0] = raw;
        hi[0] = j;
        tk_sift<DT>(hv, hi, step, k, 0, m.largest);
      }
    }
    for (int64_t end = k - 1; end > 0; end--) {
      S tv = hv[0];
      int64_t ti = hi[0];
      hv[0] = hv[end * step];
      hi[0] = hi[end * step];
      hv[end * step] = tv;
      hi[end * step] = ti;
      tk_sift<DT>(hv, hi, step, end, 0, m.largest);
    }
  }
}

}  // namespace lc

using namespace lc;

/* 64 threads a block: a row's heap is sifted through global memory, one thread each. */
#define LAUNCH_TOPK(DTV)                                                                                    \
  topk_k<DTV><<<(unsigned)((m->n_rows + 63) / 64 < kMaxBlocks ? (m->n_rows + 63) / 64 : kMaxBlocks), 64, 0, \
                stream>>>((const T<DTV>::S *)in, (T<DTV>::S *)vals, idx, *m)
#define CASE_TOPK(DTV) LC_CASE(LAUNCH_TOPK, DTV)

extern "C" cudaError_t loom__cu_topk(cudaStream_t stream, int dt, const void *in, void *vals, int64_t *idx,
                                     const lm_topk *m) {
  switch (dt) {
    CASE_TOPK(DT_I8)
    CASE_TOPK(DT_U8)
    CASE_TOPK(DT_I16)
    CASE_TOPK(DT_I32)
    CASE_TOPK(DT_I64)
    CASE_TOPK(DT_F16)
    CASE_TOPK(DT_BF16)
    CASE_TOPK(DT_F32)
    CASE_TOPK(DT_F64)
    default:
      return cudaErrorNotSupported;
  }
  return launched();
}
