/* Memory managers: their nodes, options and policies (see hmm.h for the module's map). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backends/registry.h"
#include "core/log.h"
#include "hmm/hmm.h"

LOOM_HOT void loom__hmm_lock(const loom_mem_manager *m) {
  pthread_mutex_lock(&((loom_mem_manager *)m)->lock);
}

LOOM_HOT void loom__hmm_unlock(const loom_mem_manager *m) {
  pthread_mutex_unlock(&((loom_mem_manager *)m)->lock);
}

LOOM_HOT uint64_t loom__hmm_tick(loom_mem_manager *m) {
  return ++m->tick;
}

LOOM_HOT bool loom__hmm_is_host(const loom_mem_manager *m, int32_t node) {
  return m->nodes[node].kind == LOOM_MEMORY_HOST;
}

int32_t loom__hmm_host_of(const loom_buffer *b) {
  const loom_mem_manager *m = b->m;
  if (b->preferred >= 0 && loom__hmm_is_host(m, b->preferred)) return b->preferred;
  if (loom__hmm_is_host(m, b->node)) return b->node;
  return m->nodes[b->node].host_node;
}

LOOM_HOT void loom__hmm_check_node(const loom__hmm_node *n) {
  const loom_mem_node_stats *s = &n->stats;
  int64_t pooled = 0;
  for (int32_t i = 0; i < n->pool.count; i++) pooled += n->pool.items[i].alloc.bytes;
  /* Corrupted accounting would let a limit pass silently: stop instead (STYLE: abort only for
   * corrupted state). */
  if (s->in_use != s->live_bytes + s->cached_bytes || s->in_use > s->limit || s->live_bytes < 0 ||
      s->cached_bytes != pooled) {
    loom__log(LOOM_LOG_ERROR,
              "memory node %s accounting corrupted: in_use %lld live %lld cached %lld limit %lld", n->id,
              (long long)s->in_use, (long long)s->live_bytes, (long long)s->cached_bytes,
              (long long)s->limit);
    abort();
  }
}

void loom_mem_manager_options_init(loom_mem_manager_options *opts) {
  if (!opts) return;
  memset(opts, 0, sizeof *opts);
  opts->mode = LOOM_MEM_MODE_AUTO;
  opts->migration = LOOM_MEM_POLICY_ADAPTIVE;
  opts->prefetch = LOOM_MEM_POLICY_ADAPTIVE;
  opts->migration_threshold = 2;
  opts->advice = LOOM_MEM_ADVISE_NONE;
}

static bool policy_ok(loom_mem_policy p) {
  return p >= LOOM_MEM_POLICY_NONE && p <= LOOM_MEM_POLICY_AGGRESSIVE;
}

static loom_status check_options(const loom_mem_manager_options *o) {
  const char *what = NULL;
  if (o->mode < LOOM_MEM_MODE_AUTO || o->mode > LOOM_MEM_MODE_MANAGED)
    what = "mode";
  else if (!policy_ok(o->migration))
    what = "migration policy";
  else if (!policy_ok(o->prefetch))
    what = "prefetch policy";
  else if (o->migration_threshold < 1)
    what = "migration_threshold (at least 1)";
  else if (o->advice != LOOM_MEM_ADVISE_NONE && o->advice != LOOM_MEM_ADVISE_READ_MOSTLY &&
           o->advice != LOOM_MEM_ADVISE_PREFERRED_LOCATION && o->advice != LOOM_MEM_ADVISE_ACCESSED_BY)
    what = "advice (NONE, READ_MOSTLY, PREFERRED_LOCATION or ACCESSED_BY)";
  if (what)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_manager_create: bad %s in the options", what);
  return LOOM_OK;
}

/* One node, zeroed, with a limit of its size. */
static loom__hmm_node *add_node(loom_mem_manager *m, const char *id, loom_memory_node_kind kind,
                                int64_t size) {
  loom__hmm_node *n = &m->nodes[m->node_count];
  memset(n, 0, sizeof *n);
  snprintf(n->id, sizeof n->id, "%s", id);
  n->kind = kind;
  n->index = m->node_count++;
  n->m = m;
  n->device_index = -1;
  n->numa_os_index = -1;
  n->size_bytes = size;
  n->max_alloc = size;
  n->stats.limit = size;
  n->own_limit = size;
  return n;
}

