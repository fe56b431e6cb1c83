/* Predicted run times (src/sched/predict.c): what a plan, or a graph run whole, is predicted to
 * take by the device's per-op cost model (loom/sched.h), so that what a memory limit costs in
 * time is known before anything runs. Each op is priced by its class's table or, where longer,
 * by its memory traffic at the model's rates from beyond the cache (a matrix-vector product by
 * its matrix; a product at the rate of the square GEMM of as many bytes; a fused op as one
 * pass plus its elementwise ops at the model's cost an element in a fused body; a result of 32
 * MiB or more its pages faulted in); a loop piece adds the gathers of slices that are not
 * dense and the runtime's cost of a piece (loom_sched_model.piece_seconds); stages run one
 * after the other on their runners' devices; transfers are not added (cpu0 has none; a
 * calibrated model of a device with its own memory is measured end to end from host memory).
 * loom-plan prints it beside the whole graph's, warns where a limit makes a run much slower,
 * and finds the smallest limit within a factor (--max-slowdown); docs/limits.md says how close
 * predictions come to measured times.
 *
 * Ownership as loom.h says. Thread safety: no global state; distinct objects may be used from
 * different threads at once.
 */
#ifndef LOOM_PREDICT_H
#define LOOM_PREDICT_H

#include <stdbool.h>
#include <stdint.h>

#include "loom/device.h"
#include "loom/export.h"
#include "loom/optimize.h"
#include "loom/plan.h"
#include "loom/sched.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The platform to predict with on a device is loom_sched_platform_from_context's (its
 * calibrated model, which `loom-bench calibrate` measures); where that says NOT_FOUND (no model
 * file), these give defaults from what discovery says of the device instead: an order of
 * magnitude only, to be reported as "uncalibrated". */

/* The default model of a device: bounds on its speed, so that a prediction from it is a lower
 * bound on the time: a GEMM at the peak of clock x compute units x the widest FMA vectors' flops
 * a cycle (on a CPU this host's: 64 with AVX-512, 32 with AVX2; a GPU: 256 a multiprocessor),
 * the memory-bound classes at 32 bytes a cycle a core (a GPU: 64 a multiprocessor), 1 us a
 * kernel, no cost a loop piece. Errors: INVALID_ARGUMENT (NULL arguments). */
LOOM_API loom_status loom_sched_model_default(const loom_device_info *info, loom_sched_model *out_model);
/* A platform of that device alone, with the default model, on the host node. The caller owns
 * *out_platform. Errors: INVALID_ARGUMENT (NULL arguments), OUT_OF_MEMORY. */
LOOM_API loom_status loom_sched_platform_default(const loom_device_info *info,
                                                 loom_sched_platform **out_platform);
/* The predicted seconds of running `plan`, each stage on its runner's device of `platform`
 * (one after the other). Nothing is run. Errors: INVALID_ARGUMENT (NULL arguments, a stage whose
 * device the platform lacks or whose work its model cannot price), OUT_OF_MEMORY. */
LOOM_API loom_status loom_plan_predict(const loom_sched_platform *platform, const loom_plan *plan,
                                       double *out_seconds);
/* The predicted seconds of running `graph` as it is, whole, on `device` of `platform`.
 * Errors: as loom_plan_predict; INVALID_ARGUMENT for a device the platform lacks. */
LOOM_API loom_status loom_graph_predict(const loom_sched_platform *platform, const char *device,
                                        const loom_graph *graph, double *out_seconds);
/* The whole run of `graph` on `device`: rewritten by `opts` (may be NULL) without chunking,
 * its estimated peak (*out_need, the graph's whole need) and predicted seconds. Errors: as
 * loom_graph_optimize and loom_graph_predict. */
LOOM_API loom_status loom_graph_predict_whole(const loom_sched_platform *platform, const char *device,
                                              const loom_graph *graph, const loom_optimize_options *opts,
                                              int64_t *out_need, double *out_seconds);
/* The predicted seconds of `graph` prepared for one runner (`device`, `limit` bytes) as
 * loom-plan and loom-run prepare it (loom_graph_optimize_for_runners with `opts`, then
 * loom_plan_split_by_memory). Errors: those of the two calls (OUT_OF_MEMORY: the graph cannot
 * be planned under the limit, the message says why) and of loom_plan_predict. */
LOOM_API loom_status loom_graph_predict_at(const loom_sched_platform *platform, const char *device,
                                           const loom_graph *graph, int64_t limit,
                                           const loom_optimize_options *opts, double *out_seconds);

typedef struct loom_limit_search {
  int64_t limit;        /* the smallest limit found within the factor */
  double seconds;       /* its predicted seconds */
  int64_t whole_bytes;  /* the whole need (loom_graph_predict_whole) */
  double whole_seconds; /* the whole run's predicted seconds */
  int32_t steps;        /* plans made and predicted */
} loom_limit_search;

/* The margin the search below keeps: it asks for a predicted time within factor /
 * LOOM_LIMIT_SEARCH_MARGIN (at least 1) times the whole time. The fine cuts such a search
 * lands on (hundreds to thousands of pieces) the calibrated model on two threads prices short
 * against the whole run: with a margin of 1.25, limits predicted at 1.6x measured up to 3.75x
 * (docs/limits.md, "Predicted time"). */
#define LOOM_LIMIT_SEARCH_MARGIN 1.6

/* The smallest limit for one runner on `device` at which `graph`'s predicted time stays within
 * `factor` (>= 1) times its whole time, less the margin above (the limit's predicted time at
 * most max(1, factor / LOOM_LIMIT_SEARCH_MARGIN) times the whole's): a bisection on the
 * logarithm of the limit between the whole need and 1/4096 of it (at least 64 KiB), each step
 * a loom_graph_predict_at, to 1%; then limits at 90%, 80%, 70% and 60% of the one found (not
 * below that floor), since the prediction is not strictly monotonic in the limit: the smallest
 * within that budget is kept. A limit the graph cannot be planned under counts as too small.
 * *out is the caller's. Errors: INVALID_ARGUMENT (NULL arguments, factor < 1), UNSUPPORTED
 * (not even the whole need keeps the run within the budget), those of
 * loom_graph_predict_whole. */
LOOM_API loom_status loom_graph_smallest_limit(const loom_sched_platform *platform, const char *device,
                                               const loom_graph *graph, double factor,
                                               const loom_optimize_options *opts, loom_limit_search *out);

#ifdef __cplusplus
}
#endif

#endif
