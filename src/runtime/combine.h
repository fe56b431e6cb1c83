/* Combining the results of a loop's ranges on the host (docs/sched.md, "Sharing a loop").
 *
 * The ranges of a loop's pieces (ir/loop_range.h) may run on different devices or ranks; each
 * gives the loop's results over its own pieces. This puts them together into what the loop run
 * whole gives, with the combines the loop's executor uses (runtime/exec.c), run by the cpu
 * backend's kernels on host memory, so NaN, ties and dtypes behave as there.
 */
#ifndef LOOM_RUNTIME_COMBINE_H
#define LOOM_RUNTIME_COMBINE_H

#include "ir/ir.h"

/* One range's results, as host tensors in the loop's result order (what running the graph of
 * loom__loop_range_graph gave), and the pieces it covered. */
typedef struct loom__partial {
  int64_t first, last;        /* pieces [first, last) of the loop */
  const loom_tensor *results; /* the range graph's results, one per loop result */
} loom__partial;

/* Combines partials that together cover every piece of top-level loop op `op` of g exactly
 * once (in any order) into `outs` (one host tensor per loop result, dtype and shape as the
 * loop's results in g, memory owned by the caller): CONCAT copies each range's part into
 * place along its axis; SUM, PROD, MAX, MIN combine elementwise (NaN as the loop does); ARGMAX/
 * ARGMIN + INDEX keep the better value per element (ties to the lower index, as argmax) and add
 * the range's start element (first * piece) to its indices; TOPK + INDEX merge the candidates
 * (k, largest as the loop's combine; ties to the lower index). Ranges are combined in the order
 * of their pieces. Results equal the loop run whole on one device (bit for bit for CONCAT, MAX,
 * MIN, ARG*, TOPK; within rounding for SUM/PROD, whose partial sums are grouped by range).
 * Errors: INVALID_ARGUMENT naming the loop and the piece gap or overlap, or the partial whose
 * shape or dtype is wrong; UNSUPPORTED for a q4 result; OUT_OF_MEMORY. On failure `outs` may
 * hold part of the result. Thread safety: reads g and the partials only. */
loom_status loom__combine_partials(const loom_graph *g, int32_t op, const loom__partial *parts,
                                   int32_t n_parts, loom_tensor *outs);

#endif
