/* A dgemm through Loom's libblas.so.3 whose three operands total four times the device's
 * memory limit (acceptance 5 of issue 30): it runs on the device (PoCL's ocl0 here) in pieces,
 * the device's memory manager never holds more than the limit (its own peak counter), and C
 * equals OpenBLAS's within the reference tests' tolerance.
 */
#include <stdlib.h>

#include "blas/blas_test_util.h"
#include "harness.h"

#define LIMIT (4ll << 20)

/* Read by the shim on its first call. */
__attribute__((constructor)) static void settings(void) {
  setenv("LOOM_BLAS_FORCE", "1", 1);
  setenv("LOOM_BLAS_DEVICES", "ocl0", 1);
  setenv("LOOM_MEM_LIMIT", "ocl0:4MiB", 1);
  setenv("POCL_MEMORY_LIMIT", "1", 0);
}

TEST(dgemm_four_times_the_limit_runs_under_it) {
  blas_test_shim shim;
  blas_test_host host;
  if (!blas_test_shim_open(&shim)) {
    loom_test_skip("%s", shim.error);
    return;
  }
  ASSERT_TRUE(blas_test_host_open(&host));
  loom_context *ctx = shim.context();
  if (!ctx) {
    loom_test_skip("no OpenCL device ocl0 (the shim's context could not be made)");
    return;
  }
  /* 3 n^2 doubles: just over 4 x 4 MiB. */
  int n = 837, ld = n;
  int64_t nn = (int64_t)n * n;
  double *a = blas_test_random(nn, 1), *b = blas_test_random(nn, 2), *c = blas_test_random(nn, 3);
  double *ref = blas_test_copy(c, nn), alpha = 1.5, beta = -0.5;
  ASSERT_TRUE(3.0 * (double)nn * sizeof(double) >= 3.99 * (double)LIMIT);
  shim.dgemm_("N", "N", &n, &n, &n, &alpha, a, &ld, b, &ld, &beta, c, &ld, 1, 1);
  host.dgemm_("N", "N", &n, &n, &n, &alpha, a, &ld, b, &ld, &beta, ref, &ld, 1, 1);
  double err = blas_test_max_rel_diff(c, ref, nn);
  free(a), free(b), free(c), free(ref);

  loom_mem_manager *m;
  int32_t node;
  loom_mem_node_stats st;
  ASSERT_TRUE(shim.context_memory(ctx, &m) == LOOM_OK);
  ASSERT_TRUE(shim.node_find(m, "ocl0", &node) == LOOM_OK);
  ASSERT_TRUE(shim.stats(m, node, &st) == LOOM_OK);
  printf("  ocl0: limit %lld, peak %lld bytes in %lld allocations; operands %lld bytes; error %.3g\n",
         (long long)st.limit, (long long)st.peak_in_use, (long long)st.allocations, (long long)(3 * nn * 8),
         err);
  ASSERT_TRUE(st.allocations > 0); /* it ran on ocl0, not on the host BLAS */
  ASSERT_TRUE(st.peak_in_use <= LIMIT);
  ASSERT_TRUE(err < 1e-12);
}
