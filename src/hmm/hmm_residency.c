/* Residency: a buffer's copies on the memory nodes, their coherence states and the migration
 * policy's decisions.
 *
 * Each copy is INVALID, SHARED or OWNER (StarPU's MSI). The rules:
 * - a buffer always has at least one valid copy (a new buffer's only copy owns undefined
 *   contents);
 * - a write on a node makes its copy the owner and every other copy invalid; an invalid copy
 *   is freed into its node's pool as soon as nobody uses it;
 * - a read on a node without a valid copy makes one, from a valid copy (host memory first,
 *   so a device-to-device copy goes through host memory only when there is no host copy);
 * - when only one valid copy is left it is the owner.
 *
 * An access is first planned (loom__hmm_plan_access: a pure decision), then checked against
 * the accesses outstanding, then carried out, so a refused access changes nothing.
 */
#include <string.h>

#include "hmm/hmm.h"

/* Device-to-device copies go through host memory in chunks of this size. */
#define BOUNCE_BYTES ((int64_t)4 << 20)

static bool is_valid(const loom__hmm_copy *c) {
  return c->state != LOOM_MEM_INVALID;
}

/* Memory a host thread reaches without a copy: OpenCL SVM, and CUDA managed memory (which
 * behaves as fine-grained SVM: coherent once the device's work is done). */
static bool is_svm(loom_mem_storage s) {
  return s == LOOM_MEM_STORAGE_SVM_COARSE || s == LOOM_MEM_STORAGE_SVM_FINE ||
         s == LOOM_MEM_STORAGE_CUDA_MANAGED;
}

LOOM_HOT loom_mem_storage loom__hmm_choose_storage(const loom_mem_manager *m, const loom_buffer *b,
                                                   int32_t node) {
  const loom__hmm_node *n = &m->nodes[node];
  if (n->kind == LOOM_MEMORY_HOST) return LOOM_MEM_STORAGE_HOST;
  bool fine = n->storages & LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_SVM_FINE);
  bool coarse = n->storages & LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_SVM_COARSE);
  /* A CUDA node's device memory and managed memory stand where OpenCL's buffers and
   * fine-grained SVM do. */
  bool managed = n->storages & LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_CUDA_MANAGED);
  loom_mem_storage plain = n->storages & LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_CUDA_DEVICE)
                               ? LOOM_MEM_STORAGE_CUDA_DEVICE
                               : LOOM_MEM_STORAGE_CL_BUFFER;
  loom_mem_storage shared = managed ? LOOM_MEM_STORAGE_CUDA_MANAGED : LOOM_MEM_STORAGE_SVM_FINE;
  if (b->flags & LOOM_MEM_SVM_FINE) return fine ? LOOM_MEM_STORAGE_SVM_FINE : plain;
  if (b->flags & LOOM_MEM_SVM_COARSE) return coarse ? LOOM_MEM_STORAGE_SVM_COARSE : plain;
  if (b->flags & LOOM_MEM_DEVICE_LOCAL) return plain;
  if (b->mode == LOOM_MEM_MODE_MANAGED || (b->flags & LOOM_MEM_HOST_VISIBLE)) {
    if (fine || managed) return shared;
    return coarse ? LOOM_MEM_STORAGE_SVM_COARSE : plain;
  }
  /* auto: shared memory only where it is the device's own memory anyway (PoCL, integrated
   * GPUs) and fine-grained, so neither side pays for maps. */
  if (b->mode == LOOM_MEM_MODE_AUTO && (fine || managed) && n->device && n->device->host_unified)
    return shared;
  return plain;
}

int32_t loom__hmm_valid_count(const loom_buffer *b) {
  int32_t count = 0;
  for (int32_t i = 0; i < b->m->node_count; i++) count += is_valid(&b->copy[i]);
  return count;
}

int32_t loom__hmm_valid_source(const loom_buffer *b, int32_t exclude) {
  int32_t any = -1;
  for (int32_t i = 0; i < b->m->node_count; i++) {
    const loom__hmm_copy *c = &b->copy[i];
    if (i == exclude || !is_valid(c)) continue;
    if (c->alloc.storage == LOOM_MEM_STORAGE_HOST) return i;
    if (any < 0) any = i;
  }
  return any;
}

