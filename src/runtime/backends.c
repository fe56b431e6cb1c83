/* Which compute backend runs a device, and the devices a context has opened for running
 * graphs (loom__context_exec_device). This is the one list where the compute backends built
 * in are named: conditional compilation stays here and in CMake (cmake/opencl.cmake sets
 * LOOM_HAVE_OPENCL), not inside the executor's functions. */
#include <pthread.h>
#include <string.h>
#include <strings.h>

#include "runtime/context.h"
#include "runtime/exec.h"

/* The compute backend that drives `d`, or NULL. cpu0 is the host; an OpenCL device (also one
 * that CUDA lists first) runs through OpenCL. CUDA devices have no compute backend yet
 * (TODO(#7): backends/cuda). */
static const loom__backend *backend_for(const loom__device *d) {
  if (d->backends & LOOM_BACKEND_CPU) return &loom__cpu_backend;
#if LOOM_HAVE_OPENCL
  if ((d->backends & LOOM_BACKEND_OPENCL) && d->cl_device) return &loom__opencl_backend;
#endif
  return NULL;
}

/* The opened devices of one context, by the index of the device table. */
struct loom__exec_table {
  loom__exec_device *items; /* dev_count entries; backend NULL until opened */
  int32_t count;
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
  return loom__error(LOOM_ERR_NOT_FOUND, "device %s is not in this context (it has: %s)", id, list);
}

/* Opens device i of the table; the caller holds exec_lock. */
static loom_status open_device(loom_context *ctx, int32_t i, const loom__exec_device **out) {
  const loom__device *d = &ctx->devices.dev[i];
  if (!ctx->exec) {
    struct loom__exec_table *t = loom__calloc(1, sizeof *t);
    if (t) t->items = loom__calloc((size_t)LOOM_MAX(ctx->devices.dev_count, 1), sizeof *t->items);
    if (!t || !t->items) {
      loom__free(t);
      return loom__oom("the context's devices");
    }
    t->count = ctx->devices.dev_count;
    ctx->exec = t;
  }
  loom__exec_device *e = &ctx->exec->items[i];
  if (e->backend) {
    *out = e;
    return LOOM_OK;
  }
  const loom__backend *be = backend_for(d);
  if (!be)
    return loom__error(LOOM_ERR_UNSUPPORTED,
                       "device %s (%s) cannot run graphs in this build: no compute backend drives it yet",
                       d->id, d->name ? d->name : "");
  void *state = NULL;
  if (be->open) {
    loom_status s = be->open(d, &state);
    if (s) return s;
  }
  snprintf(e->id, sizeof e->id, "%s", d->id);
  e->dev = state;
  e->backend = be;
  *out = e;
  return LOOM_OK;
}

loom_status loom__context_exec_device(loom_context *ctx, const char *id,
                                      const loom__exec_device **out_device) {
  if (out_device) *out_device = NULL;
  if (!ctx || !id || !out_device)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom__context_exec_device: NULL argument");
  /* cpu0 needs no state (so nothing is allocated for it), and is always there, even in a
   * context that did not select it. */
  if (strcasecmp(id, "cpu0") == 0) {
    *out_device = &loom__exec_cpu0;
    return LOOM_OK;
  }
  int32_t i = find_device(&ctx->devices, id);
  if (i < 0) return not_found(&ctx->devices, id);
  pthread_mutex_lock(&exec_lock);
  loom_status s = open_device(ctx, i, out_device);
  pthread_mutex_unlock(&exec_lock);
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
