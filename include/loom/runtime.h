/* Running plans and graphs on a context's devices.
 *
 * One call runs a plan however it is to be run: loom_run. Its options say where (the plan's own
 * runners, or devices the stages and loop pieces are shared among by a policy), with which
 * recovery, and on which MPI ranks; its statistics are one structure for every kind of run.
 * loom_run_submit is its asynchronous form: several runs in flight on one context, each
 * completed by loom_run_wait or loom_run_test, a run able to start after others it reads from.
 * The plan is made beforehand (loom/plan.h, loom/share.h): a run never plans.
 *
 * The older entry points (loom_plan_run, loom_plan_run_with_options, loom_plan_run_buffers,
 * loom_plan_run_shared in loom/share.h, loom_plan_run_mpi in loom/mpi.h) remain for this
 * release as the forms loom_run calls; new code calls loom_run.
 */
#ifndef LOOM_RUNTIME_H
#define LOOM_RUNTIME_H

#include <stdbool.h>
#include <stdint.h>

#include "loom/context.h"
#include "loom/export.h"
#include "loom/graph.h"
#include "loom/memory.h"
#include "loom/plan.h"
#include "loom/sched.h"
#include "loom/status.h"
#include "loom/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

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
  int64_t allocations;            /* every stage's allocations, as the runtime counted them */
} loom_plan_stats;

LOOM_API void loom_plan_stats_deinit(loom_plan_stats *stats);

/* What one device did in a run shared among devices (loom_run with options.devices). */
typedef struct loom_run_device_stats {
  char device[32];
  int64_t limit_bytes;      /* the limit it ran under */
  double busy_seconds;      /* running stages and ranges: by the device's own clock where its
                             * backend has one (OpenCL, CUDA event profiling), else the host's */
  int32_t device_timed;     /* the stages and ranges timed by the device's clock */
  int64_t pieces;           /* loop pieces it ran */
  int32_t ranges;           /* ranges of pieces it ran */
  int32_t stages;           /* stages it ran: whole ones, and loops it ran ranges of */
  int64_t peak_bytes;       /* the largest peak of its runs, as the meters counted them */
  int64_t bytes_in;         /* bytes copied into its memory node during the run */
  int64_t bytes_out;        /* bytes copied out of it */
  double seconds_per_piece; /* the last time per piece dmda went by for it; 0: none */
} loom_run_device_stats;

/* What one MPI rank did in a run on a communicator (loom_run with options.mpi). */
typedef struct loom_run_rank_stats {
  int32_t rank;
  int64_t pieces;      /* loop pieces it ran, all loop stages together */
  int64_t peak_bytes;  /* its largest measured peak, loop-free stages included */
  int64_t limit_bytes; /* the limit under which that peak was measured */
  double seconds;      /* computing: its stages and ranges */
  double comm_seconds; /* in MPI calls (waiting for the others included) */
  int64_t bytes_sent;  /* partial results it sent to the root */
} loom_run_rank_stats;

/* One rank's range of one loop's pieces in a run on a communicator (loom_run with options.mpi),
 * field for field loom/mpi.h's loom_mpi_range. */
typedef struct loom_run_range_stats {
  int32_t stage;                /* the MPI run's stage (n_stages counts them) */
  int32_t rank;                 /* in the communicator */
  int64_t first, last;          /* the loop's pieces it ran, [first, last); first == last: none */
  int64_t pieces;               /* the loop's pieces, all ranks together */
  char device[32];              /* the runner device it ran on */
  int64_t limit_bytes;          /* its limit there: the runner's, lowered to the rank's own */
  int64_t estimated_peak_bytes; /* of its range's plan (largest stage) */
  int64_t peak_bytes;           /* measured */
  int32_t n_stages;             /* stages of its range's plan (more than 1 under a lower limit) */
  int32_t recoveries;           /* re-plans after out of memory (options.recover) */
  double seconds;               /* running its range (planning included) */
} loom_run_range_stats;

/* Statistics of a run: one structure for every kind (a graph on one device, a plan stage after
 * stage, a shared run, an MPI run). The first three fields are filled by every run; the arrays
 * by the runs that have them (NULL and 0 otherwise). Zero-initialise it before a run and
 * release it with loom_run_stats_deinit whatever the status (the graph runs' have no arrays
 * and need none). */
