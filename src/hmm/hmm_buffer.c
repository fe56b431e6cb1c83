/* The public buffer calls: each validates its arguments, takes the manager's lock, waits for
 * the buffer's pending asynchronous copies, and hands the work to hmm_residency.c. */
#include <string.h>

#include "hmm/hmm.h"

#define KNOWN_FLAGS                                                                        \
  (LOOM_MEM_PINNED | LOOM_MEM_DEVICE_LOCAL | LOOM_MEM_HOST_VISIBLE | LOOM_MEM_SVM_COARSE | \
   LOOM_MEM_SVM_FINE | LOOM_MEM_READ_MOSTLY | LOOM_MEM_EXACT_SIZE)
#define KNOWN_ACCESS (LOOM_ACCESS_READ | LOOM_ACCESS_WRITE | LOOM_ACCESS_DISCARD)

static loom_status check_node(const loom_mem_manager *m, int32_t node, const char *fn) {
  if (node < 0 || node >= m->node_count)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: node %d out of range (%d memory nodes)", fn, (int)node,
                       (int)m->node_count);
  return LOOM_OK;
}

LOOM_HOT static loom_status check_access(uint32_t access, const char *fn) {
  if (access & ~(uint32_t)KNOWN_ACCESS)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: unknown access flags 0x%x", fn,
                       access & ~(uint32_t)KNOWN_ACCESS);
  if (!(access & (LOOM_ACCESS_READ | LOOM_ACCESS_WRITE)))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: access needs LOOM_ACCESS_READ or LOOM_ACCESS_WRITE",
                       fn);
  if ((access & LOOM_ACCESS_DISCARD) && !(access & LOOM_ACCESS_WRITE))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: LOOM_ACCESS_DISCARD needs LOOM_ACCESS_WRITE", fn);
  return LOOM_OK;
}

/* ---- allocate and free ---------------------------------------------------------------------- */

LOOM_HOT static loom_status check_allocate(const loom_mem_manager *m, int64_t bytes, loom_dtype dtype,
                                           int32_t node, uint32_t flags) {
  const char *fn = "loom_buffer_allocate";
  loom_status s = check_node(m, node, fn);
  if (s != LOOM_OK) return s;
  int64_t elem = loom_dtype_size(dtype);
  if (elem <= 0) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: dtype %d out of range", fn, (int)dtype);
  if (bytes < 0 || bytes % elem != 0)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %lld bytes is not a whole number of %s elements", fn,
                       (long long)bytes, loom_dtype_name(dtype));
  if (flags & ~(uint32_t)KNOWN_FLAGS)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: unknown flags 0x%x", fn,
                       flags & ~(uint32_t)KNOWN_FLAGS);
  if ((flags & LOOM_MEM_SVM_COARSE) && (flags & LOOM_MEM_SVM_FINE))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "%s: LOOM_MEM_SVM_COARSE and LOOM_MEM_SVM_FINE exclude each other", fn);
  const loom__hmm_node *n = &m->nodes[node];
  if ((flags & LOOM_MEM_EXACT_SIZE) && bytes == 0 && n->kind == LOOM_MEMORY_DEVICE)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "%s: LOOM_MEM_EXACT_SIZE with 0 bytes on %s (devices refuse empty buffers)", fn,
                       n->id);
  loom_mem_storage want = flags & LOOM_MEM_SVM_FINE     ? LOOM_MEM_STORAGE_SVM_FINE
                          : flags & LOOM_MEM_SVM_COARSE ? LOOM_MEM_STORAGE_SVM_COARSE
                                                        : LOOM_MEM_STORAGE_NONE;
  if (want != LOOM_MEM_STORAGE_NONE && n->kind == LOOM_MEMORY_DEVICE &&
      !(n->storages & LOOM_MEM_STORAGE_BIT(want)))
    return loom__error(LOOM_ERR_UNSUPPORTED, "%s: %s offers no %s-grained SVM", fn, n->id,
                       want == LOOM_MEM_STORAGE_SVM_FINE ? "fine" : "coarse");
  return LOOM_OK;
}

static void link_buffer(loom_mem_manager *m, loom_buffer *b) {
  b->next = m->buffers;
  if (m->buffers) m->buffers->prev = b;
  m->buffers = b;
}

static void unlink_buffer(loom_mem_manager *m, loom_buffer *b) {
  if (b->prev)
    b->prev->next = b->next;
  else
    m->buffers = b->next;
  if (b->next) b->next->prev = b->prev;
  b->prev = b->next = NULL;
}

