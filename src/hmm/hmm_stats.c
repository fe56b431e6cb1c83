/* Per-node counters and their JSON form. */
#include <string.h>

#include "core/json.h"
#include "hmm/hmm.h"

LOOM_HOT void loom__hmm_count_alloc(loom__hmm_node *n, int64_t bytes, bool pool_hit) {
  loom_mem_node_stats *s = &n->stats;
  s->in_use += bytes;
  s->live_bytes += bytes;
  s->allocations++;
  if (pool_hit) s->pool_hits++;
  if (s->in_use > s->peak_in_use) s->peak_in_use = s->in_use;
  if (s->live_bytes > s->peak_live) s->peak_live = s->live_bytes;
  loom__hmm_check_node(n);
}

void loom__hmm_count_free(loom__hmm_node *n, int64_t bytes, bool to_pool) {
  loom_mem_node_stats *s = &n->stats;
  s->live_bytes -= bytes;
  s->frees++;
  if (to_pool)
    s->cached_bytes += bytes;
  else
    s->in_use -= bytes;
  loom__hmm_check_node(n);
}

loom_status loom_mem_stats(const loom_mem_manager *m, int32_t node, loom_mem_node_stats *out_stats) {
  if (!out_stats) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_stats: out_stats is NULL");
  memset(out_stats, 0, sizeof *out_stats);
  if (!m) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_stats: manager is NULL");
  if (node < 0 || node >= m->node_count)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_stats: node %d out of range (%d memory nodes)",
                       (int)node, (int)m->node_count);
  loom__hmm_lock(m);
  *out_stats = m->nodes[node].stats;
  loom__hmm_unlock(m);
  return LOOM_OK;
}

static void node_json(loom__json *j, const loom__hmm_node *n) {
  const loom_mem_node_stats *s = &n->stats;
  loom__json_begin_object(j);
  loom__json_kv_string(j, "id", n->id);
  loom__json_kv_string(j, "kind", loom_memory_node_kind_name(n->kind));
  loom__json_kv_int64(j, "limit", s->limit);
  loom__json_kv_int64(j, "in_use", s->in_use);
  loom__json_kv_int64(j, "live_bytes", s->live_bytes);
  loom__json_kv_int64(j, "cached_bytes", s->cached_bytes);
  loom__json_kv_int64(j, "peak_in_use", s->peak_in_use);
  loom__json_kv_int64(j, "peak_live", s->peak_live);
  loom__json_kv_int64(j, "allocations", s->allocations);
  loom__json_kv_int64(j, "frees", s->frees);
  loom__json_kv_int64(j, "pool_hits", s->pool_hits);
  loom__json_kv_int64(j, "pool_releases", s->pool_releases);
  loom__json_kv_int64(j, "evictions", s->evictions);
  loom__json_kv_int64(j, "evicted_bytes", s->evicted_bytes);
  loom__json_kv_int64(j, "bytes_in", s->bytes_in);
  loom__json_kv_int64(j, "bytes_out", s->bytes_out);
  loom__json_kv_int64(j, "peer_bytes_in", s->peer_bytes_in);
  loom__json_kv_int64(j, "migrations_in", s->migrations_in);
  loom__json_kv_int64(j, "bytes_migrated_in", s->bytes_migrated_in);
  loom__json_kv_int64(j, "failed_allocations", s->failed_allocations);
  loom__json_kv_int64(j, "admission_waits", s->admission_waits);
  loom__json_kv_int64(j, "admission_wait_us", s->admission_wait_us);
  loom__json_end_object(j);
}

void loom__hmm_stats_write(const loom_mem_manager *m, loom__json *j) {
  loom__hmm_lock(m);
  loom__json_begin_object(j);
  loom__json_key(j, "nodes");
  loom__json_begin_array(j);
  for (int32_t i = 0; i < m->node_count; i++) node_json(j, &m->nodes[i]);
  loom__json_end_array(j);
  loom__json_end_object(j);
  loom__hmm_unlock(m);
}

loom_status loom_mem_stats_json(const loom_mem_manager *m, FILE *out) {
  if (!m || !out)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_stats_json: NULL %s", m ? "out" : "manager");
  loom__json j;
  loom__json_init(&j, out, true);
  loom__hmm_stats_write(m, &j);
  loom_status s = loom__json_finish(&j);
  if (s == LOOM_ERR_IO) return loom__error(LOOM_ERR_IO, "loom_mem_stats_json: writing failed");
  return s;
}
