/* The memory manager's insides (the public side is loom/memory.h).
 *
 * Layout of the module:
 *   hmm.c           managers, nodes, options, policies' setters, node lookup
 *   hmm_buffer.c    the public buffer calls: allocate, free, map, acquire, prefetch, ...
 *   hmm_residency.c copies of a buffer: allocation on a node, transfers, the MSI states and
 *                   the migration policy's decisions
 *   hmm_limits.c    limits (LOOM_MEM_LIMIT, parsed by core/limits.c), making room (pool
 *                   release, LRU eviction)
 *   hmm_admit.c     admission: stages under runner limits wait in turn for room on a node
 *   hmm_pool.c      size classes and the per-node pool
 *   hmm_stats.c     counters and their JSON
 *   hmm_trace.c     the Chrome trace
 *   hmm_host.c      host memory (a memory backend)
 *   backends/registry.c              which memory backend drives a device (the one list)
 *   backends/opencl/opencl_memory.c  OpenCL buffers and SVM (a memory backend)
 *   backends/cuda/cuda_memory.c      CUDA device and managed memory (a memory backend)
 *
 * Locking: every public entry takes the manager's lock (m->lock) and every internal function
 * here runs under it; none of them locks. Backends are called under the lock too, and never
 * take it (hmm/hmm_backend.h). The context's default manager is made by the runtime
 * (runtime/memory.c), which hands the HMM the device table (loom__hmm_create).
 *
 * Accounting invariant, per node: stats.in_use == stats.live_bytes + stats.cached_bytes
 * <= stats.limit, checked after every change (loom__hmm_check_node).
 */
#ifndef LOOM_HMM_H
#define LOOM_HMM_H

#include <pthread.h>

#include "core/core.h"
#include "core/limits.h"
#include "devices/devices.h"
#include "hmm/hmm_backend.h"
#include "loom/memory.h"

/* ---- memory backends (their contract: hmm/hmm_backend.h) --------------------------------- */

extern const loom__hmm_backend loom__hmm_host_backend;

/* ---- nodes and the pool ---------------------------------------------------------------- */

/* Cached allocations per node; a fixed array, so caching never allocates. */
#define LOOM__HMM_POOL_SLOTS 64

typedef struct loom__hmm_pool_entry {
  loom__hmm_alloc alloc;
  uint64_t tick; /* when it was cached: the oldest goes first */
} loom__hmm_pool_entry;

typedef struct loom__hmm_pool {
  loom__hmm_pool_entry items[LOOM__HMM_POOL_SLOTS];
  int32_t count;
} loom__hmm_pool;

/* A runner limit in force on a node: one per stage of a plan running there (runtime/plan_run.c),
 * owned by the caller and linked into the node's list while the stage runs. */
typedef struct loom__hmm_runner_limit {
  int64_t bytes;
  struct loom__hmm_runner_limit *next;
} loom__hmm_runner_limit;

struct loom__hmm_node {
  char id[16];
  loom_memory_node_kind kind;
  int32_t index;
  const loom__hmm_backend *backend;
  void *state; /* the backend's, made by node_init / alloc */
  loom_mem_manager *m;
  const loom__device *device; /* device nodes: the table's entry; host nodes: NULL */
  int32_t device_index;       /* -1 for host nodes */
  int32_t host_node;          /* where evicted copies go */
  int32_t numa_os_index;      /* host nodes: the NUMA node's OS index */
  int64_t size_bytes, max_alloc;
  uint32_t storages; /* LOOM_MEM_STORAGE_BIT */
  bool svm_migrate;  /* the backend's migrate works here (OpenCL 2.1+) */
  loom__hmm_pool pool;
  /* stats.limit is the node's limit: own_limit, or the smallest runner limit in force when that
   * is lower. own_limit: its size, LOOM_MEM_LIMIT or loom_mem_set_limit. */
  loom_mem_node_stats stats;
  int64_t own_limit;
  loom__hmm_runner_limit *runner_limits;   /* in force on the node, NULL: none */
  struct loom__hmm_admission *admit_queue; /* stages waiting to run here, oldest first */
  int64_t admitted_bytes;                  /* the estimated peaks of the stages admitted */
  int32_t admitted;                        /* stages admitted and not yet ended */
  uint64_t admissions;                     /* stages admitted so far */
};

/* ---- buffers ------------------------------------------------------------------------- */

