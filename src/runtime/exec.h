/* The executor: runs a graph's ops in a schedule on one device, allocating each value's
 * storage when it is produced and freeing it after its last reader, under an optional byte
 * limit. Stages of a plan are graphs of their own, so the same code runs a whole graph or a
 * stage.
 *
 * Memory: every buffer (values, an op's temporaries, a library's extra temporaries, the
 * inputs and constants written to a device) is an HMM buffer (loom/memory.h) of the
 * context's manager, allocated on the device's memory node with its exact size
 * (LOOM_MEM_EXACT_SIZE) and kept acquired there while the executor uses it, so the HMM never
 * evicts it; the node's limit (LOOM_MEM_LIMIT) holds for the run, and its stats and trace see
 * every buffer. Freed buffers go to the HMM's pool, which a chunked graph reuses piece after
 * piece; the run trims the node's pool when it ends, so nothing it cached outlives it.
 *
 * The meter is the stage's accountant: it counts the bytes the estimator models (each
 * buffer's size, and on cpu0 the inputs and constants read in place) against the stage's
 * limit, so a cpu run measures what was estimated. Under a limit the executor also keeps the
 * node's pooled bytes within what the meter leaves free (loom__hmm_pool_fit), so the stage
 * never holds more than its limit, cache included.
 *
 * On a device whose memory is not host memory (backend.h: host_memory false), inputs are
 * written into device buffers when the run starts and constants when they are reached, by
 * writes queued on the HMM's in-order queue for the node (loom__buffer_write_queued: the host
 * does not wait for them), and outputs are read back at the end (loom_buffer_read) or handed
 * out where they are (exec options' output_buffers, which a plan's stages use to pass values
 * from device to device); the work in between is only enqueued on that queue, and the run
 * synchronizes once, at its end, which also keeps the written host memory alive long enough.
 * Every byte held on the device is counted by the meter
 * exactly as on cpu0 (an input or constant counts its bytes whether it is read in place or
 * written in), so the estimator's numbers hold on every device. Fill scalars (at most 16
 * bytes each) sit in one small device buffer outside the meter, as their host copies do on
 * cpu0.
 *
 * A loop op (graph.h "loops") runs its body once per piece through this same executor, in a
 * nested state made once per run of the loop, on the run's meter, device and memory: the body
 * reads its operands where they are, writes concat results straight into their slots of the
 * loop's results where the estimator says so (loom__loop_result_in_place), and the other
 * results are combined across pieces by ops the backend runs (and its copy and merge_index
 * entries, backend.h). A graph input only loops read, each slicing it contiguously or passing
 * it whole to a body whose own loops stream it (loom__value_streamed: a dot's rows outside, its
 * k inside), is not held by the run, at any level: the innermost loop counts its slices for its
 * run, one piece's and, where it runs more than one and double buffers (the loop's slices,
 * loom_graph_loop_set_slices), the next one's, read in place where the input is reachable
 * (host memory on cpu0, a caller's buffer) and written otherwise into device buffers from the
 * caller's host tensor (which every body the input is passed through whole keeps for its
 * parameter): with two used in turn, the next piece's slice is written ahead on the device's
 * transfer queue while the piece computes (loom__buffer_write_ahead). What a
 * piece holds is what loom__loop_scratch_bytes estimates, so a loop's measured peak is its
 * estimate too.
 */
#ifndef LOOM_EXEC_H
#define LOOM_EXEC_H

#include "backends/backend.h"
#include "ir/ir.h"
#include "loom/memory.h"
#include "loom/plan.h"
#include "loom/runtime.h"

/* Counts the bytes the runtime holds for one execution. No allocation ever passes `limit`. */
typedef struct loom__meter {
  int64_t in_use;
  int64_t peak;
  int64_t limit; /* 0: none */
  int64_t allocations;
} loom__meter;

/* Counts `bytes` against the meter, failing with OUT_OF_MEMORY (naming `what`, the need and
 * the limit) when that would pass the limit. */
loom_status loom__meter_take(loom__meter *m, int64_t bytes, const char *what);
void loom__meter_give(loom__meter *m, int64_t bytes);

struct loom_mem_manager;

/* A device of a context the executor runs on: a compute backend, its state for the device,
 * and where its memory comes from. */
typedef struct loom__exec_device {
  const loom__backend *backend;
  void *dev;                       /* what backend->open made; NULL for cpu0 */
  char id[16];                     /* "cpu0", "ocl1" */
  struct loom_mem_manager *memory; /* the context's manager (loom_context_memory) */
  int32_t node;                    /* the device's memory node in it */
} loom__exec_device;

