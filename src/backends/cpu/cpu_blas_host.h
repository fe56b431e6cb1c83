/* The host BLAS routines the cpu backend calls, as OpenBLAS's own symbols.
 *
 * A program that runs over Loom's libblas.so.3 (docs/blas.md) has the shim's cblas_sgemm ...
 * first in the global scope: a plain call from libloom would go to the shim, which may hand the
 * call back to Loom, which would call the shim again. So the cpu backend calls OpenBLAS through
 * pointers found with dlsym on OpenBLAS's own handle.
 */
#ifndef LOOM_BACKENDS_CPU_CPU_BLAS_HOST_H
#define LOOM_BACKENDS_CPU_CPU_BLAS_HOST_H

#include <cblas.h>

/* The routines, with OpenBLAS's cblas.h prototypes. */
typedef struct loom__cpu_blas {
  __typeof__(cblas_sgemm) *sgemm;
  __typeof__(cblas_dgemm) *dgemm;
  __typeof__(cblas_cgemm) *cgemm;
  __typeof__(cblas_zgemm) *zgemm;
  __typeof__(cblas_sgemv) *sgemv;
  __typeof__(cblas_dgemv) *dgemv;
  __typeof__(cblas_cgemv) *cgemv;
  __typeof__(cblas_zgemv) *zgemv;
} loom__cpu_blas;

/* The table, filled on the first call (pthread_once; thread-safe). OpenBLAS is the library
 * libloom links, found by dladdr on its openblas_get_config; where it cannot be opened again
 * or lacks a routine (never with a working install), the process ends with a message naming
 * it: the cpu backend's dot has no other way to run. */
const loom__cpu_blas *loom__cpu_blas_get(void);

#endif