/* One node's copy of a buffer. */
typedef struct loom__hmm_copy {
  loom__hmm_alloc alloc; /* storage NONE: nothing on this node */
  loom_mem_copy_state state;
  int32_t in_use;    /* acquires and maps outstanding */
  int32_t writers;   /* of those, with WRITE */
  bool temporary;    /* made for one access, dropped when no longer in use */
  bool svm_on_host;  /* SVM pages last written by / migrated to the host */
  void *event;       /* an asynchronous write into it still running, or NULL */
  uint64_t last_use; /* the manager's tick at its last use (LRU) */
  int64_t accesses;  /* acquires and maps from this node */
} loom__hmm_copy;

/* One loom_buffer_map, kept until its unmap. */
typedef struct loom__hmm_map {
  struct loom__hmm_map *next;
  loom_mem_handle handle;
} loom__hmm_map;

struct loom_buffer {
  loom_mem_manager *m;
  loom_buffer *prev, *next; /* the manager's list of buffers */
  uint64_t id;
  int64_t bytes;
  loom_dtype dtype;
  loom_mem_mode mode;
  uint32_t flags;
  int32_t node;      /* the allocation node */
  int32_t preferred; /* -1: none */
  bool read_mostly;
  uint64_t accessed_by; /* bit n: node n */
  int32_t pins;
  /* Its copy on `node` is the caller's memory (loom__buffer_wrap): one pin that
   * loom_buffer_unpin cannot take away keeps it there. */
  bool wrapped;
  uint64_t evict_mark; /* eviction pass that already tried it */
  loom__hmm_map *maps;
  int64_t accesses, migrations, prefetches, copies, bytes_moved, evictions;
  /* The tensor type runs read it as (loom_buffer_set_type, or the run that made it); typed
   * false: none given, a vector of dtype. */
  loom_type type;
  bool typed;
  loom__hmm_copy copy[]; /* one per node */
};

/* ---- the trace ------------------------------------------------------------------------- */

typedef struct loom__hmm_event {
  const char *name; /* static: "alloc", "free", "copy", "migrate", ... */
  char ph;          /* 'i' instant, 'X' complete */
  int32_t node;     /* the process it is drawn in */
  int32_t other;    /* a copy's source node, else -1 */
  uint64_t buffer;
  int64_t bytes;
  double ts, dur; /* seconds since the manager was made */
  bool caller;    /* the caller's own work (loom_mem_trace_span): a lane of its own */
} loom__hmm_event;

typedef struct loom__hmm_trace {
  bool on;
  loom__hmm_event *items;
  int32_t count, cap;
  int64_t dropped; /* events lost to a failed allocation */
} loom__hmm_trace;

/* ---- the manager --------------------------------------------------------------------- */

struct loom_mem_manager {
  const loom__devices *devices; /* the context's table; not owned */
  pthread_mutex_t lock;
  pthread_cond_t admit_cond; /* signalled when a stage ends or an admission changes (hmm_admit.c) */
  loom_mem_mode mode;
  loom_mem_policy migration, prefetch;
  int32_t threshold;
  loom_mem_advice advice;
  int64_t pool_max; /* 0: loom__hmm_pool_max's default; < 0: no pool */
  /* LOOM_WRITE_AHEAD=0 when the manager was made: loom__buffer_write_ahead is a queued write on
   * the node's own queue, for comparison (loom-run timings with and without the overlap). */
  bool no_write_ahead;
  loom__hmm_node *nodes;
  int32_t node_count;
  loom_buffer *buffers; /* every live buffer */
  /* Records of freed buffers kept for the next allocations (hmm_buffer.c), linked by next;
   * they hold no memory of any node. loom_mem_trim and destroy free them. */
  loom_buffer *spares;
  int32_t spare_count;
  uint64_t next_id, tick, evict_pass;
  double t0;
  loom__hmm_trace trace;
};

void loom__hmm_lock(const loom_mem_manager *m);
/* Frees the records of freed buffers the manager keeps for reuse; the lock is held. */
void loom__hmm_spares_free(loom_mem_manager *m);
void loom__hmm_unlock(const loom_mem_manager *m);
/* The next tick of the manager's clock (LRU order). */
uint64_t loom__hmm_tick(loom_mem_manager *m);
bool loom__hmm_is_host(const loom_mem_manager *m, int32_t node);
/* The host node that stands for the buffer's host side: its preferred node when that is a
 * host node, else its allocation node when host, else that node's nearest host node. */
