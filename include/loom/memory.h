/* The heterogeneous memory manager (HMM): buffers with copies on several memory nodes, kept
 * coherent, moved by policy, and kept under a limit per node.
 *
 * A manager (loom_mem_manager) owns buffers (loom_buffer). A buffer is `bytes` of storage
 * that may have a copy on any of the manager's memory nodes; each copy is invalid, shared
 * (valid, and other copies may be valid too) or owner (the only valid copy, written there
 * last), as in StarPU's MSI protocol. A write on one node invalidates the others; a read
 * where no valid copy is makes one, by a temporary copy, a migration, or direct access to
 * shared virtual memory, as the manager's migration policy says. A buffer always has at least
 * one valid copy (its contents are undefined until first written).
 *
 * Memory nodes, as the HMM sees them (loom_mem_node_count): the host's NUMA nodes first
 * (host0, host1, ... with the same indexes as loom_context_memory_node_info), then one node
 * per device that allocates memory of its own kind, named after the device (ocl0, ocl1). A
 * device that shares host memory physically (PoCL, an integrated GPU) still gets a node:
 * its buffers are separate objects with their own copies and limit; its default limit is the
 * device's global memory size. cpu0 uses its host node. CUDA devices get a node (cuda0) in
 * builds with the cuda backend, and none otherwise (see loom_mem_node_find); a GPU that is
 * both a CUDA and an OpenCL device is one node, managed through CUDA.
 *
 * Storage per node is picked from the manager's mode, the allocation flags and what the
 * device offers (loom_mem_storage): host memory bound to the NUMA node (hwloc), OpenCL
 * buffers, OpenCL shared virtual memory (SVM), coarse- or fine-grained, CUDA device memory, or
 * CUDA managed memory. An SVM or managed copy is reachable from the host without a copy
 * (mapped for coarse-grained SVM), which is how `managed` buffers are "one allocation visible
 * everywhere". SVM is per OpenCL context and the HMM keeps one context per device, so another
 * device still gets a copy of its own. CUDA managed memory takes the buffer's advice
 * (cudaMemAdvise), moves with cudaMemPrefetchAsync where the device has concurrent managed
 * access, and is never allocated beyond the device's free memory.
 *
 * Limits: every node has one (its size by default; the LOOM_MEM_LIMIT environment variable,
 * the options or loom_mem_set_limit lower it). The bytes a node holds (live copies plus the
 * pool's cached allocations, in size classes or exact sizes: LOOM_MEM_EXACT_SIZE) never pass
 * the limit: an allocation or a copy that would pass it first releases the node's pool, then
 * evicts the least recently used copies that are not in use and not pinned (a copy with no
 * other valid copy is written back to host memory first, so no data is lost; host copies are
 * never evicted), and fails with LOOM_ERR_OUT_OF_MEMORY only when nothing more can be evicted.
 * While a plan's stage runs on a node under a runner limit (loom_plan_run), the node's limit is
 * the smallest of its own and the runner limits in force there, so the runs sharing the
 * manager hold at most that together; loom_mem_stats' limit shows the limit in force, and the
 * node's own limit comes back when they end.
 *
 * Naming: manager-wide calls are loom_mem_*, calls on one buffer loom_buffer_*.
 *
 * Thread safety: a manager and its buffers may be used from several threads at once; each
 * manager has one lock, held for the whole of every call (copies included). Host pointers
 * from loom_buffer_map and handles from loom_buffer_acquire are used outside the lock: the
 * caller keeps conflicting accesses apart (the HMM refuses a write access while another node
 * uses the buffer, and any access while another node writes it).
 *
 * Errors: every fallible call returns loom_status, with a message in loom_last_error().
 * Out-parameters are cleared on entry and filled only on success.
 */
#ifndef LOOM_MEMORY_H
#define LOOM_MEMORY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "loom/context.h"
#include "loom/device.h"
#include "loom/export.h"
#include "loom/status.h"
#include "loom/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_mem_manager loom_mem_manager;
typedef struct loom_buffer loom_buffer;

/* The most memory nodes one manager handles (host NUMA nodes plus device nodes). */
#define LOOM_MEM_MAX_NODES 64

