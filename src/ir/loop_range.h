/* A range of a loop's pieces as a graph of its own (docs/sched.md, "Sharing a loop").
 *
 * The shared runner (runtime/share.c) and MPI ranks run the pieces of one top-level loop in
 * ranges, each on its own device or rank, and combine the ranges' results on the host
 * (runtime/combine.h). A range graph is the loop cut to its range: the same body, rules and
 * combines, the operands whole and the offsets moved on, so whoever runs it needs nothing but
 * the loop's operands as they are.
 */
#ifndef LOOM_IR_LOOP_RANGE_H
#define LOOM_IR_LOOP_RANGE_H

#include "ir/ir.h"

/* A graph that runs pieces [first, last) of top-level loop op `op` of `g` (0 <= first < last <=
 * the loop's trip count): its parameters are the loop's operands, in the loop's operand order,
 * with the same types as in g (whole: a sliced operand is NOT cut, the range's loop reads it with
 * its offset moved on by first * piece * stride); its single op is a loop over
 * min(last * piece, n) - first * piece elements in pieces of `piece` (the range's length where
 * the range is only the last, shorter piece, with the body retyped for it), with the same body,
 * rules (offset adjusted), slices and combines; its results are the loop's results over those
 * pieces only: a CONCAT result is (elements of the range) long on its axis, a combined result
 * (sum, max, argmax + index, topk + index, ...) is the partial combine over the range, and INDEX
 * results count from the range's start (the caller adds first * piece: loom__combine_partials
 * does). Parameters and results take the names of the loop's operands and results where those
 * are free. The caller owns *out (NULL on failure). Errors: INVALID_ARGUMENT (op is not a
 * top-level loop of g, bad range), OUT_OF_MEMORY. Thread safety: g is only read. */
loom_status loom__loop_range_graph(const loom_graph *g, int32_t op, int64_t first, int64_t last,
                                   loom_graph **out);

#endif
