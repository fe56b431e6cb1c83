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
 */
#ifndef LOOM_OPENCL_H
#define LOOM_OPENCL_H

#include <stdint.h>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>

#include "loom/device.h"
#include "loom/export.h"
#include "loom/memory.h"
#include "loom/runtime.h"
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

#ifdef __cplusplus
}
#endif
#endif
