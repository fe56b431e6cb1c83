/* The cuda compute backend's insides, shared by its files:
 *   cuda_backend.c  the backend table: device state, memory, the stream, op dispatch
 *   cuda_status.c   CUDA errors -> Loom statuses (loom__cuda_status)
 *   cuda_kernels.c  elementwise, cast, iota, layout, select, reductions, topk, conv: the host
 *                   side (shapes and strides) of kernels/cuda/ (cuda_kernels.h)
 *   cuda_libs.c     cuBLAS and cuFFT, loaded at run time with dlopen
 *   cuda_blas.c     dot: cuBLAS (strided batched, transposes as flags), or the gemm kernel
 *   cuda_fft.c      fft ifft rfft irfft: cuFFT with plans cached, or the direct DFT kernel
 *   cuda_memory.c   CUDA memory for the HMM (cudaMalloc, cudaMallocManaged, pinned staging)
 *   cuda_device.c   discovery through the driver API (dlopen of libcuda.so.1)
 *
 * Linking: the CUDA runtime is linked statically (cudart_static loads libcuda.so.1 itself when
 * first called), and cuBLAS and cuFFT are opened with dlopen when a device opens, so every
 * binary built with the backend starts on a machine without the NVIDIA driver or the CUDA
 * libraries; such a machine simply has no CUDA device (discovery says why).
 *
 * Memory is the HMM's (cuda_memory.c): the executor hands run_op device pointers of buffers
 * allocated on the device's memory node. One stream per device, the HMM's for that node
 * (loom__hmm_cuda_stream): the HMM's copies and this backend's kernels, cuBLAS and cuFFT calls
 * all go on it, so they run in the order they were issued; run_op only enqueues, and the only
 * waits are synchronize and the HMM's reads.
 *
 * Threads: every entry makes the device current (cudaSetDevice is per thread) and run_op holds
 * the device's lock (the cuBLAS handle and the plan cache are per device).
 */
#ifndef LOOM_CUDA_BACKEND_H
#define LOOM_CUDA_BACKEND_H

#include <cuda_runtime_api.h>
#include <pthread.h>

#include "backends/backend.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/gpu/gpu_setup.h"

struct loom__cu_fft_cache;
struct loom__cu_fused_cache;

typedef struct loom__cu_device {
  char id[16];
  char *name; /* for messages */
  int ordinal;
  cudaStream_t stream; /* the HMM's for the device's node (not ours to destroy) */
  void *blas;          /* cublasHandle_t, made on the first dot that uses cuBLAS */
  int32_t sm_count;
  pthread_mutex_t lock; /* held by run_op */
  struct loom__cu_fft_cache *fft;
  struct loom__cu_fused_cache *fused; /* cuda_fused.c: fused ops' kernels by source text */
} loom__cu_device;

/* ---- errors (cuda_status.c) ------------------------------------------------------------------ */

/* Converts a CUDA runtime error at the boundary: cudaSuccess is LOOM_OK; otherwise the message
 * is "<call> failed: <cudaGetErrorName> (<cudaGetErrorString>)" and the status OUT_OF_MEMORY
 * (allocation failures), UNAVAILABLE (no driver, no device, a device that is gone or busy),
 * UNSUPPORTED (cudaErrorNotSupported), or INTERNAL. */
loom_status loom__cuda_status(cudaError_t err, const char *call);
/* The same, with "<id>: " in front. */
loom_status loom__cu_check(const loom__cu_device *d, cudaError_t err, const char *call);
/* Makes the device current on this thread. */
loom_status loom__cu_enter(const loom__cu_device *d);

/* ---- kernels (cuda_kernels.c) ---------------------------------------------------------------- */

/* A strided copy of `esize`-byte elements over dims (rank up to LM_COPY_RANK); NULL strides
 * are dense. */
loom_status loom__cu_copy_strided(loom__cu_device *d, int64_t esize, int32_t rank, const int64_t *dims,
                                  void *dst, int64_t dst_off, const int64_t *dst_strides, const void *src,
                                  int64_t src_off, const int64_t *src_strides);