/* A freed buffer's record is kept for the next allocation, up to SPARE_MAX of them: a calloc
 * and a free per buffer were a sixth of a small op's cost in the executor, which allocates a
 * buffer per value (loom-bench overhead). Records hold no memory of any node, so neither the
 * limits nor the stats count them; loom_mem_trim gives them back. */
enum { SPARE_MAX = 32 };

static size_t record_size(const loom_mem_manager *m) {
  return sizeof(loom_buffer) + (size_t)m->node_count * sizeof(loom__hmm_copy);
}

/* A zeroed record, a spare or a new one (NULL: out of memory). Called and returns with the
 * lock held; it is let go while a new record is allocated. */
static loom_buffer *record_take(loom_mem_manager *m) {
  loom_buffer *b = m->spares;
  if (b) {
    m->spares = b->next;
    m->spare_count--;
    memset(b, 0, record_size(m));
    return b;
  }
  loom__hmm_unlock(m);
  b = loom__calloc(1, record_size(m));
  loom__hmm_lock(m);
  return b;
}

/* Keeps a record of a freed buffer (lock held); false when the caller must free it. */
static bool record_keep(loom_mem_manager *m, loom_buffer *b) {
  if (m->spare_count >= SPARE_MAX) return false;
  b->next = m->spares;
  m->spares = b;
  m->spare_count++;
  return true;
}

void loom__hmm_spares_free(loom_mem_manager *m) {
  while (m->spares) {
    loom_buffer *b = m->spares;
    m->spares = b->next;
    loom__free(b);
  }
  m->spare_count = 0;
}

static void apply_default_advice(const loom_mem_manager *m, loom_buffer *b) {
  if (m->advice == LOOM_MEM_ADVISE_READ_MOSTLY) b->read_mostly = true;
  if (m->advice == LOOM_MEM_ADVISE_PREFERRED_LOCATION) b->preferred = b->node;
  if (m->advice == LOOM_MEM_ADVISE_ACCESSED_BY) b->accessed_by = ~UINT64_C(0);
}

/* A record for a new buffer of the manager, its fields common to every kind set (a pinned one
 * starts with its one pin), or NULL when none could be had. Under the manager's lock. */
LOOM_HOT static loom_buffer *record_start(loom_mem_manager *m, int64_t bytes, loom_dtype dtype, int32_t node,
                                          uint32_t flags) {
  loom_buffer *b = record_take(m);
  if (!b) return NULL;
  b->m = m;
  b->bytes = bytes;
  b->dtype = dtype;
  b->flags = flags;
  b->node = node;
  b->pins = flags & LOOM_MEM_PINNED ? 1 : 0;
  b->mode = m->mode;
  b->id = ++m->next_id;
  return b;
}

LOOM_HOT loom_status loom_buffer_allocate(loom_mem_manager *m, int64_t bytes, loom_dtype dtype, int32_t node,
                                          uint32_t flags, loom_buffer **out_buffer) {
  if (!out_buffer) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_buffer_allocate: out_buffer is NULL");
  *out_buffer = NULL;
  if (!m) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_buffer_allocate: manager is NULL");
  loom_status s = check_allocate(m, bytes, dtype, node, flags);
  if (s != LOOM_OK) return s;
  loom__hmm_lock(m);
  loom_buffer *b = record_start(m, bytes, dtype, node, flags);
  if (!b) {
    loom__hmm_unlock(m);
    return loom__oom("a buffer");
  }
  b->preferred = -1;
  b->read_mostly = flags & LOOM_MEM_READ_MOSTLY;
  apply_default_advice(m, b);
  s = loom__hmm_copy_alloc(m, b, node);
  if (s == LOOM_OK) {
    b->copy[node].state = LOOM_MEM_OWNER;
    link_buffer(m, b);
  }
  bool kept = s != LOOM_OK && record_keep(m, b);
  loom__hmm_unlock(m);
  if (s != LOOM_OK) {
    loom__error_prefix("loom_buffer_allocate: ");
    if (!kept) loom__free(b);
    return s;
  }
  *out_buffer = b;
  return LOOM_OK;
}

