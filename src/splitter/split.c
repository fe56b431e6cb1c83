/* Cutting a graph into stages: by memory (loom_plan_split_by_memory) and by a caller's
 * predicate (loom_plan_split). See splitter.h for what a stage holds.
 *
 * split_by_memory walks the ops in order and keeps a running estimate of the open stage's
 * peak as if the stage ended after the op just added. The running estimate follows the
 * estimator's model on the stage graph the builder would make (parameters held from the
 * start until their last reader in the stage, values freed after their last reader, results
 * that later stages need held to the end, temporaries for the duration of their op), so
 * adding an op costs O(its operands x log n) instead of re-estimating the whole stage: a
 * graph of thousands of ops is cut in milliseconds. When a stage closes, the real estimator
 * checks its stage graph; where the two could differ the running estimate is the larger
 * (a reshape that must copy in the whole graph but is a view of a dense parameter in the
 * stage), and if the check ever fails the stage gives back ops until it fits.
 */
#include <string.h>

#include "ir/passes.h"
#include "splitter/constants.h"
#include "splitter/splitter.h"

/* ---- a max segment tree with range add, over op positions ---------------------------- */

typedef struct segtree {
  int32_t n;
  int64_t *max, *add;
} segtree;

static loom_status seg_init(segtree *t, int32_t n) {
  t->n = LOOM_MAX(n, 1);
  t->max = loom__calloc((size_t)t->n * 4, sizeof *t->max);
  t->add = loom__calloc((size_t)t->n * 4, sizeof *t->add);
  return (t->max && t->add) ? LOOM_OK : loom__oom("split_by_memory's running estimate");
}

static void seg_deinit(segtree *t) {
  loom__free(t->max);
  loom__free(t->add);
}

static void seg_push(segtree *t, int32_t node) {
  int64_t a = t->add[node];
  if (!a) return;
  for (int32_t c = 2 * node; c <= 2 * node + 1; c++) {
    t->max[c] = loom__sat_add_i64(t->max[c], a);
    t->add[c] = loom__sat_add_i64(t->add[c], a);
  }
  t->add[node] = 0;
}

static void seg_range_add(segtree *t, int32_t node, int32_t lo, int32_t hi, int32_t l, int32_t r, int64_t v) {
  if (r < lo || hi < l) return;
  if (l <= lo && hi <= r) {
    t->max[node] = loom__sat_add_i64(t->max[node], v);
    t->add[node] = loom__sat_add_i64(t->add[node], v);
    return;
  }
  seg_push(t, node);
  int32_t mid = lo + (hi - lo) / 2;
  seg_range_add(t, 2 * node, lo, mid, l, r, v);
  seg_range_add(t, 2 * node + 1, mid + 1, hi, l, r, v);
  t->max[node] = LOOM_MAX(t->max[2 * node], t->max[2 * node + 1]);
}

/* Sets one position, overriding whatever an earlier stage left there. */
static void seg_set(segtree *t, int32_t node, int32_t lo, int32_t hi, int32_t pos, int64_t v) {
  if (lo == hi) {
    t->max[node] = v;
    t->add[node] = 0;
    return;
  }
  seg_push(t, node);
  int32_t mid = lo + (hi - lo) / 2;
  if (pos <= mid)
    seg_set(t, 2 * node, lo, mid, pos, v);
  else
    seg_set(t, 2 * node + 1, mid + 1, hi, pos, v);
  t->max[node] = LOOM_MAX(t->max[2 * node], t->max[2 * node + 1]);
}

static int64_t seg_max(segtree *t, int32_t node, int32_t lo, int32_t hi, int32_t l, int32_t r) {
  if (r < lo || hi < l) return INT64_MIN;
  if (l <= lo && hi <= r) return t->max[node];
  seg_push(t, node);
  int32_t mid = lo + (hi - lo) / 2;
  /* Not LOOM_MAX(seg_max(..), seg_max(..)): the macro would evaluate the larger call twice. */
  int64_t left = seg_max(t, 2 * node, lo, mid, l, r), right = seg_max(t, 2 * node + 1, mid + 1, hi, l, r);
  return LOOM_MAX(left, right);
}

