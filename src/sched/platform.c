/* Platforms: the devices, their memory nodes and the links between them, from plain data or
 * from a platform file (docs/sched.md). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"
#include "sched/sched_impl.h"

void loom_sched_platform_destroy(loom_sched_platform *p) {
  if (!p) return;
  loom__free(p->node_names);
  loom__free(p->devices);
  loom__free(p->links);
  loom__free(p);
}

static loom_status check_platform(const loom_sched_platform *p) {
  if (p->n_devices < 1) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "platform: no devices");
  for (int32_t i = 0; i < p->n_devices; i++) {
    const loom_sched_device *d = &p->devices[i];
    if (d->node < 0 || d->node >= p->n_nodes)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "platform: device %s: node %d out of range", d->id,
                         d->node);
    if (d->memory <= 0)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "platform: device %s: memory must be > 0", d->id);
    for (int32_t k = 0; k < i; k++) {
      if (strcasecmp(p->devices[k].id, d->id) == 0)
        return loom__error(LOOM_ERR_INVALID_ARGUMENT, "platform: device id %s given twice", d->id);
    }
  }
  for (int32_t i = 0; i < p->n_links; i++) {
    const loom_sched_link *l = &p->links[i];
    if (l->a < 0 || l->a >= p->n_nodes || l->b < 0 || l->b >= p->n_nodes || l->a == l->b)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "platform: link %d: ends %d and %d out of range", i, l->a,
                         l->b);
    if (!(l->bandwidth > 0) || !(l->latency >= 0))
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "platform: link %d: bandwidth must be > 0, latency >= 0",
                         i);
  }
  return LOOM_OK;
}

loom_status loom_sched_platform_create(const char *const *node_names, int32_t n_nodes,
                                       const loom_sched_device *devices, int32_t n_devices,
                                       const loom_sched_link *links, int32_t n_links,
                                       loom_sched_platform **out_platform) {
  if (out_platform) *out_platform = NULL;
  if (!out_platform || !node_names || n_nodes < 1 || !devices || n_devices < 1 || n_links < 0 ||
      (n_links && !links))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "platform: bad arguments (needs nodes and devices)");
  loom_sched_platform *p = loom__calloc(1, sizeof *p);
  if (!p) return loom__oom("platform");
  p->node_names = loom__calloc((size_t)n_nodes, sizeof *p->node_names);
  p->devices = loom__calloc((size_t)n_devices, sizeof *p->devices);
  p->links = loom__calloc((size_t)(n_links ? n_links : 1), sizeof *p->links);
  if (!p->node_names || !p->devices || !p->links) {
    loom_sched_platform_destroy(p);
    return loom__oom("platform");
  }
  p->n_nodes = n_nodes, p->n_devices = n_devices, p->n_links = n_links;
  for (int32_t i = 0; i < n_nodes; i++) snprintf(p->node_names[i], LOOM_SCHED_NAME_MAX, "%s", node_names[i]);
  memcpy(p->devices, devices, sizeof *devices * (size_t)n_devices);
  if (n_links) memcpy(p->links, links, sizeof *links * (size_t)n_links);
  loom_status s = check_platform(p);
  if (s) {
    loom_sched_platform_destroy(p);
    return s;
  }
  *out_platform = p;
  return LOOM_OK;
}

loom_status loom_sched_platform_subset(const loom_sched_platform *p, const char *devices,
                                       loom_sched_platform **out_platform) {
  if (out_platform) *out_platform = NULL;
  if (!p || !devices || !out_platform)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "platform subset: NULL argument");
  loom_sched_device *chosen = loom__calloc((size_t)p->n_devices, sizeof *chosen);
  const char **names = loom__calloc((size_t)p->n_nodes, sizeof *names);
  loom_status s = chosen && names ? LOOM_OK : loom__oom("platform subset");
  int32_t n = 0;
  for (const char *at = devices; !s && at;) {
    const char *end = strchr(at, ',');
    size_t len = end ? (size_t)(end - at) : strlen(at);
    char id[LOOM_SCHED_NAME_MAX];
    int32_t d = -1;
    if (len > 0 && len < sizeof id) {
      memcpy(id, at, len);
      id[len] = '\0';
      d = loom_sched_platform_find(p, id);
    }
    if (d < 0) {
      s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "platform: '%.*s' in '%s' is none of its devices", (int)len,
                      at, devices);
      break;
    }
    for (int32_t k = 0; k < n && !s; k++) {
      if (strcasecmp(chosen[k].id, p->devices[d].id) == 0)
        s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "platform: '%s' names %s twice", devices, id);
    }
    if (!s) chosen[n++] = p->devices[d];
    at = end ? end + 1 : NULL;
  }
  /* Every node and link stays: a node left without a device is only a place data may pass. */
  for (int32_t i = 0; !s && i < p->n_nodes; i++) names[i] = p->node_names[i];
  if (!s) s = loom_sched_platform_create(names, p->n_nodes, chosen, n, p->links, p->n_links, out_platform);
  loom__free(chosen);
  loom__free(names);
  return s;
}

