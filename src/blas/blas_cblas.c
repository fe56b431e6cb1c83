/* Reference CBLAS's error handling: the argument checks of the level-2 routines, cblas_xerbla,
 * and the two globals reference CBLAS exports (RowMajorStrg, CBLAS_CallFromC), which its test
 * programs read.
 *
 * Reference CBLAS checks the CBLAS-only arguments (layout, the enumerations) itself and leaves
 * the rest to the Fortran routine it calls, whose xerbla_ reports a position in the Fortran
 * call; its test harness maps that back to the position in the CBLAS call, using RowMajorStrg
 * for the row-major cases where the two calls' arguments differ. The shim checks everything
 * before OpenBLAS sees it and reports the CBLAS position directly, with RowMajorStrg 0 so that
 * the harness's map leaves it as it is. The checks run in reference CBLAS's order.
 */
#include <stdarg.h>
#include <stdio.h>

#include "blas/blas.h"

int RowMajorStrg = 0;
int CBLAS_CallFromC = 0;

BLAS_EXPORT void cblas_xerbla(int info, const char *rout, const char *form, ...);

/* The default handler, for a program without its own: the message reference CBLAS prints.
 * Reference CBLAS then ends the program; this one returns, as OpenBLAS's xerbla_ does, and the
 * call does nothing. */
void cblas_xerbla(int info, const char *rout, const char *form, ...) {
  if (info) fprintf(stderr, "Parameter %d to routine %s was incorrect\n", info, rout);
  va_list args;
  va_start(args, form);
  vfprintf(stderr, form, args);
  va_end(args);
}

void blas_cblas_error(int pos, const char *name) {
  RowMajorStrg = 0;
  CBLAS_CallFromC = 0;
  cblas_xerbla(pos, name, "");
}

static int max1(int v) {
  return v > 1 ? v : 1;
}

static bool bad_layout(int layout) {
  return layout != BLAS_ROW_MAJOR && layout != BLAS_COL_MAJOR;
}
static bool bad_trans(int t) {
  return t != BLAS_NO_TRANS && t != BLAS_TRANS && t != BLAS_CONJ_TRANS;
}
static bool bad_uplo(int u) {
  return u != BLAS_UPPER && u != BLAS_LOWER;
}
static bool bad_diag(int d) {
  return d != BLAS_NON_UNIT && d != BLAS_UNIT;
}

/* Reports the first true entry of fails[] (positions pos[]); true when there was none. */
static bool first_failure(const char *name, const bool *fails, const int *pos, int n) {
  for (int i = 0; i < n; i++)
    if (fails[i]) {
      blas_cblas_error(pos[i], name);
      return false;
    }
  return true;
}

bool blas_check_gemv(const char *name, int layout, int trans, int m, int n, int lda, int incx, int incy) {
  int rows = layout == BLAS_ROW_MAJOR ? n : m;
  bool fails[] = {bad_layout(layout), bad_trans(trans), m < 0, n < 0, lda < max1(rows), incx == 0, incy == 0};
  static const int pos[] = {1, 2, 3, 4, 7, 9, 12};
  return first_failure(name, fails, pos, 7);
}

bool blas_check_gbmv(const char *name, int layout, int trans, int m, int n, int kl, int ku, int lda, int incx,
                     int incy) {
  bool fails[] = {bad_layout(layout), bad_trans(trans), m < 0,    n < 0, kl < 0, ku < 0,
                  lda < kl + ku + 1,  incx == 0,        incy == 0};
  static const int pos[] = {1, 2, 3, 4, 5, 6, 9, 11, 14};
  return first_failure(name, fails, pos, 9);
}

/* trmv/trsv (k BLAS_NONE), tbmv/tbsv (k), tpmv/tpsv (k BLAS_PACKED). */
bool blas_check_tr(const char *name, int layout, int uplo, int trans, int diag, int n, int k, int lda,
                   int incx) {
  bool band = k != BLAS_NONE && k != BLAS_PACKED, packed = k == BLAS_PACKED;
  bool fails[] = {bad_layout(layout),
                  bad_uplo(uplo),
                  bad_trans(trans),
                  bad_diag(diag),
                  n < 0,
                  band && k < 0,
                  !packed && lda < (band ? k + 1 : max1(n)),
                  incx == 0};
  int pos[] = {1, 2, 3, 4, 5, 6, band ? 8 : 7, packed ? 8 : band ? 10 : 9};
  return first_failure(name, fails, pos, 8);
}

/* symv/hemv (k BLAS_NONE), sbmv/hbmv (k), spmv/hpmv (k BLAS_PACKED). */
bool blas_check_symv(const char *name, int layout, int uplo, int n, int k, int lda, int incx, int incy) {
  bool band = k != BLAS_NONE && k != BLAS_PACKED, packed = k == BLAS_PACKED;
  bool fails[] = {
      bad_layout(layout), bad_uplo(uplo), n < 0, band && k < 0, !packed && lda < (band ? k + 1 : max1(n)),
      incx == 0,          incy == 0};
  int pos[] = {1, 2, 3, 4, band ? 7 : 6, packed ? 7 : band ? 9 : 8, packed ? 10 : band ? 12 : 11};
  return first_failure(name, fails, pos, 7);
}

/* syr/her (incy BLAS_NONE), spr/hpr (incy and lda BLAS_NONE), syr2/her2, spr2/hpr2 (lda
 * BLAS_NONE). */
bool blas_check_syr(const char *name, int layout, int uplo, int n, int incx, int incy, int lda) {
  bool two = incy != BLAS_NONE, full = lda != BLAS_NONE;
  bool fails[] = {bad_layout(layout), bad_uplo(uplo),   n < 0,
                  incx == 0,          two && incy == 0, full && lda < max1(n)};
  int pos[] = {1, 2, 3, 6, 8, two ? 10 : 8};
  return first_failure(name, fails, pos, 6);
}

bool blas_check_ger(const char *name, int layout, int m, int n, int incx, int incy, int lda) {
  int rows = layout == BLAS_ROW_MAJOR ? n : m;
  bool fails[] = {bad_layout(layout), m < 0, n < 0, incx == 0, incy == 0, lda < max1(rows)};
  static const int pos[] = {1, 2, 3, 6, 8, 10};
  return first_failure(name, fails, pos, 6);
}
