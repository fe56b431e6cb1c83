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
#include "loom/memory.h"
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
typedef struct loom_stage_stats {
  int64_t estimated_peak_bytes;
  int64_t peak_bytes; /* as the runtime's allocator counted them */
  int64_t limit_bytes;
  double seconds;
} loom_stage_stats;

/* One try of recovering a stage that ran out of memory (loom_plan_run_options.recover). */
typedef struct loom_plan_recovery {
  int32_t stage;       /* the plan's stage that ran out of memory */
  char device[32];     /* its runner's device */
  int32_t attempt;     /* 1 for the first try of this stage, up to loom_plan_run_options.recover_tries */
  int32_t tries;       /* recover_tries: the most there may be */
  int64_t allocation;  /* the stage's allocation that failed, counted from 1 in the failed run */
  int64_t limit_bytes; /* what the stage was re-planned for */
  int64_t free_bytes;  /* the device's free memory as the memory manager counted it then */
  int32_t n_stages;    /* stages of the re-plan (0 when re-planning itself failed) */
  int64_t estimated_peak_bytes; /* the re-plan's largest stage estimate */
  int64_t peak_bytes;           /* its measured peak (a failed one: up to its failure) */
  bool succeeded;               /* the re-plan ran to the end */
  char error[256];              /* what failed: the out-of-memory message that caused this try */
} loom_plan_recovery;

