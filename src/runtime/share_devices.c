/* The devices a shared run may use (loom_share_runners, loom_share_plan_runners): loom/share.h.
 * The graph is rewritten and cut for them in the splitter (splitter/sharing.c). */
#include "runtime/share_run.h"

/* ---- devices ------------------------------------------------------------------------------ */

/* The limit `limits` gives device id (the smallest of the runners naming it), or `fallback`. */
static int64_t limit_of(const char *id, const loom_runner *limits, int32_t n_limits, int64_t fallback) {
  int64_t best = 0;
  for (int32_t i = 0; limits && i < n_limits; i++)
    if (strcasecmp(limits[i].device, id) == 0 && limits[i].limit > 0 && (best == 0 || limits[i].limit < best))
      best = limits[i].limit;
  return best > 0 ? best : fallback;
}

static loom_status add_runner(loom_context *ctx, const char *id, const loom_runner *limits, int32_t n_limits,
                              loom_runner *list, int32_t *n) {
  int32_t index = -1;
  loom_device_info info;
  loom_status s = loom_context_find_device(ctx, id, &index);
  if (!s) s = loom_context_device_info(ctx, index, &info);
  if (s) return s;
  for (int32_t i = 0; i < *n; i++)
    if (strcasecmp(list[i].device, info.id) == 0)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "device %s is named twice", info.id);
  loom_runner *r = &list[(*n)++];
  memset(r, 0, sizeof *r);
  snprintf(r->device, sizeof r->device, "%s", info.id);
  r->limit = limit_of(info.id, limits, n_limits, info.memory_bytes > 0 ? info.memory_bytes : INT64_MAX / 4);
  return LOOM_OK;
}

/* A device other than cpu0 that computes on the host's cores (an OpenCL CPU device, PoCL's):
 * beside cpu0 it adds no compute (auto, dmda's ranges and loom_share_plan_runners leave it out). */
bool loom__share_on_host_cores(const loom_device_info *info) {
  return strcasecmp(info->id, "cpu0") != 0 && info->kind == LOOM_DEVICE_CPU;
}

/* "auto": cpu0 first, then every other device a backend of this build runs, except OpenCL
 * devices of kind CPU (PoCL's): they compute on the host's cores, which cpu0 already keeps
 * busy, so beside it they only take cores from it (on 2 cores cpu0 with PoCL's two devices ran
 * kNN in twice the time cpu0 alone took), and a plan cut for devices that take no range is
 * cut for nothing. A list that names them runs them, under eager; dmda gives them no range
 * beside cpu0 (worker's host_cores). */
static loom_status auto_runners(loom_context *ctx, const loom_runner *limits, int32_t n_limits,
                                loom_runner *list, int32_t *n) {
  loom_status s = add_runner(ctx, "cpu0", limits, n_limits, list, n);
  for (int32_t i = 0; !s && i < loom_context_device_count(ctx); i++) {
    loom_device_info info;
    const loom__exec_device *dev;
    if (loom_context_device_info(ctx, i, &info) || strcasecmp(info.id, "cpu0") == 0 ||
        loom__share_on_host_cores(&info))
      continue;
    if (loom__context_exec_device(ctx, info.id, &dev) == LOOM_OK)
      s = add_runner(ctx, info.id, limits, n_limits, list, n);
  }
  return s;
}

static loom_status list_runners(loom_context *ctx, const char *devices, const loom_runner *limits,
                                int32_t n_limits, loom_runner *list, int32_t *n) {
  const char *p = devices;
  while (*p) {
    size_t len = strcspn(p, ",");
    char id[32];
    if (len == 0 || len >= sizeof id)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "devices '%s': an empty or overlong id at column %d",
                         devices, (int)(p - devices) + 1);
    snprintf(id, sizeof id, "%.*s", (int)len, p);
    const loom__exec_device *dev;
    loom_status s = loom__context_exec_device(ctx, id, &dev);
    if (!s) s = add_runner(ctx, id, limits, n_limits, list, n);
    if (s) return s;
    p += len + (p[len] == ',');
  }
  return LOOM_OK;
}

loom_status loom_share_runners(loom_context *ctx, const char *devices, const loom_runner *limits,
                               int32_t n_limits, loom_runner **out_runners, int32_t *out_count) {
  if (out_runners) *out_runners = NULL;
  if (out_count) *out_count = 0;
  if (!ctx || !out_runners || !out_count)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_share_runners: NULL argument");
  if (!devices) devices = "auto";
  int32_t cap = loom_context_device_count(ctx) + 1, n = 0;
  loom_runner *list = malloc(sizeof *list * (size_t)cap);
  if (!list) return loom__oom("the devices' runners");
  loom_status s = strcmp(devices, "auto") == 0 ? auto_runners(ctx, limits, n_limits, list, &n)
                  : *devices                   ? list_runners(ctx, devices, limits, n_limits, list, &n)
                             : loom__error(LOOM_ERR_INVALID_ARGUMENT, "devices: an empty list");
  if (s) {
    loom__error_prefix("devices '%s': ", devices);
    free(list);
    return s;
  }
  *out_runners = list;
  *out_count = n;
  return LOOM_OK;
}

/* ---- planning for several devices ------------------------------------------------------------ */

/* Whether device `id` computes on the host's cores beside cpu0. */
static loom_status computes_on_host_cores(loom_context *ctx, const char *id, bool *out) {
  int32_t index = 0;
  loom_device_info info;
  loom_status s = loom_context_find_device(ctx, id, &index);
  if (!s) s = loom_context_device_info(ctx, index, &info);
  if (!s) *out = loom__share_on_host_cores(&info);
  return s;
}

loom_status loom_share_plan_runners(loom_context *ctx, const loom_runner *runners, int32_t n,
                                    loom_sched_policy policy, loom_runner *out, int32_t *out_count,
                                    char *left_out, size_t left_out_size) {
  if (left_out && left_out_size) left_out[0] = '\0';
  if (out_count) *out_count = 0;
  if (!ctx || !runners || !out || !out_count || n < 1 || (left_out && !left_out_size))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_share_plan_runners: NULL argument or no runners");
  bool drop = policy == LOOM_SCHED_DMDA && strcasecmp(runners[0].device, "cpu0") == 0;
  size_t at = 0;
  for (int32_t i = 0; i < n; i++) {
    bool host = false;
    loom_status s = drop ? computes_on_host_cores(ctx, runners[i].device, &host) : LOOM_OK;
    if (s) return s;
    if (!host) {
      out[(*out_count)++] = runners[i];
      continue;
    }
    if (left_out && at < left_out_size)
      at += (size_t)snprintf(left_out + at, left_out_size - at, "%s%s", at ? "," : "", runners[i].device);
  }
  return LOOM_OK;
}