int32_t loom_sched_platform_device_count(const loom_sched_platform *p) {
  return p ? p->n_devices : 0;
}

const loom_sched_device *loom_sched_platform_device(const loom_sched_platform *p, int32_t i) {
  return p && i >= 0 && i < p->n_devices ? &p->devices[i] : NULL;
}

int32_t loom_sched_platform_find(const loom_sched_platform *p, const char *id) {
  for (int32_t i = 0; p && id && i < p->n_devices; i++) {
    if (strcasecmp(p->devices[i].id, id) == 0) return i;
  }
  return -1;
}

int32_t loom__sched_link_find(const loom_sched_platform *p, int32_t a, int32_t b) {
  for (int32_t i = 0; i < p->n_links; i++) {
    const loom_sched_link *l = &p->links[i];
    if ((l->a == a && l->b == b) || (l->a == b && l->b == a)) return i;
  }
  return -1;
}

double loom_sched_platform_transfer_time(const loom_sched_platform *p, int32_t from, int32_t to,
                                         int64_t bytes) {
  if (!p || from < 0 || to < 0 || from >= p->n_nodes || to >= p->n_nodes) return INFINITY;
  if (from == to || bytes <= 0) return 0;
  int32_t l = loom__sched_link_find(p, from, to);
  if (l >= 0) return p->links[l].latency + (double)bytes / p->links[l].bandwidth;
  int32_t l1 = loom__sched_link_find(p, from, 0), l2 = loom__sched_link_find(p, 0, to);
  if (l1 < 0 || l2 < 0) return INFINITY;
  return p->links[l1].latency + (double)bytes / p->links[l1].bandwidth + p->links[l2].latency +
         (double)bytes / p->links[l2].bandwidth;
}

/* ---- platform files --------------------------------------------------------------------- */

/* What a file's reading builds up before loom_sched_platform_create checks it. */
typedef struct reading {
  const char *file;
  const char *names[64];
  char name_buf[64][LOOM_SCHED_NAME_MAX];
  int32_t n_nodes;
  loom_sched_device *devices;
  int32_t n_devices;
  loom_sched_link links[256];
  int32_t n_links;
} reading;

static loom_status field_error(const reading *r, int32_t dev, const char *field, const char *what) {
  if (dev < 0) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: %s: %s", r->file, field, what);
  return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: devices[%d]%s%s: %s", r->file, dev, *field ? "." : "",
                     field, what);
}

static int32_t node_index(reading *r, const char *name, bool add) {
  for (int32_t i = 0; i < r->n_nodes; i++) {
    if (strcasecmp(r->names[i], name) == 0) return i;
  }
  if (!add || r->n_nodes >= 64) return -1;
  snprintf(r->name_buf[r->n_nodes], LOOM_SCHED_NAME_MAX, "%s", name);
  r->names[r->n_nodes] = r->name_buf[r->n_nodes];
  return r->n_nodes++;
}

static loom_status read_bytes(const reading *r, int32_t dev, const loom__jr_value *v, int64_t *out) {
  const char *end = NULL;
  /* Exact where written as an integer (a double would round 2^53 + 1); 1e9 is taken too. */
  if (loom__jr_int64(v, out) && *out > 0) return LOOM_OK;
  if (v && v->type == LOOM__JR_NUMBER && !v->is_int && v->number >= 1 && v->number < 9.2e18 &&
      v->number == (double)(int64_t)v->number) {
    *out = (int64_t)v->number;
    return LOOM_OK;
  }
  if (v && v->type == LOOM__JR_STRING && loom__parse_bytes(v->string, out, &end) && *end == '\0' && *out > 0)
    return LOOM_OK;
  return field_error(r, dev, "memory", "must be a byte count > 0 (a number, or a string such as \"16GiB\")");
}

/* A misspelt member would silently take its default: name it instead. */
static loom_status check_keys(const reading *r, int32_t dev, const char *field, const loom__jr_value *v,
                              const char *const *known) {
  for (int32_t k = 0; k < v->n; k++) {
    bool ok = false;
    for (int32_t i = 0; known[i] && !ok; i++) ok = strcmp(v->keys[k], known[i]) == 0;
    if (ok) continue;
    char f[96];
    snprintf(f, sizeof f, "%s%s%s", field, *field ? "." : "", v->keys[k]);
    return field_error(r, dev, f, "unknown member");
  }
  return LOOM_OK;
}

