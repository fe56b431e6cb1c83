/* CUDA memory as an HMM memory backend (hmm/hmm_backend.h): device memory (cudaMalloc; the HMM's pool
 * keeps freed allocations in size classes for reuse, so this is the cudaMalloc pool) and
 * managed memory (cudaMallocManaged), copied through pinned host staging buffers.
 *
 * Each device node gets one stream (cudaStreamNonBlocking), made on the node's first use: the
 * HMM's copies go on it, and the cuda compute backend enqueues its kernels on the same stream
 * (loom__hmm_cuda_stream), so kernels and copies run in the order they were issued without a
 * wait between them, as the opencl backend does with the HMM's queue. A write ahead (a loop's
 * next slice) goes on a second stream behind an event of the first, which waits for it only
 * where the work that reads it begins (cu_write_ahead, cu_join): the copy overlaps the kernels
 * queued between the two.
 *
 * Managed memory is Loom's "one allocation visible everywhere" on CUDA (the HMM treats it as it
 * treats fine-grained SVM): the host reaches it once the stream's work is done; moves are
 * cudaMemPrefetchAsync (to the device or to the host) where the device has concurrent managed
 * access; the buffer's advice becomes cudaMemAdvise (read-mostly, preferred location, accessed
 * by). It is never allocated beyond the device's free memory (cudaMemGetInfo): oversubscribed
 * managed memory can stall the whole GPU, so such a request is OUT_OF_MEMORY instead.
 *
 * Copies of 4 MiB and more between host memory and the device go through two pinned staging
 * buffers of the node: the host copies one chunk into a buffer while the device copies the
 * other (an explicit pipeline, so a write has finished with its source when it returns, and
 * can be left running); the host side of each chunk is copied by all OpenMP threads
 * (loom__memcpy_wide: one core alone moves about 10 GB/s). LOOM_CUDA_STAGING=0 makes them plain
 * cudaMemcpyAsync calls from pageable memory (the driver's own staging), for comparison.
 *
 * Every hook runs under the manager's lock (never taken here: hmm/hmm_backend.h) and makes
 * the node's device current first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_backend.h"
#include "hmm/hmm_backend.h"

extern const loom__hmm_backend loom__hmm_cuda_backend;

#define STAGE_BYTES ((int64_t)8 << 20)
#define STAGE_MIN ((int64_t)4 << 20)

typedef struct cu_node {
  int ordinal;
  bool concurrent;     /* concurrentManagedAccess: prefetch and advice act */
  cudaStream_t stream; /* NULL until first use */
  /* A second stream for write_ahead, made on its first use; NULL before, or when refused
   * (no_transfer: write_ahead then writes on `stream`). */
  cudaStream_t transfer;
  bool no_transfer;
  int staging; /* 0 unknown, 1 on, -1 off (LOOM_CUDA_STAGING=0, or cudaMallocHost failed) */
  void *stage[2];
  cudaEvent_t staged[2]; /* the last device copy out of or into each staging buffer */
} cu_node;

static loom_status node_status(const loom__hmm_node *node, cudaError_t err, const char *call) {
  loom_status s = loom__cuda_status(err, call);
  if (s) loom__error_prefix("%s: ", loom__hmm_node_id(node));
  return s;
}

static loom_status cu_node_init(loom__hmm_node *node) {
  const loom__device *d = loom__hmm_node_device(node);
  cu_node *c = loom__calloc(1, sizeof *c);
  if (!c) return loom__oom("a CUDA memory node");
  c->ordinal = d->cuda_ordinal;
  c->concurrent = d->managed_memory && d->concurrent_managed_access;
  loom__hmm_node_set_state(node, c);
  uint32_t storages = LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_CUDA_DEVICE);
  if (d->managed_memory) storages |= LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_CUDA_MANAGED);
  loom__hmm_node_offer(node, storages, c->concurrent);
  return LOOM_OK;
}

static void cu_node_deinit(loom__hmm_node *node) {
  cu_node *c = loom__hmm_node_state(node);
  if (!c) return;
  if (c->stream && cudaSetDevice(c->ordinal) == cudaSuccess) {
    if (c->transfer) {
      cudaStreamSynchronize(c->transfer);
      cudaStreamDestroy(c->transfer);
    }
    cudaStreamSynchronize(c->stream);
    cudaStreamDestroy(c->stream);
    for (int i = 0; i < 2; i++) {
      if (c->staged[i]) cudaEventDestroy(c->staged[i]);
      if (c->stage[i]) cudaFreeHost(c->stage[i]);
    }
  }
  cudaGetLastError();
  loom__free(c);
  loom__hmm_node_set_state(node, NULL);
}

