/* Running one plan on several devices at once: independent stages side by side, and the
 * pieces of each top-level loop shared among the devices, placed by a policy (docs/sched.md,
 * "The shared runner").
 *
 * The plan is made for it: loom_graph_optimize_for_sharing rewrites the graph and loom_share_cut
 * cuts it into stages, by branch where it has independent branches of real work (two towers of
 * dots joined at the end: each tower a stage), else around its top-level loops (constants,
 * fills and views of a stage's inputs placed beside a loop are made once on the host for its
 * ranges). The run runs those stages as they are: it cuts nothing itself. A stage waits only
 * for the stages it reads from. Every device has
 * a worker (a host thread feeding the device's in-order queue) for the whole run, which takes,
 * as the policy says, a ready stage to run whole on its device (as loom_plan_run runs a stage,
 * under that device's limit) or a range of a loop's pieces (a graph of its own, under the
 * device's limit); the ranges' results are combined on the host. A stage run whole on a
 * device leaves its results there, resident, for the stages reading them (the memory manager
 * brings them where those run, device to device between OpenCL devices of one platform,
 * ordered behind the work that made them); a cpu0 stage's and a loop's results are host
 * tensors. A stage's end wakes the stages reading it.
 *
 * Thread safety: a shared run uses one thread per device of the context; the context may be
 * used by other threads meanwhile, as loom_plan_run says.
 */
#ifndef LOOM_SHARE_H
#define LOOM_SHARE_H

#include <stdbool.h>
#include <stdint.h>

#include "loom/export.h"
#include "loom/plan.h"
#include "loom/runtime.h"
#include "loom/sched.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_share_options {
  /* The devices: "auto" (cpu0 first, then every other device of the context a backend of this
   * build runs, except OpenCL devices of kind CPU such as PoCL's, which would only share cpu0's
   * cores) or a list of ids ("cpu0,ocl0,ocl1": any device, PoCL's included); NULL: "auto". */
  const char *devices;
  /* How stages and a loop's ranges go to the devices (default LOOM_SCHED_DMDA):
   *   FIXED: no sharing: loom_plan_run_with_options on the plan as it is (its stages' runners).
   *   EAGER: the first free device takes the next ready stage, else the next range.
   *   DMDA:  a free device takes a ready stage where no other device would end it sooner (by
   *          the models, loom-bench calibrate, transfers included, where every device has
   *          one; else by the times measured of stages like it on each device, by this
   *          context or, through the cache folder, an earlier process (LOOM_STAGE_HISTORY);
   *          without either the first free device of the list takes it). It takes the
   *          next range only where the loop ends sooner with it than
   *          with the other devices running every piece left (StarPU's dmda, earliest
   *          expected finish, for the pieces of one loop): each device's time per piece from
   *          its model (loom-bench calibrate) where there is one, then from the ranges it ran
   *          (a device of unknown speed first runs a single piece). So every device helps while
   *          there is work, and a slow one leaves the last ranges to faster ones. Beside cpu0,
   *          a device computing on the host's cores too (an OpenCL CPU device) gets no stage or
   *          range: it would only take cores from cpu0. */
  loom_sched_policy policy;
  /* Per-device limits: a device one of these runners names runs under that runner's limit
   * (the smallest where it is named twice); any other under its memory size. NULL: none. */
  const loom_runner *limits;
  int32_t n_limits;
  /* About how many ranges each device gets of a loop (4 to 8 keep them busy to the end without
   * paying much per range); default 6. */
  int32_t ranges_per_device;
  /* FIXED only: passed on to loom_plan_run_with_options (NULL: its defaults). */
  const loom_plan_run_options *run;
} loom_share_options;

/* Fills *opts with the defaults ("auto", dmda, 6 ranges per device). Accepts NULL. */
LOOM_API void loom_share_options_init(loom_share_options *opts);

/* What one device did in a shared run. */
typedef struct loom_share_device_stats {
  char device[32];
  int64_t limit_bytes;      /* the limit it ran under */
  double busy_seconds;      /* running stages and ranges: each by the device's own clock where
                             * its backend has one (event profiling: OpenCL, CUDA), else from
                             * the host's view (submit to done) */
  int32_t device_timed;     /* the stages and ranges timed by the device's clock */
  int64_t pieces;           /* loop pieces it ran */
  int32_t ranges;           /* ranges of pieces it ran */
  int32_t stages;           /* stages it ran: whole ones, and loops it ran ranges of */
  int64_t peak_bytes;       /* the largest peak of its runs, as the meters counted them */
  int64_t bytes_in;         /* bytes copied into its memory node during the run */
  int64_t bytes_out;        /* bytes copied out of it */
  double seconds_per_piece; /* the last time per piece dmda went by for it; 0: none */
} loom_share_device_stats;

typedef struct loom_share_stats {
  double seconds;     /* the whole run */
  int64_t peak_bytes; /* the largest peak of any device's run */
  int32_t n_stages;   /* stages run: the plan's */
  int32_t n_shared;   /* loops whose pieces were shared */
  int32_t n_devices;
  loom_share_device_stats *devices; /* owned; released by loom_share_stats_deinit */
  loom_plan_stats plan;             /* FIXED: the plan run's own stats */
  /* Owned; per stage (n_stages), the index into devices of the device that ran it whole; -1
   * for a loop whose ranges the devices shared (their ranges say which) and a stage with
   * nothing to run. What loom-run --simulate predicts, stage by stage. */
  int32_t *stage_device;
} loom_share_stats;

LOOM_API void loom_share_stats_deinit(loom_share_stats *stats);