/* How buffers are allocated on devices. */
typedef enum loom_mem_mode {
  /* Managed where the device does it well (fine-grained SVM on a device that shares host
   * memory), device buffers elsewhere. */
  LOOM_MEM_MODE_AUTO,
  /* Device buffers and explicit copies everywhere. */
  LOOM_MEM_MODE_MANUAL,
  /* Shared virtual memory wherever the device offers it (fine-grained when it can, else
   * coarse-grained), device buffers elsewhere. */
  LOOM_MEM_MODE_MANAGED,
} loom_mem_mode;

/* A migration or prefetch policy.
 * Migration (on loom_buffer_acquire by a node without a valid copy):
 *   NONE: the data stays where it is; the node reaches it directly where it can (SVM) or
 *         through a temporary copy dropped at release (written back first when written).
 *   ADAPTIVE: as NONE until the node has accessed the buffer `migration_threshold` times
 *         (default 2), then the buffer moves there.
 *   AGGRESSIVE: the buffer moves to every node that uses it.
 *   A move makes a persistent copy on the node and frees the others, except for buffers that
 *   are read-mostly (the others stay valid), the copy on the preferred location, and copies
 *   of pinned buffers. For an SVM copy reached from the host, a move is
 *   clEnqueueSVMMigrateMem on OpenCL 2.1+ devices; elsewhere it is a real copy into host
 *   memory, counted as a copy.
 * Prefetch (on loom_mem_prefetch_hint, from a plan that knows the next stages):
 *   NONE: hints are ignored. ADAPTIVE: buffers for the next stage (distance 1) are brought in
 *   where they fit without evicting anything. AGGRESSIVE: buffers for any later stage are
 *   brought in while they fit without evicting anything. */
typedef enum loom_mem_policy {
  LOOM_MEM_POLICY_NONE,
  LOOM_MEM_POLICY_ADAPTIVE,
  LOOM_MEM_POLICY_AGGRESSIVE,
} loom_mem_policy;

/* Advice on one buffer (loom_buffer_advise), as CUDA's cudaMemAdvise. */
typedef enum loom_mem_advice {
  LOOM_MEM_ADVISE_NONE,
  /* Moves replicate: the copies a move would free stay valid (shared). */
  LOOM_MEM_ADVISE_READ_MOSTLY,
  LOOM_MEM_ADVISE_UNSET_READ_MOSTLY,
  /* The node's copy is never freed by a move; evicted device copies go to this node when it
   * is a host node. */
  LOOM_MEM_ADVISE_PREFERRED_LOCATION,
  LOOM_MEM_ADVISE_UNSET_PREFERRED_LOCATION,
  /* Accesses from the node never move the buffer (direct access or temporary copies). */
  LOOM_MEM_ADVISE_ACCESSED_BY,
  LOOM_MEM_ADVISE_UNSET_ACCESSED_BY,
} loom_mem_advice;

/* The kind of memory a copy lives in. */
typedef enum loom_mem_storage {
  LOOM_MEM_STORAGE_NONE,         /* no copy on the node */
  LOOM_MEM_STORAGE_HOST,         /* host memory (bound to the NUMA node where hwloc can) */
  LOOM_MEM_STORAGE_CL_BUFFER,    /* an OpenCL buffer (loom_mem_handle_cl_mem in loom/opencl.h) */
  LOOM_MEM_STORAGE_SVM_COARSE,   /* OpenCL coarse-grained buffer SVM */
  LOOM_MEM_STORAGE_SVM_FINE,     /* OpenCL fine-grained buffer SVM */
  LOOM_MEM_STORAGE_CUDA_DEVICE,  /* CUDA device memory (cudaMalloc); the handle's ptr is the device pointer */
  LOOM_MEM_STORAGE_CUDA_MANAGED, /* CUDA managed memory (cudaMallocManaged), reachable from the host:
                                  * Loom treats it as it does fine-grained SVM */
} loom_mem_storage;