int32_t loom__hmm_host_of(const loom_buffer *b);
/* Checks a node's accounting invariant (aborts on corrupted state: in_use above the limit or
 * counters that do not add up). */
void loom__hmm_check_node(const loom__hmm_node *n);

/* ---- residency (hmm_residency.c) ------------------------------------------------------- */

/* The storage a buffer's copy on `node` takes (mode, flags, what the node offers). */
loom_mem_storage loom__hmm_choose_storage(const loom_mem_manager *m, const loom_buffer *b, int32_t node);
/* Allocates the buffer's copy on node (state INVALID): from the pool, else after making room.
 * Errors: OUT_OF_MEMORY, UNAVAILABLE, UNSUPPORTED. On failure nothing changed but evictions. */
loom_status loom__hmm_copy_alloc(loom_mem_manager *m, loom_buffer *b, int32_t node);
/* Frees the copy on node (into the pool when to_pool), waiting for its pending write. */
void loom__hmm_copy_drop(loom_mem_manager *m, loom_buffer *b, int32_t node, bool to_pool);
/* Copies the whole buffer from copy src to copy dst (both allocated). Between two device
 * nodes it is the backend's own copy where it has one (queued, ordered by events), else it
 * goes through host memory. `why` names it in the trace ("copy", "migrate", "evict",
 * "prefetch"). With async, a host->device write may be left running (copy.event). */
loom_status loom__hmm_transfer(loom_mem_manager *m, loom_buffer *b, int32_t dst, int32_t src, const char *why,
                               bool async);
/* A node holding a valid copy, preferring host memory, else -1. */
int32_t loom__hmm_valid_source(const loom_buffer *b, int32_t exclude);
int32_t loom__hmm_valid_count(const loom_buffer *b);
/* A node other than `exclude` holding a valid copy that is not temporary, else -1. A
 * temporary copy never counts as the place the data lives: it goes away at release. */
int32_t loom__hmm_persistent_copy(const loom_buffer *b, int32_t exclude);
/* Makes the copy on node valid (allocating and copying as needed). */
loom_status loom__hmm_make_valid(loom_mem_manager *m, loom_buffer *b, int32_t node, const char *why,
                                 bool async);
/* Makes node the owner: every other copy invalid (freed when not in use). */
void loom__hmm_invalidate_others(loom_mem_manager *m, loom_buffer *b, int32_t node);
/* Waits for the buffer's pending asynchronous writes. */
void loom__hmm_settle(loom_mem_manager *m, loom_buffer *b);
/* Gives the buffer's advice to its managed copy on node, where the node's backend takes advice
 * (hmm_policy.c); called when the copy is allocated and when the advice changes. */
void loom__hmm_advise_copy(loom_mem_manager *m, loom_buffer *b, int32_t node);

/* What an access does (decided before anything changes, so conflicts fail early). */
typedef enum loom__hmm_action {
  LOOM__HMM_LOCAL,     /* the node's own valid copy */
  LOOM__HMM_DIRECT,    /* a host node reaches a device's SVM copy */
  LOOM__HMM_TEMPORARY, /* a copy for this access only */
  LOOM__HMM_MOVE,      /* a persistent copy, the others freed (policy) */
  LOOM__HMM_REPLICATE, /* a persistent copy, the others kept (map, prefetch) */
} loom__hmm_action;

typedef enum loom__hmm_intent {
  LOOM__HMM_INTENT_ACQUIRE, /* an operation: the migration policy decides */
  LOOM__HMM_INTENT_MAP,     /* host access: always a host-reachable persistent copy */
} loom__hmm_intent;

typedef struct loom__hmm_plan {
  loom__hmm_action action;
  int32_t target;     /* the node whose copy is used */
  bool svm_migrate;   /* migrate the target's SVM pages first (to the host for DIRECT) */
  bool fallback_copy; /* a MOVE that stands in for an SVM migration the device lacks */
} loom__hmm_plan;

/* Decides what an access by `node` does. Pure: reads the buffer and the policy. */
void loom__hmm_plan_access(const loom_mem_manager *m, const loom_buffer *b, int32_t node, uint32_t access,
                           loom__hmm_intent intent, loom__hmm_plan *out);
/* UNAVAILABLE when the access conflicts with outstanding ones (see loom/memory.h). */
loom_status loom__hmm_check_conflict(const loom_buffer *b, int32_t target, uint32_t access, const char *what);
/* Carries out a plan and pins the target copy; fills the handle. */
loom_status loom__hmm_access_begin(loom_mem_manager *m, loom_buffer *b, int32_t node, uint32_t access,
                                   const loom__hmm_plan *plan, loom_mem_handle *out);
