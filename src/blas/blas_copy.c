/* The host copies a level-3 call makes before Loom runs it: the IR has neither symmetric,
 * Hermitian nor triangular operands, and no conjugate (IR.md: complex dtypes take add, sub,
 * mul, div, neg, reduce_sum and dot, nothing that reaches the imaginary part alone). Each copy
 * is O(n k) beside the call's O(n^2 k) product, and is dense column-major (leading dimension =
 * rows), so it is a graph input with no further packing.
 */
#include <stdlib.h>
#include <string.h>

#include "blas/blas.h"

static int64_t element_size(blas_prec p) {
  return p == BLAS_S ? 4 : p == BLAS_D || p == BLAS_C ? 8 : 16;
}

static bool is_single(blas_prec p) {
  return p == BLAS_S || p == BLAS_C;
}

/* Negates the imaginary part of the complex element at e. */
static void conj_element(blas_prec p, char *e) {
  if (is_single(p))
    ((float *)e)[1] = -((float *)e)[1];
  else
    ((double *)e)[1] = -((double *)e)[1];
}

/* Sets the complex element at e to its real part (a Hermitian matrix's diagonal, as reference
 * BLAS reads it: the imaginary parts there are never referenced). */
static void real_element(blas_prec p, char *e) {
  if (is_single(p))
    ((float *)e)[1] = 0;
  else
    ((double *)e)[1] = 0;
}

static void unit_diagonal(blas_prec p, char *full, int ka) {
  int64_t es = element_size(p);
  for (int i = 0; i < ka; i++) {
    char *d = full + ((int64_t)i * ka + i) * es;
    memset(d, 0, (size_t)es);
    if (is_single(p))
      *(float *)d = 1.0f;
    else
      *(double *)d = 1.0;
  }
}

void *loom__blas_full_matrix(const blas_l3 *c, int ka, blas_full form) {
  int64_t es = element_size(c->prec);
  char *full = calloc((size_t)ka * (size_t)ka + 1, (size_t)es);
  if (!full) return NULL;
  const char *a = c->a;
  bool mirror = form == BLAS_FULL_SYMMETRIC || form == BLAS_FULL_HERMITIAN;
  for (int j = 0; j < ka; j++)
    for (int i = 0; i < ka; i++) {
      bool stored = c->uplo == 'U' ? i <= j : i >= j;
      if (!stored) continue;
      char *dst = full + ((int64_t)j * ka + i) * es;
      memcpy(dst, a + ((int64_t)j * c->lda + i) * es, (size_t)es);
      if (form == BLAS_FULL_HERMITIAN && i == j) real_element(c->prec, dst);
      if (!mirror || i == j) continue;
      char *twin = full + ((int64_t)i * ka + j) * es;
      memcpy(twin, dst, (size_t)es);
      if (form == BLAS_FULL_HERMITIAN) conj_element(c->prec, twin);
    }
  /* Conjugated before a unit diagonal is written: its ones stay 1 + 0i, not 1 - 0i. */
  if (form == BLAS_FULL_TRIANGULAR_CONJ)
    for (int64_t e = 0; e < (int64_t)ka * ka; e++) conj_element(c->prec, full + e * es);
  if (!mirror && c->diag == 'U') unit_diagonal(c->prec, full, ka);
  return full;
}

/* out[i] = s * conj(x[i]) for a column of len complex elements, in the call's precision (as
 * reference BLAS forms its TEMP = ALPHA*CONJG(B(J,L))). */
#define CONJ_SCALED(T, out, x, len, sr, si)                               \
  do {                                                                    \
    T *o_ = (T *)(out);                                                   \
    const T *x_ = (const T *)(x), r_ = (T)(sr), i_ = (T)(si);             \
    for (int e_ = 0; e_ < (len); e_++) {                                  \
      T xr = x_[2 * e_], xi = x_[2 * e_ + 1];                             \
      o_[2 * e_] = r_ * xr + i_ * xi, o_[2 * e_ + 1] = i_ * xr - r_ * xi; \
    }                                                                     \
  } while (0)

void *loom__blas_conj_copy(const blas_l3 *c, const void *x, int rows, int cols, int ld, const double *scale) {
  int64_t es = element_size(c->prec);
  char *out = malloc((size_t)rows * (size_t)cols * (size_t)es + 1);
  if (!out) return NULL;
  for (int j = 0; j < cols; j++) {
    const char *src = (const char *)x + (int64_t)j * ld * es;
    char *dst = out + (int64_t)j * rows * es;
    if (!scale) {
      memcpy(dst, src, (size_t)(rows * es));
      for (int i = 0; i < rows; i++) conj_element(c->prec, dst + i * es);
    } else if (is_single(c->prec)) {
      CONJ_SCALED(float, dst, src, rows, scale[0], scale[1]);
    } else {
      CONJ_SCALED(double, dst, src, rows, scale[0], scale[1]);
    }
  }
  return out;
}
