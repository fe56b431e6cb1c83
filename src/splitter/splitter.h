/* The splitter's insides, shared by plan.c (plans, stage graphs, printing) and split.c (the
 * two ways to cut). See loom/plan.h for the public side and shared/IR.md "Stages and plans".
 *
 * How a graph is cut into stages
 * ------------------------------
 * The schedule is the graph's op order. A stage is a contiguous run [first, end) of that
 * order placed on one runner. Its stage graph holds:
 *
 *   parameters  the values it reads that are graph inputs or results of earlier stages,
 *               except those it recomputes (below). Values cross stages through host memory,
 *               so each is a dense tensor on arrival: a parameter owns its storage.
 *   ops         the run's ops that something needs (a stage output, or a later op of the
 *               stage), in order; dead ops are left out. A source or a view of the run that
 *               the stage does not return as itself is made on demand, just before its
 *               first reader, so that a copied constant is not held longer than needed.
 *   copies      recomputed values (see "remat"), made just before their first reader.
 *   return      its outputs: the values of the run that the graph returns, or that a later
 *               stage takes as a parameter.
 *
 * Recomputed ("remat") values are never passed between stages; each stage that needs one
 * makes its own copy, because that costs nothing or less than passing it:
 *   - sources (constant, iota, fill): they have no operands. A fill is a broadcast scalar with
 *     no storage; passing it would materialize it whole. A constant is read from the graph in
 *     place and an iota is one cheap pass, so a copy costs the same bytes as a parameter.
 *   - views (reshape of contiguous data, transpose, broadcast, slice) whose operand costs no
 *     more to bring in than the view itself would as a dense parameter: a broadcast of a small
 *     input is rebuilt from that input, not shipped at its broadcast size. A slice of a big
 *     value is not recomputed: passing the slice is cheaper than passing its whole base.
 *   A remat source that is also a graph output is an output of the stage that holds it.
 *
 * A stage with nothing to return (every value it makes is recomputed where needed, or dead)
 * has no stage graph (NULL) and is skipped when the plan runs.
 */
#ifndef LOOM_SPLITTER_H
#define LOOM_SPLITTER_H

#include "ir/ir.h"
#include "loom/plan.h"

/* Per-graph facts the stage builder and split_by_memory's running estimate both read, so
 * that what the running estimate predicts is the stage graph the builder makes. Positions
 * are op indices (the schedule is the op order). */
typedef struct loom__split_info {
  const loom_graph *g;
  loom__layout *layouts; /* per value (loom__graph_layouts) */
  int64_t *bytes;        /* per value: its dense byte size */
  int64_t *physical;     /* per value: bytes it owns in the original graph (0 for views) */
  bool *is_output;       /* per value: the graph returns it */
  bool *remat;           /* per value: recomputed by each stage that reads it */
  int32_t *need;         /* per value: last position of an op that would take it as a
                            parameter if that op were in a later stage; INT32_MAX for a
                            graph output; -1 none */
  int32_t *hold;         /* per owning value: last position its storage is read (through
                            itself or any view of it); INT32_MAX for a graph output's base */
  int32_t *out_need;     /* per view value: last position it must exist for a stage that
                            would return it (need, or only graph outputs when remat) */
  bool *live_op;         /* per op: its results reach the graph's return */
  int64_t *scratch;      /* per op: temporaries (loom__op_scratch_bytes) */
  int32_t *stamp;        /* per value: scratch marks for the stage builder */
  int32_t stamp_gen;
} loom__split_info;

loom_status loom__split_info_init(loom__split_info *si, const loom_graph *g);
void loom__split_info_deinit(loom__split_info *si);

/* True when op o's result is a source (no operands): constant, iota, fill. */
static inline bool loom__split_is_source(const loom__split_info *si, int32_t o) {
  return si->g->ops[o].n_inputs == 0;
}
/* True when value v is a view made by a layout op (its base is another value). */
static inline bool loom__split_is_view(const loom__split_info *si, int32_t v) {
  int32_t o = si->g->values[v].op;
  return o >= 0 && si->g->ops[o].n_inputs > 0 && !si->layouts[v].owns;
}

typedef struct loom__stage {
  int32_t runner;
  int32_t first_op, n_ops;
  int32_t *ops;    /* first_op .. first_op + n_ops - 1, owned */
  int32_t *inputs; /* plan-graph value ids, in the stage graph's parameter order */
  int32_t n_inputs;
  int32_t *outputs; /* plan-graph value ids, in the stage graph's return order */
  int32_t n_outputs;
  int64_t estimated_peak; /* loom_graph_estimate of graph; 0 when graph is NULL */
  loom_graph *graph;      /* owned; NULL: nothing to run */
} loom__stage;

struct loom_plan {
  loom_graph *graph;    /* owned: the graph the stages are cut from */
  loom_runner *runners; /* owned copy */
  int32_t n_runners;
  loom__stage *stages;
  int32_t n_stages, cap_stages;
};

/* A new plan owning `graph` (taken even on failure) and a copy of the runners. */
loom_status loom__plan_create(loom_graph *graph, const loom_runner *runners, int32_t n_runners,
                              loom_plan **out_plan);
/* Builds the stage for ops [first, end) of si->g on runner `runner` (graph, inputs,
 * outputs, estimated peak) into *out. */
loom_status loom__stage_build(loom__split_info *si, int32_t first, int32_t end, int32_t runner,
                              loom__stage *out);
void loom__stage_deinit(loom__stage *stage);
/* split_by_memory's running estimate of the stage [first, end) (split.c), for tests: it is
 * never below the stage graph's estimated peak, and equal to it but for rare reshapes. */
loom_status loom__split_model_peak(loom__split_info *si, int32_t first, int32_t end, int64_t *out_peak);
/* Appends a built stage; the plan takes its contents (also on failure). */
loom_status loom__plan_push(loom_plan *plan, loom__stage *stage);
/* Drops every stage (split_by_memory starts over after chunking). */
void loom__plan_clear(loom_plan *plan);
/* Replaces the plan's graph (taking `graph`); the stages must be empty. */
void loom__plan_set_graph(loom_plan *plan, loom_graph *graph);

#endif