/* Ends an access (unmap, write-back of a temporary copy, unpin, drop). With wait, a device
 * access first waits for the node's queue (loom_buffer_release); without, the caller's work
 * is on that queue and everything the HMM does later on the node is queued after it. */
loom_status loom__hmm_access_end(loom_mem_manager *m, loom_buffer *b, const loom_mem_handle *h, bool wait);
/* An SVM migration of the copy on node, counted as a migration into `counted_node`. */
loom_status loom__hmm_svm_migrate(loom_mem_manager *m, loom_buffer *b, int32_t node, bool to_host,
                                  int32_t counted_node, const char *why);

/* ---- limits (hmm_limits.c) ------------------------------------------------------------- */

/* Applies parsed limits; ids this manager lacks are skipped when skip_missing, else NOT_FOUND. */
loom_status loom__hmm_apply_limits(loom_mem_manager *m, const loom__mem_limit *items, int32_t count,
                                   bool skip_missing, const char *origin);
/* Makes room for `bytes` more on node: releases its pool, then evicts LRU copies of buffers
 * other than `exclude` that are neither pinned nor in use. Changes no counter of the caller's
 * allocation. Errors: OUT_OF_MEMORY when nothing more can go. */
loom_status loom__hmm_make_room(loom_mem_manager *m, int32_t node, int64_t bytes, const loom_buffer *exclude);
/* Sets the node's own limit (what loom_mem_set_limit sets); the runner limits in force still
 * cap it. Errors: as loom_mem_set_limit. */
loom_status loom__hmm_set_limit_locked(loom_mem_manager *m, int32_t node, int64_t bytes);
/* Puts runner limit `rl` (rl->bytes > 0, caller-owned, linked until loom__hmm_runner_limit_end)
 * in force on node: the node's limit becomes the smallest of its own and every runner limit in
 * force, so the runs that share the node hold at most that together, pool included (issue 16).
 * Room is made as loom_mem_set_limit makes it. Takes the lock. Errors: OUT_OF_MEMORY naming the
 * node when what the node holds in use (other runs' buffers) cannot be brought under it; rl is
 * then not in force. */
loom_status loom__hmm_runner_limit_begin(loom_mem_manager *m, int32_t node, loom__hmm_runner_limit *rl);
/* As loom__hmm_runner_limit_begin, the lock already held. */
loom_status loom__hmm_runner_limit_begin_locked(loom_mem_manager *m, int32_t node,
                                                loom__hmm_runner_limit *rl);
/* Takes rl out of force; the node's limit rises back to the smallest left. Takes the lock. */
void loom__hmm_runner_limit_end(loom_mem_manager *m, int32_t node, loom__hmm_runner_limit *rl);

/* ---- admission (hmm_admit.c) ----------------------------------------------------------- */

/* A stage's request to run on a node under a runner limit; the caller's storage, linked into
 * the node's queue while it waits. */
typedef struct loom__hmm_admission {
  loom__hmm_runner_limit limit; /* the stage's runner limit (bytes > 0), in force once admitted */
  int64_t bytes;                /* what it is admitted for: its estimated peak, at most limit.bytes */
  /* Admitted for the whole limit it would put in force (bytes is then set to that): a stage
   * run again after its estimate fell short beside other runs' stages. */
  bool whole;
  /* How long it may wait for room: 0 as long as a stage of another run holds the node; > 0 at
   * most that many seconds; < 0 not at all. */
  double wait_seconds;
  double waited_seconds; /* out: how long it waited */
  bool admitted;         /* out */
  /* out, after loom__hmm_admit_end: another stage was admitted on the node while this one ran,
   * so an allocation past its estimate may have been refused for the others' bytes */
  bool crowded;
  uint64_t serial; /* the node's admissions before this one (to tell whether others came) */
  struct loom__hmm_admission *next;
} loom__hmm_admission;

/* Admits a stage to run on node: waits, in order of arrival, until its bytes fit beside those
 * of the stages admitted there under the limit its runner limit puts in force, then puts that
 * limit in force (loom__hmm_runner_limit_begin). Takes the lock (and waits without it). Errors:
 * OUT_OF_MEMORY naming the node: at once when a->bytes passes the node's own limit or the
 * runner limit (it could never fit), or when it does not fit and a->wait_seconds < 0; after
 * a->wait_seconds, saying it waited; when no stage is admitted there and the node's allocations
 * and frees stood still for 10 s (the room held by buffers nobody is releasing). a is then not
 * admitted and not linked anywhere. */
