/* The shared runner's loops (loom/share.h, share_run.h): a top-level loop whose pieces the devices
 * take in ranges, as the policy says, each range a graph of its own run under the device's limit,
 * the ranges' results combined on the host. */
#include "runtime/share_run.h"

/* ---- a shared loop ------------------------------------------------------------------------------ */

/* The pieces w's next range would take: a range, or a single piece where dmda does not know
 * w's speed yet (that piece is how it learns it, without a whole range on a device that may
 * prove slow, or slow to start: a first run builds its programs). */
static int64_t range_pieces(const share_run *r, const shared_loop *L, const lane *ln) {
  int64_t n = r->opts->policy == LOOM_SCHED_DMDA && ln->rate <= 0 ? 1 : L->chunk;
  return LOOM_MIN(n, L->trips - L->next);
}

/* dmda: whether w, free now, should take the loop's next range: whether the loop ends sooner
 * with w running it than with the other devices running every piece left. The others are
 * taken as one pool that works at the sum of their speeds from when each is free (busy with a
 * range or a stage); a device of unknown speed counts for nothing there, and takes a range
 * itself (a single piece: that is how its speed becomes known). So every device helps while
 * there is work enough, however slow, and at the end a slow device leaves the last ranges to
 * a faster one rather than be waited for. */
static bool dmda_takes(const share_run *r, const shared_loop *L, const worker *w, double now) {
  const lane *mine = &L->lanes[w->index];
  if (mine->rate <= 0) return true;
  double pieces = (double)range_pieces(r, L, mine), left = (double)(L->trips - L->next);
  double speed = 0, start = 0; /* pieces per second of the others; sum of free time x speed */
  double single = INFINITY;    /* the soonest one of them would end this range */
  for (int32_t i = 0; i < r->n_workers; i++) {
    const worker *e = &r->workers[i];
    const lane *ln = &L->lanes[i];
    if (e == w || !ln->eligible || ln->rate <= 0) continue;
    double at = loom__share_free_at(e, now);
    speed += 1 / ln->rate;
    start += at / ln->rate;
    single = fmin(single, at + ln->rate * pieces);
  }
  if (speed == 0) return true;
  /* Ranges do not divide: the others cannot end this one sooner than the best of them alone
   * would. Without that bound, three equal devices each left the last piece to the other two
   * (who would share it, by the pool's sum of speeds) and all waited. With it, the device that
   * would end the range soonest always takes it. */
  double without = fmax((left + start) / speed, single);
  double with = fmax(now + mine->rate * pieces, (left - pieces + start) / speed);
  return with <= without;
}

/* Under r->mu: the next range of L for w (its index), or -1 (no piece left, w not eligible,
 * or dmda leaves it to others). A worker that waited while no other device ran anything takes
 * it: nothing would change by waiting longer (dmda_takes lets the soonest device take; this
 * only guards that). */
int32_t loom__share_claim_range(share_run *r, shared_loop *L, worker *w, bool waited, double now) {
  lane *ln = &L->lanes[w->index];
  if (!ln->eligible || L->next >= L->trips) return -1;
  if (r->opts->policy == LOOM_SCHED_DMDA && !dmda_takes(r, L, w, now) &&
      !(waited && !loom__share_others_busy(r, w)))
    return -1;
  int32_t c = L->n_ranges++;
  int64_t pieces = range_pieces(r, L, ln);
  L->parts[c].first = L->next;
  L->parts[c].last = L->next + pieces;
  L->parts[c].results = &L->results[(size_t)c * (size_t)L->n_out];
  L->next += pieces;
  L->running++;
  w->busy_until = now + ln->rate * (double)pieces;
  return c;
}

