/* OpenCL memory as an HMM memory backend (hmm/hmm_backend.h): buffers (cl_mem), coarse-grained SVM
 * (clSVMAlloc; the host reaches it through clEnqueueSVMMap) and fine-grained buffer SVM
 * (the host reaches it directly once the device's work is done), where the device offers them.
 *
 * The device nodes of one platform share one cl_context, made on the first allocation on any
 * of them from the device table's cl_device_ids; each node has its own in-order command queue
 * in it. Buffers and SVM belong to that context, so the opencl compute backend runs kernels
 * through the same context and queue (loom__hmm_opencl_queue), and a buffer moves from one
 * device of the platform to another without the host: the copy is enqueued on the receiving
 * device's queue behind an event of the sending one (cl_copy). Copies to and from the host
 * are clEnqueueRead/WriteBuffer and clEnqueueSVMMemcpy; a write ahead (a loop's next slice)
 * goes on a second in-order queue of the node, behind a marker of the first, and the first
 * waits for it at a barrier only where the work that reads it begins (cl_write_ahead,
 * cl_join), so the copy runs beside the kernels queued between the two; SVM pages move with
 * clEnqueueSVMMigrateMem on OpenCL 2.1+ devices only (it is not in 2.0).
 *
 * Every hook runs under the manager's lock, which this file never takes (hmm/hmm_backend.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CL/cl.h>

#include "backends/opencl/opencl_status.h"
#include "hmm/hmm_backend.h"

typedef struct cl_node {
  cl_platform_id platform;
  cl_device_id device;
  int major, minor;   /* the device's OpenCL version */
  bool svm_migrate;   /* clEnqueueSVMMigrateMem works (OpenCL 2.1 and SVM) */
  cl_context context; /* NULL until the first allocation; one reference per node */
  cl_command_queue queue;
  /* A second in-order queue for write_ahead, made on its first use; NULL before, or when the
   * device refused it (write_ahead then writes on `queue`). */
  cl_command_queue transfer;
  bool no_transfer; /* the device refused it: not asked again */
} cl_node;

/* "OpenCL 3.0 PoCL ..." -> 3, 0; 1.0 when it does not parse. */
static void parse_version(const char *version, int *major, int *minor) {
  *major = 1;
  *minor = 0;
  if (version && sscanf(version, "OpenCL %d.%d", major, minor) != 2) {
    *major = 1;
    *minor = 0;
  }
}

static bool at_least(const cl_node *c, int major, int minor) {
  return c->major > major || (c->major == major && c->minor >= minor);
}

static loom_status cl_node_init(loom__hmm_node *node) {
  const loom__device *d = loom__hmm_node_device(node);
  cl_node *c = loom__calloc(1, sizeof *c);
  if (!c) return loom__oom("an OpenCL memory node");
  c->platform = (cl_platform_id)d->cl_platform;
  c->device = (cl_device_id)d->cl_device;
  parse_version(d->version, &c->major, &c->minor);
  c->svm_migrate = d->svm != 0 && at_least(c, 2, 1);
  loom__hmm_node_set_state(node, c);
  uint32_t storages = LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_CL_BUFFER);
  if (at_least(c, 2, 0)) {
    if (d->svm & LOOM_SVM_COARSE_GRAIN_BUFFER) storages |= LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_SVM_COARSE);
    if (d->svm & LOOM_SVM_FINE_GRAIN_BUFFER) storages |= LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_SVM_FINE);
  }
  loom__hmm_node_offer(node, storages, c->svm_migrate);
  return LOOM_OK;
}

static void cl_node_deinit(loom__hmm_node *node) {
  cl_node *c = loom__hmm_node_state(node);
  if (!c) return;
  if (c->transfer) {
    clFinish(c->transfer);
    clReleaseCommandQueue(c->transfer);
  }
  if (c->queue) {
    clFinish(c->queue);
    clReleaseCommandQueue(c->queue);
  }
  if (c->context) clReleaseContext(c->context);
  loom__free(c);
  loom__hmm_node_set_state(node, NULL);
}

/* The OpenCL nodes of the manager on the same platform as `node` (itself included), at most
 * `cap` of them. */
