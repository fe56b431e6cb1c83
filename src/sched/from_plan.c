/* The problem of a plan: every loop piece becomes a task, the ops of a stage between loops
 * one task, and the graph's values become data (a view is its base's data; a loop's results
 * are one data per piece). */
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "sched/sched_impl.h"

/* Where each value of the plan's graph lives as data: data[first .. first + count). */
typedef struct value_data {
  int32_t first, count; /* count 0: no data (a fill, a constant folded into its reader) */
} value_data;

typedef struct builder {
  const loom_graph *g;
  const loom_sched_platform *platform;
  loom_sched_problem *p;
  value_data *vals;
  int32_t n_vals;
  int32_t *inputs; /* scratch: the inputs of the task being built */
  int32_t n_inputs, cap_inputs;
  int32_t n_loops;
} builder;

static int64_t physical(const loom_graph *g, loom_value v) {
  int64_t phys = 0;
  return loom_value_bytes(g, v, NULL, &phys) ? 0 : phys;
}

static loom_status add_input(builder *b, int32_t data) {
  for (int32_t i = 0; i < b->n_inputs; i++) {
    if (b->inputs[i] == data) return LOOM_OK;
  }
  loom_status s = loom__grow((void **)&b->inputs, &b->cap_inputs, b->n_inputs + 1, sizeof *b->inputs);
  if (!s) b->inputs[b->n_inputs++] = data;
  return s;
}

/* Adds every data of value v to the inputs. */
static loom_status read_value(builder *b, loom_value v) {
  if (v.id < 0 || v.id >= b->n_vals) return LOOM_OK;
  for (int32_t i = 0; i < b->vals[v.id].count; i++) {
    loom_status s = add_input(b, b->vals[v.id].first + i);
    if (s) return s;
  }
  return LOOM_OK;
}

static int64_t inputs_bytes(const builder *b) {
  int64_t sum = 0;
  for (int32_t i = 0; i < b->n_inputs; i++) sum += b->p->data[b->inputs[i]].bytes;
  return sum;
}

/* The results of op `index`, made by task `task`: new data where they own storage, their
 * base's data where they are views. */
static loom_status bind_results(builder *b, int32_t index, int32_t task, int64_t *bytes) {
  loom_op_info info;
  loom_status s = loom_graph_op_info_get(b->g, index, &info);
  for (int32_t k = 0; !s && k < info.n_outputs; k++) {
    loom_value v = loom_graph_op_output(b->g, index, k);
    int64_t phys = physical(b->g, v);
    if (phys == 0 && info.n_inputs > 0) {
      loom_value base = loom_graph_op_input(b->g, index, 0);
      if (base.id >= 0 && base.id < b->n_vals) b->vals[v.id] = b->vals[base.id];
      continue;
    }
    loom_sched_data d = {.bytes = phys, .producer = task, .node = -1, .parent = -1};
    b->vals[v.id] = (value_data){b->p->n_data, 1};
    *bytes += phys;
    s = loom_sched_problem_add_data(b->p, &d, NULL);
  }
  return s;
}

/* One task for the non-loop ops ops[0..n) of a stage. */
static loom_status group_task(builder *b, const int32_t *ops, int32_t n, int32_t stage, int32_t fixed) {
  loom_sched_task t = {.fixed_device = fixed, .loop = -1};
  snprintf(t.label, sizeof t.label, "stage %d ops %d..%d", stage, ops[0], ops[n - 1]);
  b->n_inputs = 0;
  loom_status s = LOOM_OK;
  for (int32_t i = 0; !s && i < n; i++) {
    loom_op_info info;
    s = loom_graph_op_info_get(b->g, ops[i], &info);
    for (int32_t k = 0; !s && k < info.n_inputs; k++) s = read_value(b, loom_graph_op_input(b->g, ops[i], k));
    if (!s) s = loom_sched_op_work(b->g, ops[i], t.size, t.kernels);
  }
  /* A value made inside the group has no data yet when its readers are seen (results are
   * bound below, once the task exists to name as their producer), so it is no input. */
  t.memory = s ? 0 : inputs_bytes(b);
  int32_t id = -1;
  if (!s) s = loom_sched_problem_add_task(b->p, &t, b->inputs, b->n_inputs, &id);
  int64_t made = 0;
  for (int32_t i = 0; !s && i < n; i++) s = bind_results(b, ops[i], id, &made);
  if (!s) b->p->tasks[id].memory += made;
  return s;
}

