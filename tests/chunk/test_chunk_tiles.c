/* The chunk rewrite far below a product's need (issue 34, acceptance 2's deep limits): at 1/32
 * and 1/128 of it, each plan runs equal to the whole graph, with its measured peak equal to its
 * estimate and under the limit. A slice an outer loop passes on to an inner loop that slices it
 * again is not held (loom__loop_slice_passed), and a tile's dot gets a loop over k of its own
 * where that is faster (chunk_tile.c): both must hold on the allocator's counters. */
#include "harness.h"
#include "ir/view.h"
#include "kernel_check.h"

static void check_at(const char *name, int64_t fraction, const char *cut) {
  loom_graph *g = kernel_load(name);
  char label[160];
  snprintf(label, sizeof label, "%s at 1/%lld", name, (long long)fraction);
  int64_t need = g ? kernel_estimated_peak(g) : -1;
  kernel_check_at(g, label, need, need / fraction, NULL, cut);
}

TEST(chunk_gemm_at_a_32nd) {
  check_at("examples/limits/gemm.small.lir", 32, "pieces");
}

/* Rows of one row and columns of two: A's and C's rows passed on to the inner loop. */
TEST(chunk_gemm_at_a_128th) {
  check_at("examples/limits/gemm.small.lir", 128, "pieces");
}

TEST(chunk_2mm_at_a_32nd) {
  check_at("examples/limits/2mm.small.lir", 32, "pieces");
}

/* Tiles of C with k in blocks: A's row block and C's passed on, never held whole. */
TEST(chunk_gemm_tiles_with_k_blocks) {
  check_at("gemm_deep_k", 32, "k in blocks of");
}

/* The estimate counts a passed-on slice nowhere but in the inner loop's slices: one row block
 * of A [rows, 768] held would pass the limit of the k-blocked plan. */
TEST(chunk_passed_slice_not_counted) {
  loom_graph *g = kernel_load("gemm_deep_k");
  ASSERT_TRUE(g);
  int64_t limit = kernel_estimated_peak(g) / 32;
  loom_runner runner = {.device = "cpu0", .limit = limit};
  loom_graph *c = NULL;
  char note[256];
  ASSERT_OK(loom_graph_optimize_for_runners(g, &runner, 1, NULL, &c, NULL, note, sizeof note));
  const loom__op *outer = NULL;
  for (int32_t o = 0; o < c->n_ops && !outer; o++)
    if (c->ops[o].loop) outer = &c->ops[o];
  ASSERT_TRUE(outer);
  int32_t passed = 0;
  for (int32_t i = 0; i < outer->n_inputs; i++) passed += loom__loop_slice_passed(c, outer, i);
  ASSERT_EQ(passed, 2); /* a's rows and c's */
  int64_t slab = outer->loop->piece * 768 * 4;
  ASSERT_TRUE(kernel_estimated_peak(c) + slab > limit);
  loom_graph_destroy(c);
  loom_graph_destroy(g);
}
