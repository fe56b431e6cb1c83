/* The memory-saving passes over graphs (IR.md "Rewrites"). Each takes a verified graph and
 * returns a new one (the input is never changed), appending what it did to a report. */
#ifndef LOOM_PASSES_H
#define LOOM_PASSES_H

#include "ir/rebuild.h"
#include "loom/optimize.h"

/* Appends one entry to report (NULL report: nothing). detail is printf-formatted. */
loom_status loom__report_add(loom_rewrite_report *report, const char *name, int64_t bytes_saved,
                             const char *fmt, ...) LOOM_PRINTF(4, 5);

/* match and replace (rewrite_match.c): "distance", "attention" (attention.c), "dot_transpose",
 * "tile_broadcast", "reduce_broadcast" */
loom_status loom__rewrite_match(const loom_graph *g, const loom_optimize_options *opts, loom_graph **out,
                                loom_rewrite_report *report);
/* reorder (rewrite_reorder.c): "dot_chain", "sum_broadcast" */
loom_status loom__rewrite_reorder(const loom_graph *g, const loom_optimize_options *opts, loom_graph **out,
                                  loom_rewrite_report *report);
/* schedule (schedule.c): "schedule" — the ops re-emitted in an order that lowers the peak */
loom_status loom__rewrite_schedule(const loom_graph *g, const loom_optimize_options *opts, loom_graph **out,
                                   loom_rewrite_report *report);
/* chunk (chunk.c): "chunk" — ops or chains whose working set passes opts->limit computed in
 * pieces so the graph's estimated peak fits the limit. Fails with OUT_OF_MEMORY naming the
 * op, its need and the limit when no chunking fits. */
loom_status loom__rewrite_chunk(const loom_graph *g, const loom_optimize_options *opts, loom_graph **out,
                                loom_rewrite_report *report);
/* chunk_chain.c: a copy of g with the products the chunk rewrite cannot stream in forms it can
 * (`dot (transpose A) v` as `dot v A`; `(A B)(C D)` as a chain along one side), `what` (at least
 * 256 bytes) saying which. Errors: UNSUPPORTED (no such product: *out stays NULL),
 * OUT_OF_MEMORY. The caller owns *out. */
loom_status loom__chunk_streamable(const loom_graph *g, loom_graph **out, char *what, size_t what_size);
/* chunk_tile.c: g's predicted time in seconds by a roofline per op and a cost per loop piece,
 * for ordering candidate cuts (not a prediction of a run: loom_plan_predict is). */
double loom__chunk_predicted_time(const loom_graph *g);
/* chunk_tile.c: a copy of g (which fits `limit`) whose top-level loops with loops in their
 * bodies run in the outer pieces of least predicted time, each inner loop regrown into the
 * room left; `what` (at least 256 bytes) says what changed, "" where nothing did. The caller
 * owns *out. Errors: OUT_OF_MEMORY. */
loom_status loom__chunk_tiles_balance(const loom_graph *g, int64_t limit, loom_graph **out, char *what,
                                      size_t what_size);
/* fuse (fuse.c): "fuse" — regions of elementwise ops and the reduction consuming them become
 * one fused op (docs/ir-fusion.md), in the graph and in its loops' bodies. Runs last. */
loom_status loom__rewrite_fuse(const loom_graph *g, const loom_optimize_options *opts, loom_graph **out,
                               loom_rewrite_report *report);
/* Pieces the chunk rewrite has emitted since the process started, the first pieces of its
 * probes included: what its search for a piece size costs (tests bound it). */
int64_t loom__chunk_pieces_emitted(void);

/* True when the rewrite called `name` is enabled in opts. */
bool loom__rewrite_enabled(const loom_optimize_options *opts, const char *name);

#endif
