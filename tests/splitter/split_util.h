/* Helpers shared by the splitter tests: graphs, inputs, runs and plan invariants. */
#ifndef LOOM_TEST_SPLIT_UTIL_H
#define LOOM_TEST_SPLIT_UTIL_H

#include "harness.h"

/* Parses .lir text; NULL (and a failed test) when it does not parse. */
loom_graph *su_parse(const char *text);

/* Seeded inputs for every parameter of g (floats in [-1, 1), integers 0..99). The caller
 * releases them with su_tensors_free. */
loom_status su_inputs(const loom_graph *g, uint64_t seed, loom_tensor **out);
void su_tensors_free(loom_tensor *t, int32_t n);

/* Runs g whole on cpu0. */
loom_status su_run_graph(const loom_graph *g, const loom_tensor *in, loom_tensor **out);
/* Runs the plan; stats may be NULL. */
loom_status su_run_plan(const loom_plan *plan, const loom_tensor *in, loom_tensor **out,
                        loom_plan_stats *stats);

/* The largest |a-b| / (atol + rtol |a|) over two tensors (exact for integers); 1e30 when the
 * types differ. */
double su_worst(const loom_tensor *a, const loom_tensor *b, double atol, double rtol);

/* Compares two k-nearest-neighbour results (topk's values and indices, [rows, k]) that were
 * computed in different orders (other piece sizes, other kernels), so that equal distances
 * can differ by rounding: values within |a-b| <= atol + rtol |a|, and an index that differs
 * only where its value ties, within that tolerance, with the value the other result holds for
 * that index in the same row, or with the row's last kept value (a tie at the cut). Returns
 * the number of elements that break this. */
int64_t su_knn_mismatches(const loom_tensor *va, const loom_tensor *ia, const loom_tensor *vb,
                          const loom_tensor *ib, double atol, double rtol);

/* Checks what every plan must hold: its stages cover the graph's ops in order, each once;
 * each stage's runner index is valid and, when within_limits, its estimated peak is at or
 * under its limit; stage inputs come from graph inputs or earlier stage outputs. Returns
 * false after reporting the first broken rule through loom_test_fail. */
bool su_check_plan(const loom_plan *plan, bool within_limits, const char *file, int line);
#define ASSERT_PLAN_OK(plan, within)                                  \
  do {                                                                \
    if (!su_check_plan((plan), (within), __FILE__, __LINE__)) return; \
  } while (0)

#endif
