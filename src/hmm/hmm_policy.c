/* Placing buffers on purpose: prefetch, migrate, advice, prefetch hints from a plan, and
 * what a buffer reports about itself. (The migration policy's per-access decisions are in
 * hmm_residency.c, next to the state machine they drive.) */
#include <string.h>

#include "hmm/hmm.h"

/* As hmm_residency.c's: SVM and CUDA managed memory. */
static bool is_svm(loom_mem_storage s) {
  return s == LOOM_MEM_STORAGE_SVM_COARSE || s == LOOM_MEM_STORAGE_SVM_FINE ||
         s == LOOM_MEM_STORAGE_CUDA_MANAGED;
}

static int32_t valid_svm(const loom_buffer *b) {
  for (int32_t i = 0; i < b->m->node_count; i++)
    if (b->copy[i].state != LOOM_MEM_INVALID && is_svm(b->copy[i].alloc.storage)) return i;
  return -1;
}

static loom_status check_buffer_node(const loom_buffer *b, int32_t node, const char *fn) {
  if (!b) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: buffer is NULL", fn);
  if (node < 0 || node >= b->m->node_count)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: node %d out of range (%d memory nodes)", fn, (int)node,
                       (int)b->m->node_count);
  return LOOM_OK;
}

/* A prefetch under the lock; `async` lets a host->device copy run on. */
static loom_status prefetch_locked(loom_mem_manager *m, loom_buffer *b, int32_t node, bool async,
                                   bool *out_done) {
  loom__hmm_copy *c = &b->copy[node];
  *out_done = false;
  loom__hmm_settle(m, b);
  loom_status s = loom__hmm_check_conflict(b, node, LOOM_ACCESS_READ, "loom_buffer_prefetch");
  if (s != LOOM_OK) return s;
  bool host = loom__hmm_is_host(m, node);
  if (c->state != LOOM_MEM_INVALID) {
    /* Valid already; the device's own SVM copy may still have its pages on the host. */
    if (!host && is_svm(c->alloc.storage) && c->svm_on_host && m->nodes[node].svm_migrate) {
      s = loom__hmm_svm_migrate(m, b, node, false, node, "svm prefetch");
      *out_done = s == LOOM_OK;
    }
    return s;
  }
  int32_t svm = host ? valid_svm(b) : -1;
  if (svm >= 0) {
    /* The host reaches SVM as it is; only its pages can move, where the device can. */
    if (!b->copy[svm].svm_on_host && m->nodes[svm].svm_migrate) {
      s = loom__hmm_svm_migrate(m, b, svm, true, node, "svm prefetch");
      *out_done = s == LOOM_OK;
    }
    return s;
  }
  s = loom__hmm_make_valid(m, b, node, "prefetch", async);
  if (s == LOOM_OK) {
    c->last_use = loom__hmm_tick(m);
    *out_done = true;
  }
  return s;
}

loom_status loom_buffer_prefetch(loom_buffer *b, int32_t node) {
  loom_status s = check_buffer_node(b, node, "loom_buffer_prefetch");
  if (s != LOOM_OK) return s;
  loom_mem_manager *m = b->m;
  loom__hmm_lock(m);
  bool done = false;
  s = prefetch_locked(m, b, node, true, &done);
  if (done) b->prefetches++;
  loom__hmm_unlock(m);
  return s;
}

