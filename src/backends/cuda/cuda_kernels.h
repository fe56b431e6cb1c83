/* The launchers of the cuda backend's kernels (kernels/cuda/), callable from C.
 *
 * Each one enqueues one kernel on `stream` and returns cudaGetLastError() after the launch (a
 * launch error; what goes wrong on the device surfaces at the stream's next synchronization),
 * or cudaErrorNotSupported for a dtype it has no kernel for (the host code checks the op's
 * table first, so that is a bug, reported as such). Buffers are the base pointers of
 * cudaMalloc'd memory; the element offsets travel in the meta structs, which are the opencl
 * backend's (backends/gpu/gpu_meta.h: plain int64 members, the same layout in C and
 * C++), so both GPU backends set up shapes and strides alike. Nothing here waits.
 */
#ifndef LOOM_CUDA_KERNELS_H
#define LOOM_CUDA_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "backends/gpu/gpu_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dt, from and to are loom_dtype values; op and kind LM_* codes. */
cudaError_t loom__cu_unary(cudaStream_t stream, int dt, void *out, const void *a, const lm_ew *m, int op);
cudaError_t loom__cu_binary(cudaStream_t stream, int dt, void *out, const void *a, const void *b,
                            const lm_ew *m, int op);
/* Compare and logic ops: a bool output. */
cudaError_t loom__cu_compare(cudaStream_t stream, int dt, void *out, const void *a, const void *b,
                             const lm_ew *m, int op);
cudaError_t loom__cu_cast(cudaStream_t stream, int from, void *out, const void *a, const lm_ew *m, int to);
/* out[off + i] = (i / inner) % dim for i < total, converted as an integer is. */
cudaError_t loom__cu_iota(cudaStream_t stream, int dt, void *out, int64_t off, int64_t total, int64_t dim,
                          int64_t inner);
/* Element sizes 1, 2, 4, 8, 16. */
cudaError_t loom__cu_select(cudaStream_t stream, int64_t esize, void *out, const void *cond, const void *a,
                            const void *b, const lm_ew *m);
cudaError_t loom__cu_copy(cudaStream_t stream, int64_t esize, void *dst, const void *src, const lm_copy *m);
/* Element sizes 4 and 8 (lm_copy's dst side). */
cudaError_t loom__cu_zero(cudaStream_t stream, int64_t esize, void *dst, const lm_copy *m);
/* dequantize into dense f32 `out` (element offset out_off) and quantize into dense q and its
 * scale, over lm_quant (docs/ir-quant.md; kernels/cuda/quant.cu). */
cudaError_t loom__cu_dequantize(cudaStream_t stream, float *out, const void *q, const float *scale,
                                int64_t out_off, const lm_quant *m);
cudaError_t loom__cu_quantize(cudaStream_t stream, void *q, float *scale, const float *x, const lm_quant *m);
/* A loop's merged candidates' indices (backend.h, loom__merge_index_fn), offsets applied. */
cudaError_t loom__cu_merge_index(cudaStream_t stream, int64_t *pos, const int64_t *acc, const int64_t *piece,
                                 int64_t total, int64_t k, int64_t inner, int64_t lo);
/* group: one block per output (long reductions), else one thread per output. */
cudaError_t loom__cu_reduce(cudaStream_t stream, int dt, const void *in, void *out, const lm_reduce *m,
                            int kind, int group);
cudaError_t loom__cu_topk(cudaStream_t stream, int dt, const void *in, void *vals, int64_t *idx,
                          const lm_topk *m);
cudaError_t loom__cu_conv(cudaStream_t stream, int dt, const void *x, const void *w, void *out,
                          const lm_conv *m);
/* The tiled product for what cuBLAS does not run (integers, bool, strided layouts). */
cudaError_t loom__cu_gemm(cudaStream_t stream, int dt, const void *a, const void *b, void *c,
                          const lm_gemm *m);
/* The direct DFT (lm_dft.kind 0..3) of input dtype dt. */
cudaError_t loom__cu_dft(cudaStream_t stream, int dt, const void *in, void *out, const lm_dft *m);
/* Multiplies n reals (f32 when dbl is 0, else f64) at out by f: the 1/n of cuFFT's inverses. */
cudaError_t loom__cu_scale(cudaStream_t stream, int dbl, void *out, int64_t n, double f);

#ifdef __cplusplus
}
#endif

#endif
