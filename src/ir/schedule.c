/* The "schedule" rewrite (IR.md "Rewrites"): the order of independent ops chosen to lower the
 * estimated peak. The graph's op order is its schedule, so the pass re-emits the ops in a new
 * topological order.
 *
 * Candidates: a greedy list schedule that runs, among the ready ops, the one whose net
 * allocation (its physical results minus the storage it frees as the last reader) is smallest,
 * and a depth-first post-order from the graph's outputs, which finishes one branch before it
 * starts the next. Each is evaluated by the estimator (loom_graph_estimate with the order as
 * its schedule), and the best is kept only when its peak is below the original order's.
 * The greedy keeps the ready ops in a priority queue whose keys change only when an op
 * becomes the last reader of some storage: O((ops + edges) log ops) for usual graphs.
 */
#include <stdio.h>
#include <string.h>

#include "ir/pattern.h"
#include "ir/view.h"

/* The memory model of the graph, independent of the order. */
typedef struct sched_model {
  const loom_graph *g;
  int32_t n_ops, n_values;
  loom__layout *layouts;
  int64_t *phys;    /* per value: bytes of its storage when it is a base that owns storage */
  int64_t *op_out;  /* per op: physical bytes of its results */
  int64_t *op_temp; /* per op: temporaries */
  bool *keep;       /* per value: a base that lives to the end (holds a returned value) */
  int32_t *reads;   /* per base: operand reads of values that live in it, over all ops */
  /* consumers of each op, one entry per operand edge: cons[cons_start[o] .. cons_start[o+1]) */
  int32_t *cons_start, *cons;
  int32_t *cursor; /* scratch: per op */
} sched_model;

static void model_deinit(sched_model *sm) {
  loom__free(sm->layouts);
  loom__free(sm->phys);
  loom__free(sm->op_out);
  loom__free(sm->op_temp);
  loom__free(sm->keep);
  loom__free(sm->reads);
  loom__free(sm->cons_start);
  loom__free(sm->cons);
  loom__free(sm->cursor);
  memset(sm, 0, sizeof *sm);
}

static void model_edges(sched_model *sm) {
  const loom_graph *g = sm->g;
  for (int32_t o = 0; o < g->n_ops; o++)
    for (int32_t i = 0; i < g->ops[o].n_inputs; i++) {
      int32_t p = g->values[g->ops[o].inputs[i]].op;
      if (p >= 0) sm->cons_start[p + 1]++;
      sm->reads[sm->layouts[g->ops[o].inputs[i]].base]++;
    }
  for (int32_t o = 0; o < g->n_ops; o++) sm->cons_start[o + 1] += sm->cons_start[o];
  int32_t *fill = sm->cursor;
  for (int32_t o = 0; o < g->n_ops; o++) fill[o] = sm->cons_start[o];
  for (int32_t o = 0; o < g->n_ops; o++)
    for (int32_t i = 0; i < g->ops[o].n_inputs; i++) {
      int32_t p = g->values[g->ops[o].inputs[i]].op;
      if (p >= 0) sm->cons[fill[p]++] = o;
    }
}

