/* The public queries of loom/device.h over a context's device table (devices/devices.h):
 * devices, memory nodes, the host and the discovery notes. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "devices/devices.h"
#include "loom/internal/cli.h"
#include "loom/plan.h"
#include "runtime/context.h"

static const char *str(const char *s) {
  return s ? s : "";
}

int32_t loom_context_device_count(const loom_context *ctx) {
  return ctx ? ctx->devices.dev_count : 0;
}

loom_status loom_context_device_info(const loom_context *ctx, int32_t index, loom_device_info *out_info) {
  if (!out_info) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_context_device_info: out_info is NULL");
  memset(out_info, 0, sizeof *out_info);
  if (!ctx) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_context_device_info: ctx is NULL");
  if (index < 0 || index >= ctx->devices.dev_count)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "loom_context_device_info: index %d out of range (%d devices)", (int)index,
                       (int)ctx->devices.dev_count);
  const loom__device *d = &ctx->devices.dev[index];
  loom_device_info *o = out_info;
  o->id = d->id;
  o->also_known_as = d->aka;
  o->backends = d->backends;
  o->kind = d->kind;
  o->name = str(d->name);
  o->vendor = str(d->vendor);
  o->vendor_id = d->vendor_id;
  o->version = str(d->version);
  o->driver_version = str(d->driver_version);
  o->platform = str(d->platform);
  o->extensions = str(d->extensions);
  o->compute_units = d->compute_units;
  o->clock_mhz = d->clock_mhz;
  o->compute_capability_major = d->cc_major;
  o->compute_capability_minor = d->cc_minor;
  o->memory_bytes = d->memory_bytes;
  o->max_alloc_bytes = d->max_alloc_bytes;
  o->local_memory_bytes = d->local_memory_bytes;
  o->free_bytes = d->free_bytes;
  o->free_source = d->free_source ? d->free_source : "none";
  o->host_unified = d->host_unified;
  o->svm = d->svm;
  o->managed_memory = d->managed_memory;
  o->concurrent_managed_access = d->concurrent_managed_access;
  o->fp64 = d->fp64;
  o->fp16 = d->fp16;
  o->numa_node = d->numa_node;
  o->pci_bus_id = d->pci_bus_id;
  o->memory_node = d->memory_node;
  return LOOM_OK;
}

/* " (did you mean 'ocl0'?)" for the id of `ids` ("cpu0, ocl0": the ids a message lists) closest
 * to a misspelled `id`, or "". */
static void device_hint(const char *ids, const char *id, char *buf, size_t size) {
  char copy[256], *names[64], *save = NULL;
  int n = 0;
  snprintf(copy, sizeof copy, "%s", ids);
  for (char *t = strtok_r(copy, ", ", &save); t && n < 64; t = strtok_r(NULL, ", ", &save)) names[n++] = t;
  loom__did_you_mean(id, (const char *const *)names, n, buf, size);
}

loom_status loom_context_find_device(const loom_context *ctx, const char *id, int32_t *out_index) {
  if (!out_index)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_context_find_device: out_index is NULL");
  *out_index = -1;
  if (!ctx || !id)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_context_find_device: ctx or id is NULL");
  const loom__devices *t = &ctx->devices;
  if ((*out_index = loom__devices_find(t, id)) >= 0) return LOOM_OK;
  char ids[256] = "";
  size_t used = 0;
  for (int32_t i = 0; i < t->dev_count && used < sizeof ids; i++) {
    int w = snprintf(ids + used, sizeof ids - used, "%s%s", i ? ", " : "", t->dev[i].id);
    if (w > 0) used += (size_t)w;
  }
  char hint[96];
  device_hint(ids, id, hint, sizeof hint);
  return loom__error(LOOM_ERR_NOT_FOUND, "no device '%s' in this context (devices: %s)%s", id, ids, hint);
}

int32_t loom_context_memory_node_count(const loom_context *ctx) {
  return ctx ? ctx->devices.mem_count : 0;
}

