/* The chunk rewrite on PolyBench-like kernels (the .lir files of tests/chunk/data, issue 34): each is
 * planned for cpu0 at an eighth of its naive need (the unrewritten graph's estimated peak),
 * run under that limit, and checked three ways: the results equal the whole graph's within
 * f32 tolerance (sums are reassociated across pieces), the measured peak equals the
 * estimate, and both stay under the limit. */
#include <stdlib.h>

#include "harness.h"
#include "kernel_check.h"

/* Plans `name` for cpu0 at 1/`fraction` of its naive need (the unrewritten graph's estimated
 * peak), runs it under that limit, and compares it with the whole graph; `cut` is a phrase the
 * chunk report must hold. */
static void check_kernel(const char *name, int64_t fraction, const char *cut) {
  loom_graph *g = kernel_load(name);
  char label[160];
  snprintf(label, sizeof label, "%s at 1/%lld", name, (long long)fraction);
  int64_t need = g ? kernel_estimated_peak(g) : -1;
  kernel_check_at(g, label, need, need / fraction, NULL, cut);
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
