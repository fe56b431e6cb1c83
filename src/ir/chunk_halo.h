/* The halo cut (docs/limits.md, "Halos"): a time-stepped stencil, its steps unrolled into a
 * chain of slices, elementwise ops and concats, run in pieces of its last grid's axis 0, each
 * piece computing every step on a window of its inputs wide enough for the steps' halos.
 * Internal to src/ir. */
#ifndef LOOM_IR_CHUNK_HALO_H
#define LOOM_IR_CHUNK_HALO_H

#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "loom/optimize.h"

/* Rewrites g, whose every op is a slice (step 1 along axis 0), an elementwise op, a concat or
 * a constant or fill source, and whose results share their length along axis 0, into one loop
 * over that axis in the largest pieces whose estimated peak is within `limit`: each piece reads
 * a window of each input (the piece and the halo its steps need, zeros past the ends) and
 * computes the whole chain on it; a concat along axis 0 becomes selects on the piece's global
 * positions, read from a window of a boolean fill. Its loops hold `slices` slices of a streamed
 * operand. Where opts (may be NULL) has fused_runs set and the fuse rewrite enabled, the body is
 * fused as that rewrite fuses it and the pieces are sized on the fused body. On success *out is
 * the new graph (the caller owns it) and `detail` says what was cut.
 * Errors: UNSUPPORTED where g is not such a chain or no piece fits (no message: the caller's
 * refusal stands); OUT_OF_MEMORY. */
loom_status loom__chunk_halo(const loom_graph *g, const loom_optimize_options *opts, int64_t limit,
                             int32_t slices, loom_graph **out, char *detail, size_t detail_size);

/* loom__chunk_halo's one loop over the whole chain, without groups; the same contract. Where
 * the body may fuse (opts), it is sized fused only where the longer pieces pay for the fused
 * evaluator's cost, unless `fused_anyway` (the fuse rewrite will fuse it whatever the time). */
loom_status loom__chunk_halo_one(const loom_graph *g, const loom_optimize_options *opts, int64_t limit,
                                 int32_t slices, bool fused_anyway, loom_graph **out, char *detail,
                                 size_t detail_size);

/* chunk_halo_groups.c: g's steps in groups, each group one halo loop (loom__chunk_halo_one) over
 * the whole grid, reading the grids the group before it leaves: for a chain whose one loop fits
 * no piece under `limit`. The group size is the one of least predicted work whose groups fit.
 * The grids between groups are values of the new graph, held whole by it: the plan passes them
 * between stages. On success *out is the new graph (the caller owns it) and `detail` says what
 * was cut. Errors: UNSUPPORTED (no boundary between steps, or no group fits; no message),
 * OUT_OF_MEMORY. */
loom_status loom__chunk_halo_groups(const loom_graph *g, const loom_optimize_options *opts, int64_t limit,
                                    int32_t slices, loom_graph **out, char *detail, size_t detail_size);

#endif
