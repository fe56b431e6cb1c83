/* Plans: the per-graph facts the splitter reads, stage graphs cut out of a graph, and the
 * plan's accessors and listing. How a stage is cut is described in splitter.h. */
#include <stdio.h>
#include <string.h>

#include "ir/rebuild.h"
#include "ir/view.h"
#include "splitter/splitter.h"

/* ---- per-graph facts ---------------------------------------------------------------- */

static void mark_live_ops(const loom_graph *g, bool *live_value, bool *live_op) {
  for (int32_t i = 0; i < g->n_outputs; i++) live_value[g->outputs[i]] = true;
  for (int32_t o = g->n_ops - 1; o >= 0; o--) {
    const loom__op *op = &g->ops[o];
    for (int32_t r = 0; r < op->n_outputs; r++) live_op[o] |= live_value[op->outputs[r]];
    if (!live_op[o]) continue;
    for (int32_t i = 0; i < op->n_inputs; i++) live_value[op->inputs[i]] = true;
  }
}

/* Which values each stage recomputes rather than takes as a parameter (splitter.h), by the
 * bytes bringing each one in would cost: `cost` is what a stage holds to have the value. */
static void decide_remat(loom__split_info *si, int64_t *cost) {
  const loom_graph *g = si->g;
  for (int32_t p = 0; p < g->n_params; p++) cost[g->params[p]] = si->bytes[g->params[p]];
  for (int32_t o = 0; o < g->n_ops; o++) {
    const loom__op *op = &g->ops[o];
    for (int32_t r = 0; r < op->n_outputs; r++) {
      int32_t v = op->outputs[r];
      si->remat[v] = false;
      cost[v] = si->bytes[v];
      if (op->n_outputs != 1) continue;
      if (op->n_inputs == 0) {
        si->remat[v] = true;
        cost[v] = si->physical[v];
      } else if (loom__split_is_view(si, v) && cost[op->inputs[0]] <= si->bytes[v]) {
        si->remat[v] = true;
        cost[v] = cost[op->inputs[0]];
      }
    }
  }
}

static int32_t max_i32(int32_t a, int32_t b) {
  return a > b ? a : b;
}

/* need: when a later stage would take each value as a parameter (splitter.h). */
static void compute_need(loom__split_info *si) {
  const loom_graph *g = si->g;
  for (int32_t v = 0; v < g->n_values; v++) si->need[v] = si->is_output[v] ? INT32_MAX : -1;
  for (int32_t o = g->n_ops - 1; o >= 0; o--) {
    if (!si->live_op[o]) continue;
    const loom__op *op = &g->ops[o];
    /* A stage that recomputes a view brings in its operand instead. */
    if (op->n_outputs == 1 && op->n_inputs > 0 && si->remat[op->outputs[0]])
      si->need[op->inputs[0]] = max_i32(si->need[op->inputs[0]], si->need[op->outputs[0]]);
    for (int32_t i = 0; i < op->n_inputs; i++) si->need[op->inputs[i]] = max_i32(si->need[op->inputs[i]], o);
  }
  for (int32_t v = 0; v < g->n_values; v++)
    si->out_need[v] = si->remat[v] ? (si->is_output[v] ? INT32_MAX : -1) : si->need[v];
}

/* hold: the estimator's base lifetimes for the graph's order, over the ops that are live. */
static void compute_hold(loom__split_info *si) {
  const loom_graph *g = si->g;
  for (int32_t v = 0; v < g->n_values; v++) si->hold[v] = -1;
  for (int32_t o = 0; o < g->n_ops; o++) {
    if (!si->live_op[o]) continue;
    const loom__op *op = &g->ops[o];
    for (int32_t r = 0; r < op->n_outputs; r++) {
      int32_t b = si->layouts[op->outputs[r]].base;
      si->hold[b] = max_i32(si->hold[b], o);
    }
    for (int32_t i = 0; i < op->n_inputs; i++) si->hold[si->layouts[op->inputs[i]].base] = o;
  }
  for (int32_t i = 0; i < g->n_outputs; i++) si->hold[si->layouts[g->outputs[i]].base] = INT32_MAX;
}