loom_status loom__hmm_admit(loom_mem_manager *m, int32_t node, loom__hmm_admission *a);
/* Ends an admission (nothing when a is not admitted): its runner limit out of force, its bytes
 * free for the next waiter, who is woken; a->crowded says whether it shared the node. Takes
 * the lock. */
void loom__hmm_admit_end(loom_mem_manager *m, int32_t node, loom__hmm_admission *a);

/* ---- the pool (hmm_pool.c) ------------------------------------------------------------- */

/* The size class of a request on a node: 256 bytes at least, then four classes per power of
 * two (x1, x1.25, x1.5, x1.75), so at most 25% is lost; exactly `bytes` rounded to 256 when
 * the class would pass the node's largest allocation. */
int64_t loom__hmm_size_class(int64_t bytes, int64_t max_alloc);
/* Takes a cached allocation of exactly this storage and class. */
bool loom__hmm_pool_take(loom_mem_manager *m, loom__hmm_node *n, loom_mem_storage storage, int64_t bytes,
                         loom__hmm_alloc *out);
/* Caches an allocation that was live (or frees it when the pool may not keep it). */
void loom__hmm_pool_put(loom_mem_manager *m, loom__hmm_node *n, loom__hmm_alloc *a);
/* Frees the oldest cached allocation; false when the pool is empty. */
bool loom__hmm_pool_release_one(loom_mem_manager *m, loom__hmm_node *n);
void loom__hmm_pool_trim(loom_mem_manager *m, loom__hmm_node *n);
/* The most bytes the node's pool may keep: the manager's pool_max, else half the node's
 * limit, or all of it while a runner limit is in force (the stage's executor then fits the
 * pool to its meter, loom__hmm_pool_fit). */
int64_t loom__hmm_pool_max(const loom_mem_manager *m, const loom__hmm_node *n);

/* ---- fault injection (hmm_inject.c) ---------------------------------------------------- */

/* OUT_OF_MEMORY, as a device refusing `bytes` on n, where loom_testing_fail_node_allocations
 * says this allocation fails; else LOOM_OK. Counts the allocation when n is the node named. */
loom_status loom__hmm_injected_refusal(const loom__hmm_node *n, int64_t bytes);

/* ---- stats and trace ------------------------------------------------------------------- */

/* Counts a live allocation of `bytes` on the node (in_use and live up, peaks). */
void loom__hmm_count_alloc(loom__hmm_node *n, int64_t bytes, bool pool_hit);
/* Counts a live allocation going away (to_pool: into the pool, whose entry is added by
 * loom__hmm_pool_put itself; else freed). */
void loom__hmm_count_free(loom__hmm_node *n, int64_t bytes, bool to_pool);

/* Records an event when tracing (never fails: a lost event is counted in trace.dropped). */
void loom__hmm_trace_instant(loom_mem_manager *m, const char *name, int32_t node, const loom_buffer *b,
                             int64_t bytes);
void loom__hmm_trace_span(loom_mem_manager *m, const char *name, int32_t node, int32_t other,
                          const loom_buffer *b, int64_t bytes, double start);
void loom__hmm_trace_deinit(loom__hmm_trace *t);
/* For the executor: records a span (a kernel, a stage) that began at `start` (loom__now())
 * and ends now, drawn in node's process. `name` is kept by pointer: a static string. Takes
 * the manager's lock. */
void loom__hmm_trace_event(loom_mem_manager *m, const char *name, int32_t node, double start);

/* ---- for the runtime ------------------------------------------------------------------ */

/* Makes a manager over the devices of a context's table (which must outlive it), as
 * loom_mem_manager_create does for the context (runtime/memory.c). Errors: as
 * loom_mem_manager_create. */
loom_status loom__hmm_create(const loom__devices *devices, const loom_mem_manager_options *opts,
                             loom_mem_manager **out_manager);

/* ---- for the executor (runtime/exec.c) --------------------------------------------------- */

/* Ends an access as loom_buffer_release does, without waiting for the device: for device work
 * the caller enqueued on the HMM's own in-order queue of that node (loom__hmm_opencl_queue),
 * which every later command of the HMM on the node (copies, reuse from the pool, frees)
 * follows anyway. Takes the manager's lock. Errors: as loom_buffer_release. */
