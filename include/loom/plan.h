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

#include "loom/export.h"
#include "loom/graph.h"
#include "loom/runtime.h"
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

/* ---- rewrites ------------------------------------------------------------------------- */

/* The rewrites, by the names --no-rewrite takes:
 *   distance          pairwise squared distance -> norms and a dot (clamped at 0)
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

typedef struct loom_optimize_options {
  const char *const *disabled; /* names of rewrites not to apply */
  int32_t n_disabled;
  int64_t limit; /* bytes the graph must fit for "chunk"; 0: no chunking */
  /* The slices of each streamed operand the chunk rewrite's loops hold
   * (loom_graph_loop_set_slices): 2 to double buffer (a device with memory of its own copies
   * the next piece's slice in while a piece computes), 1 where nothing would overlap (cpu0
   * reads host memory in place), so the pieces can be longer; 0: loom_graph_optimize_for_runners
   * chooses for its runners, and loom_graph_optimize takes LOOM_LOOP_SLICES_DEFAULT (2). */
  int32_t slices;
} loom_optimize_options;

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
typedef struct loom_stage_stats {
  int64_t estimated_peak_bytes;
  int64_t peak_bytes; /* as the runtime's allocator counted them */
  int64_t limit_bytes;
  double seconds;
} loom_stage_stats;

typedef struct loom_plan_stats {
  int32_t n_stages;
  loom_stage_stats *stages; /* owned; released by loom_plan_stats_deinit */
  int64_t peak_bytes;       /* the largest stage peak */
  double seconds;
} loom_plan_stats;

LOOM_API void loom_plan_stats_deinit(loom_plan_stats *stats);

/* Runs the plan's stages in order, each under its runner's limit (no stage's allocations
 * ever pass it, and a device holds no more than that, the values kept there for later stages
 * included). A device stage's results stay on its device for the stages that read them (the
 * memory manager copies them to another device, device to device where both are OpenCL
 * devices of one platform, or reads them back for cpu0), prefetched to the next stage's
 * device while the stage before it runs where the memory manager's prefetch policy says so
 * and the runner's limit leaves room; cpu0's pass in host memory, which no limit counts. Each
 * stage waits for its device at its end. Inputs and outputs as
 * loom_graph_run. `stats` (may be NULL, else zero-initialised) receives the measured peaks,
 * on failure too (the stages that ran, up to the one that failed): release it with
 * loom_plan_stats_deinit whatever the status.
 * A runner's limit is its device's, for every run sharing the context's memory manager: while
 * a stage runs, its limit caps its device's memory node limit (loom/memory.h, "Limits"), so
 * plans run from several threads on one context hold at most the smallest runner limit in
 * force on a device together; a stage that does not fit beside the others fails (nothing
 * waits), with OUT_OF_MEMORY naming the device's node.
 * Errors: as loom_graph_run; OUT_OF_MEMORY when a stage cannot fit its limit, or not beside
 * the stages of other runs on its device. */
LOOM_API loom_status loom_plan_run(loom_context *ctx, const loom_plan *plan, const loom_tensor *inputs,
                                   int32_t n_inputs, loom_tensor *outputs, int32_t n_outputs,
                                   loom_plan_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
