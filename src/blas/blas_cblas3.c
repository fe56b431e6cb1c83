/* CBLAS level 3: reference CBLAS's checks (positions in the CBLAS call, its order), then the
 * column-major call (blas_l3) run by loom__blas_l3_run. Row-major calls become the
 * column-major call on the transposed matrices, as reference CBLAS makes them.
 */
#include <string.h>

#include "blas/blas.h"

static int max1(int v) {
  return v > 1 ? v : 1;
}
static char trans_char(int t) {
  return t == BLAS_NO_TRANS ? 'N' : t == BLAS_TRANS ? 'T' : t == BLAS_CONJ_TRANS ? 'C' : '?';
}
static char flip_uplo(char u) {
  return u == 'U' ? 'L' : 'U';
}

static bool check(const char *name, const bool *fails, const int *pos, int n) {
  for (int i = 0; i < n; i++)
    if (fails[i]) {
      blas_cblas_error(pos[i], name);
      return false;
    }
  return true;
}

static bool layout_bad(int l) {
  return l != BLAS_ROW_MAJOR && l != BLAS_COL_MAJOR;
}

static bool gemm_prepare(const char *name, int layout, int ta, int tb, int m, int n, int k, int lda, int ldb,
                         int ldc, blas_l3 *c) {
  bool row = layout == BLAS_ROW_MAJOR, na = ta == BLAS_NO_TRANS, nb = tb == BLAS_NO_TRANS;
  int ra = row ? (na ? k : m) : (na ? m : k), rb = row ? (nb ? n : k) : (nb ? k : n);
  bool fails[] = {layout_bad(layout), trans_char(ta) == '?', trans_char(tb) == '?',  m < 0, n < 0, k < 0,
                  lda < max1(ra),     ldb < max1(rb),        ldc < max1(row ? n : m)};
  static const int pos[] = {1, 2, 3, 4, 5, 6, 9, 11, 14};
  if (!check(name, fails, pos, 9)) return false;
  c->k = k, c->ldc = ldc;
  if (row) { /* C^T = op(B)^T op(A)^T */
    const void *a = c->a;
    c->a = c->b, c->b = a;
    c->transa = trans_char(tb), c->transb = trans_char(ta);
    c->m = n, c->n = m, c->lda = ldb, c->ldb = lda;
  } else {
    c->transa = trans_char(ta), c->transb = trans_char(tb);
    c->m = m, c->n = n, c->lda = lda, c->ldb = ldb;
  }
  return true;
}

/* symm, hemm. */
static bool symm_prepare(const char *name, int layout, int side, int uplo, int m, int n, int lda, int ldb,
                         int ldc, blas_l3 *c) {
  bool row = layout == BLAS_ROW_MAJOR, left = side == BLAS_LEFT;
  bool fails[] = {layout_bad(layout),
                  side != BLAS_LEFT && side != BLAS_RIGHT,
                  uplo != BLAS_UPPER && uplo != BLAS_LOWER,
                  m < 0,
                  n < 0,
                  lda < max1(left ? m : n),
                  ldb < max1(row ? n : m),
                  ldc < max1(row ? n : m)};
  static const int pos[] = {1, 2, 3, 4, 5, 8, 10, 13};
  if (!check(name, fails, pos, 8)) return false;
  c->side = left != row ? 'L' : 'R';
  c->uplo = (uplo == BLAS_UPPER) != row ? 'U' : 'L';
  c->m = row ? n : m, c->n = row ? m : n;
  c->lda = lda, c->ldb = ldb, c->ldc = ldc;
  return true;
}

/* syrk, herk, syr2k, her2k: trans as reference CBLAS accepts it for the routine. */
static bool syrk_prepare(const char *name, int layout, int uplo, int trans, int n, int k, int lda, int ldb,
                         int ldc, blas_l3 *c) {
  bool row = layout == BLAS_ROW_MAJOR, cplx = c->prec == BLAS_C || c->prec == BLAS_Z;
  bool herm = c->kind == BLAS_HERK || c->kind == BLAS_HER2K,
       two = c->kind == BLAS_SYR2K || c->kind == BLAS_HER2K;
  bool t_ok = trans == BLAS_NO_TRANS || (trans == BLAS_TRANS && !herm) ||
              (trans == BLAS_CONJ_TRANS && (herm || !cplx));
  int rows = (trans == BLAS_NO_TRANS) != row ? n : k;
  bool fails[] = {layout_bad(layout),
                  uplo != BLAS_UPPER && uplo != BLAS_LOWER,
                  !t_ok,
                  n < 0,
                  k < 0,
                  lda < max1(rows),
                  two && ldb < max1(rows),
                  ldc < max1(n)};
  int pos[] = {1, 2, 3, 4, 5, 8, 10, two ? 13 : 11};
  if (!check(name, fails, pos, 8)) return false;
  char t = trans == BLAS_NO_TRANS ? 'N' : herm ? 'C' : 'T';
  if (row) t = t == 'N' ? (herm ? 'C' : 'T') : 'N';
  c->uplo = uplo == BLAS_UPPER ? 'U' : 'L';
  if (row) c->uplo = flip_uplo(c->uplo);
  c->transa = t, c->n = n, c->k = k;
  c->lda = lda, c->ldb = ldb, c->ldc = ldc;
  return true;
}