/* ---- the running estimate of the open stage ----------------------------------------------
 * Each position's step peak lives in the tree. What is held across steps is live_sum:
 *   run values    owning results of the stage's ops, from their step to si->hold (the
 *                 estimator's base lifetime, which is also "to the end" when a later stage
 *                 needs them), so they are added once and expire on schedule;
 *   entities      parameters (held from the stage's first step) and recomputed sources
 *                 (from their first reader), each until its last reader in the stage, or to
 *                 the end when a returned view keeps it. A reader after an entity expired
 *                 brings it back and adds its bytes over the gap.
 * Expiries are kept in per-position lists; an entry is stale when its generation is not the
 * stage's or an entity's end moved on. */

enum { ENT_NONE = 0, ENT_PARAM = 1, ENT_COPY = 2 };

typedef struct expiry {
  int32_t value, next, gen;
  bool entity;
} expiry;

typedef struct model {
  loom__split_info *si;
  segtree tree;
  int32_t n; /* positions: the graph's ops */
  int32_t first, gen;
  int64_t live_sum, peak;
  int32_t *ent_gen, *ent_want, *ent_cover; /* per value */
  bool *ent_active;
  int32_t *head, *head_gen; /* per position: expiry list */
  expiry *pool;
  int32_t n_pool, cap_pool;
} model;

static loom_status model_init(model *m, loom__split_info *si) {
  memset(m, 0, sizeof *m);
  m->si = si;
  m->n = si->g->n_ops;
  size_t nv = (size_t)LOOM_MAX(si->g->n_values, 1), no = (size_t)LOOM_MAX(m->n, 1);
  m->ent_gen = loom__calloc(nv, sizeof *m->ent_gen);
  m->ent_want = loom__calloc(nv, sizeof *m->ent_want);
  m->ent_cover = loom__calloc(nv, sizeof *m->ent_cover);
  m->ent_active = loom__calloc(nv, sizeof *m->ent_active);
  m->head = loom__calloc(no, sizeof *m->head);
  m->head_gen = loom__calloc(no, sizeof *m->head_gen);
  if (!m->ent_gen || !m->ent_want || !m->ent_cover || !m->ent_active || !m->head || !m->head_gen)
    return loom__oom("split_by_memory's running estimate");
  return seg_init(&m->tree, m->n);
}

static void model_deinit(model *m) {
  seg_deinit(&m->tree);
  loom__free(m->ent_gen);
  loom__free(m->ent_want);
  loom__free(m->ent_cover);
  loom__free(m->ent_active);
  loom__free(m->head);
  loom__free(m->head_gen);
  loom__free(m->pool);
}

static void model_start(model *m, int32_t first) {
  m->first = first;
  m->gen++;
  m->live_sum = 0;
  m->peak = 0;
  m->n_pool = 0;
}

static loom_status expire_at(model *m, int32_t pos, int32_t value, bool entity) {
  if (pos < 0 || pos >= m->n) return LOOM_OK; /* never within the graph: held to the end */
  if (loom__grow((void **)&m->pool, &m->cap_pool, m->n_pool + 1, sizeof *m->pool))
    return loom__oom("split_by_memory's running estimate");
  if (m->head_gen[pos] != m->gen) {
    m->head_gen[pos] = m->gen;
    m->head[pos] = -1;
  }
  m->pool[m->n_pool] = (expiry){value, m->head[pos], m->gen, entity};
  m->head[pos] = m->n_pool++;
  return LOOM_OK;
}

static void run_expiries(model *m, int32_t pos) {
  if (m->head_gen[pos] != m->gen) return;
  for (int32_t k = m->head[pos]; k >= 0; k = m->pool[k].next) {
    int32_t v = m->pool[k].value;
    if (!m->pool[k].entity) {
      m->live_sum = loom__sat_add_i64(m->live_sum, -(m->si->physical[v]));
    } else if (m->ent_gen[v] == m->gen && m->ent_active[v] && m->ent_want[v] == pos) {
      m->ent_active[v] = false;
      m->ent_cover[v] = pos;
      m->live_sum = loom__sat_add_i64(m->live_sum, -(m->si->bytes[v]));
    }
  }
  m->head_gen[pos] = 0;
}

static void add_range(model *m, int32_t l, int32_t r, int64_t bytes) {
  if (l > r || bytes == 0) return;
  seg_range_add(&m->tree, 1, 0, m->tree.n - 1, l, r, bytes);
}

/* What a read of value v at the open stage's current op touches: an entity (*kind, *id), or
 * nothing the running estimate tracks (a value of the run: its lifetime is si->hold). */
