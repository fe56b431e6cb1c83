/* Contexts: the devices found, the memory manager and caches of one user of Loom.
 *
 * There is no hidden global state: several contexts may live in one process. A context may be
 * used from several threads only where a function says so. Running graphs and plans on a
 * context is loom/runtime.h's.
 */
#ifndef LOOM_CONTEXT_H
#define LOOM_CONTEXT_H

#include "loom/export.h"
#include "loom/status.h"

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

#ifdef __cplusplus
}
#endif
#endif