/* Runs range c on w's device into its slot of L->results. */
loom_status loom__share_run_range(shared_loop *L, worker *w, int32_t c, int64_t *peak) {
  loom_graph *rg = NULL;
  loom_status s = loom__loop_range_graph(L->sg, L->op, L->parts[c].first, L->parts[c].last, &rg);
  if (s) return s;
  loom__meter meter = {0};
  meter.limit = w->runner.limit;
  loom__exec_options o = {0};
  o.device = w->dev;
  double t0 = loom__now();
  /* Admitted on the device as a plan's stage is, beside other runs' (run_admit.h). */
  loom__admit_spec admit = {.limit = w->runner.limit};
  s = loom__execute_admitted(rg, &o, L->operands, &L->results[(size_t)c * (size_t)L->n_out], &meter, &admit);
  loom__hmm_trace_event(w->dev->memory, "range", w->dev->node, t0);
  *peak = meter.peak;
  loom_graph_destroy(rg);
  return s;
}

/* Seconds per piece of the loop on each device from the models (loom-bench calibrate), where
 * every device has one; else they stay unknown. */
static void model_rates(const share_run *r, shared_loop *L) {
  loom_sched_task work = {0};
  if (!r->models || loom_sched_op_work(L->sg, L->op, work.size, work.kernels) != LOOM_OK) return;
  for (int32_t i = 0; i < r->n_workers; i++) {
    const loom_sched_device *sd = loom_sched_platform_device(
        r->models, loom_sched_platform_find(r->models, r->workers[i].runner.device));
    double t = sd ? loom__sched_task_time(&work, &sd->model) : 0;
    if (isfinite(t) && t > 0) L->lanes[i].rate = t / (double)L->trips;
  }
}

/* Which devices a range fits: its estimate within the device's limit (under dmda, beside
 * cpu0, not the devices on the host's cores). Errors: OUT_OF_MEMORY when none. */
static loom_status choose_devices(const share_run *r, shared_loop *L) {
  loom_graph *rg = NULL;
  loom_estimate e;
  memset(&e, 0, sizeof e);
  loom_status s = loom__loop_range_graph(L->sg, L->op, 0, LOOM_MIN(L->chunk, L->trips), &rg);
  if (!s) s = loom_graph_estimate(rg, NULL, &e);
  int64_t need = e.peak_bytes;
  loom_estimate_deinit(&e);
  loom_graph_destroy(rg);
  if (s) return s;
  int32_t n = 0;
  char limits[512] = "";
  size_t at = 0;
  bool cpu0 = false;
  for (int32_t i = 0; i < r->n_workers; i++)
    cpu0 |= r->workers[i].is_cpu0 && need <= r->workers[i].runner.limit;
  for (int32_t i = 0; i < r->n_workers; i++) {
    const worker *w = &r->workers[i];
    L->lanes[i].eligible =
        need <= w->runner.limit && !(r->opts->policy == LOOM_SCHED_DMDA && cpu0 && w->host_cores);
    n += L->lanes[i].eligible;
    char b[32];
    if (at < sizeof limits)
      at += (size_t)snprintf(limits + at, sizeof limits - at, "%s%s %s", i ? ", " : "", w->runner.device,
                             loom_bytes_format(w->runner.limit, b, sizeof b));
  }
  if (n == 0) {
    char b[32];
    return loom__error(
        LOOM_ERR_OUT_OF_MEMORY,
        "stage %d (a loop of %lld pieces): a range of %lld pieces needs %s, more than any device's "
        "limit (%s)",
        (int)L->stage, (long long)L->trips, (long long)L->chunk, loom_bytes_format(need, b, sizeof b),
        limits);
  }
  return LOOM_OK;
}

