/* The memory estimator: IR.md's model, mirroring the executor step for step (see plan.h). */
#include <string.h>

#include "ir/ir.h"
#include "ir/view.h"
#include "loom/estimate.h"

/* Per-base-value lifetimes for a schedule: position of creation and of the last reader. */
typedef struct lifetimes {
  int32_t *created;  /* schedule position; -1 for inputs (held from the start) */
  int32_t *last_use; /* schedule position; INT32_MAX for outputs; -1 never read */
  int64_t *physical; /* bytes the base holds */
} lifetimes;

static loom_status check_schedule(const loom_graph *g, const int32_t *order, int32_t *pos_of) {
  for (int32_t i = 0; i < g->n_ops; i++) pos_of[i] = -1;
  for (int32_t p = 0; p < g->n_ops; p++) {
    int32_t o = order[p];
    if (o < 0 || o >= g->n_ops || pos_of[o] >= 0)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "schedule: entry %d (%d) is not a new op index", (int)p,
                         (int)o);
    pos_of[o] = p;
  }
  for (int32_t o = 0; o < g->n_ops; o++)
    for (int32_t i = 0; i < g->ops[o].n_inputs; i++) {
      int32_t producer = g->values[g->ops[o].inputs[i]].op;
      if (producer >= 0 && pos_of[producer] > pos_of[o])
        return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                           "schedule: op %d (%s) runs before the op that makes its operand", (int)o,
                           loom_op_name(g->ops[o].kind));
    }
  return LOOM_OK;
}

/* free_base (NULL: none) marks the bases held elsewhere: a loop body's parameters (views of
 * the loop's operands) and the results it writes into their slots, a graph's streamed inputs. */
static void physical_sizes(const loom_graph *g, const loom__layout *layouts, const bool *free_base,
                           int64_t *physical) {
  for (int32_t v = 0; v < g->n_values; v++) {
    physical[v] = 0;
    if (layouts[v].owns && !(free_base && free_base[v])) loom_type_bytes(&g->values[v].type, &physical[v]);
  }
}

static void compute_lifetimes(const loom_graph *g, const loom__layout *layouts, const int32_t *order,
                              lifetimes *lt) {
  for (int32_t v = 0; v < g->n_values; v++) lt->created[v] = lt->last_use[v] = -1;
  for (int32_t p = 0; p < g->n_ops; p++) {
    const loom__op *op = &g->ops[order[p]];
    for (int32_t r = 0; r < op->n_outputs; r++) {
      int32_t b = layouts[op->outputs[r]].base;
      if (b == op->outputs[r]) lt->created[b] = p;
      if (lt->last_use[b] < p) lt->last_use[b] = p;
    }
    for (int32_t i = 0; i < op->n_inputs; i++) lt->last_use[layouts[op->inputs[i]].base] = p;
  }
  for (int32_t i = 0; i < g->n_outputs; i++) lt->last_use[layouts[g->outputs[i]].base] = INT32_MAX;
}

static int64_t loop_scratch(const loom_graph *g, const loom__op *op, const bool *out_through);

/* Fills one step's own figures (not what is held across it). out_through (NULL: none) marks
 * the values a loop streams out into the caller's tensor (loop_scratch). */
static void fill_step(const loom_graph *g, const loom__layout *layouts, const lifetimes *lt,
                      const bool *out_through, int32_t op_index, loom_estimate_step *st) {
  const loom__op *op = &g->ops[op_index];
  memset(st, 0, sizeof *st);
  st->op = op_index;
  for (int32_t r = 0; r < op->n_outputs; r++) {
    int64_t bytes = 0;
    loom_type_bytes(&g->values[op->outputs[r]].type, &bytes);
    st->output_logical = loom__sat_add_i64(st->output_logical, bytes);
    if (layouts[op->outputs[r]].base == op->outputs[r])
      st->output_physical = loom__sat_add_i64(st->output_physical, lt->physical[op->outputs[r]]);
  }
  if (op->loop) {
    bool through[LOOM_LOOP_MAX_RESULTS] = {false};
    for (int32_t j = 0; out_through && j < op->n_outputs && j < LOOM_LOOP_MAX_RESULTS; j++)
      through[j] = out_through[op->outputs[j]];
    st->temporary = loop_scratch(g, op, through);
  } else {
    st->temporary = loom__op_scratch_bytes(g, op);
  }
}