static loom_status model_init(sched_model *sm, const loom_graph *g) {
  memset(sm, 0, sizeof *sm);
  sm->g = g;
  sm->n_ops = g->n_ops;
  sm->n_values = g->n_values;
  size_t nv = (size_t)LOOM_MAX(g->n_values, 1), no = (size_t)LOOM_MAX(g->n_ops, 1);
  int64_t edges = 0;
  for (int32_t o = 0; o < g->n_ops; o++) edges += g->ops[o].n_inputs;
  sm->layouts = loom__malloc(nv * sizeof *sm->layouts);
  sm->phys = loom__calloc(nv, sizeof *sm->phys);
  sm->op_out = loom__calloc(no, sizeof *sm->op_out);
  sm->op_temp = loom__calloc(no, sizeof *sm->op_temp);
  sm->keep = loom__calloc(nv, sizeof *sm->keep);
  sm->reads = loom__calloc(nv, sizeof *sm->reads);
  sm->cons_start = loom__calloc(no + 1, sizeof *sm->cons_start);
  sm->cons = loom__malloc((size_t)LOOM_MAX(edges, 1) * sizeof *sm->cons);
  sm->cursor = loom__malloc(no * sizeof *sm->cursor);
  if (!sm->layouts || !sm->phys || !sm->op_out || !sm->op_temp || !sm->keep || !sm->reads ||
      !sm->cons_start || !sm->cons || !sm->cursor) {
    model_deinit(sm);
    return loom__oom("a schedule model");
  }
  loom_status s = loom__graph_layouts(g, sm->layouts);
  if (s) {
    model_deinit(sm);
    return s;
  }
  for (int32_t v = 0; v < g->n_values; v++)
    if (sm->layouts[v].owns) loom_type_bytes(&g->values[v].type, &sm->phys[v]);
  for (int32_t o = 0; o < g->n_ops; o++) {
    const loom__op *op = &g->ops[o];
    for (int32_t r = 0; r < op->n_outputs; r++)
      if (sm->layouts[op->outputs[r]].base == op->outputs[r]) sm->op_out[o] += sm->phys[op->outputs[r]];
    sm->op_temp[o] = loom__op_scratch_bytes(g, op);
  }
  for (int32_t i = 0; i < g->n_outputs; i++) sm->keep[sm->layouts[g->outputs[i]].base] = true;
  model_edges(sm);
  return LOOM_OK;
}

/* The estimated peak of g run in `order`: the estimator itself, so what is compared is
 * exactly what is reported. */
static loom_status peak_in_order(const loom_graph *g, const int32_t *order, int64_t *out_peak) {
  loom_estimate e;
  loom_status s = loom_graph_estimate(g, order, &e);
  if (s) return s;
  *out_peak = e.peak_bytes;
  loom_estimate_deinit(&e);
  return LOOM_OK;
}

/* ---- candidate orders -------------------------------------------------------------------- */

/* A ready op in the greedy's priority queue: least net allocation first, then least step
 * footprint, then first in the original order. Entries are not removed when an op's net
 * changes: a new one is pushed and the stale one skipped when it comes up. */
typedef struct heap_entry {
  int64_t net, step;
  int32_t op;
} heap_entry;

/* The state of the greedy list schedule. Each ready op's net allocation is cached and
 * recomputed only when it can change: when the remaining reads of one of its operands' bases
 * fall to what this op itself reads (it becomes the last reader). */
typedef struct greedy {
  const sched_model *sm;
  int32_t *pending; /* per op: operands whose producer has not run */
  heap_entry *heap;
  int32_t n_heap, cap_heap;
  bool *is_ready;
  int64_t *net;           /* per ready op: results' bytes minus the storage it would free */
  int32_t *remaining;     /* per base: reads still to run */
  int32_t *max_reads;     /* per base: the most reads of it by one op */
  int32_t *rd_start, *rd; /* per base: the ops reading it (once each) */
} greedy;

/* How many of op o's operands live in base b. */
static int32_t reads_of(const sched_model *sm, const loom__op *op, int32_t b) {
  int32_t n = 0;
  for (int32_t j = 0; j < op->n_inputs; j++) n += sm->layouts[op->inputs[j]].base == b;
  return n;
}

/* True when operand i is the first of op's operands living in its base. */
static bool first_in_base(const sched_model *sm, const loom__op *op, int32_t i) {
  int32_t b = sm->layouts[op->inputs[i]].base;
  for (int32_t j = 0; j < i; j++)
    if (sm->layouts[op->inputs[j]].base == b) return false;
  return true;
}

static int64_t net_of(const greedy *gr, int32_t o) {
  const sched_model *sm = gr->sm;
  const loom__op *op = &sm->g->ops[o];
  int64_t freed = 0;
  for (int32_t i = 0; i < op->n_inputs; i++) {
    int32_t b = sm->layouts[op->inputs[i]].base;
    if (first_in_base(sm, op, i) && !sm->keep[b] && gr->remaining[b] == reads_of(sm, op, b))
      freed += sm->phys[b];
  }
  return sm->op_out[o] - freed;
}