/* Combines the ranges' results into the stage's outputs (the loop's results the stage gives). */
loom_status loom__share_combine_stage(shared_loop *L, loom_tensor *outs) {
  const loom__op *op = &L->sg->ops[L->op];
  loom_tensor louts[LOOM_LOOP_MAX_RESULTS];
  memset(louts, 0, sizeof louts);
  loom_status s = LOOM_OK;
  for (int32_t j = 0; !s && j < L->n_out; j++)
    s = loom__tensor_init_unzeroed(&louts[j], &L->sg->values[op->outputs[j]].type);
  if (!s) s = loom__combine_partials(L->sg, L->op, L->parts, L->n_ranges, louts);
  bool taken[LOOM_LOOP_MAX_RESULTS] = {false};
  for (int32_t k = 0; !s && k < L->sg->n_outputs; k++) {
    int32_t j = 0;
    while (j < L->n_out && op->outputs[j] != L->sg->outputs[k]) j++;
    if (j == L->n_out) {
      s = loom__error(LOOM_ERR_INTERNAL, "stage %d returns a value its loop does not make", (int)L->stage);
    } else if (!taken[j]) {
      outs[k] = louts[j];
      memset(&louts[j], 0, sizeof louts[j]);
      taken[j] = true;
    } else {
      s = loom__tensor_init_unzeroed(&outs[k], &louts[j].type);
      int64_t bytes = 0;
      loom_type_bytes(&outs[k].type, &bytes);
      if (!s && bytes > 0) {
        for (int32_t q = 0; q < k; q++)
          if (L->sg->outputs[q] == L->sg->outputs[k]) memcpy(outs[k].data, outs[q].data, (size_t)bytes);
      }
    }
  }
  for (int32_t j = 0; j < L->n_out; j++) loom_tensor_deinit(&louts[j]);
  return s;
}

/* A loop's operand that its stage makes rather than reads: a constant, fill or iota, or a view
 * of a parameter (a reshape), which the split places beside the loop (kernel_mv's scalar 0.5
 * and its norms' reshape). They are made on the host for the ranges, at most this many bytes
 * each; a larger one would be copied whole to every device: that loop is not shared. */
#define MADE_OPERAND_MAX_BYTES (16 << 20)

/* Whether stage graph sg is one loop (what the cuts make) beside sources and views only,
 * whose operands are sg's parameters or made by those (MADE_OPERAND_MAX_BYTES); *op is that
 * loop. */
bool loom__share_lone_loop(const loom_graph *sg, int32_t *op) {
  int32_t loop = -1;
  for (int32_t i = 0; sg && i < sg->n_ops; i++) {
    if (sg->ops[i].loop && loop >= 0) return false;
    if (sg->ops[i].loop)
      loop = i;
    else if (!loom__op_is_light(sg->ops[i].kind))
      return false;
  }
  if (loop < 0) return false;
  for (int32_t i = 0; i < sg->ops[loop].n_inputs; i++) {
    const loom__value *v = &sg->values[sg->ops[loop].inputs[i]];
    int64_t bytes = 0;
    loom_type_bytes(&v->type, &bytes);
    if (v->op >= 0 && bytes > MADE_OPERAND_MAX_BYTES) return false;
  }
  *op = loop;
  return true;
}

/* The loop's operands that sg makes (made[i] for operand i; the others untouched): sg without
 * its loop, returning them, run on cpu0 from sg's parameters `ins`. */
static loom_status make_operands(loom_context *ctx, const loom_graph *sg, int32_t loop,
                                 const loom_tensor *ins, loom_tensor *made) {
  const loom__op *o = &sg->ops[loop];
  loom_value want[64];
  int32_t which[64], n = 0;
  for (int32_t i = 0; i < o->n_inputs; i++)
    if (sg->values[o->inputs[i]].op >= 0) {
      if (n == LOOM_ARRAY_SIZE(want))
        return loom__error(LOOM_ERR_UNSUPPORTED, "a shared loop with over 64 operands its stage makes");
      which[n++] = i;
    }
  if (n == 0) return LOOM_OK;
  loom__rebuild rb;
  memset(&rb, 0, sizeof rb);
  loom_status s = loom__rebuild_init(&rb, sg);
  for (int32_t i = 0; !s && i < sg->n_ops; i++)
    if (i != loop) s = loom__rebuild_copy(&rb, i);
  for (int32_t k = 0; !s && k < n; k++) want[k] = loom__rebuild_get(&rb, o->inputs[which[k]]);
  if (!s) s = loom_graph_return(rb.dst, want, n);
  loom_tensor outs[64];
  if (!s) s = loom_graph_run_on_device(ctx, "cpu0", rb.dst, ins, sg->n_params, outs, n, NULL);
  for (int32_t k = 0; !s && k < n; k++) made[which[k]] = outs[k];
  loom__rebuild_deinit(&rb);
  if (s) loom__error_prefix("the operands a shared loop's stage makes: ");
  return s;
}

