/* loom/cuda.h: the CUDA objects behind the context's devices and the memory manager's nodes.
 * Built only with the cuda compute backend (cmake/cuda.cmake adds this file). */
#include "loom/cuda.h"

#include "backends/cuda/cuda_backend.h"
#include "runtime/context.h"

void *loom_mem_handle_cuda_ptr(const loom_mem_handle *handle) {
  if (!handle || !handle->ptr) return NULL;
  if (handle->storage != LOOM_MEM_STORAGE_CUDA_DEVICE && handle->storage != LOOM_MEM_STORAGE_CUDA_MANAGED)
    return NULL;
  return (char *)handle->ptr + handle->offset;
}

loom_status loom_mem_node_cuda_stream(loom_mem_manager *m, int32_t node, cudaStream_t *out_stream) {
  if (out_stream) *out_stream = NULL;
  if (!m || !out_stream)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_node_cuda_stream: NULL %s",
                       m ? "out_stream" : "manager");
  loom_mem_node_info info;
  loom_status s = loom_mem_node_info_get(m, node, &info);
  if (s != LOOM_OK) return s;
  if (!(info.storages & LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_CUDA_DEVICE)))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_node_cuda_stream: %s is not a CUDA device's node",
                       info.id);
  return loom__hmm_cuda_stream(m, node, out_stream);
}

loom_status loom_context_device_cuda_ordinal(const loom_context *ctx, int32_t index, int *out_ordinal) {
  if (out_ordinal) *out_ordinal = -1;
  if (!ctx || !out_ordinal)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_context_device_cuda_ordinal: NULL %s",
                       ctx ? "out_ordinal" : "context");
  if (index < 0 || index >= ctx->devices.dev_count)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "loom_context_device_cuda_ordinal: device index %d out of range (%d devices)",
                       (int)index, (int)ctx->devices.dev_count);
  const loom__device *d = &ctx->devices.dev[index];
  if (d->cuda_ordinal < 0)
    return loom__error(LOOM_ERR_NOT_FOUND, "loom_context_device_cuda_ordinal: %s is not a CUDA device",
                       d->id);
  *out_ordinal = d->cuda_ordinal;
  return LOOM_OK;
}