typedef struct loom_run_stats {
  int64_t peak_bytes;             /* most bytes allocated at once for values and temporaries (a plan: the
                                   * largest stage's or device's peak) */
  int64_t allocations;            /* number of allocations (graph runs, and plans run on their runners: every
                                   * stage's; 0 for shared and MPI runs) */
  double seconds;                 /* wall time of the run */
  int32_t n_stages;               /* stages run: the plan's, or a shared or MPI run's cut of them */
  loom_stage_stats *stages;       /* owned; runs on the plan's runners: one per stage */
  int32_t n_recoveries;           /* tries of recovery, in the order made */
  loom_plan_recovery *recoveries; /* owned */
  int32_t n_shared;               /* shared runs: loops whose pieces were shared */
  int32_t n_devices;
  loom_run_device_stats *devices; /* owned; shared runs: one per device */
  int32_t rank, n_ranks;          /* MPI runs: this process's rank and the communicator's size */
  int32_t n_loop_stages;          /* MPI runs: stages whose loops the ranks shared */
  int32_t n_rank_stats;
  loom_run_rank_stats *ranks; /* owned; MPI runs: every rank's on rank 0, its own elsewhere */
  /* Owned; shared runs: per stage (n_stages), the index into devices of the device that ran it
   * whole, -1 for a loop whose ranges the devices shared and a stage with nothing to run. */
  int32_t *stage_device;
  int32_t n_ranges;
  loom_run_range_stats *ranges; /* owned; MPI runs: each rank's range of each loop, by stage then
                                 * rank (every rank's on rank 0, its own elsewhere) */
} loom_run_stats;

/* Frees what `stats` owns and zeroes it. Accepts NULL and a zeroed structure. */
LOOM_API void loom_run_stats_deinit(loom_run_stats *stats);

/* Runs `graph` on cpu0 with host inputs (in parameter order, types equal to the
 * parameters') and writes its outputs into outputs[0..n_outputs), each allocated by Loom and
 * released by the caller with loom_tensor_deinit. On failure no output is left allocated.
 * Values and temporaries are allocated through the context's memory manager on cpu0's memory
 * node (so its limit, e.g. LOOM_MEM_LIMIT=cpu0:8MiB, holds for the run), and the run gives
 * back what that node's pool cached for it before returning.
 * `stats` may be NULL. Errors: INVALID_ARGUMENT (counts or types that do not match, a graph
 * that does not verify), OUT_OF_MEMORY (also when the memory node's limit is reached),
 * UNSUPPORTED. */
LOOM_API loom_status loom_graph_run(loom_context *ctx, const loom_graph *graph, const loom_tensor *inputs,
                                    int32_t n_inputs, loom_tensor *outputs, int32_t n_outputs,
                                    loom_run_stats *stats);

/* As loom_graph_run, on the device `device` ("cpu0", "ocl1", "cuda0", or an alias the context
 * knows, as loom_context_find_device takes): the inputs are copied from host memory to the
 * device, the whole graph runs there in one piece (no splitting: a plan does that), and the
 * outputs come back to host memory, allocated by Loom as loom_graph_run's. Values and
 * temporaries are allocated through the context's memory manager on that device's memory
 * node, so its limit holds for the run. The device is opened on first use and stays open
 * with the context. Errors: as loom_graph_run; NOT_FOUND (no such device in the context),
 * UNSUPPORTED (an op the device's backend cannot run), and the backend's device errors. */
LOOM_API loom_status loom_graph_run_on_device(loom_context *ctx, const char *device, const loom_graph *graph,
                                              const loom_tensor *inputs, int32_t n_inputs,
                                              loom_tensor *outputs, int32_t n_outputs, loom_run_stats *stats);

