/* Inside Loom's libblas.so.3 (docs/blas.md): the host BLAS table, the checks of reference CBLAS,
 * and the level-3 routines that may run through Loom.
 *
 * The shim exports the reference BLAS and CBLAS symbols and nothing else of its own but
 * loom_blas_* (loom_blas.h); everything here is hidden.
 */
#ifndef LOOM_BLAS_BLAS_H
#define LOOM_BLAS_BLAS_H

#include <stdbool.h>
#include <stdint.h>

#include "blas/blas_list_cblas.h"
#include "blas/blas_list_f77.h"

#define BLAS_EXPORT __attribute__((visibility("default")))
#define BLAS_HIDDEN __attribute__((visibility("hidden")))

/* ---- the host BLAS (blas_host.c) ---------------------------------------------------------- */

/* Every routine the shim forwards, as OpenBLAS's own symbol, found by dlsym on OpenBLAS's
 * handle: never through the global symbol, which in a program that loaded the shim is the
 * shim's own. */
typedef struct blas_host {
#define BLAS_X_FSUB(name, params, args) void(*name) params;
#define BLAS_X_FFUN(ret, name, params, args) ret(*name) params;
#define BLAS_X_CSUB(name, params, args, check) void(*name) params;
  BLAS_F77_FORWARDED(BLAS_X_FSUB, BLAS_X_FFUN)
  BLAS_F77_LEVEL3(BLAS_X_FSUB)
  CBLAS_FORWARDED(BLAS_X_CSUB, BLAS_X_FFUN)
#undef BLAS_X_FSUB
#undef BLAS_X_FFUN
#undef BLAS_X_CSUB
} blas_host;

/* The table, filled once per process (pthread_once) on first use. A host BLAS that cannot be
 * opened, or lacks a routine, ends the process with a one-line message: a BLAS routine has no
 * way to report an error. Thread-safe. */
BLAS_HIDDEN const blas_host *loom__blas_host(void);
/* The file the table was read from. */
BLAS_HIDDEN const char *loom__blas_host_path(void);

/* ---- reference CBLAS's argument checks (blas_cblas.c) ------------------------------------- */

/* Each returns true when the arguments are valid; else it calls cblas_xerbla (the program's
 * own where it has one) with the position of the first invalid argument in the CBLAS call, as
 * reference CBLAS reports it, and returns false. BLAS_NONE / BLAS_PACKED stand for arguments
 * the routine does not have. */
BLAS_HIDDEN bool blas_check_gemv(const char *name, int layout, int trans, int m, int n, int lda, int incx,
                                 int incy);
BLAS_HIDDEN bool blas_check_gbmv(const char *name, int layout, int trans, int m, int n, int kl, int ku,
                                 int lda, int incx, int incy);
BLAS_HIDDEN bool blas_check_tr(const char *name, int layout, int uplo, int trans, int diag, int n, int k,
                               int lda, int incx);
BLAS_HIDDEN bool blas_check_symv(const char *name, int layout, int uplo, int n, int k, int lda, int incx,
                                 int incy);
BLAS_HIDDEN bool blas_check_syr(const char *name, int layout, int uplo, int n, int incx, int incy, int lda);
BLAS_HIDDEN bool blas_check_ger(const char *name, int layout, int m, int n, int incx, int incy, int lda);
/* Calls cblas_xerbla(pos, name, ...) through the global symbol; resets RowMajorStrg first so
 * that a test harness's cblas_xerbla takes `pos` as the CBLAS position it is. */
BLAS_HIDDEN void blas_cblas_error(int pos, const char *name);
/* Reference CBLAS's globals, exported as it does (its test programs read or define them). */
BLAS_EXPORT extern int RowMajorStrg;
BLAS_EXPORT extern int CBLAS_CallFromC;

/* ---- level 3 (blas_level3.c, blas_loom.c) ------------------------------------------------- */

typedef enum blas_prec { BLAS_S, BLAS_D, BLAS_C, BLAS_Z } blas_prec;

