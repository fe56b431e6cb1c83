/* NOT STABLE API: an internal header, for Loom's own tools; it may change in any release and
 * is not installed. The symbols are in the static library (hidden in the shared one).
 *
 * Why it exists: loom_optimize_options.fused_runs must say whether a fused body runs fused
 * wherever the plan may place it. loom_fused_body_runs_everywhere answers for every backend of
 * the build, so a body only the cpu evaluator runs fused (a topk over a large dot, which the
 * GPU kernel generator leaves op by op) is never grown into large pieces, even by a tool whose
 * every runner is cpu0. Such a tool (loom-bench knn) passes this one instead. */
#ifndef LOOM_INTERNAL_FUSED_H
#define LOOM_INTERNAL_FUSED_H

#include <stdbool.h>

#include "loom/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* True when the cpu backend runs the fused body `body` (the body graph of a LOOM_OP_FUSED op)
 * fused, with its operands dense; for loom_optimize_options.fused_runs where cpu devices are
 * the plan's only runners. Where it answers false, loom_last_error says why. Thread-safe. */
bool loom__fused_body_runs_on_cpu(const loom_graph *body);

#ifdef __cplusplus
}
#endif

#endif
