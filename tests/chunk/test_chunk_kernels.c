/* The chunk rewrite on PolyBench-like kernels (the .lir files of tests/chunk/data, issue 34): each is
 * planned for cpu0 at an eighth of its naive need (the unrewritten graph's estimated peak),
 * run under that limit, and checked three ways: the results equal the whole graph's within
 * f32 tolerance (sums are reassociated across pieces), the measured peak equals the
 * estimate, and both stay under the limit. */
#include <stdlib.h>

#include "harness.h"
#include "ir/ir.h"
#include "runtime/exec.h"

enum { MAX_IO = 8 };

/* The kernel's graph, parsed from the source tree (`name` under tests/chunk/data, or a path
 * from the tree's root ending in .lir); NULL (test failed) when it cannot be. */
static loom_graph *load_kernel(const char *name) {
  const char *src = getenv("LOOM_SOURCE_DIR");
  char path[1024];
  if (strstr(name, ".lir"))
    snprintf(path, sizeof path, "%s/%s", src ? src : ".", name);
  else
    snprintf(path, sizeof path, "%s/tests/chunk/data/%s.lir", src ? src : ".", name);
  FILE *f = fopen(path, "rb");
  if (!f) {
    printf("    cannot open %s\n", path);
    return NULL;
  }
  static char text[1 << 16];
  size_t n = fread(text, 1, sizeof text, f);
  fclose(f);
  loom_graph *g = NULL;
  if (loom_graph_parse(text, n, path, &g)) printf("    %s\n", loom_last_error());
  return g;
}

static int64_t estimated_peak(const loom_graph *g) {
  loom_estimate e;
  if (loom_graph_estimate(g, NULL, &e)) return -1;
  int64_t peak = e.peak_bytes;
  loom_estimate_deinit(&e);
  return peak;
}

static uint64_t mix(uint64_t *s) {
  *s += 0x9E3779B97F4A7C15ull;
  uint64_t z = *s;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform f32 inputs in [-1, 1) (every kernel here takes f32 only). */
static loom_status random_inputs(const loom_graph *g, loom_tensor *in) {
  uint64_t s = 34;
  for (int32_t p = 0; p < g->n_params; p++) {
    const loom_type *t = &g->values[g->params[p]].type;
    loom_status st = loom_tensor_init(&in[p], t);
    if (st) return st;
    int64_t n = 0;
    loom_type_elements(t, &n);
    for (int64_t i = 0; i < n; i++)
      ((float *)in[p].data)[i] = (float)((double)(mix(&s) >> 11) * 0x1p-52 - 1.0);
  }
  return LOOM_OK;
}

/* The worst |got - want| over (atol + 1e-4 |want|), atol 1e-4 of want's largest magnitude:
 * a reassociated f32 sum is off by a few ulps of its terms, not of its (maybe tiny) result. */
static double worst_error(const loom_tensor *want, const loom_tensor *got) {
  int64_t n = 0;
  loom_type_elements(&want->type, &n);
  const float *a = want->data, *b = got->data;
  double big = 0, worst = 0;
  for (int64_t i = 0; i < n; i++) big = fmax(big, fabs(a[i]));
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - b[i]) / (1e-4 * big + 1e-4 * fabs(a[i]));
    worst = isnan(e) ? INFINITY : fmax(worst, e);
  }
  return worst;
}

/* Plans `name` for cpu0 at 1/`fraction` of its need, runs it under that limit, and compares
 * it with the whole graph; `cut` is a phrase the chunk report must hold. */
static void check_kernel(const char *name, int64_t fraction, const char *cut) {
  loom_graph *g = load_kernel(name), *c = NULL;
  ASSERT_TRUE(g);
  int64_t need = estimated_peak(g), limit = need / fraction;
  loom_runner runner = {.device = "cpu0", .limit = limit};
  loom_rewrite_report report = {0};
  ASSERT_OK(loom_graph_optimize_for_runners(g, &runner, 1, NULL, &c, &report, NULL, 0));
  bool chunked = false;
  for (int32_t i = 0; i < report.count; i++)
    if (strcmp(report.entries[i].name, "chunk") == 0) {
      printf("    %s at 1/%lld (%lld of %lld bytes): %s\n", name, (long long)fraction, (long long)limit,
             (long long)need, report.entries[i].detail);
      chunked |= strstr(report.entries[i].detail, cut) != NULL;
    }
  ASSERT_TRUE(chunked);
  int64_t estimate = estimated_peak(c);
  ASSERT_TRUE(estimate > 0 && estimate <= limit);

  int32_t n_in = g->n_params, n_out = g->n_outputs;
  ASSERT_TRUE(n_in <= MAX_IO && n_out <= MAX_IO);
  loom_tensor in[MAX_IO], out[MAX_IO], want[MAX_IO];
  ASSERT_OK(random_inputs(g, in));
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  loom__exec_options eo = {0};
  loom__meter meter = {.limit = limit};
  ASSERT_OK(loom__context_exec_device(ctx, "cpu0", &eo.device));
  ASSERT_OK(loom__execute(c, &eo, in, out, &meter));
  ASSERT_OK(loom_graph_run(ctx, g, in, n_in, want, n_out, NULL));
  loom_context_destroy(ctx);
  ASSERT_EQ(meter.peak, estimate);
  for (int32_t k = 0; k < n_out; k++) {
    ASSERT_TRUE(loom_type_equal(&want[k].type, &out[k].type));
    double worst = worst_error(&want[k], &out[k]);
    if (!(worst <= 1)) printf("    output %d: worst error %.3g of the tolerance\n", (int)k, worst);
    ASSERT_TRUE(worst <= 1);
    loom_tensor_deinit(&want[k]);
    loom_tensor_deinit(&out[k]);
  }
  for (int32_t p = 0; p < n_in; p++) loom_tensor_deinit(&in[p]);
  loom_rewrite_report_deinit(&report);
  loom_graph_destroy(c);
  loom_graph_destroy(g);
}