static void resolve(const model *m, int32_t v, int *kind, int32_t *id) {
  const loom__split_info *si = m->si;
  const loom_graph *g = si->g;
  *kind = ENT_NONE;
  for (;;) {
    int32_t p = g->values[v].op;
    if (p >= m->first) { /* made in this stage */
      if (g->ops[p].n_inputs == 0) {
        if (!si->is_output[v] && si->physical[v] > 0) *kind = ENT_COPY;
        break;
      }
      if (!loom__split_is_view(si, v)) break;
      v = g->ops[p].inputs[0];
      continue;
    }
    if (p < 0 || !si->remat[v]) {
      *kind = ENT_PARAM;
      break;
    }
    if (g->ops[p].n_inputs == 0) {
      if (si->physical[v] > 0) *kind = ENT_COPY;
      break;
    }
    v = g->ops[p].inputs[0];
  }
  *id = v;
}

/* The entity is live across position pos and, where want says, beyond. */
static loom_status touch(model *m, int kind, int32_t v, int32_t pos, int32_t want) {
  int64_t bytes = m->si->bytes[v];
  if (m->ent_gen[v] != m->gen) {
    m->ent_gen[v] = m->gen;
    m->ent_want[v] = -1;
    if (kind == ENT_PARAM) add_range(m, m->first, pos - 1, bytes); /* held from the start */
    m->ent_active[v] = true;
    m->live_sum = loom__sat_add_i64(m->live_sum, bytes);
  } else if (!m->ent_active[v]) {
    add_range(m, m->ent_cover[v] + 1, pos - 1, bytes);
    m->ent_active[v] = true;
    m->live_sum = loom__sat_add_i64(m->live_sum, bytes);
  }
  want = LOOM_MAX(want, pos);
  if (want <= m->ent_want[v]) return LOOM_OK;
  m->ent_want[v] = want;
  return expire_at(m, want, v, true);
}

/* Reads of a computing op: each operand's entity is live across pos. */
static loom_status read_operands(model *m, const loom__op *op, int32_t pos) {
  for (int32_t i = 0; i < op->n_inputs; i++) {
    int kind;
    int32_t id;
    resolve(m, op->inputs[i], &kind, &id);
    if (kind == ENT_NONE) continue;
    loom_status s = touch(m, kind, id, pos, pos);
    if (s) return s;
  }
  return LOOM_OK;
}

/* A view of the run: free itself; when the stage keeps it as itself (returns it, or a later
 * op reads it as such) the storage it reads stays live until then. Made on demand otherwise,
 * where its readers resolve through it. */
static loom_status view_step(model *m, int32_t pos, int32_t w) {
  if (m->si->out_need[w] <= pos) return LOOM_OK;
  int kind;
  int32_t id;
  resolve(m, w, &kind, &id);
  return kind == ENT_NONE ? LOOM_OK : touch(m, kind, id, pos, m->si->out_need[w]);
}

/* Results of a computing op that outlive its step, held until si->hold. */
static loom_status hold_results(model *m, const loom__op *op, int32_t pos) {
  for (int32_t r = 0; r < op->n_outputs; r++) {
    int32_t v = op->outputs[r];
    if (m->si->physical[v] == 0 || m->si->hold[v] <= pos) continue;
    m->live_sum = loom__sat_add_i64(m->live_sum, m->si->physical[v]);
    loom_status s = expire_at(m, m->si->hold[v], v, false);
    if (s) return s;
  }
  return LOOM_OK;
}

/* Adds op pos to the open stage: its step peak, then what it leaves held. Dead ops and
 * sources made on demand are no step of the stage graph: they only carry the live bytes. */
static loom_status model_step(model *m, int32_t pos) {
  const loom__split_info *si = m->si;
  const loom__op *op = &si->g->ops[pos];
  bool skipped = !si->live_op[pos] || (op->n_inputs == 0 && !si->is_output[op->outputs[0]]);
  bool view = !skipped && op->n_outputs == 1 && loom__split_is_view(si, op->outputs[0]);
  bool computes = !skipped && !view;
  loom_status s = LOOM_OK;
  int64_t step_extra = 0;
  if (view) s = view_step(m, pos, op->outputs[0]);
  if (computes) {
    s = read_operands(m, op, pos);
    step_extra = si->scratch[pos];
    for (int32_t r = 0; r < op->n_outputs; r++)
      step_extra = loom__sat_add_i64(step_extra, si->physical[op->outputs[r]]);
  }
  if (s) return s;
  seg_set(&m->tree, 1, 0, m->tree.n - 1, pos, loom__sat_add_i64(m->live_sum, step_extra));
  if (computes && (s = hold_results(m, op, pos))) return s;
  run_expiries(m, pos);
  m->peak = seg_max(&m->tree, 1, 0, m->tree.n - 1, m->first, pos);
  return LOOM_OK;
}