/* trmm, trsm. */
static bool trxm_prepare(const char *name, int layout, int side, int uplo, int ta, int diag, int m, int n,
                         int lda, int ldb, blas_l3 *c) {
  bool row = layout == BLAS_ROW_MAJOR, left = side == BLAS_LEFT;
  bool fails[] = {layout_bad(layout),
                  side != BLAS_LEFT && side != BLAS_RIGHT,
                  uplo != BLAS_UPPER && uplo != BLAS_LOWER,
                  trans_char(ta) == '?',
                  diag != BLAS_UNIT && diag != BLAS_NON_UNIT,
                  m < 0,
                  n < 0,
                  lda < max1(left ? m : n),
                  ldb < max1(row ? n : m)};
  static const int pos[] = {1, 2, 3, 4, 5, 6, 7, 10, 12};
  if (!check(name, fails, pos, 9)) return false;
  c->side = left != row ? 'L' : 'R';
  c->uplo = (uplo == BLAS_UPPER) != row ? 'U' : 'L';
  c->transa = trans_char(ta), c->diag = diag == BLAS_UNIT ? 'U' : 'N';
  c->m = row ? n : m, c->n = row ? m : n;
  c->lda = lda, c->ldc = ldb;
  return true;
}

/* A real scalar by value, held in the call. */
#define HOLD(buf, v) (memcpy((buf), &(v), sizeof(v)), (const void *)(buf))
/* S: the scalar parameter type; SCALAR(call, v): its pointer. */
#define REAL_SCALAR(buf, v) HOLD(buf, v)
#define CPLX_SCALAR(buf, v) (v)