/* The coherence state of one node's copy. */
typedef enum loom_mem_copy_state {
  LOOM_MEM_INVALID, /* no copy, or a stale one */
  LOOM_MEM_SHARED,  /* valid; other nodes may hold valid copies too */
  LOOM_MEM_OWNER,   /* valid and the only valid copy (written on this node last) */
} loom_mem_copy_state;

/* Flags of loom_buffer_allocate. */
enum {
  /* Never evicted until loom_buffer_unpin (as loom_buffer_pin right after allocation). */
  LOOM_MEM_PINNED = 1u << 0,
  /* Plain device memory on every device, whatever the mode. */
  LOOM_MEM_DEVICE_LOCAL = 1u << 1,
  /* Host-visible shared memory on every device that offers it, whatever the mode. */
  LOOM_MEM_HOST_VISIBLE = 1u << 2,
  /* Exactly this mechanism: coarse- or fine-grained SVM on every device that offers it.
   * UNSUPPORTED when the allocation node is a device without it. */
  LOOM_MEM_SVM_COARSE = 1u << 3,
  LOOM_MEM_SVM_FINE = 1u << 4,
  /* As loom_buffer_advise(LOOM_MEM_ADVISE_READ_MOSTLY) right after allocation. */
  LOOM_MEM_READ_MOSTLY = 1u << 5,
  /* Exactly `bytes` on every node, not a size class: what the node counts is what was asked
   * for, for a caller that keeps its own account against the same limit (Loom's executor
   * does: a stage's measured peak is then the node's). Such copies are reused from the pool
   * only by requests of the same size. 0 bytes takes nothing from the limit and is allowed on
   * host nodes only (devices refuse empty buffers). */
  LOOM_MEM_EXACT_SIZE = 1u << 6,
};

/* Access flags of loom_buffer_acquire and loom_buffer_map. READ and WRITE may be combined;
 * DISCARD (with WRITE) says the old contents are not needed, so none are copied in. */
enum {
  LOOM_ACCESS_READ = 1u << 0,
  LOOM_ACCESS_WRITE = 1u << 1,
  LOOM_ACCESS_DISCARD = 1u << 2,
};

/* ---- managers ------------------------------------------------------------------------ */

typedef struct loom_mem_manager_options {
  loom_mem_mode mode;          /* default LOOM_MEM_MODE_AUTO */
  loom_mem_policy migration;   /* default LOOM_MEM_POLICY_ADAPTIVE */
  loom_mem_policy prefetch;    /* default LOOM_MEM_POLICY_ADAPTIVE */
  int32_t migration_threshold; /* accesses before ADAPTIVE moves a buffer; default 2 */
  /* Advice given to every new buffer: NONE (default), READ_MOSTLY, PREFERRED_LOCATION (the
   * allocation node) or ACCESSED_BY (every node: nothing ever moves on access). */
  loom_mem_advice advice;
  /* Limits as "ocl0:256MiB,cpu0:4GiB" (device ids, their aliases, or node ids; byte sizes as
   * loom accepts everywhere). NULL reads the LOOM_MEM_LIMIT environment variable; "" sets
   * none. A well-formed id of a device or node this context does not have is ignored. */
  const char *limits;
  /* Most bytes each node's pool keeps cached: 0 for the default (half the node's limit; while
   * a plan's stage runs there, its whole runner limit, the stage keeping the pool within what
   * its own bytes leave free), a negative value for no pool. */
  int64_t pool_max_bytes;
  bool trace; /* record a trace from the start (loom_mem_trace_enable) */
} loom_mem_manager_options;

/* Fills *opts with the defaults. Accepts NULL. */
LOOM_API void loom_mem_manager_options_init(loom_mem_manager_options *opts);

/* Creates a manager over the memory nodes of `ctx`, which must outlive it. opts may be NULL
 * for the defaults. Nothing is allocated on devices until a buffer needs it (OpenCL contexts
 * and queues are made on a node's first use). The caller owns *out_manager.
 * Thread safety: any thread; ctx is only read.
 * Errors: INVALID_ARGUMENT (NULL pointers, an out-of-range enum, a limits string that does
 * not parse), UNSUPPORTED (more than LOOM_MEM_MAX_NODES nodes), OUT_OF_MEMORY. */