/* As loom_graph_run_on_device (loom/runtime.h), with buffers of the context's memory manager
 * (loom_context_memory) for inputs and outputs instead of host tensors, so that data the
 * caller keeps on the device stays there: inputs[p] (one per parameter, holding it densely,
 * at least its bytes) is read where the manager makes it valid for the device's memory node,
 * in place when its copy there is valid (the output of an earlier run, the caller's own
 * memory wrapped by loom_buffer_wrap_cl_mem in loom/opencl.h), else copied in; it stays the
 * caller's. outputs[i] receives a new buffer on the device's memory node holding the i-th
 * result (not read back to the host), which the caller frees with loom_buffer_free. The run
 * waits for the device at its end. On failure every outputs[i] is NULL.
 * Thread safety: as loom_graph_run_on_device. Errors: as loom_graph_run_on_device;
 * INVALID_ARGUMENT (counts that do not match the graph's, a NULL input buffer, one of another
 * manager, or smaller than its parameter). */
LOOM_API loom_status loom_graph_run_buffers(loom_context *ctx, const char *device, const loom_graph *graph,
                                            loom_buffer *const *inputs, int32_t n_inputs,
                                            loom_buffer **outputs, int32_t n_outputs, loom_run_stats *stats);

/* ---- loom_run: one call for every run of a plan ---------------------------------------- */

/* An MPI communicator as loom_run takes it: made by loom_mpi_comm_create (loom/mpi.h, in the
 * libloom_mpi library), so that libloom itself needs no MPI. */
typedef struct loom_mpi_comm loom_mpi_comm;

/* A run in flight (loom_run_submit), completed by loom_run_wait or loom_run_test. */
typedef struct loom_run_handle loom_run_handle;

typedef struct loom_run_options {
  /* Where the plan runs:
   *   NULL: stage after stage, each on its runner's device under its runner's limit (the plan
   *         as loom_plan_split_by_memory or loom_plan_split made it);
   *   "auto" or a list of ids ("cpu0,ocl0,ocl1"): shared among those devices, independent
   *         stages side by side and each top-level loop's pieces in ranges, placed by `policy`
   *         (loom/share.h says how; the plan should come from loom_share_cut). */
  const char *devices;
  /* With devices: how stages and ranges are placed (default LOOM_SCHED_DMDA; FIXED runs the
   * plan on its runners as with devices NULL). The same policy table schedules a simulated
   * run (loom-run --simulate). */
  loom_sched_policy policy;
  /* With devices: per-device limits (a device these runners name runs under that runner's
   * limit, the smallest where named twice; any other under its memory). NULL: none. */
  const loom_runner *limits;
  int32_t n_limits;
  /* With devices: about how many ranges each device gets of a loop, 1 to 64 (default 6). */
  int32_t ranges_per_device;
  /* Recovery from out of memory (loom_plan_run_options says how): off by default. */
  bool recover;
  int32_t recover_tries; /* 1 to 8; default 3 */
  /* The rewrites a recovery re-plan applies (NULL: the defaults). */
  const loom_optimize_options *optimize;
  /* How long a stage waits for room other runs' stages hold on its device
   * (loom_plan_run_options.wait_seconds): 0 as long as another run holds it, > 0 at most that
   * many seconds, < 0 not at all. */
  double wait_seconds;
  /* NULL: this process alone. Else the run is collective over the communicator's ranks (every
   * rank calls loom_run with the same plan, options and equal inputs; loom/mpi.h says how the
   * ranks share its loops). With devices unset only. */
  const loom_mpi_comm *mpi;
  /* loom_run_submit only: runs this one starts after (each must have been submitted on the
   * same context and not yet completed by loom_run_wait/loom_run_test when this one is
   * submitted). Their outputs may be this run's inputs: the input arrays are read when the run
   * starts, after they finished. n_after 0: starts at once. */
  loom_run_handle *const *after;
  int32_t n_after;
} loom_run_options;

/* Fills *opts with the defaults (the plan's runners, dmda when devices are given, 6 ranges per
 * device, no recovery with 3 tries, no MPI, nothing to wait for). Accepts NULL. */
LOOM_API void loom_run_options_init(loom_run_options *opts);