TEST(chunk_gemm_at_an_eighth) {
  check_kernel("gemm", 8, "pieces");
}

TEST(chunk_atax_at_an_eighth) {
  check_kernel("atax", 8, "pieces");
}

TEST(chunk_mvt_at_an_eighth) {
  check_kernel("mvt", 8, "pieces");
}

TEST(chunk_bicg_at_an_eighth) {
  check_kernel("bicg", 8, "with 1 more sink");
}

/* A rank-k update: rows of C outside, its columns inside, A read in rows by both loops (the
 * transpose moved into the outer body), so neither A nor C is ever held whole. */
TEST(chunk_syrk_at_an_eighth) {
  check_kernel("syrk", 8, "inside loop 'r'");
}

TEST(chunk_syr2k_at_an_eighth) {
  check_kernel("syr2k", 8, "inside loop 'r'");
}

/* Two rank-1 updates, then A^T y and A x: one pass over blocks of A's columns computes both
 * (the columns streamed, a run per row). */
TEST(chunk_gemver_at_an_eighth) {
  check_kernel("gemver", 8, "pieces");
}

TEST(chunk_2mm_at_an_eighth) {
  check_kernel("2mm", 8, "pieces");
}

TEST(chunk_3mm_at_an_eighth) {
  check_kernel("3mm", 8, "pieces");
}

/* A symmetric operand made from A's lower triangle and its transpose: rows and columns of A
 * are both streamed. */
TEST(chunk_symm_at_an_eighth) {
  check_kernel("symm", 8, "pieces");
}

TEST(chunk_trmm_at_an_eighth) {
  check_kernel("trmm", 8, "pieces");
}

/* The limits benchmark's small kernels (examples/limits, written for loom-bench limits), where
 * the chunk rewrite fits them at an eighth in one graph: the same checks on graphs written by
 * another hand. Its 3mm, bicg and mvt fit only with their products rewritten
 * (loom__chunk_streamable): (A B)(C D) as a chain, A^T v as v A. */
TEST(chunk_limits_kernels_at_an_eighth) {
  static const char *const names[] = {"2mm", "3mm",  "atax",  "bicg", "gemm",
                                      "mvt", "symm", "syr2k", "syrk", "trmm"};
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !loom_test_failed(); i++) {
    char path[64];
    snprintf(path, sizeof path, "examples/limits/%s.small.lir", names[i]);
    check_kernel(path, 8, "pieces");
  }
}

/* 3mm with square matrices: the chain order is a tie, so dot_chain keeps (A B)(C D), whose two
 * products no cut streams; at an eighth it runs as ((A B) C) D, rows outside. */
TEST(chunk_3mm_square_as_a_chain) {
  check_kernel("examples/limits/3mm.small.lir", 8, "two products as ((A B) C) D");
}

/* mvt as written with a transpose: A^T y2 becomes y2 A, so one pass over A's row blocks makes
 * both products (A read once). */
TEST(chunk_mvt_transposed_reads_a_once) {
  check_kernel("examples/limits/mvt.small.lir", 8, "with 1 more sink");
}

/* gemm at a 32nd of its need: rows of the result outside, and inside, of the cuts that fit,
 * the one of least predicted time, the product with its epilogue (alpha A B + beta C a tile
 * at a time), not the product alone with the scaled rows held whole beside it. */
TEST(chunk_gemm_tiles_hold_the_epilogue) {
  check_kernel("examples/limits/gemm.small.lir", 32, "inside loop 'out': add 'v8' and the 3 ops before it");
}

/* 3mm's chain: the rounds cut it one row at a time; once it fits, the outer loop is tried at
 * longer pieces with its inner loops regrown, and the fastest predicted kept. */
TEST(chunk_3mm_rows_regrown_by_predicted_time) {
  check_kernel("examples/limits/3mm.small.lir", 8, "instead of 1, its inner loops regrown");
}