loom_status loom__split_model_peak(loom__split_info *si, int32_t first, int32_t end, int64_t *out_peak) {
  model m;
  loom_status s = model_init(&m, si);
  if (!s) {
    model_start(&m, first);
    for (int32_t i = first; !s && i < end; i++) s = model_step(&m, i);
  }
  *out_peak = s ? 0 : m.peak;
  model_deinit(&m);
  return s;
}

/* ---- split_by_memory ---------------------------------------------------------------- */

typedef struct splitter {
  loom_plan *plan;
  loom__split_info si;
  model m;
  int64_t largest;
  bool weights; /* several runners: each holds its stage's constants (constants.h) */
} splitter;

static loom_status check_runners(const char *fn, const loom_runner *runners, int32_t n, bool need_limit) {
  for (int32_t i = 0; i < n; i++) {
    if (strnlen(runners[i].device, sizeof runners[i].device) == 0 ||
        strnlen(runners[i].device, sizeof runners[i].device) == sizeof runners[i].device)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: runner %d has no device id", fn, (int)i + 1);
    if (runners[i].limit < 0 || (need_limit && runners[i].limit == 0))
      return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                         "%s: runner %d (%s) has limit %lld; a limit must be more than 0 bytes", fn,
                         (int)i + 1, runners[i].device, (long long)runners[i].limit);
  }
  return LOOM_OK;
}

/* An input that no runner can hold whole. */
static loom_status check_inputs(const loom__split_info *si, int64_t largest) {
  const loom_graph *g = si->g;
  for (int32_t p = 0; p < g->n_params; p++) {
    int32_t v = g->params[p];
    if (si->hold[v] < 0 || si->bytes[v] <= largest) continue;
    char name[32], need[32], lim[32], type[LOOM_TYPE_STRING_MAX];
    return loom__error(
        LOOM_ERR_OUT_OF_MEMORY,
        "split_by_memory: input '%s' (%s) needs %s, the largest limit is %s (an input is held whole)",
        loom__value_label(g, v, name, sizeof name), loom_type_format(&g->values[v].type, type, sizeof type),
        loom__format_bytes_vs(si->bytes[v], largest, need, sizeof need),
        loom__format_bytes_vs(largest, si->bytes[v], lim, sizeof lim));
  }
  return LOOM_OK;
}

/* Runs the model over [first, ..) until an op takes it over limit; returns that op (or n).
 * With `weights`, the stage's constants count too (constants.h). */
static loom_status fill_stage(model *m, bool weights, int32_t first, int64_t limit, int32_t *out_stop,
                              int64_t *out_need) {
  model_start(m, first);
  int32_t i = first, gen = weights ? ++m->si->stamp_gen : 0;
  int64_t held = 0;
  for (; i < m->n; i++) {
    loom_status s = model_step(m, i);
    if (s) return s;
    if (weights) held = loom__sat_add_i64(held, loom__split_constants_read(m->si, i, gen));
    if (loom__sat_add_i64(m->peak, held) > limit) break;
  }
  *out_stop = i;
  *out_need = loom__sat_add_i64(m->peak, held);
  return LOOM_OK;
}

/* Builds the stage [first, end) and gives ops back while the estimator says it passes the
 * limit. *out_end is where it ends; the stage has no graph when nothing of it is needed. */
static loom_status close_stage(splitter *sp, int32_t first, int32_t end, int32_t runner, int64_t limit,
                               loom__stage *st, int32_t *out_end) {
  *out_end = first;
  memset(st, 0, sizeof *st);
  for (int32_t e = end; e > first; e--) {
    loom_status s = loom__stage_build(&sp->si, first, e, runner, st);
    if (s) return s;
    int64_t held = sp->weights ? loom__split_constant_bytes(&sp->si, first, e) : 0;
    if (!st->graph || loom__sat_add_i64(st->estimated_peak, held) <= limit) {
      *out_end = e;
      return LOOM_OK;
    }
    loom__stage_deinit(st);
  }
  return LOOM_OK;
}