LOOM_API loom_status loom_mem_manager_create(loom_context *ctx, const loom_mem_manager_options *opts,
                                             loom_mem_manager **out_manager);

/* Destroys a manager and every buffer still allocated from it (their pointers and handles
 * become invalid), and releases its OpenCL contexts. Accepts NULL. Must not run while
 * another thread uses the manager. */
LOOM_API void loom_mem_manager_destroy(loom_mem_manager *m);

/* The context's default manager: made with the default options (limits from LOOM_MEM_LIMIT)
 * by loom_context_create, destroyed with the context. Loom's runtime allocates every buffer
 * of a graph run through it (values, temporaries and uploads, on the memory node of the
 * device that runs the graph), so its limits, stats and trace cover graph runs too; a host
 * program may use it for buffers of its own. The context owns it: do not destroy it.
 * Thread safety: any thread. Errors: INVALID_ARGUMENT (NULL pointers). */
LOOM_API loom_status loom_context_memory(loom_context *ctx, loom_mem_manager **out_manager);

/* The manager's current settings (limits as "" and pool as set at creation). Errors:
 * INVALID_ARGUMENT (NULL pointers). */
LOOM_API loom_status loom_mem_get_options(const loom_mem_manager *m, loom_mem_manager_options *out_opts);

/* Policy setters; they act on later accesses. Errors: INVALID_ARGUMENT (NULL manager, a
 * value out of range, a threshold below 1). Thread safety: any thread. */
LOOM_API loom_status loom_mem_set_migration_policy(loom_mem_manager *m, loom_mem_policy policy);
LOOM_API loom_status loom_mem_set_prefetch_policy(loom_mem_manager *m, loom_mem_policy policy);
LOOM_API loom_status loom_mem_set_migration_threshold(loom_mem_manager *m, int32_t accesses);

/* ---- memory nodes -------------------------------------------------------------------- */

/* Bits of loom_mem_node_info.storages. */
#define LOOM_MEM_STORAGE_BIT(storage) (1u << (storage))

typedef struct loom_mem_node_info {
  const char *id; /* "host0", "ocl1"; owned by the manager */
  loom_memory_node_kind kind;
  int32_t device_index;    /* the context's index of the device (device nodes), else -1 */
  int32_t host_node;       /* the host node evicted copies go to (itself for host nodes) */
  int64_t size_bytes;      /* the memory's size as the device table has it */
  int64_t limit_bytes;     /* the limit now */
  int64_t max_alloc_bytes; /* the largest single allocation */
  uint32_t storages;       /* LOOM_MEM_STORAGE_BIT(...) of the storages it offers */
  bool svm_migrate;        /* clEnqueueSVMMigrateMem is used (OpenCL 2.1+) */
} loom_mem_node_info;

/* The number of memory nodes (0 for NULL). */
LOOM_API int32_t loom_mem_node_count(const loom_mem_manager *m);

/* Finds a node by node id ("host0", "ocl1"), device id or alias ("cpu0" gives its host node,
 * "ocl0" its own node); case-insensitive. *out_node is -1 on failure.
 * Errors: INVALID_ARGUMENT (NULL pointers), NOT_FOUND (no such node; the message lists the
 * ids there are, and says when the id is a device whose memory the HMM does not manage). */
LOOM_API loom_status loom_mem_node_find(const loom_mem_manager *m, const char *id, int32_t *out_node);

/* The node device `device_index` (the context's index, as loom_context_find_device gives)
 * allocates from. Errors: INVALID_ARGUMENT (NULL pointers, index out of range), NOT_FOUND (a
 * device whose memory the HMM does not manage: CUDA in a build without the cuda backend). */
LOOM_API loom_status loom_mem_device_node(const loom_mem_manager *m, int32_t device_index, int32_t *out_node);

/* Describes node `node`. Errors: INVALID_ARGUMENT (NULL pointers, node out of range). */
LOOM_API loom_status loom_mem_node_info_get(const loom_mem_manager *m, int32_t node,
                                            loom_mem_node_info *out_info);