loom_status loom__buffer_wrap(loom_mem_manager *m, int32_t node, int64_t bytes, loom_dtype dtype,
                              const loom__hmm_alloc *alloc, loom_buffer **out_buffer) {
  *out_buffer = NULL;
  loom_status s = check_allocate(m, bytes, dtype, node, 0);
  if (s != LOOM_OK) return s;
  if (bytes > alloc->bytes)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "wrapping memory of %lld bytes as a buffer of %lld bytes",
                       (long long)alloc->bytes, (long long)bytes);
  loom__hmm_lock(m);
  loom_buffer *b = record_start(m, bytes, dtype, node, LOOM_MEM_PINNED);
  if (!b) {
    loom__hmm_unlock(m);
    return loom__oom("a buffer");
  }
  b->preferred = node;
  b->wrapped = true;
  loom__hmm_copy *c = &b->copy[node];
  c->alloc = *alloc;
  c->alloc.external = true;
  c->state = LOOM_MEM_OWNER;
  c->last_use = loom__hmm_tick(m);
  link_buffer(m, b);
  loom__hmm_trace_instant(m, "wrap", node, b, bytes);
  loom__hmm_unlock(m);
  *out_buffer = b;
  return LOOM_OK;
}

LOOM_HOT void loom_buffer_free(loom_buffer *b) {
  if (!b) return;
  loom_mem_manager *m = b->m;
  loom__hmm_lock(m);
  loom__hmm_settle(m, b);
  /* A buffer freed while mapped (a caller's bug) still gives back everything it holds. */
  while (b->maps) {
    loom__hmm_map *map = b->maps;
    b->maps = map->next;
    if (map->handle.host_mapped_) {
      loom__hmm_node *n = &m->nodes[map->handle.node];
      n->backend->unmap(n, &b->copy[map->handle.node].alloc, map->handle.ptr);
    }
    loom__free(map);
  }
  /* A wrapped copy is the caller's memory: nothing to give back. */
  if (b->wrapped) memset(&b->copy[b->node].alloc, 0, sizeof b->copy[b->node].alloc);
  for (int32_t i = 0; i < m->node_count; i++) {
    b->copy[i].in_use = 0;
    loom__hmm_copy_drop(m, b, i, true);
  }
  unlink_buffer(m, b);
  bool kept = record_keep(m, b);
  loom__hmm_unlock(m);
  if (!kept) loom__free(b);
}

bool loom__buffer_take_host(loom_buffer *b, int64_t bytes, void **out_ptr) {
  *out_ptr = NULL;
  if (!b) return false;
  loom_mem_manager *m = b->m;
  loom__hmm_lock(m);
  loom__hmm_settle(m, b);
  int32_t holder = -1, copies = 0;
  for (int32_t i = 0; i < m->node_count; i++)
    if (b->copy[i].alloc.storage != LOOM_MEM_STORAGE_NONE) holder = i, copies++;
  loom__hmm_copy *c = holder >= 0 ? &b->copy[holder] : NULL;
  if (copies != 1 || b->maps || c->in_use || c->event ||
      m->nodes[holder].backend != &loom__hmm_host_backend || c->alloc.storage != LOOM_MEM_STORAGE_HOST ||
      c->alloc.bound || c->alloc.bytes < bytes) {
    loom__hmm_unlock(m);
    return false;
  }
  loom__hmm_trace_instant(m, "free", holder, b, c->alloc.bytes);
  loom__hmm_count_free(&m->nodes[holder], c->alloc.bytes, false);
  *out_ptr = c->alloc.ptr;
  memset(&c->alloc, 0, sizeof c->alloc); /* the drop below then frees nothing */
  loom__hmm_copy_drop(m, b, holder, false);
  unlink_buffer(m, b);
  bool kept = record_keep(m, b);
  loom__hmm_unlock(m);
  if (!kept) loom__free(b);
  return true;
}

/* ---- host access ---------------------------------------------------------------------------- */

loom_status loom_buffer_map(loom_buffer *b, uint32_t access, void **out_ptr) {
  if (!out_ptr) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_buffer_map: out_ptr is NULL");
  *out_ptr = NULL;
  if (!b) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_buffer_map: buffer is NULL");
  loom_status s = check_access(access, "loom_buffer_map");
  if (s != LOOM_OK) return s;
  loom__hmm_map *map = loom__calloc(1, sizeof *map);
  if (!map) return loom__oom("a buffer map");
  loom_mem_manager *m = b->m;
  loom__hmm_lock(m);
  loom__hmm_settle(m, b);
  int32_t host = loom__hmm_host_of(b);
  loom__hmm_plan plan;
  loom__hmm_plan_access(m, b, host, access, LOOM__HMM_INTENT_MAP, &plan);
  s = loom__hmm_check_conflict(b, plan.target, access, "loom_buffer_map");
  if (s == LOOM_OK) s = loom__hmm_access_begin(m, b, host, access, &plan, &map->handle);
  if (s == LOOM_OK) {
    /* A map keeps its copy: a temporary copy someone else made becomes persistent. */
    b->copy[plan.target].temporary = false;
    map->next = b->maps;
    b->maps = map;
    *out_ptr = map->handle.ptr;
  }
  loom__hmm_unlock(m);
  if (s != LOOM_OK) loom__free(map);
  return s;
}

