/* CUDA interop: the CUDA objects behind Loom's devices and memory, for programs that run CUDA
 * work of their own on Loom's buffers.
 *
 * This header names CUDA runtime types, so it needs the CUDA toolkit's headers
 * (<cuda_runtime_api.h>); loom/loom.h does not include it. Its functions exist only in builds
 * with the cuda compute backend (the CUDA toolkit and nvcc found at configure time).
 *
 * Typical use: loom_buffer_acquire(b, node, ...) for a CUDA device's memory node, then
 * loom_mem_node_cuda_stream(m, node, ...) for the stream the memory manager uses on that node,
 * and kernels on that stream with loom_mem_handle_cuda_ptr(&handle) as their argument;
 * loom_buffer_release waits for the stream.
 */
#ifndef LOOM_CUDA_H
#define LOOM_CUDA_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "loom/device.h"
#include "loom/export.h"
#include "loom/memory.h"
#include "loom/runtime.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA device pointer of a handle from loom_buffer_acquire whose storage is
 * LOOM_MEM_STORAGE_CUDA_DEVICE or LOOM_MEM_STORAGE_CUDA_MANAGED (already offset to the
 * buffer's start); NULL for other storages and for NULL. The memory belongs to the manager:
 * valid until loom_buffer_release. */
LOOM_API void *loom_mem_handle_cuda_ptr(const loom_mem_handle *handle);

/* The stream the memory manager uses for memory node `node` (a CUDA device's node), made on
 * first use; it belongs to the manager and lives as long as it does. *out_stream is set to
 * NULL on entry. Errors: INVALID_ARGUMENT (NULL pointers, a node that is not a CUDA device's),
 * UNAVAILABLE (no driver, or the device cannot be used), OUT_OF_MEMORY.
 * Thread safety: any thread. */
LOOM_API loom_status loom_mem_node_cuda_stream(loom_mem_manager *m, int32_t node, cudaStream_t *out_stream);

/* The CUDA device ordinal (as cudaSetDevice takes) of the context's device `index` (as
 * loom_context_find_device gives). *out_ordinal is set to -1 on entry.
 * Errors: INVALID_ARGUMENT (NULL pointers, index out of range), NOT_FOUND (not a CUDA
 * device). */
LOOM_API loom_status loom_context_device_cuda_ordinal(const loom_context *ctx, int32_t index,
                                                      int *out_ordinal);

#ifdef __cplusplus
}
#endif
#endif
