/* Smaller pieces for the loops of a chunked graph (repiece.c): how a plan's stage is made to
 * hold less memory after the fact (loom_plan_run's recovery from out of memory), without
 * chunking it again around its loops. */
#ifndef LOOM_IR_REPIECE_H
#define LOOM_IR_REPIECE_H

#include "ir/ir.h"

/* A copy of g whose top-level loops run in smaller pieces, one scale for all of them (each
 * piece at least the least its loop allows: 1, or k for a loop merging topk candidates), the
 * largest scale for which g's estimated peak is at most `limit`; where even the least pieces
 * do not fit, those. A graph that fits already, or that has no loop, is copied as it is.
 * *out_peak (may be NULL) is the copy's estimated peak. The caller owns *out.
 * Errors: INVALID_ARGUMENT (g does not verify), OUT_OF_MEMORY. */
loom_status loom__loops_fit(const loom_graph *g, int64_t limit, loom_graph **out, int64_t *out_peak);

/* A copy of g whose top-level loops for which `grows` answers true run in the largest pieces
 * (with `arg`; up to their whole length, with a last piece their combines allow) that keep g's estimated
 * peak at most `limit`, one loop after another in op order; the other ops and loops as they
 * are. For loops whose bodies were fused after chunking: the chunk rewrite sized their pieces
 * for the ops one by one, and a fused body holds far less. g must fit `limit` already. The
 * caller owns *out. Errors: OUT_OF_MEMORY. */
loom_status loom__loops_grow(const loom_graph *g, int64_t limit,
                             bool (*grows)(const loom__loop *loop, void *arg), void *arg, loom_graph **out);

/* A copy of g whose loops inside loop bodies run in the largest pieces (each bisected in
 * turn, measured in the whole graph) that keep g's estimated peak at most `limit`: the rounds
 * of the chunk rewrite size an inner loop for the outer piece of their time, and a later round
 * may leave room. The outer loops keep their pieces (a run shared by several devices wants
 * their many ranges). g must fit `limit` already. The caller owns *out. Errors: OUT_OF_MEMORY. */
loom_status loom__nested_loops_grow(const loom_graph *g, int64_t limit, loom_graph **out);
/* A copy of g whose top-level loop op `which` runs in the largest pieces smaller than its own
 * (at least what its combines allow) for which g's estimated peak is at most `limit`: how the
 * chunk rewrite fits a loop already in the graph (a hand-written one, or a plan's chunked
 * graph chunked again for less) without nesting a loop along its own axis. The caller owns
 * *out. Errors: UNSUPPORTED (no smaller piece fits), OUT_OF_MEMORY. */
loom_status loom__loop_shrink(const loom_graph *g, int32_t which, int64_t limit, loom_graph **out);

#endif
