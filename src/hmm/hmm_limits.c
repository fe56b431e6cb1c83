/* Limits per memory node: LOOM_MEM_LIMIT, setting them, and making room under them.
 *
 * Room is made in a fixed order: the node's pool first (cached allocations cost nothing to
 * give back), then the least recently used copies of buffers that are neither pinned nor in
 * use. A copy that is not the buffer's only valid one is simply freed; an only copy is
 * written back to host memory first, so eviction never loses data. Host copies are never
 * evicted: host memory is where evicted data goes, and a host node that is full fails. */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "hmm/hmm.h"

/* ---- LOOM_MEM_LIMIT ---------------------------------------------------------------------- */

bool loom__mem_id_well_formed(const char *id) {
  static const char *const prefixes[] = {"cpu", "ocl", "cuda", "host"};
  for (int32_t i = 0; i < LOOM_ARRAY_SIZE(prefixes); i++) {
    size_t n = strlen(prefixes[i]);
    if (strncasecmp(id, prefixes[i], n) != 0 || !id[n]) continue;
    const char *p = id + n;
    while (isdigit((unsigned char)*p)) p++;
    if (*p == '\0') return true;
  }
  return false;
}

static const char *skip_blanks(const char *p) {
  while (*p == ' ' || *p == '\t') p++;
  return p;
}

/* Parses one "id:bytes" item of length len starting at item. */
static loom_status parse_item(const char *text, const char *item, size_t len, const char *origin,
                              loom__mem_limit *out) {
  long col = (long)(item - text) + 1;
  const char *colon = memchr(item, ':', len);
  if (!colon)
    return loom__error(
        LOOM_ERR_INVALID_ARGUMENT,
        "%s '%s': item %.*s at column %ld has no ':' (write id:size, as ocl0:256MiB,cpu0:4GiB)", origin, text,
        (int)len, item, col);
  const char *id = skip_blanks(item);
  size_t id_len = (size_t)(colon - id);
  while (id_len > 0 && (id[id_len - 1] == ' ' || id[id_len - 1] == '\t')) id_len--;
  char idbuf[sizeof out->id];
  if (id_len == 0 || id_len >= sizeof idbuf)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "%s '%s': item at column %ld needs a device or node id before ':'", origin, text, col);
  memcpy(idbuf, id, id_len);
  idbuf[id_len] = '\0';
  if (!loom__mem_id_well_formed(idbuf))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "%s '%s': '%s' at column %ld is not a device or node id (cpu0, ocl1, cuda0, host0)",
                       origin, text, idbuf, (long)(id - text) + 1);
  char value[64];
  size_t vlen = len - (size_t)(colon + 1 - item);
  if (vlen >= sizeof value) vlen = sizeof value - 1;
  memcpy(value, colon + 1, vlen);
  value[vlen] = '\0';
  int64_t bytes = 0;
  const char *end = NULL;
  if (!loom__parse_bytes(value, &bytes, &end) || *end != '\0') {
    long vcol = (long)(colon + 1 - text) + 1 + (long)((end ? end : value) - value);
    return loom__error(
        LOOM_ERR_INVALID_ARGUMENT,
        "%s '%s': the size of %s cannot be read at column %ld (write 123, 64KiB, 512MiB, 1.5GiB or 2GB)",
        origin, text, idbuf, vcol);
  }
  for (char *p = idbuf; *p; p++) *p = (char)tolower((unsigned char)*p);
  memcpy(out->id, idbuf, sizeof idbuf);
  out->bytes = bytes;
  return LOOM_OK;
}

loom_status loom__mem_limits_parse(const char *text, const char *origin, loom__mem_limit **out_items,
                                   int32_t *out_count) {
  *out_items = NULL;
  *out_count = 0;
  if (!text) return LOOM_OK;
  int32_t n = 1;
  for (const char *p = text; *p; p++) n += *p == ',';
  loom__mem_limit *items = loom__calloc((size_t)n, sizeof *items);
  if (!items) return loom__oom("memory limits");
  int32_t count = 0;
  loom_status s = LOOM_OK;
  for (const char *item = text; s == LOOM_OK;) {
    const char *comma = strchr(item, ',');
    size_t len = comma ? (size_t)(comma - item) : strlen(item);
    const char *first = skip_blanks(item);
    if (first < item + len) s = parse_item(text, item, len, origin, &items[count++]);
    if (!comma) break;
    item = comma + 1;
  }
  if (s != LOOM_OK || count == 0) {
    loom__free(items);
    return s;
  }
  *out_items = items;
  *out_count = count;
  return LOOM_OK;
}

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

loom_status loom__hmm_set_limit_locked(loom_mem_manager *m, int32_t node, int64_t bytes) {
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
