/* The limits benchmark's kernels that an eighth of their need once refused (issue 34: an input
 * held whole), at their test sizes (examples/limits/NAME.small.lir): each is planned for cpu0
 * at 1/8 of its need as `loom-bench limits` counts it (the graph's estimated peak rewritten
 * without chunking), run under that limit, and checked three ways: the results equal the whole
 * graph's within f32 tolerance (sums are reassociated across pieces), the measured peak equals
 * the estimate, and both stay under the limit. */
#include <stdlib.h>

#include "harness.h"
#include "kernel_check.h"

/* Plans `name` (examples/limits/NAME.small.lir) for cpu0 at 1/8 of its need as loom-bench
 * limits counts it, with the options the tools use, runs it under that limit, and compares it
 * with the whole graph; `cut` is a phrase the chunk report must hold. */
static void check_kernel(const char *name, const char *cut) {
  char path[160], label[160];
  snprintf(path, sizeof path, "examples/limits/%s.small.lir", name);
  snprintf(label, sizeof label, "%s at 1/8", name);
  loom_graph *g = kernel_load(path);
  int64_t need = g ? kernel_whole_need(g) : -1;
  loom_optimize_options o; /* as the tools prepare a graph */
  loom_optimize_options_init(&o);
  o.fused_runs = loom_fused_body_runs_everywhere;
  kernel_check_at(g, label, need, need / 8, &o, cut);
}

/* Two rank-1 updates, then x = beta A'^T y + z and w = alpha A' x: one pass over blocks of A's
 * columns (x's block needs only those columns; w sums them). Refused before: the body's
 * reshape of v1 to [1, piece] could not be told from its axis of 1 at a piece of 1, the first
 * piece the search tries. */
TEST(stream_gemver_at_an_eighth) {
  check_kernel("gemver", "with 1 more sink");
}

/* Mean-centred covariance: the mean in a pass of its own over data's rows, then cen^T cen as two
 * loops, blocks of the result's rows outside and dense blocks of data's rows inside (the
 * product's k, summed in place), cen made again from each block, so data and the [80,80] result
 * are never held whole and no piece gathers data's columns from every row. */
TEST(stream_covariance_at_an_eighth) {
  check_kernel("covariance", "each summed over 'data''s rows");
}

/* Correlation: three passes (the mean, the variance of the centred data with its centring made
 * in the pieces, the scaled product as covariance's), each streaming data. */
TEST(stream_correlation_at_an_eighth) {
  check_kernel("correlation", "each summed over 'data''s rows");
}

/* `name` under tests/chunk/data at 1/8 of its naive need (the unrewritten graph's peak). */
static void check_data(const char *name, const char *cut) {
  char label[160];
  snprintf(label, sizeof label, "%s at 1/8", name);
  loom_graph *g = kernel_load(name);
  int64_t need = g ? kernel_estimated_peak(g) : -1;
  kernel_check_at(g, label, need, need / 8, NULL, cut);
}

/* The gram loops with what follows the product in their outer body: a weight per row of the
 * result (sliced with the outer blocks) and a scalar, V made with a mean of rank 1 (sliced with
 * data's columns for V's block) and a scale. */
TEST(stream_gram_with_its_epilogue_at_an_eighth) {
  check_data("gram_epilogue", "each summed over 'data''s rows");
}

/* V V^T sums over data's columns, not its rows: not the gram loops' form, so V is made a second
 * time for the product and the generic cut streams it. */
TEST(stream_gram_of_rows_at_an_eighth) {
  check_data("gram_outer", "made again for it");
}
