/* What the runtime hands a backend to run one op.
 *
 * A view is a tensor seen through element strides, so broadcasts (stride 0), transposes and
 * slices are read in place. Every op's outputs are dense C-order views allocated by the
 * runtime; a backend never allocates tensor memory on its own. Its temporary memory is the
 * scratch the runtime passes, sized by the estimator's rule (loom__op_scratch_bytes), so
 * what is estimated is what is allocated. (loom__view and the scratch rule are the IR's:
 * ir/view.h.)
 */
#ifndef LOOM_BACKEND_H
#define LOOM_BACKEND_H

#include "ir/ir.h"
#include "ir/view.h"

/* Runs one op on the host: inputs are views (broadcast or strided), outputs dense views of
 * the op's result types; scratch has loom__op_scratch_bytes(op) bytes and may be NULL when
 * that is 0. Returns UNSUPPORTED for a combination the cpu backend cannot run, naming op and
 * dtype. Threads with OpenMP. */
loom_status loom__cpu_run_op(const loom_graph *g, const loom__op *op, const loom__view *inputs,
                             const loom__view *outputs, void *scratch, int64_t scratch_bytes);

/* ---- backends as the executor sees them ------------------------------------------------
 *
 * A device's memory is addressed as (buffer, element offset): OpenCL without SVM has no
 * pointers. A buffer is the backend's handle (a host pointer for cpu, a cl_mem for opencl).
 * A dview is a view of a buffer: the tensor whose element [0,..,0] is element `offset` of
 * the buffer, seen through element strides (0 on broadcast dimensions). */
typedef struct loom__dview {
  loom_type type;
  int64_t strides[LOOM_MAX_RANK];
  void *buffer;   /* NULL only when the view is empty */
  int64_t offset; /* in elements of type.dtype */
} loom__dview;

/* One op for a backend to run: inputs are dviews (broadcast or strided), outputs dense dviews
 * of the op's result types. `scratch` (a buffer of the same device, or NULL when
 * scratch_bytes is 0) holds loom__op_scratch_bytes(op) bytes: the estimator's rule, so what is
 * estimated is what is allocated. A backend whose library wants more temporary memory may ask
 * the executor for it through temp_take (counted by the executor's meter, given back with
 * temp_give before run_op returns); temp_take is NULL when the executor runs under a limit
 * (the estimate is then a promise), and a backend must have a way that fits the scratch. */
typedef struct loom__op_call {
  const loom_graph *g;
  const loom__op *op;
  const loom__dview *in;
  const loom__dview *out;
  void *scratch;
  int64_t scratch_bytes;
  /* A dot only, on a backend whose dot_accumulates is set: out[0] += the product instead of
   * out[0] = it (a loop summing the partial dots of its pieces over k has each piece's written
   * into the sum itself: no piece buffer to clear, no add after it). */
  bool accumulate;
  loom_status (*temp_take)(void *temp_ctx, int64_t bytes, void **out_buffer);
  void (*temp_give)(void *temp_ctx, void *buffer, int64_t bytes);
  void *temp_ctx;
} loom__op_call;

struct loom__device;
struct loom_mem_manager;

/* A strided copy on a device: dims[0..rank) elements of `elem` bytes from buffer src (element
 * offset src_off, element strides src_strides) to buffer dst (dst_off, dst_strides; NULL:
 * dense), enqueued on the device's queue. */
typedef loom_status (*loom__strided_copy_fn)(void *dev, int64_t elem, int32_t rank, const int64_t *dims,
                                             void *dst, int64_t dst_off, const int64_t *dst_strides,
                                             void *src, int64_t src_off, const int64_t *src_strides);

/* The index half of a loop's merge of candidates (runtime/exec.c): over `total` i64 elements
 * of pos (element offset pos_off), seen as rows [outer, k, inner] in C order, each element
 * holds p, a position among 2k candidates along the middle axis: the k of acc then the k of
 * piece (both dense i64 of pos's shape, at element offsets acc_off and piece_off). It is
 * replaced in place by the candidate's index: acc's for p < k, else piece's at p - k plus lo.
 * Enqueued on the device's queue. */
typedef loom_status (*loom__merge_index_fn)(void *dev, int64_t total, int64_t k, int64_t inner, void *pos,
                                            int64_t pos_off, void *acc, int64_t acc_off, void *piece,
                                            int64_t piece_off, int64_t lo);

