/* The devices a context has opened for running graphs (loom__context_exec_device), each
 * through the compute backend the backend list picks for it (backends/registry.h: cpu0 is
 * the host; a GPU that both CUDA and OpenCL show runs through CUDA when the cuda backend is
 * built, else through OpenCL). */
#include <pthread.h>
#include <string.h>
#include <strings.h>

#include "backends/registry.h"
#include "loom/internal/cli.h"
#include "loom/memory.h"
#include "runtime/context.h"
#include "runtime/exec.h"

/* The opened devices of one context, by the index of the device table, and cpu0 (which a
 * context may not have selected, yet always runs graphs). */
struct loom__exec_table {
  loom__exec_device *items; /* dev_count entries; backend NULL until opened */
  int32_t count;
  loom__exec_device cpu0;
};

/* Guards every context's table while a device is opened (rare and short). */
static pthread_mutex_t exec_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether `id` is in the comma-separated list `aka`. */
static bool aka_has(const char *aka, const char *id) {
  size_t n = strlen(id);
  for (const char *p = aka; p && *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && strncasecmp(p, id, n) == 0) return true;
    p = end ? end + 1 : NULL;
  }
  return false;
}

static int32_t find_device(const loom__devices *t, const char *id) {
  for (int32_t i = 0; i < t->dev_count; i++)
    if (strcasecmp(t->dev[i].id, id) == 0 || aka_has(t->dev[i].aka, id)) return i;
  return -1;
}

static loom_status not_found(const loom__devices *t, const char *id) {
  char list[256];
  size_t n = 0;
  list[0] = '\0';
  for (int32_t i = 0; i < t->dev_count && n < sizeof list; i++)
    n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", t->dev[i].id);
  const char *names[64];
  int k = 0;
  for (int32_t i = 0; i < t->dev_count && k < 64; i++) names[k++] = t->dev[i].id;
  char hint[96];
  loom__did_you_mean(id, names, k, hint, sizeof hint);
  return loom__error(LOOM_ERR_NOT_FOUND, "device %s is not in this context (it has: %s)%s", id, list, hint);
}

/* The memory node device i (-1: cpu0 outside the table) allocates from in the context's
 * manager. cpu0 uses its host node, or the first host node when the context did not select
 * it. */
static loom_status device_node(loom_context *ctx, int32_t i, int32_t *out_node) {
  *out_node = 0;
  if (i < 0) return LOOM_OK;
  const loom__device *d = &ctx->devices.dev[i];
  loom_status s = loom_mem_device_node(ctx->memory, i, out_node);
  if (s == LOOM_ERR_NOT_FOUND)
    return loom__error(LOOM_ERR_UNSUPPORTED,
                       "device %s (%s) cannot run graphs in this build: the memory manager does not manage "
                       "its memory yet",
                       d->id, d->name ? d->name : "");
  return s;
}

/* Opens device i of the table (-1: cpu0 outside it) into e; the caller holds exec_lock or is
 * making the context. */
static loom_status open_device(loom_context *ctx, int32_t i, loom__exec_device *e) {
  if (e->backend) return LOOM_OK;
  const loom__device *d = i >= 0 ? &ctx->devices.dev[i] : NULL;
  const loom__backend *be = d ? loom__backend_compute_for(d) : &loom__cpu_backend;
  if (!be)
    return loom__error(LOOM_ERR_UNSUPPORTED,
                       "device %s (%s) cannot run graphs in this build: no compute backend drives it yet",
                       d->id, d->name ? d->name : "");
  int32_t node = 0;
  loom_status s = device_node(ctx, i, &node);
  void *state = NULL;
  if (!s && be->open) s = be->open(d, ctx->memory, node, &state);
  if (s) return s;
  snprintf(e->id, sizeof e->id, "%s", d ? d->id : "cpu0");
  e->dev = state;
  e->memory = ctx->memory;
  e->node = node;
  e->backend = be;
  return LOOM_OK;
}

loom_status loom__context_exec_init(loom_context *ctx) {
  struct loom__exec_table *t = loom__calloc(1, sizeof *t);
  if (t) t->items = loom__calloc((size_t)LOOM_MAX(ctx->devices.dev_count, 1), sizeof *t->items);
  if (!t || !t->items) {
    loom__free(t);
    return loom__oom("the context's devices");
  }
  t->count = ctx->devices.dev_count;
  ctx->exec = t;
  /* cpu0 opens without allocating anything: ready now, so no run ever has to make it. */
  int32_t i = find_device(&ctx->devices, "cpu0");
  return open_device(ctx, i, i >= 0 ? &t->items[i] : &t->cpu0);
}

loom_status loom__context_exec_device(loom_context *ctx, const char *id,
                                      const loom__exec_device **out_device) {
  if (out_device) *out_device = NULL;
  if (!ctx || !id || !out_device || !ctx->exec)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom__context_exec_device: NULL argument");
  int32_t i = find_device(&ctx->devices, id);
  if (i < 0 && strcasecmp(id, "cpu0") != 0) return not_found(&ctx->devices, id);
  loom__exec_device *e = i >= 0 ? &ctx->exec->items[i] : &ctx->exec->cpu0;
  pthread_mutex_lock(&exec_lock);
  loom_status s = open_device(ctx, i, e);
  pthread_mutex_unlock(&exec_lock);
  if (!s) *out_device = e;
  return s;
}

void loom__context_exec_release(loom_context *ctx) {
  if (!ctx || !ctx->exec) return;
  for (int32_t i = 0; i < ctx->exec->count; i++) {
    loom__exec_device *e = &ctx->exec->items[i];
    if (e->backend && e->backend->close) e->backend->close(e->dev);
  }
  loom__free(ctx->exec->items);
  loom__free(ctx->exec);
  ctx->exec = NULL;
}