int32_t loom__hmm_persistent_copy(const loom_buffer *b, int32_t exclude) {
  for (int32_t i = 0; i < b->m->node_count; i++)
    if (i != exclude && is_valid(&b->copy[i]) && !b->copy[i].temporary) return i;
  return -1;
}

/* The last valid copy is the owner. */
static void normalize(loom_buffer *b) {
  int32_t last = -1;
  for (int32_t i = 0; i < b->m->node_count; i++) {
    if (!is_valid(&b->copy[i])) continue;
    if (last >= 0) return;
    last = i;
  }
  if (last >= 0) b->copy[last].state = LOOM_MEM_OWNER;
}

LOOM_HOT void loom__hmm_settle(loom_mem_manager *m, loom_buffer *b) {
  for (int32_t i = 0; i < m->node_count; i++) {
    loom__hmm_copy *c = &b->copy[i];
    if (!c->event) continue;
    m->nodes[i].backend->wait(&m->nodes[i], c->event);
    c->event = NULL;
  }
}

LOOM_HOT loom_status loom__hmm_copy_alloc(loom_mem_manager *m, loom_buffer *b, int32_t node) {
  loom__hmm_node *n = &m->nodes[node];
  loom__hmm_copy *c = &b->copy[node];
  loom_mem_storage storage = loom__hmm_choose_storage(m, b, node);
  if (b->bytes > n->max_alloc) {
    char size[32], max[32];
    n->stats.failed_allocations++;
    return loom__error(
        LOOM_ERR_OUT_OF_MEMORY, "out of memory on %s: %s is more than its largest allocation (%s)", n->id,
        loom__format_bytes(b->bytes, size, sizeof size), loom__format_bytes(n->max_alloc, max, sizeof max));
  }
  int64_t cls = b->flags & LOOM_MEM_EXACT_SIZE ? b->bytes : loom__hmm_size_class(b->bytes, n->max_alloc);
  loom_status refused = loom__hmm_injected_refusal(n, cls);
  if (refused != LOOM_OK) {
    n->stats.failed_allocations++;
    return refused;
  }
  if (!loom__hmm_pool_take(m, n, storage, cls, &c->alloc)) {
    loom_status s = loom__hmm_make_room(m, node, cls, b);
    if (s == LOOM_OK) s = n->backend->alloc(n, storage, cls, &c->alloc);
    if (s == LOOM_ERR_OUT_OF_MEMORY && n->pool.count > 0) {
      /* The device itself is full (its memory is shared with others): give back the pool and
       * try once more. */
      loom__hmm_pool_trim(m, n);
      s = n->backend->alloc(n, storage, cls, &c->alloc);
    }
    if (s != LOOM_OK) {
      memset(&c->alloc, 0, sizeof c->alloc);
      n->stats.failed_allocations++;
      return s;
    }
    loom__hmm_count_alloc(n, cls, false);
    loom__hmm_trace_instant(m, "alloc", node, b, cls);
  }
  c->state = LOOM_MEM_INVALID;
  c->temporary = false;
  c->svm_on_host = false;
  c->last_use = loom__hmm_tick(m);
  loom__hmm_advise_copy(m, b, node); /* a pooled allocation may carry another buffer's */
  return LOOM_OK;
}

LOOM_HOT void loom__hmm_copy_drop(loom_mem_manager *m, loom_buffer *b, int32_t node, bool to_pool) {
  loom__hmm_node *n = &m->nodes[node];
  loom__hmm_copy *c = &b->copy[node];
  if (c->event) {
    n->backend->wait(n, c->event);
    c->event = NULL;
  }
  if (c->alloc.external) {
    /* The caller's memory stays the buffer's (invalid until made valid again), whatever
     * drops it: it is the caller's to free, and the place the caller reads the data. */
    c->state = LOOM_MEM_INVALID;
    normalize(b);
    return;
  }
  if (c->alloc.storage != LOOM_MEM_STORAGE_NONE) {
    int64_t bytes = c->alloc.bytes;
    loom__hmm_trace_instant(m, "free", node, b, bytes);
    if (to_pool) {
      loom__hmm_pool_put(m, n, &c->alloc);
    } else {
      n->backend->free(n, &c->alloc);
      loom__hmm_count_free(n, bytes, false);
    }
  }
  memset(&c->alloc, 0, sizeof c->alloc);
  c->state = LOOM_MEM_INVALID;
  c->temporary = false;
  c->svm_on_host = false;
  normalize(b);
}