loom_status loom__buffer_release_queued(loom_buffer *b, const loom_mem_handle *handle);

/* Frees buffer b as loom_buffer_free does but hands its host memory to the caller instead of
 * freeing it: *out_ptr then holds b's data, owned by the caller (free it with
 * loom__aligned_free; a run's result becomes a loom_tensor so, with no copy). Only where b's
 * one copy is a host allocation from loom__aligned_alloc (not NUMA-bound) of at least `bytes`,
 * with no access or map outstanding; otherwise returns false and b is unchanged. The node
 * counts the memory as freed. Takes the manager's lock. */
bool loom__buffer_take_host(loom_buffer *b, int64_t bytes, void **out_ptr);

/* Writes host memory at src into the buffer as loom_buffer_write does (into its most recently
 * used valid copy, the allocation node's for a new buffer, every other copy invalidated), but
 * queued on that node's in-order queue without waiting where its backend can (forget): the
 * caller keeps src unchanged and alive until it synchronizes the node, and the work it queues
 * there after this call sees the data. Elsewhere it is loom_buffer_write. Takes the lock.
 * Errors: as loom_buffer_write. */
loom_status loom__buffer_write_queued(loom_buffer *b, int64_t offset, const void *src, int64_t bytes);

/* Writes host memory at src into the buffer as loom__buffer_write_queued does, but where its
 * node's backend has a transfer queue (write_ahead; unless LOOM_WRITE_AHEAD=0 was set when
 * the manager was made) the copy runs there, beside the work
 * queued on the node's queue after this call: it waits only for the work queued there
 * before (which may still read the buffer's old contents). The copy stays pending on the
 * buffer until loom__buffer_join orders the node's queue behind it; anything else the HMM
 * does with the buffer meanwhile (a read, an access, a free) waits for it on the host. The
 * buffer must not be in use (acquired). The caller keeps src unchanged and alive until it
 * synchronizes the node. Takes the lock. Errors: as loom_buffer_write. */
loom_status loom__buffer_write_ahead(loom_buffer *b, int64_t offset, const void *src, int64_t bytes);

/* Orders the work queued on the node's queue after this call behind the buffer's pending
 * loom__buffer_write_ahead, the host waiting for nothing; nothing to do when none is
 * pending. Takes the lock. Errors: the backend's (the copy has then been waited for). */
loom_status loom__buffer_join(loom_buffer *b);

/* Makes a buffer of `bytes` (a multiple of dtype's size, at most the allocation's) whose copy
 * on `node` is the caller's memory `alloc` (external set here), owner of its contents: pinned
 * there for good (never evicted or moved; other copies come and go as for any buffer), never
 * freed by the HMM and not counted against the node's limit. The caller keeps the memory alive
 * until loom_buffer_free(*out_buffer). Takes the lock. Errors: INVALID_ARGUMENT (node out of
 * range, bad dtype or size), OUT_OF_MEMORY (the buffer's record). */
loom_status loom__buffer_wrap(loom_mem_manager *m, int32_t node, int64_t bytes, loom_dtype dtype,
                              const loom__hmm_alloc *alloc, loom_buffer **out_buffer);

/* Releases the oldest cached allocations of a node's pool until it caches at most `max_cached`
 * bytes (none when max_cached <= 0), not counting and keeping one allocation of exactly
 * `keep_bytes` if there is one (the one the caller's next allocation will reuse; -1: none).
 * The executor calls it to keep the bytes a stage holds, its share of the pool included,
 * under the stage's limit. Takes the manager's lock. */
void loom__hmm_pool_fit(loom_mem_manager *m, int32_t node, int64_t max_cached, int64_t keep_bytes);

/* Writes every node's counters as loom_mem_stats_json does, as one value of the JSON being
 * written by j ({"nodes": [{"id": ..., ...}]}), for tools that embed them. Takes the lock. */
struct loom__json;
void loom__hmm_stats_write(const loom_mem_manager *m, struct loom__json *j);

/* Gives buffer b the tensor type `type` (valid, of b's bytes) and its dtype, as
 * loom_buffer_set_type does without its checks: a run's result, whose buffer the executor
 * allocated as raw bytes, becomes the caller's typed buffer. Takes the lock. */
void loom__buffer_type_set(loom_buffer *b, const loom_type *type);

/* Tests: pretend no device has clEnqueueSVMMigrateMem, to exercise the copy fallback. */
void loom__hmm_testing_disable_svm_migrate(loom_mem_manager *m);

#endif
