/* The level-3 routines (gemm, symm, hemm, syrk, herk, syr2k, her2k, trmm, trsm; Fortran and
 * CBLAS): each call is checked, put in column-major form (blas_l3), and run through Loom or on
 * the host BLAS (loom__blas_l3_run).
 *
 * Bad arguments: a Fortran call with any goes to the host BLAS as it is, whose routine calls
 * xerbla_ with reference BLAS's position (OpenBLAS passes reference BLAS's error-exit tests);
 * a CBLAS call is checked here, in reference CBLAS's order, and reported with cblas_xerbla.
 * A row-major CBLAS call is the column-major call on the transposed matrices, as reference
 * CBLAS makes it (her2k: with alpha conjugated).
 */
#include <stdio.h>
#include <string.h>

#include "blas/blas.h"

static char up(char c) {
  return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
}
static int max1(int v) {
  return v > 1 ? v : 1;
}

/* ---- the Fortran routines ------------------------------------------------------------------ */

/* Whether reference BLAS accepts the call (its xerbla_ would not be called). */
static bool f77_valid(const blas_l3 *c) {
  bool cplx = c->prec == BLAS_C || c->prec == BLAS_Z;
  bool trans_ok = c->transa == 'N' || c->transa == 'T' || c->transa == 'C';
  bool uplo_ok = c->uplo == 'U' || c->uplo == 'L', side_ok = c->side == 'L' || c->side == 'R';
  int ka = c->side == 'L' ? c->m : c->n, nrowa = c->transa == 'N' ? c->n : c->k;
  switch (c->kind) {
    case BLAS_GEMM: {
      bool tb_ok = c->transb == 'N' || c->transb == 'T' || c->transb == 'C';
      int ra = c->transa == 'N' ? c->m : c->k, rb = c->transb == 'N' ? c->k : c->n;
      return trans_ok && tb_ok && c->m >= 0 && c->n >= 0 && c->k >= 0 && c->lda >= max1(ra) &&
             c->ldb >= max1(rb) && c->ldc >= max1(c->m);
    }
    case BLAS_SYMM:
    case BLAS_HEMM:
      return side_ok && uplo_ok && c->m >= 0 && c->n >= 0 && c->lda >= max1(ka) && c->ldb >= max1(c->m) &&
             c->ldc >= max1(c->m);
    case BLAS_SYRK:
    case BLAS_SYR2K:
    case BLAS_HERK:
    case BLAS_HER2K: {
      bool herm = c->kind == BLAS_HERK || c->kind == BLAS_HER2K;
      bool t_ok = c->transa == 'N' || (c->transa == 'T' && !herm) || (c->transa == 'C' && (herm || !cplx));
      bool two = c->kind == BLAS_SYR2K || c->kind == BLAS_HER2K;
      return uplo_ok && t_ok && c->n >= 0 && c->k >= 0 && c->lda >= max1(nrowa) &&
             (!two || c->ldb >= max1(nrowa)) && c->ldc >= max1(c->n);
    }
    default: /* trmm, trsm */
      return side_ok && uplo_ok && trans_ok && (c->diag == 'U' || c->diag == 'N') && c->m >= 0 && c->n >= 0 &&
             c->lda >= max1(ka) && c->ldc >= max1(c->m);
  }
}

#define F77_GEMM(p, P, T)                                                                                   \
  BLAS_EXPORT void p##gemm_(const char *ta, const char *tb, const blas_int *m, const blas_int *n,           \
                            const blas_int *k, const T *alpha, const T *a, const blas_int *lda, const T *b, \
                            const blas_int *ldb, const T *beta, T *c, const blas_int *ldc, blas_len l1,     \
                            blas_len l2) {                                                                  \
    blas_l3 call = {.kind = BLAS_GEMM,                                                                      \
                    .prec = P,                                                                              \
                    .transa = up(*ta),                                                                      \
                    .transb = up(*tb),                                                                      \
                    .m = *m,                                                                                \
                    .n = *n,                                                                                \
                    .k = *k,                                                                                \
                    .alpha = alpha,                                                                         \
                    .beta = beta,                                                                           \
                    .a = a,                                                                                 \
                    .b = b,                                                                                 \
                    .c = c,                                                                                 \
                    .lda = *lda,                                                                            \
                    .ldb = *ldb,                                                                            \
                    .ldc = *ldc};                                                                           \
    if (f77_valid(&call))                                                                                   \
      loom__blas_l3_run(&call);                                                                             \
    else                                                                                                    \
      loom__blas_host()->p##gemm_(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, l1, l2);            \
  }

