/* Memory-saving rewrites (shared/IR.md, "Rewrites"): match and replace, reorder, schedule, chunk
 * into loops under a limit, fuse. */
#ifndef LOOM_OPTIMIZE_H
#define LOOM_OPTIMIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "loom/estimate.h"
#include "loom/export.h"
#include "loom/graph.h"
#include "loom/runner.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The rewrites, by the names --no-rewrite takes:
 *   distance          pairwise squared distance -> norms and a dot (clamped at 0), or,
 *                     under a limit at small dimensions, the direct form summed feature by
 *                     feature (exact to rounding; see loom_distance_form)
 *   attention         softmax(q k^T * scale) v -> one fused op that streams over blocks of
 *                     keys with an online softmax, never storing the scores (under a limit,
 *                     only where fused_runs says every backend runs it fused)
 *   dot_transpose     transposes of dot operands folded into the dot
 *   tile_broadcast    tile of size-1 axes -> broadcast view
 *   reduce_broadcast  a reduction over a broadcast axis -> a multiply
 *   dot_chain         dot chains in matrix-chain order
 *   sum_broadcast     sums of broadcasts reordered to add small operands first
 *   schedule          the order of independent ops chosen to lower the peak
 *   chunk             ops or chains over the limit computed in pieces (needs a limit)
 *   fuse              elementwise ops and the reduction consuming them as one fused op
 *                     (docs/ir-fusion.md), in loop bodies too; runs last */
#define LOOM_REWRITE_NAMES                                                                     \
  "distance", "attention", "dot_transpose", "tile_broadcast", "reduce_broadcast", "dot_chain", \
      "sum_broadcast", "schedule", "chunk", "fuse"

/* Which form the "distance" rewrite gives a pairwise squared distance (README, "Exact
 * distances"). AUTO lets its cost model choose: the direct form sum_k (a_k - b_k)^2, exact to
 * rounding, where the graph is chunked under the limit anyway and the point dimension is small
 * enough that the expanded form's dot brings no speed; else the expanded form
 * |a|^2 + |b|^2 - 2 a.b^T. The other two force one form (for benchmarks and tests). */
typedef enum loom_distance_form {
  LOOM_DISTANCE_AUTO = 0,
  LOOM_DISTANCE_EXPANDED,
  LOOM_DISTANCE_DIRECT,
} loom_distance_form;

typedef struct loom_optimize_options {
  const char *const *disabled; /* names of rewrites not to apply */
  int32_t n_disabled;
  int64_t limit; /* bytes the graph must fit for "chunk"; 0: no chunking */
  /* Fusion before chunking: where the graph passes the limit, the fuse rewrite is first tried
   * on the whole graph, and where the fused graph fits, nothing is chunked (one fused op over
   * the whole space instead of a loop of small pieces: a GPU gets one large kernel). This is
   * only safe where every fused body runs fused wherever the plan may place it, since a body
   * run op by op would need its intermediates whole; which bodies do is the backends' to say,
   * so this callback says it (true: runs fused on every backend). NULL: never taken, chunk
   * then fuse (loom_optimize_options_init's default). The runtime's answer is
   * loom_fused_body_runs_everywhere, which the tools set. */
  bool (*fused_runs)(const loom_graph *body);
  loom_distance_form distance_form; /* the "distance" rewrite's form; AUTO (0) by default */
  /* The slices of each streamed operand the chunk rewrite's loops hold
   * (loom_graph_loop_set_slices): 2 to double buffer (a device with memory of its own copies
   * the next piece's slice in while a piece computes), 1 where nothing would overlap (cpu0
   * reads host memory in place), so the pieces can be longer; 0: loom_graph_optimize_for_runners
   * chooses for its runners, and loom_graph_optimize takes LOOM_LOOP_SLICES_DEFAULT (2). */
  int32_t slices;
} loom_optimize_options;

/* True when every backend of this build runs the fused body `body` (the body graph of a
 * LOOM_OP_FUSED op, docs/ir-fusion.md) fused, with its operands dense: the cpu evaluator and
 * the GPU kernel generator both accept it (f16/bf16 and complex bodies, for instance, run op by
 * op). Meant for loom_optimize_options.fused_runs; where it answers false, loom_last_error
 * says why. */
LOOM_API bool loom_fused_body_runs_everywhere(const loom_graph *body);

/* Fills *opts with the defaults: every rewrite, no limit, the distance rewrite's AUTO form,
 * slices chosen for the runners, fused_runs NULL (chunk, then fuse). Accepts NULL. */
LOOM_API void loom_optimize_options_init(loom_optimize_options *opts);

typedef struct loom_rewrite_entry {
  char name[32];       /* the rewrite's name */
  char detail[256];    /* what it matched, in words and with value names */
  int64_t bytes_saved; /* estimated peak before minus after this application */
} loom_rewrite_entry;

typedef struct loom_rewrite_report {
  int32_t count;
  loom_rewrite_entry *entries; /* owned; released by loom_rewrite_report_deinit */
} loom_rewrite_report;

LOOM_API void loom_rewrite_report_deinit(loom_rewrite_report *report);

/* Applies the enabled rewrites to `graph` (match and replace, reorder, schedule, then chunk
 * when opts->limit > 0) and returns the new graph in *out_graph (caller owns; the input is
 * not changed). `report` (may be NULL) receives one entry per application; initialise it to
 * zero. Results equal the input graph's within IR.md's tolerance. Errors: INVALID_ARGUMENT
 * (graph does not verify, unknown rewrite name), OUT_OF_MEMORY (including: an op that cannot
 * fit opts->limit even when chunked, with the op, its need and the limit in the message). */
LOOM_API loom_status loom_graph_optimize(const loom_graph *graph, const loom_optimize_options *opts,
                                         loom_graph **out_graph, loom_rewrite_report *report);

/* Prepares `graph` for `runners`: rewrites it (opts may be NULL; its limit is ignored) with
 * chunking to the largest runner limit. Unless opts->slices says otherwise, its loops hold one
 * slice of a streamed operand where every runner is a cpu device (host memory: no copy to
 * overlap), two where one has memory of its own (double buffering), or one there too with
 * LOOM_WRITE_AHEAD=0 (the next slice is then written behind the piece, not beside it). Where
 * chunking cannot fit the whole graph under that limit (it holds more at once than any runner,
 * though its parts fit), it rewrites without chunking instead, so that
 * loom_plan_split_by_memory cuts it into stages; `note` (may be NULL) then says why, else it
 * is set to "". With no runners, no chunking. Caller owns *out_graph. Errors: as
 * loom_graph_optimize. */
LOOM_API loom_status loom_graph_optimize_for_runners(const loom_graph *graph, const loom_runner *runners,
                                                     int32_t n_runners, const loom_optimize_options *opts,
                                                     loom_graph **out_graph, loom_rewrite_report *report,
                                                     char *note, size_t note_size);

#ifdef __cplusplus
}
#endif
#endif
