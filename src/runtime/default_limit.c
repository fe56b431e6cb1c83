/* The default limit of a device: what it can hold now (issue 32). A run given no limit plans
 * for it, so that a graph larger than the machine is cut to fit rather than failing when its
 * first allocation passes the memory there is. */
#include <string.h>
#include <sys/sysinfo.h>

#include "devices/devices.h"
#include "loom/memory.h"
#include "loom/plan.h"

/* What the host can give now: MemAvailable (the kernel's estimate of what can be allocated
 * without swapping, page cache it can drop included), else sysinfo's free and buffer memory. */
static int64_t host_free(const char **source) {
  int64_t bytes = loom__meminfo_bytes("/proc/meminfo", "MemAvailable");
  if (bytes >= 0) {
    *source = "7/8 of MemAvailable in /proc/meminfo";
    return bytes;
  }
  struct sysinfo si;
  if (sysinfo(&si) != 0) return -1;
  *source = "7/8 of sysinfo's free and buffer memory";
  return (int64_t)(si.freeram + si.bufferram) * (int64_t)si.mem_unit;
}

/* The device's free memory now and where the figure comes from. Host memory (cpu0, PoCL, an
 * integrated GPU) is read now, and already leaves out what Loom holds; a device's own memory
 * is what its driver said was free when the context found it, or its size where it says
 * nothing, less what the context's memory manager holds there now. */
static int64_t device_free(loom_context *ctx, int32_t index, const loom_device_info *info,
                           const char **source) {
  if (info->host_unified) {
    int64_t bytes = host_free(source);
    return strcmp(info->id, "cpu0") == 0 || bytes < 0 ? bytes : LOOM_MIN(bytes, info->memory_bytes);
  }
  loom_mem_manager *m = NULL;
  int32_t node = -1;
  loom_mem_node_stats ms;
  memset(&ms, 0, sizeof ms);
  if (loom_context_memory(ctx, &m) == LOOM_OK && loom_mem_device_node(m, index, &node) == LOOM_OK)
    loom_mem_stats(m, node, &ms);
  if (info->free_bytes >= 0) {
    *source = strcmp(info->free_source, "cuMemGetInfo") == 0
                  ? "7/8 of cuMemGetInfo's free memory, less what Loom holds"
                  : "7/8 of the driver's free memory, less what Loom holds";
    return info->free_bytes - ms.in_use;
  }
  *source = "7/8 of the global memory size, less what Loom holds";
  return info->memory_bytes - ms.in_use;
}

loom_status loom_runner_default(loom_context *ctx, const char *device, loom_runner *out_runner,
                                const char **out_source) {
  if (out_source) *out_source = NULL;
  if (!ctx || !device || !out_runner)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_runner_default: NULL argument");
  memset(out_runner, 0, sizeof *out_runner);
  int32_t index = -1;
  loom_device_info info;
  loom_status s = loom_context_find_device(ctx, device, &index);
  if (!s) s = loom_context_device_info(ctx, index, &info);
  if (s) return s;
  const char *source = "none";
  int64_t free_bytes = device_free(ctx, index, &info, &source);
  if (free_bytes < 0) return loom__error(LOOM_ERR_UNAVAILABLE, "%s: its free memory cannot be read", info.id);
  /* An eighth is left for what a run holds outside its runners' limits (its inputs and results
   * in host memory) and for what other programs take meanwhile. */
  int64_t limit = free_bytes / 8 * 7;
  loom_mem_manager *m = NULL;
  int32_t node = -1;
  loom_mem_node_stats ms;
  if (loom_context_memory(ctx, &m) == LOOM_OK && loom_mem_device_node(m, index, &node) == LOOM_OK &&
      loom_mem_stats(m, node, &ms) == LOOM_OK && ms.limit < limit) {
    limit = ms.limit; /* LOOM_MEM_LIMIT or loom_mem_set_limit: lower still */
    source = "the memory node's limit (LOOM_MEM_LIMIT or loom_mem_set_limit)";
  }
  if (limit <= 0) {
    char b[32];
    return loom__error(LOOM_ERR_OUT_OF_MEMORY, "%s has no memory free (%s free, from %s)", info.id,
                       loom_bytes_format(free_bytes, b, sizeof b), source);
  }
  snprintf(out_runner->device, sizeof out_runner->device, "%s", info.id);
  out_runner->limit = limit;
  if (out_source) *out_source = source;
  return LOOM_OK;
}