/* Readers of each base, each op once, and the most reads of a base by one op. */
static void greedy_readers(greedy *gr) {
  const sched_model *sm = gr->sm;
  const loom_graph *g = sm->g;
  for (int32_t o = 0; o < g->n_ops; o++)
    for (int32_t i = 0; i < g->ops[o].n_inputs; i++)
      if (first_in_base(sm, &g->ops[o], i)) {
        int32_t b = sm->layouts[g->ops[o].inputs[i]].base, r = reads_of(sm, &g->ops[o], b);
        gr->rd_start[b + 1]++;
        if (r > gr->max_reads[b]) gr->max_reads[b] = r;
      }
  for (int32_t v = 0; v < g->n_values; v++) gr->rd_start[v + 1] += gr->rd_start[v];
  int32_t *cursor = gr->pending; /* borrowed before its real use */
  for (int32_t v = 0; v < g->n_values; v++) cursor[v] = gr->rd_start[v];
  for (int32_t o = 0; o < g->n_ops; o++)
    for (int32_t i = 0; i < g->ops[o].n_inputs; i++)
      if (first_in_base(sm, &g->ops[o], i)) gr->rd[cursor[sm->layouts[g->ops[o].inputs[i]].base]++] = o;
}

static void greedy_deinit(greedy *gr) {
  loom__free(gr->pending);
  loom__free(gr->heap);
  loom__free(gr->is_ready);
  loom__free(gr->net);
  loom__free(gr->remaining);
  loom__free(gr->max_reads);
  loom__free(gr->rd_start);
  loom__free(gr->rd);
}

static loom_status greedy_init(greedy *gr, const sched_model *sm) {
  const loom_graph *g = sm->g;
  size_t no = (size_t)LOOM_MAX(g->n_ops, 1), nv = (size_t)LOOM_MAX(g->n_values, 1);
  size_t edges = (size_t)LOOM_MAX(sm->cons_start[g->n_ops], 1);
  for (int32_t o = 0; o < g->n_ops; o++) edges += (size_t)g->ops[o].n_inputs; /* reads of parameters too */
  memset(gr, 0, sizeof *gr);
  gr->sm = sm;
  gr->pending = loom__calloc(LOOM_MAX(no, nv), sizeof *gr->pending);
  gr->is_ready = loom__calloc(no, sizeof *gr->is_ready);
  gr->net = loom__calloc(no, sizeof *gr->net);
  gr->remaining = loom__malloc(nv * sizeof *gr->remaining);
  gr->max_reads = loom__calloc(nv, sizeof *gr->max_reads);
  gr->rd_start = loom__calloc(nv + 1, sizeof *gr->rd_start);
  gr->rd = loom__malloc(edges * sizeof *gr->rd);
  if (!gr->pending || !gr->is_ready || !gr->net || !gr->remaining || !gr->max_reads || !gr->rd_start ||
      !gr->rd) {
    greedy_deinit(gr);
    return loom__oom("a greedy schedule");
  }
  memcpy(gr->remaining, sm->reads, nv * sizeof *gr->remaining);
  greedy_readers(gr);
  memset(gr->pending, 0, LOOM_MAX(no, nv) * sizeof *gr->pending);
  return LOOM_OK;
}

static bool heap_less(const heap_entry *a, const heap_entry *b) {
  return a->net < b->net ||
         (a->net == b->net && (a->step < b->step || (a->step == b->step && a->op < b->op)));
}

