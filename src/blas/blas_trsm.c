/* trsm through Loom as a blocked composition: the IR has no triangular solve, but a large solve
 * is mostly matrix products. op(A) is split in two along its order, recursively down to blocks
 * of TRSM_BLOCK; the solves on the diagonal blocks run on the host BLAS, and each off-diagonal
 * update (B2 := alpha B2 - op(A)21 X1, and its three mirror images) is a gemm call dispatched as
 * any other (loom__blas_l3_run: through Loom where it passes the threshold and the placement
 * is not cpu0, else OpenBLAS). Half of the flops are in the top-level update, a quarter in the
 * next level's, and so on: all but the diagonal blocks' share go through gemm.
 */
#include <string.h>

#include "blas/blas.h"

#define TRSM_BLOCK 256

static const double minus_one[2] = {-1.0, 0.0}, one_d[2] = {1.0, 0.0};
static const float minus_one_f[2] = {-1.0f, 0.0f}, one_f[2] = {1.0f, 0.0f};

static int64_t esize(blas_prec p) {
  return p == BLAS_S ? 4 : p == BLAS_D || p == BLAS_C ? 8 : 16;
}

/* Element (i, j) of a column-major matrix. */
static const char *at(const void *base, int ld, int i, int j, int64_t es) {
  return (const char *)base + ((int64_t)j * ld + i) * es;
}

/* The order split in two: the first part a multiple of the block, about half. */
static int first_part(int k) {
  int half = (k / 2 + TRSM_BLOCK - 1) / TRSM_BLOCK * TRSM_BLOCK;
  return half > 0 && half < k ? half : k / 2;
}

/* C := -1 op_a(A) op_b(B) + beta C, m x n x k, through the level-3 dispatch. */
static void update(const blas_l3 *t, char ta, char tb, int m, int n, int k, const void *a, int lda,
                   const void *b, int ldb, const void *beta, void *c, int ldc) {
  bool single = t->prec == BLAS_S || t->prec == BLAS_C;
  blas_l3 g = {.kind = BLAS_GEMM,
               .prec = t->prec,
               .transa = ta,
               .transb = tb,
               .m = m,
               .n = n,
               .k = k,
               .alpha = single ? (const void *)minus_one_f : (const void *)minus_one,
               .beta = beta,
               .a = a,
               .b = b,
               .c = c,
               .lda = lda,
               .ldb = ldb,
               .ldc = ldc};
  loom__blas_l3_run(&g);
}

/* Solves op(A) X = alpha B (side L) or X op(A) = alpha B (side R) in place of B (t->c). */
static void solve(const blas_l3 *t) {
  int k = t->side == 'L' ? t->m : t->n;
  if (k <= TRSM_BLOCK) {
    loom__blas_l3_host(t);
    return;
  }
  int64_t es = esize(t->prec);
  int k1 = first_part(k), k2 = k - k1;
  /* op(A) lower: its first block is solved first on the left, last on the right. */
  bool lower = (t->uplo == 'L') == (t->transa == 'N');
  bool t_first = t->side == 'L' ? lower : !lower;
  /* The off-diagonal block of op(A) that couples them: op(A)21 (lower) or op(A)12 (upper), as
   * stored: below the diagonal for uplo 'L', right of it for 'U'. */
  const void *off = t->uplo == 'L' ? at(t->a, t->lda, k1, 0, es) : at(t->a, t->lda, 0, k1, es);
  blas_l3 p1 = *t, p2 = *t;
  p1.a = t->a, p2.a = at(t->a, t->lda, k1, k1, es);
  const void *unit = t->prec == BLAS_S || t->prec == BLAS_C ? (const void *)one_f : (const void *)one_d;
  if (t->side == 'L') {
    p1.m = k1, p2.m = k2, p2.c = (void *)at(t->c, t->ldc, k1, 0, es);
  } else {
    p1.n = k1, p2.n = k2, p2.c = (void *)at(t->c, t->ldc, 0, k1, es);
  }
  blas_l3 *first = t_first ? &p1 : &p2, *second = t_first ? &p2 : &p1;
  /* B_second := alpha B_second - (coupling) X_first; then solved with alpha 1. */
  solve(first);
  if (t->side == 'L')
    update(t, t->transa, 'N', second->m, t->n, first->m, off, t->lda, first->c, t->ldc, t->alpha, second->c,
           t->ldc);
  else
    update(t, 'N', t->transa, t->m, second->n, first->n, first->c, t->ldc, off, t->lda, t->alpha, second->c,
           t->ldc);
  second->alpha = unit;
  solve(second);
}

bool loom__blas_trsm_blocked(const blas_l3 *t) {
  int k = t->side == 'L' ? t->m : t->n, other = t->side == 'L' ? t->n : t->m;
  if (k < 2 * TRSM_BLOCK || other < 1) return false;
  /* alpha 0 sets B to zero without reading A: the host's quick return. */
  static const double zero[2] = {0, 0};
  if (memcmp(t->alpha, zero,
             (size_t)(t->prec == BLAS_S                        ? 4
                      : t->prec == BLAS_C || t->prec == BLAS_D ? 8
                                                               : 16)) == 0)
    return false;
  solve(t);
  return true;
}
