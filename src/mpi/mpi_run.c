/* loom_plan_run_mpi: a plan's loops shared between the ranks of an MPI communicator (loom/mpi.h).
 *
 * The plan's graph is cut again, inside the plan's own stages, before and after each top-level
 * loop (loom_plan_split), so that a loop stands in a stage of its own with the views and
 * sources its operands need (the splitter makes those in the stage that reads them). Every
 * rank walks the same stages in the same order, holding the values between stages as host
 * tensors (as cpu0 stages do in loom_plan_run):
 *
 *   - a loop-free stage runs on every rank, as a one-stage plan on its runner: the same values
 *     in, the same results out, no communication;
 *   - a loop stage's pieces are cut into one contiguous range per rank; each rank runs the
 *     stage with its loop cut to its range (loom__loop_range_graph), planned for the runner's
 *     device under the runner's limit lowered to the rank's own memory limit there; the root
 *     gathers the partial results, combines them (loom__combine_partials) and broadcasts them.
 *
 * Ranks agree on their status after every stage (loom__mpi_agree) and before every collective,
 * so a rank that fails never leaves the others waiting in a collective it will not enter.
 */
#include <string.h>

#include "mpi/mpi_comm.h"

/* The run's state on one rank. */
typedef struct mpi_run {
  loom_context *ctx;
  const loom_plan_run_options *opts;
  loom__mpi_comm c;
  loom_plan *cut; /* the caller's plan cut again around loops */
  const loom_graph *g;
  loom_tensor *vals;  /* per value of g: host tensors between stages */
  bool *owned;        /* per value: vals[v].data is ours (else the caller's input, or none) */
  int32_t *last_read; /* per value: the last stage reading it; INT32_MAX: the graph returns it */
  int32_t n_loop_stages;
  loom_mpi_rank me;
  loom_mpi_range *ranges; /* one per loop stage, this rank's */
} mpi_run;

/* ---- cutting the plan around loops ------------------------------------------------------ */

/* Where the caller's plan cuts (first op of each stage) and which runner each stage has. */
typedef struct cut_acc {
  const loom_plan *plan;
  int32_t *starts; /* per op of the plan's graph: 1 + the plan's stage that starts there, else 0 */
} cut_acc;

static bool is_loop(const loom_graph *g, int32_t o) {
  return o >= 0 && o < g->n_ops && g->ops[o].kind == LOOM_OP_LOOP;
}

static bool cut_before(const loom_graph *g, int32_t o, void *acc) {
  const cut_acc *a = acc;
  return a->starts[o] > 0 || is_loop(g, o) || is_loop(g, o - 1);
}

/* The runner of the caller's stage that holds op o (its stage started at or before o). */
static loom_runner runner_at(const loom_plan *plan, const int32_t *starts, int32_t o) {
  loom_stage_info st;
  loom_runner r = {{0}, 0};
  int32_t stage = 0;
  for (int32_t k = o; k >= 0 && !stage; k--) stage = starts[k];
  if (loom_plan_stage(plan, LOOM_MAX(stage - 1, 0), &st) == LOOM_OK) {
    snprintf(r.device, sizeof r.device, "%s", st.device ? st.device : "cpu0");
    r.limit = st.limit;
  }
  return r;
}

/* The plan cut as cut_before says, each new stage on the runner of the caller's stage its first
 * op came from: loom_plan_split gives stage i runners[i % n], so there is one runner per new
 * stage, found by walking the ops as it does. */
static loom_status cut_plan(const loom_plan *plan, loom_plan **out) {
  const loom_graph *g = loom_plan_graph(plan);
  int32_t n = g->n_ops;
  int32_t *starts = LOOM_LIB->calloc((size_t)n + 1, sizeof *starts);
  loom_runner *runners = LOOM_LIB->calloc((size_t)n + 1, sizeof *runners);
  loom_status s = starts && runners ? LOOM_OK : LOOM_LIB->oom("cutting the plan around its loops");
  for (int32_t i = 0; !s && i < loom_plan_stage_count(plan); i++) {
    loom_stage_info st;
    s = loom_plan_stage(plan, i, &st);
    int32_t first = n;
    for (int32_t k = 0; !s && k < st.n_ops; k++) first = LOOM_MIN(first, st.ops[k]);
    if (!s && first < n) starts[first] = i + 1;
  }
  cut_acc acc = {plan, starts};
  int32_t n_runners = 0, first = 0;
  bool limited = false;
  for (int32_t i = 0; !s && i <= n; i++) {
    if (i < n && (!cut_before(g, i, &acc) || i == first)) continue;
    if (i == first) break;
    runners[n_runners] = runner_at(plan, starts, first);
    limited |= runners[n_runners++].limit > 0;
    first = i;
  }
  /* A plan made without runners has no limits: so has the cut. */
  if (!s) s = loom_plan_split(g, cut_before, &acc, runners, limited ? n_runners : 0, out);
  LOOM_LIB->free(starts);
  LOOM_LIB->free(runners);
  return s;
}

