/* Memory estimates, memory-saving rewrites, and plans of stages (shared/IR.md: "Memory model",
 * "Rewrites", "Stages and plans").
 *
 * The estimator models exactly what Loom's executor allocates: a value owns storage unless it
 * is a view (fill, broadcast, transpose, slice, reshape of contiguous data); storage is
 * allocated when the value is produced, counted at its requested byte size (the 64-byte
 * alignment padding is not counted, on either side), and freed right after its last reader;
 * inputs are held from the start until their last reader; outputs until the end; an op's
 * temporaries (dot 1x its output, conv 2x, fourier 2x, reductions, argmax/argmin and topk 1x)
 * are allocated for the duration of the op. No op writes in place over its input.
 */
#ifndef LOOM_PLAN_H
#define LOOM_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "loom/context.h"
#include "loom/export.h"
#include "loom/graph.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- estimates ------------------------------------------------------------------------ */

typedef struct loom_estimate_step {
  int32_t op;              /* op index in the graph */
  int64_t output_logical;  /* bytes of its results as a naive program would hold them */
  int64_t output_physical; /* bytes of its results that own storage (0 for a view) */
  int64_t temporary;       /* its temporaries */
  int64_t live_before;     /* physical bytes held across this step, not counting its results */
  int64_t peak;            /* live_before + output_physical + temporary */
} loom_estimate_step;

typedef struct loom_estimate {
  int64_t input_bytes;     /* the graph's inputs (parameters) */
  int64_t logical_bytes;   /* sum of every op's logical output bytes */
  int64_t physical_bytes;  /* sum of every op's physical output bytes */
  int64_t temporary_bytes; /* sum of every op's temporaries */
  int64_t total_bytes;     /* physical_bytes + temporary_bytes: as if nothing were freed */
  int64_t peak_bytes;      /* the largest step peak (at least input_bytes held at start) */
  int32_t peak_step;       /* index into steps of the peak; -1 when the graph has no ops */
  int32_t n_steps;
  loom_estimate_step *steps; /* one per op, in schedule order */
} loom_estimate;

/* Estimates `graph` for `schedule` (n_ops op indices, a topological order; NULL: the graph's
 * own order) into *out, which the caller releases with loom_estimate_deinit.
 * Errors: INVALID_ARGUMENT (graph does not verify, schedule not a topological order),
 * OUT_OF_MEMORY. */
LOOM_API loom_status loom_graph_estimate(const loom_graph *graph, const int32_t *schedule,
                                         loom_estimate *out);
LOOM_API void loom_estimate_deinit(loom_estimate *estimate);

/* Logical and physical bytes of one value (physical 0 for a view). Either out may be NULL. */
LOOM_API loom_status loom_value_bytes(const loom_graph *graph, loom_value v, int64_t *out_logical,
                                      int64_t *out_physical);

/* ---- runners -------------------------------------------------------------------------- */

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

/* ---- rewrites ------------------------------------------------------------------------- */

/* The rewrites, by the names --no-rewrite takes:
 *   distance          pairwise squared distance -> norms and a dot (clamped at 0), or,
 *                     under a limit at small dimensions, the direct form summed feature by
 *                     feature (exact to rounding; see loom_distance_form)
 *   dot_transpose     transposes of dot operands folded into the dot
 *   tile_broadcast    tile of size-1 axes -> broadcast view
 *   reduce_broadcast  a reduction over a broadcast axis -> a multiply
 *   dot_chain         dot chains in matrix-chain order
 *   sum_broadcast     sums of broadcasts reordered to add small operands first
 *   schedule          the order of independent ops chosen to lower the peak
 *   chunk             ops or chains over the limit computed in pieces (needs a limit)
 *   fuse              elementwise ops and the reduction consuming them as one fused op
 *                     (docs/ir-fusion.md), in loop bodies too; runs last */