/* Sets a node's limit. When the node holds more than `bytes`, its pool is released and
 * copies are evicted until it fits. Errors: INVALID_ARGUMENT (NULL manager, node out of range,
 * negative bytes), OUT_OF_MEMORY (it cannot be brought under `bytes`: the limit is left as
 * it was, though what was evicted stays evicted). */
LOOM_API loom_status loom_mem_set_limit(loom_mem_manager *m, int32_t node, int64_t bytes);

/* Sets limits from a string as LOOM_MEM_LIMIT ("ocl0:8MiB,host0:1GiB"); each as
 * loom_mem_set_limit, in order. Errors: INVALID_ARGUMENT (a string that does not parse,
 * naming the entry and column), NOT_FOUND (a well-formed id this manager has no node for),
 * OUT_OF_MEMORY (as loom_mem_set_limit). */
LOOM_API loom_status loom_mem_set_limits(loom_mem_manager *m, const char *spec);

/* Frees every cached allocation of a node's pool (node -1: every node), and the records of
 * freed buffers the manager keeps in host memory for the next allocations. Thread safety: any
 * thread. Errors: INVALID_ARGUMENT (NULL manager, node out of range). */
LOOM_API loom_status loom_mem_trim(loom_mem_manager *m, int32_t node);

/* ---- buffers ------------------------------------------------------------------------- */

/* Allocates a buffer of `bytes` (a multiple of dtype's size; 0 is allowed and takes the
 * smallest size class) with a copy on `node`, which owns the (undefined) contents. Evicts
 * other buffers from the node when its limit requires. The caller owns *out_buffer and frees
 * it with loom_buffer_free (or by destroying the manager).
 * Errors: INVALID_ARGUMENT (NULL pointers, node out of range, bad dtype, bytes negative or
 * not a multiple of the element size, unknown flags, both SVM flags), UNSUPPORTED (an SVM
 * flag on a device without it), OUT_OF_MEMORY (over the limit with nothing left to evict,
 * larger than the node's limit or largest allocation, or the device or host refused it),
 * UNAVAILABLE (the device's OpenCL context could not be made). */
LOOM_API loom_status loom_buffer_allocate(loom_mem_manager *m, int64_t bytes, loom_dtype dtype, int32_t node,
                                          uint32_t flags, loom_buffer **out_buffer);

/* Frees a buffer and all its copies (device copies go to their node's pool). Accepts NULL.
 * The buffer must not be mapped or acquired. */
LOOM_API void loom_buffer_free(loom_buffer *b);

/* Maps the buffer for host access and returns a host pointer to all its bytes. The pointer
 * reaches a valid copy: a host copy, made or refreshed on the buffer's host node when needed
 * (a copy, not a migration), or the buffer's SVM copy directly (coarse-grained SVM is mapped
 * with clEnqueueSVMMap). WRITE invalidates every other copy from the map on; WRITE|DISCARD
 * also skips copying the old contents in. Maps nest; each is ended by loom_buffer_unmap. The
 * host copy is in use (not evictable) while mapped.
 * Errors: INVALID_ARGUMENT (NULL pointers, no READ or WRITE in flags, unknown flags),
 * UNAVAILABLE (another node is writing the buffer, or WRITE while another node uses it),
 * OUT_OF_MEMORY, IO or INTERNAL (a device copy failed; the buffer is unchanged). */
LOOM_API loom_status loom_buffer_map(loom_buffer *b, uint32_t access, void **out_ptr);

/* Ends one map of `ptr`. Errors: INVALID_ARGUMENT (NULL buffer, ptr not mapped), and
 * device errors from unmapping coarse-grained SVM. */
LOOM_API loom_status loom_buffer_unmap(loom_buffer *b, void *ptr);

/* Copies `bytes` at `offset` from / into host memory, without moving the buffer: a read
 * comes from any valid copy; a write goes into one valid copy (a device copy stays on the
 * device) and invalidates the others. Both are counted in the node's bytes_out / bytes_in
 * when the copy is a device's, and traced ("read", "write").
 * Errors: INVALID_ARGUMENT (NULL pointers, a range outside the buffer), UNAVAILABLE (as
 * loom_buffer_map), device errors. */