/* What is held across each step, by a sweep: a base counts from the step after its creation
 * (inputs from the start) through the step of its last reader. */
static void sweep_live(const loom_graph *g, const loom__layout *layouts, const lifetimes *lt, int64_t *delta,
                       loom_estimate *e) {
  int32_t n = g->n_ops;
  memset(delta, 0, sizeof(int64_t) * (size_t)(n + 1));
  for (int32_t v = 0; v < g->n_values; v++) {
    if (layouts[v].base != v || lt->physical[v] == 0 || lt->last_use[v] < 0) continue;
    bool is_input = g->values[v].op < 0;
    int32_t from = is_input ? 0 : lt->created[v] + 1;
    int32_t to = lt->last_use[v] == INT32_MAX ? n : lt->last_use[v] + 1; /* exclusive */
    if (from >= to) continue;
    /* saturating: past INT64_MAX the figures are bounds, all far beyond any limit */
    delta[from] = loom__sat_add_i64(delta[from], lt->physical[v]);
    delta[to] = loom__sat_add_i64(delta[to], -lt->physical[v]);
  }
  int64_t live = 0;
  for (int32_t p = 0; p < n; p++) {
    live = loom__sat_add_i64(live, delta[p]);
    e->steps[p].live_before = live;
    e->steps[p].peak =
        loom__sat_add_i64(loom__sat_add_i64(live, e->steps[p].output_physical), e->steps[p].temporary);
  }
}

static loom_status estimate_with(const loom_graph *g, const int32_t *order, const bool *free_base,
                                 const bool *out_through, loom__layout *layouts, lifetimes *lt,
                                 loom_estimate *e) {
  loom_status s = loom__graph_layouts(g, layouts);
  if (s) return s;
  physical_sizes(g, layouts, free_base, lt->physical);
  compute_lifetimes(g, layouts, order, lt);
  e->steps = loom__calloc((size_t)(g->n_ops ? g->n_ops : 1), sizeof *e->steps);
  if (!e->steps) return loom__oom("estimate steps");
  e->n_steps = g->n_ops;
  e->peak_step = -1;
  for (int32_t p = 0; p < g->n_params; p++)
    if (lt->last_use[g->params[p]] >= 0)
      e->input_bytes = loom__sat_add_i64(e->input_bytes, lt->physical[g->params[p]]);
  e->peak_bytes = e->input_bytes;
  for (int32_t p = 0; p < g->n_ops; p++) fill_step(g, layouts, lt, out_through, order[p], &e->steps[p]);
  int64_t *delta = loom__malloc(sizeof(int64_t) * (size_t)(g->n_ops + 1));
  if (!delta) return loom__oom("estimate sweep");
  sweep_live(g, layouts, lt, delta, e);
  loom__free(delta);
  for (int32_t p = 0; p < g->n_ops; p++) {
    loom_estimate_step *st = &e->steps[p];
    e->logical_bytes = loom__sat_add_i64(e->logical_bytes, st->output_logical);
    e->physical_bytes = loom__sat_add_i64(e->physical_bytes, st->output_physical);
    e->temporary_bytes = loom__sat_add_i64(e->temporary_bytes, st->temporary);
    if (e->peak_step < 0 || st->peak > e->steps[e->peak_step].peak) e->peak_step = p;
    if (st->peak > e->peak_bytes) e->peak_bytes = st->peak;
  }
  e->total_bytes = loom__sat_add_i64(e->physical_bytes, e->temporary_bytes);
  return LOOM_OK;
}

