/* The routines of Debian's reference libblas.so.3 that OpenBLAS lacks or that must stay the
 * shim's own: the error handler xerbla_ (and xerbla_array_), lsame_, scabs1_/dcabs1_, and the
 * Fortran helpers reference CBLAS exports (sdotsub_ ...: a function's value through an
 * argument).
 *
 * xerbla_ is called through the global symbol everywhere (the host BLAS's own calls included,
 * since OpenBLAS resolves it in the global scope), so a program's own XERBLA, as the reference
 * test programs define, wins over this one.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "blas/blas.h"

BLAS_EXPORT void xerbla_(const char *srname, const blas_int *info, blas_len len);
BLAS_EXPORT void xerbla_array_(const char *srname_array, const blas_int *srname_len, const blas_int *info,
                               blas_len len);
BLAS_EXPORT blas_int lsame_(const char *ca, const char *cb, blas_len la, blas_len lb);

/* Reference XERBLA's message. Reference XERBLA then stops the program; this one returns, as
 * OpenBLAS's does (the routine then does nothing), so that a program over Loom behaves as it
 * did over OpenBLAS. */
void xerbla_(const char *srname, const blas_int *info, blas_len len) {
  int n = (int)(len < 32 ? len : 32);
  /* OpenBLAS passes sizeof its name, the NUL included. */
  while (n > 0 && (srname[n - 1] == ' ' || srname[n - 1] == '\0')) n--;
  fprintf(stderr, " ** On entry to %.*s parameter number %2d had an illegal value\n", n, srname, (int)*info);
}

void xerbla_array_(const char *srname_array, const blas_int *srname_len, const blas_int *info, blas_len len) {
  char name[32];
  int n = *srname_len < 32 ? *srname_len : 32;
  if (n < 0) n = 0;
  memset(name, ' ', sizeof name);
  memcpy(name, srname_array, (size_t)n);
  xerbla_(name, info, (blas_len)n);
}

blas_int lsame_(const char *ca, const char *cb, blas_len la, blas_len lb) {
  char a = *ca, b = *cb;
  if (a >= 'a' && a <= 'z') a = (char)(a - 'a' + 'A');
  if (b >= 'a' && b <= 'z') b = (char)(b - 'a' + 'A');
  return a == b;
}

/* ---- |re| + |im| ---------------------------------------------------------------------------- */

BLAS_EXPORT float scabs1_(const float *z);
BLAS_EXPORT double dcabs1_(const double *z);
BLAS_EXPORT float cblas_scabs1(const void *z);
BLAS_EXPORT double cblas_dcabs1(const void *z);
BLAS_EXPORT void scabs1sub_(const float *z, float *out);
BLAS_EXPORT void dcabs1sub_(const double *z, double *out);

float scabs1_(const float *z) {
  return fabsf(z[0]) + fabsf(z[1]);
}
double dcabs1_(const double *z) {
  return fabs(z[0]) + fabs(z[1]);
}
float cblas_scabs1(const void *z) {
  return scabs1_(z);
}
double cblas_dcabs1(const void *z) {
  return dcabs1_(z);
}
void scabs1sub_(const float *z, float *out) {
  *out = scabs1_(z);
}
void dcabs1sub_(const double *z, double *out) {
  *out = dcabs1_(z);
}

/* ---- reference CBLAS's Fortran helpers ------------------------------------------------------ */

/* fun(n, x, incx, y, incy) into *out. */
#define DOT_SUB(fun, R, T)                                                                              \
  BLAS_EXPORT R fun##_(const blas_int *n, const T *x, const blas_int *incx, const T *y,                 \
                       const blas_int *incy);                                                           \
  BLAS_EXPORT void fun##sub_(const blas_int *n, const T *x, const blas_int *incx, const T *y,           \
                             const blas_int *incy, R *out);                                             \
  void fun##sub_(const blas_int *n, const T *x, const blas_int *incx, const T *y, const blas_int *incy, \
                 R *out) {                                                                              \
    *out = fun##_(n, x, incx, y, incy);                                                                 \
  }
/* fun(n, x, incx) into *out. */
#define NORM_SUB(fun, R, T)                                                                \
  BLAS_EXPORT R fun##_(const blas_int *n, const T *x, const blas_int *incx);               \
  BLAS_EXPORT void fun##sub_(const blas_int *n, const T *x, const blas_int *incx, R *out); \
  void fun##sub_(const blas_int *n, const T *x, const blas_int *incx, R *out) {            \
    *out = fun##_(n, x, incx);                                                             \
  }

DOT_SUB(sdot, float, float)
DOT_SUB(ddot, double, double)
DOT_SUB(dsdot, double, float)
DOT_SUB(cdotu, blas_cfloat, void)
DOT_SUB(cdotc, blas_cfloat, void)
DOT_SUB(zdotu, blas_cdouble, void)
DOT_SUB(zdotc, blas_cdouble, void)
NORM_SUB(snrm2, float, float)
NORM_SUB(sasum, float, float)
NORM_SUB(dnrm2, double, double)
NORM_SUB(dasum, double, double)
NORM_SUB(scnrm2, float, void)
NORM_SUB(scasum, float, void)
NORM_SUB(dznrm2, double, void)
NORM_SUB(dzasum, double, void)
NORM_SUB(isamax, blas_int, float)
NORM_SUB(idamax, blas_int, double)
NORM_SUB(icamax, blas_int, void)
NORM_SUB(izamax, blas_int, void)

BLAS_EXPORT float sdsdot_(const blas_int *n, const float *sb, const float *x, const blas_int *incx,
                          const float *y, const blas_int *incy);
BLAS_EXPORT void sdsdotsub_(const blas_int *n, const float *sb, const float *x, const blas_int *incx,
                            const float *y, const blas_int *incy, float *out);
void sdsdotsub_(const blas_int *n, const float *sb, const float *x, const blas_int *incx, const float *y,
                const blas_int *incy, float *out) {
  *out = sdsdot_(n, sb, x, incx, y, incy);
}