typedef struct loom_plan_stats {
  int32_t n_stages;
  loom_stage_stats *stages; /* owned; released by loom_plan_stats_deinit */
  int64_t peak_bytes;       /* the largest stage peak */
  double seconds;
  int32_t n_recoveries;           /* tries of recovery, in the order made */
  loom_plan_recovery *recoveries; /* owned; released by loom_plan_stats_deinit */
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
 * force on a device together. A stage is admitted to its device before it runs, for its
 * estimated peak: where that does not fit beside the stages of other runs running there, it
 * waits until they end, in order of arrival (a queue per device, so no stage is passed by later
 * ones), as long as another run's stage holds the device (loom_plan_run_options.wait_seconds
 * bounds it). A run holds no admission while it waits for one, so runs cannot wait on each
 * other in a circle. A stage whose allocations pass its estimate beside the others' and are
 * refused runs once more, admitted for its whole runner limit. The node's counters
 * (loom_mem_node_stats) count the stages that waited.
 * Where no stage of another run holds the device but buffers in use there do (a run without a
 * limit, the program's own), a stage waits while the device's memory is allocated and freed,
 * and fails once it has stood still for 10 s.
 * Errors: as loom_graph_run; OUT_OF_MEMORY at once when a stage's estimate passes its runner
 * limit or its device's own limit (it could never fit); after waiting as said above. */
LOOM_API loom_status loom_plan_run(loom_context *ctx, const loom_plan *plan, const loom_tensor *inputs,
                                   int32_t n_inputs, loom_tensor *outputs, int32_t n_outputs,
                                   loom_plan_stats *stats);

typedef struct loom_plan_run_options {
  /* Recovery from out of memory (default false). A device may refuse memory a stage's plan
   * fitted under its runner limit: another process took some, or a driver keeps more than it
   * says. With recover on, a stage that fails with OUT_OF_MEMORY is re-planned and run again,
   * instead of failing the run:
   *   1. what the failed stage held is freed, the held values it does not read leave the
   *      device for host memory (evicted), and the device's pool is trimmed;
   *   2. the new limit: the device's free memory as the memory manager now counts it (its
   *      limit less what it holds, the stage's own inputs not counted) where that is below
   *      what the stage was planned to hold (its estimated peak, at most its limit), else half
   *      of that; each later try halves the one before (or takes the free memory, where lower);
   *   3. the stage's graph is re-planned for the new limit: its loops (the chunk rewrite's)
   *      run in smaller pieces, the largest that fit; where that is not enough, it is
   *      rewritten for the limit (opts->optimize: chunked); then it is cut into stages by
   *      memory on the same device (loom_plan_split_by_memory), and those run in its place,
   *      from the same inputs. Where nothing fits the new limit (a step that cannot be cut)
   *      but the loops in their smallest pieces hold less than the limit the stage last
   *      failed with, the re-plan is made for what those hold (the try's limit_bytes). The
   *      re-plan's stages hold at most that limit (as their meters count), and the device
   *      keeps the replaced stage's runner limit. The results of the stages before it are
   *      kept, and the stages after it run as planned.
   * At most recover_tries tries per stage. Every try is recorded in loom_plan_stats
   * (recoveries), whether it succeeded or not. When none succeeds, the run fails with
   * OUT_OF_MEMORY naming the stage, its device, the limits tried and the last error; when the
   * rewrite cannot fit a new limit (an op that cannot be chunked that far), with its error.
   * Recovery never passes the memory manager's limits: it only lowers what a stage plans for.
   * Without recover, an OUT_OF_MEMORY stage fails the run as loom_plan_run says. */
  bool recover;
  int32_t recover_tries; /* the most re-plans per stage, 1 to 8; default 3 */
  /* The rewrites a re-plan applies (its limit is ignored); NULL: the defaults. Pass the
   * options the plan was optimized with, so that a rewrite turned off stays off. */
  const loom_optimize_options *optimize;
  /* How long a stage waits for room on its device that the stages of other runs (other
   * threads on the same context) hold there, as loom_plan_run says: 0 (the default) as long as
   * another run's stage holds memory there; > 0 at most that many seconds, then OUT_OF_MEMORY
   * saying it waited; < 0 not at all (OUT_OF_MEMORY at once, naming the device's node). */
  double wait_seconds;
} loom_plan_run_options;

/* Fills *opts with the defaults (no recovery, 3 tries, waiting for room). Accepts NULL. */
LOOM_API void loom_plan_run_options_init(loom_plan_run_options *opts);

/* loom_plan_run with options (NULL: the defaults, which make it loom_plan_run).
 * Errors: as loom_plan_run; INVALID_ARGUMENT (recover_tries out of range with recover on);
 * OUT_OF_MEMORY where recovery is on and every try failed, naming the stage, the device and
 * the limits tried. */
LOOM_API loom_status loom_plan_run_with_options(loom_context *ctx, const loom_plan *plan,
                                                const loom_plan_run_options *opts, const loom_tensor *inputs,
                                                int32_t n_inputs, loom_tensor *outputs, int32_t n_outputs,
                                                loom_plan_stats *stats);

/* Resident runs: loom_plan_run on buffers of the context's memory manager (loom_context_memory,
 * loom/memory.h) instead of host tensors, so that data stays where it is between calls: the
 * outputs of one run are the inputs of the next with no copy, and a plan made once runs any
 * number of times.
 *
 * inputs: one buffer per parameter (n_inputs of them, in parameter order), allocated from the
 * context's manager, dense, holding the parameter's bytes. A buffer's tensor type
 * (loom_buffer_get_type) must be the parameter's: a typed buffer (loom_buffer_set_type, or a
 * resident run's output) the same dtype and shape, an untyped one the same dtype and byte
 * size. The buffers stay the caller's: the run reads them and never writes or frees them. A
 * stage reads an input where it is when the buffer has a valid copy on the stage's device (no
 * transfer: the manager's bytes_in / bytes_out do not move); elsewhere the memory manager
 * brings it there, by its migration policy (a temporary copy, or a move after repeated use,
 * loom/memory.h: "migration"). Loom's OpenCL kernels address OpenCL buffers, not shared
 * virtual memory: an input whose copy on an OpenCL device is SVM (allocated without
 * LOOM_MEM_DEVICE_LOCAL where the device offers SVM, as PoCL does) is copied into a device
 * buffer of the run's on every call; allocate inputs with LOOM_MEM_DEVICE_LOCAL (outputs are
 * device buffers).
 *
 * outputs: room for the graph's n_outputs results; on success each is a new buffer typed as
 * its result, resident on the device of the stage that computed it (its memory node: a device
 * stage's result stays on the device, a cpu0 stage's is host memory), owned by the caller, who
 * frees it with loom_buffer_free (or passes it to the next run first). A result that is a
 * view of a stage's value, a parameter returned as is, or a value returned twice gets a
 * buffer of its own on that device, copied (the transfers counted as usual). On failure every
 * outputs[i] is NULL.
 *
 * Repeated runs: the allocations a run frees, and the outputs the caller frees, go to the
 * memory node's pool and stay there (a resident run does not trim the pool as loom_plan_run
 * does), so a plan called over and over allocates device memory in its first calls only;
 * loom_mem_trim gives the cached memory back. The runner limits and the nodes' limits hold as
 * in loom_plan_run, the caller's buffers beside them counting in their nodes' limits (a stage
 * that reads one counts its bytes too). Values between stages are held as in loom_plan_run
 * (a cpu0 stage's as host tensors, unless the graph returns them).
 *
 * Waiting: on an OpenCL device, a stage that needs nothing from host memory (its inputs all
 * buffers, no constants or fill scalars written in) returns once its work is submitted to the
 * device's in-order queue (the memory manager's, loom_mem_node_cl_queue), not waiting for it:
 * calls keep the device busy rather than waiting for it one by one. Whatever reads an output
 * through the memory manager (loom_buffer_read, map, acquire by another node, the next run)
 * is ordered behind that work; work of the caller's own on another queue must wait for the
 * manager's queue first. A device error then shows at the next call that waits for the
 * device, and a stage's seconds in `stats` are the time to queue its work.
 * `stats` as in loom_plan_run. Thread safety: as loom_plan_run (the buffers may not be
 * written by the caller while a run reads them).
 * Errors: INVALID_ARGUMENT (NULL ctx or plan; counts that do not match the graph's; a NULL
 * input; a buffer of another manager; a dtype or shape that is not the parameter's, naming the
 * parameter, both types and, for an untyped buffer, both byte sizes); and as loom_plan_run. */
LOOM_API loom_status loom_plan_run_buffers(loom_context *ctx, const loom_plan *plan,
                                           loom_buffer *const *inputs, int32_t n_inputs,
                                           loom_buffer **outputs, int32_t n_outputs, loom_plan_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