loom_status loom_context_memory_node_info(const loom_context *ctx, int32_t index,
                                          loom_memory_node_info *out_info) {
  if (!out_info)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_context_memory_node_info: out_info is NULL");
  memset(out_info, 0, sizeof *out_info);
  if (!ctx) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_context_memory_node_info: ctx is NULL");
  if (index < 0 || index >= ctx->devices.mem_count)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "loom_context_memory_node_info: index %d out of range (%d memory nodes)", (int)index,
                       (int)ctx->devices.mem_count);
  const loom__memnode *m = &ctx->devices.mem[index];
  out_info->id = m->id;
  out_info->kind = m->kind;
  out_info->size_bytes = m->size_bytes;
  out_info->free_bytes = m->free_bytes;
  out_info->free_source = m->free_source ? m->free_source : "none";
  out_info->numa_os_index = m->numa_os_index;
  out_info->cores = m->cores;
  out_info->pus = m->pus;
  out_info->cpus = str(m->cpus);
  out_info->device_count = m->device_count;
  out_info->devices = m->devices;
  return LOOM_OK;
}

loom_status loom_context_host_info(const loom_context *ctx, loom_host_info *out_info) {
  if (!out_info) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_context_host_info: out_info is NULL");
  memset(out_info, 0, sizeof *out_info);
  if (!ctx) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_context_host_info: ctx is NULL");
  const loom__host *h = &ctx->devices.host;
  out_info->packages = h->packages;
  out_info->cores = h->cores;
  out_info->pus = h->pus;
  out_info->numa_nodes = h->numa_count;
  out_info->memory_bytes = h->memory_bytes;
  out_info->l1d_bytes = h->l1d_bytes;
  out_info->l2_bytes = h->l2_bytes;
  out_info->l3_bytes = h->l3_bytes;
  out_info->cpu_model = str(h->cpu_model);
  out_info->cpu_vendor = str(h->cpu_vendor);
  out_info->recorded = h->recorded;
  return LOOM_OK;
}

int32_t loom_context_note_count(const loom_context *ctx) {
  return ctx ? ctx->devices.notes.count : 0;
}

const char *loom_context_note(const loom_context *ctx, int32_t index) {
  if (!ctx || index < 0 || index >= ctx->devices.notes.count) return NULL;
  return ctx->devices.notes.items[index];
}

/* ---- runners against the devices found ------------------------------------------------- */

/* Whether the context can run a stage on `id`: one of its devices (id or alias), or cpu0,
 * which a plan runs on even where the selection left it out (runtime/backends.c). */
static bool has_runner_device(const loom_context *ctx, const char *id) {
  return strcasecmp(id, "cpu0") == 0 || loom__devices_find(&ctx->devices, id) >= 0;
}

/* Appends ", id" (or "id" first) to buf, truncating. */
static void append_id(char *buf, size_t size, const char *id) {
  if (!buf || size == 0) return;
  size_t used = strlen(buf);
  if (used < size) snprintf(buf + used, size - used, "%s%s", used ? ", " : "", id);
}

loom_status loom_runners_check_devices(const loom_context *ctx, loom_runner *runners, int32_t *n_runners,
                                       bool drop, char *dropped, size_t dropped_size) {
  if (dropped && dropped_size) dropped[0] = '\0';
  if (!ctx || !n_runners || *n_runners < 0 || (*n_runners > 0 && !runners))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_runners_check_devices: bad argument");
  int32_t kept = 0;
  for (int32_t i = 0; i < *n_runners; i++) {
    if (has_runner_device(ctx, runners[i].device)) {
      runners[kept++] = runners[i];
      continue;
    }
    if (drop) {
      append_id(dropped, dropped_size, runners[i].device);
      continue;
    }
    char ids[256] = "";
    if (loom__devices_find(&ctx->devices, "cpu0") < 0) append_id(ids, sizeof ids, "cpu0");
    for (int32_t d = 0; d < ctx->devices.dev_count; d++) append_id(ids, sizeof ids, ctx->devices.dev[d].id);
    char hint[96];
    device_hint(ids, runners[i].device, hint, sizeof hint);
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "runner %d: this machine has no device %s (it has: %s)%s",
                       (int)i, runners[i].device, ids, hint);
  }
  *n_runners = kept;
  return LOOM_OK;
}