/* The estimate with the bases of free_base (per value, or NULL) held elsewhere, and the loop
 * results of out_through (per value, or NULL) streamed out into the caller's tensor. */
static loom_status estimate_free(const loom_graph *g, const int32_t *schedule, const bool *free_base,
                                 const bool *out_through, loom_estimate *out) {
  memset(out, 0, sizeof *out);
  loom_status s = LOOM_OK;
  size_t nv = (size_t)(g->n_values ? g->n_values : 1), no = (size_t)(g->n_ops ? g->n_ops : 1);
  int32_t *order = loom__malloc(no * sizeof *order), *pos_of = loom__malloc(no * sizeof *pos_of);
  loom__layout *layouts = loom__malloc(nv * sizeof *layouts);
  lifetimes lt = {loom__malloc(nv * sizeof(int32_t)), loom__malloc(nv * sizeof(int32_t)),
                  loom__malloc(nv * sizeof(int64_t))};
  if (!order || !pos_of || !layouts || !lt.created || !lt.last_use || !lt.physical)
    s = loom__oom("an estimate");
  for (int32_t i = 0; !s && i < g->n_ops; i++) order[i] = schedule ? schedule[i] : i;
  if (!s) s = check_schedule(g, order, pos_of);
  if (!s) s = estimate_with(g, order, free_base, out_through, layouts, &lt, out);
  if (s) loom_estimate_deinit(out);
  loom__free(order);
  loom__free(pos_of);
  loom__free(layouts);
  loom__free(lt.created);
  loom__free(lt.last_use);
  loom__free(lt.physical);
  return s;
}

bool loom__value_streamed(const loom_graph *g, int32_t v) {
  if (v < 0 || v >= g->n_values || g->values[v].op >= 0) return false;
  const loom_type *t = &g->values[v].type;
  int32_t readers = 0;
  for (int32_t o = 0; o < g->n_ops; o++) {
    const loom__op *op = &g->ops[o];
    for (int32_t i = 0; i < op->n_inputs; i++) {
      if (op->inputs[i] != v) continue;
      if (!op->loop) return false;
      if (op->loop->rules[i].axis < 0) {
        /* passed whole to a body that streams it itself: a loop in the body slices it (a
         * dot's rows outside, its k inside: both operands streamed) */
        const loom_graph *b = op->loop->body;
        if (!loom__value_streamed(b, b->params[i])) return false;
        readers++;
        continue;
      }
      /* a slice is written in from the caller's tensor one run per index before its axis (a
       * conv's window over many channels, a block of a matrix's columns); a packed q4 slice
       * must be one run of whole bytes */
      for (int32_t d = 0; d < op->loop->rules[i].axis && t->dtype == LOOM_Q4; d++)
        if (t->dims[d] != 1) return false;
      readers++;
    }
  }
  for (int32_t k = 0; k < g->n_outputs; k++)
    if (g->outputs[k] == v) return false;
  return readers > 0;
}

/* Whether the loops reading value v of g slice it plainly (no window), or pass it whole to a
 * body whose loops do: a passed-on slice stays out of a conv's windowed tiles, whose plans the
 * window's halo shapes. */
static bool sliced_plainly(const loom_graph *g, int32_t v) {
  for (int32_t o = 0; o < g->n_ops; o++) {
    const loom__op *op = &g->ops[o];
    for (int32_t i = 0; op->loop && i < op->n_inputs; i++) {
      if (op->inputs[i] != v) continue;
      const loom_loop_input *r = &op->loop->rules[i];
      if (r->axis >= 0 ? loom__loop_windowed(r) : !sliced_plainly(op->loop->body, op->loop->body->params[i]))
        return false;
    }
  }
  return true;
}