static loom_status migrate_locked(loom_mem_manager *m, loom_buffer *b, int32_t node) {
  loom__hmm_copy *c = &b->copy[node];
  loom__hmm_settle(m, b);
  int32_t svm = loom__hmm_is_host(m, node) && c->state == LOOM_MEM_INVALID ? valid_svm(b) : -1;
  if (svm >= 0 && m->nodes[svm].svm_migrate) {
    loom_status s = loom__hmm_svm_migrate(m, b, svm, true, node, "svm migrate");
    if (s == LOOM_OK) b->migrations++;
    return s;
  }
  for (int32_t i = 0; i < m->node_count; i++)
    if (i != node && b->copy[i].in_use > 0)
      return loom__error(LOOM_ERR_UNAVAILABLE, "loom_buffer_migrate: buffer %llu is in use on %s",
                         (unsigned long long)b->id, m->nodes[i].id);
  bool moves = c->state == LOOM_MEM_INVALID;
  loom_status s = loom__hmm_make_valid(m, b, node, "migrate", false);
  if (s != LOOM_OK) return s;
  if (moves) {
    b->migrations++;
    m->nodes[node].stats.migrations_in++;
    m->nodes[node].stats.bytes_migrated_in += b->bytes;
  }
  for (int32_t i = 0; i < m->node_count; i++)
    if (i != node) loom__hmm_copy_drop(m, b, i, true);
  c->temporary = false;
  c->state = LOOM_MEM_OWNER;
  c->last_use = loom__hmm_tick(m);
  return LOOM_OK;
}

loom_status loom_buffer_migrate(loom_buffer *b, int32_t node) {
  loom_status s = check_buffer_node(b, node, "loom_buffer_migrate");
  if (s != LOOM_OK) return s;
  loom__hmm_lock(b->m);
  s = migrate_locked(b->m, b, node);
  loom__hmm_unlock(b->m);
  return s;
}

loom_status loom_buffer_advise(loom_buffer *b, loom_mem_advice advice, int32_t node) {
  if (!b) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_buffer_advise: buffer is NULL");
  if (advice < LOOM_MEM_ADVISE_NONE || advice > LOOM_MEM_ADVISE_UNSET_ACCESSED_BY)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_buffer_advise: advice %d out of range", (int)advice);
  bool needs_node = advice == LOOM_MEM_ADVISE_PREFERRED_LOCATION || advice == LOOM_MEM_ADVISE_ACCESSED_BY ||
                    advice == LOOM_MEM_ADVISE_UNSET_ACCESSED_BY;
  if (needs_node) {
    loom_status s = check_buffer_node(b, node, "loom_buffer_advise");
    if (s != LOOM_OK) return s;
  }
  loom__hmm_lock(b->m);
  switch (advice) {
    case LOOM_MEM_ADVISE_READ_MOSTLY:
      b->read_mostly = true;
      break;
    case LOOM_MEM_ADVISE_UNSET_READ_MOSTLY:
      b->read_mostly = false;
      break;
    case LOOM_MEM_ADVISE_PREFERRED_LOCATION:
      b->preferred = node;
      break;
    case LOOM_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
      b->preferred = -1;
      break;
    case LOOM_MEM_ADVISE_ACCESSED_BY:
      b->accessed_by |= UINT64_C(1) << node;
      break;
    case LOOM_MEM_ADVISE_UNSET_ACCESSED_BY:
      b->accessed_by &= ~(UINT64_C(1) << node);
      break;
    default:
      break;
  }
  for (int32_t i = 0; i < b->m->node_count; i++) loom__hmm_advise_copy(b->m, b, i);
  loom__hmm_unlock(b->m);
  return LOOM_OK;
}

LOOM_HOT void loom__hmm_advise_copy(loom_mem_manager *m, loom_buffer *b, int32_t node) {
  loom__hmm_node *n = &m->nodes[node];
  loom__hmm_copy *c = &b->copy[node];
  if (!n->backend->advise || !is_svm(c->alloc.storage)) return;
  loom__hmm_advice advice = {
      .read_mostly = b->read_mostly, .preferred = b->preferred, .accessed_by = b->accessed_by};
  n->backend->advise(n, &c->alloc, &advice);
}

bool loom_buffer_is_managed(const loom_buffer *b) {
  if (!b) return false;
  loom__hmm_lock(b->m);
  bool managed = is_svm(loom__hmm_choose_storage(b->m, b, b->node));
  loom__hmm_unlock(b->m);
  return managed;
}

