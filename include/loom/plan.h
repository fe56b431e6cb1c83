/* Plans of stages (shared/IR.md, "Stages and plans"): a graph cut into stages, each placed on a
 * runner. Running a plan is loom/runtime.h's. This header includes what a plan is made from:
 * estimates (loom/estimate.h), runners (loom/runner.h) and rewrites (loom/optimize.h). */
#ifndef LOOM_PLAN_H
#define LOOM_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "loom/estimate.h"
#include "loom/export.h"
#include "loom/graph.h"
#include "loom/optimize.h"
#include "loom/runner.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif
#endif
