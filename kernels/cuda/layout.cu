/* Strided copies by element size, which materialize every layout op (reshape of strided data,
 * transpose, broadcast, slice, concat, tile) and pack operands for the libraries, and zero
 * fills. One thread per element: the flat position decomposes over the copy's nest (up to
 * LM_COPY_RANK dims, coalesced by the host), and neighbouring threads write neighbouring
 * destination elements of the innermost dimension. */
#include "common.cuh"

namespace lc {

struct e16 {
  uint64_t x, y;
};
template <int N>
struct elem;
template <>
struct elem<1> {
  typedef uint8_t t;
};
template <>
struct elem<2> {
  typedef uint16_t t;
};
template <>
struct elem<4> {
  typedef uint32_t t;
};
template <>
struct elem<8> {
  typedef uint64_t t;
};
template <>
struct elem<16> {
  typedef e16 t;
};

__device__ inline void copy_offsets(const lm_copy &m, int64_t p, int64_t *od, int64_t *os) {
  int64_t d_off = m.dst_off, s_off = m.src_off;
  for (int64_t d = m.rank - 1; d >= 0; d--) {
    int64_t q = p % m.dims[d];
    p /= m.dims[d];
    d_off += q * m.dst[d];
    s_off += q * m.src[d];
  }
  *od = d_off;
  *os = s_off;
}

template <class E>
__global__ void copy_k(E *dst, const E *src, lm_copy m) {
  GRID_LOOP(i, m.total) {
    int64_t od, os;
    copy_offsets(m, i, &od, &os);
    dst[od] = src[os];
  }
}

template <class E>
__global__ void zero_k(E *dst, lm_copy m) {
  GRID_LOOP(i, m.total) {
    int64_t od, os;
    copy_offsets(m, i, &od, &os);
    dst[od] = 0;
  }
}

/* The indices of a loop's merged candidates (loom__merge_index_fn): in place over pos. */
__global__ void merge_index_k(int64_t *pos, const int64_t *acc, const int64_t *piece, int64_t total, int64_t k,
                              int64_t inner, int64_t lo) {
  GRID_LOOP(e, total) {
    int64_t row = e / (k * inner) * k * inner + e % inner, p = pos[e];
    pos[e] = p < k ? acc[row + p * inner] : piece[row + (p - k) * inner] + lo;
  }
}

}  // namespace lc

using namespace lc;

extern "C" cudaError_t loom__cu_merge_index(cudaStream_t stream, int64_t *pos, const int64_t *acc,
                                            const int64_t *piece, int64_t total, int64_t k, int64_t inner,
                                            int64_t lo) {
  merge_index_k<<<blocks_for(total), kThreads, 0, stream>>>(pos, acc, piece, total, k, inner, lo);
  return launched();
}

#define LAUNCH_COPY(N) \
  copy_k<elem<N>::t>   \
      <<<blocks_for(m->total), kThreads, 0, stream>>>((elem<N>::t *)dst, (const elem<N>::t *)src, *m)

extern "C" cudaError_t loom__cu_copy(cudaStream_t stream, int64_t esize, void *dst, const void *src,
                                     const lm_copy *m) {
  switch (esize) {
    LC_CASE(LAUNCH_COPY, 1)
    LC_CASE(LAUNCH_COPY, 2)
    LC_CASE(LAUNCH_COPY, 4)
    LC_CASE(LAUNCH_COPY, 8)
    LC_CASE(LAUNCH_COPY, 16)
    default:
      return cudaErrorNotSupported;
  }
  return launched();
}

#define LAUNCH_ZERO(N) \
  zero_k<elem<N>::t><<<blocks_for(m->total), kThreads, 0, stream>>>((elem<N>::t *)dst, *m)

extern "C" cudaError_t loom__cu_zero(cudaStream_t stream, int64_t esize, void *dst, const lm_copy *m) {
  switch (esize) {
    LC_CASE(LAUNCH_ZERO, 4)
    LC_CASE(LAUNCH_ZERO, 8)
    default:
      return cudaErrorNotSupported;
  }
  return launched();
}