/* Runs `plan` with host inputs (n_inputs, in parameter order, types equal to the parameters')
 * into outputs[0..n_outputs), each allocated by Loom and released by the caller with
 * loom_tensor_deinit; on failure no output is left allocated. opts NULL: the defaults (stage
 * after stage on the plan's runners). Every stage's allocations stay under its runner's limit
 * (or its device's, shared), as the memory manager counts them. `stats` (may be NULL, else
 * zero-initialised) receives what the run measured, on failure too; release it with
 * loom_run_stats_deinit whatever the status.
 * Thread safety: runs from several threads on one context may overlap (the memory manager's
 * limits hold for them together: loom/memory.h, "Limits").
 * Errors: INVALID_ARGUMENT (NULL ctx or plan, counts or types that do not match the graph,
 * options out of range, options.mpi with options.devices, options.after given to loom_run),
 * NOT_FOUND and UNSUPPORTED (a device the context lacks or cannot run), OUT_OF_MEMORY (a stage
 * that cannot fit its limit, or not beside other runs' on its device), UNAVAILABLE (a worker
 * thread that cannot start), and the devices' errors; every message names the stage (and the
 * device, range of pieces or rank) where it failed. */
LOOM_API loom_status loom_run(loom_context *ctx, const loom_plan *plan, const loom_run_options *opts,
                              const loom_tensor *inputs, int32_t n_inputs, loom_tensor *outputs,
                              int32_t n_outputs, loom_run_stats *stats);

/* loom_run on buffers of the context's memory manager instead of host tensors (resident runs:
 * loom_plan_run_buffers says how inputs are read where they are and outputs stay on the device
 * that made them, owned by the caller, who frees them with loom_buffer_free). With options
 * devices NULL only (the plan's runners). Errors: as loom_run and loom_plan_run_buffers. */
LOOM_API loom_status loom_run_buffers(loom_context *ctx, const loom_plan *plan, const loom_run_options *opts,
                                      loom_buffer *const *inputs, int32_t n_inputs, loom_buffer **outputs,
                                      int32_t n_outputs, loom_run_stats *stats);

/* The asynchronous form of loom_run: starts the run on a thread of its own and returns at once
 * with *out_handle. Nothing is copied: `inputs` (the array and the tensors' data), `outputs`
 * (filled at the end, as loom_run fills them), `stats` and opts->devices, limits and optimize
 * must stay valid until the run is completed by loom_run_wait or loom_run_test; `opts` itself
 * is copied. Runs submitted on one context run at once side by side (as loom_run from several
 * threads), except that a run waits for the runs in opts->after: their outputs may be its
 * inputs (pass the outputs array of the one as the inputs of the other; resident buffers from
 * loom_run_buffers_submit then stay on their device between the runs, no host round trip).
 * A run whose predecessor failed fails too, naming it. Every handle must be completed exactly
 * once. Errors (nothing started): INVALID_ARGUMENT (as loom_run; an `after` handle already
 * completed or of another context), UNAVAILABLE (no thread could start), OUT_OF_MEMORY. */
LOOM_API loom_status loom_run_submit(loom_context *ctx, const loom_plan *plan, const loom_run_options *opts,
                                     const loom_tensor *inputs, int32_t n_inputs, loom_tensor *outputs,
                                     int32_t n_outputs, loom_run_stats *stats, loom_run_handle **out_handle);

/* loom_run_buffers in the manner of loom_run_submit (the `inputs` array is read when the run
 * starts, after the runs of opts->after: an earlier run's `outputs` array may be passed). */
LOOM_API loom_status loom_run_buffers_submit(loom_context *ctx, const loom_plan *plan,
                                             const loom_run_options *opts, loom_buffer *const *inputs,
                                             int32_t n_inputs, loom_buffer **outputs, int32_t n_outputs,
                                             loom_run_stats *stats, loom_run_handle **out_handle);

/* Waits until the run has finished, releases the handle, and returns the run's status (its
 * message, where it failed, becomes the calling thread's loom_last_error). Errors:
 * INVALID_ARGUMENT (NULL handle), and the run's own. */
LOOM_API loom_status loom_run_wait(loom_run_handle *handle);

/* Completes the run if it has finished: then *out_done is true, the handle is released and the
 * run's status is returned (as loom_run_wait). While it runs, *out_done is false, LOOM_OK is
 * returned and the handle stays valid. Never blocks. Errors: INVALID_ARGUMENT (NULL
 * arguments), and the finished run's own. */
LOOM_API loom_status loom_run_test(loom_run_handle *handle, bool *out_done);

/* ---- the forms loom_run calls (kept for this release; new code calls loom_run) ---------- */

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