/* Host nodes (same indexes as the table's host memory nodes), then device nodes. */
static loom_status make_nodes(loom_mem_manager *m) {
  const loom__devices *t = m->devices;
  int32_t hosts = 0;
  for (int32_t i = 0; i < t->mem_count; i++) hosts += t->mem[i].kind == LOOM_MEMORY_HOST;
  int32_t total = hosts;
  for (int32_t i = 0; i < t->dev_count; i++) total += loom__backend_memory_for(&t->dev[i]) != NULL;
  if (total > LOOM_MEM_MAX_NODES)
    return loom__error(LOOM_ERR_UNSUPPORTED,
                       "loom_mem_manager_create: %d memory nodes; at most %d are supported", (int)total,
                       LOOM_MEM_MAX_NODES);
  if (!(m->nodes = loom__calloc((size_t)(total ? total : 1), sizeof *m->nodes)))
    return loom__oom("memory nodes");
  for (int32_t i = 0; i < t->mem_count && i < hosts; i++) {
    const loom__memnode *mn = &t->mem[i];
    int64_t size = mn->size_bytes > 0 ? mn->size_bytes : INT64_MAX / 4;
    loom__hmm_node *n = add_node(m, mn->id, LOOM_MEMORY_HOST, size);
    n->backend = &loom__hmm_host_backend;
    n->host_node = n->index;
    n->numa_os_index = mn->numa_os_index;
  }
  for (int32_t i = 0; i < t->dev_count; i++) {
    const loom__device *d = &t->dev[i];
    const loom__hmm_backend *be = loom__backend_memory_for(d);
    if (!be) continue;
    loom__hmm_node *n = add_node(m, d->id, LOOM_MEMORY_DEVICE, d->memory_bytes > 0 ? d->memory_bytes : 0);
    n->backend = be;
    n->device = d;
    n->device_index = i;
    n->max_alloc = d->max_alloc_bytes > 0 ? d->max_alloc_bytes : n->size_bytes;
    /* Evicted copies go to the host node the device allocates from or is near. */
    int32_t near = d->memory_node >= 0 && d->memory_node < hosts ? d->memory_node : 0;
    n->host_node = hosts > 0 ? near : -1;
  }
  if (hosts == 0)
    return loom__error(LOOM_ERR_INTERNAL, "loom_mem_manager_create: the context has no host memory node");
  for (int32_t i = 0; i < m->node_count; i++) {
    loom_status s = m->nodes[i].backend->node_init(&m->nodes[i]);
    if (s != LOOM_OK) return s;
  }
  return LOOM_OK;
}

static loom_status apply_limit_option(loom_mem_manager *m, const char *spec) {
  const char *origin = "loom_mem_manager_options.limits";
  if (!spec) {
    spec = getenv("LOOM_MEM_LIMIT");
    origin = "LOOM_MEM_LIMIT";
  }
  if (!spec || !*spec) return LOOM_OK;
  loom__mem_limit *items = NULL;
  int32_t count = 0;
  loom_status s = loom__mem_limits_parse(spec, origin, &items, &count);
  if (s == LOOM_OK) s = loom__hmm_apply_limits(m, items, count, true, origin);
  loom__free(items);
  return s;
}