bool loom__loop_slice_passed(const loom_graph *g, const loom__op *op, int32_t i) {
  const loom__loop *l = op->loop;
  const loom_loop_input *r = &l->rules[i];
  const loom_type *t = &g->values[op->inputs[i]].type;
  /* a slice of many runs (a block of B's columns) passes on too: the inner loop's slices of it
   * are runs of runs of the caller's tensor, read in place or written in run by run */
  if (r->axis < 0 || loom__loop_windowed(r) || t->dtype == LOOM_Q4 || !loom__value_streamed(g, op->inputs[i]))
    return false;
  return loom__value_streamed(l->body, l->body->params[i]) && sliced_plainly(l->body, l->body->params[i]);
}

/* Whether result j of loop op has a contiguous slot in the loop's result. */
static bool slot_contiguous(const loom_graph *g, const loom__op *op, int32_t j) {
  const loom__loop *l = op->loop;
  if (l->combines[j].combine != LOOM_COMBINE_CONCAT) return false;
  const loom_type *t = &g->values[op->outputs[j]].type;
  for (int32_t d = 0; d < l->combines[j].axis; d++)
    if (t->dims[d] != 1) return false;
  return true;
}

/* Whether the body computes result j of loop op into storage of its own (not a view, not a
 * parameter, not returned twice): dense, so it can be written into a slot or read out. */
static bool body_result_owns(const loom__op *op, int32_t j) {
  const loom_graph *b = op->loop->body;
  int32_t v = b->outputs[j];
  if (b->values[v].op < 0) return false;
  for (int32_t k = 0; k < b->n_outputs; k++)
    if (k != j && b->outputs[k] == v) return false;
  const loom__op *producer = &b->ops[b->values[v].op];
  /* views and fills own nothing; a reshape of contiguous data, a transpose, broadcast or
   * slice may be a view, so none of them counts (a concat or tile always copies) */
  loom__op_class cls = loom__op_info_of(producer->kind)->cls;
  return producer->kind != LOOM_OP_FILL &&
         (cls != LOOM_CLASS_LAYOUT || producer->kind == LOOM_OP_CONCAT || producer->kind == LOOM_OP_TILE);
}

bool loom__value_streamed_out(const loom_graph *g, int32_t v) {
  if (v < 0 || v >= g->n_values || g->values[v].op < 0) return false;
  const loom__op *op = &g->ops[g->values[v].op];
  int32_t j = g->values[v].result;
  /* a slot that is not contiguous (a tile of a conv's many channels) is read out in runs */
  if (!op->loop || op->loop->combines[j].combine != LOOM_COMBINE_CONCAT || !body_result_owns(op, j))
    return false;
  bool returned = false;
  for (int32_t k = 0; k < g->n_outputs; k++) returned |= g->outputs[k] == v;
  if (!returned) return false;
  for (int32_t o = 0; o < g->n_ops; o++)
    for (int32_t i = 0; i < g->ops[o].n_inputs; i++)
      if (g->ops[o].inputs[i] == v) return false;
  return true;
}

loom_status loom_graph_estimate(const loom_graph *g, const int32_t *schedule, loom_estimate *out) {
  if (!out) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_estimate: out is NULL");
  memset(out, 0, sizeof *out);
  loom_status s = loom_graph_verify(g);
  if (s) return s;
  bool *streamed = NULL;
  bool loops = false;
  for (int32_t o = 0; o < g->n_ops && !loops; o++) loops = g->ops[o].loop != NULL;
  /* Only a loop's operands and results can be streamed: a graph without loops (most, and the
   * largest) needs no scan. */
  for (int32_t o = 0; loops && o < g->n_ops; o++) {
    const loom__op *op = &g->ops[o];
    if (!op->loop) continue;
    for (int32_t k = 0; k < op->n_inputs + op->n_outputs; k++) {
      int32_t v = k < op->n_inputs ? op->inputs[k] : op->outputs[k - op->n_inputs];
      if (!loom__value_streamed(g, v) && !loom__value_streamed_out(g, v)) continue;
      if (!streamed && !(streamed = loom__calloc((size_t)g->n_values, sizeof *streamed)))
        return loom__oom("an estimate");
      streamed[v] = true;
    }
  }
  s = estimate_free(g, schedule, streamed, streamed, out);
  loom__free(streamed);
  return s;
}