/* The runners of a device list: `devices` as loom_share_options.devices ("auto" or ids, NULL:
 * "auto"; "auto" is cpu0 alone where the only other devices are OpenCL CPU devices), each at the limit
 * `limits` gives it (as loom_share_options.limits) or else its memory size; a device no backend of this build
 * runs is left out of "auto" and refused in a list. The caller frees *out_runners with free(). Errors:
 * NOT_FOUND (a device the context lacks, naming it and the ids it has), UNSUPPORTED (a device no backend
 * runs), INVALID_ARGUMENT (an empty list, a device named twice), OUT_OF_MEMORY. */
LOOM_API loom_status loom_share_runners(loom_context *ctx, const char *devices, const loom_runner *limits,
                                        int32_t n_limits, loom_runner **out_runners, int32_t *out_count);

/* The runners of `runners` (as loom_share_runners gives them) a graph should be planned for when
 * they run under `policy`: all of them, except that under DMDA with cpu0 first, the devices that
 * compute on the host's cores (OpenCL CPU devices, such as PoCL's) are left out: dmda gives
 * them no range beside cpu0 (they would only take cores from it), so a plan cut into pieces
 * for them is cut for nothing (kNN 20,000 x 30,000 on cpu0,ocl0,ocl1 under PoCL: 37 pieces all
 * on cpu0, 0.74 of cpu0's own plan). The run itself may still name them: they stay idle and are
 * reported with no range. Writes the kept runners, in order, to out (room for n; it may be
 * `runners` itself) and their count to *out_count; `left_out` (may be NULL; else at least 1
 * byte) receives the ids left out, comma-separated ("" when none). Errors: INVALID_ARGUMENT
 * (NULL arguments, n < 1), NOT_FOUND (a device the context lacks). */
LOOM_API loom_status loom_share_plan_runners(loom_context *ctx, const loom_runner *runners, int32_t n,
                                             loom_sched_policy policy, loom_runner *out, int32_t *out_count,
                                             char *left_out, size_t left_out_size);

/* Rewrites `graph` for a shared run on `runners` (the devices, as loom_share_runners gives):
 * with one runner as loom_graph_optimize_for_runners. With several, the graph is chunked
 * before it is fused (opts->fused_runs ignored: fusing first makes one fused op over the whole
 * space, which no device can share) to a limit that cuts it into loops of pieces enough for
 * every device: the estimated peak of the graph unchunked divided by 8 x the runners, never
 * above the smallest runner's limit; where that fails or makes no loop, it is rewritten as
 * loom_graph_optimize_for_runners does (`note`, may be NULL, says why; else ""). The caller
 * owns *out_graph. Errors: as loom_graph_optimize. */
LOOM_API loom_status loom_graph_optimize_for_sharing(const loom_graph *graph, const loom_runner *runners,
                                                     int32_t n_runners, const loom_optimize_options *opts,
                                                     loom_graph **out_graph, loom_rewrite_report *report,
                                                     char *note, size_t note_size);

/* Cuts `graph` (as loom_graph_optimize_for_sharing rewrote it) into the stages a shared run on
 * `n_devices` devices runs, each stage on `runner`: with several devices, by branch where the
 * graph has two independent branches (neither reads what the other makes) each holding at
 * least a tenth of its work by a rough time per op (a chain of ops is a branch, a loop is one,
 * branches of under 2% of the work merged into a neighbour: docs/sched.md, "The shared
 * runner"); else, and with one device, before and after each top-level loop. The plan owns a
 * copy of the graph, its ops reordered so each stage's are contiguous; a stage reads what
 * earlier stages make, not only the one before it. loom_plan_run_shared runs this cut, and
 * loom-run --simulate schedules it. Caller owns *out_plan. Errors: INVALID_ARGUMENT (NULL
 * arguments, n_devices < 1), OUT_OF_MEMORY. */
LOOM_API loom_status loom_share_cut(const loom_graph *graph, const loom_runner *runner, int32_t n_devices,
                                    loom_plan **out_plan);

/* Runs `plan` on the devices opts names (NULL: the defaults), inputs and outputs as
 * loom_plan_run. Under FIXED it is loom_plan_run_with_options. Otherwise the plan's stages
 * run as they are, as this header's opening comment says (plan with loom_share_cut; a plan cut
 * otherwise runs too, but only a stage that is one loop beside sources and views is shared in
 * ranges, every other stage runs whole on one device): with one device, on that device; with several,
 * independent stages run on different devices at once, a loop's ranges on every device whose limit holds one
 * (a device too small for a range never gets one), a stage run whole on a device whose limit holds its
 * estimate where any does. `stats` (may be NULL, else zero-initialised) receives per-device figures, on
 * failure too; release it with loom_share_stats_deinit. The run's trace (loom_mem_trace_enable) gets a
 * "range" span per range on its device's lane (the device's memory node) beside the stages',
 * so the devices' overlap shows. A failure on one device stops the others taking work; every
 * worker is joined and everything freed before the error returns, naming the stage, the range
 * of pieces and the device ("stage 1 (a loop of 40 pieces): pieces [8, 12) on ocl1: ...", or
 * "stage 2 (3 ops) on ocl1: ..." for a stage run whole). Errors: INVALID_ARGUMENT (NULL
 * arguments, counts or types that do not match the graph, ranges_per_device outside 1..64),
 * NOT_FOUND and UNSUPPORTED (devices, as loom_share_runners), OUT_OF_MEMORY (a loop whose range
 * fits no device's limit, naming its bytes and the limits; a device's run), UNAVAILABLE (a
 * worker thread that cannot start), and the devices' errors. */
LOOM_API loom_status loom_plan_run_shared(loom_context *ctx, const loom_plan *plan,
                                          const loom_share_options *opts, const loom_tensor *inputs,
                                          int32_t n_inputs, loom_tensor *outputs, int32_t n_outputs,
                                          loom_share_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