/* A level-3 call in column-major form, arguments already checked: what Fortran's routine
 * takes, with the characters upper-cased ('N', 'T', 'C'; 'L', 'R'; 'U', 'L'; 'N', 'U'). */
typedef enum blas_l3_kind {
  BLAS_GEMM,
  BLAS_SYMM,
  BLAS_HEMM,
  BLAS_SYRK,
  BLAS_HERK,
  BLAS_SYR2K,
  BLAS_HER2K,
  BLAS_TRMM,
  BLAS_TRSM
} blas_l3_kind;

typedef struct blas_l3 {
  blas_l3_kind kind;
  blas_prec prec;
  char side, uplo, transa, transb, diag;
  int m, n, k;
  const void *alpha, *beta; /* herk: real alpha and beta; her2k: real beta */
  const void *a, *b;
  void *c; /* trmm, trsm: b, written */
  int lda, ldb, ldc;
  double alpha_buf[2]; /* a CBLAS call's alpha, held here (by value, or conjugated) */
  double beta_buf[2];
} blas_l3;

/* Runs the call: through Loom when it passes the threshold (or LOOM_BLAS_FORCE=1) and Loom
 * can take it, else (and when Loom fails) on the host BLAS. Prints the verbose line. */
BLAS_HIDDEN void loom__blas_l3_run(const blas_l3 *call);
/* Runs it on the host BLAS's Fortran routine. */
BLAS_HIDDEN void loom__blas_l3_host(const blas_l3 *call);
/* Tries it through Loom: true when done (C written), false when it should go to the host (the
 * reason logged where LOOM_BLAS_VERBOSE is set). `device` receives where it ran. */
BLAS_HIDDEN bool loom__blas_l3_loom(const blas_l3 *call, char *device, int device_size);
/* Whether the call goes to Loom by the settings (threshold, LOOM_BLAS_FORCE). */
BLAS_HIDDEN bool loom__blas_l3_wanted(const blas_l3 *call);
/* trsm as a blocked composition (blas_trsm.c): the diagonal blocks' solves on the host BLAS,
 * the updates between them as gemm calls through loom__blas_l3_run. False (nothing done) where
 * the triangle's order is under two blocks or alpha is zero; the caller then runs the host's. */
BLAS_HIDDEN bool loom__blas_trsm_blocked(const blas_l3 *call);
/* Whether a trsm's gemm updates would leave the host: LOOM_BLAS_FORCE=1, or the placement of
 * a gemm of the trsm's size is a device other than cpu0 (one or a shared set). */
BLAS_HIDDEN bool loom__blas_trsm_offloads(const blas_l3 *call);
/* ---- host copies for Loom's graphs (blas_copy.c) ------------------------------------------ */

typedef enum blas_full {
  BLAS_FULL_SYMMETRIC,      /* symm: the stored triangle mirrored */
  BLAS_FULL_HERMITIAN,      /* hemm: mirrored and conjugated, the diagonal's imaginary parts 0 */
  BLAS_FULL_TRIANGULAR,     /* trmm: zeros outside the triangle, ones on a unit diagonal */
  BLAS_FULL_TRIANGULAR_CONJ /* trmm with 'C': the triangular matrix conjugated */
} blas_full;

/* The full ka x ka matrix of the triangle c->uplo of c->a (leading dimension c->lda; unit
 * diagonal by c->diag for the triangular forms), dense column-major. Caller frees it; NULL
 * when out of host memory. */
BLAS_HIDDEN void *loom__blas_full_matrix(const blas_l3 *c, int ka, blas_full form);
/* A dense column-major rows x cols copy of scale * conj(X), X complex in c->prec with leading
 * dimension ld; scale: a complex (real, imaginary) pair, NULL for 1. Caller frees it; NULL when
 * out of host memory. */
BLAS_HIDDEN void *loom__blas_conj_copy(const blas_l3 *c, const void *x, int rows, int cols, int ld,
                                       const double *scale);
/* LOOM_BLAS_VERBOSE=1. */
BLAS_HIDDEN bool loom__blas_verbose(void);

#endif