/* symm, hemm. */
#define F77_SYMM(p, P, T, sy, KIND)                                                                       \
  BLAS_EXPORT void p##sy##mm_(const char *side, const char *uplo, const blas_int *m, const blas_int *n,   \
                              const T *alpha, const T *a, const blas_int *lda, const T *b,                \
                              const blas_int *ldb, const T *beta, T *c, const blas_int *ldc, blas_len l1, \
                              blas_len l2) {                                                              \
    blas_l3 call = {.kind = KIND,                                                                         \
                    .prec = P,                                                                            \
                    .side = up(*side),                                                                    \
                    .uplo = up(*uplo),                                                                    \
                    .m = *m,                                                                              \
                    .n = *n,                                                                              \
                    .alpha = alpha,                                                                       \
                    .beta = beta,                                                                         \
                    .a = a,                                                                               \
                    .b = b,                                                                               \
                    .c = c,                                                                               \
                    .lda = *lda,                                                                          \
                    .ldb = *ldb,                                                                          \
                    .ldc = *ldc};                                                                         \
    if (f77_valid(&call))                                                                                 \
      loom__blas_l3_run(&call);                                                                           \
    else                                                                                                  \
      loom__blas_host()->p##sy##mm_(side, uplo, m, n, alpha, a, lda, b, ldb, beta, c, ldc, l1, l2);       \
  }

/* syrk, herk (S: the type of alpha and beta). */
#define F77_SYRK(p, P, T, S, sy, KIND)                                                                   \
  BLAS_EXPORT void p##sy##rk_(const char *uplo, const char *trans, const blas_int *n, const blas_int *k, \
                              const S *alpha, const T *a, const blas_int *lda, const S *beta, T *c,      \
                              const blas_int *ldc, blas_len l1, blas_len l2) {                           \
    blas_l3 call = {.kind = KIND,                                                                        \
                    .prec = P,                                                                           \
                    .uplo = up(*uplo),                                                                   \
                    .transa = up(*trans),                                                                \
                    .n = *n,                                                                             \
                    .k = *k,                                                                             \
                    .alpha = alpha,                                                                      \
                    .beta = beta,                                                                        \
                    .a = a,                                                                              \
                    .c = c,                                                                              \
                    .lda = *lda,                                                                         \
                    .ldc = *ldc};                                                                        \
    if (f77_valid(&call))                                                                                \
      loom__blas_l3_run(&call);                                                                          \
    else                                                                                                 \
      loom__blas_host()->p##sy##rk_(uplo, trans, n, k, alpha, a, lda, beta, c, ldc, l1, l2);             \
  }

/* syr2k, her2k (S: the type of beta). */
#define F77_SYR2K(p, P, T, S, sy, KIND)                                                                    \
  BLAS_EXPORT void p##sy##r2k_(const char *uplo, const char *trans, const blas_int *n, const blas_int *k,  \
                               const T *alpha, const T *a, const blas_int *lda, const T *b,                \
                               const blas_int *ldb, const S *beta, T *c, const blas_int *ldc, blas_len l1, \
                               blas_len l2) {                                                              \
    blas_l3 call = {.kind = KIND,                                                                          \
                    .prec = P,                                                                             \
                    .uplo = up(*uplo),                                                                     \
                    .transa = up(*trans),                                                                  \
                    .n = *n,                                                                               \
                    .k = *k,                                                                               \
                    .alpha = alpha,                                                                        \
                    .beta = beta,                                                                          \
                    .a = a,                                                                                \
                    .b = b,                                                                                \
                    .c = c,                                                                                \
                    .lda = *lda,                                                                           \
                    .ldb = *ldb,                                                                           \
                    .ldc = *ldc};                                                                          \
    if (f77_valid(&call))                                                                                  \
      loom__blas_l3_run(&call);                                                                            \
    else                                                                                                   \
      loom__blas_host()->p##sy##r2k_(uplo, trans, n, k, alpha, a, lda, b, ldb, beta, c, ldc, l1, l2);      \
  }