/* The data a piece reads of operand k: a slice of its only data, or all of it. */
static loom_status piece_operand(builder *b, int32_t index, int32_t k, const loom_graph *body, double frac) {
  loom_value v = loom_graph_op_input(b->g, index, k);
  loom_loop_input rule;
  loom_status s = loom_graph_loop_input_rule(b->g, index, k, &rule);
  if (s || v.id < 0 || v.id >= b->n_vals) return s;
  value_data vd = b->vals[v.id];
  if (rule.axis < 0 || vd.count != 1) return read_value(b, v);
  int64_t bytes = physical(body, loom_graph_param_at(body, k));
  if (bytes == 0) loom_type_bytes(loom_value_type(body, loom_graph_param_at(body, k)), &bytes);
  loom_sched_data d = {
      .bytes = (int64_t)((double)bytes * frac), .producer = -1, .node = -1, .parent = vd.first};
  int32_t id = -1;
  s = loom_sched_problem_add_data(b->p, &d, &id);
  return s ? s : add_input(b, id);
}

/* One task per piece of loop op `index`; its results become one data per piece. */
static loom_status loop_tasks(builder *b, int32_t index, int32_t stage, int32_t fixed) {
  const loom_graph *body = NULL;
  int64_t n = 0, piece = 1;
  loom_status s = loom_graph_loop_get(b->g, index, &body, &n, &piece);
  loom_estimate e = {0};
  if (!s) s = loom_graph_estimate(body, NULL, &e);
  if (s) return s;
  int64_t peak = e.peak_bytes, out_bytes = 0;
  loom_estimate_deinit(&e);
  for (int32_t k = 0; k < loom_graph_output_count(body); k++)
    out_bytes += physical(body, loom_graph_output_at(body, k));
  int64_t pieces = (n + piece - 1) / piece;
  int32_t first_data = b->p->n_data, loop = b->n_loops++;
  loom_op_info info;
  loom_graph_op_info_get(b->g, index, &info);
  for (int64_t i = 0; !s && i < pieces; i++) {
    double frac = (double)((i + 1) * piece > n ? n - i * piece : piece) / (double)piece;
    loom_sched_task t = {.fixed_device = fixed, .loop = loop, .memory = peak};
    snprintf(t.label, sizeof t.label, "stage %d loop op %d piece %lld", stage, index, (long long)i);
    s = loom__sched_body_work(body, frac, t.size, t.kernels);
    b->n_inputs = 0;
    for (int32_t k = 0; !s && k < info.n_inputs; k++) s = piece_operand(b, index, k, body, frac);
    int32_t id = -1;
    if (!s) s = loom_sched_problem_add_task(b->p, &t, b->inputs, b->n_inputs, &id);
    loom_sched_data d = {
        .bytes = (int64_t)((double)out_bytes * frac), .producer = id, .node = -1, .parent = -1};
    if (!s) s = loom_sched_problem_add_data(b->p, &d, NULL);
  }
  /* The pieces' data are interleaved with the slices they read: a value's data must be one
   * run, so the piece results get a run of aliases at the end (a slice with parent = piece
   * result, full size). */
  if (s) return s;
  int32_t first_alias = b->p->n_data;
  for (int32_t d = first_data; !s && d < first_alias; d++) {
    if (b->p->data[d].producer < 0) continue;
    loom_sched_data alias = {.bytes = b->p->data[d].bytes, .producer = -1, .node = -1, .parent = d};
    s = loom_sched_problem_add_data(b->p, &alias, NULL);
  }
  for (int32_t k = 0; !s && k < info.n_outputs; k++) {
    loom_value v = loom_graph_op_output(b->g, index, k);
    b->vals[v.id] = (value_data){first_alias, b->p->n_data - first_alias};
  }
  return s;
}

/* The tasks of one stage: runs of non-loop ops as one task each, loops as their pieces. */
static loom_status stage_tasks(builder *b, const loom_stage_info *st, int32_t stage) {
  int32_t fixed = st->device ? loom_sched_platform_find(b->platform, st->device) : -1;
  int32_t start = 0;
  loom_status s = LOOM_OK;
  for (int32_t i = 0; !s && i <= st->n_ops; i++) {
    loom_op_info info = {0};
    bool is_loop =
        i < st->n_ops && !loom_graph_op_info_get(b->g, st->ops[i], &info) && info.kind == LOOM_OP_LOOP;
    if ((is_loop || i == st->n_ops) && i > start) s = group_task(b, st->ops + start, i - start, stage, fixed);
    if (!s && is_loop) s = loop_tasks(b, st->ops[i], stage, fixed);
    if (is_loop) start = i + 1;
  }
  return s;
}

