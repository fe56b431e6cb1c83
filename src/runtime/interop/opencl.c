/* loom/opencl.h: the OpenCL objects behind the context's devices and the memory manager's
 * nodes. Built only with the opencl backend (cmake/opencl.cmake adds this file). */
#include "loom/opencl.h"

#include "hmm/hmm.h"
#include "runtime/context.h"

cl_mem loom_mem_handle_cl_mem(const loom_mem_handle *handle) {
  if (!handle || handle->storage != LOOM_MEM_STORAGE_CL_BUFFER) return NULL;
  return (cl_mem)handle->object;
}

loom_status loom_mem_node_cl_queue(loom_mem_manager *m, int32_t node, cl_context *out_context,
                                   cl_command_queue *out_queue) {
  if (out_context) *out_context = NULL;
  if (out_queue) *out_queue = NULL;
  loom_mem_node_info info;
  loom_status s = loom_mem_node_info_get(m, node, &info);
  if (s != LOOM_OK) return s;
  if (!(info.storages & LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_CL_BUFFER)))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_node_cl_queue: %s is not an OpenCL device's node",
                       info.id);
  void *context = NULL, *queue = NULL;
  s = loom__hmm_opencl_queue(m, node, &context, &queue);
  if (s != LOOM_OK) return s;
  if (out_context) *out_context = (cl_context)context;
  if (out_queue) *out_queue = (cl_command_queue)queue;
  return LOOM_OK;
}

loom_status loom_context_device_cl(const loom_context *ctx, int32_t index, cl_platform_id *out_platform,
                                   cl_device_id *out_device) {
  if (out_platform) *out_platform = NULL;
  if (out_device) *out_device = NULL;
  if (!ctx) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_context_device_cl: NULL context");
  if (index < 0 || index >= ctx->devices.dev_count)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "loom_context_device_cl: device index %d out of range (%d devices)", (int)index,
                       (int)ctx->devices.dev_count);
  const loom__device *d = &ctx->devices.dev[index];
  if (!d->cl_device)
    return loom__error(LOOM_ERR_NOT_FOUND, "loom_context_device_cl: %s is not an OpenCL device", d->id);
  if (out_platform) *out_platform = (cl_platform_id)d->cl_platform;
  if (out_device) *out_device = (cl_device_id)d->cl_device;
  return LOOM_OK;
}
