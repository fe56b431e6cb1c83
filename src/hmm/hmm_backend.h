/* The contract between the memory manager (src/hmm) and the memory backends that drive a
 * device's memory for it (backends/opencl/opencl_memory.c, backends/cuda/cuda_memory.c): the
 * one HMM header a backend includes. hmm/hmm.h (the manager's insides) is the HMM's own.
 *
 * A backend fills a table of hooks (loom__hmm_backend) that the HMM calls. A node is opaque
 * here: a backend reaches it only through the accessors below, which read what is fixed when
 * the manager is made (id, kind, device, backend, the node list) or the backend's own state.
 *
 * Locking: the HMM calls every hook with the manager's lock held, and the accessors take no
 * lock. A backend never takes the manager's lock itself (nothing here would let it): what a
 * compute backend needs from a node outside a hook (its queue or stream) it asks for through
 * loom__hmm_node_queue, which takes the lock and calls the backend's `queue` hook under it.
 */
#ifndef LOOM_HMM_BACKEND_H
#define LOOM_HMM_BACKEND_H

#include "core/core.h"
#include "devices/devices.h"
#include "loom/memory.h"

/* One memory node of a manager; opaque to backends. */
typedef struct loom__hmm_node loom__hmm_node;

/* One allocation on one node, as a backend hands it out. */
typedef struct loom__hmm_alloc {
  loom_mem_storage storage; /* NONE: no allocation */
  int64_t bytes;            /* the size class: what it counts against the node */
  void *ptr;                /* host memory, or the SVM pointer */
  void *cl_mem;             /* cl_mem of a CL_BUFFER */
  bool bound;               /* host memory from hwloc_alloc_membind (freed with hwloc_free) */
  /* The caller's memory, wrapped (loom_buffer_wrap_cl_mem): never freed, pooled or counted
   * against the node; it stays with its buffer until the buffer is freed. */
  bool external;
} loom__hmm_alloc;

/* A buffer's advice (loom_buffer_advise) as a backend passes it on. */
typedef struct loom__hmm_advice {
  bool read_mostly;
  int32_t preferred;    /* the preferred node, -1: none */
  uint64_t accessed_by; /* bit n: node n */
} loom__hmm_advice;

/* What a memory backend does for the HMM. Every hook runs under the manager's lock. Hooks
 * marked optional may be NULL. Errors are converted at the boundary (loom__cl_status). */
typedef struct loom__hmm_backend {
  const char *name;
  /* Says what the node offers (loom__hmm_node_offer) from its device (loom__hmm_node_device)
   * and makes the backend's state (loom__hmm_node_set_state); makes nothing on the device
   * (contexts are made lazily by alloc). */
  loom_status (*node_init)(loom__hmm_node *node);
  void (*node_deinit)(loom__hmm_node *node);
  /* Allocates exactly `bytes` of `storage`. OUT_OF_MEMORY when the device or host refuses. */
  loom_status (*alloc)(loom__hmm_node *node, loom_mem_storage storage, int64_t bytes, loom__hmm_alloc *out);
  void (*free)(loom__hmm_node *node, loom__hmm_alloc *a);
  /* Host memory -> the allocation at offset. With out_event non-NULL the write may be left
   * running; *out_event is then waited for with `wait` before anything else touches src or
   * the allocation (it stays NULL when the write finished). */
  loom_status (*write)(loom__hmm_node *node, const loom__hmm_alloc *a, int64_t offset, const void *src,
                       int64_t bytes, void **out_event);
  /* The allocation at offset -> host memory, finished on return. */
  loom_status (*read)(loom__hmm_node *node, const loom__hmm_alloc *a, int64_t offset, void *dst,
                      int64_t bytes);
  /* Optional: a host pointer to the allocation (host memory, SVM); *out_mapped says that
   * unmap must be called. UNSUPPORTED when the storage is not host-reachable. */
  loom_status (*map)(loom__hmm_node *node, const loom__hmm_alloc *a, uint32_t access, void **out_ptr,
                     bool *out_mapped);
  loom_status (*unmap)(loom__hmm_node *node, const loom__hmm_alloc *a, void *ptr);
  /* Optional: migrates SVM pages to the host or to the node's device (clEnqueueSVMMigrateMem). */
  loom_status (*migrate)(loom__hmm_node *node, const loom__hmm_alloc *a, bool to_host);
  /* Optional: waits for and releases an event from write. */
  void (*wait)(loom__hmm_node *node, void *event);
  /* Optional: waits until the node's queue is empty. */
  loom_status (*finish)(loom__hmm_node *node);
  /* Optional: the allocation s on node ns -> the allocation d on node nd (another node of the
   * same backend) without the host: queued behind the work already queued on ns and ahead of
   * anything queued on ns after it, the host waiting for neither. UNSUPPORTED when the two
   * cannot (the copy then goes through host memory). */
  loom_status (*copy)(loom__hmm_node *nd, const loom__hmm_alloc *d, loom__hmm_node *ns,
                      const loom__hmm_alloc *s, int64_t bytes);
  /* Optional: releases an event from write without waiting for it; the write stays queued
   * ahead of the node's later work. Without it, a queued write (loom__buffer_write_queued)
   * is a blocking one. */
  void (*forget)(loom__hmm_node *node, void *event);
  /* Optional, with join: host memory -> the allocation at offset on a second queue of the
   * node's device (a transfer queue), so that the copy overlaps the node's queue: it starts
   * once the work queued there so far is done (which may still read the allocation) and
   * waits for nothing queued there later. *out_event is the copy, for `join` (or `wait`);
   * src stays unchanged and alive until then. Without the hook, loom__buffer_write_ahead is
   * loom__buffer_write_queued. */
  loom_status (*write_ahead)(loom__hmm_node *node, const loom__hmm_alloc *a, int64_t offset, const void *src,
                             int64_t bytes, void **out_event);
  /* Optional, with write_ahead: the node's queue waits for `event` (from write_ahead) before
   * the work queued on it after this call, the host waiting for nothing; releases the event
   * (having waited for it on the host where the queue could not be told to). */
  loom_status (*join)(loom__hmm_node *node, void *event);
  /* Optional: passes a buffer's advice on to the device for a managed allocation
   * (cudaMemAdvise). Advice is a hint: nothing fails. */
  void (*advise)(loom__hmm_node *node, const loom__hmm_alloc *a, const loom__hmm_advice *advice);
  /* Optional: the node's device queue, made on first use, for a compute backend to run its
   * work in order with the HMM's copies (opencl: cl_context and cl_command_queue; cuda: the
   * cudaStream_t and NULL). Called by loom__hmm_node_queue. */
  loom_status (*queue)(loom__hmm_node *node, void **out_first, void **out_second);
} loom__hmm_backend;

