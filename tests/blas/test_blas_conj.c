/* The conjugating level-3 forms through Loom (docs/blas.md): hemm, herk, her2k, and gemm, trmm
 * and trsm with a 'C' transpose, forced through Loom on cpu0 (test_blas.c's constructor sets
 * LOOM_BLAS_FORCE=1 LOOM_BLAS_DEVICES=cpu0), against OpenBLAS's own routines. The sizes are
 * past the reference tests' (n <= 9), with leading dimensions larger than the rows; the whole
 * of C's storage is compared, so a triangle or padding written where it must not be fails, and
 * so does a diagonal of herk's or her2k's C left complex (reference BLAS makes it real).
 */
#include <cblas.h>
#include <dlfcn.h>
#include <stdlib.h>

#include "blas/blas_test_util.h"
#include "harness.h"

typedef void hemm_fn(const char *, const char *, const int *, const int *, const void *, const void *,
                     const int *, const void *, const int *, const void *, void *, const int *, size_t,
                     size_t);
typedef void herk_fn(const char *, const char *, const int *, const int *, const void *, const void *,
                     const int *, const void *, void *, const int *, size_t, size_t);
typedef void her2k_fn(const char *, const char *, const int *, const int *, const void *, const void *,
                      const int *, const void *, const int *, const void *, void *, const int *, size_t,
                      size_t);
typedef void gemm_fn(const char *, const char *, const int *, const int *, const int *, const void *,
                     const void *, const int *, const void *, const int *, const void *, void *, const int *,
                     size_t, size_t);
typedef void trxm_fn(const char *, const char *, const char *, const char *, const int *, const int *,
                     const void *, const void *, const int *, void *, const int *, size_t, size_t, size_t,
                     size_t);

/* One library's routines: OpenBLAS's (by its own handle) or the shim's (by path). */
typedef struct conj_lib {
  hemm_fn *zhemm_;
  herk_fn *zherk_, *cherk_;
  her2k_fn *zher2k_;
  gemm_fn *zgemm_;
  trxm_fn *ztrmm_, *ztrsm_;
} conj_lib;

static bool conj_lib_load(void *lib, conj_lib *l) {
  *(void **)&l->zhemm_ = dlsym(lib, "zhemm_");
  *(void **)&l->zherk_ = dlsym(lib, "zherk_");
  *(void **)&l->cherk_ = dlsym(lib, "cherk_");
  *(void **)&l->zher2k_ = dlsym(lib, "zher2k_");
  *(void **)&l->zgemm_ = dlsym(lib, "zgemm_");
  *(void **)&l->ztrmm_ = dlsym(lib, "ztrmm_");
  *(void **)&l->ztrsm_ = dlsym(lib, "ztrsm_");
  return l->zhemm_ && l->zherk_ && l->cherk_ && l->zher2k_ && l->zgemm_ && l->ztrmm_ && l->ztrsm_;
}

/* Both libraries, or a reason to skip. */
static bool conj_libs(conj_lib *host, conj_lib *shim) {
  blas_test_shim s;
  if (!blas_test_shim_open(&s)) {
    loom_test_skip("%s", s.error);
    return false;
  }
  Dl_info info;
  const char *env = getenv("LOOM_BLAS_SHIM"), *bin = getenv("LOOM_BINARY_DIR");
  char path[4096];
  if (env && *env)
    snprintf(path, sizeof path, "%s", env);
  else
    snprintf(path, sizeof path, "%s/blas/libblas.so.3", bin ? bin : ".");
  void *shim_lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  void *host_lib =
      dladdr((void *)openblas_get_config, &info) ? dlopen(info.dli_fname, RTLD_NOW | RTLD_LOCAL) : NULL;
  return shim_lib && host_lib && conj_lib_load(host_lib, host) && conj_lib_load(shim_lib, shim);
}

/* n complex doubles, in [-1, 1) each part. */
static double *zrandom(int64_t n, uint64_t seed) {
  return blas_test_random(2 * n, seed);
}

/* Records the worst relative difference of the shim's C from OpenBLAS's, naming the form when
 * it is over the bound. */
static void compare(const char *form, const double *c, const double *ref, int64_t n, double bound,
                    double *worst) {
  double e = blas_test_max_rel_diff(c, ref, 2 * n);
  if (e > *worst || e != e) *worst = e;
  if (!(e < bound)) printf("  %s: relative difference %.3g\n", form, e);
}