static int32_t platform_nodes(loom__hmm_node *node, loom__hmm_node **out, int32_t cap) {
  const cl_node *c = loom__hmm_node_state(node);
  loom_mem_manager *m = loom__hmm_node_manager(node);
  int32_t n = 0;
  for (int32_t i = 0; i < loom__hmm_node_count(m) && n < cap; i++) {
    loom__hmm_node *o = loom__hmm_node_at(m, i);
    const cl_node *oc = loom__hmm_node_state(o);
    if (loom__hmm_node_backend(o) != loom__hmm_node_backend(node) || !oc || oc->platform != c->platform)
      continue;
    bool seen = false;
    for (int32_t k = 0; k < n && !seen; k++)
      seen = ((const cl_node *)loom__hmm_node_state(out[k]))->device == oc->device;
    if (!seen) out[n++] = o;
  }
  return n;
}

/* Makes the context the node's platform shares, on the first allocation on any of its
 * devices; each node of the platform takes a reference. A platform that refuses a context
 * of several devices gets one per device (copies between them then go through the host). */
static loom_status ensure_context(loom__hmm_node *node) {
  cl_node *c = loom__hmm_node_state(node);
  if (c->context) return LOOM_OK;
  loom__hmm_node *peers[64];
  cl_device_id devices[64];
  int32_t n = platform_nodes(node, peers, LOOM_ARRAY_SIZE(peers));
  for (int32_t k = 0; k < n; k++) devices[k] = ((cl_node *)loom__hmm_node_state(peers[k]))->device;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)c->platform, 0};
  cl_int err = CL_SUCCESS;
  cl_context ctx = n > 1 ? clCreateContext(props, (cl_uint)n, devices, NULL, NULL, &err) : NULL;
  if (!ctx) {
    n = 1;
    peers[0] = node;
    ctx = clCreateContext(props, 1, &c->device, NULL, NULL, &err);
  }
  if (err != CL_SUCCESS || !ctx) {
    loom_status s = loom__cl_status(err, "clCreateContext");
    loom__error_prefix("%s: ", loom__hmm_node_id(node));
    return s == LOOM_ERR_OUT_OF_MEMORY ? s : LOOM_ERR_UNAVAILABLE;
  }
  c->context = ctx; /* the reference clCreateContext gave */
  for (int32_t k = 0; k < n; k++) {
    cl_node *pc = loom__hmm_node_state(peers[k]);
    if (pc == c || pc->context) continue;
    clRetainContext(ctx);
    pc->context = ctx;
  }
  return LOOM_OK;
}

/* An in-order queue of the node's device in its context, with profiling on: the shared
 * runner times stages and ranges by the device's clock (markers' end times). */
