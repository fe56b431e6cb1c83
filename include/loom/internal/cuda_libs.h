/* NOT STABLE API: an internal header, for Loom's own tools; it may change in any release and
 * is not installed.
 *
 * Why it exists: loom-bench cuda compares Loom's dot and fft with cuBLAS and cuFFT called
 * directly, and the comparison only means something when both sides call the very same
 * library files. The cuda backend opens cuBLAS and cuFFT with dlopen at run time (the sonames
 * of the toolkit it was built with, then the toolkit's library folder; see
 * src/backends/cuda/cuda_libs.c), so the benchmark takes the entry points from the same
 * loader instead of linking -lcublas -lcufft, which could pick other files.
 *
 * The tables hold the entry points the backend calls, typed from the toolkit's own
 * declarations (__typeof__), so a signature cannot drift from the library's. Only in builds
 * with the cuda backend; the symbols are in the static library (hidden in the shared one). */
#ifndef LOOM_INTERNAL_CUDA_LIBS_H
#define LOOM_INTERNAL_CUDA_LIBS_H

#include <cublas_v2.h>
#include <cufft.h>

#define LOOM__CU_FN(f) __typeof__(f) *f

typedef struct loom__cublas_api {
  LOOM__CU_FN(cublasCreate_v2);
  LOOM__CU_FN(cublasDestroy_v2);
  LOOM__CU_FN(cublasSetStream_v2);
  LOOM__CU_FN(cublasSetWorkspace_v2);
  LOOM__CU_FN(cublasGetStatusName);
  LOOM__CU_FN(cublasSgemm_v2);
  LOOM__CU_FN(cublasDgemm_v2);
  LOOM__CU_FN(cublasCgemm_v2);
  LOOM__CU_FN(cublasZgemm_v2);
  LOOM__CU_FN(cublasSgemmStridedBatched);
  LOOM__CU_FN(cublasDgemmStridedBatched);
  LOOM__CU_FN(cublasCgemmStridedBatched);
  LOOM__CU_FN(cublasZgemmStridedBatched);
  LOOM__CU_FN(cublasGemmStridedBatchedEx);
} loom__cublas_api;

typedef struct loom__cufft_api {
  LOOM__CU_FN(cufftCreate);
  LOOM__CU_FN(cufftDestroy);
  LOOM__CU_FN(cufftSetAutoAllocation);
  LOOM__CU_FN(cufftMakePlanMany64);
  LOOM__CU_FN(cufftSetWorkArea);
  LOOM__CU_FN(cufftSetStream);
  LOOM__CU_FN(cufftExecC2C);
  LOOM__CU_FN(cufftExecZ2Z);
  LOOM__CU_FN(cufftExecR2C);
  LOOM__CU_FN(cufftExecD2Z);
  LOOM__CU_FN(cufftExecC2R);
  LOOM__CU_FN(cufftExecZ2D);
} loom__cufft_api;

#undef LOOM__CU_FN

/* The tables, loaded once (thread-safe) on first call; NULL when the library is missing or
 * lacks an entry point. They stay loaded until exit. */
const loom__cublas_api *loom__cublas(void);
const loom__cufft_api *loom__cufft(void);
/* Why cuBLAS or cuFFT is not available ("" when both are); static storage. */
const char *loom__cuda_libs_why(void);

#endif