/* The launchers of the families (backends/dispatch.h): dev is the backend's device. */
loom_status loom__cu_elementwise(void *dev, const loom__op_call *c);
loom_status loom__cu_layout(void *dev, const loom__op_call *c);
loom_status loom__cu_reduce_op(void *dev, const loom__op_call *c);
loom_status loom__cu_topk_op(void *dev, const loom__op_call *c);
loom_status loom__cu_conv_op(void *dev, const loom__op_call *c);
/* quantize dequantize (cuda_kernels.c, kernels/cuda/quant.cu, docs/ir-quant.md) */
loom_status loom__cu_quant_op(void *dev, const loom__op_call *c);

/* ---- dot and the transforms (cuda_blas.c, cuda_fft.c) --------------------------------------- */

loom_status loom__cu_dot(void *dev, const loom__op_call *c);
loom_status loom__cu_fourier(void *dev, const loom__op_call *c);
/* Destroys the device's cuBLAS handle and cuFFT plans (the device is current). */
void loom__cu_blas_release(loom__cu_device *d);
void loom__cu_fft_release(loom__cu_device *d);

/* ---- fused ops (cuda_fused.c) ------------------------------------------------------------------ */

/* Runs a fused op (docs/ir-fusion.md) whose body is `body`: in[k] is body parameter k's view, out[r]
 * body output r's (dense); compiles the generated kernel (backends/gpu/fused_codegen.h) with
 * NVRTC on first use, keeps it by its source text, and launches it on the device's stream. The
 * caller holds d->lock (run_op does). The scratch is not used. Errors: UNSUPPORTED where NVRTC
 * is missing or the generator cannot express the body (naming the op), INTERNAL with NVRTC's
 * log, CUDA errors naming the call. */
loom_status loom__cu_fused(loom__cu_device *d, const loom_graph *body, const loom__dview *in,
                           const loom__dview *out, void *scratch, int64_t scratch_bytes);
/* loom__cu_fused for a fused op as loom__dispatch calls a family's launcher. */
loom_status loom__cu_fused_op(void *dev, const loom__op_call *c);
/* Unloads the device's fused kernels (the device is current). */
void loom__cu_fused_release(loom__cu_device *d);
/* Whether NVRTC loaded, and why not ("" when it did). */
bool loom__cu_have_nvrtc(void);
const char *loom__cu_nvrtc_why(void);
/* Compiles CUDA source to PTX for compute capability cc (e.g. 90: the newest virtual
 * architecture NVRTC has at or below it); `label` starts messages. Needs no device (tests
 * compile generated kernels on machines without a GPU). *out_ptx is the caller's to free. */
loom_status loom__cu_fused_compile(const char *source, int cc, const char *label, char **out_ptx);

/* ---- the libraries, loaded at run time (cuda_libs.c) ----------------------------------------- */

/* The entry points of cuBLAS and cuFFT the backend calls, as the toolkit's headers declare
 * them (declared in cuda_libs.h, which includes those headers). NULL when the library is not
 * there: dot then runs the gemm kernel and the transforms the DFT kernel. */
struct loom__cublas_api;
struct loom__cufft_api;
const struct loom__cublas_api *loom__cublas(void);
const struct loom__cufft_api *loom__cufft(void);
/* Why cuBLAS or cuFFT is not available ("" when it is), for notes and the benchmark. */
const char *loom__cuda_libs_why(void);

/* ---- the HMM's side (cuda_memory.c) ---------------------------------------------------------- */

/* The stream the HMM uses for a CUDA node, made on first use (not retained: it lives as long as
 * the manager). Errors: INVALID_ARGUMENT (not a CUDA node), UNAVAILABLE (no driver, or the
 * device cannot be used), OUT_OF_MEMORY. */
struct loom_mem_manager;
loom_status loom__hmm_cuda_stream(struct loom_mem_manager *m, int32_t node, cudaStream_t *out_stream);

/* ---- testing (process-wide) ------------------------------------------------------------------ */

/* Which way dot and the transforms go: 0 as chosen by size and layout, 1 always Loom's own
 * kernels, 2 the library whenever it can run the problem. */
void loom__cuda_testing_set_paths(int32_t blas, int32_t fft);
int32_t loom__cu_testing_blas_path(void);
int32_t loom__cu_testing_fft_path(void);
/* The device's stream (tests and the benchmark time against it). */
cudaStream_t loom__cuda_stream(void *dev);

#endif
