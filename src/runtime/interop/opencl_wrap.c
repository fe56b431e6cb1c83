/* loom/opencl.h, the caller's side: the caller's cl_mem as a buffer of the memory manager
 * (loom_buffer_wrap_cl_mem) and the ordering between the caller's queue and the manager's
 * (loom_mem_node_cl_wait, loom_mem_node_cl_signal). Built only with the opencl backend
 * (cmake/opencl.cmake adds this file). */
#include "backends/opencl/opencl_status.h"
#include "hmm/hmm.h"
#include "loom/opencl.h"

/* INVALID_ARGUMENT for a node that is not an OpenCL device's, naming `fn`. */
static loom_status check_cl_node(loom_mem_manager *m, int32_t node, const char *fn) {
  if (!m) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: NULL manager", fn);
  loom_mem_node_info info;
  loom_status s = loom_mem_node_info_get(m, node, &info);
  if (s != LOOM_OK) return s;
  if (!(info.storages & LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_CL_BUFFER)))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s is not an OpenCL device's memory node", fn,
                       info.id);
  return LOOM_OK;
}

/* The caller's OpenCL objects are arguments: an error OpenCL gives about them is the caller's. */
static loom_status caller_error(cl_int err, const char *call, const char *fn) {
  loom_status s = loom__cl_status(err, call);
  loom__error_prefix("%s: ", fn);
  return s == LOOM_ERR_INTERNAL ? LOOM_ERR_INVALID_ARGUMENT : s;
}

/* Makes `context` the node's where it has none yet; a clearer message than the HMM's where
 * it has another. */
static loom_status adopt(loom_mem_manager *m, int32_t node, cl_context context, const char *what,
                         const char *fn) {
  loom_status s = loom__hmm_opencl_adopt_context(m, node, context);
  if (s != LOOM_OK) {
    loom__error_prefix("%s: %s of another OpenCL context than the node's: ", fn, what);
    return s;
  }
  /* The node's queue too: the HMM makes it with the node's first allocation, and every copy
   * to or from a copy on the node runs on it, a wrapped copy's as well. */
  void *own_context = NULL, *own_queue = NULL;
  s = loom__hmm_opencl_queue(m, node, &own_context, &own_queue);
  if (s != LOOM_OK) loom__error_prefix("%s: ", fn);
  return s;
}

loom_status loom_buffer_wrap_cl_mem(loom_mem_manager *m, int32_t node, cl_mem mem, int64_t bytes,
                                    loom_dtype dtype, loom_buffer **out_buffer) {
  const char *fn = "loom_buffer_wrap_cl_mem";
  if (!out_buffer) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: out_buffer is NULL", fn);
  *out_buffer = NULL;
  if (!mem) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: mem is NULL", fn);
  loom_status s = check_cl_node(m, node, fn);
  if (s != LOOM_OK) return s;
  cl_mem_object_type type = 0;
  size_t size = 0;
  cl_context context = NULL;
  cl_int err = clGetMemObjectInfo(mem, CL_MEM_TYPE, sizeof type, &type, NULL);
  if (err == CL_SUCCESS) err = clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, NULL);
  if (err == CL_SUCCESS) err = clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof context, &context, NULL);
  if (err != CL_SUCCESS) return caller_error(err, "clGetMemObjectInfo", fn);
  if (type != CL_MEM_OBJECT_BUFFER)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: mem is an image or pipe, not a buffer", fn);
  if (bytes < 0 || (uint64_t)bytes > (uint64_t)size)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %lld bytes asked of a cl_mem of %zu bytes", fn,
                       (long long)bytes, size);
  int64_t elem = loom_dtype_size(dtype);
  if (elem <= 0 || bytes % elem != 0)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %lld bytes is not a whole number of %s elements", fn,
                       (long long)bytes, loom_dtype_name(dtype));
  /* Checked before the node takes mem's context, so a refused wrap changes nothing. */
  if ((s = adopt(m, node, context, "mem is", fn))) return s;
  loom__hmm_alloc alloc = {.storage = LOOM_MEM_STORAGE_CL_BUFFER, .bytes = (int64_t)size, .cl_mem = mem};
  s = loom__buffer_wrap(m, node, bytes, dtype, &alloc, out_buffer);
  if (s != LOOM_OK) loom__error_prefix("%s: ", fn);
  return s;
}