/* trmm, trsm. */
#define F77_TRXM(p, P, T, op, KIND)                                                                   \
  BLAS_EXPORT void p##op##_(const char *side, const char *uplo, const char *ta, const char *diag,     \
                            const blas_int *m, const blas_int *n, const T *alpha, const T *a,         \
                            const blas_int *lda, T *b, const blas_int *ldb, blas_len l1, blas_len l2, \
                            blas_len l3, blas_len l4) {                                               \
    blas_l3 call = {.kind = KIND,                                                                     \
                    .prec = P,                                                                        \
                    .side = up(*side),                                                                \
                    .uplo = up(*uplo),                                                                \
                    .transa = up(*ta),                                                                \
                    .diag = up(*diag),                                                                \
                    .m = *m,                                                                          \
                    .n = *n,                                                                          \
                    .alpha = alpha,                                                                   \
                    .a = a,                                                                           \
                    .c = b,                                                                           \
                    .lda = *lda,                                                                      \
                    .ldc = *ldb};                                                                     \
    if (f77_valid(&call))                                                                             \
      loom__blas_l3_run(&call);                                                                       \
    else                                                                                              \
      loom__blas_host()->p##op##_(side, uplo, ta, diag, m, n, alpha, a, lda, b, ldb, l1, l2, l3, l4); \
  }

#define F77_ALL(p, P, T)                \
  F77_GEMM(p, P, T)                     \
  F77_SYMM(p, P, T, sy, BLAS_SYMM)      \
  F77_SYRK(p, P, T, T, sy, BLAS_SYRK)   \
  F77_SYR2K(p, P, T, T, sy, BLAS_SYR2K) \
  F77_TRXM(p, P, T, trmm, BLAS_TRMM)    \
  F77_TRXM(p, P, T, trsm, BLAS_TRSM)
#define F77_HERM(p, P, R)                \
  F77_SYMM(p, P, void, he, BLAS_HEMM)    \
  F77_SYRK(p, P, void, R, he, BLAS_HERK) \
  F77_SYR2K(p, P, void, R, he, BLAS_HER2K)

F77_ALL(s, BLAS_S, float)
F77_ALL(d, BLAS_D, double)
F77_ALL(c, BLAS_C, void)
F77_ALL(z, BLAS_Z, void)
F77_HERM(c, BLAS_C, float)
F77_HERM(z, BLAS_Z, double)

/* ---- the host's Fortran routine ------------------------------------------------------------- */

#define HOST_CASE(P, p)                                                                                      \
  case P:                                                                                                    \
    switch (c->kind) {                                                                                       \
      case BLAS_GEMM:                                                                                        \
        h->p##gemm_(&c->transa, &c->transb, &c->m, &c->n, &c->k, c->alpha, c->a, &c->lda, c->b, &c->ldb,     \
                    c->beta, c->c, &c->ldc, 1, 1);                                                           \
        return;                                                                                              \
      case BLAS_SYMM:                                                                                        \
        h->p##symm_(&c->side, &c->uplo, &c->m, &c->n, c->alpha, c->a, &c->lda, c->b, &c->ldb, c->beta, c->c, \
                    &c->ldc, 1, 1);                                                                          \
        return;                                                                                              \
      case BLAS_SYRK:                                                                                        \
        h->p##syrk_(&c->uplo, &c->transa, &c->n, &c->k, c->alpha, c->a, &c->lda, c->beta, c->c, &c->ldc, 1,  \
                    1);                                                                                      \
        return;                                                                                              \
      case BLAS_SYR2K:                                                                                       \
        h->p##syr2k_(&c->uplo, &c->transa, &c->n, &c->k, c->alpha, c->a, &c->lda, c->b, &c->ldb, c->beta,    \
                     c->c, &c->ldc, 1, 1);                                                                   \
        return;                                                                                              \
      case BLAS_TRMM:                                                                                        \
        h->p##trmm_(&c->side, &c->uplo, &c->transa, &c->diag, &c->m, &c->n, c->alpha, c->a, &c->lda, c->c,   \
                    &c->ldc, 1, 1, 1, 1);                                                                    \
        return;                                                                                              \
      case BLAS_TRSM:                                                                                        \
        h->p##trsm_(&c->side, &c->uplo, &c->transa, &c->diag, &c->m, &c->n, c->alpha, c->a, &c->lda, c->c,   \
                    &c->ldc, 1, 1, 1, 1);                                                                    \
        return;                                                                                              \
      default:                                                                                               \
        break;                                                                                               \
    }                                                                                                        \
    break;