static loom_status read_device(reading *r, int32_t i, const loom__jr_value *v) {
  static const char *const known[] = {"id",    "kind",       "memory",  "node", "models",
                                      "links", "host_cores", "comment", NULL};
  loom_sched_device *d = &r->devices[i];
  if (v->type != LOOM__JR_OBJECT) return field_error(r, i, "", "must be an object");
  loom_status s = check_keys(r, i, "", v, known);
  if (s) return s;
  const char *id = loom__jr_string(v, "id"), *kind = loom__jr_string(v, "kind");
  if (!*id || strlen(id) >= LOOM_SCHED_NAME_MAX)
    return field_error(r, i, "id", "must be a string of 1 to 31 characters");
  if (!*kind || strlen(kind) >= LOOM_SCHED_NAME_MAX)
    return field_error(r, i, "kind", "must be a string (\"cpu\", \"cuda\", \"opencl\")");
  snprintf(d->id, sizeof d->id, "%s", id);
  snprintf(d->kind, sizeof d->kind, "%s", kind);
  if ((s = read_bytes(r, i, loom__jr_get(v, "memory"), &d->memory))) return s;
  const loom__jr_value *node = loom__jr_get(v, "node");
  if (node &&
      (node->type != LOOM__JR_STRING || !*node->string || strlen(node->string) >= LOOM_SCHED_NAME_MAX))
    return field_error(r, i, "node", "must be a memory node's name (\"host\", or a device's own)");
  /* A CPU computes in host memory unless told otherwise; an accelerator has its own. */
  const char *node_name = node ? node->string : strcasecmp(kind, "cpu") == 0 ? "host" : id;
  if ((d->node = node_index(r, node_name, true)) < 0)
    return field_error(r, i, "node", "more than 64 memory nodes");
  const loom__jr_value *host_cores = loom__jr_get(v, "host_cores");
  if (host_cores && host_cores->type != LOOM__JR_BOOL)
    return field_error(r, i, "host_cores", "must be true or false");
  d->host_cores = host_cores && host_cores->number != 0;
  const loom__jr_value *models = loom__jr_get(v, "models");
  if (!models) return field_error(r, i, "models", "missing (an object of op classes)");
  char where[512];
  snprintf(where, sizeof where, "%s: devices[%d].models", r->file, i);
  return loom__sched_model_read(models, where, &d->model);
}

static loom_status read_link(reading *r, int32_t dev, int32_t k, const loom__jr_value *v) {
  char field[64];
  snprintf(field, sizeof field, "links[%d]", k);
  static const char *const known[] = {"to", "bandwidth", "latency", NULL};
  if (v->type != LOOM__JR_OBJECT) return field_error(r, dev, field, "must be an object");
  loom_status s = check_keys(r, dev, field, v, known);
  if (s) return s;
  const char *to = loom__jr_string(v, "to");
  int32_t b = node_index(r, to, false), a = r->devices[dev].node;
  if (b < 0) return field_error(r, dev, field, "\"to\" names no memory node (\"host\" or a device's node)");
  if (b == a) return field_error(r, dev, field, "\"to\" is the device's own node");
  double bw = loom__jr_number(v, "bandwidth", -1), lat = loom__jr_number(v, "latency", 0);
  if (!(bw > 0)) return field_error(r, dev, field, "\"bandwidth\" must be a number > 0 (bytes per second)");
  if (!(lat >= 0)) return field_error(r, dev, field, "\"latency\" must be a number >= 0 (seconds)");
  if (r->n_links >= 256) return field_error(r, dev, field, "more than 256 links");
  r->links[r->n_links++] = (loom_sched_link){.a = a, .b = b, .bandwidth = bw, .latency = lat};
  return LOOM_OK;
}

/* Links after every device, so that one may name a node a later device brings. */
static loom_status read_links(reading *r, const loom__jr_value *devs) {
  for (int32_t i = 0; i < devs->n; i++) {
    const loom__jr_value *links = loom__jr_get(&devs->items[i], "links");
    if (!links) continue;
    if (links->type != LOOM__JR_ARRAY) return field_error(r, i, "links", "must be an array");
    for (int32_t k = 0; k < links->n; k++) {
      loom_status s = read_link(r, i, k, &links->items[k]);
      if (s) return s;
    }
  }
  return LOOM_OK;
}