/* A compute backend: a static const table (DESIGN.md "Backends"). `dev` is the state open()
 * made for one device of a context (NULL for cpu, which needs none). The executor keeps the
 * order of operations: each device runs what it is given in order (one in-order queue), and
 * nothing but synchronize waits for the device.
 *
 * Memory is the HMM's (loom/memory.h): the executor allocates every buffer it hands to
 * run_op on the device's memory node of the context's manager, and copies to and from the
 * device through it. A buffer is what loom_buffer_acquire gives for that node: the cl_mem
 * (opencl), the device pointer (cuda) or the pointer (host memory, cpu).
 *
 * - open/close: the state for one device of the device table; `memory` and `node` are the
 *   context's manager and the device's node in it (the manager outlives the state). A backend
 *   whose memory belongs to a context of its own runs in the HMM's: opencl takes the
 *   cl_context and in-order queue of the node (loom__hmm_opencl_queue), so its kernels use
 *   the HMM's buffers and follow the HMM's copies in order. open may be NULL when the backend
 *   needs no state.
 * - run_op: enqueues one op (loom__op_call); errors of the op's own checks are returned at
 *   once, errors of the device may surface at the next synchronize (or at an HMM read).
 * - synchronize: waits until everything enqueued is done; returns the first device error.
 * - flush: optional: submits what was enqueued to the device without waiting for it (a run
 *   that returns with its work queued, exec.h no_wait); a backend without it is always waited
 *   for.
 * - copy, merge_index: what the executor's loops need besides ops (a piece's result copied
 *   into its slot of the loop's result, the indices of merged topk and argmax candidates),
 *   enqueued in order with the ops, thread-safe as run_op is. Optional: a backend without
 *   them runs no loop (the executor says so).
 * host_memory: buffers are host pointers the host reads and writes directly (cpu): the
 * executor then reads inputs and constants in place instead of copying them in.
 * mark, mark_seconds, mark_release: the device's own clock (event profiling), optional. mark
 *   enqueues a timestamp on the device's queue that completes when the work enqueued before it
 *   has (*out_mark is the caller's, given back with mark_release); mark_seconds gives the
 *   device time between two marks of one queue, waiting for both to complete. A backend
 *   without them (cpu) is timed on the host. Thread-safe as run_op is. */
typedef struct loom__backend {
  const char *name;
  bool host_memory;
  bool dot_accumulates; /* run_op honours loom__op_call.accumulate for a dot */
  loom_status (*open)(const struct loom__device *device, struct loom_mem_manager *memory, int32_t node,
                      void **out_dev);
  void (*close)(void *dev);
  loom_status (*run_op)(void *dev, const loom__op_call *call);
  loom_status (*synchronize)(void *dev);
  loom_status (*flush)(void *dev);
  loom__strided_copy_fn copy;
  loom__merge_index_fn merge_index;
  loom_status (*mark)(void *dev, void **out_mark);
  loom_status (*mark_seconds)(void *dev, void *from, void *to, double *seconds);
  void (*mark_release)(void *dev, void *mark);
} loom__backend;

/* The cpu backend (cpu_backend.c): host memory, loom__cpu_run_op. */
extern const loom__backend loom__cpu_backend;
/* The opencl backend (backends/opencl/opencl_backend.c), when built with OpenCL. */
extern const loom__backend loom__opencl_backend;
/* The cuda backend (backends/cuda/cuda_backend.c), when built with the CUDA toolkit. */
extern const loom__backend loom__cuda_backend;

/* The element strides that read dview `in` broadcast to `shape` (NumPy rules: 0 on broadcast
 * dimensions) into st; false when the shapes do not broadcast. */
bool loom__dview_broadcast_strides(const loom__dview *in, const loom_type *shape, int64_t *st);
/* Runs layout op c (reshape, transpose, broadcast, slice, concat, tile) as strided copies on
 * device `dev` (named `id` in errors) through `copy` (backends/layout.c). INVALID_ARGUMENT
 * when the op's attributes and views disagree. */
loom_status loom__layout_run(void *dev, const char *id, loom__strided_copy_fn copy, const loom__op_call *c);

/* The host view of a cpu dview (data = buffer + offset elements). */
void loom__dview_to_host(const loom__dview *in, loom__view *out);

#endif