loom_status loom__hmm_create(const loom__devices *devices, const loom_mem_manager_options *opts,
                             loom_mem_manager **out_manager) {
  *out_manager = NULL;
  loom_mem_manager_options defaults;
  if (!opts) {
    loom_mem_manager_options_init(&defaults);
    opts = &defaults;
  }
  loom_status s = check_options(opts);
  if (s != LOOM_OK) return s;
  loom_mem_manager *m = loom__calloc(1, sizeof *m);
  if (!m) return loom__oom("a memory manager");
  if (pthread_mutex_init(&m->lock, NULL) != 0) {
    loom__free(m);
    return loom__error(LOOM_ERR_UNAVAILABLE, "loom_mem_manager_create: cannot make a mutex");
  }
  if (pthread_cond_init(&m->admit_cond, NULL) != 0) {
    pthread_mutex_destroy(&m->lock);
    loom__free(m);
    return loom__error(LOOM_ERR_UNAVAILABLE, "loom_mem_manager_create: cannot make a condition variable");
  }
  m->devices = devices;
  m->mode = opts->mode;
  m->migration = opts->migration;
  m->prefetch = opts->prefetch;
  m->threshold = opts->migration_threshold;
  m->advice = opts->advice;
  m->pool_max = opts->pool_max_bytes;
  const char *ahead = getenv("LOOM_WRITE_AHEAD");
  m->no_write_ahead = ahead && strcmp(ahead, "0") == 0;
  m->t0 = loom__now();
  m->trace.on = opts->trace;
  s = make_nodes(m);
  if (s == LOOM_OK) s = apply_limit_option(m, opts->limits);
  if (s != LOOM_OK) {
    loom_mem_manager_destroy(m);
    return s;
  }
  *out_manager = m;
  return LOOM_OK;
}

void loom_mem_manager_destroy(loom_mem_manager *m) {
  if (!m) return;
  loom__hmm_lock(m);
  while (m->buffers) {
    loom_buffer *b = m->buffers;
    loom__hmm_unlock(m);
    loom_buffer_free(b);
    loom__hmm_lock(m);
  }
  for (int32_t i = 0; m->nodes && i < m->node_count; i++) {
    loom__hmm_node *n = &m->nodes[i];
    loom__hmm_pool_trim(m, n);
    if (n->backend && n->backend->node_deinit) n->backend->node_deinit(n);
  }
  loom__hmm_spares_free(m);
  loom__hmm_unlock(m);
  loom__hmm_trace_deinit(&m->trace);
  loom__free(m->nodes);
  pthread_cond_destroy(&m->admit_cond);
  pthread_mutex_destroy(&m->lock);
  loom__free(m);
}

loom_status loom_mem_get_options(const loom_mem_manager *m, loom_mem_manager_options *out_opts) {
  if (!out_opts) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_get_options: out_opts is NULL");
  memset(out_opts, 0, sizeof *out_opts);
  if (!m) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_get_options: manager is NULL");
  loom__hmm_lock(m);
  out_opts->mode = m->mode;
  out_opts->migration = m->migration;
  out_opts->prefetch = m->prefetch;
  out_opts->migration_threshold = m->threshold;
  out_opts->advice = m->advice;
  out_opts->limits = "";
  out_opts->pool_max_bytes = m->pool_max;
  out_opts->trace = m->trace.on;
  loom__hmm_unlock(m);
  return LOOM_OK;
}

static loom_status set_policy(loom_mem_manager *m, loom_mem_policy p, bool migration, const char *fn) {
  if (!m) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: manager is NULL", fn);
  if (!policy_ok(p)) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: policy %d out of range", fn, (int)p);
  loom__hmm_lock(m);
  if (migration)
    m->migration = p;
  else
    m->prefetch = p;
  loom__hmm_unlock(m);
  return LOOM_OK;
}

loom_status loom_mem_set_migration_policy(loom_mem_manager *m, loom_mem_policy policy) {
  return set_policy(m, policy, true, "loom_mem_set_migration_policy");
}

loom_status loom_mem_set_prefetch_policy(loom_mem_manager *m, loom_mem_policy policy) {
  return set_policy(m, policy, false, "loom_mem_set_prefetch_policy");
}

loom_status loom_mem_set_migration_threshold(loom_mem_manager *m, int32_t accesses) {
  if (!m) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_set_migration_threshold: manager is NULL");
  if (accesses < 1)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_set_migration_threshold: %d accesses; at least 1",
                       (int)accesses);
  loom__hmm_lock(m);
  m->threshold = accesses;
  loom__hmm_unlock(m);
  return LOOM_OK;
}

int32_t loom_mem_node_count(const loom_mem_manager *m) {
  return m ? m->node_count : 0;
}