/* Whether v is a loop's result that only loops read, each along an axis (a halo cut's grid
 * between two groups of steps, chunk_halo_groups.c): at a stage boundary it is written piece
 * by piece to host memory and read back in slices, so no stage holds it whole. Counted as
 * streamed, a stage holding both loops fails the estimator's check when it closes and gives
 * the reader back to the next stage. */
static bool passed_between_loops(const loom_graph *g, int32_t v) {
  int32_t made = g->values[v].op, readers = 0;
  if (made < 0 || !g->ops[made].loop || !loom__loop_result_in_place(g, &g->ops[made], g->values[v].result))
    return false;
  for (int32_t o = 0; o < g->n_ops; o++)
    for (int32_t i = 0; i < g->ops[o].n_inputs; i++) {
      if (g->ops[o].inputs[i] != v) continue;
      if (!g->ops[o].loop || g->ops[o].loop->rules[i].axis != 0) return false;
      readers++;
    }
  for (int32_t k = 0; k < g->n_outputs; k++)
    if (g->outputs[k] == v) return false;
  return readers > 0;
}

loom_status loom__split_info_init(loom__split_info *si, const loom_graph *g) {
  memset(si, 0, sizeof *si);
  si->g = g;
  size_t nv = (size_t)LOOM_MAX(g->n_values, 1), no = (size_t)LOOM_MAX(g->n_ops, 1);
  si->layouts = loom__calloc(nv, sizeof *si->layouts);
  si->bytes = loom__calloc(nv, sizeof *si->bytes);
  si->physical = loom__calloc(nv, sizeof *si->physical);
  si->is_output = loom__calloc(nv, sizeof *si->is_output);
  si->remat = loom__calloc(nv, sizeof *si->remat);
  si->need = loom__calloc(nv, sizeof *si->need);
  si->hold = loom__calloc(nv, sizeof *si->hold);
  si->out_need = loom__calloc(nv, sizeof *si->out_need);
  si->live_op = loom__calloc(no, sizeof *si->live_op);
  si->scratch = loom__calloc(no, sizeof *si->scratch);
  si->stamp = loom__calloc(nv, sizeof *si->stamp);
  int64_t *cost = loom__calloc(nv, sizeof *cost);
  bool *live_value = loom__calloc(nv, sizeof *live_value);
  loom_status s = LOOM_OK;
  if (!si->layouts || !si->bytes || !si->physical || !si->is_output || !si->remat || !si->need || !si->hold ||
      !si->out_need || !si->live_op || !si->scratch || !si->stamp || !cost || !live_value)
    s = loom__oom("the splitter's graph facts");
  if (!s) s = loom__graph_layouts(g, si->layouts);
  if (!s) {
    for (int32_t v = 0; v < g->n_values; v++) {
      loom_type_bytes(&g->values[v].type, &si->bytes[v]); /* checked by the builder */
      si->physical[v] = si->layouts[v].owns ? si->bytes[v] : 0;
    }
    /* Streamed in or out piece by piece by the loops that read or make it: a stage holds only
     * a piece of it, which its loop's scratch counts (each stage graph that has the loop
     * streams it the same way). */
    for (int32_t o = 0; o < g->n_ops; o++) {
      const loom__op *op = &g->ops[o];
      for (int32_t k = 0; op->loop && k < op->n_inputs + op->n_outputs; k++) {
        int32_t v = k < op->n_inputs ? op->inputs[k] : op->outputs[k - op->n_inputs];
        if (loom__value_streamed(g, v) || loom__value_streamed_out(g, v) || passed_between_loops(g, v))
          si->bytes[v] = si->physical[v] = 0;
      }
    }
    for (int32_t i = 0; i < g->n_outputs; i++) si->is_output[g->outputs[i]] = true;
    for (int32_t o = 0; o < g->n_ops; o++) si->scratch[o] = loom__op_scratch_bytes(g, &g->ops[o]);
    mark_live_ops(g, live_value, si->live_op);
    decide_remat(si, cost);
    compute_need(si);
    compute_hold(si);
  }
  loom__free(cost);
  loom__free(live_value);
  if (s) loom__split_info_deinit(si);
  return s;
}

