/* What Loom's libblas.so.3 exports beyond BLAS and CBLAS (docs/blas.md). A program, or a test,
 * that wants to see the shim's Loom side finds these with dlsym on the shim (they are absent
 * from any other libblas.so.3).
 */
#ifndef LOOM_BLAS_LOOM_BLAS_H
#define LOOM_BLAS_LOOM_BLAS_H

#include <loom/runtime.h>

/* The process's context, the one every level-3 call through Loom runs on: made on the first
 * call (thread-safe), with the devices of LOOM_BLAS_DEVICES (default: all) and the limits of
 * LOOM_MEM_LIMIT. Owned by the shim, never destroyed (it lives as long as the process); use it
 * to read the memory manager's counters (loom_context_memory, loom_mem_stats). NULL when Loom
 * could not make it (the reason is printed once on stderr; every call then runs on the host
 * BLAS). */
__attribute__((visibility("default"))) loom_context *loom_blas_context(void);

#endif