/* The loop op of a stage graph; -1 for a loop-free stage. */
static int32_t stage_loop(const loom_graph *sg) {
  for (int32_t o = 0; sg && o < sg->n_ops; o++)
    if (sg->ops[o].kind == LOOM_OP_LOOP) return o;
  return -1;
}

static int64_t loop_trips(const loom_graph *sg, int32_t op) {
  const loom__loop *l = sg->ops[op].loop;
  return (l->n + l->piece - 1) / l->piece;
}

/* FNV-1a over what makes two ranks' cuts the same run: ops, stages, loops and runners. */
static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
  return h;
}

static uint64_t cut_hash(const loom_plan *cut) {
  const loom_graph *g = loom_plan_graph(cut);
  uint64_t h = 14695981039346656037ull;
  h = hash_bytes(h, &g->n_ops, sizeof g->n_ops);
  h = hash_bytes(h, &g->n_params, sizeof g->n_params);
  h = hash_bytes(h, &g->n_outputs, sizeof g->n_outputs);
  for (int32_t o = 0; o < g->n_ops; o++) {
    h = hash_bytes(h, &g->ops[o].kind, sizeof g->ops[o].kind);
    if (g->ops[o].loop) {
      h = hash_bytes(h, &g->ops[o].loop->n, sizeof(int64_t));
      h = hash_bytes(h, &g->ops[o].loop->piece, sizeof(int64_t));
    }
  }
  for (int32_t i = 0; i < loom_plan_stage_count(cut); i++) {
    loom_stage_info st;
    if (loom_plan_stage(cut, i, &st)) continue;
    h = hash_bytes(h, &st.n_ops, sizeof st.n_ops);
    h = hash_bytes(h, st.device, strlen(st.device));
    h = hash_bytes(h, &st.limit, sizeof st.limit);
  }
  return h;
}

/* Every rank must run the same cut: a rank with another plan would enter other collectives. */
static loom_status check_same_cut(mpi_run *r) {
  uint64_t mine = cut_hash(r->cut), lo = 0, hi = 0;
  double t0 = MPI_Wtime();
  int rc = MPI_Allreduce(&mine, &lo, 1, MPI_UINT64_T, MPI_MIN, r->c.comm);
  if (rc == MPI_SUCCESS) rc = MPI_Allreduce(&mine, &hi, 1, MPI_UINT64_T, MPI_MAX, r->c.comm);
  r->c.seconds += MPI_Wtime() - t0;
  if (rc != MPI_SUCCESS) return loom__mpi_error(rc, "MPI_Allreduce comparing the ranks' plans");
  if (lo != hi)
    return LOOM_LIB->error(
        LOOM_ERR_INVALID_ARGUMENT,
        "loom_plan_run_mpi: the ranks' plans differ (their ops, loops, stages or runners): every "
        "rank must pass the same plan, made from the same graph and runners");
  return LOOM_OK;
}

/* ---- the values between stages ---------------------------------------------------------- */

static loom_status values_init(mpi_run *r, const loom_tensor *inputs) {
  const loom_graph *g = r->g;
  size_t n = (size_t)LOOM_MAX(g->n_values, 1);
  r->vals = LOOM_LIB->calloc(n, sizeof *r->vals);
  r->owned = LOOM_LIB->calloc(n, sizeof *r->owned);
  r->last_read = LOOM_LIB->calloc(n, sizeof *r->last_read);
  if (!r->vals || !r->owned || !r->last_read) return LOOM_LIB->oom("the values between stages");
  for (int32_t v = 0; v < g->n_values; v++) r->last_read[v] = -1;
  for (int32_t p = 0; p < g->n_params; p++) r->vals[g->params[p]] = inputs[p];
  for (int32_t i = 0; i < loom_plan_stage_count(r->cut); i++) {
    loom_stage_info st;
    loom_plan_stage(r->cut, i, &st);
    for (int32_t k = 0; k < st.n_inputs; k++) r->last_read[st.inputs[k]] = i;
  }
  for (int32_t i = 0; i < g->n_outputs; i++) r->last_read[g->outputs[i]] = INT32_MAX;
  return LOOM_OK;
}

static void value_release(mpi_run *r, int32_t v) {
  if (r->owned[v]) loom_tensor_deinit(&r->vals[v]);
  memset(&r->vals[v], 0, sizeof r->vals[v]);
  r->owned[v] = false;
}

/* The stage's outputs join the values (taking outs[k]), and the inputs it read last go. */
static void values_after_stage(mpi_run *r, int32_t index, const loom_stage_info *st, loom_tensor *outs) {
  for (int32_t k = 0; k < st->n_outputs; k++) {
    value_release(r, st->outputs[k]);
    r->vals[st->outputs[k]] = outs[k];
    r->owned[st->outputs[k]] = true;
    memset(&outs[k], 0, sizeof outs[k]);
  }
  for (int32_t k = 0; k < st->n_inputs; k++)
    if (r->last_read[st->inputs[k]] == index) value_release(r, st->inputs[k]);
}