/* Device -> device through host memory, a chunk at a time. */
static loom_status bounce(loom__hmm_node *nd, const loom__hmm_alloc *d, loom__hmm_node *ns,
                          const loom__hmm_alloc *s, int64_t bytes) {
  int64_t chunk = LOOM_MIN(bytes, BOUNCE_BYTES);
  void *buf = loom__malloc((size_t)chunk);
  if (!buf) return loom__oom("a staging buffer for a device-to-device copy");
  loom_status st = LOOM_OK;
  for (int64_t off = 0; st == LOOM_OK && off < bytes; off += chunk) {
    int64_t len = LOOM_MIN(chunk, bytes - off);
    st = ns->backend->read(ns, s, off, buf, len);
    if (st == LOOM_OK) st = nd->backend->write(nd, d, off, buf, len, NULL);
  }
  loom__free(buf);
  return st;
}

loom_status loom__hmm_transfer(loom_mem_manager *m, loom_buffer *b, int32_t dst, int32_t src, const char *why,
                               bool async) {
  loom__hmm_node *nd = &m->nodes[dst], *ns = &m->nodes[src];
  loom__hmm_copy *d = &b->copy[dst], *s = &b->copy[src];
  loom__hmm_settle(m, b);
  double start = loom__now();
  loom_status st = LOOM_OK;
  if (b->bytes == 0) {
    /* Nothing to move; OpenCL refuses zero-sized copies. */
  } else if (s->alloc.storage == LOOM_MEM_STORAGE_HOST) {
    st = nd->backend->write(nd, &d->alloc, 0, s->alloc.ptr, b->bytes, async ? &d->event : NULL);
  } else if (d->alloc.storage == LOOM_MEM_STORAGE_HOST) {
    st = ns->backend->read(ns, &s->alloc, 0, d->alloc.ptr, b->bytes);
  } else {
    st = nd->backend == ns->backend && nd->backend->copy
             ? nd->backend->copy(nd, &d->alloc, ns, &s->alloc, b->bytes)
             : LOOM_ERR_UNSUPPORTED;
    if (st == LOOM_OK) nd->stats.peer_bytes_in += b->bytes;
    if (st == LOOM_ERR_UNSUPPORTED) st = bounce(nd, &d->alloc, ns, &s->alloc, b->bytes);
  }
  if (st != LOOM_OK) {
    loom__error_prefix("copying buffer %llu from %s to %s: ", (unsigned long long)b->id, ns->id, nd->id);
    return st;
  }
  ns->stats.bytes_out += b->bytes;
  nd->stats.bytes_in += b->bytes;
  b->copies++;
  b->bytes_moved += b->bytes;
  loom__hmm_trace_span(m, why, dst, src, b, b->bytes, start);
  return LOOM_OK;
}

loom_status loom__hmm_make_valid(loom_mem_manager *m, loom_buffer *b, int32_t node, const char *why,
                                 bool async) {
  loom__hmm_copy *c = &b->copy[node];
  if (is_valid(c)) return LOOM_OK;
  int32_t src = loom__hmm_valid_source(b, node);
  if (src < 0)
    return loom__error(LOOM_ERR_INTERNAL, "buffer %llu has no valid copy (a bug in the HMM)",
                       (unsigned long long)b->id);
  bool made = c->alloc.storage == LOOM_MEM_STORAGE_NONE;
  loom_status s = made ? loom__hmm_copy_alloc(m, b, node) : LOOM_OK;
  if (s == LOOM_OK) s = loom__hmm_transfer(m, b, node, src, why, async);
  if (s != LOOM_OK) {
    if (made) loom__hmm_copy_drop(m, b, node, true);
    return s;
  }
  c->state = LOOM_MEM_SHARED;
  if (b->copy[src].state == LOOM_MEM_OWNER) b->copy[src].state = LOOM_MEM_SHARED;
  return LOOM_OK;
}

