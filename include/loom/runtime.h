/* Contexts and running graphs.
 *
 * A context holds the devices found, the memory manager and caches. There is no hidden global
 * state: several contexts may live in one process. A context may be used from several threads
 * only where a function says so.
 */
#ifndef LOOM_RUNTIME_H
#define LOOM_RUNTIME_H

#include <stdint.h>

#include "loom/export.h"
#include "loom/graph.h"
#include "loom/status.h"
#include "loom/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_context loom_context;

typedef struct loom_context_options {
  /* Which devices to use: ids ("cpu0,ocl1") or classes ("cpu", "gpu", "opencl", "cuda",
   * "all"). NULL reads LOOM_DEVICES, and when that is unset too, every device found. */
  const char *devices;
} loom_context_options;

LOOM_API void loom_context_options_init(loom_context_options *opts);

/* Creates a context: discovers the host and every device, applies the selection, and makes
 * the context's memory manager (loom_context_memory in loom/memory.h, with the limits of
 * LOOM_MEM_LIMIT). opts may be NULL for the defaults. The caller owns *out_ctx. A missing
 * OpenCL platform or CUDA driver is not an error (the context's notes say so).
 * Errors: INVALID_ARGUMENT (a device selection, or a LOOM_MEM_LIMIT, that does not parse),
 * NOT_FOUND (it names a device that is not there), UNAVAILABLE (hwloc could not load the host
 * topology), OUT_OF_MEMORY. */
LOOM_API loom_status loom_context_create(const loom_context_options *opts, loom_context **out_ctx);
/* Destroys a context. Accepts NULL. */
LOOM_API void loom_context_destroy(loom_context *ctx);

/* Statistics of one run, as the runtime's meter counted them (the bytes it asked the memory
 * manager for, and the inputs and constants it read in place). */
typedef struct loom_run_stats {
  int64_t peak_bytes;  /* most bytes allocated at once for values and temporaries */
  int64_t allocations; /* number of allocations */
  double seconds;      /* wall time of the run */
} loom_run_stats;

/* Runs `graph` on cpu0 with host inputs (in parameter order, types equal to the
 * parameters') and writes its outputs into outputs[0..n_outputs), each allocated by Loom and
 * released by the caller with loom_tensor_deinit. On failure no output is left allocated.
 * Values and temporaries are allocated through the context's memory manager on cpu0's memory
 * node (so its limit, e.g. LOOM_MEM_LIMIT=cpu0:8MiB, holds for the run), and the run gives
 * back what that node's pool cached for it before returning.
 * `stats` may be NULL. Errors: INVALID_ARGUMENT (counts or types that do not match, a graph
 * that does not verify), OUT_OF_MEMORY (also when the memory node's limit is reached),
 * UNSUPPORTED. */
LOOM_API loom_status loom_graph_run(loom_context *ctx, const loom_graph *graph, const loom_tensor *inputs,
                                    int32_t n_inputs, loom_tensor *outputs, int32_t n_outputs,
                                    loom_run_stats *stats);

/* As loom_graph_run, on the device `device` ("cpu0", "ocl1", "cuda0", or an alias the context
 * knows, as loom_context_find_device takes): the inputs are copied from host memory to the
 * device, the whole graph runs there in one piece (no splitting: a plan does that), and the
 * outputs come back to host memory, allocated by Loom as loom_graph_run's. Values and
 * temporaries are allocated through the context's memory manager on that device's memory
 * node, so its limit holds for the run. The device is opened on first use and stays open
 * with the context. Errors: as loom_graph_run; NOT_FOUND (no such device in the context),
 * UNSUPPORTED (an op the device's backend cannot run), and the backend's device errors. */
LOOM_API loom_status loom_graph_run_on_device(loom_context *ctx, const char *device, const loom_graph *graph,
                                              const loom_tensor *inputs, int32_t n_inputs,
                                              loom_tensor *outputs, int32_t n_outputs, loom_run_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