void loom__split_info_deinit(loom__split_info *si) {
  if (!si) return;
  loom__free(si->layouts);
  loom__free(si->bytes);
  loom__free(si->physical);
  loom__free(si->is_output);
  loom__free(si->remat);
  loom__free(si->need);
  loom__free(si->hold);
  loom__free(si->out_need);
  loom__free(si->live_op);
  loom__free(si->scratch);
  loom__free(si->stamp);
  memset(si, 0, sizeof *si);
}

/* ---- stage graphs --------------------------------------------------------------------- */

/* A growable list of value ids. */
typedef struct id_list {
  int32_t *v;
  int32_t n, cap;
} id_list;

static loom_status id_push(id_list *l, int32_t id) {
  if (loom__grow((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v)) return LOOM_ERR_OUT_OF_MEMORY;
  l->v[l->n++] = id;
  return LOOM_OK;
}

/* The values of [first, end) that the graph returns or that a later stage takes. */
static loom_status stage_outputs(const loom__split_info *si, int32_t first, int32_t end, id_list *out) {
  const loom_graph *g = si->g;
  for (int32_t o = first; o < end; o++) {
    if (!si->live_op[o]) continue;
    for (int32_t r = 0; r < g->ops[o].n_outputs; r++) {
      int32_t v = g->ops[o].outputs[r];
      if (si->is_output[v] || (!si->remat[v] && si->need[v] >= end)) {
        loom_status s = id_push(out, v);
        if (s) return s;
      }
    }
  }
  return LOOM_OK;
}

/* Marks needed[o - first] for the ops of [first, end) the outputs depend on inside the run. */
static void stage_needed(loom__split_info *si, int32_t first, int32_t end, const id_list *outputs,
                         bool *needed) {
  const loom_graph *g = si->g;
  int32_t gen = ++si->stamp_gen;
  for (int32_t i = 0; i < outputs->n; i++) si->stamp[outputs->v[i]] = gen;
  for (int32_t o = end - 1; o >= first; o--) {
    const loom__op *op = &g->ops[o];
    bool need = false;
    for (int32_t r = 0; r < op->n_outputs; r++) need |= si->stamp[op->outputs[r]] == gen;
    needed[o - first] = need && si->live_op[o];
    if (!needed[o - first]) continue;
    for (int32_t i = 0; i < op->n_inputs; i++) si->stamp[op->inputs[i]] = gen;
  }
}

/* An op of the run that the stage makes where it is first read rather than where it stands:
 * a recomputed source, or a view that no later op or stage needs as itself (its readers
 * reach it through the recomputation). A copy made late is held for less time. The running
 * estimate in split.c follows the same rule. */
static bool on_demand(const loom__split_info *si, int32_t o) {
  const loom__op *op = &si->g->ops[o];
  if (op->n_inputs == 0) return !si->is_output[op->outputs[0]];
  return op->n_outputs == 1 && loom__split_is_view(si, op->outputs[0]) && si->out_need[op->outputs[0]] <= o;
}

/* The parameter a read of v resolves to: v itself, or for a view made on demand or
 * recomputed, the parameter its operand chain needs; none for values the run makes in place
 * and for recomputed sources. */
static loom_status collect_param(loom__split_info *si, int32_t first, int32_t v, int32_t gen,
                                 id_list *params) {
  const loom_graph *g = si->g;
  for (;;) {
    int32_t p = g->values[v].op;
    if (p >= first) { /* made in the run: by an op copied in place, or on demand from its operand */
      if (!on_demand(si, p) || g->ops[p].n_inputs == 0) return LOOM_OK;
      v = g->ops[p].inputs[0];
      continue;
    }
    if (p < 0 || !si->remat[v]) {
      if (si->stamp[v] == gen) return LOOM_OK;
      si->stamp[v] = gen;
      return id_push(params, v);
    }
    if (g->ops[p].n_inputs == 0) return LOOM_OK;
    v = g->ops[p].inputs[0];
  }
}

/* Makes src value v exist in the stage graph: copies the recomputed ops that produce it. */
static loom_status import_value(loom__rebuild *rb, int32_t v, int depth) {
  if (rb->map[v] >= 0) return LOOM_OK;
  int32_t p = rb->src->values[v].op;
  char buf[32];
  if (p < 0 || depth > 4096)
    return loom__error(LOOM_ERR_INTERNAL,
                       "split: value '%s' reaches a stage neither as a parameter nor as a copy",
                       loom__value_label(rb->src, v, buf, sizeof buf));
  if (rb->src->ops[p].n_inputs > 0) {
    loom_status s = import_value(rb, rb->src->ops[p].inputs[0], depth + 1);
    if (s) return s;
  }
  return loom__rebuild_copy(rb, p);
}

static loom_status add_params(loom__rebuild *rb, const id_list *params) {
  for (int32_t i = 0; i < params->n; i++) {
    int32_t v = params->v[i];
    loom_value pv = loom_graph_param(rb->dst, NULL, &rb->src->values[v].type);
    if (pv.id < 0) return rb->dst->error ? rb->dst->error : LOOM_ERR_INTERNAL;
    loom__rebuild_set(rb, v, pv);
  }
  return LOOM_OK;
}

static loom_status copy_ops(loom__split_info *si, loom__rebuild *rb, int32_t first, int32_t end,
                            const bool *needed) {
  const loom_graph *g = si->g;
  for (int32_t o = first; o < end; o++) {
    if (!needed[o - first] || on_demand(si, o)) continue;
    for (int32_t i = 0; i < g->ops[o].n_inputs; i++) {
      loom_status s = import_value(rb, g->ops[o].inputs[i], 0);
      if (s) return s;
    }
    loom_status s = loom__rebuild_copy(rb, o);
    if (s) return s;
  }
  return LOOM_OK;
}

static loom_status finish_graph(loom__rebuild *rb, const id_list *outputs, loom_graph **out) {
  loom_value *ov = loom__malloc(sizeof *ov * (size_t)outputs->n);
  if (!ov) return loom__oom("stage outputs");
  for (int32_t i = 0; i < outputs->n; i++) ov[i] = loom__rebuild_get(rb, outputs->v[i]);
  loom_status s = loom_graph_return(rb->dst, ov, outputs->n);
  loom__free(ov);
  if (!s) s = loom_graph_verify(rb->dst);
  if (!s) {
    *out = rb->dst;
    rb->dst = NULL;
  }
  return s;
}

/* Builds the stage graph of [first, end) with these outputs. */
static loom_status stage_graph(loom__split_info *si, int32_t first, int32_t end, const id_list *outputs,
                               loom__stage *st) {
  const loom_graph *g = si->g;
  bool *needed = loom__calloc((size_t)LOOM_MAX(end - first, 1), sizeof *needed);
  id_list params = {0};
  loom__rebuild rb;
  memset(&rb, 0, sizeof rb);
  loom_status s = needed ? LOOM_OK : loom__oom("a stage");
  if (!s) {
    stage_needed(si, first, end, outputs, needed);
    int32_t gen = ++si->stamp_gen;
    for (int32_t o = first; !s && o < end; o++)
      if (needed[o - first] && !on_demand(si, o))
        for (int32_t i = 0; !s && i < g->ops[o].n_inputs; i++)
          s = collect_param(si, first, g->ops[o].inputs[i], gen, &params);
  }
  char name[160];
  snprintf(name, sizeof name, "%.120s_stage_%d", g->name, (int)first);
  if (!s) s = loom__rebuild_init_empty(&rb, g, name);
  if (!s) s = add_params(&rb, &params);
  if (!s) s = copy_ops(si, &rb, first, end, needed);
  if (!s) s = finish_graph(&rb, outputs, &st->graph);
  if (!s) {
    st->inputs = params.v;
    st->n_inputs = params.n;
    params.v = NULL;
  }
  loom__rebuild_deinit(&rb);
  loom__free(params.v);
  loom__free(needed);
  return s;
}

loom_status loom__stage_build(loom__split_info *si, int32_t first, int32_t end, int32_t runner,
                              loom__stage *st) {
  memset(st, 0, sizeof *st);
  st->runner = runner;
  st->first_op = first;
  st->n_ops = end - first;
  st->ops = loom__malloc(sizeof *st->ops * (size_t)LOOM_MAX(end - first, 1));
  if (!st->ops) return loom__oom("a stage's op list");
  for (int32_t o = first; o < end; o++) st->ops[o - first] = o;
  id_list outputs = {0};
  loom_status s = stage_outputs(si, first, end, &outputs);
  if (!s && outputs.n > 0) s = stage_graph(si, first, end, &outputs, st);
  if (!s && st->graph) {
    loom_estimate e;
    s = loom_graph_estimate(st->graph, NULL, &e);
    if (!s) st->estimated_peak = e.peak_bytes;
    loom_estimate_deinit(&e);
  }
  if (!s && st->graph) {
    st->outputs = outputs.v;
    st->n_outputs = outputs.n;
    outputs.v = NULL;
  }
  loom__free(outputs.v);
  if (s) {
    loom__error_prefix("stage of ops %d..%d: ", (int)first, (int)end - 1);
    loom__stage_deinit(st);
  }
  return s;
}

void loom__stage_deinit(loom__stage *st) {
  if (!st) return;
  loom__free(st->ops);
  loom__free(st->inputs);
  loom__free(st->outputs);
  loom_graph_destroy(st->graph);
  memset(st, 0, sizeof *st);
}

/* ---- plans ---------------------------------------------------------------------------- */

loom_status loom__plan_create(loom_graph *graph, const loom_runner *runners, int32_t n_runners,
                              loom_plan **out) {
  *out = NULL;
  loom_plan *p = loom__calloc(1, sizeof *p);
  if (p) p->runners = loom__malloc(sizeof *p->runners * (size_t)LOOM_MAX(n_runners, 1));
  if (!p || !p->runners) {
    if (p) loom__free(p);
    loom_graph_destroy(graph);
    return loom__oom("a plan");
  }
  if (n_runners > 0) memcpy(p->runners, runners, sizeof *p->runners * (size_t)n_runners);
  for (int32_t i = 0; i < n_runners; i++) p->runners[i].device[sizeof p->runners[i].device - 1] = '\0';
  p->n_runners = n_runners;
  p->graph = graph;
  *out = p;
  return LOOM_OK;
}

loom_status loom__plan_push(loom_plan *p, loom__stage *st) {
  if (loom__grow((void **)&p->stages, &p->cap_stages, p->n_stages + 1, sizeof *p->stages)) {
    loom__stage_deinit(st);
    return LOOM_ERR_OUT_OF_MEMORY;
  }
  p->stages[p->n_stages++] = *st;
  memset(st, 0, sizeof *st);
  return LOOM_OK;
}

void loom__plan_clear(loom_plan *p) {
  for (int32_t i = 0; i < p->n_stages; i++) loom__stage_deinit(&p->stages[i]);
  p->n_stages = 0;
}

void loom__plan_set_graph(loom_plan *p, loom_graph *graph) {
  loom_graph_destroy(p->graph);
  p->graph = graph;
}

void loom_plan_destroy(loom_plan *p) {
  if (!p) return;
  loom__plan_clear(p);
  loom__free(p->stages);
  loom__free(p->runners);
  loom_graph_destroy(p->graph);
  loom__free(p);
}

int32_t loom_plan_stage_count(const loom_plan *p) {
  return p ? p->n_stages : 0;
}

const loom_graph *loom_plan_graph(const loom_plan *p) {
  return p ? p->graph : NULL;
}

loom_status loom_plan_stage(const loom_plan *p, int32_t i, loom_stage_info *out) {
  if (!out) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_plan_stage: out is NULL");
  memset(out, 0, sizeof *out);
  if (!p) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_plan_stage: plan is NULL");
  if (i < 0 || i >= p->n_stages)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "loom_plan_stage: stage %d does not exist (the plan has %d)", (int)i,
                       (int)p->n_stages);
  const loom__stage *st = &p->stages[i];
  out->runner = st->runner;
  out->device = p->runners[st->runner].device;
  out->limit = p->runners[st->runner].limit;
  out->n_ops = st->n_ops;
  out->ops = st->ops;
  out->n_inputs = st->n_inputs;
  out->inputs = st->inputs;
  out->n_outputs = st->n_outputs;
  out->outputs = st->outputs;
  out->estimated_peak = st->estimated_peak;
  out->graph = st->graph;
  return LOOM_OK;
}