static void values_deinit(mpi_run *r) {
  for (int32_t v = 0; r->vals && r->owned && v < r->g->n_values; v++) value_release(r, v);
  LOOM_LIB->free(r->vals);
  LOOM_LIB->free(r->owned);
  LOOM_LIB->free(r->last_read);
}

/* ---- running a graph on this rank -------------------------------------------------------- */

static bool never_cut(const loom_graph *g, int32_t o, void *acc) {
  return false;
}

/* This rank's runner for a stage: the plan's, its limit lowered to this rank's own memory limit
 * on the device's node (LOOM_MEM_LIMIT, or set on the context's manager). */
static loom_runner own_runner(mpi_run *r, const loom_stage_info *st) {
  loom_runner run = {{0}, st->limit};
  snprintf(run.device, sizeof run.device, "%s", st->device);
  loom_mem_manager *m = NULL;
  int32_t node = -1;
  loom_mem_node_info info;
  if (st->limit > 0 && loom_context_memory(r->ctx, &m) == LOOM_OK &&
      loom_mem_node_find(m, st->device, &node) == LOOM_OK &&
      loom_mem_node_info_get(m, node, &info) == LOOM_OK && info.limit_bytes > 0 &&
      info.limit_bytes < run.limit)
    run.limit = info.limit_bytes;
  return run;
}

/* What one local run measured. */
typedef struct local_stats {
  int64_t estimated_peak, peak, limit;
  int32_t n_stages, recoveries;
  double seconds;
} local_stats;

/* Graph sg as a plan of its own on `runner`: by_memory, cut to fit the runner's limit; else one
 * stage. */
static loom_status make_plan(const loom_graph *sg, const loom_runner *runner, bool by_memory,
                             loom_plan **out) {
  int32_t n_runners = runner->limit > 0 ? 1 : 0;
  return by_memory && n_runners ? loom_plan_split_by_memory(sg, runner, 1, out)
                                : loom_plan_split(sg, never_cut, NULL, runner, n_runners, out);
}

/* Runs `plan` from `ins` (its graph's parameters) into `outs`, under `limit` (for the record). */
static loom_status run_local(mpi_run *r, const loom_plan *plan, int64_t limit, const loom_tensor *ins,
                             loom_tensor *outs, local_stats *ls) {
  double t0 = LOOM_LIB->now();
  const loom_graph *g = loom_plan_graph(plan);
  loom_plan_stats ps = {0};
  loom_status s =
      loom_plan_run_with_options(r->ctx, plan, r->opts, ins, g->n_params, outs, g->n_outputs, &ps);
  memset(ls, 0, sizeof *ls);
  ls->limit = limit;
  ls->peak = ps.peak_bytes;
  ls->n_stages = loom_plan_stage_count(plan);
  ls->recoveries = ps.n_recoveries;
  for (int32_t i = 0; i < ps.n_stages; i++)
    ls->estimated_peak = LOOM_MAX(ls->estimated_peak, ps.stages[i].estimated_peak_bytes);
  loom_plan_stats_deinit(&ps);
  ls->seconds = LOOM_LIB->now() - t0;
  r->me.seconds += ls->seconds;
  if (ls->peak >= r->me.peak_bytes) {
    r->me.peak_bytes = ls->peak;
    r->me.limit_bytes = ls->limit;
  }
  return s;
}

static loom_tensor *stage_inputs(mpi_run *r, const loom_stage_info *st) {
  loom_tensor *ins = LOOM_LIB->calloc((size_t)LOOM_MAX(st->n_inputs, 1), sizeof *ins);
  for (int32_t k = 0; ins && k < st->n_inputs; k++) ins[k] = r->vals[st->inputs[k]];
  return ins;
}

static void free_tensors(loom_tensor *ts, int32_t n) {
  for (int32_t k = 0; ts && k < n; k++) loom_tensor_deinit(&ts[k]);
  LOOM_LIB->free(ts);
}

/* A loop-free stage: the same on every rank. */
static loom_status run_plain_stage(mpi_run *r, int32_t index, const loom_stage_info *st) {
  loom_tensor *ins = stage_inputs(r, st);
  loom_tensor *outs = LOOM_LIB->calloc((size_t)LOOM_MAX(st->n_outputs, 1), sizeof *outs);
  loom_status s = ins && outs ? LOOM_OK : LOOM_LIB->oom("a stage's inputs and outputs");
  loom_runner runner = {{0}, st->limit};
  snprintf(runner.device, sizeof runner.device, "%s", st->device);
  local_stats ls;
  loom_plan *plan = NULL;
  if (!s) s = make_plan(st->graph, &runner, false, &plan);
  if (!s) s = run_local(r, plan, runner.limit, ins, outs, &ls);
  loom_plan_destroy(plan);
  if (s) LOOM_LIB->error_prefix("rank %d: stage %d (%s): ", r->c.rank, (int)index, st->device);
  s = loom__mpi_agree(&r->c, s, "agreeing on a stage's status");
  if (!s) values_after_stage(r, index, st, outs);
  LOOM_LIB->free(ins);
  free_tensors(outs, st->n_outputs);
  return s;
}

