/* The executor: runs a graph's ops in a schedule on one device (cpu0 unless told otherwise),
 * allocating each value's storage when it is produced and freeing it after its last reader,
 * under an optional byte limit. Stages of a plan are graphs of their own, so the same code
 * runs a whole graph or a stage.
 *
 * On a device whose memory is not host memory (backend.h: host_memory false), inputs and
 * constants are uploaded into device buffers when the run starts and when the constant is
 * reached, and outputs are downloaded at the end; the work in between is only enqueued (one
 * in-order queue per device), and the run synchronizes once, at its end. Every byte held on
 * the device is counted by the meter exactly as on cpu0 (an input or constant counts its bytes
 * whether it is read in place or uploaded), so the estimator's numbers hold on every device.
 * Fill scalars (at most 16 bytes each) sit in one small device buffer outside the meter, as
 * their host copies do on cpu0.
 */
#ifndef LOOM_EXEC_H
#define LOOM_EXEC_H

#include "backends/backend.h"
#include "ir/ir.h"
#include "loom/runtime.h"

/* Counts the bytes the runtime holds for one execution. No allocation ever passes `limit`. */
typedef struct loom__meter {
  int64_t in_use;
  int64_t peak;
  int64_t limit; /* 0: none */
  int64_t allocations;
  int64_t cached; /* freed blocks kept for reuse: they count against the limit too */
} loom__meter;

/* Counts `bytes` against the meter, failing with OUT_OF_MEMORY (naming `what`, the need and
 * the limit) when that would pass the limit. */
loom_status loom__meter_take(loom__meter *m, int64_t bytes, const char *what);
void loom__meter_give(loom__meter *m, int64_t bytes);

/* A device the executor runs on: a compute backend and its state for one device. */
typedef struct loom__exec_device {
  const loom__backend *backend;
  void *dev;   /* what backend->open made; NULL for cpu0 */
  char id[16]; /* "cpu0", "ocl1" */
} loom__exec_device;

/* cpu0: needs no context. */
extern const loom__exec_device loom__exec_cpu0;

typedef struct loom__exec_options {
  const int32_t *schedule;         /* op indices in execution order; NULL: the graph's order */
  const loom__exec_device *device; /* NULL: cpu0 */
} loom__exec_options;

/* Runs g on host inputs (parameter order, types already checked) and fills outputs (one per
 * returned value, allocated here; the caller deinits them). The meter counts every byte held
 * and enforces its limit. On failure every output is released, and every device buffer.
 * Errors name the op's line where the graph was parsed. */
loom_status loom__execute(const loom_graph *g, const loom__exec_options *opts, const loom_tensor *inputs,
                          loom_tensor *outputs, loom__meter *meter);

/* Checks that inputs match g's parameters in count and type; messages name the parameter. */
loom_status loom__check_inputs(const loom_graph *g, const loom_tensor *inputs, int32_t n_inputs);

/* The device `id` (a device id or alias of the context: "cpu0", "ocl1") ready to run graphs,
 * opened on first use and kept until the context is destroyed (runtime/backends.c). The
 * pointer stays valid as long as the context. Thread safety: any thread.
 * Errors: NOT_FOUND (the context has no such device; the message lists those it has),
 * UNSUPPORTED (no compute backend of this build drives it), and the backend's errors when it
 * cannot open the device (UNAVAILABLE, OUT_OF_MEMORY). */
loom_status loom__context_exec_device(loom_context *ctx, const char *id,
                                      const loom__exec_device **out_device);

/* Closes every device loom__context_exec_device opened; called by loom_context_destroy. */
void loom__context_exec_release(loom_context *ctx);

#endif
