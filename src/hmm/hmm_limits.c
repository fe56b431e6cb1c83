/* Limits per memory node: setting them (LOOM_MEM_LIMIT is parsed by core/limits.c), and making room under
 * them.
 *
 * Room is made in a fixed order: the node's pool first (cached allocations cost nothing to
 * give back), then the least recently used copies of buffers that are neither pinned nor in
 * use. A copy that is not the buffer's only valid one is simply freed; an only copy is
 * written back to host memory first, so eviction never loses data. Host copies are never
 * evicted: host memory is where evicted data goes, and a host node that is full fails. */
#include <string.h>

#include "hmm/hmm.h"

/* ---- LOOM_MEM_LIMIT (parsed by core/limits.c) ------------------------------------------ */

loom_status loom__hmm_apply_limits(loom_mem_manager *m, const loom__mem_limit *items, int32_t count,
                                   bool skip_missing, const char *origin) {
  for (int32_t i = 0; i < count; i++) {
    int32_t node = -1;
    /* Node ids and the device table are fixed for the manager's life: no lock needed. */
    loom_status s = loom_mem_node_find(m, items[i].id, &node);
    if (s == LOOM_ERR_NOT_FOUND && skip_missing) continue;
    if (s != LOOM_OK) {
      loom__error_prefix("%s: ", origin);
      return s;
    }
    loom__hmm_lock(m);
    s = loom__hmm_set_limit_locked(m, node, items[i].bytes);
    loom__hmm_unlock(m);
    if (s != LOOM_OK) return s;
  }
  return LOOM_OK;
}

/* ---- eviction ----------------------------------------------------------------------------- */

/* Evicts the buffer's copy on node: frees it when another copy is valid, else writes it back
 * to the buffer's host node first. OUT_OF_MEMORY when the host has no room for it. */
static loom_status evict_copy(loom_mem_manager *m, loom_buffer *b, int32_t node) {
  loom__hmm_copy *c = &b->copy[node];
  loom__hmm_settle(m, b);
  int64_t bytes = c->alloc.bytes;
  int32_t other = loom__hmm_persistent_copy(b, node);
  if (other < 0) {
    int32_t h = loom__hmm_host_of(b);
    if (h < 0 || h == node) return loom__error(LOOM_ERR_OUT_OF_MEMORY, "no host node to evict to");
    loom__hmm_copy *hc = &b->copy[h];
    bool made = hc->alloc.storage == LOOM_MEM_STORAGE_NONE;
    if (!made && hc->in_use > 0) return loom__error(LOOM_ERR_OUT_OF_MEMORY, "the host copy is in use");
    loom_status s = made ? loom__hmm_copy_alloc(m, b, h) : LOOM_OK;
    if (s == LOOM_OK) s = loom__hmm_transfer(m, b, h, node, "evict", false);
    if (s != LOOM_OK) {
      if (made) loom__hmm_copy_drop(m, b, h, true);
      return s;
    }
    hc->state = LOOM_MEM_SHARED;
    hc->last_use = loom__hmm_tick(m);
  }
  loom__hmm_copy_drop(m, b, node, false);
  loom__hmm_node *n = &m->nodes[node];
  n->stats.evictions++;
  n->stats.evicted_bytes += bytes;
  b->evictions++;
  loom__hmm_trace_instant(m, "evict", node, b, bytes);
  return LOOM_OK;
}

/* Evicts one copy from node, least recently used first. NOT_FOUND when there is nothing to
 * evict; OUT_OF_MEMORY (with the last reason) when every candidate failed to go. */
static loom_status evict_one(loom_mem_manager *m, int32_t node, const loom_buffer *exclude) {
  if (loom__hmm_is_host(m, node)) return LOOM_ERR_NOT_FOUND;
  uint64_t pass = ++m->evict_pass;
  bool tried = false;
  for (;;) {
    loom_buffer *best = NULL;
    for (loom_buffer *b = m->buffers; b; b = b->next) {
      const loom__hmm_copy *c = &b->copy[node];
      if (b == exclude || b->evict_mark == pass || b->pins > 0) continue;
      if (c->alloc.storage == LOOM_MEM_STORAGE_NONE || c->in_use > 0 || c->temporary) continue;
      if (!best || c->last_use < best->copy[node].last_use) best = b;
    }
    if (!best && tried) {
      loom__error_prefix("evicting from %s failed: ", m->nodes[node].id);
      return LOOM_ERR_OUT_OF_MEMORY;
    }
    if (!best) return LOOM_ERR_NOT_FOUND;
    best->evict_mark = pass;
    tried = true;
    loom_status s = evict_copy(m, best, node);
    if (s != LOOM_ERR_OUT_OF_MEMORY) return s;
  }
}

/* Brings the node's in_use down to `target` bytes. */
static loom_status shrink_to(loom_mem_manager *m, int32_t node, int64_t target, const loom_buffer *exclude) {
  loom__hmm_node *n = &m->nodes[node];
  while (n->stats.in_use > target) {
    if (loom__hmm_pool_release_one(m, n)) continue;
    loom_status s = evict_one(m, node, exclude);
    if (s != LOOM_OK) return s;
  }
  return LOOM_OK;
}