#define CBLAS_GEMM(p, P, T, S, SC)                                                                          \
  BLAS_EXPORT void cblas_##p##gemm(const cblas_layout layout, const cblas_trans ta, const cblas_trans tb,   \
                                   const int m, const int n, const int k, S alpha, const T *a,              \
                                   const int lda, const T *b, const int ldb, S beta, T *c, const int ldc) { \
    RowMajorStrgReset();                                                                                    \
    blas_l3 call = {.prec = P, .a = a, .b = b, .c = c};                                                     \
    call.alpha = SC(call.alpha_buf, alpha), call.beta = SC(call.beta_buf, beta);                            \
    if (gemm_prepare("cblas_" #p "gemm", layout, ta, tb, m, n, k, lda, ldb, ldc, &call))                    \
      loom__blas_l3_run(&call);                                                                             \
  }

#define CBLAS_SYMM(p, P, T, S, SC, sy, KIND)                                                             \
  BLAS_EXPORT void cblas_##p##sy##mm(                                                                    \
      const cblas_layout layout, const cblas_side side, const cblas_uplo uplo, const int m, const int n, \
      S alpha, const T *a, const int lda, const T *b, const int ldb, S beta, T *c, const int ldc) {      \
    RowMajorStrgReset();                                                                                 \
    blas_l3 call = {.kind = KIND, .prec = P, .a = a, .b = b, .c = c};                                    \
    call.alpha = SC(call.alpha_buf, alpha), call.beta = SC(call.beta_buf, beta);                         \
    if (symm_prepare("cblas_" #p #sy "mm", layout, side, uplo, m, n, lda, ldb, ldc, &call))              \
      loom__blas_l3_run(&call);                                                                          \
  }

/* syrk, herk (SA, SB: alpha's and beta's types). */
#define CBLAS_SYRK(p, P, T, SA, SCA, SB, SCB, sy, KIND)                                           \
  BLAS_EXPORT void cblas_##p##sy##rk(const cblas_layout layout, const cblas_uplo uplo,            \
                                     const cblas_trans trans, const int n, const int k, SA alpha, \
                                     const T *a, const int lda, SB beta, T *c, const int ldc) {   \
    RowMajorStrgReset();                                                                          \
    blas_l3 call = {.kind = KIND, .prec = P, .a = a, .c = c};                                     \
    call.alpha = SCA(call.alpha_buf, alpha), call.beta = SCB(call.beta_buf, beta);                \
    if (syrk_prepare("cblas_" #p #sy "rk", layout, uplo, trans, n, k, lda, 0, ldc, &call))        \
      loom__blas_l3_run(&call);                                                                   \
  }

/* syr2k, her2k; CONJ: her2k's row-major form takes alpha conjugated (reference CBLAS). */
#define CBLAS_SYR2K(p, P, T, SA, SCA, SB, SCB, sy, KIND, CONJ)                                             \
  BLAS_EXPORT void cblas_##p##sy##r2k(                                                                     \
      const cblas_layout layout, const cblas_uplo uplo, const cblas_trans trans, const int n, const int k, \
      SA alpha, const T *a, const int lda, const T *b, const int ldb, SB beta, T *c, const int ldc) {      \
    RowMajorStrgReset();                                                                                   \
    blas_l3 call = {.kind = KIND, .prec = P, .a = a, .b = b, .c = c};                                      \
    call.alpha = SCA(call.alpha_buf, alpha), call.beta = SCB(call.beta_buf, beta);                         \
    if (!syrk_prepare("cblas_" #p #sy "r2k", layout, uplo, trans, n, k, lda, ldb, ldc, &call)) return;     \
    if (CONJ && layout == BLAS_ROW_MAJOR) conj_alpha(&call);                                               \
    loom__blas_l3_run(&call);                                                                              \
  }

#define CBLAS_TRXM(p, P, T, S, SC, op, KIND)                                                              \
  BLAS_EXPORT void cblas_##p##op(const cblas_layout layout, const cblas_side side, const cblas_uplo uplo, \
                                 const cblas_trans ta, const cblas_diag diag, const int m, const int n,   \
                                 S alpha, const T *a, const int lda, T *b, const int ldb) {               \
    RowMajorStrgReset();                                                                                  \
    blas_l3 call = {.kind = KIND, .prec = P, .a = a, .c = b};                                             \
    call.alpha = SC(call.alpha_buf, alpha);                                                               \
    if (trxm_prepare("cblas_" #p #op, layout, side, uplo, ta, diag, m, n, lda, ldb, &call))               \
      loom__blas_l3_run(&call);                                                                           \
  }

/* Reference CBLAS clears RowMajorStrg on entry to every level-3 routine. */
#define RowMajorStrgReset() (RowMajorStrg = 0)

static void conj_alpha(blas_l3 *c) {
  if (c->prec == BLAS_C) {
    float v[2];
    memcpy(v, c->alpha, sizeof v);
    v[1] = -v[1];
    memcpy(c->alpha_buf, v, sizeof v);
  } else {
    double v[2];
    memcpy(v, c->alpha, sizeof v);
    v[1] = -v[1];
    memcpy(c->alpha_buf, v, sizeof v);
  }
  c->alpha = c->alpha_buf;
}

#define CBLAS_ALL(p, P, T, S, SC)                       \
  CBLAS_GEMM(p, P, T, S, SC)                            \
  CBLAS_SYMM(p, P, T, S, SC, sy, BLAS_SYMM)             \
  CBLAS_SYRK(p, P, T, S, SC, S, SC, sy, BLAS_SYRK)      \
  CBLAS_SYR2K(p, P, T, S, SC, S, SC, sy, BLAS_SYR2K, 0) \
  CBLAS_TRXM(p, P, T, S, SC, trmm, BLAS_TRMM)           \
  CBLAS_TRXM(p, P, T, S, SC, trsm, BLAS_TRSM)
#define CBLAS_HERM(p, P, R)                                                         \
  CBLAS_SYMM(p, P, void, const void *, CPLX_SCALAR, he, BLAS_HEMM)                  \
  CBLAS_SYRK(p, P, void, const R, REAL_SCALAR, const R, REAL_SCALAR, he, BLAS_HERK) \
  CBLAS_SYR2K(p, P, void, const void *, CPLX_SCALAR, const R, REAL_SCALAR, he, BLAS_HER2K, 1)

CBLAS_ALL(s, BLAS_S, float, const float, REAL_SCALAR)
CBLAS_ALL(d, BLAS_D, double, const double, REAL_SCALAR)
CBLAS_ALL(c, BLAS_C, void, const void *, CPLX_SCALAR)
CBLAS_ALL(z, BLAS_Z, void, const void *, CPLX_SCALAR)
CBLAS_HERM(c, BLAS_C, float)
CBLAS_HERM(z, BLAS_Z, double)