/* ---- a loop stage ------------------------------------------------------------------------ */

/* The loop result `value` of stage graph sg is (its index in the loop's results), or -1. */
static int32_t loop_result_of(const loom_graph *sg, int32_t op, int32_t value) {
  for (int32_t j = 0; j < sg->ops[op].n_outputs; j++)
    if (sg->ops[op].outputs[j] == value) return j;
  return -1;
}

/* Stage graph sg with its loop `op` cut to pieces [first, last): the ops around it copied, the
 * loop replaced by the range graph's, whose operands are sg's loop operands. Its results: every
 * result of the loop, over the range only, in the loop's order (the combine needs them all,
 * whichever the stage returns: a top-k's indices are merged by its values), then the stage's
 * other results (a view it remakes), in the stage's order. */
static loom_status range_stage_graph(const loom_graph *sg, int32_t op, int64_t first, int64_t last,
                                     loom_graph **out) {
  loom_graph *rg = NULL;
  loom__rebuild rb = {0}, rrb = {0};
  loom_status s = LOOM_LIB->loop_range_graph(sg, op, first, last, &rg);
  if (!s) s = LOOM_LIB->rebuild_init(&rb, sg);
  for (int32_t o = 0; !s && o < sg->n_ops; o++) {
    if (o != op) {
      s = LOOM_LIB->rebuild_copy(&rb, o);
      continue;
    }
    /* The range's loop, copied with its parameters mapped to the stage's loop operands. */
    s = LOOM_LIB->rebuild_init_empty(&rrb, rg, NULL);
    if (s) break;
    loom_graph_destroy(rrb.dst);
    rrb.dst = rb.dst;
    for (int32_t k = 0; k < rg->n_params; k++) rrb.map[rg->params[k]] = rb.map[sg->ops[op].inputs[k]];
    s = LOOM_LIB->rebuild_copy(&rrb, 0);
    for (int32_t k = 0; !s && k < sg->ops[op].n_outputs; k++)
      LOOM_LIB->rebuild_set(&rb, sg->ops[op].outputs[k], LOOM_LIB->rebuild_get(&rrb, rg->ops[0].outputs[k]));
    rrb.dst = NULL;
  }
  loom_value *ret = s ? NULL : LOOM_LIB->calloc((size_t)(sg->ops[op].n_outputs + sg->n_outputs), sizeof *ret);
  if (!s && !ret) s = LOOM_LIB->oom("a range's results");
  int32_t n = 0;
  for (int32_t j = 0; !s && j < sg->ops[op].n_outputs; j++)
    ret[n++] = LOOM_LIB->rebuild_get(&rb, sg->ops[op].outputs[j]);
  for (int32_t k = 0; !s && k < sg->n_outputs; k++)
    if (loop_result_of(sg, op, sg->outputs[k]) < 0) ret[n++] = LOOM_LIB->rebuild_get(&rb, sg->outputs[k]);
  if (!s) s = loom_graph_return(rb.dst, ret, n);
  if (!s) s = LOOM_LIB->graph_dce(rb.dst, out);
  LOOM_LIB->free(ret);
  LOOM_LIB->rebuild_deinit(&rrb);
  LOOM_LIB->rebuild_deinit(&rb);
  loom_graph_destroy(rg);
  return s;
}

/* Rank `rank`'s pieces of a loop of T pieces: [rank*T/P, (rank+1)*T/P). */
static void rank_range(int64_t trips, int rank, int size, int64_t *first, int64_t *last) {
  *first = trips * rank / size;
  *last = trips * (rank + 1) / size;
}

/* Packs this rank's partial loop results (parts[0..n_res), the loop's order) one after the
 * other, each at a 64-byte boundary; nothing for an empty range. */
static loom_status pack_partials(const loom_tensor *parts, int32_t n_res, char **out_buf,
                                 int64_t *out_bytes) {
  int64_t total = 0, b = 0;
  for (int32_t j = 0; j < n_res; j++)
    if (parts[j].data && loom_type_bytes(&parts[j].type, &b) == LOOM_OK) total += (b + 63) / 64 * 64;
  *out_bytes = total;
  *out_buf = total ? LOOM_LIB->aligned_alloc((size_t)total) : NULL;
  if (total && !*out_buf) return LOOM_LIB->oom("the partial results to send");
  int64_t at = 0;
  for (int32_t j = 0; j < n_res; j++) {
    if (!parts[j].data || loom_type_bytes(&parts[j].type, &b) != LOOM_OK) continue;
    memcpy(*out_buf + at, parts[j].data, (size_t)b);
    memset(*out_buf + at + b, 0, (size_t)((b + 63) / 64 * 64 - b));
    at += (b + 63) / 64 * 64;
  }
  return LOOM_OK;
}

/* Root: every rank's partials, read in place from the gathered bytes, combined into the loop's
 * results (combined[j], j over the loop's results). */