bool loom__loop_result_in_place(const loom_graph *g, const loom__op *op, int32_t j) {
  return slot_contiguous(g, op, j) && body_result_owns(op, j) && !loom__value_streamed_out(g, op->outputs[j]);
}

/* What the body still holds when its last op has run: its returned values' storage, less
 * what is held elsewhere (free_base). The executor keeps it through the piece's combines. */
static int64_t held_at_end(const loom_graph *b, const loom__layout *layouts, const bool *free_base) {
  int64_t held = 0;
  for (int32_t k = 0; k < b->n_outputs; k++) {
    int32_t base = layouts[b->outputs[k]].base;
    bool seen = false;
    for (int32_t j = 0; j < k && !seen; j++) seen = layouts[b->outputs[j]].base == base;
    int64_t bytes = 0;
    if (!seen && layouts[base].owns && !free_base[base]) loom_type_bytes(&b->values[base].type, &bytes);
    held = loom__sat_add_i64(held, bytes);
  }
  return held;
}

/* The temporaries of merging pair j, j + 1 of loop op (the executor's steps, exec.c):
 * - argmax/argmin over E elements: two bool masks (E each), then the winning mask (E) beside
 *   the pieces it picks as i64 (8E); a piece whose indices are not dense is copied dense (8E)
 *   once the mask is gone: 9E, or 16E with the copy;
 * - topk of values (vb bytes) and indices (ib): the candidates side by side (2 vb), the merged
 *   topk's positions (ib) and its scratch (vb + ib); then the positions (ib) beside a dense
 *   copy of the piece's indices where they are not dense (ib): 3 vb + 2 ib. */
static int64_t merge_bytes(const loom_graph *g, const loom__op *op, int32_t j,
                           const loom__layout *body_layouts) {
  const loom_graph *b = op->loop->body;
  int64_t vb = 0, ib = 0;
  loom_type_bytes(&g->values[op->outputs[j]].type, &vb);
  loom_type_bytes(&g->values[op->outputs[j + 1]].type, &ib);
  if (op->loop->combines[j].combine == LOOM_COMBINE_TOPK) return 3 * vb + 2 * ib;
  int64_t e = ib / 8;
  int32_t idx = b->outputs[j + 1];
  bool dense = loom__layout_contiguous(&body_layouts[idx], &b->values[idx].type);
  return dense ? 9 * e : 16 * e;
}

bool loom__loop_result_passed_out(const loom_graph *g, const loom__op *op, int32_t j, bool streamed_out) {
  const loom_graph *b = op->loop->body;
  for (int32_t k = 0; k < b->n_outputs; k++) /* one block of the caller's per body result */
    if (k != j && b->outputs[k] == b->outputs[j]) return false;
  return streamed_out && slot_contiguous(g, op, j) && loom__value_streamed_out(b, b->outputs[j]);
}

int64_t loom__loop_scratch_bytes(const loom_graph *g, const loom__op *op) {
  bool through[LOOM_LOOP_MAX_RESULTS] = {false};
  for (int32_t j = 0; j < op->n_outputs && j < LOOM_LOOP_MAX_RESULTS; j++)
    through[j] = loom__value_streamed_out(g, op->outputs[j]);
  return loop_scratch(g, op, through);
}

/* Loop op's scratch where through[j] says its result j is streamed out into the caller's
 * tensor: a body result that an inner loop computes piece by piece then passes out too
 * (loom__loop_result_passed_out), held nowhere, and that inner loop streams it out in turn. */