#define LOOM_REWRITE_NAMES                                                                         \
  "distance", "dot_transpose", "tile_broadcast", "reduce_broadcast", "dot_chain", "sum_broadcast", \
      "schedule", "chunk", "fuse"

/* Which form the "distance" rewrite gives a pairwise squared distance (README, "Exact
 * distances"). AUTO lets its cost model choose: the direct form sum_k (a_k - b_k)^2, exact to
 * rounding, where the graph is chunked under the limit anyway and the point dimension is small
 * enough that the expanded form's dot brings no speed; else the expanded form
 * |a|^2 + |b|^2 - 2 a.b^T. The other two force one form (for benchmarks and tests). */
typedef enum loom_distance_form {
  LOOM_DISTANCE_AUTO = 0,
  LOOM_DISTANCE_EXPANDED,
  LOOM_DISTANCE_DIRECT,
} loom_distance_form;

typedef struct loom_optimize_options {
  const char *const *disabled; /* names of rewrites not to apply */
  int32_t n_disabled;
  int64_t limit; /* bytes the graph must fit for "chunk"; 0: no chunking */
  /* Fusion before chunking: where the graph passes the limit, the fuse rewrite is first tried
   * on the whole graph, and where the fused graph fits, nothing is chunked (one fused op over
   * the whole space instead of a loop of small pieces: a GPU gets one large kernel). This is
   * only safe where every fused body runs fused wherever the plan may place it, since a body
   * run op by op would need its intermediates whole; which bodies do is the backends' to say,
   * so this callback says it (true: runs fused on every backend). NULL: never taken, chunk
   * then fuse as before. The runtime's answer is loom_fused_body_runs_everywhere. */
  bool (*fused_runs)(const loom_graph *body);
  loom_distance_form distance_form; /* the "distance" rewrite's form; AUTO (0) by default */
  /* The slices of each streamed operand the chunk rewrite's loops hold
   * (loom_graph_loop_set_slices): 2 to double buffer (a device with memory of its own copies
   * the next piece's slice in while a piece computes), 1 where nothing would overlap (cpu0
   * reads host memory in place), so the pieces can be longer; 0: loom_graph_optimize_for_runners
   * chooses for its runners, and loom_graph_optimize takes LOOM_LOOP_SLICES_DEFAULT (2). */
  int32_t slices;
} loom_optimize_options;

/* True when every backend of this build runs the fused body `body` (the body graph of a
 * LOOM_OP_FUSED op, docs/ir-fusion.md) fused, with its operands dense: the cpu evaluator and
 * the GPU kernel generator both accept it (f16/bf16 and complex bodies, for instance, run op by
 * op). Meant for loom_optimize_options.fused_runs; where it answers false, loom_last_error
 * says why. */
LOOM_API bool loom_fused_body_runs_everywhere(const loom_graph *body);

LOOM_API void loom_optimize_options_init(loom_optimize_options *opts);

typedef struct loom_rewrite_entry {
  char name[32];       /* the rewrite's name */
  char detail[256];    /* what it matched, in words and with value names */
  int64_t bytes_saved; /* estimated peak before minus after this application */
} loom_rewrite_entry;

typedef struct loom_rewrite_report {
  int32_t count;
  loom_rewrite_entry *entries; /* owned; released by loom_rewrite_report_deinit */
} loom_rewrite_report;

LOOM_API void loom_rewrite_report_deinit(loom_rewrite_report *report);

/* Applies the enabled rewrites to `graph` (match and replace, reorder, schedule, then chunk
 * when opts->limit > 0) and returns the new graph in *out_graph (caller owns; the input is
 * not changed). `report` (may be NULL) receives one entry per application; initialise it to
 * zero. Results equal the input graph's within IR.md's tolerance. Errors: INVALID_ARGUMENT
 * (graph does not verify, unknown rewrite name), OUT_OF_MEMORY (including: an op that cannot
 * fit opts->limit even when chunked, with the op, its need and the limit in the message). */
