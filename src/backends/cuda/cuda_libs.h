/* cuBLAS and cuFFT as the cuda backend calls them: tables of entry points filled by dlsym from
 * the libraries opened at run time (cuda_libs.c). The types come from the toolkit's headers
 * (__typeof__ of each declaration), so a signature cannot drift from the library's. */
#ifndef LOOM_CUDA_LIBS_H
#define LOOM_CUDA_LIBS_H

#include "backends/cuda/cuda_backend.h"
/* The tables and their loader's declarations; shared with loom-bench, which calls the same
 * libraries as its baseline. */
#include "loom/internal/cuda_libs.h"

/* "CUFFT_ALLOC_FAILED (2)": cuFFT has no name function of its own. */
const char *loom__cufft_result_name(cufftResult r);

#endif