static loom_status heap_push(greedy *gr, int32_t o) {
  if (loom__grow((void **)&gr->heap, &gr->cap_heap, gr->n_heap + 1, sizeof *gr->heap))
    return LOOM_ERR_OUT_OF_MEMORY;
  const sched_model *sm = gr->sm;
  heap_entry e = {gr->net[o], sm->op_out[o] + sm->op_temp[o], o};
  int32_t i = gr->n_heap++;
  while (i > 0 && heap_less(&e, &gr->heap[(i - 1) / 2])) {
    gr->heap[i] = gr->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  gr->heap[i] = e;
  return LOOM_OK;
}

static heap_entry heap_pop(greedy *gr) {
  heap_entry top = gr->heap[0], last = gr->heap[--gr->n_heap];
  int32_t i = 0;
  for (;;) {
    int32_t c = 2 * i + 1;
    if (c >= gr->n_heap) break;
    if (c + 1 < gr->n_heap && heap_less(&gr->heap[c + 1], &gr->heap[c])) c++;
    if (!heap_less(&gr->heap[c], &last)) break;
    gr->heap[i] = gr->heap[c];
    i = c;
  }
  if (gr->n_heap > 0) gr->heap[i] = last;
  return top;
}

static loom_status make_ready(greedy *gr, int32_t o) {
  gr->is_ready[o] = true;
  gr->net[o] = net_of(gr, o);
  return heap_push(gr, o);
}

/* The next op to run: the best entry that is still ready and current. */
static int32_t pick(greedy *gr) {
  while (gr->n_heap > 0) {
    heap_entry e = heap_pop(gr);
    if (gr->is_ready[e.op] && e.net == gr->net[e.op]) return e.op;
  }
  return -1; /* cannot happen: a topological order always has a ready op */
}

/* Runs op o: its operands' bases lose reads, and ready ops that became last readers are
 * re-keyed; consumers whose operands are all made become ready. */
static loom_status greedy_run(greedy *gr, int32_t o) {
  const sched_model *sm = gr->sm;
  const loom__op *op = &sm->g->ops[o];
  loom_status s = LOOM_OK;
  gr->is_ready[o] = false;
  for (int32_t i = 0; i < op->n_inputs; i++) gr->remaining[sm->layouts[op->inputs[i]].base]--;
  for (int32_t i = 0; !s && i < op->n_inputs; i++) {
    int32_t b = sm->layouts[op->inputs[i]].base;
    if (gr->remaining[b] > gr->max_reads[b] || !first_in_base(sm, op, i)) continue;
    for (int32_t e = gr->rd_start[b]; !s && e < gr->rd_start[b + 1]; e++) {
      int32_t r = gr->rd[e];
      if (!gr->is_ready[r]) continue;
      int64_t net = net_of(gr, r);
      if (net == gr->net[r]) continue;
      gr->net[r] = net;
      s = heap_push(gr, r);
    }
  }
  for (int32_t e = sm->cons_start[o]; !s && e < sm->cons_start[o + 1]; e++)
    if (--gr->pending[sm->cons[e]] == 0) s = make_ready(gr, sm->cons[e]);
  return s;
}

static loom_status greedy_order(const sched_model *sm, int32_t *order) {
  const loom_graph *g = sm->g;
  greedy gr;
  loom_status s = greedy_init(&gr, sm);
  if (s) return s;
  for (int32_t o = 0; !s && o < g->n_ops; o++) {
    for (int32_t i = 0; i < g->ops[o].n_inputs; i++) gr.pending[o] += g->values[g->ops[o].inputs[i]].op >= 0;
    if (!gr.pending[o]) s = make_ready(&gr, o);
  }
  for (int32_t p = 0; !s && p < g->n_ops; p++) {
    int32_t o = pick(&gr);
    if (o < 0)
      s = loom__error(LOOM_ERR_INTERNAL, "schedule: no ready op at step %d", (int)p);
    else
      order[p] = o;
    if (!s) s = greedy_run(&gr, o);
  }
  greedy_deinit(&gr);
  return s;
}

/* The state of a depth-first walk: an explicit stack, as chains may be tens of thousands of
 * ops deep. */
typedef struct dfs {
  const loom_graph *g;
  bool *done;
  int32_t *stack, *next; /* next: the operand of each op to visit next */
  int32_t *order, n;
} dfs;

/* Appends root and everything it needs that is not placed yet, operands first, in order. */
static void dfs_visit(dfs *d, int32_t root) {
  if (d->done[root]) return;
  int32_t top = 0;
  d->stack[top++] = root;
  d->done[root] = true;
  while (top > 0) {
    int32_t o = d->stack[top - 1];
    const loom__op *op = &d->g->ops[o];
    if (d->next[o] < op->n_inputs) {
      int32_t p = d->g->values[op->inputs[d->next[o]++]].op;
      if (p >= 0 && !d->done[p]) {
        d->done[p] = true;
        d->stack[top++] = p;
      }
      continue;
    }
    d->order[d->n++] = o;
    top--;
  }
}

/* Depth-first post-order from the returned values; ops no output needs go last. */
static loom_status depth_first_order(const sched_model *sm, int32_t *order) {
  const loom_graph *g = sm->g;
  size_t no = (size_t)LOOM_MAX(g->n_ops, 1);
  dfs d = {.g = g, .order = order};
  d.done = loom__calloc(no, sizeof *d.done);
  d.stack = loom__malloc(no * sizeof *d.stack);
  d.next = loom__calloc(no, sizeof *d.next);
  loom_status s = (!d.done || !d.stack || !d.next) ? loom__oom("a depth-first schedule") : LOOM_OK;
  for (int32_t k = 0; !s && k < g->n_outputs; k++)
    if (g->values[g->outputs[k]].op >= 0) dfs_visit(&d, g->values[g->outputs[k]].op);
  for (int32_t o = 0; !s && o < g->n_ops; o++) dfs_visit(&d, o);
  loom__free(d.done);
  loom__free(d.stack);
  loom__free(d.next);
  return s;
}

/* ---- the pass ---------------------------------------------------------------------------- */

static loom_status rebuild_in_order(const loom_graph *g, const int32_t *order, loom_graph **out) {
  loom__rebuild rb;
  loom_status s = loom__rebuild_init(&rb, g);
  for (int32_t p = 0; !s && p < g->n_ops; p++) s = loom__rebuild_copy(&rb, order[p]);
  if (!s) s = loom__rebuild_finish(&rb, out);
  loom__rebuild_deinit(&rb);
  return s;
}

/* Finds the best order; *out_best NULL when the original order is best. */
static loom_status best_order(const loom_graph *g, int32_t **out_best, const char **out_how) {
  *out_best = NULL;
  sched_model sm;
  loom_status s = model_init(&sm, g);
  if (s) return s;
  size_t no = (size_t)LOOM_MAX(g->n_ops, 1);
  int32_t *cand = loom__malloc(no * sizeof *cand), *best = loom__malloc(no * sizeof *best);
  if (!cand || !best) s = loom__oom("schedules");
  int64_t best_peak = 0;
  if (!s) s = peak_in_order(g, NULL, &best_peak);
  bool found = false;
  static const char *names[] = {"greedy least-net-allocation list schedule", "depth-first post-order"};
  for (int32_t c = 0; !s && c < 2; c++) {
    int64_t peak = 0;
    s = c == 0 ? greedy_order(&sm, cand) : depth_first_order(&sm, cand);
    if (!s) s = peak_in_order(g, cand, &peak);
    if (!s && peak < best_peak) {
      memcpy(best, cand, no * sizeof *best);
      best_peak = peak;
      *out_how = names[c];
      found = true;
    }
  }
  loom__free(cand);
  model_deinit(&sm);
  if (!s && found)
    *out_best = best;
  else
    loom__free(best);
  return s;
}

loom_status loom__rewrite_schedule(const loom_graph *g, const loom_optimize_options *opts, loom_graph **out,
                                   loom_rewrite_report *report) {
  *out = NULL;
  if (!loom__rewrite_enabled(opts, "schedule") || g->n_ops < 2) return loom_graph_clone(g, out);
  int32_t *order = NULL;
  const char *how = "";
  loom_status s = best_order(g, &order, &how);
  if (s || !order) return s ? s : loom_graph_clone(g, out);
  loom_graph *next = NULL;
  int64_t before = 0, after = 0;
  s = rebuild_in_order(g, order, &next);
  loom__free(order);
  if (!s) s = loom__peak_of(g, &before);
  if (!s) s = loom__peak_of(next, &after);
  if (!s && after < before)
    s = loom__report_add(report, "schedule", before - after,
                         "%d ops re-ordered (%s): estimated peak %lld -> %lld bytes", (int)next->n_ops, how,
                         (long long)before, (long long)after);
  if (!s && after >= before) { /* cannot happen: the rebuild keeps the order estimated */
    loom_graph_destroy(next);
    return loom_graph_clone(g, out);
  }
  if (s) {
    loom_graph_destroy(next);
    return s;
  }
  *out = next;
  return LOOM_OK;
}