static cl_command_queue make_queue(cl_node *c, cl_int *err) {
  if (at_least(c, 2, 0)) {
    cl_queue_properties props[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0};
    return clCreateCommandQueueWithProperties(c->context, c->device, props, err);
  }
  /* OpenCL 1.x devices have only the 1.2 call, deprecated in the 2.0 headers. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  return clCreateCommandQueue(c->context, c->device, CL_QUEUE_PROFILING_ENABLE, err);
#pragma GCC diagnostic pop
}

/* Makes the node's context and queue on first use. */
static loom_status ensure_queue(loom__hmm_node *node) {
  cl_node *c = loom__hmm_node_state(node);
  if (c->queue) return LOOM_OK;
  loom_status st = ensure_context(node);
  if (st != LOOM_OK) return st;
  cl_int err = CL_SUCCESS;
  c->queue = make_queue(c, &err);
  if (err != CL_SUCCESS) {
    c->queue = NULL;
    loom_status s = loom__cl_status(err, "clCreateCommandQueue");
    loom__error_prefix("%s: ", loom__hmm_node_id(node));
    return s == LOOM_ERR_OUT_OF_MEMORY ? s : LOOM_ERR_UNAVAILABLE;
  }
  return LOOM_OK;
}

/* Asks the host allocator's fault injection (loom/testing.h) whether this allocation fails,
 * so a test's sweep over allocations reaches device memory too. */
static bool injected_failure(void) {
  void *probe = loom__malloc(1);
  if (!probe) return true;
  loom__free(probe);
  return false;
}

static loom_status device_oom(const loom__hmm_node *node, int64_t bytes, const char *call) {
  char size[32];
  return loom__error(LOOM_ERR_OUT_OF_MEMORY, "out of memory on %s: %s refused %s", loom__hmm_node_id(node),
                     call, loom__format_bytes(bytes, size, sizeof size));
}

static loom_status cl_alloc(loom__hmm_node *node, loom_mem_storage storage, int64_t bytes,
                            loom__hmm_alloc *out) {
  memset(out, 0, sizeof *out);
  if (injected_failure()) return device_oom(node, bytes, "(injected failure)");
  loom_status s = ensure_queue(node);
  if (s != LOOM_OK) return s;
  cl_node *c = loom__hmm_node_state(node);
  if (storage == LOOM_MEM_STORAGE_CL_BUFFER) {
    cl_int err = CL_SUCCESS;
    cl_mem mem = clCreateBuffer(c->context, CL_MEM_READ_WRITE, (size_t)bytes, NULL, &err);
    if (err != CL_SUCCESS) {
      s = loom__cl_status(err, "clCreateBuffer");
      loom__error_prefix("%s: ", loom__hmm_node_id(node));
      return s;
    }
    out->cl_mem = mem;
  } else {
    cl_svm_mem_flags flags = CL_MEM_READ_WRITE;
    if (storage == LOOM_MEM_STORAGE_SVM_FINE) flags |= CL_MEM_SVM_FINE_GRAIN_BUFFER;
    void *p = clSVMAlloc(c->context, flags, (size_t)bytes, 0);
    /* clSVMAlloc reports no error code: NULL is all it says. */
    if (!p) return device_oom(node, bytes, "clSVMAlloc");
    out->ptr = p;
  }
  out->storage = storage;
  out->bytes = bytes;
  return LOOM_OK;
}

static void cl_free(loom__hmm_node *node, loom__hmm_alloc *a) {
  cl_node *c = loom__hmm_node_state(node);
  if (a->cl_mem) {
    clReleaseMemObject((cl_mem)a->cl_mem);
  } else if (a->ptr) {
    /* clSVMFree does not wait for commands that use the memory. */
    clFinish(c->queue);
    clSVMFree(c->context, a->ptr);
  }
  memset(a, 0, sizeof *a);
}

static loom_status cl_write(loom__hmm_node *node, const loom__hmm_alloc *a, int64_t offset, const void *src,
                            int64_t bytes, void **out_event) {
  cl_node *c = loom__hmm_node_state(node);
  cl_bool blocking = out_event ? CL_FALSE : CL_TRUE;
  cl_event ev = NULL;
  cl_int err;
  const char *call;
  if (a->storage == LOOM_MEM_STORAGE_CL_BUFFER) {
    call = "clEnqueueWriteBuffer";
    err = clEnqueueWriteBuffer(c->queue, (cl_mem)a->cl_mem, blocking, (size_t)offset, (size_t)bytes, src, 0,
                               NULL, out_event ? &ev : NULL);
  } else {
    call = "clEnqueueSVMMemcpy";
    err = clEnqueueSVMMemcpy(c->queue, blocking, (char *)a->ptr + offset, src, (size_t)bytes, 0, NULL,
                             out_event ? &ev : NULL);
  }
  if (err == CL_SUCCESS && out_event) {
    err = clFlush(c->queue); /* start it now: the point is to overlap */
    *out_event = ev;
  }
  return loom__cl_status(err, call);
}

/* The transfer queue, made on first use: NULL where the device has no markers with wait
 * lists (before OpenCL 1.2) or refuses a second queue. */
static cl_command_queue transfer_queue(cl_node *c) {
  if (c->transfer || c->no_transfer) return c->transfer;
  cl_int err = CL_SUCCESS;
  c->transfer = at_least(c, 1, 2) ? make_queue(c, &err) : NULL;
  if (err != CL_SUCCESS) c->transfer = NULL;
  c->no_transfer = c->transfer == NULL;
  return c->transfer;
}

/* On the transfer queue behind a marker of the node's queue: the copy waits for the kernels
 * queued so far (earlier readers of the allocation) and for nothing queued after, so it runs
 * beside them (on PoCL's pthread device another worker thread does the memcpy; on a GPU the
 * copy engine). Both queues are flushed: the marker and the copy start now. */
static loom_status cl_write_ahead(loom__hmm_node *node, const loom__hmm_alloc *a, int64_t offset,
                                  const void *src, int64_t bytes, void **out_event) {
  cl_node *c = loom__hmm_node_state(node);
  *out_event = NULL;
  loom_status s = ensure_queue(node);
  if (s != LOOM_OK) return s;
  cl_command_queue t = transfer_queue(c);
  if (!t) return cl_write(node, a, offset, src, bytes, out_event); /* on the node's queue */
  cl_event ready = NULL, done = NULL;
  const char *call = "clEnqueueMarkerWithWaitList";
  cl_int err = clEnqueueMarkerWithWaitList(c->queue, 0, NULL, &ready);
  if (err == CL_SUCCESS) {
    call = "clFlush";
    err = clFlush(c->queue);
  }
  if (err == CL_SUCCESS && a->storage == LOOM_MEM_STORAGE_CL_BUFFER) {
    call = "clEnqueueWriteBuffer";
    err = clEnqueueWriteBuffer(t, (cl_mem)a->cl_mem, CL_FALSE, (size_t)offset, (size_t)bytes, src, 1, &ready,
                               &done);
  } else if (err == CL_SUCCESS) {
    call = "clEnqueueSVMMemcpy";
    err = clEnqueueSVMMemcpy(t, CL_FALSE, (char *)a->ptr + offset, src, (size_t)bytes, 1, &ready, &done);
  }
  if (err == CL_SUCCESS) {
    call = "clFlush";
    err = clFlush(t);
  }
  if (ready) clReleaseEvent(ready);
  if (err != CL_SUCCESS && done) {
    clWaitForEvents(1, &done); /* enqueued but not flushed: nothing may touch src or a first */
    clReleaseEvent(done);
    done = NULL;
  }
  *out_event = done;
  return loom__cl_status(err, call);
}

/* The node's queue waits for a write_ahead's event: a barrier with it in its wait list
 * (OpenCL 1.2). Where the queue cannot be told to, the host waits for the copy instead, which
 * orders it as well. */
static loom_status cl_join(loom__hmm_node *node, void *event) {
  cl_node *c = loom__hmm_node_state(node);
  cl_event ev = event;
  cl_int err =
      at_least(c, 1, 2) ? clEnqueueBarrierWithWaitList(c->queue, 1, &ev, NULL) : CL_INVALID_OPERATION;
  const char *call = "clWaitForEvents";
  if (err != CL_SUCCESS) err = clWaitForEvents(1, &ev);
  clReleaseEvent(ev);
  return loom__cl_status(err, call);
}

static loom_status cl_read(loom__hmm_node *node, const loom__hmm_alloc *a, int64_t offset, void *dst,
                           int64_t bytes) {
  cl_node *c = loom__hmm_node_state(node);
  if (a->storage == LOOM_MEM_STORAGE_CL_BUFFER)
    return loom__cl_status(clEnqueueReadBuffer(c->queue, (cl_mem)a->cl_mem, CL_TRUE, (size_t)offset,
                                               (size_t)bytes, dst, 0, NULL, NULL),
                           "clEnqueueReadBuffer");
  return loom__cl_status(
      clEnqueueSVMMemcpy(c->queue, CL_TRUE, dst, (const char *)a->ptr + offset, (size_t)bytes, 0, NULL, NULL),
      "clEnqueueSVMMemcpy");
}

static loom_status cl_map(loom__hmm_node *node, const loom__hmm_alloc *a, uint32_t access, void **out_ptr,
                          bool *out_mapped) {
  cl_node *c = loom__hmm_node_state(node);
  *out_ptr = NULL;
  *out_mapped = false;
  if (a->storage == LOOM_MEM_STORAGE_CL_BUFFER)
    return loom__error(LOOM_ERR_UNSUPPORTED, "%s: an OpenCL buffer has no host pointer",
                       loom__hmm_node_id(node));
  if (a->storage == LOOM_MEM_STORAGE_SVM_FINE) {
    /* Fine-grained: coherent once the device's commands are done. */
    loom_status s = loom__cl_status(clFinish(c->queue), "clFinish");
    if (s == LOOM_OK) *out_ptr = a->ptr;
    return s;
  }
  cl_map_flags flags = 0;
  if (access & LOOM_ACCESS_READ) flags |= CL_MAP_READ;
  if (access & LOOM_ACCESS_WRITE)
    flags |= (access & LOOM_ACCESS_DISCARD) && !(access & LOOM_ACCESS_READ) ? CL_MAP_WRITE_INVALIDATE_REGION
                                                                            : CL_MAP_WRITE;
  loom_status s = loom__cl_status(
      clEnqueueSVMMap(c->queue, CL_TRUE, flags, a->ptr, (size_t)a->bytes, 0, NULL, NULL), "clEnqueueSVMMap");
  if (s != LOOM_OK) return s;
  *out_ptr = a->ptr;
  *out_mapped = true;
  return LOOM_OK;
}

static loom_status cl_unmap(loom__hmm_node *node, const loom__hmm_alloc *a, void *ptr) {
  cl_node *c = loom__hmm_node_state(node);
  loom_status s = loom__cl_status(clEnqueueSVMUnmap(c->queue, ptr, 0, NULL, NULL), "clEnqueueSVMUnmap");
  loom_status f = loom__cl_status(clFinish(c->queue), "clFinish");
  return s != LOOM_OK ? s : f;
}

static loom_status cl_migrate(loom__hmm_node *node, const loom__hmm_alloc *a, bool to_host) {
  cl_node *c = loom__hmm_node_state(node);
  if (!c->svm_migrate || !a->ptr)
    return loom__error(LOOM_ERR_UNSUPPORTED, "%s: clEnqueueSVMMigrateMem needs OpenCL 2.1 and SVM",
                       loom__hmm_node_id(node));
  const void *ptrs[1] = {a->ptr};
  size_t sizes[1] = {(size_t)a->bytes};
  cl_mem_migration_flags flags = to_host ? CL_MIGRATE_MEM_OBJECT_HOST : 0;
  loom_status s = loom__cl_status(clEnqueueSVMMigrateMem(c->queue, 1, ptrs, sizes, flags, 0, NULL, NULL),
                                  "clEnqueueSVMMigrateMem");
  if (s == LOOM_OK) s = loom__cl_status(clFinish(c->queue), "clFinish");
  return s;
}

static void cl_wait(loom__hmm_node *node, void *event) {
  cl_event ev = event;
  clWaitForEvents(1, &ev);
  clReleaseEvent(ev);
}

static void cl_forget(loom__hmm_node *node, void *event) {
  (void)node;
  clReleaseEvent((cl_event)event);
}

/* Device -> device in the platform's shared context. The copy runs on the receiving queue
 * behind a marker of the sending one (the source is complete), and the sending queue waits
 * for the copy before its next command (the source's memory may go back to its pool and be
 * reused there): both queues stay in order and the host waits for neither. A buffer and an
 * SVM allocation, or devices before OpenCL 1.2 (no markers), go through the host instead. */
static loom_status cl_copy(loom__hmm_node *nd, const loom__hmm_alloc *d, loom__hmm_node *ns,
                           const loom__hmm_alloc *s, int64_t bytes) {
  cl_node *cd = loom__hmm_node_state(nd), *cs = loom__hmm_node_state(ns);
  bool buffers = d->storage == LOOM_MEM_STORAGE_CL_BUFFER && s->storage == LOOM_MEM_STORAGE_CL_BUFFER;
  bool svm = d->storage != LOOM_MEM_STORAGE_CL_BUFFER && s->storage != LOOM_MEM_STORAGE_CL_BUFFER;
  if (!cd->queue || !cs->queue || cd->context != cs->context || !(buffers || svm) || !at_least(cd, 1, 2) ||
      !at_least(cs, 1, 2))
    return loom__error(LOOM_ERR_UNSUPPORTED, "%s and %s share no OpenCL context", loom__hmm_node_id(ns),
                       loom__hmm_node_id(nd));
  cl_event ready = NULL, done = NULL;
  const char *call = "clEnqueueMarkerWithWaitList";
  cl_int err = clEnqueueMarkerWithWaitList(cs->queue, 0, NULL, &ready);
  if (err == CL_SUCCESS) {
    call = buffers ? "clEnqueueCopyBuffer" : "clEnqueueSVMMemcpy";
    err = buffers ? clEnqueueCopyBuffer(cd->queue, (cl_mem)s->cl_mem, (cl_mem)d->cl_mem, 0, 0, (size_t)bytes,
                                        1, &ready, &done)
                  : clEnqueueSVMMemcpy(cd->queue, CL_FALSE, d->ptr, s->ptr, (size_t)bytes, 1, &ready, &done);
  }
  if (err == CL_SUCCESS) {
    call = "clEnqueueBarrierWithWaitList";
    err = clEnqueueBarrierWithWaitList(cs->queue, 1, &done, NULL);
  }
  if (err == CL_SUCCESS) {
    call = "clFlush";
    err = clFlush(cs->queue);
    if (err == CL_SUCCESS) err = clFlush(cd->queue);
  } else if (done) {
    /* The sending queue could not be told to wait: nothing may reuse the source before the
     * copy is done, so the host waits this once. */
    clWaitForEvents(1, &done);
  }
  if (ready) clReleaseEvent(ready);
  if (done) clReleaseEvent(done);
  loom_status st = loom__cl_status(err, call);
  if (st != LOOM_OK) loom__error_prefix("%s -> %s: ", loom__hmm_node_id(ns), loom__hmm_node_id(nd));
  return st;
}

static loom_status cl_finish(loom__hmm_node *node) {
  cl_node *c = loom__hmm_node_state(node);
  return c->queue ? loom__cl_status(clFinish(c->queue), "clFinish") : LOOM_OK;
}

/* The node's cl_context and in-order queue, made on first use (loom__hmm_opencl_queue). */
static loom_status cl_queue(loom__hmm_node *node, void **out_context, void **out_queue) {
  loom_status s = ensure_queue(node);
  if (s != LOOM_OK) return s;
  cl_node *c = loom__hmm_node_state(node);
  *out_context = c->context;
  *out_queue = c->queue;
  return LOOM_OK;
}

const loom__hmm_backend loom__hmm_opencl_backend = {
    .name = "opencl",
    .node_init = cl_node_init,
    .node_deinit = cl_node_deinit,
    .alloc = cl_alloc,
    .free = cl_free,
    .write = cl_write,
    .read = cl_read,
    .map = cl_map,
    .unmap = cl_unmap,
    .migrate = cl_migrate,
    .wait = cl_wait,
    .finish = cl_finish,
    .copy = cl_copy,
    .forget = cl_forget,
    .write_ahead = cl_write_ahead,
    .join = cl_join,
    .queue = cl_queue,
};

/* Under the manager's lock (loom__hmm_node_call). Only this node takes the caller's context:
 * the platform's other nodes keep (or later make) Loom's, and copies between them and this
 * one go through host memory. */
static loom_status adopt_context(loom__hmm_node *node, void *arg) {
  cl_node *c = loom__hmm_node_state(node);
  cl_context context = arg;
  if (c->context == context) return LOOM_OK;
  if (c->context)
    return loom__error(LOOM_ERR_UNSUPPORTED,
                       "%s already uses an OpenCL context of Loom's own (memory was allocated there before): "
                       "wrap the caller's memory before Loom uses the device, or make it in Loom's context "
                       "(loom_mem_node_cl_queue)",
                       loom__hmm_node_id(node));
  cl_uint n = 0;
  cl_int err = clGetContextInfo(context, CL_CONTEXT_NUM_DEVICES, sizeof n, &n, NULL);
  cl_device_id devices[64];
  if (err == CL_SUCCESS && n > LOOM_ARRAY_SIZE(devices)) n = LOOM_ARRAY_SIZE(devices);
  if (err == CL_SUCCESS)
    err = clGetContextInfo(context, CL_CONTEXT_DEVICES, n * sizeof devices[0], devices, NULL);
  if (err != CL_SUCCESS) {
    loom_status s = loom__cl_status(err, "clGetContextInfo");
    loom__error_prefix("%s: the caller's context: ", loom__hmm_node_id(node));
    return s == LOOM_ERR_INTERNAL ? LOOM_ERR_INVALID_ARGUMENT : s;
  }
  bool found = false;
  for (cl_uint k = 0; k < n && !found; k++) found = devices[k] == c->device;
  if (!found)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: the caller's OpenCL context does not hold its device",
                       loom__hmm_node_id(node));
  clRetainContext(context);
  c->context = context;
  return LOOM_OK;
}

loom_status loom__hmm_opencl_adopt_context(loom_mem_manager *m, int32_t node, void *context) {
  return loom__hmm_node_call(m, node, &loom__hmm_opencl_backend, "loom__hmm_opencl_adopt_context",
                             adopt_context, context);
}

loom_status loom__hmm_opencl_queue(loom_mem_manager *m, int32_t node, void **out_context, void **out_queue) {
  return loom__hmm_node_queue(m, node, &loom__hmm_opencl_backend, "loom__hmm_opencl_queue", out_context,
                              out_queue);
}