LOOM_API loom_status loom_buffer_read(loom_buffer *b, int64_t offset, void *dst, int64_t bytes);
LOOM_API loom_status loom_buffer_write(loom_buffer *b, int64_t offset, const void *src, int64_t bytes);

/* What a device or host thread uses to reach a buffer, from loom_buffer_acquire. */
typedef struct loom_mem_handle {
  loom_mem_storage storage; /* HOST, CL_BUFFER, SVM_COARSE or SVM_FINE */
  int32_t node;             /* the node whose copy it is (may differ from the node that asked:
                             * a host thread reaching a device's SVM copy) */
  void *ptr;                /* host pointer (HOST, or SVM reached from the host), SVM pointer, or
                             * CUDA device pointer (CUDA_DEVICE, CUDA_MANAGED; typed by
                             * loom_mem_handle_cuda_ptr in loom/cuda.h) */
  void *object;             /* the device's memory object where the storage is not addressed by
                             * ptr (CL_BUFFER: read it with loom_mem_handle_cl_mem in
                             * loom/opencl.h); NULL otherwise */
  int64_t offset;           /* where the buffer starts in it (0 today) */
  int64_t bytes;            /* the buffer's size */
  bool temporary;           /* a copy made for this access, dropped at release */
  /* For loom_buffer_release; do not change. */
  int32_t from_node_;
  uint32_t access_;
  bool host_mapped_;
} loom_mem_handle;

/* Makes the buffer usable on `node` for one operation and pins it until
 * loom_buffer_release. This is where the migration policy acts and accesses are counted: a
 * node with a valid copy uses it; a host node may reach a device's SVM copy directly; else
 * the policy picks a temporary copy or a move (see loom_mem_policy). WRITE makes the node's
 * copy the owner (invalidating the others; a temporary copy is written back at release).
 * OpenCL handles belong to the OpenCL context and in-order queue the HMM keeps for that
 * device, CUDA handles to its stream: work on them runs there (loom_mem_node_cl_queue in
 * loom/opencl.h, loom_mem_node_cuda_stream in loom/cuda.h). *out_handle is cleared on entry.
 * Errors: INVALID_ARGUMENT (NULL pointers, node out of range, bad access flags),
 * UNAVAILABLE (a conflicting access, see loom_buffer_map), OUT_OF_MEMORY, device errors. */
LOOM_API loom_status loom_buffer_acquire(loom_buffer *b, int32_t node, uint32_t access,
                                         loom_mem_handle *out_handle);

/* Ends an access begun by loom_buffer_acquire: waits for the HMM's queue on that device,
 * writes a written temporary copy back and drops it, unpins. Device work the caller enqueued
 * on other queues must be complete. Errors: INVALID_ARGUMENT (NULL pointers, a handle that is
 * not acquired), device errors (the access is ended anyway). */
LOOM_API loom_status loom_buffer_release(loom_buffer *b, const loom_mem_handle *handle);

/* Pins (never evicted, never moved by policy) / unpins a buffer; pins nest.
 * Errors: INVALID_ARGUMENT (NULL buffer, unpin without pin). */
LOOM_API loom_status loom_buffer_pin(loom_buffer *b);
LOOM_API loom_status loom_buffer_unpin(loom_buffer *b);

/* Makes a valid copy on `node` now, keeping the others (a replica), asynchronously where the
 * device allows (later calls on the buffer wait for it). For an SVM copy reached from the
 * host, or the SVM copy's own device, it migrates the SVM pages (OpenCL 2.1+; elsewhere it
 * does nothing, the data being reachable anyway). May evict other buffers.
 * Errors: INVALID_ARGUMENT, UNAVAILABLE (the buffer is being written on another node),
 * OUT_OF_MEMORY, device errors. */
LOOM_API loom_status loom_buffer_prefetch(loom_buffer *b, int32_t node);

/* Moves the buffer to `node`: a valid copy there, every other copy freed (an SVM copy reached
 * from a host node is migrated with clEnqueueSVMMigrateMem instead, where the device has it).
 * Errors: INVALID_ARGUMENT, UNAVAILABLE (another node uses the buffer), OUT_OF_MEMORY,
 * device errors. */
