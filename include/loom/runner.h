/* Runners (a device and the most bytes a stage placed on it may hold) and byte sizes as every
 * command line and environment variable writes them. */
#ifndef LOOM_RUNNER_H
#define LOOM_RUNNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "loom/context.h"
#include "loom/export.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A runner: a device and the most bytes a stage placed on it may hold. */
typedef struct loom_runner {
  char device[32]; /* "cpu0", "ocl1" */
  int64_t limit;   /* bytes; > 0 */
} loom_runner;

/* Parses "cpu0:64MiB,ocl0:512MiB" (a device may repeat) into a new array the caller frees
 * with free(). Errors: INVALID_ARGUMENT naming the bad entry and the column where it fails. */
LOOM_API loom_status loom_runners_parse(const char *spec, loom_runner **out_runners, int32_t *out_count);
/* Parses a byte size ("123", "64KiB", "512MiB", "1.5GiB", "2GB"). INVALID_ARGUMENT with the
 * position of the first bad character. */
LOOM_API loom_status loom_bytes_parse(const char *text, int64_t *out_bytes);
/* Writes a byte count as Loom's messages do ("512 B", "1.50 GiB": binary units, two decimals)
 * into buf (size bytes, truncated to fit; NUL-terminated when size > 0) and returns buf. */
LOOM_API char *loom_bytes_format(int64_t bytes, char *buf, size_t size);

/* Runners from memory limits as LOOM_MEM_LIMIT writes them ("ocl0:256MiB,cpu0:4GiB", see
 * loom/memory.h): one runner per device named (cpuN, oclN, cudaN), in the order first named,
 * with its limit (the last one given, as the memory manager applies them). A memory node
 * that is no device (host0) makes no runner: its limit holds for whatever allocates there.
 * `limits` NULL reads the LOOM_MEM_LIMIT environment variable; unset, empty or naming no
 * device gives no runners (*out_runners NULL, *out_count 0). This is what the tools run with
 * when no runners are given, so that LOOM_MEM_LIMIT=cpu0:8MiB plans stages that fit 8 MiB.
 * The caller frees *out_runners with free().
 * Errors: INVALID_ARGUMENT (text that does not parse, naming LOOM_MEM_LIMIT, or "limits" when
 * given here, the item and its column; a device limited to 0 bytes), OUT_OF_MEMORY. */
LOOM_API loom_status loom_runners_from_mem_limits(const char *limits, loom_runner **out_runners,
                                                  int32_t *out_count);

/* Lowers each runner's limit to the memory limit `limits` (as loom_runners_from_mem_limits;
 * NULL reads LOOM_MEM_LIMIT) gives its device, where that is lower, so that no stage is
 * planned bigger than the memory manager lets the device hold. Devices are matched by id,
 * case-insensitively; a node id (host0) matches no runner. *out_lowered (may be NULL) is the
 * number of runners lowered. Errors: as loom_runners_from_mem_limits (the runners are then
 * unchanged); INVALID_ARGUMENT for n_runners > 0 with NULL runners. */
LOOM_API loom_status loom_runners_fit_mem_limits(loom_runner *runners, int32_t n_runners, const char *limits,
                                                 int32_t *out_lowered);

/* Checks runners against the devices of `ctx` (ids or aliases, case-insensitive; cpu0 is
 * always there). The rule the tools apply (README "Environment variables"): a device this
 * machine lacks is an error where the user named it as a runner (--runners), and ignored with a
 * note where it comes from LOOM_MEM_LIMIT, an environment many programs share.
 *   drop false: INVALID_ARGUMENT for the first runner whose device ctx lacks, naming the runner
 *     (from 0), its device and the ids ctx has ("runner 0: this machine has no device cpu9 (it
 *     has: cpu0, ocl0)"); nothing is changed.
 *   drop true: those runners are removed in place (the others keep their order), *n_runners
 *     is lowered, and `dropped` (dropped_size bytes, may be NULL) lists their ids ("cpu9,
 *     ocl7"; "" when none).
 * Errors: INVALID_ARGUMENT (as above; NULL ctx or n_runners, NULL runners with *n_runners > 0). */
LOOM_API loom_status loom_runners_check_devices(const loom_context *ctx, loom_runner *runners,
                                                int32_t *n_runners, bool drop, char *dropped,
                                                size_t dropped_size);

/* The runner a device gets when the user gives no limit: what it can hold now, so that a graph
 * larger than the machine is planned to fit instead of failing at its first allocation past the
 * memory there is (loom-run without --limit). The limit is seven eighths of the device's free
 * memory (an eighth left for what a run holds outside its runners' limits, its inputs and
 * results in host memory, and for other programs): for host memory (cpu0, and devices that
 * share it, at most their own size) MemAvailable from /proc/meminfo read now, else sysinfo;
 * for a device's own memory the free memory its driver reported when the context found it
 * (cuMemGetInfo, CL_DEVICE_GLOBAL_FREE_MEMORY_AMD), else its global memory size, less what the
 * context's memory manager holds there now; at most the memory node's limit (LOOM_MEM_LIMIT,
 * loom_mem_set_limit). *out_runner gets the device's id (an alias is resolved) and the limit;
 * *out_source (may be NULL) a static string saying where the figure came from ("7/8 of
 * MemAvailable in /proc/meminfo", "7/8 of cuMemGetInfo's free memory, less what Loom holds",
 * "7/8 of the global memory size, less what Loom holds", "the memory node's limit (LOOM_MEM_LIMIT
 * or loom_mem_set_limit)"). Thread safety: any thread. Errors: INVALID_ARGUMENT (NULL ctx, device or
 * out_runner), NOT_FOUND (no such device in ctx), UNAVAILABLE (free memory that cannot be
 * read), OUT_OF_MEMORY (nothing free, naming the device, its free bytes and the source). */
LOOM_API loom_status loom_runner_default(loom_context *ctx, const char *device, loom_runner *out_runner,
                                         const char **out_source);

#ifdef __cplusplus
}
#endif
#endif
