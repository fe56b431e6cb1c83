/* The chunk module's kernel checks (test_chunk_kernels.c, test_chunk_stream.c): a kernel is
 * planned for cpu0 under a limit, run under it, and checked three ways: the results equal the
 * whole graph's within f32 tolerance (sums are reassociated across pieces), the measured peak
 * equals the estimate, and both stay under the limit. */
#ifndef LOOM_TEST_CHUNK_KERNEL_CHECK_H
#define LOOM_TEST_CHUNK_KERNEL_CHECK_H

#include "ir/ir.h"
#include "loom/optimize.h"

/* The kernel's graph, parsed from the source tree (`name` under tests/chunk/data, or a path
 * from the tree's root ending in .lir); NULL (with a line printed) when it cannot be. */
loom_graph *kernel_load(const char *name);
/* The graph's estimated peak; -1 when it cannot be estimated. */
int64_t kernel_estimated_peak(const loom_graph *g);
/* The need loom-bench limits divides: the peak of the graph rewritten without chunking. */
int64_t kernel_whole_need(const loom_graph *g);
/* Plans g (owned: destroyed here) for cpu0 under `limit` with options o (NULL: the defaults),
 * in one graph, whose chunk report must hold the phrase `cut`; runs it under the limit and
 * checks it against the whole graph. `label` names the case in the lines printed ("gemm at
 * 1/8"). A failure fails the running test. */
void kernel_check_at(loom_graph *g, const char *label, int64_t need, int64_t limit,
                     const loom_optimize_options *o, const char *cut);
/* Whether this machine has ocl0 (PoCL in CI); when not, marks the running test skipped. */
bool kernel_have_ocl0(void);

#endif