loom_status loom_buffer_get_info(const loom_buffer *b, loom_buffer_info *out_info) {
  if (!out_info) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_buffer_get_info: out_info is NULL");
  memset(out_info, 0, sizeof *out_info);
  if (!b) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_buffer_get_info: buffer is NULL");
  loom__hmm_lock(b->m);
  out_info->bytes = b->bytes;
  out_info->dtype = b->dtype;
  out_info->mode = b->mode;
  out_info->flags = b->flags;
  out_info->managed = is_svm(loom__hmm_choose_storage(b->m, b, b->node));
  out_info->node = b->node;
  out_info->preferred_node = b->preferred;
  out_info->read_mostly = b->read_mostly;
  out_info->pins = b->pins;
  for (int32_t i = 0; i < b->m->node_count; i++) out_info->pins += b->copy[i].in_use;
  out_info->valid_copies = loom__hmm_valid_count(b);
  out_info->accesses = b->accesses;
  out_info->migrations = b->migrations;
  out_info->prefetches = b->prefetches;
  out_info->copies = b->copies;
  out_info->bytes_moved = b->bytes_moved;
  out_info->evictions = b->evictions;
  loom__hmm_unlock(b->m);
  return LOOM_OK;
}

loom_status loom_buffer_node_info_get(const loom_buffer *b, int32_t node, loom_buffer_node_info *out_info) {
  if (!out_info) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_buffer_node_info_get: out_info is NULL");
  memset(out_info, 0, sizeof *out_info);
  loom_status s = check_buffer_node(b, node, "loom_buffer_node_info_get");
  if (s != LOOM_OK) return s;
  loom__hmm_lock(b->m);
  const loom__hmm_copy *c = &b->copy[node];
  out_info->state = c->state;
  out_info->storage = c->alloc.storage;
  out_info->allocated_bytes = c->alloc.bytes;
  out_info->accesses = c->accesses;
  out_info->accessed_by = (b->accessed_by >> node) & 1;
  out_info->svm_on_host = c->svm_on_host;
  out_info->in_use = c->in_use;
  out_info->temporary = c->temporary;
  loom__hmm_unlock(b->m);
  return LOOM_OK;
}

/* Whether the buffer's copy fits on node without evicting anything (the pool may give back). */
static bool fits_without_eviction(const loom_mem_manager *m, const loom_buffer *b, int32_t node) {
  const loom__hmm_node *n = &m->nodes[node];
  if (b->bytes > n->max_alloc) return false;
  int64_t cls = loom__hmm_size_class(b->bytes, n->max_alloc);
  return n->stats.live_bytes + cls <= n->stats.limit;
}

loom_status loom_mem_prefetch_hint(loom_mem_manager *m, int32_t node, loom_buffer *const *buffers, int32_t n,
                                   int32_t distance, int32_t *out_prefetched) {
  if (out_prefetched) *out_prefetched = 0;
  if (!m) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_prefetch_hint: manager is NULL");
  if (node < 0 || node >= m->node_count || distance < 1 || n < 0 || (n > 0 && !buffers))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_prefetch_hint: bad %s",
                       node < 0 || node >= m->node_count ? "node"
                       : distance < 1                    ? "distance"
                                                         : "buffer list");
  loom__hmm_lock(m);
  bool act =
      m->prefetch == LOOM_MEM_POLICY_AGGRESSIVE || (m->prefetch == LOOM_MEM_POLICY_ADAPTIVE && distance == 1);
  int32_t done_count = 0;
  for (int32_t i = 0; act && i < n; i++) {
    loom_buffer *b = buffers[i];
    if (!b || b->m != m || b->copy[node].state != LOOM_MEM_INVALID) continue;
    if (!fits_without_eviction(m, b, node)) continue;
    bool done = false;
    /* A hint that cannot be followed is not an error: the access will do the work later. */
    if (prefetch_locked(m, b, node, true, &done) == LOOM_OK && done) {
      b->prefetches++;
      done_count++;
    }
  }
  loom__hmm_unlock(m);
  if (out_prefetched) *out_prefetched = done_count;
  return LOOM_OK;
}