void loom__share_loop_free(shared_loop *L) {
  if (!L) return;
  for (size_t k = 0; L->results && k < (size_t)L->n_ranges * (size_t)L->n_out; k++)
    loom_tensor_deinit(&L->results[k]);
  loom__free(L->results);
  loom__free(L->parts);
  for (int32_t i = 0; L->made && i < L->sg->ops[L->op].n_inputs; i++) loom_tensor_deinit(&L->made[i]);
  for (int32_t k = 0; L->read && k < L->sg->n_params; k++)
    if (L->read[k]) loom_tensor_deinit(&L->params[k]);
  loom__free(L->params);
  loom__free(L->read);
  loom__free(L->operands);
  loom__free(L->lanes);
  loom__free(L);
}

/* Opens loop stage st for sharing: its ranges, the operands it makes, the devices a range fits
 * and their rates from the models. Runs outside r->mu (it reads only what no worker changes). */
loom_status loom__share_loop_open(share_run *r, stage *st, shared_loop **out) {
  const loom_graph *sg = st->st.graph;
  const loom__op *o = &sg->ops[st->loop_op];
  shared_loop *L = loom__calloc(1, sizeof *L);
  if (!L) return loom__oom("a shared loop");
  L->sg = sg;
  L->op = st->loop_op;
  L->stage = st->index;
  L->trips = loom__loop_trips(o->loop);
  L->n_out = o->n_outputs;
  int64_t want = (int64_t)r->opts->ranges_per_device * r->n_workers;
  L->chunk = LOOM_MAX((L->trips + want - 1) / want, 1);
  L->operands = loom__calloc((size_t)LOOM_MAX(o->n_inputs, 1) * 2, sizeof *L->operands);
  L->made = L->operands ? L->operands + LOOM_MAX(o->n_inputs, 1) : NULL;
  L->results = loom__calloc((size_t)L->trips * (size_t)L->n_out, sizeof *L->results);
  L->parts = loom__calloc((size_t)L->trips, sizeof *L->parts);
  L->lanes = loom__calloc((size_t)r->n_workers, sizeof *L->lanes);
  L->params = loom__calloc((size_t)LOOM_MAX(sg->n_params, 1), sizeof *L->params);
  L->read = loom__calloc((size_t)LOOM_MAX(sg->n_params, 1), sizeof *L->read);
  loom_status s = L->operands && L->results && L->parts && L->lanes && L->params && L->read
                      ? LOOM_OK
                      : loom__oom("a shared loop's ranges");
  /* The ranges read the loop's operands from the host: a value a device stage left there is
   * read back once. */
  for (int32_t k = 0; !s && k < sg->n_params; k++) {
    int64_t bytes = 0;
    if (!st->in_bufs[k]) {
      L->params[k] = st->ins[k];
      continue;
    }
    s = loom__tensor_init_unzeroed(&L->params[k], &st->ins[k].type);
    L->read[k] = !s;
    if (!s) s = loom_type_bytes(&st->ins[k].type, &bytes);
    if (!s && bytes > 0) s = loom_buffer_read(st->in_bufs[k], 0, L->params[k].data, bytes);
    if (s) loom__error_prefix("stage %d: reading its input %d back: ", (int)st->index, (int)k);
  }
  if (!s) s = make_operands(r->ctx, sg, L->op, L->params, L->made);
  for (int32_t i = 0; !s && i < o->n_inputs; i++) {
    const loom__value *v = &sg->values[o->inputs[i]];
    L->operands[i] = v->op >= 0 ? L->made[i] : L->params[v->result];
  }
  if (!s) s = choose_devices(r, L);
  if (!s && r->opts->policy == LOOM_SCHED_DMDA) model_rates(r, L);
  if (s) {
    loom__share_loop_free(L);
    return s;
  }
  *out = L;
  return LOOM_OK;
}