static loom_status begin(builder *b, const loom_graph *g, const loom_sched_platform *platform) {
  memset(b, 0, sizeof *b);
  b->g = g, b->platform = platform;
  loom_status s = loom_graph_verify(g);
  if (s) return s;
  if ((s = loom_sched_problem_create(&b->p))) return s;
  /* Value ids are below the op count times the most results an op has, plus the params. */
  int32_t n = loom_graph_param_count(g);
  for (int32_t i = 0; i < loom_graph_op_count(g); i++) {
    loom_op_info info;
    loom_graph_op_info_get(g, i, &info);
    for (int32_t k = 0; k < info.n_outputs; k++) {
      int32_t id = loom_graph_op_output(g, i, k).id;
      if (id + 1 > n) n = id + 1;
    }
  }
  for (int32_t i = 0; i < loom_graph_param_count(g); i++) {
    int32_t id = loom_graph_param_at(g, i).id;
    if (id + 1 > n) n = id + 1;
  }
  if (!(b->vals = loom__calloc((size_t)n + 1, sizeof *b->vals))) return loom__oom("problem");
  b->n_vals = n;
  for (int32_t i = 0; !s && i < loom_graph_param_count(g); i++) {
    loom_value v = loom_graph_param_at(g, i);
    loom_sched_data d = {.bytes = physical(g, v), .producer = -1, .node = 0, .parent = -1};
    b->vals[v.id] = (value_data){b->p->n_data, 1};
    s = loom_sched_problem_add_data(b->p, &d, NULL);
  }
  return s;
}

/* Marks the data of the graph's outputs; frees the builder, giving the problem on success. */
static loom_status finish(builder *b, loom_status s, loom_sched_problem **out) {
  for (int32_t i = 0; !s && i < loom_graph_output_count(b->g); i++) {
    loom_value v = loom_graph_output_at(b->g, i);
    if (v.id < 0 || v.id >= b->n_vals) continue;
    for (int32_t k = 0; k < b->vals[v.id].count; k++) {
      int32_t d = b->vals[v.id].first + k;
      while (b->p->data[d].parent >= 0) d = b->p->data[d].parent; /* what a task makes */
      b->p->data[d].output = true;
    }
  }
  loom__free(b->vals);
  loom__free(b->inputs);
  if (s) {
    loom_sched_problem_destroy(b->p);
    return s;
  }
  *out = b->p;
  return LOOM_OK;
}

loom_status loom_sched_problem_from_plan(const loom_plan *plan, const loom_sched_platform *platform,
                                         loom_sched_problem **out_problem) {
  if (out_problem) *out_problem = NULL;
  if (!plan || !platform || !out_problem)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "problem: NULL argument");
  builder b;
  loom_status s = begin(&b, loom_plan_graph(plan), platform);
  for (int32_t i = 0; !s && i < loom_plan_stage_count(plan); i++) {
    loom_stage_info st;
    s = loom_plan_stage(plan, i, &st);
    if (!s) s = stage_tasks(&b, &st, i);
  }
  return finish(&b, s, out_problem);
}

loom_status loom_sched_problem_from_graph(const loom_graph *graph, const loom_sched_platform *platform,
                                          loom_sched_problem **out_problem) {
  if (out_problem) *out_problem = NULL;
  if (!graph || !platform || !out_problem)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "problem: NULL argument");
  builder b;
  loom_status s = begin(&b, graph, platform);
  int32_t n = loom_graph_op_count(graph);
  int32_t *ops = s ? NULL : loom__malloc(sizeof *ops * (size_t)(n ? n : 1));
  if (!s && !ops) s = loom__oom("problem");
  for (int32_t i = 0; ops && i < n; i++) ops[i] = i;
  loom_stage_info st = {.device = NULL, .n_ops = n, .ops = ops};
  if (!s) s = stage_tasks(&b, &st, 0);
  loom__free(ops);
  return finish(&b, s, out_problem);
}
