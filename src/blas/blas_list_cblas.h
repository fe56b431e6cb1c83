/* The CBLAS routines of reference LAPACK 3.11's CBLAS (cblas.h, without extensions), levels 1
 * and 2, as X-macro lists; level 3 is blas_level3.c's.
 *
 *   CSUB(name, params, args, check)   a void function; `check` validates its arguments as
 *                                     reference CBLAS does (blas_cblas.c), 1 for none
 *   CFUN(ret, name, params, args)     a function returning `ret` (level 1: nothing to check)
 *
 * Scalars: real ones by value, complex ones by pointer (`const void *`), as cblas.h has them.
 */
#ifndef LOOM_BLAS_LIST_CBLAS_H
#define LOOM_BLAS_LIST_CBLAS_H

#include <limits.h>
#include <stddef.h>

/* Stand-ins in the checks' argument lists for an argument a routine does not have (no k, no
 * lda: packed storage). */
#define BLAS_NONE INT_MIN
#define BLAS_PACKED (INT_MIN + 1)

/* cblas.h's enumerations, by value (the ABI is these integers). */
typedef int cblas_layout; /* CblasRowMajor 101, CblasColMajor 102 */
typedef int cblas_trans;  /* CblasNoTrans 111, CblasTrans 112, CblasConjTrans 113 */
typedef int cblas_uplo;   /* CblasUpper 121, CblasLower 122 */
typedef int cblas_diag;   /* CblasNonUnit 131, CblasUnit 132 */
typedef int cblas_side;   /* CblasLeft 141, CblasRight 142 */
enum {
  BLAS_ROW_MAJOR = 101,
  BLAS_COL_MAJOR = 102,
  BLAS_NO_TRANS = 111,
  BLAS_TRANS = 112,
  BLAS_CONJ_TRANS = 113,
  BLAS_UPPER = 121,
  BLAS_LOWER = 122,
  BLAS_NON_UNIT = 131,
  BLAS_UNIT = 132,
  BLAS_LEFT = 141,
  BLAS_RIGHT = 142
};

/* ---- level 1 ------------------------------------------------------------------------------ */

