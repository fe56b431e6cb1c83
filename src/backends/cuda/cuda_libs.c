/* cuBLAS and cuFFT, opened with dlopen the first time a CUDA device opens, so that a binary built
 * with the cuda backend starts where the libraries are missing (a machine without CUDA) and the
 * link step needs no -lcublas -lcufft. The sonames are the toolkit's this build was compiled
 * against (libcublas.so.13, libcufft.so.12 with CUDA 13); the toolkit's library folder found at
 * configure time (LOOM_CUDA_LIBDIR) is tried after the loader's own search path. A library that
 * is missing or lacks an entry point leaves its table NULL: dot then runs the gemm kernel and
 * the transforms the DFT kernel, and loom__cuda_libs_why() says why. The libraries stay loaded
 * until exit: unloading one that holds CUDA state is unsafe. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backends/cuda/cuda_libs.h"

#define STR_(x) #x
#define STR(x) STR_(x)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static loom__cublas_api blas_api;
static loom__cufft_api fft_api;
static bool have_blas, have_fft;
static char why[512];

typedef struct sym {
  const char *name;
  void **slot;
} sym;

/* Opens `soname` from the search path, else from LOOM_CUDA_LIBDIR. */
static void *open_lib(const char *soname) {
  void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
#ifdef LOOM_CUDA_LIBDIR
  if (!lib) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", LOOM_CUDA_LIBDIR, soname);
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  }
#endif
  return lib;
}

/* Fills the slots from the library; false (and a reason appended to `why`) when it is missing
 * or lacks one. */
static bool load(const char *soname, const sym *syms, int n) {
  void *lib = open_lib(soname);
  size_t used = strlen(why);
  if (!lib) {
    snprintf(why + used, sizeof why - used, "%s%s not found", used ? "; " : "", soname);
    return false;
  }
  for (int i = 0; i < n; i++) {
    /* POSIX: a function pointer travels through void * (dlsym's own contract). */
    *syms[i].slot = dlsym(lib, syms[i].name);
    if (!*syms[i].slot) {
      snprintf(why + used, sizeof why - used, "%s%s lacks %s", used ? "; " : "", soname, syms[i].name);
      return false;
    }
  }
  return true;
}

#define SYM(api, f) \
  { #f, (void **)&api.f }

static void load_all(void) {
  const sym blas[] = {
      SYM(blas_api, cublasCreate_v2),
      SYM(blas_api, cublasDestroy_v2),
      SYM(blas_api, cublasSetStream_v2),
      SYM(blas_api, cublasSetWorkspace_v2),
      SYM(blas_api, cublasGetStatusName),
      SYM(blas_api, cublasSgemm_v2),
      SYM(blas_api, cublasDgemm_v2),
      SYM(blas_api, cublasCgemm_v2),
      SYM(blas_api, cublasZgemm_v2),
      SYM(blas_api, cublasSgemmStridedBatched),
      SYM(blas_api, cublasDgemmStridedBatched),
      SYM(blas_api, cublasCgemmStridedBatched),
      SYM(blas_api, cublasZgemmStridedBatched),
      SYM(blas_api, cublasGemmStridedBatchedEx),
  };
  const sym fft[] = {
      SYM(fft_api, cufftCreate),         SYM(fft_api, cufftDestroy),     SYM(fft_api, cufftSetAutoAllocation),
      SYM(fft_api, cufftMakePlanMany64), SYM(fft_api, cufftSetWorkArea), SYM(fft_api, cufftSetStream),
      SYM(fft_api, cufftExecC2C),        SYM(fft_api, cufftExecZ2Z),     SYM(fft_api, cufftExecR2C),
      SYM(fft_api, cufftExecD2Z),        SYM(fft_api, cufftExecC2R),     SYM(fft_api, cufftExecZ2D),
  };
  have_blas = load("libcublas.so." STR(CUBLAS_VER_MAJOR), blas, (int)(sizeof blas / sizeof blas[0]));
  have_fft = load("libcufft.so." STR(CUFFT_VER_MAJOR), fft, (int)(sizeof fft / sizeof fft[0]));
}

const loom__cublas_api *loom__cublas(void) {
  pthread_once(&once, load_all);
  return have_blas ? &blas_api : NULL;
}

const loom__cufft_api *loom__cufft(void) {
  pthread_once(&once, load_all);
  return have_fft ? &fft_api : NULL;
}

const char *loom__cuda_libs_why(void) {
  pthread_once(&once, load_all);
  return why;
}

const char *loom__cufft_result_name(cufftResult r) {
  switch (r) {
#define NAME(x) \
  case x:       \
    return #x;
    NAME(CUFFT_SUCCESS)
    NAME(CUFFT_INVALID_PLAN)
    NAME(CUFFT_ALLOC_FAILED)
    NAME(CUFFT_INVALID_TYPE)
    NAME(CUFFT_INVALID_VALUE)
    NAME(CUFFT_INTERNAL_ERROR)
    NAME(CUFFT_EXEC_FAILED)
    NAME(CUFFT_SETUP_FAILED)
    NAME(CUFFT_INVALID_SIZE)
    NAME(CUFFT_UNALIGNED_DATA)
    NAME(CUFFT_INVALID_DEVICE)
    NAME(CUFFT_NO_WORKSPACE)
    NAME(CUFFT_NOT_IMPLEMENTED)
    NAME(CUFFT_NOT_SUPPORTED)
#undef NAME
    default:
      return "unknown cuFFT result";
  }
}
