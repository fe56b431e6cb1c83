/* The reference BLAS 3.11 routines with the Fortran ABI (gfortran's: every argument by
 * reference, a hidden size_t length after the arguments for each CHARACTER one, REAL and
 * COMPLEX functions returning by value), as X-macro lists.
 *
 *   FSUB(name, params, args)        a subroutine
 *   FFUN(ret, name, params, args)   a function returning `ret`
 *
 * BLAS_F77_FORWARDED lists what the shim forwards to the host BLAS as it is; BLAS_F77_LEVEL3 the
 * level-3 routines, which blas_level3.c may run through Loom. Together they are every routine
 * of reference BLAS 3.11 that OpenBLAS also has; blas_extra.c writes the few it lacks (scabs1_,
 * dcabs1_, the *sub_ helpers of reference CBLAS) and the error handlers (xerbla_, lsame_).
 *
 * Complex elements are `void` (two reals): the shim never reads them, it passes them on.
 */
#ifndef LOOM_BLAS_LIST_F77_H
#define LOOM_BLAS_LIST_F77_H

#include <complex.h>
#include <stddef.h>

typedef int blas_int; /* LP64: Debian's libblas.so.3 ABI */
typedef size_t blas_len;
typedef float _Complex blas_cfloat;
typedef double _Complex blas_cdouble;

/* ---- level 1 ------------------------------------------------------------------------------ */

