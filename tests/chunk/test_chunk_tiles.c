/* The chunk rewrite far below a product's need (issue 34, acceptance 2's deep limits): at 1/32
 * and 1/128 of it, each plan runs equal to the whole graph, with its measured peak equal to its
 * estimate and under the limit. A slice an outer loop passes on to an inner loop that slices it
 * again is not held (loom__loop_slice_passed), and a tile's dot gets a loop over k of its own
 * where that is faster (chunk_tile.c): both must hold on the allocator's counters. */
#include <math.h>

#include "harness.h"
#include "ir/view.h"
#include "kernel_check.h"
#include "runtime/exec.h"

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

/* ---- B's column blocks and C's tile rows passed on (task "deep") ---- */

/* gemm_deep_k planned for cpu0 at 1/128 of its need; NULL (test failed) otherwise. */
static loom_graph *deep_plan(int64_t *limit) {
  loom_graph *g = kernel_load("gemm_deep_k");
  if (!g) return NULL;
  *limit = kernel_estimated_peak(g) / 128;
  loom_runner runner = {.device = "cpu0", .limit = *limit};
  loom_graph *c = NULL;
  char note[256];
  if (loom_graph_optimize_for_runners(g, &runner, 1, NULL, &c, NULL, note, sizeof note))
    printf("    %s\n", loom_last_error());
  loom_graph_destroy(g);
  return c;
}

/* The top loop of c, its inner loop (the tile's) and the index of its dot's k loop there. */
static bool deep_loops(const loom_graph *c, const loom__op **outer, const loom__op **inner, int32_t *k) {
  *outer = *inner = NULL;
  for (int32_t o = 0; o < c->n_ops && !*outer; o++)
    if (c->ops[o].loop) *outer = &c->ops[o];
  const loom_graph *b = *outer ? (*outer)->loop->body : NULL;
  for (int32_t o = 0; b && o < b->n_ops && !*inner; o++)
    if (b->ops[o].loop) *inner = &b->ops[o];
  *k = -1;
  const loom_graph *ib = *inner ? (*inner)->loop->body : NULL;
  for (int32_t o = 0; ib && o < ib->n_ops; o++)
    if (ib->ops[o].loop) *k = o;
  return *k >= 0;
}

/* At 1/128 the tile holds neither its block of B's columns [768, tj] nor its row of C's tiles
 * [ti, 384]: the inner loop passes B's block on to the k loop (only its k-blocks counted), and
 * the outer loop's rows of the result are written tile by tile into the caller's output. Each
 * of the two blocks alone is more than the limit leaves. */
TEST(chunk_gemm_tiles_pass_on_columns_and_rows) {
  int64_t limit = 0;
  loom_graph *c = deep_plan(&limit);
  ASSERT_TRUE(c);
  const loom__op *outer, *inner;
  int32_t k;
  ASSERT_TRUE(deep_loops(c, &outer, &inner, &k));
  const loom_graph *body = outer->loop->body;
  int32_t passed = 0;
  for (int32_t i = 0; i < inner->n_inputs; i++) passed += loom__loop_slice_passed(body, inner, i);
  ASSERT_EQ(passed, 1); /* b's columns; a (whole here) goes to the k loop as it is */
  ASSERT_TRUE(loom__loop_result_passed_out(c, outer, 0, loom__value_streamed_out(c, outer->outputs[0])));
  int64_t estimate = kernel_estimated_peak(c), ti = outer->loop->piece, tj = inner->loop->piece;
  printf("    tiles of %lld x %lld, k in blocks of %lld, estimate %lld of %lld bytes\n", (long long)ti,
         (long long)tj, (long long)inner->loop->body->ops[k].loop->piece, (long long)estimate,
         (long long)limit);
  ASSERT_TRUE(estimate + 768 * tj * 4 > limit);
  ASSERT_TRUE(estimate + ti * 384 * 4 > limit);
  loom_graph_destroy(c);
  check_at("gemm_deep_k", 128, "k in blocks of");
}

/* The same plan on ocl0, its inputs host tensors: B's k-blocks are written in from the
 * caller's tensor row by row (the passed block is not one run of it), and each tile is read
 * out into its place in the caller's output. Measured peak = estimate, results = cpu0's whole
 * run within f32 tolerance (k summed in another order). */
TEST(chunk_gemm_tiles_passed_on_ocl0) {
  if (!kernel_have_ocl0()) return;
  int64_t limit = 0;
  loom_graph *c = deep_plan(&limit), *g = kernel_load("gemm_deep_k");
  ASSERT_TRUE(c && g);
  loom_tensor in[3], want, got;
  uint64_t seed = 34;
  for (int32_t p = 0; p < 3; p++) {
    ASSERT_OK(loom_tensor_init(&in[p], &g->values[g->params[p]].type));
    int64_t n = 0;
    loom_type_elements(&in[p].type, &n);
    for (int64_t i = 0; i < n; i++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      ((float *)in[p].data)[i] = (float)((double)(seed >> 11) * 0x1p-52 - 1.0);
    }
  }
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  ASSERT_OK(loom_graph_run(ctx, g, in, 3, &want, 1, NULL));
  loom__exec_options eo = {0};
  ASSERT_OK(loom__context_exec_device(ctx, "ocl0", &eo.device));
  loom__meter meter = {.limit = limit};
  loom_status s = loom__execute(c, &eo, in, &got, &meter);
  if (s) loom_test_fail(__FILE__, __LINE__, "on ocl0: %s", loom_last_error());
  int64_t estimate = kernel_estimated_peak(c);
  if (!s) {
    printf("    ocl0: measured peak %lld, estimate %lld, limit %lld\n", (long long)meter.peak,
           (long long)estimate, (long long)limit);
    ASSERT_EQ(meter.in_use, 0);
    ASSERT_EQ(meter.peak, estimate);
    ASSERT_TRUE(loom_type_equal(&want.type, &got.type));
    int64_t n = 0;
    loom_type_elements(&want.type, &n);
    const float *a = want.data, *b = got.data;
    double big = 0;
    for (int64_t i = 0; i < n; i++) big = fmax(big, fabs(a[i]));
    for (int64_t i = 0; i < n; i++)
      if (!(fabs((double)a[i] - b[i]) <= 1e-4 * (big + fabs(a[i])))) {
        loom_test_fail(__FILE__, __LINE__, "on ocl0: out[%lld] is %g, the whole graph's %g", (long long)i,
                       (double)b[i], (double)a[i]);
        break;
      }
    loom_tensor_deinit(&got);
  }
  loom_context_destroy(ctx);
  loom_tensor_deinit(&want);
  for (int32_t p = 0; p < 3; p++) loom_tensor_deinit(&in[p]);
  loom_graph_destroy(c);
  loom_graph_destroy(g);
}