/* Makes the node's device current on this thread, and its stream on first use. */
static loom_status enter(loom__hmm_node *node) {
  cu_node *c = loom__hmm_node_state(node);
  loom_status s = node_status(node, cudaSetDevice(c->ordinal), "cudaSetDevice");
  if (s || c->stream) return s;
  s = node_status(node, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  if (s) c->stream = NULL;
  return s == LOOM_ERR_OUT_OF_MEMORY ? s : s ? LOOM_ERR_UNAVAILABLE : LOOM_OK;
}

/* The staging buffers, made on the first large copy; false when copies go without them. */
static bool staging(cu_node *c) {
  if (c->staging) return c->staging > 0;
  const char *env = getenv("LOOM_CUDA_STAGING");
  c->staging = env && strcmp(env, "0") == 0 ? -1 : 1;
  for (int i = 0; c->staging > 0 && i < 2; i++)
    if (cudaMallocHost(&c->stage[i], (size_t)STAGE_BYTES) != cudaSuccess ||
        cudaEventCreateWithFlags(&c->staged[i], cudaEventDisableTiming) != cudaSuccess)
      c->staging = -1; /* pinned memory is scarce: plain copies still work */
  cudaGetLastError();
  return c->staging > 0;
}

/* Asks the host allocator's fault injection (loom/testing.h) whether this allocation fails,
 * so a test's sweep over allocations reaches device memory too. */
static bool injected_failure(void) {
  void *probe = loom__malloc(1);
  if (!probe) return true;
  loom__free(probe);
  return false;
}

static loom_status device_oom(const loom__hmm_node *node, int64_t bytes, const char *why) {
  char size[32];
  return loom__error(LOOM_ERR_OUT_OF_MEMORY, "out of memory on %s: %s refused %s", loom__hmm_node_id(node),
                     why, loom__format_bytes(bytes, size, sizeof size));
}

static loom_status cu_alloc(loom__hmm_node *node, loom_mem_storage storage, int64_t bytes,
                            loom__hmm_alloc *out) {
  memset(out, 0, sizeof *out);
  if (injected_failure()) return device_oom(node, bytes, "(injected failure)");
  loom_status s = enter(node);
  if (s) return s;
  void *p = NULL;
  char size[32], avail[32];
  if (storage == LOOM_MEM_STORAGE_CUDA_MANAGED) {
    size_t free_bytes = 0, total = 0;
    if ((s = node_status(node, cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo"))) return s;
    if ((uint64_t)bytes > (uint64_t)free_bytes)
      return loom__error(
          LOOM_ERR_OUT_OF_MEMORY,
          "out of memory on %s: %s of managed memory is more than the device's free %s (Loom never "
          "oversubscribes managed memory)",
          loom__hmm_node_id(node), loom__format_bytes(bytes, size, sizeof size),
          loom__format_bytes((int64_t)free_bytes, avail, sizeof avail));
    s = node_status(node, cudaMallocManaged(&p, (size_t)bytes, cudaMemAttachGlobal), "cudaMallocManaged");
  } else if (storage == LOOM_MEM_STORAGE_CUDA_DEVICE) {
    s = node_status(node, cudaMalloc(&p, (size_t)bytes), "cudaMalloc");
  } else {
    return loom__error(LOOM_ERR_INTERNAL, "%s: storage %d is not CUDA memory", loom__hmm_node_id(node),
                       (int)storage);
  }
  if (s) {
    loom__error_prefix("%s: ", loom__format_bytes(bytes, size, sizeof size));
    return s;
  }
  out->storage = storage;
  out->bytes = bytes;
  out->ptr = p;
  return LOOM_OK;
}

static void cu_free(loom__hmm_node *node, loom__hmm_alloc *a) {
  cu_node *c = loom__hmm_node_state(node);
  /* cudaFree waits for the device's queued work, which may still read the memory. */
  if (a->ptr && cudaSetDevice(c->ordinal) == cudaSuccess) cudaFree(a->ptr);
  cudaGetLastError();
  memset(a, 0, sizeof *a);
}

/* Host -> device through the staging buffers: the host fills one while the device empties the
 * other. The source is no longer needed on return. */
static loom_status staged_write(loom__hmm_node *node, char *dst, const char *src, int64_t bytes) {
  cu_node *c = loom__hmm_node_state(node);
  loom_status s = LOOM_OK;
  for (int64_t off = 0, i = 0; !s && off < bytes; i++) {
    int64_t len = LOOM_MIN(STAGE_BYTES, bytes - off);
    int k = (int)(i & 1);
    s = node_status(node, cudaEventSynchronize(c->staged[k]), "cudaEventSynchronize");
    if (s) break;
    loom__memcpy_wide(c->stage[k], src + off, (size_t)len);
    s = node_status(node,
                    cudaMemcpyAsync(dst + off, c->stage[k], (size_t)len, cudaMemcpyHostToDevice, c->stream),
                    "cudaMemcpyAsync (host to device)");
    if (!s) s = node_status(node, cudaEventRecord(c->staged[k], c->stream), "cudaEventRecord");
    off += len;
  }
  return s;
}

/* Device -> host through the staging buffers: the device fills one while the host empties the
 * other. */
static loom_status staged_read(loom__hmm_node *node, char *dst, const char *src, int64_t bytes) {
  cu_node *c = loom__hmm_node_state(node);
  loom_status s = LOOM_OK;
  int64_t prev_off = 0, prev_len = 0;
  int pk = 0;
  for (int64_t off = 0, i = 0; !s && off <= bytes; i++) {
    int64_t len = LOOM_MIN(STAGE_BYTES, bytes - off);
    int k = (int)(i & 1);
    if (len > 0) {
      s = node_status(node,
                      cudaMemcpyAsync(c->stage[k], src + off, (size_t)len, cudaMemcpyDeviceToHost, c->stream),
                      "cudaMemcpyAsync (device to host)");
      if (!s) s = node_status(node, cudaEventRecord(c->staged[k], c->stream), "cudaEventRecord");
    }
    if (!s && prev_len > 0) {
      s = node_status(node, cudaEventSynchronize(c->staged[pk]), "cudaEventSynchronize");
      if (!s) loom__memcpy_wide(dst + prev_off, c->stage[pk], (size_t)prev_len);
    }
    if (len <= 0) break;
    prev_off = off;
    prev_len = len;
    pk = k;
    off += len;
  }
  return s;
}

static loom_status cu_write(loom__hmm_node *node, const loom__hmm_alloc *a, int64_t offset, const void *src,
                            int64_t bytes, void **out_event) {
  cu_node *c = loom__hmm_node_state(node);
  loom_status s = enter(node);
  if (s) return s;
  char *dst = (char *)a->ptr + offset;
  if (bytes >= STAGE_MIN && staging(c))
    s = staged_write(node, dst, src, bytes);
  else
    s = node_status(node, cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyHostToDevice, c->stream),
                    "cudaMemcpyAsync (host to device)");
  if (s || !out_event) {
    loom_status w = node_status(node, cudaStreamSynchronize(c->stream), "cudaStreamSynchronize");
    return s ? s : w;
  }
  /* Left running: the HMM waits for the event before anything else touches src or the copy. */
  cudaEvent_t ev = NULL;
  s = node_status(node, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
  if (!s) s = node_status(node, cudaEventRecord(ev, c->stream), "cudaEventRecord");
  if (s) {
    if (ev) cudaEventDestroy(ev);
    cudaStreamSynchronize(c->stream);
    return s;
  }
  *out_event = ev;
  return LOOM_OK;
}

/* On the transfer stream behind an event of the node's stream: the copy waits for the
 * kernels queued so far (earlier readers of the allocation) and for nothing queued after, so
 * it runs on a copy engine beside them. No staging buffers (they serve one copy at a time):
 * from pageable memory the driver stages it, from pinned memory it is a plain DMA. */
static loom_status cu_write_ahead(loom__hmm_node *node, const loom__hmm_alloc *a, int64_t offset,
                                  const void *src, int64_t bytes, void **out_event) {
  cu_node *c = loom__hmm_node_state(node);
  *out_event = NULL;
  loom_status s = enter(node);
  if (s) return s;
  if (!c->transfer && !c->no_transfer) {
    if (cudaStreamCreateWithFlags(&c->transfer, cudaStreamNonBlocking) != cudaSuccess) c->transfer = NULL;
    c->no_transfer = c->transfer == NULL;
    cudaGetLastError();
  }
  if (!c->transfer) return cu_write(node, a, offset, src, bytes, out_event); /* on the node's stream */
  cudaEvent_t ready = NULL, done = NULL;
  s = node_status(node, cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
  if (!s) s = node_status(node, cudaEventRecord(ready, c->stream), "cudaEventRecord");
  if (!s) s = node_status(node, cudaStreamWaitEvent(c->transfer, ready, 0), "cudaStreamWaitEvent");
  if (!s)
    s = node_status(
        node,
        cudaMemcpyAsync((char *)a->ptr + offset, src, (size_t)bytes, cudaMemcpyHostToDevice, c->transfer),
        "cudaMemcpyAsync (host to device)");
  if (!s) s = node_status(node, cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
  if (!s) s = node_status(node, cudaEventRecord(done, c->transfer), "cudaEventRecord");
  if (ready) cudaEventDestroy(ready); /* the stream's wait keeps what it needs */
  if (s) {
    if (done) cudaEventDestroy(done);
    cudaStreamSynchronize(c->transfer); /* nothing may touch src or a before the copy is done */
    cudaGetLastError();
    return s;
  }
  *out_event = done;
  return LOOM_OK;
}

/* The node's stream waits for a write_ahead's event; where it cannot be told to, the host
 * waits for the copy instead. */
static loom_status cu_join(loom__hmm_node *node, void *event) {
  cu_node *c = loom__hmm_node_state(node);
  cudaEvent_t ev = (cudaEvent_t)event;
  loom_status s = enter(node);
  if (!s) s = node_status(node, cudaStreamWaitEvent(c->stream, ev, 0), "cudaStreamWaitEvent");
  if (s) s = node_status(node, cudaEventSynchronize(ev), "cudaEventSynchronize");
  cudaEventDestroy(ev);
  return s;
}

static loom_status cu_read(loom__hmm_node *node, const loom__hmm_alloc *a, int64_t offset, void *dst,
                           int64_t bytes) {
  cu_node *c = loom__hmm_node_state(node);
  loom_status s = enter(node);
  if (s) return s;
  const char *src = (const char *)a->ptr + offset;
  if (bytes >= STAGE_MIN && staging(c))
    s = staged_read(node, dst, src, bytes);
  else
    s = node_status(node, cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDeviceToHost, c->stream),
                    "cudaMemcpyAsync (device to host)");
  loom_status w = node_status(node, cudaStreamSynchronize(c->stream), "cudaStreamSynchronize");
  return s ? s : w;
}

static loom_status cu_map(loom__hmm_node *node, const loom__hmm_alloc *a, uint32_t access, void **out_ptr,
                          bool *out_mapped) {
  cu_node *c = loom__hmm_node_state(node);
  *out_ptr = NULL;
  *out_mapped = false;
  if (a->storage != LOOM_MEM_STORAGE_CUDA_MANAGED)
    return loom__error(LOOM_ERR_UNSUPPORTED, "%s: CUDA device memory has no host pointer",
                       loom__hmm_node_id(node));
  /* Managed memory is coherent for the host once the device's work on it is done. */
  loom_status s = enter(node);
  if (!s) s = node_status(node, cudaStreamSynchronize(c->stream), "cudaStreamSynchronize");
  if (!s) *out_ptr = a->ptr;
  return s;
}

static struct cudaMemLocation location(int type, int id) {
  struct cudaMemLocation loc;
  memset(&loc, 0, sizeof loc);
  loc.type = (enum cudaMemLocationType)type;
  loc.id = id;
  return loc;
}

static loom_status cu_migrate(loom__hmm_node *node, const loom__hmm_alloc *a, bool to_host) {
  cu_node *c = loom__hmm_node_state(node);
  if (!c->concurrent || a->storage != LOOM_MEM_STORAGE_CUDA_MANAGED)
    return loom__error(LOOM_ERR_UNSUPPORTED,
                       "%s: cudaMemPrefetchAsync needs managed memory and concurrent managed access",
                       loom__hmm_node_id(node));
  loom_status s = enter(node);
  struct cudaMemLocation loc =
      to_host ? location(cudaMemLocationTypeHost, 0) : location(cudaMemLocationTypeDevice, c->ordinal);
  if (!s)
    s = node_status(node, cudaMemPrefetchAsync(a->ptr, (size_t)a->bytes, loc, 0, c->stream),
                    "cudaMemPrefetchAsync");
  if (!s) s = node_status(node, cudaStreamSynchronize(c->stream), "cudaStreamSynchronize");
  return s;
}

static void cu_wait(loom__hmm_node *node, void *event) {
  cu_node *c = loom__hmm_node_state(node);
  if (cudaSetDevice(c->ordinal) == cudaSuccess) {
    cudaEventSynchronize((cudaEvent_t)event);
    cudaEventDestroy((cudaEvent_t)event);
  }
  cudaGetLastError();
}

static loom_status cu_finish(loom__hmm_node *node) {
  cu_node *c = loom__hmm_node_state(node);
  if (!c->stream) return LOOM_OK;
  loom_status s = enter(node);
  return s ? s : node_status(node, cudaStreamSynchronize(c->stream), "cudaStreamSynchronize");
}

/* The CUDA location of an HMM node: the host for host nodes, the device for CUDA nodes; false
 * for others (an OpenCL device is nowhere CUDA knows). */
static bool node_location(const loom__hmm_node *n, struct cudaMemLocation *loc) {
  if (loom__hmm_node_kind(n) == LOOM_MEMORY_HOST) {
    *loc = location(cudaMemLocationTypeHost, 0);
    return true;
  }
  if (loom__hmm_node_backend(n) != &loom__hmm_cuda_backend) return false;
  *loc = location(cudaMemLocationTypeDevice, ((const cu_node *)loom__hmm_node_state(n))->ordinal);
  return true;
}

static void cu_advise(loom__hmm_node *node, const loom__hmm_alloc *a, const loom__hmm_advice *b) {
  cu_node *c = loom__hmm_node_state(node);
  if (!c->concurrent || a->storage != LOOM_MEM_STORAGE_CUDA_MANAGED ||
      cudaSetDevice(c->ordinal) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  const loom_mem_manager *m = loom__hmm_node_manager(node);
  size_t bytes = (size_t)a->bytes;
  struct cudaMemLocation here = location(cudaMemLocationTypeDevice, c->ordinal), loc;
  cudaMemAdvise(a->ptr, bytes, b->read_mostly ? cudaMemAdviseSetReadMostly : cudaMemAdviseUnsetReadMostly,
                here);
  if (b->preferred >= 0 && node_location(loom__hmm_node_at(m, b->preferred), &loc))
    cudaMemAdvise(a->ptr, bytes, cudaMemAdviseSetPreferredLocation, loc);
  else
    cudaMemAdvise(a->ptr, bytes, cudaMemAdviseUnsetPreferredLocation, here);
  /* Every node CUDA can name: set where the buffer says so, unset elsewhere (a pooled
   * allocation may carry another buffer's advice). */
  for (int32_t i = 0; i < loom__hmm_node_count(m); i++) {
    if (!node_location(loom__hmm_node_at(m, i), &loc)) continue;
    bool by = (b->accessed_by >> i) & 1;
    cudaMemAdvise(a->ptr, bytes, by ? cudaMemAdviseSetAccessedBy : cudaMemAdviseUnsetAccessedBy, loc);
  }
  /* Advice is a hint (a device may refuse some): nothing fails, and no error stays behind. */
  cudaGetLastError();
}

/* The node's stream, made on first use (loom__hmm_cuda_stream). */
static loom_status cu_queue(loom__hmm_node *node, void **out_stream, void **out_unused) {
  loom_status s = enter(node);
  if (s == LOOM_OK) *out_stream = ((cu_node *)loom__hmm_node_state(node))->stream;
  return s;
}

const loom__hmm_backend loom__hmm_cuda_backend = {
    .name = "cuda",
    .node_init = cu_node_init,
    .node_deinit = cu_node_deinit,
    .alloc = cu_alloc,
    .free = cu_free,
    .write = cu_write,
    .read = cu_read,
    .map = cu_map,
    .migrate = cu_migrate,
    .wait = cu_wait,
    .finish = cu_finish,
    .write_ahead = cu_write_ahead,
    .join = cu_join,
    .advise = cu_advise,
    .queue = cu_queue,
};

loom_status loom__hmm_cuda_stream(loom_mem_manager *m, int32_t node, cudaStream_t *out_stream) {
  void *stream = NULL;
  loom_status s =
      loom__hmm_node_queue(m, node, &loom__hmm_cuda_backend, "loom__hmm_cuda_stream", &stream, NULL);
  *out_stream = (cudaStream_t)stream;
  return s;
}