/* Allocates the node's copy without contents (a DISCARD write fills it). */
static loom_status make_blank(loom_mem_manager *m, loom_buffer *b, int32_t node) {
  loom__hmm_copy *c = &b->copy[node];
  if (is_valid(c)) return LOOM_OK;
  loom_status s = c->alloc.storage == LOOM_MEM_STORAGE_NONE ? loom__hmm_copy_alloc(m, b, node) : LOOM_OK;
  if (s == LOOM_OK) c->state = LOOM_MEM_SHARED;
  return s;
}

LOOM_HOT void loom__hmm_invalidate_others(loom_mem_manager *m, loom_buffer *b, int32_t node) {
  for (int32_t i = 0; i < m->node_count; i++) {
    loom__hmm_copy *c = &b->copy[i];
    if (i == node) continue;
    c->state = LOOM_MEM_INVALID;
    if (c->alloc.storage != LOOM_MEM_STORAGE_NONE && c->in_use == 0) loom__hmm_copy_drop(m, b, i, true);
  }
  b->copy[node].state = LOOM_MEM_OWNER;
}

/* A move leaves the new copy alone, except where the buffer says to keep the others. */
static void drop_others_for_move(loom_mem_manager *m, loom_buffer *b, int32_t node) {
  if (b->read_mostly || b->pins > 0) return;
  for (int32_t i = 0; i < m->node_count; i++) {
    loom__hmm_copy *c = &b->copy[i];
    if (i == node || i == b->preferred || c->in_use > 0 || c->alloc.storage == LOOM_MEM_STORAGE_NONE)
      continue;
    loom__hmm_copy_drop(m, b, i, true);
  }
  normalize(b);
}

/* ---- planning an access ------------------------------------------------------------------- */

/* Whether the migration policy moves the buffer to node on its nth access from there. */
static bool policy_moves(const loom_mem_manager *m, const loom_buffer *b, int32_t node, int64_t nth) {
  if (b->accessed_by & (UINT64_C(1) << node)) return false;
  switch (m->migration) {
    case LOOM_MEM_POLICY_AGGRESSIVE:
      return true;
    case LOOM_MEM_POLICY_ADAPTIVE:
      return nth >= m->threshold;
    default:
      return false;
  }
}

/* A valid SVM copy, which a host thread can reach directly; -1 when none. */
static int32_t valid_svm(const loom_buffer *b) {
  for (int32_t i = 0; i < b->m->node_count; i++)
    if (is_valid(&b->copy[i]) && is_svm(b->copy[i].alloc.storage)) return i;
  return -1;
}

LOOM_HOT void loom__hmm_plan_access(const loom_mem_manager *m, const loom_buffer *b, int32_t node,
                                    uint32_t access, loom__hmm_intent intent, loom__hmm_plan *out) {
  const loom__hmm_copy *c = &b->copy[node];
  bool host = loom__hmm_is_host(m, node);
  bool moves = intent == LOOM__HMM_INTENT_ACQUIRE && policy_moves(m, b, node, c->accesses + 1);
  memset(out, 0, sizeof *out);
  out->target = node;
  if (is_valid(c)) {
    out->action = LOOM__HMM_LOCAL;
    /* The device's own SVM copy, last touched by the host: moving means migrating pages. */
    out->svm_migrate =
        moves && !host && is_svm(c->alloc.storage) && c->svm_on_host && m->nodes[node].svm_migrate;
    return;
  }
  int32_t svm = host ? valid_svm(b) : -1;
  if (svm >= 0) {
    const loom__hmm_copy *sc = &b->copy[svm];
    if (!moves || sc->svm_on_host || m->nodes[svm].svm_migrate) {
      out->action = LOOM__HMM_DIRECT;
      out->target = svm;
      out->svm_migrate = moves && !sc->svm_on_host;
      return;
    }
    /* No clEnqueueSVMMigrateMem on this device: the move is a real copy into host memory,
     * and counted as one. */
    out->action = LOOM__HMM_MOVE;
    out->fallback_copy = true;
    return;
  }
  if (intent == LOOM__HMM_INTENT_MAP)
    out->action = LOOM__HMM_REPLICATE;
  else
    out->action = moves ? LOOM__HMM_MOVE : LOOM__HMM_TEMPORARY;
  (void)access;
}