static loom_status read_platform(reading *r, const loom__jr_value *doc) {
  if (doc->type != LOOM__JR_OBJECT) return field_error(r, -1, "(top)", "must be an object");
  const loom__jr_value *devs = loom__jr_get(doc, "devices");
  if (!devs || devs->type != LOOM__JR_ARRAY || devs->n < 1)
    return field_error(r, -1, "devices", "must be an array of at least one device");
  if (!(r->devices = loom__calloc((size_t)devs->n, sizeof *r->devices))) return loom__oom("platform");
  r->n_devices = devs->n;
  node_index(r, "host", true); /* node 0: where graph inputs start */
  for (int32_t i = 0; i < devs->n; i++) {
    loom_status s = read_device(r, i, &devs->items[i]);
    if (s) return s;
  }
  loom_status s = read_links(r, devs);
  for (int32_t i = 0; !s && i < r->n_devices; i++) {
    int32_t node = r->devices[i].node;
    if (node != 0 &&
        loom__sched_link_find(&(loom_sched_platform){.links = r->links, .n_links = r->n_links}, node, 0) < 0)
      s = field_error(r, i, "links", "no link to \"host\", where the graph's inputs are");
  }
  return s;
}

loom_status loom_sched_platform_parse(const char *text, size_t len, const char *name,
                                      loom_sched_platform **out_platform) {
  if (out_platform) *out_platform = NULL;
  if (!text || !out_platform) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "platform: NULL argument");
  reading *r = loom__calloc(1, sizeof *r);
  if (!r) return loom__oom("platform");
  r->file = name ? name : "platform";
  loom__jr_value doc;
  char why[256] = "";
  loom_status s = LOOM_OK;
  if (loom__jr_parse(text, len, &doc, why, sizeof why)) {
    s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: not JSON: %s", r->file, why);
  } else {
    s = read_platform(r, &doc);
    loom__jr_free(&doc);
  }
  if (!s) {
    s = loom_sched_platform_create(r->names, r->n_nodes, r->devices, r->n_devices, r->links, r->n_links,
                                   out_platform);
    if (s) loom__error_prefix("%s: ", r->file);
  }
  loom__free(r->devices);
  loom__free(r);
  return s;
}

/* The device of p that a link from `node` is written under (links belong to a device in the
 * file's format), or -1. */
static int32_t device_on(const loom_sched_platform *p, int32_t node) {
  for (int32_t d = 0; d < p->n_devices; d++) {
    if (p->devices[d].node == node) return d;
  }
  return -1;
}

loom_status loom_sched_platform_write_json(const loom_sched_platform *p, const char *comment, FILE *stream) {
  if (!p || !stream) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "platform json: NULL argument");
  loom__json j;
  loom__json_init(&j, stream, true);
  loom__json_begin_object(&j);
  if (comment) loom__json_kv_string(&j, "comment", comment);
  loom__json_key(&j, "devices");
  loom__json_begin_array(&j);
  for (int32_t d = 0; d < p->n_devices; d++) {
    const loom_sched_device *dev = &p->devices[d];
    loom__json_begin_object(&j);
    loom__json_kv_string(&j, "id", dev->id);
    loom__json_kv_string(&j, "kind", dev->kind);
    loom__json_kv_int64(&j, "memory", dev->memory);
    /* "node" only where the reader's default (a CPU on the host, else a node of its own
     * named by its id) would be wrong. */
    const char *node = p->node_names[dev->node];
    const char *implied = strcasecmp(dev->kind, "cpu") == 0 ? "host" : dev->id;
    if (strcasecmp(node, implied) != 0) loom__json_kv_string(&j, "node", node);
    if (dev->host_cores) loom__json_kv_bool(&j, "host_cores", true);
    loom__json_key(&j, "models");
    loom__json_begin_object(&j);
    loom__sched_model_write(&dev->model, &j);
    loom__json_end_object(&j);
    /* Each link once, under the first device on one of its ends. */
    bool any = false;
    for (int32_t l = 0; l < p->n_links; l++) {
      const loom_sched_link *k = &p->links[l];
      int32_t under_a = device_on(p, k->a), under = under_a >= 0 ? under_a : device_on(p, k->b);
      if (under != d) continue;
      if (!any) {
        loom__json_key(&j, "links");
        loom__json_begin_array(&j);
        any = true;
      }
      loom__json_begin_object(&j);
      loom__json_kv_string(&j, "to", p->node_names[under_a >= 0 ? k->b : k->a]);
      loom__json_kv_double(&j, "bandwidth", k->bandwidth);
      loom__json_kv_double(&j, "latency", k->latency);
      loom__json_end_object(&j);
    }
    if (any) loom__json_end_array(&j);
    loom__json_end_object(&j);
  }
  loom__json_end_array(&j);
  loom__json_end_object(&j);
  return loom__json_finish(&j);
}

loom_status loom_sched_platform_load(const char *path, loom_sched_platform **out_platform) {
  if (out_platform) *out_platform = NULL;
  if (!path || !out_platform) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "platform: NULL argument");
  char *text = NULL;
  size_t len = 0;
  loom_status s = loom__sched_read_text(path, &text, &len);
  if (s) return s;
  s = loom_sched_platform_parse(text, len, path, out_platform);
  free(text);
  return s;
}