static loom_status too_big(splitter *sp, int32_t first, int32_t op_index, int64_t model_need,
                           const char *why) {
  const loom_graph *g = sp->si.g;
  int64_t need = model_need;
  loom__stage st;
  if (loom__stage_build(&sp->si, first, op_index + 1, 0, &st) == LOOM_OK && st.graph)
    need = st.estimated_peak;
  loom__stage_deinit(&st);
  const loom__op *op = &g->ops[op_index];
  char name[32], n[32], lim[32];
  return loom__error(LOOM_ERR_OUT_OF_MEMORY,
                     "split_by_memory: %s '%s' needs %s, the largest limit is %s%s%s%s",
                     loom_op_name(op->kind), loom__value_label(g, op->outputs[0], name, sizeof name),
                     loom__format_bytes_vs(need, sp->largest, n, sizeof n),
                     loom__format_bytes_vs(sp->largest, need, lim, sizeof lim), why ? " (" : "",
                     why ? why : "", why ? ")" : "");
}

/* The ops after the last stage that have nothing to return join that stage's op list (its
 * graph is unchanged: nothing of them is needed). */
static loom_status finish_tail(loom_plan *plan, int32_t first, int32_t end, int32_t runner,
                               loom__split_info *si) {
  if (first >= end) return LOOM_OK;
  if (plan->n_stages == 0) {
    loom__stage st;
    loom_status s = loom__stage_build(si, first, end, runner, &st);
    return s ? s : loom__plan_push(plan, &st);
  }
  loom__stage *last = &plan->stages[plan->n_stages - 1];
  int32_t *ops = loom__realloc(last->ops, sizeof *ops * (size_t)(last->n_ops + end - first));
  if (!ops) return loom__oom("a stage's op list");
  for (int32_t o = first; o < end; o++) ops[last->n_ops++] = o;
  last->ops = ops;
  return LOOM_OK;
}

/* Outcome of one pass: OK (the plan is filled), or *out_stuck >= 0: that op alone passes
 * every limit (first: where its stage began, need: its running estimate). */
static loom_status split_pass(splitter *sp, int32_t *out_stuck, int32_t *out_first, int64_t *out_need) {
  loom_plan *plan = sp->plan;
  int32_t n = sp->si.g->n_ops, runner = 0, failures = 0, first = 0;
  int64_t failed_limit = -1; /* the largest limit tried since the last stage closed */
  *out_stuck = -1;
  while (first < n) {
    int64_t limit = plan->runners[runner].limit, need;
    int32_t stop, end;
    loom_status s = fill_stage(&sp->m, sp->weights, first, limit, &stop, &need);
    loom__stage st;
    if (!s) s = close_stage(sp, first, stop, runner, limit, &st, &end);
    if (s) return s;
    if (st.graph) {
      if ((s = loom__plan_push(plan, &st))) return s;
      failures = 0;
      *out_stuck = -1;
      first = end;
    } else {
      loom__stage_deinit(&st);
      if (stop == n) {
        *out_stuck = -1;
        return finish_tail(plan, first, n, runner, &sp->si);
      }
      if (failures == 0 || limit > failed_limit) { /* report the op the largest limit stops at */
        failed_limit = limit;
        *out_stuck = stop;
        *out_first = first;
        *out_need = need;
      }
      if (++failures >= plan->n_runners) return LOOM_OK;
    }
    runner = (runner + 1) % plan->n_runners;
  }
  return LOOM_OK;
}

static loom_status splitter_load(splitter *sp) {
  loom__split_info_deinit(&sp->si);
  model_deinit(&sp->m);
  memset(&sp->m, 0, sizeof sp->m);
  loom_status s = loom__split_info_init(&sp->si, sp->plan->graph);
  if (!s) s = model_init(&sp->m, &sp->si);
  return s;
}

/* Chunks the plan's graph to the largest limit. On failure *why holds the reason. */
static loom_status chunk_graph(splitter *sp, char *why, size_t why_size) {
  loom_optimize_options opts;
  loom_optimize_options_init(&opts);
  opts.limit = sp->largest;
  loom_graph *chunked = NULL;
  loom_status s = loom__rewrite_chunk(sp->plan->graph, &opts, &chunked, NULL);
  if (s) {
    snprintf(why, why_size, "chunking: %s", loom_last_error());
    return s;
  }
  loom__plan_clear(sp->plan);
  loom__plan_set_graph(sp->plan, chunked);
  return splitter_load(sp);
}