static loom_status no_room(const loom__hmm_node *n, int64_t bytes) {
  char need[32], lim[32], used[32];
  return loom__error(
      LOOM_ERR_OUT_OF_MEMORY,
      "out of memory on %s: %s needed, %s of its %s limit held by buffers that are pinned or in use "
      "(or are host copies, which are never evicted)",
      n->id, loom__format_bytes(bytes, need, sizeof need),
      loom__format_bytes(n->stats.in_use, used, sizeof used),
      loom__format_bytes(n->stats.limit, lim, sizeof lim));
}

loom_status loom__hmm_make_room(loom_mem_manager *m, int32_t node, int64_t bytes,
                                const loom_buffer *exclude) {
  loom__hmm_node *n = &m->nodes[node];
  if (bytes > n->stats.limit) {
    char need[32], lim[32];
    return loom__error(LOOM_ERR_OUT_OF_MEMORY, "out of memory on %s: %s needed, more than its %s limit",
                       n->id, loom__format_bytes_vs(bytes, n->stats.limit, need, sizeof need),
                       loom__format_bytes_vs(n->stats.limit, bytes, lim, sizeof lim));
  }
  loom_status s = shrink_to(m, node, n->stats.limit - bytes, exclude);
  if (s == LOOM_ERR_NOT_FOUND) return no_room(n, bytes);
  return s;
}

/* Brings the node under `bytes` and makes that its limit; unchanged on failure. */
static loom_status apply_limit(loom_mem_manager *m, int32_t node, int64_t bytes) {
  loom__hmm_node *n = &m->nodes[node];
  loom_status s = shrink_to(m, node, bytes, NULL);
  if (s == LOOM_ERR_NOT_FOUND) {
    char want[32], used[32];
    return loom__error(LOOM_ERR_OUT_OF_MEMORY,
                       "cannot set the limit of %s to %s: %s stays in use (pinned, in use or host copies)",
                       n->id, loom__format_bytes(bytes, want, sizeof want),
                       loom__format_bytes(n->stats.in_use, used, sizeof used));
  }
  if (s != LOOM_OK) return s;
  n->stats.limit = bytes;
  loom__hmm_check_node(n);
  return LOOM_OK;
}

/* The limit in force: the node's own, or the smallest runner limit when that is lower. */
static int64_t limit_in_force(const loom__hmm_node *n, int64_t own) {
  int64_t bytes = own;
  for (const loom__hmm_runner_limit *r = n->runner_limits; r; r = r->next) bytes = LOOM_MIN(bytes, r->bytes);
  return bytes;
}

loom_status loom__hmm_set_limit_locked(loom_mem_manager *m, int32_t node, int64_t bytes) {
  loom__hmm_node *n = &m->nodes[node];
  loom_status s = apply_limit(m, node, limit_in_force(n, bytes));
  if (s == LOOM_OK) n->own_limit = bytes;
  return s;
}

/* ---- runner limits shared by the runs on a node ------------------------------------------ */

/* A device's runner limit holds for all the runs that share it, not for each: each stage that
 * runs under a runner limit puts it in force on its node for as long as it runs, and the node's
 * own limit (which the memory manager never lets the node pass, pool included) is lowered to
 * it. Stages come here through admission (hmm_admit.c), which waits until the others leave room;
 * an allocation that still does not fit beside the others' (a stage past its estimate) fails
 * with the manager's OUT_OF_MEMORY naming the node. */
loom_status loom__hmm_runner_limit_begin_locked(loom_mem_manager *m, int32_t node,
                                                loom__hmm_runner_limit *rl) {
  loom__hmm_node *n = &m->nodes[node];
  rl->next = n->runner_limits;
  n->runner_limits = rl;
  int64_t bytes = limit_in_force(n, n->own_limit);
  loom_status s = bytes == n->stats.limit ? LOOM_OK : apply_limit(m, node, bytes);
  if (s != LOOM_OK) {
    n->runner_limits = rl->next;
    char lim[32], used[32];
    s = loom__error(
        LOOM_ERR_OUT_OF_MEMORY,
        "out of memory on %s: the runs sharing it hold %s in use, more than the runner limit of %s", n->id,
        loom__format_bytes(n->stats.in_use, used, sizeof used), loom__format_bytes(bytes, lim, sizeof lim));
  }
  return s;
}

loom_status loom__hmm_runner_limit_begin(loom_mem_manager *m, int32_t node, loom__hmm_runner_limit *rl) {
  loom__hmm_lock(m);
  loom_status s = loom__hmm_runner_limit_begin_locked(m, node, rl);
  loom__hmm_unlock(m);
  return s;
}

void loom__hmm_runner_limit_end(loom_mem_manager *m, int32_t node, loom__hmm_runner_limit *rl) {
  loom__hmm_lock(m);
  loom__hmm_node *n = &m->nodes[node];
  for (loom__hmm_runner_limit **p = &n->runner_limits; *p; p = &(*p)->next)
    if (*p == rl) {
      *p = rl->next;
      break;
    }
  /* Raising a limit never fails: the node holds at most the lower one. */
  (void)apply_limit(m, node, limit_in_force(n, n->own_limit));
  loom__hmm_unlock(m);
}
