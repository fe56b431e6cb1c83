/* What the runtime hands a backend to run one op.
 *
 * A view is a tensor seen through element strides, so broadcasts (stride 0), transposes and
 * slices are read in place. Every op's outputs are dense C-order views allocated by the
 * runtime; a backend never allocates tensor memory on its own. Its temporary memory is the
 * scratch the runtime passes, sized by the estimator's rule (loom__op_scratch_bytes), so
 * what is estimated is what is allocated.
 */
#ifndef LOOM_BACKEND_H
#define LOOM_BACKEND_H

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

/* Runs one op on the host: inputs are views (broadcast or strided), outputs dense views of
 * the op's result types; scratch has loom__op_scratch_bytes(op) bytes and may be NULL when
 * that is 0. Returns UNSUPPORTED for a combination the cpu backend cannot run, naming op and
 * dtype. Threads with OpenMP. */
loom_status loom__cpu_run_op(const loom_graph *g, const loom__op *op, const loom__view *inputs,
                             const loom__view *outputs, void *scratch, int64_t scratch_bytes);

#endif
