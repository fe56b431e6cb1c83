/* Views and scratch, as the IR defines them for every backend (ir/layout.c).
 *
 * A view is a tensor seen through element strides, so broadcasts (stride 0), transposes and
 * slices are read in place. An op's temporary memory is its scratch, sized by one rule
 * (loom__op_scratch_bytes) that the estimator, the scheduler, the splitter and the executor
 * all read, so what is estimated is what is allocated. The backends see both through
 * backends/backend.h, which includes this header.
 */
#ifndef LOOM_IR_VIEW_H
#define LOOM_IR_VIEW_H

#include "ir/ir.h"

typedef struct loom__view {
  loom_type type;
  int64_t strides[LOOM_MAX_RANK]; /* in elements; 0 on broadcast dimensions */
  void *data;                     /* element [0,..,0]; may be NULL when the view is empty */
} loom__view;

/* Dense C-order strides for type. */
void loom__view_dense_strides(const loom_type *type, int64_t *strides);
/* The view of `in` broadcast to `shape` (NumPy rules; caller checked they broadcast). */
void loom__view_broadcast_to(const loom__view *in, const loom_type *shape, loom__view *out);

/* Temporary bytes an op needs while it runs, on top of its outputs (IR.md's rule: dot 1x its
 * output, conv 2x, fourier 2x, reductions, argmax/argmin and topk 1x, others 0). */
int64_t loom__op_scratch_bytes(const loom_graph *g, const loom__op *op);

/* A loop's scratch (estimate.c): what one piece holds at its peak, as the executor runs it
 * (runtime/exec.c): the slices of streamed operands, held through the piece, plus the larger
 * of its body's peak (counting neither the operands it reads in place nor the results it
 * writes into their slots) and, once the body has run, what it returned beside the
 * temporaries of the largest argmax/argmin or topk merge (the executor merges one pair at a
 * time; the other combines need none). */
int64_t loom__loop_scratch_bytes(const loom_graph *g, const loom__op *op);

/* Whether a piece's result j of loop op is written straight into its slot of the loop's
 * result: a concat result the body computes into storage of its own (not a view, not a
 * parameter, not returned twice) whose slot is contiguous (every axis before the concat axis
 * has length 1), unless that result is streamed out (loom__value_streamed_out). Otherwise the
 * executor copies it in. */
bool loom__loop_result_in_place(const loom_graph *g, const loom__op *op, int32_t j);

/* Whether graph input (parameter) value v is streamed: read only by loops, each slicing it
 * along an axis whose slice is contiguous (every axis before it has length 1), or passing it
 * whole to a body that streams it (its parameter streamed there, recursively), so no runner
 * holds it whole: each piece's slice is brought in when the innermost piece runs. */
bool loom__value_streamed(const loom_graph *g, int32_t v);

/* Whether streamed operand i of loop op passes its slices on: a plain slice (not a window, not
 * q4: a block of A's rows, or of B's columns, many runs of B) that the body streams in turn,
 * each inner loop slicing it plainly (no window) or passing it on whole (a block of A's rows
 * whose k-blocks an inner loop takes). Such a slice is never held: the inner loop's slices of
 * it are, read in place or written in from the caller's tensor (run by run), so the estimate
 * counts only those. */
bool loom__loop_slice_passed(const loom_graph *g, const loom__op *op, int32_t i);

/* Whether graph output v is streamed out: a loop's concat result with a contiguous slot that
 * the graph only returns (no op reads it), so no runner holds it whole: each piece's result is
 * copied out to the caller's output when the piece is done (on host memory, written straight
 * into it), and only one piece's result is held. */
bool loom__value_streamed_out(const loom_graph *g, int32_t v);

/* Whether result j of loop op, streamed out into the caller's tensor (`streamed_out`: at the
 * top, loom__value_streamed_out; in a body, as its loop passed it out), is passed out in turn
 * by the body: its slot is contiguous (the caller's tensor holds it as one dense block) and the
 * body's result is an inner loop's streamed out there (loom__value_streamed_out in the body).
 * Neither the body nor the loop then holds it: the inner loop writes each of its pieces into
 * the caller's tensor (a tile's rows of C). */
bool loom__loop_result_passed_out(const loom_graph *g, const loom__op *op, int32_t j, bool streamed_out);

#endif