typedef struct loom__exec_options {
  const int32_t *schedule;         /* op indices in execution order; NULL: the graph's order */
  const loom__exec_device *device; /* from loom__context_exec_device; required */
  /* NULL, or one per parameter: a buffer of the device's manager holding that input densely
   * (at least its bytes), or NULL for the host tensor inputs[p]. A buffer is read where the
   * HMM makes it valid for the device's node: acquired there, and copied in from wherever it
   * is (between two OpenCL devices of one platform, device to device, ordered by events).
   * It stays the caller's; inputs[p] then gives only the type. */
  loom_buffer *const *input_buffers;
  /* NULL, or one per returned value: on a device whose memory is not host memory, a returned
   * value the run computed into a buffer of its own is handed out here, on the device's node
   * and not read back (the caller frees it with loom_buffer_free), and outputs[i] gets only
   * its type (data NULL). Every other output is read back as usual and gets NULL here. */
  loom_buffer **output_buffers;
  /* With output_buffers, NULL or one per returned value: true hands that value's own buffer
   * out on host memory (cpu0) too rather than making it a host tensor (resident runs,
   * loom_plan_run_buffers, for the values the graph returns). */
  const bool *host_buffers;
  /* The run leaves what it cached in the node's pool there for the next run (resident runs,
   * called over and over) instead of trimming it at its end; the node's limit still holds. */
  bool keep_pool;
  /* On a device whose backend can submit without waiting (flush: OpenCL): where the run
   * queued no write from host memory (inputs all buffers, no constants or fill scalars
   * written in), it returns once its work is submitted to the node's in-order queue rather
   * than waiting for it (resident runs): whatever reads its results through the memory
   * manager is ordered behind it, and a device error shows at the next call that waits for
   * the device. */
  bool no_wait;
} loom__exec_options;

/* Runs g on host inputs (parameter order, types already checked; or the buffers of
 * opts->input_buffers) on opts->device and fills outputs (one per returned value, allocated
 * here; the caller deinits them; or handed out in opts->output_buffers). The meter counts
 * every byte held and enforces its limit; the device's memory node enforces its own (an
 * allocation the node cannot make room for is OUT_OF_MEMORY naming the node). On failure
 * every output is released, and every device buffer. Errors name the op's line where the
 * graph was parsed, and inside a loop the piece ("loop over N in pieces of P: piece i of T
 * [lo, hi): ") and the body op; INVALID_ARGUMENT without a device; UNSUPPORTED for a loop on
 * a backend without copy and merge_index. */
loom_status loom__execute(const loom_graph *g, const loom__exec_options *opts, const loom_tensor *inputs,
                          loom_tensor *outputs, loom__meter *meter);

/* Checks that inputs match g's parameters in count and type; messages name the parameter. */
loom_status loom__check_inputs(const loom_graph *g, const loom_tensor *inputs, int32_t n_inputs);

/* The device `id` (a device id or alias of the context: "cpu0", "ocl1") ready to run graphs,
 * opened on first use and kept until the context is destroyed (runtime/backends.c). cpu0 is
 * always there, even in a context that did not select it (its memory is then the first host
 * node). The pointer stays valid as long as the context. Thread safety: any thread.
 * Errors: NOT_FOUND (the context has no such device; the message lists those it has),
 * UNSUPPORTED (no compute backend of this build drives it, or the HMM does not manage its
 * memory), and the backend's errors when it cannot open the device (UNAVAILABLE,
 * OUT_OF_MEMORY). */
loom_status loom__context_exec_device(loom_context *ctx, const char *id,
                                      const loom__exec_device **out_device);

/* For the shared runner (share.c): runs `plan` with each parameter either a host tensor
 * (inputs[p], in_bufs[p] NULL) or a buffer (in_bufs[p]; inputs[p] gives its type only; either
 * array may be NULL where every parameter is of the other kind). With out_bufs, every output
 * is handed out as loom_plan_run_buffers does (a buffer resident where its stage ran, the
 * caller's to free; the run does not wait for an OpenCL device's work); else as host tensors
 * in outputs, as loom_plan_run does. Errors: as loom_plan_run_buffers. */
loom_status loom__plan_run_mixed(loom_context *ctx, const loom_plan *plan, const loom_tensor *inputs,
                                 loom_buffer *const *in_bufs, loom_tensor *outputs, loom_buffer **out_bufs,
                                 int32_t n_outputs, loom_plan_stats *stats);

/* Makes the context's table of devices and opens cpu0 in it; called by loom_context_create
 * once the devices and the memory manager are there. Errors: OUT_OF_MEMORY. */
loom_status loom__context_exec_init(loom_context *ctx);

/* Closes every device loom__context_exec_device opened; called by loom_context_destroy. */
void loom__context_exec_release(loom_context *ctx);

#endif