LOOM_HOT loom_status loom__hmm_check_conflict(const loom_buffer *b, int32_t target, uint32_t access,
                                              const char *what) {
  const loom_mem_manager *m = b->m;
  for (int32_t i = 0; i < m->node_count; i++) {
    const loom__hmm_copy *c = &b->copy[i];
    if (i == target) continue;
    if (c->writers > 0)
      return loom__error(LOOM_ERR_UNAVAILABLE, "%s: buffer %llu is being written on %s", what,
                         (unsigned long long)b->id, m->nodes[i].id);
    if ((access & LOOM_ACCESS_WRITE) && c->in_use > 0)
      return loom__error(LOOM_ERR_UNAVAILABLE, "%s: buffer %llu cannot be written on %s while %s uses it",
                         what, (unsigned long long)b->id, m->nodes[target].id, m->nodes[i].id);
  }
  return LOOM_OK;
}

/* ---- carrying it out ------------------------------------------------------------------------ */

static void count_migration(loom_mem_manager *m, loom_buffer *b, int32_t node) {
  b->migrations++;
  m->nodes[node].stats.migrations_in++;
  m->nodes[node].stats.bytes_migrated_in += b->bytes;
}

loom_status loom__hmm_svm_migrate(loom_mem_manager *m, loom_buffer *b, int32_t node, bool to_host,
                                  int32_t counted_node, const char *why) {
  loom__hmm_node *n = &m->nodes[node];
  loom__hmm_copy *c = &b->copy[node];
  double start = loom__now();
  loom_status s = n->backend->migrate ? n->backend->migrate(n, &c->alloc, to_host)
                                      : loom__error(LOOM_ERR_UNSUPPORTED, "%s cannot migrate SVM", n->id);
  if (s != LOOM_OK) return s;
  c->svm_on_host = to_host;
  b->bytes_moved += b->bytes;
  m->nodes[counted_node].stats.migrations_in++;
  m->nodes[counted_node].stats.bytes_migrated_in += b->bytes;
  loom__hmm_trace_span(m, why, counted_node, node, b, b->bytes, start);
  return LOOM_OK;
}

/* Makes the plan's target copy hold what the access needs. */
static loom_status prepare_target(loom_mem_manager *m, loom_buffer *b, int32_t node, uint32_t access,
                                  const loom__hmm_plan *p) {
  int32_t t = p->target;
  bool keep_old = !(access & LOOM_ACCESS_DISCARD) || (access & LOOM_ACCESS_READ);
  loom_status s = LOOM_OK;
  switch (p->action) {
    case LOOM__HMM_LOCAL:
    case LOOM__HMM_DIRECT:
      if (p->svm_migrate) {
        s = loom__hmm_svm_migrate(m, b, t, p->action == LOOM__HMM_DIRECT, node, "svm migrate");
        if (s == LOOM_OK) b->migrations++;
      }
      return s;
    case LOOM__HMM_TEMPORARY:
      s = keep_old ? loom__hmm_make_valid(m, b, t, "copy", false) : make_blank(m, b, t);
      if (s == LOOM_OK) b->copy[t].temporary = true;
      return s;
    case LOOM__HMM_MOVE:
      s = keep_old
              ? loom__hmm_make_valid(m, b, t, p->fallback_copy ? "copy (no svm migrate)" : "migrate", false)
              : make_blank(m, b, t);
      if (s == LOOM_OK) count_migration(m, b, t);
      return s;
    case LOOM__HMM_REPLICATE:
      return keep_old ? loom__hmm_make_valid(m, b, t, "copy", false) : make_blank(m, b, t);
  }
  return LOOM_OK;
}

