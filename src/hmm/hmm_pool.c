/* Size classes and the per-node pool of freed allocations.
 *
 * A freed copy is kept in its node's pool, keyed by storage and size class, and handed out
 * again to the next allocation of the same kind and class, which saves a device allocation
 * (clCreateBuffer, clSVMAlloc, an mmap) per reuse. Cached bytes count against the node's
 * limit (in_use = live + cached), and are the first thing given back when room is needed
 * (loom__hmm_make_room), before any buffer is evicted.
 *
 * Classes are four per power of two (1, 1.25, 1.5, 1.75 times it) rather than powers of two:
 * a 1.25x step loses at most 25% to rounding where a power of two loses up to 50%, which
 * matters when the class bytes are what the limit counts.
 */
#include "hmm/hmm.h"

int64_t loom__hmm_size_class(int64_t bytes, int64_t max_alloc) {
  const int64_t min_class = 256;
  if (bytes <= min_class) return min_class;
  int k = 63 - __builtin_clzll((unsigned long long)bytes); /* 2^k <= bytes < 2^(k+1) */
  int64_t step = (int64_t)1 << (k - 2);
  int64_t cls = (bytes + step - 1) / step * step;
  if (max_alloc > 0 && cls > max_alloc) {
    /* Near the largest allocation, the class would make a fitting request fail. */
    int64_t exact = (bytes + min_class - 1) / min_class * min_class;
    cls = exact <= max_alloc ? exact : bytes;
  }
  return cls;
}

int64_t loom__hmm_pool_max(const loom_mem_manager *m, const loom__hmm_node *n) {
  if (m->pool_max < 0) return 0;
  if (m->pool_max > 0) return m->pool_max;
  /* While a stage runs on the node, its executor keeps the pool within what its meter leaves
   * free (loom__hmm_pool_fit), an exact bound. Half the runner limit on top of it was below a
   * loop piece's working set, which the chunk rewrite sizes to fill the limit: every piece
   * released one of its large buffers (and, oldest first, every small one) and allocated it
   * afresh, its pages faulted in again (examples/knn.lir under 8 MiB: 392,000 page faults,
   * 7,500 with the whole limit). */
  if (n->runner_limits) return n->stats.limit;
  return n->stats.limit / 2;
}

LOOM_HOT bool loom__hmm_pool_take(loom_mem_manager *m, loom__hmm_node *n, loom_mem_storage storage,
                                  int64_t bytes, loom__hmm_alloc *out) {
  loom__hmm_pool *p = &n->pool;
  /* The most recently cached match: its memory is the likeliest still in the CPU's caches (a
   * chunked graph frees and takes the same sizes piece after piece). */
  int32_t best = -1;
  for (int32_t i = 0; i < p->count; i++) {
    if (p->items[i].alloc.storage != storage || p->items[i].alloc.bytes != bytes) continue;
    if (best < 0 || p->items[i].tick > p->items[best].tick) best = i;
  }
  if (best < 0) return false;
  *out = p->items[best].alloc;
  p->items[best] = p->items[--p->count];
  n->stats.cached_bytes -= bytes;
  n->stats.in_use -= bytes;
  loom__hmm_count_alloc(n, bytes, true);
  loom__hmm_trace_instant(m, "pool hit", n->index, NULL, bytes);
  return true;
}

static void release_at(loom_mem_manager *m, loom__hmm_node *n, int32_t i) {
  loom__hmm_pool *p = &n->pool;
  loom__hmm_alloc a = p->items[i].alloc;
  int64_t bytes = a.bytes;
  p->items[i] = p->items[--p->count];
  n->backend->free(n, &a); /* clears a */
  n->stats.cached_bytes -= bytes;
  n->stats.in_use -= bytes;
  n->stats.pool_releases++;
  loom__hmm_trace_instant(m, "pool release", n->index, NULL, bytes);
  loom__hmm_check_node(n);
}

bool loom__hmm_pool_release_one(loom_mem_manager *m, loom__hmm_node *n) {
  loom__hmm_pool *p = &n->pool;
  if (p->count == 0) return false;
  int32_t oldest = 0;
  for (int32_t i = 1; i < p->count; i++)
    if (p->items[i].tick < p->items[oldest].tick) oldest = i;
  release_at(m, n, oldest);
  return true;
}

void loom__hmm_pool_trim(loom_mem_manager *m, loom__hmm_node *n) {
  while (n->pool.count > 0) release_at(m, n, n->pool.count - 1);
}

LOOM_HOT void loom__hmm_pool_put(loom_mem_manager *m, loom__hmm_node *n, loom__hmm_alloc *a) {
  loom__hmm_pool *p = &n->pool;
  int64_t max = loom__hmm_pool_max(m, n);
  int64_t bytes = a->bytes;
  if (bytes > max) {
    n->backend->free(n, a); /* clears *a */
    loom__hmm_count_free(n, bytes, false);
    return;
  }
  while (p->count > 0 && (p->count == LOOM__HMM_POOL_SLOTS || n->stats.cached_bytes + bytes > max))
    loom__hmm_pool_release_one(m, n);
  p->items[p->count].alloc = *a;
  p->items[p->count].tick = loom__hmm_tick(m);
  p->count++;
  /* As loom__hmm_count_free(n, bytes, true), with the entry already in place for the check. */
  n->stats.live_bytes -= bytes;
  n->stats.frees++;
  n->stats.cached_bytes += bytes;
  loom__hmm_check_node(n);
}

void loom__hmm_pool_fit(loom_mem_manager *m, int32_t node, int64_t max_cached, int64_t keep_bytes) {
  if (!m || node < 0 || node >= m->node_count) return;
  loom__hmm_lock(m);
  loom__hmm_node *n = &m->nodes[node];
  loom__hmm_pool *p = &n->pool;
  int32_t keep = -1;
  for (int32_t i = 0; keep_bytes >= 0 && i < p->count && keep < 0; i++)
    if (p->items[i].alloc.bytes == keep_bytes) keep = i;
  int64_t kept = keep >= 0 ? keep_bytes : 0;
  while (n->stats.cached_bytes - kept > LOOM_MAX(max_cached, 0)) {
    /* The oldest entry other than the kept one; release_at moves the last entry into the
     * released slot, so the kept one is found again by its tick. */
    int32_t oldest = -1;
    for (int32_t i = 0; i < p->count; i++)
      if (i != keep && (oldest < 0 || p->items[i].tick < p->items[oldest].tick)) oldest = i;
    if (oldest < 0) break;
    uint64_t keep_tick = keep >= 0 ? p->items[keep].tick : 0;
    release_at(m, n, oldest);
    for (int32_t i = 0; keep >= 0 && i < p->count; i++)
      if (p->items[i].tick == keep_tick) keep = i;
  }
  loom__hmm_unlock(m);
}