LOOM_API loom_status loom_buffer_migrate(loom_buffer *b, int32_t node);

/* Gives advice about the buffer (loom_mem_advice); `node` is ignored for READ_MOSTLY.
 * Errors: INVALID_ARGUMENT (NULL buffer, advice or node out of range). */
LOOM_API loom_status loom_buffer_advise(loom_buffer *b, loom_mem_advice advice, int32_t node);

/* Whether the buffer's storage on its allocation node is managed memory (SVM): reachable from
 * the host and its device without a copy. False for NULL. */
LOOM_API bool loom_buffer_is_managed(const loom_buffer *b);

typedef struct loom_buffer_info {
  int64_t bytes;
  loom_dtype dtype;       /* as allocated, or as loom_buffer_set_type (or a run) last typed it */
  loom_mem_mode mode;     /* the manager's mode when it was allocated */
  uint32_t flags;         /* as allocated */
  bool managed;           /* loom_buffer_is_managed */
  int32_t node;           /* the allocation node */
  int32_t preferred_node; /* -1 when none */
  bool read_mostly;
  int32_t pins;         /* pins, acquires and maps outstanding */
  int32_t valid_copies; /* nodes holding a valid copy */
  int64_t accesses;     /* acquires and maps, all nodes */
  int64_t migrations;   /* moves: by policy, by loom_buffer_migrate, SVM migrations */
  int64_t prefetches;   /* copies made by loom_buffer_prefetch and prefetch hints */
  int64_t copies;       /* every transfer between nodes, migrations included */
  int64_t bytes_moved;  /* their bytes */
  int64_t evictions;    /* times one of its copies was evicted */
} loom_buffer_info;

/* Errors: INVALID_ARGUMENT (NULL pointers). */
LOOM_API loom_status loom_buffer_get_info(const loom_buffer *b, loom_buffer_info *out_info);

typedef struct loom_buffer_node_info {
  loom_mem_copy_state state;
  loom_mem_storage storage; /* NONE when the node holds no allocation for it */
  int64_t allocated_bytes;  /* the size class it takes on the node */
  int64_t accesses;         /* acquires and maps from this node */
  bool accessed_by;         /* advice */
  bool svm_on_host;         /* an SVM copy last written by or migrated to the host */
  int32_t in_use;           /* acquires and maps of this copy outstanding */
  bool temporary;
} loom_buffer_node_info;

/* The buffer's copy on `node`. Errors: INVALID_ARGUMENT (NULL pointers, node out of range). */
LOOM_API loom_status loom_buffer_node_info_get(const loom_buffer *b, int32_t node,
                                               loom_buffer_node_info *out_info);

/* ---- tensor types of buffers (resident runs, loom/plan.h) ------------------------------- */

/* Gives the buffer a tensor type (dtype and shape, dense C order) for the runs that read it:
 * loom_plan_run_buffers checks it against the graph's parameter. The type's byte size must be
 * the buffer's; the buffer's dtype becomes the type's. Only the description changes, never
 * the data (a reshape). Thread safety: any thread.
 * Errors: INVALID_ARGUMENT (NULL pointers, an invalid type, a type of another byte size, naming
 * both). */
LOOM_API loom_status loom_buffer_set_type(loom_buffer *b, const loom_type *type);

/* The buffer's tensor type: the one loom_buffer_set_type gave it or the run that returned it
 * (loom_plan_run_buffers); for a buffer never given one, the vector dtype[bytes / element
 * size] of its allocation. *out_typed (may be NULL) says whether one was given.
 * Errors: INVALID_ARGUMENT (NULL buffer or out_type). */
LOOM_API loom_status loom_buffer_get_type(const loom_buffer *b, loom_type *out_type, bool *out_typed);

/* ---- prefetch hints (the executor) ----------------------------------------------------- */

/* Tells the manager that `buffers` will be read on `node` by the stage `distance` stages
 * ahead (1: the next one). What is done depends on the prefetch policy (loom_mem_policy);
 * nothing is ever evicted for a hint. *out_prefetched (may be NULL) counts the buffers
 * brought in. Errors: INVALID_ARGUMENT (NULL pointers with n > 0, node out of range,
 * distance < 1); a buffer that cannot be brought in is skipped, not an error. */