loom_status loom_buffer_unmap(loom_buffer *b, void *ptr) {
  if (!b) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_buffer_unmap: buffer is NULL");
  loom_mem_manager *m = b->m;
  loom__hmm_lock(m);
  loom__hmm_map **link = &b->maps;
  while (*link && (*link)->handle.ptr != ptr) link = &(*link)->next;
  loom__hmm_map *map = *link;
  loom_status s;
  if (!map) {
    s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_buffer_unmap: %p is not a mapping of buffer %llu", ptr,
                    (unsigned long long)b->id);
  } else {
    *link = map->next;
    s = loom__hmm_access_end(m, b, &map->handle, true);
  }
  loom__hmm_unlock(m);
  loom__free(map);
  return s;
}

static loom_status check_range(const loom_buffer *b, int64_t offset, const void *p, int64_t bytes,
                               const char *fn) {
  if (!p && bytes > 0) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: NULL host pointer", fn);
  if (offset < 0 || bytes < 0 || offset > b->bytes || bytes > b->bytes - offset)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "%s: range [%lld, +%lld) is outside the buffer's %lld bytes", fn, (long long)offset,
                       (long long)bytes, (long long)b->bytes);
  return LOOM_OK;
}

/* A device's copy is read by a blocking read on the device's in-order queue, which first waits
 * for every kernel queued there. Under the manager's lock that wait would hold up every other
 * thread's buffers on every node (two devices fed by two threads, loom/share.h, would take
 * turns), so the queue of the copy read is drained first, outside the lock; the read under it
 * then only moves the bytes. An error of the drain shows again at the read. */
static void drain_source(loom_mem_manager *m, loom_buffer *b) {
  loom__hmm_lock(m);
  loom__hmm_settle(m, b);
  int32_t src = loom__hmm_valid_source(b, -1);
  loom__hmm_node *n = src >= 0 ? &m->nodes[src] : NULL;
  bool device = n && n->kind == LOOM_MEMORY_DEVICE && n->backend->finish;
  loom__hmm_unlock(m);
  if (device) (void)n->backend->finish(n);
}

loom_status loom_buffer_read(loom_buffer *b, int64_t offset, void *dst, int64_t bytes) {
  if (!b) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_buffer_read: buffer is NULL");
  loom_status s = check_range(b, offset, dst, bytes, "loom_buffer_read");
  if (s != LOOM_OK || bytes == 0) return s;
  loom_mem_manager *m = b->m;
  drain_source(m, b);
  loom__hmm_lock(m);
  loom__hmm_settle(m, b);
  int32_t src = loom__hmm_valid_source(b, -1);
  s = loom__hmm_check_conflict(b, src, LOOM_ACCESS_READ, "loom_buffer_read");
  if (s == LOOM_OK && b->copy[src].writers > 0)
    s = loom__error(LOOM_ERR_UNAVAILABLE, "loom_buffer_read: buffer %llu is being written on %s",
                    (unsigned long long)b->id, m->nodes[src].id);
  if (s == LOOM_OK) {
    loom__hmm_node *n = &m->nodes[src];
    double start = loom__now();
    s = n->backend->read(n, &b->copy[src].alloc, offset, dst, bytes);
    if (s == LOOM_OK && n->kind == LOOM_MEMORY_DEVICE) n->stats.bytes_out += bytes;
    if (s == LOOM_OK) loom__hmm_trace_span(m, "read", src, -1, b, bytes, start);
  }
  loom__hmm_unlock(m);
  return s;
}

/* The copy a write goes into: the most recently used valid one. */
static int32_t write_target(const loom_buffer *b) {
  int32_t best = -1;
  for (int32_t i = 0; i < b->m->node_count; i++) {
    const loom__hmm_copy *c = &b->copy[i];
    if (c->state == LOOM_MEM_INVALID || c->temporary) continue;
    if (best < 0 || c->last_use > b->copy[best].last_use) best = i;
  }
  return best;
}