static int64_t loop_scratch(const loom_graph *g, const loom__op *op, const bool *through) {
  const loom__loop *l = op->loop;
  const loom_graph *b = l->body;
  size_t nv = (size_t)LOOM_MAX(b->n_values, 1);
  bool *free_base = loom__calloc(nv, sizeof *free_base), *out = loom__calloc(nv, sizeof *out);
  loom__layout *layouts = loom__malloc(nv * sizeof *layouts);
  if (!free_base || !out || !layouts || loom__graph_layouts(b, layouts)) {
    loom__free(free_base);
    loom__free(out);
    loom__free(layouts);
    return INT64_MAX / 4; /* cannot know: cannot fit */
  }
  for (int32_t p = 0; p < b->n_params; p++) free_base[b->params[p]] = true;
  for (int32_t j = 0; j < op->n_outputs; j++) {
    if (loom__loop_result_in_place(g, op, j)) free_base[b->outputs[j]] = true;
    if (loom__loop_result_passed_out(g, op, j, through[j]))
      free_base[b->outputs[j]] = out[b->outputs[j]] = true;
  }
  loom_estimate e;
  int64_t total = estimate_free(b, NULL, free_base, out, &e) ? INT64_MAX / 4 : e.peak_bytes;
  loom_estimate_deinit(&e);
  /* After the body the piece's results are combined one pair at a time, beside what the body
   * returned. */
  int64_t merge = 0;
  for (int32_t j = 0; j + 1 < op->n_outputs; j++) {
    loom_combine c = l->combines[j].combine;
    if (c == LOOM_COMBINE_TOPK || c == LOOM_COMBINE_ARGMAX || c == LOOM_COMBINE_ARGMIN)
      merge = LOOM_MAX(merge, merge_bytes(g, op, j, layouts));
  }
  if (merge > 0) total = LOOM_MAX(total, held_at_end(b, layouts, free_base) + merge);
  loom__free(free_base);
  loom__free(out);
  loom__free(layouts);
  /* A streamed operand's slices are held through the loop's run: one piece's, and where there
   * is a next piece and the loop double buffers (slices=2), its slice too, brought in while the
   * piece runs (the executor's slice_slots). */
  int64_t slices = loom__loop_trips(l) > 1 ? l->slices : 1;
  for (int32_t i = 0; i < op->n_inputs; i++) {
    int64_t bytes = 0;
    const loom_loop_input *r = &l->rules[i];
    if (r->axis < 0) continue;
    if (loom__loop_slice_passed(g, op, i)) continue; /* its inner loops count their slices */
    bool streamed = loom__value_streamed(g, op->inputs[i]);
    /* A window that passes the operand's ends reads padding: that piece's parameter is a copy
     * (the padding, then the part in reach). A streamed operand's slices hold it; any other
     * needs one piece's copy of its own. */
    bool pads = !streamed && loom__loop_window_pads(l, i, g->values[op->inputs[i]].type.dims[r->axis]);
    if (streamed || pads) loom_type_bytes(&b->values[b->params[i]].type, &bytes);
    total = loom__sat_add_i64(total, loom__sat_add_i64(bytes, streamed && slices > 1 ? bytes : 0));
  }
  return total;
}

void loom_estimate_deinit(loom_estimate *e) {
  if (!e) return;
  loom__free(e->steps);
  memset(e, 0, sizeof *e);
}

loom_status loom_value_bytes(const loom_graph *g, loom_value v, int64_t *out_logical, int64_t *out_physical) {
  if (!g || !loom__value_ok(g, v))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_value_bytes: not a value of this graph");
  int64_t logical;
  loom_status s = loom_type_bytes(&g->values[v.id].type, &logical);
  if (s) return s;
  if (out_logical) *out_logical = logical;
  /* The physical bytes need every value's layout, a pass over the graph: not for a caller that
   * asks only the logical ones (the planner's pricing asks per op; per value it was quadratic). */
  if (!out_physical) return LOOM_OK;
  loom__layout *layouts = loom__malloc(sizeof *layouts * (size_t)g->n_values);
  if (!layouts) return loom__oom("value layouts");
  loom__graph_layouts(g, layouts);
  *out_physical = layouts[v.id].owns ? logical : 0;
  loom__free(layouts);
  return LOOM_OK;
}