TEST(zherk_and_zher2k_match_openblas_in_every_form) {
  conj_lib host, shim;
  if (!conj_libs(&host, &shim)) return;
  const int n = 70, k = 45, ldc = n + 2;
  double worst = 0, beta = 0.3, ralpha = 0.7, alpha[2] = {0.7, -0.4};
  for (int form = 0; form < 8; form++) {
    const char uplo[2] = {"UL"[form & 1], 0}, trans[2] = {"NC"[(form >> 1) & 1], 0};
    bool two = form >= 4;
    int rows = trans[0] == 'N' ? n : k, cols = trans[0] == 'N' ? k : n, lda = rows + 3;
    double *a = zrandom((int64_t)lda * cols, 400 + form), *b = zrandom((int64_t)lda * cols, 500 + form);
    double *c = zrandom((int64_t)ldc * n, 600 + form), *ref = blas_test_copy(c, 2 * (int64_t)ldc * n);
    if (two) {
      shim.zher2k_(uplo, trans, &n, &k, alpha, a, &lda, b, &lda, &beta, c, &ldc, 1, 1);
      host.zher2k_(uplo, trans, &n, &k, alpha, a, &lda, b, &lda, &beta, ref, &ldc, 1, 1);
    } else {
      shim.zherk_(uplo, trans, &n, &k, &ralpha, a, &lda, &beta, c, &ldc, 1, 1);
      host.zherk_(uplo, trans, &n, &k, &ralpha, a, &lda, &beta, ref, &ldc, 1, 1);
    }
    char name[32];
    snprintf(name, sizeof name, "%s %s%s", two ? "zher2k" : "zherk", uplo, trans);
    compare(name, c, ref, (int64_t)ldc * n, 1e-12, &worst);
    for (int j = 0; j < n; j++) ASSERT_TRUE(c[2 * ((int64_t)j * ldc + j) + 1] == 0);
    free(a), free(b), free(c), free(ref);
  }
  printf("  zherk, zher2k, 8 forms: largest relative difference from OpenBLAS %.3g\n", worst);
  ASSERT_TRUE(worst < 1e-12);
}

TEST(cherk_matches_openblas_in_single_precision) {
  conj_lib host, shim;
  if (!conj_libs(&host, &shim)) return;
  const int n = 40, k = 33, lda = k + 1, ldc = n;
  float alpha = 1.25f, beta = -0.5f;
  double *ad = zrandom((int64_t)lda * n, 700), *cd = zrandom((int64_t)ldc * n, 701);
  float *a = malloc(2 * sizeof *a * (size_t)(lda * n)), *c = malloc(2 * sizeof *c * (size_t)(ldc * n));
  float *ref = malloc(2 * sizeof *ref * (size_t)(ldc * n));
  for (int i = 0; i < 2 * lda * n; i++) a[i] = (float)ad[i];
  for (int i = 0; i < 2 * ldc * n; i++) c[i] = ref[i] = (float)cd[i];
  shim.cherk_("L", "C", &n, &k, &alpha, a, &lda, &beta, c, &ldc, 1, 1);
  host.cherk_("L", "C", &n, &k, &alpha, a, &lda, &beta, ref, &ldc, 1, 1);
  double d = 0, m = 0;
  for (int i = 0; i < 2 * ldc * n; i++) {
    d = fabs((double)c[i] - ref[i]) > d ? fabs((double)c[i] - ref[i]) : d;
    m = fabs((double)ref[i]) > m ? fabs((double)ref[i]) : m;
  }
  printf("  cherk LC: relative difference from OpenBLAS %.3g\n", d / m);
  free(ad), free(cd), free(a), free(c), free(ref);
  ASSERT_TRUE(d / m < 1e-5);
}

TEST(zhemm_matches_openblas_on_both_sides_and_triangles) {
  conj_lib host, shim;
  if (!conj_libs(&host, &shim)) return;
  const int m = 61, n = 38, ldb = m + 1, ldc = m + 4;
  double worst = 0, alpha[2] = {0.5, 0.25}, beta[2] = {-0.75, 0.5};
  for (int form = 0; form < 4; form++) {
    const char side[2] = {"LR"[form & 1], 0}, uplo[2] = {"UL"[form >> 1], 0};
    int ka = side[0] == 'L' ? m : n, lda = ka + 2;
    /* A's unreferenced triangle and its diagonal's imaginary parts hold values that must not
     * be read. */
    double *a = zrandom((int64_t)lda * ka, 800 + form), *b = zrandom((int64_t)ldb * n, 810 + form);
    double *c = zrandom((int64_t)ldc * n, 820 + form), *ref = blas_test_copy(c, 2 * (int64_t)ldc * n);
    shim.zhemm_(side, uplo, &m, &n, alpha, a, &lda, b, &ldb, beta, c, &ldc, 1, 1);
    host.zhemm_(side, uplo, &m, &n, alpha, a, &lda, b, &ldb, beta, ref, &ldc, 1, 1);
    char name[16];
    snprintf(name, sizeof name, "zhemm %s%s", side, uplo);
    compare(name, c, ref, (int64_t)ldc * n, 1e-12, &worst);
    free(a), free(b), free(c), free(ref);
  }
  printf("  zhemm, 4 forms: largest relative difference from OpenBLAS %.3g\n", worst);
  ASSERT_TRUE(worst < 1e-12);
}