loom_status loom_buffer_wrap_cl_svm(loom_mem_manager *m, int32_t node, cl_context context, void *svm,
                                    bool fine_grained, int64_t bytes, loom_dtype dtype,
                                    loom_buffer **out_buffer) {
  const char *fn = "loom_buffer_wrap_cl_svm";
  if (!out_buffer) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: out_buffer is NULL", fn);
  *out_buffer = NULL;
  if (!svm || !context)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, svm ? "context" : "svm");
  loom_status s = check_cl_node(m, node, fn);
  if (s != LOOM_OK) return s;
  loom_mem_storage storage = fine_grained ? LOOM_MEM_STORAGE_SVM_FINE : LOOM_MEM_STORAGE_SVM_COARSE;
  loom_mem_node_info info;
  loom_mem_node_info_get(m, node, &info);
  if (!(info.storages & LOOM_MEM_STORAGE_BIT(storage)))
    return loom__error(LOOM_ERR_UNSUPPORTED, "%s: %s offers no %s-grained SVM", fn, info.id,
                       fine_grained ? "fine" : "coarse");
  int64_t elem = loom_dtype_size(dtype);
  if (elem <= 0 || bytes <= 0 || bytes % elem != 0)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %lld bytes is not a whole number of %s elements", fn,
                       (long long)bytes, loom_dtype_name(dtype));
  if ((s = adopt(m, node, context, "the context is", fn))) return s;
  loom__hmm_alloc alloc = {.storage = storage, .bytes = bytes, .ptr = svm};
  s = loom__buffer_wrap(m, node, bytes, dtype, &alloc, out_buffer);
  if (s != LOOM_OK) loom__error_prefix("%s: ", fn);
  return s;
}

/* The manager's context and queue for the node, after checking that `queue` shares the
 * context (adopting the queue's where the node has none yet). */
static loom_status node_queue(loom_mem_manager *m, int32_t node, cl_command_queue queue, const char *fn,
                              cl_command_queue *out_queue) {
  *out_queue = NULL;
  loom_status s = check_cl_node(m, node, fn);
  if (s != LOOM_OK) return s;
  if (!queue) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: queue is NULL", fn);
  cl_context context = NULL;
  cl_int err = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof context, &context, NULL);
  if (err != CL_SUCCESS) return caller_error(err, "clGetCommandQueueInfo", fn);
  if ((s = adopt(m, node, context, "queue is", fn))) return s;
  void *own_context = NULL, *own_queue = NULL;
  if ((s = loom__hmm_opencl_queue(m, node, &own_context, &own_queue))) return s;
  *out_queue = own_queue;
  return LOOM_OK;
}

/* `later` waits, on the device, for everything `earlier` holds now. */
static loom_status order(cl_command_queue earlier, cl_command_queue later, const char *fn) {
  cl_event done = NULL;
  const char *call = "clEnqueueMarkerWithWaitList";
  cl_int err = clEnqueueMarkerWithWaitList(earlier, 0, NULL, &done);
  /* Flushed, or `later` could wait for a marker never submitted. */
  if (err == CL_SUCCESS) {
    call = "clFlush";
    err = clFlush(earlier);
  }
  if (err == CL_SUCCESS) {
    call = "clEnqueueBarrierWithWaitList";
    err = clEnqueueBarrierWithWaitList(later, 1, &done, NULL);
  }
  if (done) clReleaseEvent(done);
  if (err != CL_SUCCESS) {
    loom_status s = loom__cl_status(err, call);
    loom__error_prefix("%s: ", fn);
    return s;
  }
  return LOOM_OK;
}

loom_status loom_mem_node_cl_wait(loom_mem_manager *m, int32_t node, cl_command_queue queue) {
  cl_command_queue own = NULL;
  loom_status s = node_queue(m, node, queue, "loom_mem_node_cl_wait", &own);
  return s != LOOM_OK ? s : order(queue, own, "loom_mem_node_cl_wait");
}

loom_status loom_mem_node_cl_signal(loom_mem_manager *m, int32_t node, cl_command_queue queue) {
  cl_command_queue own = NULL;
  loom_status s = node_queue(m, node, queue, "loom_mem_node_cl_signal", &own);
  return s != LOOM_OK ? s : order(own, queue, "loom_mem_node_cl_signal");
}