/* loom_buffer_write and its queued form: into the copy writes go to, which becomes the only
 * valid one. */
typedef enum write_mode { WRITE_BLOCKING, WRITE_QUEUED, WRITE_AHEAD } write_mode;

static loom_status write_locked(loom_buffer *b, int64_t offset, const void *src, int64_t bytes,
                                write_mode mode, const char *what) {
  loom_mem_manager *m = b->m;
  loom__hmm_settle(m, b);
  int32_t t = write_target(b);
  loom_status s = t < 0 ? loom__error(LOOM_ERR_INTERNAL, "%s: buffer %llu has no valid copy", what,
                                      (unsigned long long)b->id)
                        : loom__hmm_check_conflict(b, t, LOOM_ACCESS_WRITE, what);
  if (s == LOOM_OK && b->copy[t].in_use > 0)
    s = loom__error(LOOM_ERR_UNAVAILABLE, "%s: buffer %llu is in use on %s", what, (unsigned long long)b->id,
                    m->nodes[t].id);
  if (s != LOOM_OK) return s;
  loom__hmm_node *n = &m->nodes[t];
  double start = loom__now();
  void *event = NULL;
  if (mode == WRITE_AHEAD && n->backend->write_ahead && n->backend->join && !m->no_write_ahead) {
    /* left pending on the copy: loom__buffer_join, or settle, takes it */
    s = n->backend->write_ahead(n, &b->copy[t].alloc, offset, src, bytes, &event);
    b->copy[t].event = s == LOOM_OK ? event : NULL;
  } else {
    bool queued = mode != WRITE_BLOCKING && n->backend->forget;
    s = n->backend->write(n, &b->copy[t].alloc, offset, src, bytes, queued ? &event : NULL);
    if (event) n->backend->forget(n, event);
  }
  if (s != LOOM_OK) return s;
  if (n->kind == LOOM_MEMORY_DEVICE) n->stats.bytes_in += bytes;
  loom__hmm_trace_span(m, "write", t, -1, b, bytes, start);
  b->copy[t].last_use = loom__hmm_tick(m);
  loom__hmm_invalidate_others(m, b, t);
  return LOOM_OK;
}

static loom_status write_entry(loom_buffer *b, int64_t offset, const void *src, int64_t bytes,
                               write_mode mode, const char *what) {
  if (!b) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: buffer is NULL", what);
  loom_status s = check_range(b, offset, src, bytes, what);
  if (s != LOOM_OK || bytes == 0) return s;
  loom__hmm_lock(b->m);
  s = write_locked(b, offset, src, bytes, mode, what);
  loom__hmm_unlock(b->m);
  return s;
}

loom_status loom_buffer_write(loom_buffer *b, int64_t offset, const void *src, int64_t bytes) {
  return write_entry(b, offset, src, bytes, WRITE_BLOCKING, "loom_buffer_write");
}

loom_status loom__buffer_write_queued(loom_buffer *b, int64_t offset, const void *src, int64_t bytes) {
  return write_entry(b, offset, src, bytes, WRITE_QUEUED, "loom__buffer_write_queued");
}

loom_status loom__buffer_write_ahead(loom_buffer *b, int64_t offset, const void *src, int64_t bytes) {
  return write_entry(b, offset, src, bytes, WRITE_AHEAD, "loom__buffer_write_ahead");
}

loom_status loom__buffer_join(loom_buffer *b) {
  if (!b) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom__buffer_join: buffer is NULL");
  loom_mem_manager *m = b->m;
  loom_status s = LOOM_OK;
  loom__hmm_lock(m);
  for (int32_t i = 0; i < m->node_count; i++) {
    loom__hmm_copy *c = &b->copy[i];
    if (!c->event) continue;
    loom__hmm_node *n = &m->nodes[i];
    loom_status j = n->backend->join ? n->backend->join(n, c->event) : LOOM_OK;
    if (!n->backend->join) n->backend->wait(n, c->event);
    c->event = NULL;
    if (j != LOOM_OK && s == LOOM_OK) s = j;
  }
  loom__hmm_unlock(m);
  return s;
}

/* ---- device access ---------------------------------------------------------------------------- */

