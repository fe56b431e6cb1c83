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
 *
 * The other way round, Loom computing on the caller's own device memory in order with the
 * caller's stream: loom_buffer_wrap_cuda_ptr makes the caller's device pointer a buffer with no
 * copy, loom_mem_node_cuda_wait(m, node, stream) orders Loom's work after what the caller
 * queued on its stream, loom_graph_run_buffers (loom/runtime.h) runs a graph on it in place,
 * and loom_mem_node_cuda_signal(m, node, stream) orders the caller's next work after Loom's:
 * events between the streams, no device-wide synchronize (as loom/opencl.h's, for OpenCL).
 */
#ifndef LOOM_CUDA_H
#define LOOM_CUDA_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "loom/context.h"
#include "loom/device.h"
#include "loom/export.h"
#include "loom/memory.h"
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

/* ---- the caller's memory and streams --------------------------------------------------- */

/* Wraps the caller's CUDA memory `ptr` (from cudaMalloc or cudaMallocManaged on the device of
 * CUDA memory node `node`) as a buffer of manager m whose copy on the node is that memory
 * itself: `bytes` from ptr (a multiple of dtype's size; the caller vouches that they are
 * allocated: CUDA cannot tell), owner of its contents, with no copy. As
 * loom_buffer_wrap_cl_mem: Loom reads and writes the data there, never frees it, never evicts
 * or moves that copy, and does not count it against the node's limit; the caller keeps it
 * allocated until loom_buffer_free(*out_buffer), which does not free it; written elsewhere, it
 * is stale until the buffer is made valid on the node again (loom_buffer_prefetch).
 * Thread safety: any thread (it makes the node's device current on the calling thread).
 * Errors: INVALID_ARGUMENT (NULL pointers, not a CUDA node, a pointer CUDA does not know as
 * device or managed memory, or of another device, a size that is not whole elements),
 * OUT_OF_MEMORY. */
LOOM_API loom_status loom_buffer_wrap_cuda_ptr(loom_mem_manager *m, int32_t node, void *ptr, int64_t bytes,
                                               loom_dtype dtype, loom_buffer **out_buffer);

/* Orders Loom's work on CUDA node `node` after the caller's: everything the memory manager and
 * Loom's runs queue for the node after this call (copies, kernels) starts only once the work
 * queued on `stream` before it (NULL: the legacy default stream) has completed. Nobody waits
 * now: an event recorded on `stream` that the manager's stream waits for.
 * Thread safety: any thread (it makes the node's device current on the calling thread).
 * Errors: INVALID_ARGUMENT (NULL manager, not a CUDA node), UNAVAILABLE (the node's stream
 * could not be made), and CUDA's errors (a stream of another device). */
LOOM_API loom_status loom_mem_node_cuda_wait(loom_mem_manager *m, int32_t node, cudaStream_t stream);

/* Orders the caller's work after Loom's on CUDA node `node`: everything queued on `stream`
 * (NULL: the legacy default stream) after this call starts only once everything the memory
 * manager and Loom's runs queued for the node before it has completed. An event recorded on
 * the manager's stream that `stream` waits for. Errors and thread safety as
 * loom_mem_node_cuda_wait. */
LOOM_API loom_status loom_mem_node_cuda_signal(loom_mem_manager *m, int32_t node, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
