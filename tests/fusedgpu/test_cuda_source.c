/* The cuda backend's fused kernels compile: every body of the OpenCL tests (the random chains
 * in each dtype and final op, both reduction layouts, and the kernel mat-vec) generated for
 * CUDA and compiled to PTX by NVRTC, which needs no GPU. Running them needs one (cuda0). */
#if LOOM_HAVE_CUDA
#include <stdio.h>
#include <string.h>

#include "backends/cuda/cuda_backend.h"
#include "backends/gpu/fused_codegen.h"
#include "chains.h"
#include "harness.h"
#include "ir/ir.h"

/* Dense views of a body's parameters (no buffers: the generator reads types and strides). */
static void dense_views(const loom_graph *g, loom__dview *v) {
  for (int32_t p = 0; p < loom_graph_param_count(g); p++) {
    memset(&v[p], 0, sizeof v[p]);
    v[p].type = *loom_value_type(g, loom_graph_param_at(g, p));
    int64_t st = 1;
    for (int32_t d = v[p].type.rank - 1; d >= 0; d--) {
      v[p].strides[d] = st;
      st *= v[p].type.dims[d];
    }
  }
}

static bool compiles(const loom_graph *g, int32_t group, const char *what) {
  loom__dview v[8];
  dense_views(g, v);
  loom__fz_kernel k;
  loom_status s = loom__fz_generate(g, v, LOOM__FZ_CUDA, true, group, 0, &k);
  if (s) {
    loom_test_fail(__FILE__, __LINE__, "%s: generating: %s: %s", what, loom_status_string(s),
                   loom_last_error());
    return false;
  }
  char *ptx = NULL;
  s = loom__cu_fused_compile(k.source, 75, what, &ptx);
  bool ok = s == LOOM_OK && ptx && strstr(ptx, ".entry loom_fused") != NULL;
  if (!ok)
    loom_test_fail(__FILE__, __LINE__, "%s: %s: %s\n%s", what, loom_status_string(s), loom_last_error(),
                   k.source);
  loom__free(ptx);
  loom__fz_kernel_free(&k);
  return ok;
}

TEST(generated_cuda_kernels_compile_with_nvrtc) {
  if (!loom__cu_have_nvrtc()) {
    loom_test_skip("no NVRTC: %s", loom__cu_nvrtc_why());
    return;
  }
  static const loom_dtype dts[] = {LOOM_F32, LOOM_F64, LOOM_I32, LOOM_I64};
  for (int di = 0; di < 4; di++)
    for (int f = 0; f < F_COUNT; f++) {
      uint64_t seed = (uint64_t)(di * 100 + f + 1);
      int n_ops = 1 + (int)((di * F_COUNT + f) % 12);
      loom_graph *g = build_chain(seed, dts[di], n_ops, f);
      ASSERT_TRUE(g != NULL);
      char what[128];
      for (int32_t group = 1; group <= 128; group *= 128) {
        snprintf(what, sizeof what, "%s chain of %d ops ending in %s (group %d)", loom_dtype_name(dts[di]),
                 n_ops, final_names[f], (int)group);
        if (!compiles(g, group, what)) break;
      }
      loom_graph_destroy(g);
      if (loom_test_failed()) return;
    }
  loom_graph *g = kmv_body(1000);
  ASSERT_TRUE(g != NULL);
  compiles(g, 128, "kmv N=1000");
  loom_graph_destroy(g);
}

/* A source NVRTC refuses: INTERNAL, with the label and NVRTC's log. */
TEST(nvrtc_errors_carry_the_log) {
  if (!loom__cu_have_nvrtc()) {
    loom_test_skip("no NVRTC: %s", loom__cu_nvrtc_why());
    return;
  }
  char *ptx = NULL;
  ASSERT_STATUS(loom__cu_fused_compile("extern \"C\" __global__ void loom_fused() { undeclared_thing(); }",
                                       75, "the fused op (test)", &ptx),
                LOOM_ERR_INTERNAL);
  ASSERT_TRUE(ptx == NULL);
  ASSERT_CONTAINS(loom_last_error(), "the fused op (test)");
  ASSERT_CONTAINS(loom_last_error(), "undeclared_thing");
}
#else
#include "harness.h"
TEST(no_cuda_toolkit) {
  loom_test_skip("built without the cuda backend");
}
#endif
