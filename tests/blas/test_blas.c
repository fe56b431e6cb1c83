/* Loom's libblas.so.3 from inside a program: the ctest runs this with the shim preloaded
 * (LD_PRELOAD), so the program's own BLAS symbols are the shim's, as under an unmodified
 * program; every level-3 call is forced through Loom on cpu0 (LOOM_BLAS_FORCE=1), whose cpu
 * backend must then reach OpenBLAS without calling back into the shim.
 *
 * Results are compared with OpenBLAS's own routines, found with dlsym on OpenBLAS's handle.
 */
#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include "blas/blas_test_util.h"
#include "harness.h"

/* Every level-3 call through Loom on cpu0; set before the shim's first call reads them. */
__attribute__((constructor)) static void force_through_loom(void) {
  setenv("LOOM_BLAS_FORCE", "1", 1);
  setenv("LOOM_BLAS_DEVICES", "cpu0", 1);
}

TEST(preloaded_shim_runs_dgemm_through_loom_without_recursion) {
  if (!dlsym(RTLD_DEFAULT, "loom_blas_context")) {
    loom_test_skip("the shim is not preloaded (LD_PRELOAD): the ctest sets it");
    return;
  }
  blas_test_host host;
  ASSERT_TRUE(blas_test_host_open(&host));
  enum { M = 70, N = 50, K = 90 };
  double *a = blas_test_random(M * K, 1), *b = blas_test_random(K * N, 2);
  double *c = blas_test_random(M * N, 3), *ref = blas_test_copy(c, M * N);
  /* The global symbol: the shim's, preloaded ahead of the OpenBLAS this test links. */
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 0.5, a, K, b, K, 2.0, c, N);
  host.cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 0.5, a, K, b, K, 2.0, ref, N);
  double err = blas_test_max_rel_diff(c, ref, M * N);
  free(a), free(b), free(c), free(ref);
  ASSERT_TRUE(err < 1e-12);
  /* It ran through Loom: the shim's context exists and knows cpu0. */
  loom_context *(*context)(void) = (loom_context * (*)(void)) dlsym(RTLD_DEFAULT, "loom_blas_context");
  ASSERT_TRUE(context() != NULL);
}

/* ---- eight threads at once (acceptance 9) ------------------------------------------------- */

enum { THREADS = 8, N3 = 96 };

typedef struct thread_job {
  blas_test_shim *shim;
  int seed;
  double *c, *b;               /* the shim's results */
  const double *a, *bin, *tri; /* inputs */
} thread_job;

static void *thread_run(void *p) {
  thread_job *j = p;
  int n = N3, lda = N3;
  double alpha = 1.0 + j->seed, beta = 0.25, one = 1.0;
  for (int r = 0; r < 3; r++) {
    j->shim->dgemm_("N", "T", &n, &n, &n, &alpha, j->a, &lda, j->bin, &lda, &beta, j->c, &lda, 1, 1);
    j->shim->dtrsm_("L", "U", "N", "N", &n, &n, &one, j->tri, &lda, j->b, &lda, 1, 1, 1, 1);
  }
  return NULL;
}