/* Fills the handle; maps SVM for a host thread. */
static loom_status fill_handle(loom_mem_manager *m, loom_buffer *b, int32_t node, uint32_t access, int32_t t,
                               loom_mem_handle *h) {
  loom__hmm_copy *c = &b->copy[t];
  loom__hmm_node *n = &m->nodes[t];
  memset(h, 0, sizeof *h);
  h->storage = c->alloc.storage;
  h->node = t;
  h->bytes = b->bytes;
  h->temporary = c->temporary;
  h->from_node_ = node;
  h->access_ = access;
  h->object = c->alloc.cl_mem;
  h->ptr = c->alloc.ptr;
  if (loom__hmm_is_host(m, node) && !loom__hmm_is_host(m, t)) {
    bool mapped = false;
    if (!n->backend->map) return loom__error(LOOM_ERR_INTERNAL, "%s: no host access to its memory", n->id);
    loom_status s = n->backend->map(n, &c->alloc, access, &h->ptr, &mapped);
    if (s != LOOM_OK) return s;
    h->host_mapped_ = mapped;
  }
  return LOOM_OK;
}

LOOM_HOT loom_status loom__hmm_access_begin(loom_mem_manager *m, loom_buffer *b, int32_t node,
                                            uint32_t access, const loom__hmm_plan *p, loom_mem_handle *out) {
  int32_t t = p->target;
  loom__hmm_copy *c = &b->copy[t];
  bool write = access & LOOM_ACCESS_WRITE;
  loom_status s = prepare_target(m, b, node, access, p);
  if (s == LOOM_OK) s = fill_handle(m, b, node, access, t, out);
  if (s != LOOM_OK) {
    if (c->temporary && c->in_use == 0) loom__hmm_copy_drop(m, b, t, true);
    memset(out, 0, sizeof *out);
    return s;
  }
  if (write && !c->temporary) loom__hmm_invalidate_others(m, b, t);
  if (p->action == LOOM__HMM_MOVE && !write) drop_others_for_move(m, b, t);
  /* Where SVM pages belong: with whoever wrote them last (or where they were migrated). */
  if (write && is_svm(c->alloc.storage)) c->svm_on_host = loom__hmm_is_host(m, node);
  c->in_use++;
  if (write) c->writers++;
  c->last_use = loom__hmm_tick(m);
  b->copy[node].accesses++;
  b->accesses++;
  return LOOM_OK;
}

/* A written temporary copy goes back into a persistent valid copy, which becomes the owner.
 * If it cannot, the temporary copy becomes persistent and the owner, so nothing is lost. */
static loom_status write_back(loom_mem_manager *m, loom_buffer *b, int32_t t) {
  loom__hmm_copy *c = &b->copy[t];
  int32_t w = loom__hmm_persistent_copy(b, t);
  loom_status s = w >= 0 ? loom__hmm_transfer(m, b, w, t, "write back", false) : LOOM_OK;
  if (w >= 0 && s == LOOM_OK) {
    loom__hmm_invalidate_others(m, b, w);
    return LOOM_OK;
  }
  c->temporary = false;
  loom__hmm_invalidate_others(m, b, t);
  return s;
}

LOOM_HOT loom_status loom__hmm_access_end(loom_mem_manager *m, loom_buffer *b, const loom_mem_handle *h,
                                          bool wait) {
  int32_t t = h->node;
  loom__hmm_copy *c = &b->copy[t];
  loom__hmm_node *n = &m->nodes[t];
  if (c->in_use <= 0)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "buffer %llu is not in use on %s",
                       (unsigned long long)b->id, n->id);
  loom_status s = LOOM_OK;
  if (h->host_mapped_)
    s = n->backend->unmap(n, &c->alloc, h->ptr);
  else if (wait && !loom__hmm_is_host(m, h->from_node_) && n->backend->finish)
    s = n->backend->finish(n);
  c->in_use--;
  if (h->access_ & LOOM_ACCESS_WRITE) {
    c->writers--;
    loom_status w = LOOM_OK;
    if (h->temporary && c->temporary)
      w = write_back(m, b, t);
    else if (h->temporary)
      loom__hmm_invalidate_others(m, b, t); /* promoted meanwhile: its write now counts */
    if (s == LOOM_OK) s = w;
  }
  if (c->in_use == 0 && c->alloc.storage != LOOM_MEM_STORAGE_NONE && (c->temporary || !is_valid(c)))
    loom__hmm_copy_drop(m, b, t, true);
  return s;
}
