/* cuBLAS and cuFFT as the cuda backend calls them: tables of entry points filled by dlsym from
 * the libraries opened at run time (cuda_libs.c). The types come from the toolkit's headers
 * (__typeof__ of each declaration), so a signature cannot drift from the library's. */
#ifndef LOOM_CUDA_LIBS_H
#define LOOM_CUDA_LIBS_H

#include <cublas_v2.h>
#include <cufft.h>

#include "backends/cuda/cuda_backend.h"

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

/* "CUFFT_ALLOC_FAILED (2)": cuFFT has no name function of its own. */
const char *loom__cufft_result_name(cufftResult r);

#endif