static loom_status combine_on_root(mpi_run *r, const loom_graph *sg, int32_t op, const char *recv,
                                   const int64_t *counts, const int64_t *displs, loom_tensor *combined) {
  int32_t n_res = sg->ops[op].n_outputs, size = r->c.size;
  loom__partial *parts = LOOM_LIB->calloc((size_t)size, sizeof *parts);
  loom_tensor *views = LOOM_LIB->calloc((size_t)size * (size_t)n_res, sizeof *views);
  loom_status s = parts && views ? LOOM_OK : LOOM_LIB->oom("the partial results");
  int32_t n_parts = 0;
  int64_t trips = loop_trips(sg, op);
  for (int rank = 0; !s && rank < size; rank++) {
    int64_t first, last, at = 0;
    rank_range(trips, rank, size, &first, &last);
    if (first == last) continue;
    loom_graph *rg = NULL;
    s = LOOM_LIB->loop_range_graph(sg, op, first, last, &rg);
    for (int32_t j = 0; !s && j < n_res; j++) {
      loom_tensor *t = &views[n_parts * n_res + j];
      int64_t b = 0;
      t->type = rg->values[rg->outputs[j]].type;
      loom_type_bytes(&t->type, &b);
      if (at + b > counts[rank])
        s = LOOM_LIB->error(
            LOOM_ERR_INTERNAL,
            "rank %d sent %lld bytes of partial results, fewer than its pieces [%lld, %lld) make", rank,
            (long long)counts[rank], (long long)first, (long long)last);
      t->data = (char *)recv + displs[rank] + at;
      at += (b + 63) / 64 * 64;
    }
    loom_graph_destroy(rg);
    parts[n_parts] = (loom__partial){first, last, &views[n_parts * n_res]};
    n_parts++;
  }
  for (int32_t j = 0; !s && j < n_res; j++)
    s = LOOM_LIB->tensor_init_unzeroed(&combined[j], &sg->values[sg->ops[op].outputs[j]].type);
  if (!s) s = LOOM_LIB->combine_partials(sg, op, parts, n_parts, combined);
  LOOM_LIB->free(parts);
  LOOM_LIB->free(views);
  return s;
}

/* Gathers the ranks' partial loop results (parts: this rank's, the loop's order) on the root,
 * combines them there and broadcasts them: combined[j] is then loop result j, whole, on every
 * rank (allocated here, the caller's to free). */
static loom_status share_results(mpi_run *r, const loom_graph *sg, int32_t op, const loom_tensor *parts,
                                 loom_tensor *combined) {
  int32_t n_res = sg->ops[op].n_outputs;
  char *send = NULL, *recv = NULL;
  int64_t bytes = 0, *counts = NULL, *displs = NULL;
  loom_status s = pack_partials(parts, n_res, &send, &bytes);
  s = loom__mpi_agree(&r->c, s, "packing the partial results");
  if (!s) s = loom__mpi_gather_bytes(&r->c, send, bytes, &recv, &counts, &displs);
  r->me.bytes_sent = r->c.bytes_sent;
  LOOM_LIB->aligned_free(send);
  if (!s && r->c.rank == 0) {
    double t0 = LOOM_LIB->now();
    s = combine_on_root(r, sg, op, recv, counts, displs, combined);
    r->me.seconds += LOOM_LIB->now() - t0;
  }
  for (int32_t j = 0; !s && r->c.rank != 0 && j < n_res; j++)
    s = LOOM_LIB->tensor_init_unzeroed(&combined[j], &sg->values[sg->ops[op].outputs[j]].type);
  s = loom__mpi_agree(&r->c, s, "combining the partial results");
  for (int32_t j = 0; !s && j < n_res; j++) s = loom__mpi_bcast_tensor(&r->c, &combined[j]);
  LOOM_LIB->aligned_free(recv);
  LOOM_LIB->free(counts); /* and displs */
  return s;
}

/* The stage's outputs (outs, the stage graph's order) from the combined loop results and the
 * range's other results (range_outs[n_res..]): each moved to its last place, copied to the
 * others. */
static loom_status stage_outputs(const loom_graph *sg, int32_t op, loom_tensor *combined,
                                 loom_tensor *range_outs, loom_tensor *outs) {
  int32_t n_res = sg->ops[op].n_outputs, other = n_res;
  loom_status s = LOOM_OK;
  for (int32_t k = 0; !s && k < sg->n_outputs; k++) {
    int32_t j = loop_result_of(sg, op, sg->outputs[k]);
    loom_tensor *from = j >= 0 ? &combined[j] : &range_outs[other++];
    bool later = false;
    for (int32_t m = k + 1; m < sg->n_outputs; m++) later |= sg->outputs[m] == sg->outputs[k];
    if (!later) {
      outs[k] = *from;
      memset(from, 0, sizeof *from);
      continue;
    }
    int64_t b = 0;
    s = LOOM_LIB->tensor_init_unzeroed(&outs[k], &from->type);
    if (!s) s = loom_type_bytes(&from->type, &b);
    if (!s && b) memcpy(outs[k].data, from->data, (size_t)b);
  }
  return s;
}