/* p the prefix, T the element (void for complex), S a scalar parameter's type. */
#define CBLAS_L1_ANY(CSUB, CFUN, p, T, S)                                                                    \
  CSUB(cblas_##p##swap, (const int n, T *x, const int incx, T *y, const int incy), (n, x, incx, y, incy), 1) \
  CSUB(cblas_##p##copy, (const int n, const T *x, const int incx, T *y, const int incy),                     \
       (n, x, incx, y, incy), 1)                                                                             \
  CSUB(cblas_##p##axpy, (const int n, S alpha, const T *x, const int incx, T *y, const int incy),            \
       (n, alpha, x, incx, y, incy), 1)                                                                      \
  CSUB(cblas_##p##scal, (const int n, S alpha, T *x, const int incx), (n, alpha, x, incx), 1)

#define CBLAS_L1_REAL(CSUB, CFUN, p, T)                                                                 \
  CSUB(cblas_##p##rotg, (T * a, T * b, T * c, T * s), (a, b, c, s), 1)                                  \
  CSUB(cblas_##p##rotmg, (T * d1, T * d2, T * b1, const T b2, T *param), (d1, d2, b1, b2, param), 1)    \
  CSUB(cblas_##p##rot, (const int n, T *x, const int incx, T *y, const int incy, const T c, const T s), \
       (n, x, incx, y, incy, c, s), 1)                                                                  \
  CSUB(cblas_##p##rotm, (const int n, T *x, const int incx, T *y, const int incy, const T *param),      \
       (n, x, incx, y, incy, param), 1)                                                                 \
  CFUN(T, cblas_##p##dot, (const int n, const T *x, const int incx, const T *y, const int incy),        \
       (n, x, incx, y, incy))                                                                           \
  CFUN(T, cblas_##p##nrm2, (const int n, const T *x, const int incx), (n, x, incx))                     \
  CFUN(T, cblas_##p##asum, (const int n, const T *x, const int incx), (n, x, incx))                     \
  CFUN(size_t, cblas_i##p##amax, (const int n, const T *x, const int incx), (n, x, incx))

/* p the prefix, R the real type, rp the real prefix (csscal, zdscal, csrot, zdrot). */
#define CBLAS_L1_COMPLEX(CSUB, CFUN, p, R, rp)                                                             \
  CSUB(cblas_##p##rotg, (void *a, void *b, R *c, void *s), (a, b, c, s), 1)                                \
  CSUB(cblas_##p##rp##rot,                                                                                 \
       (const int n, void *x, const int incx, void *y, const int incy, const R c, const R s),              \
       (n, x, incx, y, incy, c, s), 1)                                                                     \
  CSUB(cblas_##p##rp##scal, (const int n, const R alpha, void *x, const int incx), (n, alpha, x, incx), 1) \
  CSUB(cblas_##p##dotu_sub,                                                                                \
       (const int n, const void *x, const int incx, const void *y, const int incy, void *dot),             \
       (n, x, incx, y, incy, dot), 1)                                                                      \
  CSUB(cblas_##p##dotc_sub,                                                                                \
       (const int n, const void *x, const int incx, const void *y, const int incy, void *dot),             \
       (n, x, incx, y, incy, dot), 1)                                                                      \
  CFUN(size_t, cblas_i##p##amax, (const int n, const void *x, const int incx), (n, x, incx))

#define CBLAS_L1_EXTRA(CSUB, CFUN)                                                                         \
  CFUN(float, cblas_sdsdot,                                                                                \
       (const int n, const float alpha, const float *x, const int incx, const float *y, const int incy),   \
       (n, alpha, x, incx, y, incy))                                                                       \
  CFUN(double, cblas_dsdot, (const int n, const float *x, const int incx, const float *y, const int incy), \
       (n, x, incx, y, incy))                                                                              \
  CFUN(float, cblas_scnrm2, (const int n, const void *x, const int incx), (n, x, incx))                    \
  CFUN(float, cblas_scasum, (const int n, const void *x, const int incx), (n, x, incx))                    \
  CFUN(double, cblas_dznrm2, (const int n, const void *x, const int incx), (n, x, incx))                   \
  CFUN(double, cblas_dzasum, (const int n, const void *x, const int incx), (n, x, incx))

/* ---- level 2 ------------------------------------------------------------------------------ */

/* The checks (blas_cblas.c) name the routine: N is the routine's name as a string. */
#define CBLAS_L2_ANY(CSUB, CFUN, p, T, S)                                                                  \
  CSUB(cblas_##p##gemv,                                                                                    \
       (const cblas_layout layout, const cblas_trans trans, const int m, const int n, S alpha, const T *a, \
        const int lda, const T *x, const int incx, S beta, T *y, const int incy),                          \
       (layout, trans, m, n, alpha, a, lda, x, incx, beta, y, incy),                                       \
       blas_check_gemv("cblas_" #p "gemv", layout, trans, m, n, lda, incx, incy))                          \
  CSUB(cblas_##p##gbmv,                                                                                    \
       (const cblas_layout layout, const cblas_trans trans, const int m, const int n, const int kl,        \
        const int ku, S alpha, const T *a, const int lda, const T *x, const int incx, S beta, T *y,        \
        const int incy),                                                                                   \
       (layout, trans, m, n, kl, ku, alpha, a, lda, x, incx, beta, y, incy),                               \
       blas_check_gbmv("cblas_" #p "gbmv", layout, trans, m, n, kl, ku, lda, incx, incy))                  \
  CSUB(cblas_##p##trmv,                                                                                    \
       (const cblas_layout layout, const cblas_uplo uplo, const cblas_trans trans, const cblas_diag diag,  \
        const int n, const T *a, const int lda, T *x, const int incx),                                     \
       (layout, uplo, trans, diag, n, a, lda, x, incx),                                                    \
       blas_check_tr("cblas_" #p "trmv", layout, uplo, trans, diag, n, BLAS_NONE, lda, incx))              \
  CSUB(cblas_##p##trsv,                                                                                    \
       (const cblas_layout layout, const cblas_uplo uplo, const cblas_trans trans, const cblas_diag diag,  \
        const int n, const T *a, const int lda, T *x, const int incx),                                     \
       (layout, uplo, trans, diag, n, a, lda, x, incx),                                                    \
       blas_check_tr("cblas_" #p "trsv", layout, uplo, trans, diag, n, BLAS_NONE, lda, incx))              \
  CSUB(cblas_##p##tbmv,                                                                                    \
       (const cblas_layout layout, const cblas_uplo uplo, const cblas_trans trans, const cblas_diag diag,  \
        const int n, const int k, const T *a, const int lda, T *x, const int incx),                        \
       (layout, uplo, trans, diag, n, k, a, lda, x, incx),                                                 \
       blas_check_tr("cblas_" #p "tbmv", layout, uplo, trans, diag, n, k, lda, incx))                      \
  CSUB(cblas_##p##tbsv,                                                                                    \
       (const cblas_layout layout, const cblas_uplo uplo, const cblas_trans trans, const cblas_diag diag,  \
        const int n, const int k, const T *a, const int lda, T *x, const int incx),                        \
       (layout, uplo, trans, diag, n, k, a, lda, x, incx),                                                 \
       blas_check_tr("cblas_" #p "tbsv", layout, uplo, trans, diag, n, k, lda, incx))                      \
  CSUB(cblas_##p##tpmv,                                                                                    \
       (const cblas_layout layout, const cblas_uplo uplo, const cblas_trans trans, const cblas_diag diag,  \
        const int n, const T *ap, T *x, const int incx),                                                   \
       (layout, uplo, trans, diag, n, ap, x, incx),                                                        \
       blas_check_tr("cblas_" #p "tpmv", layout, uplo, trans, diag, n, BLAS_PACKED, 0, incx))              \
  CSUB(cblas_##p##tpsv,                                                                                    \
       (const cblas_layout layout, const cblas_uplo uplo, const cblas_trans trans, const cblas_diag diag,  \
        const int n, const T *ap, T *x, const int incx),                                                   \
       (layout, uplo, trans, diag, n, ap, x, incx),                                                        \
       blas_check_tr("cblas_" #p "tpsv", layout, uplo, trans, diag, n, BLAS_PACKED, 0, incx))

/* sy/he: the symmetric or Hermitian names; R the type of her's and hpr's alpha. */
#define CBLAS_L2_SYM(CSUB, CFUN, p, T, S, R, sy, sb, sp)                                                    \
  CSUB(cblas_##p##sy##mv,                                                                                   \
       (const cblas_layout layout, const cblas_uplo uplo, const int n, S alpha, const T *a, const int lda,  \
        const T *x, const int incx, S beta, T *y, const int incy),                                          \
       (layout, uplo, n, alpha, a, lda, x, incx, beta, y, incy),                                            \
       blas_check_symv("cblas_" #p #sy "mv", layout, uplo, n, BLAS_NONE, lda, incx, incy))                  \
  CSUB(cblas_##p##sb##mv,                                                                                   \
       (const cblas_layout layout, const cblas_uplo uplo, const int n, const int k, S alpha, const T *a,    \
        const int lda, const T *x, const int incx, S beta, T *y, const int incy),                           \
       (layout, uplo, n, k, alpha, a, lda, x, incx, beta, y, incy),                                         \
       blas_check_symv("cblas_" #p #sb "mv", layout, uplo, n, k, lda, incx, incy))                          \
  CSUB(cblas_##p##sp##mv,                                                                                   \
       (const cblas_layout layout, const cblas_uplo uplo, const int n, S alpha, const T *ap, const T *x,    \
        const int incx, S beta, T *y, const int incy),                                                      \
       (layout, uplo, n, alpha, ap, x, incx, beta, y, incy),                                                \
       blas_check_symv("cblas_" #p #sp "mv", layout, uplo, n, BLAS_PACKED, 0, incx, incy))                  \
  CSUB(cblas_##p##sy##r,                                                                                    \
       (const cblas_layout layout, const cblas_uplo uplo, const int n, const R alpha, const T *x,           \
        const int incx, T *a, const int lda),                                                               \
       (layout, uplo, n, alpha, x, incx, a, lda),                                                           \
       blas_check_syr("cblas_" #p #sy "r", layout, uplo, n, incx, BLAS_NONE, lda))                          \
  CSUB(cblas_##p##sp##r,                                                                                    \
       (const cblas_layout layout, const cblas_uplo uplo, const int n, const R alpha, const T *x,           \
        const int incx, T *ap),                                                                             \
       (layout, uplo, n, alpha, x, incx, ap),                                                               \
       blas_check_syr("cblas_" #p #sp "r", layout, uplo, n, incx, BLAS_NONE, BLAS_NONE))                    \
  CSUB(cblas_##p##sy##r2,                                                                                   \
       (const cblas_layout layout, const cblas_uplo uplo, const int n, S alpha, const T *x, const int incx, \
        const T *y, const int incy, T *a, const int lda),                                                   \
       (layout, uplo, n, alpha, x, incx, y, incy, a, lda),                                                  \
       blas_check_syr("cblas_" #p #sy "r2", layout, uplo, n, incx, incy, lda))                              \
  CSUB(cblas_##p##sp##r2,                                                                                   \
       (const cblas_layout layout, const cblas_uplo uplo, const int n, S alpha, const T *x, const int incx, \
        const T *y, const int incy, T *ap),                                                                 \
       (layout, uplo, n, alpha, x, incx, y, incy, ap),                                                      \
       blas_check_syr("cblas_" #p #sp "r2", layout, uplo, n, incx, incy, BLAS_NONE))

#define CBLAS_GER(CSUB, name, T, S)                                                               \
  CSUB(cblas_##name,                                                                              \
       (const cblas_layout layout, const int m, const int n, S alpha, const T *x, const int incx, \
        const T *y, const int incy, T *a, const int lda),                                         \
       (layout, m, n, alpha, x, incx, y, incy, a, lda),                                           \
       blas_check_ger("cblas_" #name, layout, m, n, incx, incy, lda))

/* ---- the lists ---------------------------------------------------------------------------- */

#define CBLAS_FORWARDED(CSUB, CFUN)                                     \
  CBLAS_L1_ANY(CSUB, CFUN, s, float, const float)                       \
  CBLAS_L1_ANY(CSUB, CFUN, d, double, const double)                     \
  CBLAS_L1_ANY(CSUB, CFUN, c, void, const void *)                       \
  CBLAS_L1_ANY(CSUB, CFUN, z, void, const void *)                       \
  CBLAS_L1_REAL(CSUB, CFUN, s, float)                                   \
  CBLAS_L1_REAL(CSUB, CFUN, d, double)                                  \
  CBLAS_L1_COMPLEX(CSUB, CFUN, c, float, s)                             \
  CBLAS_L1_COMPLEX(CSUB, CFUN, z, double, d)                            \
  CBLAS_L1_EXTRA(CSUB, CFUN)                                            \
  CBLAS_L2_ANY(CSUB, CFUN, s, float, const float)                       \
  CBLAS_L2_ANY(CSUB, CFUN, d, double, const double)                     \
  CBLAS_L2_ANY(CSUB, CFUN, c, void, const void *)                       \
  CBLAS_L2_ANY(CSUB, CFUN, z, void, const void *)                       \
  CBLAS_L2_SYM(CSUB, CFUN, s, float, const float, float, sy, sb, sp)    \
  CBLAS_L2_SYM(CSUB, CFUN, d, double, const double, double, sy, sb, sp) \
  CBLAS_L2_SYM(CSUB, CFUN, c, void, const void *, float, he, hb, hp)    \
  CBLAS_L2_SYM(CSUB, CFUN, z, void, const void *, double, he, hb, hp)   \
  CBLAS_GER(CSUB, sger, float, const float)                             \
  CBLAS_GER(CSUB, dger, double, const double)                           \
  CBLAS_GER(CSUB, cgeru, void, const void *)                            \
  CBLAS_GER(CSUB, cgerc, void, const void *)                            \
  CBLAS_GER(CSUB, zgeru, void, const void *)                            \
  CBLAS_GER(CSUB, zgerc, void, const void *)

#endif