LOOM_HOT loom_status loom_buffer_acquire(loom_buffer *b, int32_t node, uint32_t access,
                                         loom_mem_handle *out_handle) {
  if (!out_handle) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_buffer_acquire: out_handle is NULL");
  memset(out_handle, 0, sizeof *out_handle);
  if (!b) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_buffer_acquire: buffer is NULL");
  loom_mem_manager *m = b->m;
  loom_status s = check_node(m, node, "loom_buffer_acquire");
  if (s == LOOM_OK) s = check_access(access, "loom_buffer_acquire");
  if (s != LOOM_OK) return s;
  loom__hmm_lock(m);
  loom__hmm_settle(m, b);
  loom__hmm_plan plan;
  loom__hmm_plan_access(m, b, node, access, LOOM__HMM_INTENT_ACQUIRE, &plan);
  s = loom__hmm_check_conflict(b, plan.target, access, "loom_buffer_acquire");
  if (s == LOOM_OK) s = loom__hmm_access_begin(m, b, node, access, &plan, out_handle);
  loom__hmm_unlock(m);
  return s;
}

LOOM_HOT static loom_status release(loom_buffer *b, const loom_mem_handle *handle, bool wait,
                                    const char *fn) {
  if (!b || !handle)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: NULL %s", fn, b ? "handle" : "buffer");
  loom_mem_manager *m = b->m;
  if (handle->node < 0 || handle->node >= m->node_count || handle->from_node_ < 0 ||
      handle->from_node_ >= m->node_count)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: the handle is not from loom_buffer_acquire", fn);
  loom__hmm_lock(m);
  loom_status s = loom__hmm_access_end(m, b, handle, wait);
  loom__hmm_unlock(m);
  return s;
}

loom_status loom_buffer_release(loom_buffer *b, const loom_mem_handle *handle) {
  return release(b, handle, true, "loom_buffer_release");
}

loom_status loom__buffer_release_queued(loom_buffer *b, const loom_mem_handle *handle) {
  return release(b, handle, false, "loom__buffer_release_queued");
}

loom_status loom_buffer_pin(loom_buffer *b) {
  if (!b) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_buffer_pin: buffer is NULL");
  loom__hmm_lock(b->m);
  b->pins++;
  loom__hmm_unlock(b->m);
  return LOOM_OK;
}

loom_status loom_buffer_unpin(loom_buffer *b) {
  if (!b) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_buffer_unpin: buffer is NULL");
  loom__hmm_lock(b->m);
  loom_status s = LOOM_OK;
  if (b->pins <= (b->wrapped ? 1 : 0))
    s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_buffer_unpin: buffer %llu is not pinned%s",
                    (unsigned long long)b->id,
                    b->wrapped ? " (beyond the pin of the caller's memory it wraps)" : "");
  else
    b->pins--;
  loom__hmm_unlock(b->m);
  return s;
}

/* ---- tensor types ------------------------------------------------------------------------------- */

void loom__buffer_type_set(loom_buffer *b, const loom_type *type) {
  loom__hmm_lock(b->m);
  b->type = *type;
  b->dtype = type->dtype;
  b->typed = true;
  loom__hmm_unlock(b->m);
}

loom_status loom_buffer_set_type(loom_buffer *b, const loom_type *type) {
  if (!b || !type) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_buffer_set_type: NULL argument");
  loom_type check;
  int64_t bytes = 0;
  loom_status s = loom_type_make(type->dtype, type->rank, type->dims, &check);
  if (!s) s = loom_type_bytes(&check, &bytes);
  if (s) {
    loom__error_prefix("loom_buffer_set_type: ");
    return s;
  }
  char buf[LOOM_TYPE_STRING_MAX];
  if (bytes != b->bytes) /* b->bytes never changes: read without the lock */
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "loom_buffer_set_type: %s takes %lld bytes, buffer %llu holds %lld",
                       loom_type_format(&check, buf, sizeof buf), (long long)bytes, (unsigned long long)b->id,
                       (long long)b->bytes);
  loom__buffer_type_set(b, &check);
  return LOOM_OK;
}

loom_status loom_buffer_get_type(const loom_buffer *b, loom_type *out_type, bool *out_typed) {
  if (out_typed) *out_typed = false;
  if (out_type) memset(out_type, 0, sizeof *out_type);
  if (!b || !out_type) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_buffer_get_type: NULL argument");
  loom__hmm_lock(b->m);
  if (b->typed) {
    *out_type = b->type;
  } else {
    int64_t n = b->bytes / loom_dtype_size(b->dtype);
    loom_type_make(b->dtype, 1, &n, out_type);
  }
  if (out_typed) *out_typed = b->typed;
  loom__hmm_unlock(b->m);
  return LOOM_OK;
}