static void range_error(mpi_run *r, int32_t index, const loom_mpi_range *rec) {
  char lim[32];
  LOOM_LIB->error_prefix(
      "rank %d: stage %d (loop pieces [%lld, %lld) of %lld on %s, limit %s): ", r->c.rank, (int)index,
      (long long)rec->first, (long long)rec->last, (long long)rec->pieces, rec->device,
      rec->limit_bytes > 0 ? loom_bytes_format(rec->limit_bytes, lim, sizeof lim) : "none");
}

/* This rank's range of a loop stage, planned for its own runner into *out (NULL for an empty
 * range: more ranks than pieces). Planned before anything runs, so that a rank whose limit is
 * too small for a piece is known to every rank before any computes. */
static loom_status plan_range(mpi_run *r, int32_t index, const loom_stage_info *st, int32_t op,
                              loom_mpi_range *rec, loom_plan **out) {
  *out = NULL;
  loom_runner runner = own_runner(r, st);
  rec->stage = index;
  rec->rank = r->c.rank;
  rec->pieces = loop_trips(st->graph, op);
  rank_range(rec->pieces, r->c.rank, r->c.size, &rec->first, &rec->last);
  snprintf(rec->device, sizeof rec->device, "%s", runner.device);
  rec->limit_bytes = runner.limit;
  if (rec->first == rec->last) return LOOM_OK;
  double t0 = LOOM_LIB->now();
  loom_graph *rsg = NULL;
  loom_status s = range_stage_graph(st->graph, op, rec->first, rec->last, &rsg);
  /* A rank whose own limit is below the plan's runs its range in smaller pieces, where that
   * fits (as loom_plan_run's recovery does); what still does not fit is for the split below. */
  if (!s && runner.limit < st->limit) {
    loom_graph *fitted = NULL;
    s = LOOM_LIB->loops_fit(rsg, runner.limit, &fitted, NULL);
    if (!s) {
      loom_graph_destroy(rsg);
      rsg = fitted;
    }
  }
  if (!s) s = make_plan(rsg, &runner, true, out);
  if (s) range_error(r, index, rec);
  loom_graph_destroy(rsg);
  rec->seconds = LOOM_LIB->now() - t0;
  r->me.seconds += rec->seconds;
  return s;
}

/* Runs the range's plan into outs (the stage's outputs, partial for the loop's results). */
static loom_status run_range(mpi_run *r, int32_t index, const loom_stage_info *st, loom_mpi_range *rec,
                             const loom_plan *plan, loom_tensor *outs) {
  if (!plan) return LOOM_OK;
  loom_tensor *ins = stage_inputs(r, st);
  loom_status s = ins ? LOOM_OK : LOOM_LIB->oom("a stage's inputs");
  local_stats ls = {0};
  if (!s) s = run_local(r, plan, rec->limit_bytes, ins, outs, &ls);
  rec->estimated_peak_bytes = ls.estimated_peak;
  rec->peak_bytes = ls.peak;
  rec->n_stages = ls.n_stages;
  rec->recoveries = ls.recoveries;
  rec->seconds += ls.seconds; /* with its planning */
  r->me.pieces += rec->last - rec->first;
  if (s) range_error(r, index, rec);
  LOOM_LIB->free(ins);
  return s;
}

static loom_status run_loop_stage(mpi_run *r, int32_t index, const loom_stage_info *st, int32_t op,
                                  loom_mpi_range *rec) {
  /* A stage may also return a value it remakes besides the loop (a view a later stage reads);
   * each rank takes it from its own range's run, so a rank without pieces would have none.
   * Every rank sees this alike: no agreement needed. */
  const loom_graph *sg = st->graph;
  int64_t trips = loop_trips(sg, op);
  for (int32_t k = 0; trips < r->c.size && k < st->n_outputs; k++)
    if (loop_result_of(sg, op, sg->outputs[k]) < 0)
      return LOOM_LIB->error(
          LOOM_ERR_UNSUPPORTED,
          "stage %d returns a value besides its loop's results, and its loop has %lld pieces for "
          "%d ranks: run with at most %lld ranks",
          (int)index, (long long)trips, r->c.size, (long long)trips);
  /* The range's results (loop results, then the stage's others), the combined loop results and
   * the stage's outputs, in one allocation. */
  int32_t n_res = sg->ops[op].n_outputs, n_range = n_res + st->n_outputs;
  loom_tensor *range_outs =
      LOOM_LIB->calloc((size_t)(n_range + n_res + st->n_outputs + 1), sizeof *range_outs);
  loom_tensor *combined = range_outs ? range_outs + n_range : NULL;
  loom_tensor *outs = range_outs ? combined + n_res : NULL;
  loom_status s = range_outs ? LOOM_OK : LOOM_LIB->oom("a stage's outputs");
  loom_plan *plan = NULL;
  if (!s) s = plan_range(r, index, st, op, rec, &plan);
  s = loom__mpi_agree(&r->c, s, "agreeing on the ranges' plans");
  if (!s) s = run_range(r, index, st, rec, plan, range_outs);
  loom_plan_destroy(plan);
  s = loom__mpi_agree(&r->c, s, "agreeing on a loop stage's status");
  if (!s) s = share_results(r, sg, op, range_outs, combined);
  if (!s) s = stage_outputs(sg, op, combined, range_outs, outs);
  if (!s) values_after_stage(r, index, st, outs);
  for (int32_t k = 0; range_outs && k < n_range + n_res + st->n_outputs; k++)
    loom_tensor_deinit(&range_outs[k]);
  LOOM_LIB->free(range_outs);
  return s;
}