LOOM_API loom_status loom_graph_optimize(const loom_graph *graph, const loom_optimize_options *opts,
                                         loom_graph **out_graph, loom_rewrite_report *report);

/* Prepares `graph` for `runners`: rewrites it (opts may be NULL; its limit is ignored) with
 * chunking to the largest runner limit. Unless opts->slices says otherwise, its loops hold one
 * slice of a streamed operand where every runner is a cpu device (host memory: no copy to
 * overlap), two where one has memory of its own (double buffering), or one there too with
 * LOOM_WRITE_AHEAD=0 (the next slice is then written behind the piece, not beside it). Where
 * chunking cannot fit the whole graph under that limit (it holds more at once than any runner,
 * though its parts fit), it rewrites without chunking instead, so that
 * loom_plan_split_by_memory cuts it into stages; `note` (may be NULL) then says why, else it
 * is set to "". With no runners, no chunking. Caller owns *out_graph. Errors: as
 * loom_graph_optimize. */
LOOM_API loom_status loom_graph_optimize_for_runners(const loom_graph *graph, const loom_runner *runners,
                                                     int32_t n_runners, const loom_optimize_options *opts,
                                                     loom_graph **out_graph, loom_rewrite_report *report,
                                                     char *note, size_t note_size);

/* ---- plans ---------------------------------------------------------------------------- */

typedef struct loom_plan loom_plan;

/* Cuts `graph` (already optimized; schedule = its op order) by memory: fills the current
 * runner's stage in schedule order and closes it when the next op would take the stage's
 * estimated peak over that runner's limit, going on with the next runner (back to the first
 * after the last). An op that alone exceeds every limit is chunked first; one that cannot be
 * chunked is OUT_OF_MEMORY naming the op, its need and the largest limit. Caller owns *out. */
LOOM_API loom_status loom_plan_split_by_memory(const loom_graph *graph, const loom_runner *runners,
                                               int32_t n_runners, loom_plan **out_plan);

/* The caller's cut predicate: sees each op in schedule order with the accumulator and
 * returns true to cut before it; it updates *acc in place to the next accumulator. */
typedef bool (*loom_split_fn)(const loom_graph *graph, int32_t op_index, void *acc);

/* Cuts `graph` where fn says; stage i runs on runners[i % n_runners]. Caller owns *out. */
LOOM_API loom_status loom_plan_split(const loom_graph *graph, loom_split_fn fn, void *acc,
                                     const loom_runner *runners, int32_t n_runners, loom_plan **out_plan);
LOOM_API void loom_plan_destroy(loom_plan *plan);

/* One stage, as plain data valid while the plan lives. Value ids are the graph's. */
typedef struct loom_stage_info {
  int32_t runner;     /* index into the plan's runners */
  const char *device; /* runner device id */
  int64_t limit;      /* runner limit, bytes */
  int32_t n_ops;
  const int32_t *ops; /* op indices of the plan's graph, in order */
  int32_t n_inputs;
  const int32_t *inputs; /* value ids the stage reads from outside */
  int32_t n_outputs;
  const int32_t *outputs;  /* value ids later stages or the return need */
  int64_t estimated_peak;  /* the stage's estimated peak bytes */
  const loom_graph *graph; /* the stage as a graph of its own */
} loom_stage_info;

LOOM_API int32_t loom_plan_stage_count(const loom_plan *plan);
LOOM_API loom_status loom_plan_stage(const loom_plan *plan, int32_t i, loom_stage_info *out);
/* The graph the plan cuts (owned by the plan). */
LOOM_API const loom_graph *loom_plan_graph(const loom_plan *plan);
/* Human-readable listing of the stages. */
LOOM_API loom_status loom_plan_print(const loom_plan *plan, FILE *stream);

/* Measured figures of one stage of a run. */
#ifdef __cplusplus
}
#endif
#endif
