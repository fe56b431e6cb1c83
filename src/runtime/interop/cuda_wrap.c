/* loom/cuda.h, the caller's side: the caller's device memory as a buffer of the memory manager
 * (loom_buffer_wrap_cuda_ptr) and the ordering between the caller's stream and the manager's
 * (loom_mem_node_cuda_wait, loom_mem_node_cuda_signal). Built only with the cuda compute
 * backend (cmake/cuda.cmake adds this file). */
#include "backends/cuda/cuda_backend.h"
#include "hmm/hmm.h"
#include "loom/cuda.h"

/* The CUDA ordinal of node `node`'s device; INVALID_ARGUMENT for a node that is not a CUDA
 * device's, naming `fn`. */
static loom_status cuda_node(loom_mem_manager *m, int32_t node, const char *fn, int *out_ordinal) {
  *out_ordinal = -1;
  if (!m) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: NULL manager", fn);
  loom_mem_node_info info;
  loom_status s = loom_mem_node_info_get(m, node, &info);
  if (s != LOOM_OK) return s;
  const loom__device *d = loom__hmm_node_device(loom__hmm_node_at(m, node));
  if (!(info.storages & LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_CUDA_DEVICE)) || !d || d->cuda_ordinal < 0)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s is not a CUDA device's memory node", fn, info.id);
  *out_ordinal = d->cuda_ordinal;
  return LOOM_OK;
}

static loom_status cuda_error(cudaError_t err, const char *call, const char *fn) {
  loom_status s = loom__cuda_status(err, call);
  if (s) loom__error_prefix("%s: ", fn);
  return s;
}

/* The storage CUDA says ptr is, on device `ordinal`. */
static loom_status pointer_storage(const void *ptr, int ordinal, const char *fn, loom_mem_storage *out) {
  struct cudaPointerAttributes attr;
  cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: CUDA does not know the pointer %p (%s)", fn, ptr,
                       cudaGetErrorName(err));
  }
  if (attr.type == cudaMemoryTypeManaged) {
    *out = LOOM_MEM_STORAGE_CUDA_MANAGED;
    return LOOM_OK;
  }
  if (attr.type != cudaMemoryTypeDevice)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %p is not CUDA device or managed memory", fn, ptr);
  if (attr.device != ordinal)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %p is memory of CUDA device %d, the node's is %d", fn,
                       ptr, attr.device, ordinal);
  *out = LOOM_MEM_STORAGE_CUDA_DEVICE;
  return LOOM_OK;
}

loom_status loom_buffer_wrap_cuda_ptr(loom_mem_manager *m, int32_t node, void *ptr, int64_t bytes,
                                      loom_dtype dtype, loom_buffer **out_buffer) {
  const char *fn = "loom_buffer_wrap_cuda_ptr";
  if (!out_buffer) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: out_buffer is NULL", fn);
  *out_buffer = NULL;
  if (!ptr) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: ptr is NULL", fn);
  int ordinal = -1;
  loom_status s = cuda_node(m, node, fn, &ordinal);
  if (s != LOOM_OK) return s;
  if ((s = cuda_error(cudaSetDevice(ordinal), "cudaSetDevice", fn))) return s;
  loom__hmm_alloc alloc = {.bytes = bytes, .ptr = ptr};
  if ((s = pointer_storage(ptr, ordinal, fn, &alloc.storage))) return s;
  s = loom__buffer_wrap(m, node, bytes, dtype, &alloc, out_buffer);
  if (s != LOOM_OK) loom__error_prefix("%s: ", fn);
  return s;
}

/* `later` waits, on the device, for everything `earlier` holds now. */
static loom_status order(cudaStream_t earlier, cudaStream_t later, const char *fn) {
  cudaEvent_t done = NULL;
  const char *call = "cudaEventCreateWithFlags";
  cudaError_t err = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  if (err == cudaSuccess) {
    call = "cudaEventRecord";
    err = cudaEventRecord(done, earlier);
  }
  if (err == cudaSuccess) {
    call = "cudaStreamWaitEvent";
    err = cudaStreamWaitEvent(later, done, 0);
  }
  /* Destroying a recorded event the stream still waits for is allowed: CUDA keeps it until it
   * completes. */
  if (done) cudaEventDestroy(done);
  return cuda_error(err, call, fn);
}

/* The manager's stream for the node, its device made current. */
static loom_status node_stream(loom_mem_manager *m, int32_t node, const char *fn, cudaStream_t *out_stream) {
  *out_stream = NULL;
  int ordinal = -1;
  loom_status s = cuda_node(m, node, fn, &ordinal);
  if (s == LOOM_OK) s = loom__hmm_cuda_stream(m, node, out_stream);
  if (s == LOOM_OK) s = cuda_error(cudaSetDevice(ordinal), "cudaSetDevice", fn);
  return s;
}

loom_status loom_mem_node_cuda_wait(loom_mem_manager *m, int32_t node, cudaStream_t stream) {
  const char *fn = "loom_mem_node_cuda_wait";
  cudaStream_t own = NULL;
  loom_status s = node_stream(m, node, fn, &own);
  return s != LOOM_OK ? s : order(stream, own, fn);
}

loom_status loom_mem_node_cuda_signal(loom_mem_manager *m, int32_t node, cudaStream_t stream) {
  const char *fn = "loom_mem_node_cuda_signal";
  cudaStream_t own = NULL;
  loom_status s = node_stream(m, node, fn, &own);
  return s != LOOM_OK ? s : order(own, stream, fn);
}