/* Routines alike for the four precisions: T the element, p the prefix. */
#define BLAS_F77_L1_ANY(FSUB, FFUN, p, T)                                                             \
  FSUB(p##swap_, (const blas_int *n, T *x, const blas_int *incx, T *y, const blas_int *incy),         \
       (n, x, incx, y, incy))                                                                         \
  FSUB(p##copy_, (const blas_int *n, const T *x, const blas_int *incx, T *y, const blas_int *incy),   \
       (n, x, incx, y, incy))                                                                         \
  FSUB(p##axpy_,                                                                                      \
       (const blas_int *n, const T *a, const T *x, const blas_int *incx, T *y, const blas_int *incy), \
       (n, a, x, incx, y, incy))                                                                      \
  FSUB(p##scal_, (const blas_int *n, const T *a, T *x, const blas_int *incx), (n, a, x, incx))

#define BLAS_F77_L1_REAL(FSUB, FFUN, p, T)                                                                  \
  FSUB(p##rotg_, (T * a, T * b, T * c, T * s), (a, b, c, s))                                                \
  FSUB(p##rotmg_, (T * d1, T * d2, T * x1, const T *y1, T *param), (d1, d2, x1, y1, param))                 \
  FSUB(p##rot_,                                                                                             \
       (const blas_int *n, T *x, const blas_int *incx, T *y, const blas_int *incy, const T *c, const T *s), \
       (n, x, incx, y, incy, c, s))                                                                         \
  FSUB(p##rotm_,                                                                                            \
       (const blas_int *n, T *x, const blas_int *incx, T *y, const blas_int *incy, const T *param),         \
       (n, x, incx, y, incy, param))                                                                        \
  FFUN(T, p##dot_, (const blas_int *n, const T *x, const blas_int *incx, const T *y, const blas_int *incy), \
       (n, x, incx, y, incy))                                                                               \
  FFUN(T, p##nrm2_, (const blas_int *n, const T *x, const blas_int *incx), (n, x, incx))                    \
  FFUN(T, p##asum_, (const blas_int *n, const T *x, const blas_int *incx), (n, x, incx))                    \
  FFUN(blas_int, i##p##amax_, (const blas_int *n, const T *x, const blas_int *incx), (n, x, incx))

/* Complex: p the prefix, R the real type, C the complex value type, q the real prefix. */
#define BLAS_F77_L1_COMPLEX(FSUB, FFUN, p, R, C, rp)                                                  \
  FSUB(p##rotg_, (void *a, const void *b, R *c, void *s), (a, b, c, s))                               \
  FSUB(p##rp##rot_,                                                                                   \
       (const blas_int *n, void *x, const blas_int *incx, void *y, const blas_int *incy, const R *c,  \
        const R *s),                                                                                  \
       (n, x, incx, y, incy, c, s))                                                                   \
  FSUB(p##rp##scal_, (const blas_int *n, const R *a, void *x, const blas_int *incx), (n, a, x, incx)) \
  FFUN(C, p##dotu_,                                                                                   \
       (const blas_int *n, const void *x, const blas_int *incx, const void *y, const blas_int *incy), \
       (n, x, incx, y, incy))                                                                         \
  FFUN(C, p##dotc_,                                                                                   \
       (const blas_int *n, const void *x, const blas_int *incx, const void *y, const blas_int *incy), \
       (n, x, incx, y, incy))                                                                         \
  FFUN(blas_int, i##p##amax_, (const blas_int *n, const void *x, const blas_int *incx), (n, x, incx))

#define BLAS_F77_L1_EXTRA(FSUB, FFUN)                                                                   \
  FFUN(float, sdsdot_,                                                                                  \
       (const blas_int *n, const float *sb, const float *x, const blas_int *incx, const float *y,       \
        const blas_int *incy),                                                                          \
       (n, sb, x, incx, y, incy))                                                                       \
  FFUN(double, dsdot_,                                                                                  \
       (const blas_int *n, const float *x, const blas_int *incx, const float *y, const blas_int *incy), \
       (n, x, incx, y, incy))                                                                           \
  FFUN(float, scnrm2_, (const blas_int *n, const void *x, const blas_int *incx), (n, x, incx))          \
  FFUN(float, scasum_, (const blas_int *n, const void *x, const blas_int *incx), (n, x, incx))          \
  FFUN(double, dznrm2_, (const blas_int *n, const void *x, const blas_int *incx), (n, x, incx))         \
  FFUN(double, dzasum_, (const blas_int *n, const void *x, const blas_int *incx), (n, x, incx))

/* ---- level 2 ------------------------------------------------------------------------------ */

/* Alike for the four precisions: T the element (void for complex), S the scalar. */
#define BLAS_F77_L2_ANY(FSUB, FFUN, p, T)                                                                    \
  FSUB(p##gemv_,                                                                                             \
       (const char *trans, const blas_int *m, const blas_int *n, const T *alpha, const T *a,                 \
        const blas_int *lda, const T *x, const blas_int *incx, const T *beta, T *y, const blas_int *incy,    \
        blas_len l1),                                                                                        \
       (trans, m, n, alpha, a, lda, x, incx, beta, y, incy, l1))                                             \
  FSUB(p##gbmv_,                                                                                             \
       (const char *trans, const blas_int *m, const blas_int *n, const blas_int *kl, const blas_int *ku,     \
        const T *alpha, const T *a, const blas_int *lda, const T *x, const blas_int *incx, const T *beta,    \
        T *y, const blas_int *incy, blas_len l1),                                                            \
       (trans, m, n, kl, ku, alpha, a, lda, x, incx, beta, y, incy, l1))                                     \
  FSUB(p##trmv_,                                                                                             \
       (const char *uplo, const char *trans, const char *diag, const blas_int *n, const T *a,                \
        const blas_int *lda, T *x, const blas_int *incx, blas_len l1, blas_len l2, blas_len l3),             \
       (uplo, trans, diag, n, a, lda, x, incx, l1, l2, l3))                                                  \
  FSUB(p##trsv_,                                                                                             \
       (const char *uplo, const char *trans, const char *diag, const blas_int *n, const T *a,                \
        const blas_int *lda, T *x, const blas_int *incx, blas_len l1, blas_len l2, blas_len l3),             \
       (uplo, trans, diag, n, a, lda, x, incx, l1, l2, l3))                                                  \
  FSUB(p##tbmv_,                                                                                             \
       (const char *uplo, const char *trans, const char *diag, const blas_int *n, const blas_int *k,         \
        const T *a, const blas_int *lda, T *x, const blas_int *incx, blas_len l1, blas_len l2, blas_len l3), \
       (uplo, trans, diag, n, k, a, lda, x, incx, l1, l2, l3))                                               \
  FSUB(p##tbsv_,                                                                                             \
       (const char *uplo, const char *trans, const char *diag, const blas_int *n, const blas_int *k,         \
        const T *a, const blas_int *lda, T *x, const blas_int *incx, blas_len l1, blas_len l2, blas_len l3), \
       (uplo, trans, diag, n, k, a, lda, x, incx, l1, l2, l3))                                               \
  FSUB(p##tpmv_,                                                                                             \
       (const char *uplo, const char *trans, const char *diag, const blas_int *n, const T *ap, T *x,         \
        const blas_int *incx, blas_len l1, blas_len l2, blas_len l3),                                        \
       (uplo, trans, diag, n, ap, x, incx, l1, l2, l3))                                                      \
  FSUB(p##tpsv_,                                                                                             \
       (const char *uplo, const char *trans, const char *diag, const blas_int *n, const T *ap, T *x,         \
        const blas_int *incx, blas_len l1, blas_len l2, blas_len l3),                                        \
       (uplo, trans, diag, n, ap, x, incx, l1, l2, l3))

/* Symmetric (real) and Hermitian (complex) forms: sy/he, sb/hb, sp/hp, ger/geru+gerc, syr/her
 * (R: the type of her's and hpr's real alpha), spr/hpr, syr2/her2, spr2/hpr2. */
#define BLAS_F77_L2_SYM(FSUB, FFUN, p, T, R, sy, sb, sp)                                                    \
  FSUB(p##sy##mv_,                                                                                          \
       (const char *uplo, const blas_int *n, const T *alpha, const T *a, const blas_int *lda, const T *x,   \
        const blas_int *incx, const T *beta, T *y, const blas_int *incy, blas_len l1),                      \
       (uplo, n, alpha, a, lda, x, incx, beta, y, incy, l1))                                                \
  FSUB(p##sb##mv_,                                                                                          \
       (const char *uplo, const blas_int *n, const blas_int *k, const T *alpha, const T *a,                 \
        const blas_int *lda, const T *x, const blas_int *incx, const T *beta, T *y, const blas_int *incy,   \
        blas_len l1),                                                                                       \
       (uplo, n, k, alpha, a, lda, x, incx, beta, y, incy, l1))                                             \
  FSUB(p##sp##mv_,                                                                                          \
       (const char *uplo, const blas_int *n, const T *alpha, const T *ap, const T *x, const blas_int *incx, \
        const T *beta, T *y, const blas_int *incy, blas_len l1),                                            \
       (uplo, n, alpha, ap, x, incx, beta, y, incy, l1))                                                    \
  FSUB(p##sy##r_,                                                                                           \
       (const char *uplo, const blas_int *n, const R *alpha, const T *x, const blas_int *incx, T *a,        \
        const blas_int *lda, blas_len l1),                                                                  \
       (uplo, n, alpha, x, incx, a, lda, l1))                                                               \
  FSUB(p##sp##r_,                                                                                           \
       (const char *uplo, const blas_int *n, const R *alpha, const T *x, const blas_int *incx, T *ap,       \
        blas_len l1),                                                                                       \
       (uplo, n, alpha, x, incx, ap, l1))                                                                   \
  FSUB(p##sy##r2_,                                                                                          \
       (const char *uplo, const blas_int *n, const T *alpha, const T *x, const blas_int *incx, const T *y,  \
        const blas_int *incy, T *a, const blas_int *lda, blas_len l1),                                      \
       (uplo, n, alpha, x, incx, y, incy, a, lda, l1))                                                      \
  FSUB(p##sp##r2_,                                                                                          \
       (const char *uplo, const blas_int *n, const T *alpha, const T *x, const blas_int *incx, const T *y,  \
        const blas_int *incy, T *ap, blas_len l1),                                                          \
       (uplo, n, alpha, x, incx, y, incy, ap, l1))

#define BLAS_F77_GER(FSUB, name, T)                                                                         \
  FSUB(name,                                                                                                \
       (const blas_int *m, const blas_int *n, const T *alpha, const T *x, const blas_int *incx, const T *y, \
        const blas_int *incy, T *a, const blas_int *lda),                                                   \
       (m, n, alpha, x, incx, y, incy, a, lda))

/* ---- level 3 ------------------------------------------------------------------------------ */

/* T the element (void for complex), R the real scalar of herk/her2k. */
#define BLAS_F77_L3_ANY(FSUB, p, T)                                                                          \
  FSUB(p##gemm_,                                                                                             \
       (const char *transa, const char *transb, const blas_int *m, const blas_int *n, const blas_int *k,     \
        const T *alpha, const T *a, const blas_int *lda, const T *b, const blas_int *ldb, const T *beta,     \
        T *c, const blas_int *ldc, blas_len l1, blas_len l2),                                                \
       (transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, l1, l2))                               \
  FSUB(p##symm_,                                                                                             \
       (const char *side, const char *uplo, const blas_int *m, const blas_int *n, const T *alpha,            \
        const T *a, const blas_int *lda, const T *b, const blas_int *ldb, const T *beta, T *c,               \
        const blas_int *ldc, blas_len l1, blas_len l2),                                                      \
       (side, uplo, m, n, alpha, a, lda, b, ldb, beta, c, ldc, l1, l2))                                      \
  FSUB(                                                                                                      \
      p##syrk_,                                                                                              \
      (const char *uplo, const char *trans, const blas_int *n, const blas_int *k, const T *alpha,            \
       const T *a, const blas_int *lda, const T *beta, T *c, const blas_int *ldc, blas_len l1, blas_len l2), \
      (uplo, trans, n, k, alpha, a, lda, beta, c, ldc, l1, l2))                                              \
  FSUB(p##syr2k_,                                                                                            \
       (const char *uplo, const char *trans, const blas_int *n, const blas_int *k, const T *alpha,           \
        const T *a, const blas_int *lda, const T *b, const blas_int *ldb, const T *beta, T *c,               \
        const blas_int *ldc, blas_len l1, blas_len l2),                                                      \
       (uplo, trans, n, k, alpha, a, lda, b, ldb, beta, c, ldc, l1, l2))                                     \
  FSUB(p##trmm_,                                                                                             \
       (const char *side, const char *uplo, const char *transa, const char *diag, const blas_int *m,         \
        const blas_int *n, const T *alpha, const T *a, const blas_int *lda, T *b, const blas_int *ldb,       \
        blas_len l1, blas_len l2, blas_len l3, blas_len l4),                                                 \
       (side, uplo, transa, diag, m, n, alpha, a, lda, b, ldb, l1, l2, l3, l4))                              \
  FSUB(p##trsm_,                                                                                             \
       (const char *side, const char *uplo, const char *transa, const char *diag, const blas_int *m,         \
        const blas_int *n, const T *alpha, const T *a, const blas_int *lda, T *b, const blas_int *ldb,       \
        blas_len l1, blas_len l2, blas_len l3, blas_len l4),                                                 \
       (side, uplo, transa, diag, m, n, alpha, a, lda, b, ldb, l1, l2, l3, l4))

#define BLAS_F77_L3_HERM(FSUB, p, R)                                                                       \
  FSUB(p##hemm_,                                                                                           \
       (const char *side, const char *uplo, const blas_int *m, const blas_int *n, const void *alpha,       \
        const void *a, const blas_int *lda, const void *b, const blas_int *ldb, const void *beta, void *c, \
        const blas_int *ldc, blas_len l1, blas_len l2),                                                    \
       (side, uplo, m, n, alpha, a, lda, b, ldb, beta, c, ldc, l1, l2))                                    \
  FSUB(p##herk_,                                                                                           \
       (const char *uplo, const char *trans, const blas_int *n, const blas_int *k, const R *alpha,         \
        const void *a, const blas_int *lda, const R *beta, void *c, const blas_int *ldc, blas_len l1,      \
        blas_len l2),                                                                                      \
       (uplo, trans, n, k, alpha, a, lda, beta, c, ldc, l1, l2))                                           \
  FSUB(p##her2k_,                                                                                          \
       (const char *uplo, const char *trans, const blas_int *n, const blas_int *k, const void *alpha,      \
        const void *a, const blas_int *lda, const void *b, const blas_int *ldb, const R *beta, void *c,    \
        const blas_int *ldc, blas_len l1, blas_len l2),                                                    \
       (uplo, trans, n, k, alpha, a, lda, b, ldb, beta, c, ldc, l1, l2))

/* ---- the lists ---------------------------------------------------------------------------- */

#define BLAS_F77_FORWARDED(FSUB, FFUN)                        \
  BLAS_F77_L1_ANY(FSUB, FFUN, s, float)                       \
  BLAS_F77_L1_ANY(FSUB, FFUN, d, double)                      \
  BLAS_F77_L1_ANY(FSUB, FFUN, c, void)                        \
  BLAS_F77_L1_ANY(FSUB, FFUN, z, void)                        \
  BLAS_F77_L1_REAL(FSUB, FFUN, s, float)                      \
  BLAS_F77_L1_REAL(FSUB, FFUN, d, double)                     \
  BLAS_F77_L1_COMPLEX(FSUB, FFUN, c, float, blas_cfloat, s)   \
  BLAS_F77_L1_COMPLEX(FSUB, FFUN, z, double, blas_cdouble, d) \
  BLAS_F77_L1_EXTRA(FSUB, FFUN)                               \
  BLAS_F77_L2_ANY(FSUB, FFUN, s, float)                       \
  BLAS_F77_L2_ANY(FSUB, FFUN, d, double)                      \
  BLAS_F77_L2_ANY(FSUB, FFUN, c, void)                        \
  BLAS_F77_L2_ANY(FSUB, FFUN, z, void)                        \
  BLAS_F77_L2_SYM(FSUB, FFUN, s, float, float, sy, sb, sp)    \
  BLAS_F77_L2_SYM(FSUB, FFUN, d, double, double, sy, sb, sp)  \
  BLAS_F77_L2_SYM(FSUB, FFUN, c, void, float, he, hb, hp)     \
  BLAS_F77_L2_SYM(FSUB, FFUN, z, void, double, he, hb, hp)    \
  BLAS_F77_GER(FSUB, sger_, float)                            \
  BLAS_F77_GER(FSUB, dger_, double)                           \
  BLAS_F77_GER(FSUB, cgeru_, void)                            \
  BLAS_F77_GER(FSUB, cgerc_, void)                            \
  BLAS_F77_GER(FSUB, zgeru_, void)                            \
  BLAS_F77_GER(FSUB, zgerc_, void)

#define BLAS_F77_LEVEL3(FSUB)      \
  BLAS_F77_L3_ANY(FSUB, s, float)  \
  BLAS_F77_L3_ANY(FSUB, d, double) \
  BLAS_F77_L3_ANY(FSUB, c, void)   \
  BLAS_F77_L3_ANY(FSUB, z, void)   \
  BLAS_F77_L3_HERM(FSUB, c, float) \
  BLAS_F77_L3_HERM(FSUB, z, double)

#endif