/* ---- listing ---------------------------------------------------------------------------- */

static void print_names(FILE *f, const loom_graph *g, const char *label, const int32_t *ids, int32_t n) {
  fprintf(f, "  %-8s", label);
  if (n == 0) fprintf(f, " (none)");
  for (int32_t i = 0; i < n; i++) {
    char buf[32];
    fprintf(f, "%s %s", i ? "," : "", loom__value_label(g, ids[i], buf, sizeof buf));
  }
  fputc('\n', f);
}

static void print_stage(FILE *f, const loom_plan *p, int32_t i) {
  const loom__stage *st = &p->stages[i];
  const loom_runner *r = &p->runners[st->runner];
  char lim[32], peak[32];
  if (r->limit > 0)
    loom__format_bytes(r->limit, lim, sizeof lim);
  else
    snprintf(lim, sizeof lim, "no limit");
  fprintf(f, "stage %d: runner %d (%s, limit %s), ", (int)i, (int)st->runner, r->device, lim);
  if (!st->graph) {
    fprintf(f, "nothing to run: %d op%s whose results are recomputed where they are needed\n", (int)st->n_ops,
            st->n_ops == 1 ? "" : "s");
    return;
  }
  fprintf(f, "estimated peak %s, %d op%s (%d..%d)\n",
          loom__format_bytes(st->estimated_peak, peak, sizeof peak), (int)st->n_ops,
          st->n_ops == 1 ? "" : "s", (int)st->first_op, (int)(st->first_op + st->n_ops - 1));
  print_names(f, p->graph, "inputs:", st->inputs, st->n_inputs);
  print_names(f, p->graph, "outputs:", st->outputs, st->n_outputs);
}

loom_status loom_plan_print(const loom_plan *p, FILE *f) {
  if (!p || !f) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_plan_print: NULL argument");
  fprintf(f, "plan for graph '%s': %d stage%s on %d runner%s\n", p->graph->name, (int)p->n_stages,
          p->n_stages == 1 ? "" : "s", (int)p->n_runners, p->n_runners == 1 ? "" : "s");
  for (int32_t i = 0; i < p->n_stages; i++) print_stage(f, p, i);
  if (ferror(f)) return loom__error(LOOM_ERR_IO, "loom_plan_print: writing failed");
  return LOOM_OK;
}