#define HOST_HERM(P, p)                                                                                    \
  case P:                                                                                                  \
    if (c->kind == BLAS_HEMM)                                                                              \
      h->p##hemm_(&c->side, &c->uplo, &c->m, &c->n, c->alpha, c->a, &c->lda, c->b, &c->ldb, c->beta, c->c, \
                  &c->ldc, 1, 1);                                                                          \
    else if (c->kind == BLAS_HERK)                                                                         \
      h->p##herk_(&c->uplo, &c->transa, &c->n, &c->k, c->alpha, c->a, &c->lda, c->beta, c->c, &c->ldc, 1,  \
                  1);                                                                                      \
    else                                                                                                   \
      h->p##her2k_(&c->uplo, &c->transa, &c->n, &c->k, c->alpha, c->a, &c->lda, c->b, &c->ldb, c->beta,    \
                   c->c, &c->ldc, 1, 1);                                                                   \
    return;

void loom__blas_l3_host(const blas_l3 *c) {
  const blas_host *h = loom__blas_host();
  switch (c->prec) {
    HOST_CASE(BLAS_S, s)
    HOST_CASE(BLAS_D, d)
    HOST_CASE(BLAS_C, c)
    HOST_CASE(BLAS_Z, z)
  }
  switch (c->prec) {
    HOST_HERM(BLAS_C, c)
    HOST_HERM(BLAS_Z, z)
    default:
      break;
  }
}

/* ---- the dispatch -------------------------------------------------------------------------- */

static const char *l3_name(const blas_l3 *c, char *buf, size_t size) {
  static const char *const kinds[] = {"gemm",  "symm",  "hemm", "syrk", "herk",
                                      "syr2k", "her2k", "trmm", "trsm"};
  snprintf(buf, size, "%c%s", "sdcz"[c->prec], kinds[c->kind]);
  return buf;
}

void loom__blas_l3_run(const blas_l3 *c) {
  char device[64] = "host", name[16];
  bool wanted = loom__blas_l3_wanted(c), loom = false;
  /* A large trsm: its gemm updates go where gemm calls go (their own verbose lines follow). */
  if (wanted && c->kind == BLAS_TRSM && loom__blas_trsm_offloads(c) && loom__blas_trsm_blocked(c))
    snprintf(device, sizeof device, "blocked"), loom = true;
  else if (wanted)
    loom = loom__blas_l3_loom(c, device, (int)sizeof device);
  if (!loom) {
    snprintf(device, sizeof device, "host");
    loom__blas_l3_host(c);
  }
  if (loom__blas_verbose()) {
    int m = c->m, n = c->n, k = c->k;
    if (c->kind == BLAS_SYRK || c->kind == BLAS_HERK || c->kind == BLAS_SYR2K || c->kind == BLAS_HER2K)
      m = c->n;
    else if (c->kind != BLAS_GEMM)
      k = c->side == 'L' ? c->m : c->n;
    fprintf(stderr, "loom-blas: %s %dx%dx%d -> %s\n", l3_name(c, name, sizeof name), m, n, k, device);
  }
}
