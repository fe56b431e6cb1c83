/* OpenCL interop: the OpenCL objects behind Loom's devices and memory, for programs that run
 * OpenCL work of their own on Loom's buffers.
 *
 * This header names OpenCL types, so it needs the OpenCL headers (<CL/cl.h>); loom/loom.h
 * does not include it. Its functions exist only in builds with the opencl backend (LOOM_OPENCL
 * not OFF and an OpenCL ICD loader found at configure time); a program that includes it links
 * against such a build.
 *
 * Typical use: loom_buffer_acquire(b, node, ...) for the device's memory node, then
 * loom_mem_node_cl_queue(m, node, ...) for the context and in-order queue the memory manager
 * uses on that node, and kernels on that queue with loom_mem_handle_cl_mem(&handle) (or the
 * handle's ptr for SVM storages) as their argument; loom_buffer_release waits for the queue.
 *
 * The other way round, Loom computing on the caller's own OpenCL memory on the caller's
 * queue: loom_buffer_wrap_cl_mem(m, node, mem, ...) makes the caller's cl_mem a buffer with no
 * copy, loom_mem_node_cl_wait(m, node, queue) orders Loom's work after what the caller queued,
 * loom_graph_run_buffers (loom/runtime.h) runs a graph on it in place, and
 * loom_mem_node_cl_signal(m, node, queue) orders the caller's next commands after Loom's.
 * Both orderings are events between the two queues: neither the host nor the device is
 * synchronized as a whole. examples/interop/opencl_reduce.c does all of it.
 */
#ifndef LOOM_OPENCL_H
#define LOOM_OPENCL_H

#include <stdbool.h>
#include <stdint.h>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>

#include "loom/context.h"
#include "loom/device.h"
#include "loom/export.h"
#include "loom/memory.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The OpenCL buffer of a handle from loom_buffer_acquire whose storage is
 * LOOM_MEM_STORAGE_CL_BUFFER; NULL for other storages (SVM and host copies are reached through
 * the handle's ptr) and for NULL. The buffer belongs to the manager: valid until
 * loom_buffer_release, not retained (call clRetainMemObject to keep it longer). */
LOOM_API cl_mem loom_mem_handle_cl_mem(const loom_mem_handle *handle);

/* The OpenCL context and in-order command queue the memory manager uses for memory node
 * `node` (an OpenCL device's node), made on first use. Both belong to the manager and live as
 * long as it does (not retained). Either out pointer may be NULL; both are set to NULL on
 * entry. Errors: INVALID_ARGUMENT (NULL manager, a node that is not an OpenCL device's),
 * UNAVAILABLE (the context or queue could not be made). Thread safety: any thread. */
LOOM_API loom_status loom_mem_node_cl_queue(loom_mem_manager *m, int32_t node, cl_context *out_context,
                                            cl_command_queue *out_queue);

/* The OpenCL platform and device of the context's device `index` (as loom_context_find_device
 * gives). Both are owned by the OpenCL runtime and stay valid as long as the context. Either
 * out pointer may be NULL; both are set to NULL on entry.
 * Errors: INVALID_ARGUMENT (NULL context, index out of range), NOT_FOUND (the device is not an
 * OpenCL device: cpu0, or a CUDA device OpenCL does not see). */
LOOM_API loom_status loom_context_device_cl(const loom_context *ctx, int32_t index,
                                            cl_platform_id *out_platform, cl_device_id *out_device);

/* ---- the caller's memory and queues --------------------------------------------------- */

/* Wraps the caller's OpenCL buffer `mem` as a buffer of manager m whose copy on OpenCL memory
 * node `node` is `mem` itself: the first `bytes` of it (a multiple of dtype's size, at most
 * mem's size), owner of its contents, with no copy. Loom reads and writes the data there (a
 * graph run on the node's device takes it in place: loom_graph_run_buffers), never releases
 * or frees mem, never evicts or moves that copy, and does not count it against the node's
 * limit; copies it makes on other nodes (a map from the host) come and go as any buffer's.
 * mem must belong to the OpenCL context the memory manager uses for the node. Where the node
 * has none yet (Loom allocated nothing on it), mem's context becomes the node's (retained,
 * for Loom's kernels and queue there too): so wrap before Loom uses the device, or make mem
 * in Loom's context (loom_mem_node_cl_queue). mem must stay alive until
 * loom_buffer_free(*out_buffer), which does not release it. Written elsewhere (a host map for
 * writing, loom_buffer_write landing on another copy), mem holds stale data until the buffer
 * is made valid on the node again (loom_buffer_prefetch(b, node)).
 * Thread safety: any thread. Errors: INVALID_ARGUMENT (NULL pointers, not an OpenCL node, a
 * cl_mem OpenCL rejects, sizes that do not fit, a context that does not hold the node's
 * device), UNSUPPORTED (the node already uses another context), OUT_OF_MEMORY. */
LOOM_API loom_status loom_buffer_wrap_cl_mem(loom_mem_manager *m, int32_t node, cl_mem mem, int64_t bytes,
                                             loom_dtype dtype, loom_buffer **out_buffer);

/* As loom_buffer_wrap_cl_mem, for the caller's shared virtual memory: `svm` from clSVMAlloc
 * in `context` (which becomes the node's as mem's context does), fine-grained (allocated with
 * CL_MEM_SVM_FINE_GRAIN_BUFFER) or coarse-grained as `fine_grained` says, `bytes` from svm
 * (the caller vouches that they are allocated: OpenCL cannot tell). The host reaches the data
 * through it as Loom's own SVM copies (mapped when coarse-grained). The caller frees svm with
 * clSVMFree after loom_buffer_free(*out_buffer).
 * Errors: as loom_buffer_wrap_cl_mem; UNSUPPORTED (the device offers no SVM of that grain). */
LOOM_API loom_status loom_buffer_wrap_cl_svm(loom_mem_manager *m, int32_t node, cl_context context, void *svm,
                                             bool fine_grained, int64_t bytes, loom_dtype dtype,
                                             loom_buffer **out_buffer);

/* Orders Loom's work on OpenCL node `node` after the caller's: every command the memory
 * manager and Loom's runs enqueue for the node after this call (copies, kernels) starts only
 * once everything enqueued on `queue` before it has completed. Nobody waits now: a marker on
 * `queue` (flushed, so it is submitted) and a barrier on the manager's queue for the node,
 * which waits for it. `queue` must belong to the node's context (see loom_buffer_wrap_cl_mem).
 * Thread safety: any thread. Errors: INVALID_ARGUMENT (NULL manager or queue, not an OpenCL
 * node, a queue of another context), UNAVAILABLE (the node's queue could not be made), and
 * OpenCL's errors. */
LOOM_API loom_status loom_mem_node_cl_wait(loom_mem_manager *m, int32_t node, cl_command_queue queue);

/* Orders the caller's work after Loom's on OpenCL node `node`: every command enqueued on
 * `queue` after this call starts only once everything the memory manager and Loom's runs
 * enqueued for the node before it has completed. Nobody waits now: a marker on the manager's
 * queue for the node (flushed) and a barrier on `queue`. Errors and thread safety as
 * loom_mem_node_cl_wait. */
LOOM_API loom_status loom_mem_node_cl_signal(loom_mem_manager *m, int32_t node, cl_command_queue queue);

#ifdef __cplusplus
}
#endif
#endif
