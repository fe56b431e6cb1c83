/* dot where cuBLAS does not run it (integers, bool, layouts cuBLAS cannot take as they are, or
 * no cuBLAS): a batch of 16x16-tiled products reading both operands in place through their
 * strides (lm_gemm). Accumulates as the cpu backend does: float for f32/f16/bf16, double for
 * f64, integers wrap (in 32 bits, 64 for i64), bool is OR of ANDs, complex in its own type. */
#include "common.cuh"

namespace lc {

constexpr int kTile = 16;

template <int DT>
__device__ inline void mac(typename T<DT>::DOTT &acc, typename T<DT>::C x, typename T<DT>::C y) {
  typedef typename T<DT>::DOTT A;
  constexpr int K = T<DT>::kind;
  if constexpr (K == K_BOOL)
    acc |= (A)(x & y);
  else if constexpr (K == K_CPX)
    acc = cadd(acc, cmul(x, y));
  else if constexpr (K == K_FLOAT)
    acc = fma((A)x, (A)y, acc);
  else
    acc += (A)x * (A)y;
}

template <int DT>
__device__ inline typename T<DT>::S dot_store(typename T<DT>::DOTT acc) {
  if constexpr (T<DT>::kind == K_BOOL)
    return acc != 0;
  else if constexpr (T<DT>::kind == K_CPX || T<DT>::kind == K_FLOAT)
    return T<DT>::st(acc);
  else
    return (typename T<DT>::S)acc;
}

template <int DT>
__global__ void gemm_k(const typename T<DT>::S *a, const typename T<DT>::S *b, typename T<DT>::S *c,
                       lm_gemm m) {
  typedef typename T<DT>::C C;
  typedef typename T<DT>::DOTT A;
  __shared__ C ta[kTile][kTile];
  __shared__ C tb[kTile][kTile];
  int lx = threadIdx.x, ly = threadIdx.y;
  int64_t col = (int64_t)blockIdx.x * kTile + lx, row = (int64_t)blockIdx.y * kTile + ly;
  const C zero{};
  for (int64_t bi = blockIdx.z; bi < m.batch; bi += gridDim.z) {
    int64_t ao = m.a_off + nest_offset(bi, m.nb, m.bdims, m.a_bs);
    int64_t bo = m.b_off + nest_offset(bi, m.nb, m.bdims, m.b_bs);
    A acc{};
    for (int64_t k0 = 0; k0 < m.k; k0 += kTile) {
      int64_t ka = k0 + lx, kb = k0 + ly;
      ta[ly][lx] = (row < m.n && ka < m.k) ? T<DT>::ld(a[ao + row * m.a_rs + ka * m.a_cs]) : zero;
      tb[ly][lx] = (kb < m.k && col < m.m) ? T<DT>::ld(b[bo + kb * m.b_rs + col * m.b_cs]) : zero;
      __syncthreads();
      for (int t = 0; t < kTile; t++) mac<DT>(acc, ta[ly][t], tb[t][lx]);
      __syncthreads();
    }
    if (row < m.n && col < m.m) c[m.c_off + (bi * m.n + row) * m.m + col] = dot_store<DT>(acc);
  }
}

}  // namespace lc

using namespace lc;

#define LAUNCH_GEMM(DTV)                                                                           \
  gemm_k<DTV><<<grid, dim3(kTile, kTile), 0, stream>>>((const T<DTV>::S *)a, (const T<DTV>::S *)b, \
                                                       (T<DTV>::S *)c, *m)
#define CASE_GEMM(DTV) LC_CASE(LAUNCH_GEMM, DTV)

extern "C" cudaError_t loom__cu_gemm(cudaStream_t stream, int dt, const void *a, const void *b, void *c,
                                     const lm_gemm *m) {
  /* Grid dims y and z stop at 65535: larger products loop over the batch (z); rows beyond
   * 65535 tiles (a million rows) are the host's to refuse. */
  dim3 grid((unsigned)((m->m + kTile - 1) / kTile), (unsigned)((m->n + kTile - 1) / kTile),
            (unsigned)(m->batch < 65535 ? m->batch : 65535));
  switch (dt) {
    CASE_GEMM(DT_BOOL)
    CASE_GEMM(DT_I8)
    CASE_GEMM(DT_U8)
    CASE_GEMM(DT_I16)
    CASE_GEMM(DT_I32)
    CASE_GEMM(DT_I64)
    CASE_GEMM(DT_F16)
    CASE_GEMM(DT_BF16)
    CASE_GEMM(DT_F32)
    CASE_GEMM(DT_F64)
    CASE_GEMM(DT_C64)
    CASE_GEMM(DT_C128)
    default:
      return cudaErrorNotSupported;
  }
  return launched();
}