/* ---- what a backend may call (no lock taken) --------------------------------------------- */

/* The node's id ("ocl0", "host0"), for messages. */
const char *loom__hmm_node_id(const loom__hmm_node *node);
loom_memory_node_kind loom__hmm_node_kind(const loom__hmm_node *node);
/* The device table's entry of a device node; NULL for host nodes. */
const loom__device *loom__hmm_node_device(const loom__hmm_node *node);
/* The memory backend that drives the node. */
const loom__hmm_backend *loom__hmm_node_backend(const loom__hmm_node *node);
/* The backend's state of the node (NULL until node_init sets it). */
void *loom__hmm_node_state(const loom__hmm_node *node);
void loom__hmm_node_set_state(loom__hmm_node *node, void *state);
/* From node_init: the storages the node offers (LOOM_MEM_STORAGE_BIT) and whether the
 * backend's migrate works there. */
void loom__hmm_node_offer(loom__hmm_node *node, uint32_t storages, bool svm_migrate);
/* The manager's nodes, by index (0 <= index < loom__hmm_node_count). */
loom_mem_manager *loom__hmm_node_manager(const loom__hmm_node *node);
int32_t loom__hmm_node_count(const loom_mem_manager *m);
loom__hmm_node *loom__hmm_node_at(const loom_mem_manager *m, int32_t index);

/* ---- for compute backends ---------------------------------------------------------------- */

/* The queue of node `node` of m through its backend's `queue` hook, under the manager's lock.
 * Errors: INVALID_ARGUMENT when the node is not one of `backend`'s (naming `what`), and the
 * hook's. */
loom_status loom__hmm_node_queue(loom_mem_manager *m, int32_t node, const loom__hmm_backend *backend,
                                 const char *what, void **out_first, void **out_second);

/* Runs fn(node, arg) under the manager's lock, for a backend's own entries that change what
 * it keeps for a node (the OpenCL backend adopting a caller's context). Errors:
 * INVALID_ARGUMENT when the node is not one of `backend`'s (naming `what`), and fn's. */
loom_status loom__hmm_node_call(loom_mem_manager *m, int32_t node, const loom__hmm_backend *backend,
                                const char *what, loom_status (*fn)(loom__hmm_node *node, void *arg),
                                void *arg);

/* Makes `context` (a cl_context holding the node's device) the one the HMM uses for OpenCL
 * node `node`, so that the caller's cl_mem objects of that context can be its buffers' copies
 * there: retained, where the node has no context yet (nothing was allocated there); nothing
 * to do where it already is the node's. Errors: INVALID_ARGUMENT (not an OpenCL node, a
 * context without the node's device), UNSUPPORTED (the node already has another context).
 * Defined by backends/opencl/opencl_memory.c. */
loom_status loom__hmm_opencl_adopt_context(loom_mem_manager *m, int32_t node, void *context);

/* The OpenCL context and in-order queue the HMM uses for a device node, made on first use
 * (cl_context, cl_command_queue as void *; not retained: they live as long as the manager).
 * The opencl compute backend runs kernels on buffers from loom_buffer_acquire through them.
 * Errors: INVALID_ARGUMENT (not an OpenCL node), UNAVAILABLE. Defined by
 * backends/opencl/opencl_memory.c: only built with OpenCL. (The cuda backend's stream is
 * loom__hmm_cuda_stream, backends/cuda/cuda_backend.h.) */
loom_status loom__hmm_opencl_queue(loom_mem_manager *m, int32_t node, void **out_context, void **out_queue);

#endif
