/* loom_sched_platform_from_context: a platform of this machine's devices, their memory from discovery,
 * their models and host links from the cache folder (loom-bench calibrate). The runtime's, not the
 * scheduler's: it reads the context, and the scheduler stays a pure function of its inputs. */
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "loom/runtime.h"
#include "loom/sched.h"
#include "runtime/share_run.h"

/* Whether `id` is in the comma-separated `list` (NULL: every id). */
static bool listed(const char *list, const char *id) {
  if (!list) return true;
  size_t n = strlen(id);
  for (const char *p = list; p && *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && strncasecmp(p, id, n) == 0) return true;
    p = end ? end + 1 : NULL;
  }
  return false;
}

/* Device d of ctx into *out, with its node's name in node_name ("host" for host memory). */
static loom_status one_device(const loom_context *ctx, const loom_device_info *info, loom_sched_device *out,
                              char *node_name) {
  memset(out, 0, sizeof *out);
  snprintf(out->id, sizeof out->id, "%s", info->id);
  /* The platform file's kinds name what drives a device (a PoCL device is an "opencl" one,
   * although a CPU). */
  const char *kind = info->backends & LOOM_BACKEND_CUDA     ? "cuda"
                     : info->backends & LOOM_BACKEND_OPENCL ? "opencl"
                                                            : "cpu";
  snprintf(out->kind, sizeof out->kind, "%s", kind);
  /* the shared runner's own test, so that a simulation places as the run does */
  out->host_cores = loom__share_on_host_cores(info);
  out->memory = info->memory_bytes > 0 ? info->memory_bytes : 1;
  loom_memory_node_info node;
  loom_status s = loom_context_memory_node_info(ctx, info->memory_node, &node);
  if (s) return s;
  bool own = node.kind == LOOM_MEMORY_DEVICE;
  snprintf(node_name, LOOM_SCHED_NAME_MAX, "%s", own ? node.id : "host");
  const char *driver = loom_sched_device_driver(info);
  if ((s = loom_sched_model_load(info->name, driver, &out->model))) {
    if (s == LOOM_ERR_NOT_FOUND)
      loom__error_prefix("%s (%s): no performance model yet (run `loom-bench calibrate`): ", info->id,
                         info->name);
    return s;
  }
  if (own && !(out->model.host_bandwidth > 0))
    return loom__error(LOOM_ERR_NOT_FOUND, "%s (%s): its model has no host link (run `loom-bench calibrate`)",
                       info->id, info->name);
  return LOOM_OK;
}

/* The node index of `name` among names[0..*n), added when new. */
static int32_t node_of(char (*names)[LOOM_SCHED_NAME_MAX], int32_t *n, const char *name) {
  for (int32_t i = 0; i < *n; i++) {
    if (strcmp(names[i], name) == 0) return i;
  }
  snprintf(names[*n], LOOM_SCHED_NAME_MAX, "%s", name);
  return (*n)++;
}

loom_status loom_sched_platform_from_context(const loom_context *ctx, const char *devices,
                                             loom_sched_platform **out_platform) {
  if (out_platform) *out_platform = NULL;
  if (!ctx || !out_platform) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "platform: NULL argument");
  int32_t n = loom_context_device_count(ctx), nd = 0, nn = 1, nl = 0;
  loom_sched_device *devs = loom__calloc((size_t)n + 1, sizeof *devs);
  loom_sched_link *links = loom__calloc((size_t)n + 1, sizeof *links);
  char(*names)[LOOM_SCHED_NAME_MAX] = loom__calloc((size_t)n + 2, sizeof *names);
  const char **name_ptrs = loom__calloc((size_t)n + 2, sizeof *name_ptrs);
  loom_status s = devs && links && names && name_ptrs ? LOOM_OK : loom__oom("platform");
  if (!s) snprintf(names[0], LOOM_SCHED_NAME_MAX, "host");
  for (int32_t i = 0; !s && i < n; i++) {
    loom_device_info info;
    char node_name[LOOM_SCHED_NAME_MAX];
    if ((s = loom_context_device_info(ctx, i, &info)) || !listed(devices, info.id)) continue;
    if ((s = one_device(ctx, &info, &devs[nd], node_name))) break;
    int32_t before = nn;
    devs[nd].node = node_of(names, &nn, node_name);
    if (nn > before) {
      links[nl++] = (loom_sched_link){.a = devs[nd].node,
                                      .b = 0,
                                      .bandwidth = devs[nd].model.host_bandwidth,
                                      .latency = devs[nd].model.host_latency};
    }
    nd++;
  }
  if (!s && nd == 0)
    s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "platform: %s names no device of this machine",
                    devices ? devices : "(all)");
  for (int32_t i = 0; !s && i < nn; i++) name_ptrs[i] = names[i];
  if (!s) s = loom_sched_platform_create(name_ptrs, nn, devs, nd, links, nl, out_platform);
  loom__free(devs);
  loom__free(links);
  loom__free(names);
  loom__free(name_ptrs);
  return s;
}