LOOM_API loom_status loom_mem_prefetch_hint(loom_mem_manager *m, int32_t node, loom_buffer *const *buffers,
                                            int32_t n, int32_t distance, int32_t *out_prefetched);

/* ---- stats and trace ----------------------------------------------------------------- */

typedef struct loom_mem_node_stats {
  int64_t limit;        /* the limit now */
  int64_t in_use;       /* live copies plus cached pool bytes; never above limit */
  int64_t live_bytes;   /* live copies (size classes) */
  int64_t cached_bytes; /* pool */
  int64_t peak_in_use;  /* highest in_use */
  int64_t peak_live;    /* highest live_bytes */
  int64_t allocations;  /* copies allocated (pool hits included) */
  int64_t frees;        /* copies freed (into the pool included) */
  int64_t pool_hits;
  int64_t pool_releases; /* cached allocations freed to make room or on trim */
  int64_t evictions;     /* copies evicted from this node */
  int64_t evicted_bytes;
  int64_t bytes_in;      /* copied into this node from others (host->device for devices) */
  int64_t bytes_out;     /* copied from this node to others */
  int64_t migrations_in; /* moves and SVM migrations to this node */
  int64_t bytes_migrated_in;
  int64_t failed_allocations; /* OUT_OF_MEMORY returned for this node */
  int64_t peer_bytes_in;      /* of bytes_in, copied from another device without the host (the
                               * OpenCL devices of one platform, queued behind an event) */
  int64_t admission_waits;    /* stages that waited for room beside other runs' stages here */
  int64_t admission_wait_us;  /* how long they waited, in all (microseconds) */
} loom_mem_node_stats;

/* A node's counters. Errors: INVALID_ARGUMENT (NULL pointers, node out of range). */
LOOM_API loom_status loom_mem_stats(const loom_mem_manager *m, int32_t node, loom_mem_node_stats *out_stats);

/* Writes every node's counters as one JSON object ({"nodes": [{"id": ..., ...}]}) to
 * `out` (not closed). Errors: INVALID_ARGUMENT (NULL pointers), IO (writing failed). */
LOOM_API loom_status loom_mem_stats_json(const loom_mem_manager *m, FILE *out);

/* Starts (on) or stops (off) recording a trace: allocations, frees, copies, migrations,
 * evictions and pool releases, with timestamps. Stopping keeps what was recorded.
 * Errors: INVALID_ARGUMENT (NULL manager). */
LOOM_API loom_status loom_mem_trace_enable(loom_mem_manager *m, bool on);

/* Writes the trace recorded so far as Chrome trace JSON (opens in Perfetto and
 * chrome://tracing): one process per memory node, instant events for allocations, frees
 * and evictions, complete events for copies (and for the stages and runs of Loom's runtime).
 * The file is written under a temporary name beside `path` and renamed over it once
 * complete, so `path` is never left half-written. The trace keeps recording.
 * Errors: INVALID_ARGUMENT (NULL pointers), IO (the file cannot be written; nothing is left
 * behind). */
LOOM_API loom_status loom_mem_trace_write(const loom_mem_manager *m, const char *path);

/* The trace's clock (seconds, monotonic), for loom_mem_trace_span's `start`. Thread safe. */
LOOM_API double loom_mem_trace_now(void);

/* Records a span of the caller's own work in the trace (while it is on), from `start` (a
 * loom_mem_trace_now() reading) to now, drawn on memory node `node`'s process in a lane of its
 * own ("caller"), beside Loom's stages and copies there: a program that overlaps its work with
 * a run (loom_run_submit) sees both in one view. `name` is not copied: pass a string that lives
 * as long as the manager (a literal). Nothing is recorded while the trace is off. Thread safe.
 * Errors: INVALID_ARGUMENT (NULL manager or name, a node out of range, a start in the future or
 * before the manager was made). */
LOOM_API loom_status loom_mem_trace_span(loom_mem_manager *m, int32_t node, const char *name, double start);

#ifdef __cplusplus
}
#endif
#endif
