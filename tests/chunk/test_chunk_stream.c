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

/* Mean-centred covariance: the mean in a pass of its own over data's rows, then cen^T cen with
 * cen made twice (the transpose's in column blocks of data outside, the product's inside, an
 * inner loop streaming data's columns), so data and the [80,80] result are never held whole. */
TEST(stream_covariance_at_an_eighth) {
  check_kernel("covariance", "in a pass of its own over 'data'");
}

/* Correlation: three passes (the mean, the variance of the centred data with its centring made
 * in the pieces, the scaled product), each streaming data. */
TEST(stream_correlation_at_an_eighth) {
  check_kernel("correlation", "in a pass of its own over 'data'");
}