/* ---- the run ------------------------------------------------------------------------------ */

static loom_status run_stages(mpi_run *r) {
  loom_status s = LOOM_OK;
  int32_t loop_index = 0;
  for (int32_t i = 0; !s && i < loom_plan_stage_count(r->cut); i++) {
    loom_stage_info st;
    s = loom_plan_stage(r->cut, i, &st);
    if (s || !st.graph) continue;
    int32_t op = stage_loop(st.graph);
    s = op < 0 ? run_plain_stage(r, i, &st) : run_loop_stage(r, i, &st, op, &r->ranges[loop_index++]);
  }
  return s;
}

/* The graph's results into outputs: a value the run made is moved to its last place in the
 * return and copied to the others; an input returned as it is, copied. */
static loom_status deliver(mpi_run *r, loom_tensor *outputs, int32_t n_outputs) {
  loom_status s = LOOM_OK;
  for (int32_t i = 0; !s && i < n_outputs; i++) {
    int32_t v = r->g->outputs[i];
    bool later = false;
    for (int32_t k = i + 1; k < n_outputs; k++) later |= r->g->outputs[k] == v;
    if (r->owned[v] && !later) {
      outputs[i] = r->vals[v];
      memset(&r->vals[v], 0, sizeof r->vals[v]);
      r->owned[v] = false;
      continue;
    }
    int64_t b = 0;
    s = LOOM_LIB->tensor_init_unzeroed(&outputs[i], &r->g->values[v].type);
    if (!s) s = loom_type_bytes(&outputs[i].type, &b);
    if (!s && b) memcpy(outputs[i].data, r->vals[v].data, (size_t)b);
  }
  for (int32_t i = 0; s && i < n_outputs; i++) loom_tensor_deinit(&outputs[i]);
  return s;
}

/* The ranks' records, gathered on the root into stats. */
static loom_status gather_stats(mpi_run *r, loom_mpi_stats *stats) {
  int size = r->c.size, root = r->c.rank == 0;
  int32_t nl = r->n_loop_stages;
  stats->n_ranks_stats = root ? size : 1;
  stats->n_ranges = root ? size * nl : nl;
  stats->ranks = LOOM_LIB->calloc((size_t)stats->n_ranks_stats, sizeof *stats->ranks);
  stats->ranges = LOOM_LIB->calloc((size_t)LOOM_MAX(stats->n_ranges, 1), sizeof *stats->ranges);
  loom_status s = stats->ranks && stats->ranges ? LOOM_OK : LOOM_LIB->oom("the MPI run's statistics");
  s = loom__mpi_agree(&r->c, s, "gathering the statistics");
  if (s) return s;
  loom_mpi_range *by_rank = root ? LOOM_LIB->calloc((size_t)LOOM_MAX(size * nl, 1), sizeof *by_rank) : NULL;
  double t0 = MPI_Wtime();
  r->me.comm_seconds = r->c.seconds;
  int rc = MPI_Gather(&r->me, (int)sizeof r->me, MPI_BYTE, stats->ranks, (int)sizeof r->me, MPI_BYTE, 0,
                      r->c.comm);
  if (rc == MPI_SUCCESS && nl > 0)
    rc = MPI_Gather(r->ranges, (int)(sizeof *r->ranges * (size_t)nl), MPI_BYTE, by_rank,
                    (int)(sizeof *r->ranges * (size_t)nl), MPI_BYTE, 0, r->c.comm);
  r->c.seconds += MPI_Wtime() - t0;
  if (rc != MPI_SUCCESS) s = loom__mpi_error(rc, "MPI_Gather of the statistics");
  if (!root) {
    stats->ranks[0] = r->me;
    memcpy(stats->ranges, r->ranges, sizeof *r->ranges * (size_t)nl);
  }
  /* by stage, then rank */
  for (int32_t l = 0; root && by_rank && l < nl; l++)
    for (int rank = 0; rank < size; rank++) stats->ranges[l * size + rank] = by_rank[rank * nl + l];
  LOOM_LIB->free(by_rank);
  return s;
}