/* The node of a device of the table, or -1 when the HMM does not manage its memory. */
static int32_t node_of_device(const loom_mem_manager *m, int32_t dev) {
  for (int32_t i = 0; i < m->node_count; i++)
    if (m->nodes[i].device_index == dev) return i;
  const loom__device *d = &m->devices->dev[dev];
  if (d->backends == LOOM_BACKEND_CPU && d->memory_node >= 0 && d->memory_node < m->node_count &&
      loom__hmm_is_host(m, d->memory_node))
    return d->memory_node;
  return -1;
}

static loom_status node_not_found(const loom_mem_manager *m, const char *id, bool unmanaged) {
  char list[256] = "";
  size_t used = 0;
  for (int32_t i = 0; i < m->node_count && used + 20 < sizeof list; i++)
    used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", m->nodes[i].id);
  if (unmanaged)
    return loom__error(LOOM_ERR_NOT_FOUND,
                       "memory node '%s': the HMM does not manage that device's memory yet (CUDA); nodes: %s",
                       id, list);
  return loom__error(LOOM_ERR_NOT_FOUND,
                     "memory node '%s' not found; nodes: %s (or a device id such as cpu0)", id, list);
}

loom_status loom_mem_node_find(const loom_mem_manager *m, const char *id, int32_t *out_node) {
  if (!out_node) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_node_find: out_node is NULL");
  *out_node = -1;
  if (!m || !id)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_node_find: NULL %s", m ? "id" : "manager");
  for (int32_t i = 0; i < m->node_count; i++) {
    if (strcasecmp(m->nodes[i].id, id) == 0) {
      *out_node = i;
      return LOOM_OK;
    }
  }
  int32_t dev = loom__devices_find(m->devices, id);
  if (dev < 0) return node_not_found(m, id, false);
  int32_t node = node_of_device(m, dev);
  if (node < 0) return node_not_found(m, id, true);
  *out_node = node;
  return LOOM_OK;
}

loom_status loom_mem_device_node(const loom_mem_manager *m, int32_t device_index, int32_t *out_node) {
  if (!out_node) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_device_node: out_node is NULL");
  *out_node = -1;
  if (!m) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_device_node: manager is NULL");
  if (device_index < 0 || device_index >= m->devices->dev_count)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_device_node: device %d out of range (%d devices)",
                       (int)device_index, (int)m->devices->dev_count);
  int32_t node = node_of_device(m, device_index);
  if (node < 0) return node_not_found(m, m->devices->dev[device_index].id, true);
  *out_node = node;
  return LOOM_OK;
}

static loom_status check_node(const loom_mem_manager *m, int32_t node, const char *fn) {
  if (!m) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: manager is NULL", fn);
  if (node < 0 || node >= m->node_count)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: node %d out of range (%d memory nodes)", fn, (int)node,
                       (int)m->node_count);
  return LOOM_OK;
}

loom_status loom_mem_node_info_get(const loom_mem_manager *m, int32_t node, loom_mem_node_info *out_info) {
  if (!out_info) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_node_info_get: out_info is NULL");
  memset(out_info, 0, sizeof *out_info);
  loom_status s = check_node(m, node, "loom_mem_node_info_get");
  if (s != LOOM_OK) return s;
  loom__hmm_lock(m);
  const loom__hmm_node *n = &m->nodes[node];
  out_info->id = n->id;
  out_info->kind = n->kind;
  out_info->device_index = n->device_index;
  out_info->host_node = n->host_node;
  out_info->size_bytes = n->size_bytes;
  out_info->limit_bytes = n->stats.limit;
  out_info->max_alloc_bytes = n->max_alloc;
  out_info->storages = n->storages;
  out_info->svm_migrate = n->svm_migrate;
  loom__hmm_unlock(m);
  return LOOM_OK;
}

loom_status loom_mem_set_limit(loom_mem_manager *m, int32_t node, int64_t bytes) {
  loom_status s = check_node(m, node, "loom_mem_set_limit");
  if (s != LOOM_OK) return s;
  if (bytes < 0)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_set_limit: negative limit %lld",
                       (long long)bytes);
  loom__hmm_lock(m);
  s = loom__hmm_set_limit_locked(m, node, bytes);
  loom__hmm_unlock(m);
  return s;
}