static loom_status split_by_memory(splitter *sp) {
  loom_status s = splitter_load(sp);
  /* An input larger than every limit may still be streamed once its readers are chunked into
   * loops: chunk first, and refuse only an input that stays held whole. */
  if (!s && check_inputs(&sp->si, sp->largest)) {
    char why[512] = "";
    (void)chunk_graph(sp, why, sizeof why);
    s = check_inputs(&sp->si, sp->largest);
    /* why no cut streams it (a stencil's halo cut that fits no piece, say) */
    char held[512];
    snprintf(held, sizeof held, "%s", loom_last_error());
    if (s && why[0]) loom__error(s, "%s: %s", held, why);
  }
  for (int round = 0; !s; round++) {
    int32_t stuck, first;
    int64_t need;
    if ((s = split_pass(sp, &stuck, &first, &need)) || stuck < 0) break;
    char why[512] = "";
    if (round > 0) return too_big(sp, first, stuck, need, "even after chunking");
    s = chunk_graph(sp, why, sizeof why);
    if (s && why[0]) return too_big(sp, first, stuck, need, why);
  }
  return s;
}

loom_status loom_plan_split_by_memory(const loom_graph *graph, const loom_runner *runners, int32_t n_runners,
                                      loom_plan **out_plan) {
  if (!out_plan) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_plan_split_by_memory: out_plan is NULL");
  *out_plan = NULL;
  if (!graph || !runners || n_runners < 1)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "loom_plan_split_by_memory: needs a graph and at least one runner");
  loom_status s = check_runners("split_by_memory", runners, n_runners, true);
  if (!s) s = loom_graph_verify(graph);
  loom_graph *copy = NULL;
  if (!s) s = loom_graph_clone(graph, &copy);
  splitter sp;
  memset(&sp, 0, sizeof sp);
  if (!s) s = loom__plan_create(copy, runners, n_runners, &sp.plan);
  for (int32_t i = 0; !s && i < n_runners; i++) sp.largest = LOOM_MAX(sp.largest, runners[i].limit);
  sp.weights = n_runners > 1;
  if (!s) s = split_by_memory(&sp);
  loom__split_info_deinit(&sp.si);
  model_deinit(&sp.m);
  if (s) {
    loom_plan_destroy(sp.plan);
    return s;
  }
  *out_plan = sp.plan;
  return LOOM_OK;
}

/* ---- split by a predicate --------------------------------------------------------------- */

static loom_status split_by_fn(loom_plan *plan, loom_split_fn fn, void *acc) {
  loom__split_info si;
  loom_status s = loom__split_info_init(&si, plan->graph);
  int32_t n = plan->graph->n_ops, first = 0;
  for (int32_t i = 0; !s && i <= n; i++) {
    bool cut = i == n || fn(plan->graph, i, acc);
    if (!cut || i == first) continue;
    loom__stage st;
    s = loom__stage_build(&si, first, i, plan->n_stages % plan->n_runners, &st);
    if (!s) s = loom__plan_push(plan, &st);
    first = i;
  }
  loom__split_info_deinit(&si);
  return s;
}

loom_status loom_plan_split(const loom_graph *graph, loom_split_fn fn, void *acc, const loom_runner *runners,
                            int32_t n_runners, loom_plan **out_plan) {
  if (!out_plan) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_plan_split: out_plan is NULL");
  *out_plan = NULL;
  if (!graph || !fn || n_runners < 0 || (n_runners > 0 && !runners))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "loom_plan_split: needs a graph, a function and a runner list");
  /* No runners: every stage on cpu0 with no limit. */
  static const loom_runner default_runner = {"cpu0", 0};
  if (n_runners == 0) {
    runners = &default_runner;
    n_runners = 1;
  }
  loom_status s = check_runners("split", runners, n_runners, false);
  if (!s) s = loom_graph_verify(graph);
  loom_graph *copy = NULL;
  loom_plan *plan = NULL;
  if (!s) s = loom_graph_clone(graph, &copy);
  if (!s) s = loom__plan_create(copy, runners, n_runners, &plan);
  if (!s) s = split_by_fn(plan, fn, acc);
  if (s) {
    loom_plan_destroy(plan);
    return s;
  }
  *out_plan = plan;
  return LOOM_OK;
}