TEST(zgemm_and_ztrmm_with_conjugate_transposes_match_openblas) {
  conj_lib host, shim;
  if (!conj_libs(&host, &shim)) return;
  const int m = 47, n = 53, k = 39, ldc = m + 1;
  double worst = 0, alpha[2] = {1.5, -0.5}, beta[2] = {0.25, 0.75};
  static const char *const pairs[] = {"CN", "NC", "CC", "CT", "TC"};
  for (int f = 0; f < 5; f++) {
    const char ta[2] = {pairs[f][0], 0}, tb[2] = {pairs[f][1], 0};
    int lda = (ta[0] == 'N' ? m : k) + 3, ldb = (tb[0] == 'N' ? k : n) + 2;
    double *a = zrandom((int64_t)lda * (ta[0] == 'N' ? k : m), 900 + f);
    double *b = zrandom((int64_t)ldb * (tb[0] == 'N' ? n : k), 910 + f);
    double *c = zrandom((int64_t)ldc * n, 920 + f), *ref = blas_test_copy(c, 2 * (int64_t)ldc * n);
    shim.zgemm_(ta, tb, &m, &n, &k, alpha, a, &lda, b, &ldb, beta, c, &ldc, 1, 1);
    host.zgemm_(ta, tb, &m, &n, &k, alpha, a, &lda, b, &ldb, beta, ref, &ldc, 1, 1);
    char name[16];
    snprintf(name, sizeof name, "zgemm %s%s", ta, tb);
    compare(name, c, ref, (int64_t)ldc * n, 1e-12, &worst);
    free(a), free(b), free(c), free(ref);
  }
  for (int form = 0; form < 8; form++) {
    const char side[2] = {"LR"[form & 1], 0}, uplo[2] = {"UL"[(form >> 1) & 1], 0};
    const char diag[2] = {"NU"[form >> 2], 0};
    int ka = side[0] == 'L' ? m : n, lda = ka + 1;
    double *a = zrandom((int64_t)lda * ka, 930 + form), *b = zrandom((int64_t)ldc * n, 940 + form);
    double *ref = blas_test_copy(b, 2 * (int64_t)ldc * n);
    shim.ztrmm_(side, uplo, "C", diag, &m, &n, alpha, a, &lda, b, &ldc, 1, 1, 1, 1);
    host.ztrmm_(side, uplo, "C", diag, &m, &n, alpha, a, &lda, ref, &ldc, 1, 1, 1, 1);
    char name[24];
    snprintf(name, sizeof name, "ztrmm %s%sC%s", side, uplo, diag);
    compare(name, b, ref, (int64_t)ldc * n, 1e-12, &worst);
    free(a), free(b), free(ref);
  }
  printf("  zgemm (5 pairs), ztrmm 'C' (8 forms): largest relative difference from OpenBLAS %.3g\n", worst);
  ASSERT_TRUE(worst < 1e-12);
}

/* A blocked ztrsm with 'C' (order 600: its gemm updates take the 'C' form through Loom). */
TEST(blocked_ztrsm_with_conjugate_transpose_matches_openblas) {
  conj_lib host, shim;
  if (!conj_libs(&host, &shim)) return;
  const int k = 600, other = 70;
  double worst = 0, alpha[2] = {0.75, 0.5};
  for (int form = 0; form < 4; form++) {
    const char side[2] = {"LR"[form & 1], 0}, uplo[2] = {"UL"[form >> 1], 0};
    int m = side[0] == 'L' ? k : other, n = side[0] == 'L' ? other : k, lda = k + 1, ldb = m + 2;
    /* Well conditioned: a dominant diagonal, off-diagonal parts of at most 1/k. */
    double *a = zrandom((int64_t)lda * k, 1000 + form);
    for (int j = 0; j < k; j++)
      for (int i = 0; i < lda; i++) {
        double *e = a + 2 * ((int64_t)j * lda + i);
        if (i == j)
          e[0] = 1.5 + fabs(e[0]);
        else
          e[0] /= k, e[1] /= k;
      }
    double *b = zrandom((int64_t)ldb * n, 1010 + form), *ref = blas_test_copy(b, 2 * (int64_t)ldb * n);
    shim.ztrsm_(side, uplo, "C", "N", &m, &n, alpha, a, &lda, b, &ldb, 1, 1, 1, 1);
    host.ztrsm_(side, uplo, "C", "N", &m, &n, alpha, a, &lda, ref, &ldb, 1, 1, 1, 1);
    char name[24];
    snprintf(name, sizeof name, "ztrsm %s%sCN", side, uplo);
    compare(name, b, ref, (int64_t)ldb * n, 1e-10, &worst);
    free(a), free(b), free(ref);
  }
  printf("  blocked ztrsm 'C', 4 forms: largest relative difference from OpenBLAS %.3g\n", worst);
  ASSERT_TRUE(worst < 1e-10);
}