static loom_status check_args(loom_context *ctx, const loom_plan *plan, const loom_tensor *inputs,
                              int32_t n_inputs, loom_tensor *outputs, int32_t n_outputs) {
  if (!ctx || !plan || (n_inputs > 0 && !inputs) || (n_outputs > 0 && !outputs))
    return LOOM_LIB->error(LOOM_ERR_INVALID_ARGUMENT,
                           "loom_plan_run_mpi: NULL context, plan, inputs or outputs");
  const loom_graph *g = loom_plan_graph(plan);
  if (n_inputs != g->n_params || n_outputs != g->n_outputs)
    return LOOM_LIB->error(
        LOOM_ERR_INVALID_ARGUMENT,
        "loom_plan_run_mpi: graph '%s' takes %d inputs and gives %d outputs; %d and %d given", g->name,
        (int)g->n_params, (int)g->n_outputs, (int)n_inputs, (int)n_outputs);
  for (int32_t p = 0; p < n_inputs; p++) {
    if (!loom_type_equal(&inputs[p].type, &g->values[g->params[p]].type)) {
      char want[LOOM_TYPE_STRING_MAX], have[LOOM_TYPE_STRING_MAX], buf[32];
      return LOOM_LIB->error(LOOM_ERR_INVALID_ARGUMENT,
                             "loom_plan_run_mpi: input %d ('%s') is %s, the parameter %s", (int)p,
                             LOOM_LIB->value_label(g, g->params[p], buf, sizeof buf),
                             loom_type_format(&inputs[p].type, have, sizeof have),
                             loom_type_format(&g->values[g->params[p]].type, want, sizeof want));
    }
  }
  return LOOM_OK;
}

/* Makes the cut and the run's state; the status is agreed. */
static loom_status run_init(mpi_run *r, const loom_plan *plan, const loom_tensor *inputs) {
  loom_status s = cut_plan(plan, &r->cut);
  if (!s) {
    r->g = loom_plan_graph(r->cut);
    s = values_init(r, inputs);
  }
  for (int32_t i = 0; !s && i < loom_plan_stage_count(r->cut); i++) {
    loom_stage_info st;
    loom_plan_stage(r->cut, i, &st);
    r->n_loop_stages += stage_loop(st.graph) >= 0;
  }
  if (!s && !(r->ranges = LOOM_LIB->calloc((size_t)LOOM_MAX(r->n_loop_stages, 1), sizeof *r->ranges)))
    s = LOOM_LIB->oom("the ranges of the loops");
  s = loom__mpi_agree(&r->c, s, "preparing the MPI run");
  if (!s) s = check_same_cut(r);
  return s;
}

loom_status loom_plan_run_mpi(loom_context *ctx, const loom_plan *plan, MPI_Comm comm,
                              const loom_plan_run_options *opts, const loom_tensor *inputs, int32_t n_inputs,
                              loom_tensor *outputs, int32_t n_outputs, loom_mpi_stats *stats) {
  for (int32_t i = 0; outputs && i < n_outputs; i++) memset(&outputs[i], 0, sizeof outputs[i]);
  /* The statistics are gathered whether the caller wants them or not: a collective every rank
   * enters, whatever each passes. */
  loom_mpi_stats own = {0};
  if (!stats) stats = &own;
  loom_status lib = loom__mpi_lib_check();
  if (lib) return lib;
  double t0 = LOOM_LIB->now();
  mpi_run r = {.ctx = ctx, .opts = opts};
  /* Without a communicator there is nothing to agree on: MPI not initialised, or
   * MPI_COMM_NULL, is returned at once. Every other error is agreed, the arguments' too, so a
   * rank passing wrong ones alone does not leave the others waiting. */
  loom_status s = loom__mpi_comm_init(&r.c, comm);
  if (s) return s;
  r.me.rank = r.c.rank;
  s = check_args(ctx, plan, inputs, n_inputs, outputs, n_outputs);
  s = loom__mpi_agree(&r.c, s, "checking the arguments");
  if (!s) s = run_init(&r, plan, inputs);
  if (!s) s = run_stages(&r);
  if (!s) s = deliver(&r, outputs, n_outputs);
  s = loom__mpi_agree(&r.c, s, "delivering the outputs");
  loom_mpi_stats_deinit(stats);
  stats->rank = r.c.rank;
  stats->n_ranks = r.c.size;
  stats->n_stages = r.cut ? loom_plan_stage_count(r.cut) : 0;
  stats->n_loop_stages = r.n_loop_stages;
  if (!s) s = gather_stats(&r, stats);
  stats->seconds = LOOM_LIB->now() - t0;
  loom_mpi_stats_deinit(&own);
  if (s)
    for (int32_t i = 0; i < n_outputs; i++) loom_tensor_deinit(&outputs[i]);
  values_deinit(&r);
  LOOM_LIB->free(r.ranges);
  loom_plan_destroy(r.cut);
  loom__mpi_comm_deinit(&r.c);
  return s;
}

void loom_mpi_stats_deinit(loom_mpi_stats *stats) {
  if (!stats) return;
  LOOM_LIB->free(stats->ranks);
  LOOM_LIB->free(stats->ranges);
  memset(stats, 0, sizeof *stats);
}