TEST(eight_threads_dgemm_and_dtrsm_get_openblas_results) {
  blas_test_shim shim;
  blas_test_host host;
  if (!blas_test_shim_open(&shim)) {
    loom_test_skip("%s", shim.error);
    return;
  }
  ASSERT_TRUE(blas_test_host_open(&host));
  thread_job jobs[THREADS];
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++) {
    jobs[t] = (thread_job){.shim = &shim, .seed = t};
    jobs[t].a = blas_test_random(N3 * N3, 10 + t);
    jobs[t].bin = blas_test_random(N3 * N3, 30 + t);
    jobs[t].tri = blas_test_triangular(N3, 50 + t);
    jobs[t].c = blas_test_random(N3 * N3, 70 + t);
    jobs[t].b = blas_test_random(N3 * N3, 90 + t);
  }
  /* OpenBLAS's answers first, one thread. */
  double *ref_c[THREADS], *ref_b[THREADS];
  for (int t = 0; t < THREADS; t++) {
    int n = N3, lda = N3;
    double alpha = 1.0 + t, beta = 0.25, one = 1.0;
    ref_c[t] = blas_test_copy(jobs[t].c, N3 * N3);
    ref_b[t] = blas_test_copy(jobs[t].b, N3 * N3);
    for (int r = 0; r < 3; r++) {
      host.dgemm_("N", "T", &n, &n, &n, &alpha, jobs[t].a, &lda, jobs[t].bin, &lda, &beta, ref_c[t], &lda, 1,
                  1);
      host.dtrsm_("L", "U", "N", "N", &n, &n, &one, jobs[t].tri, &lda, ref_b[t], &lda, 1, 1, 1, 1);
    }
  }
  for (int t = 0; t < THREADS; t++) ASSERT_EQ(pthread_create(&th[t], NULL, thread_run, &jobs[t]), 0);
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  double worst = 0;
  for (int t = 0; t < THREADS; t++) {
    double e = blas_test_max_rel_diff(jobs[t].c, ref_c[t], N3 * N3);
    double f = blas_test_max_rel_diff(jobs[t].b, ref_b[t], N3 * N3);
    worst = e > worst ? e : worst;
    worst = f > worst ? f : worst;
    free((void *)jobs[t].a), free((void *)jobs[t].bin), free((void *)jobs[t].tri);
    free(jobs[t].c), free(jobs[t].b), free(ref_c[t]), free(ref_b[t]);
  }
  printf("  eight threads: largest relative difference from OpenBLAS %.3g\n", worst);
  ASSERT_TRUE(worst < 1e-12);
}

/* ---- trsm as a blocked composition ------------------------------------------------------- */

/* A k x k triangle-to-be (column-major, leading dimension ld) that is well conditioned with its
 * own diagonal or a unit one: off-diagonal entries of at most 1/k. */
static double *trsm_factor(int k, int ld, uint64_t seed) {
  double *t = blas_test_random((int64_t)ld * k, seed);
  for (int j = 0; j < k; j++)
    for (int i = 0; i < ld; i++)
      t[(int64_t)j * ld + i] = i == j ? 1.5 + fabs(t[(int64_t)j * ld + i]) : t[(int64_t)j * ld + i] / k;
  return t;
}

/* Every side, triangle, transpose and diagonal, the triangle's order 600 (two levels of blocks,
 * uneven: 512 + 88), leading dimensions larger than the rows; forced, so the gemm updates run
 * through Loom on cpu0. */
TEST(blocked_dtrsm_matches_openblas_in_every_form) {
  blas_test_shim shim;
  blas_test_host host;
  if (!blas_test_shim_open(&shim)) {
    loom_test_skip("%s", shim.error);
    return;
  }
  ASSERT_TRUE(blas_test_host_open(&host));
  const int k = 600, other = 130;
  double worst = 0, alpha = 0.75;
  for (int form = 0; form < 16; form++) {
    const char side[2] = {"LR"[form & 1], 0}, uplo[2] = {"UL"[(form >> 1) & 1], 0};
    const char trans[2] = {"NT"[(form >> 2) & 1], 0}, diag[2] = {"NU"[(form >> 3) & 1], 0};
    int m = side[0] == 'L' ? k : other, n = side[0] == 'L' ? other : k, lda = k + 3, ldb = m + 5;
    double *a = trsm_factor(k, lda, 200 + form), *b = blas_test_random((int64_t)ldb * n, 300 + form);
    double *ref = blas_test_copy(b, (int64_t)ldb * n);
    shim.dtrsm_(side, uplo, trans, diag, &m, &n, &alpha, a, &lda, b, &ldb, 1, 1, 1, 1);
    host.dtrsm_(side, uplo, trans, diag, &m, &n, &alpha, a, &lda, ref, &ldb, 1, 1, 1, 1);
    double e = blas_test_max_rel_diff(b, ref, (int64_t)ldb * n);
    if (e > worst) worst = e;
    if (e >= 1e-10) printf("  dtrsm %s%s%s%s: relative difference %.3g\n", side, uplo, trans, diag, e);
    free(a), free(b), free(ref);
  }
  printf("  blocked dtrsm, 16 forms: largest relative difference from OpenBLAS %.3g\n", worst);
  ASSERT_TRUE(worst < 1e-10);
}