loom_status loom_mem_set_limits(loom_mem_manager *m, const char *spec) {
  if (!m || !spec)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_set_limits: NULL %s", m ? "spec" : "manager");
  loom__mem_limit *items = NULL;
  int32_t count = 0;
  loom_status s = loom__mem_limits_parse(spec, "loom_mem_set_limits", &items, &count);
  if (s == LOOM_OK) s = loom__hmm_apply_limits(m, items, count, false, "loom_mem_set_limits");
  loom__free(items);
  return s;
}

loom_status loom_mem_trim(loom_mem_manager *m, int32_t node) {
  if (node != -1) {
    loom_status s = check_node(m, node, "loom_mem_trim");
    if (s != LOOM_OK) return s;
  } else if (!m) {
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_mem_trim: manager is NULL");
  }
  loom__hmm_lock(m);
  for (int32_t i = 0; i < m->node_count; i++)
    if (node == -1 || node == i) loom__hmm_pool_trim(m, &m->nodes[i]);
  loom__hmm_spares_free(m); /* host memory of no node, kept for reuse as the pool is */
  loom__hmm_unlock(m);
  return LOOM_OK;
}

void loom__hmm_testing_disable_svm_migrate(loom_mem_manager *m) {
  loom__hmm_lock(m);
  for (int32_t i = 0; i < m->node_count; i++) m->nodes[i].svm_migrate = false;
  loom__hmm_unlock(m);
}

/* ---- what a backend may call (hmm/hmm_backend.h) ------------------------------------------ */

const char *loom__hmm_node_id(const loom__hmm_node *node) {
  return node->id;
}

loom_memory_node_kind loom__hmm_node_kind(const loom__hmm_node *node) {
  return node->kind;
}

const loom__device *loom__hmm_node_device(const loom__hmm_node *node) {
  return node->device;
}

const loom__hmm_backend *loom__hmm_node_backend(const loom__hmm_node *node) {
  return node->backend;
}

void *loom__hmm_node_state(const loom__hmm_node *node) {
  return node->state;
}

void loom__hmm_node_set_state(loom__hmm_node *node, void *state) {
  node->state = state;
}

void loom__hmm_node_offer(loom__hmm_node *node, uint32_t storages, bool svm_migrate) {
  node->storages = storages;
  node->svm_migrate = svm_migrate;
}

loom_mem_manager *loom__hmm_node_manager(const loom__hmm_node *node) {
  return node->m;
}

int32_t loom__hmm_node_count(const loom_mem_manager *m) {
  return m->node_count;
}

loom__hmm_node *loom__hmm_node_at(const loom_mem_manager *m, int32_t index) {
  return &m->nodes[index];
}

loom_status loom__hmm_node_call(loom_mem_manager *m, int32_t node, const loom__hmm_backend *backend,
                                const char *what, loom_status (*fn)(loom__hmm_node *node, void *arg),
                                void *arg) {
  if (!m || node < 0 || node >= m->node_count || m->nodes[node].backend != backend)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: node %d is not driven by the %s memory backend", what,
                       (int)node, backend->name);
  loom__hmm_lock(m);
  loom_status s = fn(&m->nodes[node], arg);
  loom__hmm_unlock(m);
  return s;
}

loom_status loom__hmm_node_queue(loom_mem_manager *m, int32_t node, const loom__hmm_backend *backend,
                                 const char *what, void **out_first, void **out_second) {
  if (out_first) *out_first = NULL;
  if (out_second) *out_second = NULL;
  if (!m || node < 0 || node >= m->node_count || m->nodes[node].backend != backend || !backend->queue)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: node %d is not driven by the %s memory backend", what,
                       (int)node, backend->name);
  void *first = NULL, *second = NULL;
  loom__hmm_lock(m);
  loom_status s = backend->queue(&m->nodes[node], &first, &second);
  loom__hmm_unlock(m);
  if (s == LOOM_OK && out_first) *out_first = first;
  if (s == LOOM_OK && out_second) *out_second = second;
  return s;
}
