/* The shared runner (loom/share.h): a plan's stages (as the sharing cut made them: by branch,
 * or around its top-level loops, splitter/sharing.c), run by one worker thread per device for the whole run:
 * each takes a ready stage to run whole on its device, or a range of a shared loop's pieces; the ranges'
 * results are combined on the host.
 *
 * A range is a graph of its own (ir/loop_range.h): the loop over its pieces, reading the
 * loop's operands whole, which the executor runs on the worker's device as it runs any graph
 * (exec.h), with a meter at the device's limit; streamed operands stay streamed, so a range
 * holds what one piece holds, whatever its length. Each device's executor state, queue and
 * memory node are its own; what the workers share (the context's device table, the memory
 * manager, the OpenCL program caches on disk) is locked where it is kept.
 *
 * The run's state (stages, values between them, open loops, what each device does) is under
 * one mutex; the workers decide under it, when free: open a loop that became ready, run a
 * ready stage whole (eager: the first; dmda: where no other device would end it sooner by
 * the models or the context's history of the stage, else the first free device of the list),
 * take a loop's next range (eager: always; dmda: only where the loop would end sooner with
 * this device running it than with the others running all that is left, dmda_takes, going by
 * each device's seconds per piece: its model where loom-bench calibrate made one, then its
 * own ranges' times). A worker with nothing to take waits for the next change (a task taken
 * or done) and looks again. A stage's end wakes the stages reading it; the worker ending a
 * loop's last range combines it.
 * A worker that fails marks the run failed: the others take no more work, finish what they
 * run, and are joined; the first error is the run's, with its stage, pieces and device.
 */
#include "runtime/share_run.h"

void loom_share_options_init(loom_share_options *opts) {
  if (!opts) return;
  memset(opts, 0, sizeof *opts);
  opts->devices = "auto";
  opts->policy = LOOM_SCHED_DMDA;
  opts->ranges_per_device = RANGES_PER_DEVICE_DEFAULT;
}

void loom_share_stats_deinit(loom_share_stats *stats) {
  if (!stats) return;
  loom__free(stats->devices);
  loom__free(stats->stage_device);
  loom_plan_stats_deinit(&stats->plan);
  memset(stats, 0, sizeof *stats);
}

/* Under r->mu: the run fails with the first error only; the workers stop taking work. */
static void fail(share_run *r, loom_status s, const char *msg) {
  if (!r->failed) {
    r->failed = true;
    r->status = s;
    snprintf(r->error, sizeof r->error, "%s", msg);
  }
  pthread_cond_broadcast(&r->cv);
}

/* Whether w is free, or when it expects to be. */
double loom__share_free_at(const worker *w, double now) {
  return w->busy ? fmax(now, w->busy_until) : now;
}

/* Whether a device other than w's is running something. */
bool loom__share_others_busy(const share_run *r, const worker *w) {
  for (int32_t i = 0; i < r->n_workers; i++)
    if (&r->workers[i] != w && r->workers[i].busy) return true;
  return false;
}

/* The time of one task (a stage, a range) on w's device: by the device's own clock where its
 * backend has one (event profiling: a mark on its queue before the task and one after, once
 * the task's work is done), else the host's, from submit to done. */
typedef struct task_clock {
  void *from; /* the mark before the task; NULL: host time */
  double t0;
} task_clock;

static void clock_start(const worker *w, task_clock *c) {
  const loom__backend *b = w->dev->backend;
  c->from = NULL;
  if (b->mark && w->dev->dev && b->mark(w->dev->dev, &c->from) != LOOM_OK) c->from = NULL;
  c->t0 = loom__now();
}

/* Seconds since clock_start; `done` is whether the task's work completed (a failed one is
 * timed on the host: its device may hold nothing more to wait for). Counts a device-timed
 * task in w's stats. */
static double clock_stop(const worker *w, task_clock *c, bool done) {
  double host = loom__now() - c->t0, device = 0;
  const loom__backend *b = w->dev->backend;
  void *to = NULL;
  bool timed = c->from && done && b->mark(w->dev->dev, &to) == LOOM_OK &&
               b->mark_seconds(w->dev->dev, c->from, to, &device) == LOOM_OK;
  if (c->from) b->mark_release(w->dev->dev, c->from);
  if (to) b->mark_release(w->dev->dev, to);
  c->from = NULL;
  if (!timed) return host;
  w->stats->device_timed++;
  return device;
}

/* ---- stages ------------------------------------------------------------------------------------ */

/* Whether w may run stage st whole: a device whose limit holds the stage's estimate, where any
 * does. (That dmda gives a device on the host's cores no stage beside cpu0 is the policy's own
 * rule, sched/policy.c, which the simulation applies too.) */
static bool stage_eligible(const share_run *r, const worker *w, const stage *st) {
  if (st->st.estimated_peak <= w->runner.limit) return true;
  for (int32_t i = 0; i < r->n_workers; i++)
    if (st->st.estimated_peak <= r->workers[i].runner.limit) return false;
  return true;
}

/* Expected seconds of stage st on worker i's device: from the models where every device has
 * one, else from the context's history of the stage's footprint on that device; false when
 * neither knows. */
static bool expected_seconds(const share_run *r, const stage *st, int32_t i, double *out) {
  if (st->seconds) {
    *out = st->seconds[i];
    return true;
  }
  return loom__history_get(r->ctx, st->footprint, r->workers[i].runner.device, out);
}

/* Under r->mu: whether free worker w takes ready stage st to run whole: whether the run's
 * policy (sched/policy.h, the rule the simulated scheduler applies) chooses w's device among
 * the devices the stage may go to, each free from when its worker is (now for w), done when
 * its expected time (expected_seconds) says. Under dmda, where every such device has one, the
 * earliest finish (the models count the transfers of its inputs and outputs: values between
 * stages are on the host; measured times hold them); where one has none, and under eager, the
 * first free device of the list (cpu0 first under auto), so a graph with no independent work
 * runs on one device as it did before sharing, and a stage ready while that device is busy
 * goes to the next; the times it measures are the history the next run of the same stage goes
 * by. A busy device counts as free a moment after now at the soonest, so that a free one is
 * preferred where their finishes tie. */
static bool takes_stage(const share_run *r, const worker *w, const stage *st, double now) {
  if (!stage_eligible(r, w, st)) return false;
  loom__sched_option *o = r->options;
  for (int32_t i = 0; i < r->n_workers; i++) {
    const worker *e = &r->workers[i];
    double expected = 0;
    o[i].eligible = stage_eligible(r, e, st);
    o[i].cpu0 = e->is_cpu0;
    o[i].host_cores = e->host_cores;
    o[i].fixed = false; /* FIXED runs the plan's stages on their runners, not here */
    o[i].free_at = e == w ? now : e->busy ? fmax(now + 1e-9, e->busy_until) : now;
    o[i].finish = expected_seconds(r, st, i, &expected) ? o[i].free_at + expected : INFINITY;
  }
  return loom__sched_policy(r->opts->policy)->choose(o, r->n_workers) == w->index;
}

/* A stage run whole on w's device, as loom_plan_run runs it. The device is chosen here, at run
 * time, so the splitter fits the stage to its limit now (one stage where its estimate fits,
 * which the policy prefers: stage_eligible; else cut by memory). */
static loom_status run_whole(share_run *r, worker *w, stage *st) {
  loom_plan *sub = NULL;
  loom_plan_stats ps;
  memset(&ps, 0, sizeof ps);
  task_clock clock;
  clock_start(w, &clock);
  loom_status s = loom__plan_restage(st->st.graph, &w->runner, NULL, &sub, NULL);
  /* A device's results stay there for the stages reading them; a stage on the host's memory
   * (cpu0) makes host tensors, as loom_plan_run does, outside the host node's limit. */
  bool resident = !w->dev->backend->host_memory;
  if (!s)
    s = loom__plan_run_mixed(r->ctx, sub, st->ins, st->in_bufs, st->outs, resident ? st->out_bufs : NULL,
                             st->st.n_outputs, &ps);
  if (s) loom__error_prefix("stage %d (%d ops) on %s: ", (int)st->index, (int)st->st.n_ops, w->runner.device);
  double took = clock_stop(w, &clock, s == LOOM_OK);
  w->stats->busy_seconds += took;
  if (!s) loom__history_put(r->ctx, st->footprint, w->runner.device, took);
  w->stats->peak_bytes = LOOM_MAX(w->stats->peak_bytes, ps.peak_bytes);
  loom_plan_stats_deinit(&ps);
  loom_plan_destroy(sub);
  return s;
}

static void held_release(held *h) {
  if (h->owned) loom_tensor_deinit(&h->t);
  if (h->owned) loom_buffer_free(h->buf);
  h->buf = NULL;
  memset(&h->t, 0, sizeof h->t);
  h->owned = false;
}

/* Under r->mu: a stage whose inputs are all made is ready; its inputs are taken from the
 * values held (they stay held until every stage reading them is done). */
static void wake_ready(share_run *r) {
  for (int32_t i = 0; i < r->n_stages; i++) {
    stage *st = &r->stages[i];
    if (st->state != STAGE_WAITING) continue;
    bool ready = true;
    for (int32_t k = 0; k < st->st.n_inputs && ready; k++) {
      int32_t p = r->vals[st->st.inputs[k]].producer;
      ready = p < 0 || r->stages[p].state == STAGE_DONE;
    }
    if (!ready) continue;
    for (int32_t k = 0; k < st->st.n_inputs; k++) {
      st->ins[k] = r->vals[st->st.inputs[k]].t;
      st->in_bufs[k] = r->vals[st->st.inputs[k]].buf;
    }
    st->state = STAGE_READY;
  }
  pthread_cond_broadcast(&r->cv);
}

/* Under r->mu: stage st is done: its outputs held, the inputs nothing else reads let go, the
 * stages waiting for it woken. */
static void stage_done(share_run *r, stage *st) {
  for (int32_t k = 0; k < st->st.n_outputs; k++) {
    held *h = &r->vals[st->st.outputs[k]];
    held_release(h);
    h->t = st->outs[k];
    h->buf = st->out_bufs[k];
    if (h->buf) h->t.type = r->g->values[st->st.outputs[k]].type;
    h->owned = true;
    memset(&st->outs[k], 0, sizeof st->outs[k]);
    st->out_bufs[k] = NULL;
  }
  for (int32_t k = 0; k < st->st.n_inputs; k++) {
    held *h = &r->vals[st->st.inputs[k]];
    if (--h->readers == 0 && !h->returned) held_release(h);
  }
  st->state = STAGE_DONE;
  r->n_done++;
  wake_ready(r);
}

static void outs_release(stage *st) {
  for (int32_t k = 0; k < st->st.n_outputs; k++) {
    loom_tensor_deinit(&st->outs[k]);
    loom_buffer_free(st->out_bufs[k]);
    st->out_bufs[k] = NULL;
  }
}

/* ---- the workers ---------------------------------------------------------------------------------- */

typedef enum task_kind { TASK_OPEN, TASK_WHOLE, TASK_RANGE } task_kind;

typedef struct task {
  task_kind kind;
  stage *st;
  int32_t range;
} task;

/* Under r->mu: w's next task, false when there is none for it now. A loop ready to share is
 * opened first (the ranges it gives keep every device busy); then a stage to run whole, as the
 * policy gives it (a stage may hold up the stages after it, a loop's ranges any device can
 * take); then a range of a shared loop. */
static bool next_task(share_run *r, worker *w, bool waited, task *t) {
  double now = loom__now();
  for (int32_t i = 0; i < r->n_stages; i++) {
    stage *st = &r->stages[i];
    if (st->state == STAGE_READY && st->loop_op >= 0) {
      *t = (task){TASK_OPEN, st, -1};
      st->state = STAGE_BUSY;
      return true;
    }
  }
  for (int32_t i = 0; i < r->n_stages; i++) {
    stage *st = &r->stages[i];
    if (st->state == STAGE_READY && takes_stage(r, w, st, now)) {
      *t = (task){TASK_WHOLE, st, -1};
      st->state = STAGE_BUSY;
      double expect = 0;
      w->busy_until = now + (expected_seconds(r, st, w->index, &expect) ? expect : 0);
      return true;
    }
  }
  for (int32_t i = 0; i < r->n_stages; i++) {
    stage *st = &r->stages[i];
    int32_t c = st->state == STAGE_SHARED ? loom__share_claim_range(r, st->L, w, waited, now) : -1;
    if (c >= 0) {
      *t = (task){TASK_RANGE, st, c};
      return true;
    }
  }
  return false;
}

/* Runs range t->range of a shared loop; the worker that ends its last range combines them and
 * ends the stage. Called and returns under r->mu. */
static void do_range(share_run *r, worker *w, task *t) {
  shared_loop *L = t->st->L;
  int64_t first = L->parts[t->range].first, last = L->parts[t->range].last, peak = 0;
  pthread_mutex_unlock(&r->mu);
  task_clock clock;
  clock_start(w, &clock);
  loom_status s = loom__share_run_range(L, w, t->range, &peak);
  double took = clock_stop(w, &clock, s == LOOM_OK);
  char msg[sizeof r->error];
  if (s)
    snprintf(msg, sizeof msg, "stage %d (a loop of %lld pieces): pieces [%lld, %lld) on %s: %s",
             (int)L->stage, (long long)L->trips, (long long)first, (long long)last, w->runner.device,
             loom_last_error());
  pthread_mutex_lock(&r->mu);
  L->running--;
  w->stats->busy_seconds += took;
  w->stats->peak_bytes = LOOM_MAX(w->stats->peak_bytes, peak);
  if (s) {
    fail(r, s, msg);
    return;
  }
  lane *ln = &L->lanes[w->index];
  double rate = took / (double)(last - first);
  /* a first range pays for building programs: the ranges after it weigh in */
  ln->rate = ln->measured ? RATE_WEIGHT * rate + (1 - RATE_WEIGHT) * ln->rate : rate;
  ln->measured = true;
  ln->ranges++;
  w->stats->seconds_per_piece = ln->rate;
  w->stats->pieces += last - first;
  w->stats->ranges++;
  pthread_cond_broadcast(&r->cv);
  if (L->next < L->trips || L->running > 0 || r->failed) return;
  t->st->state = STAGE_BUSY;
  pthread_mutex_unlock(&r->mu);
  s = loom__share_combine_stage(L, t->st->outs);
  if (s)
    snprintf(msg, sizeof msg, "stage %d (a loop of %lld pieces): %s", (int)L->stage, (long long)L->trips,
             loom_last_error());
  pthread_mutex_lock(&r->mu);
  if (s) {
    outs_release(t->st);
    fail(r, s, msg);
    return;
  }
  for (int32_t i = 0; i < r->n_workers; i++)
    if (L->lanes[i].ranges > 0) r->workers[i].stats->stages++;
  r->stats->n_shared++;
  t->st->L = NULL;
  stage_done(r, t->st);
  pthread_mutex_unlock(&r->mu);
  loom__share_loop_free(L);
  pthread_mutex_lock(&r->mu);
}

/* Runs task t on w. Called and returns under r->mu. */
static void do_task(share_run *r, worker *w, task *t) {
  char msg[sizeof r->error];
  loom_status s = LOOM_OK;
  stage *st = t->st;
  w->busy = true;
  pthread_cond_broadcast(&r->cv); /* a device that left this task to w may take another */
  if (t->kind == TASK_RANGE) {
    do_range(r, w, t);
  } else if (t->kind == TASK_OPEN) {
    shared_loop *L = NULL;
    pthread_mutex_unlock(&r->mu);
    s = loom__share_loop_open(r, st, &L);
    if (s) snprintf(msg, sizeof msg, "%s", loom_last_error());
    pthread_mutex_lock(&r->mu);
    if (s) {
      fail(r, s, msg);
    } else {
      st->L = L;
      st->state = STAGE_SHARED;
      pthread_cond_broadcast(&r->cv);
    }
  } else {
    pthread_mutex_unlock(&r->mu);
    s = run_whole(r, w, st);
    if (s) {
      snprintf(msg, sizeof msg, "%s", loom_last_error());
      outs_release(st);
    }
    pthread_mutex_lock(&r->mu);
    if (s) {
      fail(r, s, msg);
    } else {
      w->stats->stages++;
      r->stats->stage_device[st->index] = w->index;
      stage_done(r, st);
    }
  }
  w->busy = false;
  w->busy_until = 0;
  pthread_cond_broadcast(&r->cv);
}

static void *worker_main(void *arg) {
  worker *w = arg;
  share_run *r = w->run;
  bool waited = false;
  pthread_mutex_lock(&r->mu);
  while (!r->failed && r->n_done < r->n_stages) {
    task t;
    if (next_task(r, w, waited, &t)) {
      do_task(r, w, &t);
      waited = false;
      continue;
    }
    /* Nothing for this device now: wait for a change (a task taken or done), or a while where
     * dmda left work to a device that may not come for it (DMDA_WAIT_SECONDS). */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long ns = ts.tv_nsec + (long)(DMDA_WAIT_SECONDS * 1e9);
    ts.tv_sec += ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    pthread_cond_timedwait(&r->cv, &r->mu, &ts);
    waited = true;
  }
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

/* Starts a worker per device, waits for them all, and reports the first failure. */
static loom_status run_workers(share_run *r) {
  pthread_mutex_lock(&r->mu);
  wake_ready(r);
  for (int32_t i = 0; i < r->n_workers; i++) {
    worker *w = &r->workers[i];
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
      char msg[128];
      snprintf(msg, sizeof msg, "cannot start the worker thread of %s", w->runner.device);
      fail(r, LOOM_ERR_UNAVAILABLE, msg); /* the workers started stop at their next look */
      break;
    }
    w->started = true;
  }
  pthread_mutex_unlock(&r->mu);
  for (int32_t i = 0; i < r->n_workers; i++)
    if (r->workers[i].started) pthread_join(r->workers[i].thread, NULL);
  if (r->failed) return loom__error(r->status, "%s", r->error);
  if (r->n_done < r->n_stages)
    return loom__error(LOOM_ERR_INTERNAL, "the shared run ended with %d of %d stages done", (int)r->n_done,
                       (int)r->n_stages);
  return LOOM_OK;
}

/* ---- the stages ---------------------------------------------------------------------------------- */

/* The bytes of values ids[0..n) of g. */
static int64_t values_bytes(const loom_graph *g, const int32_t *ids, int32_t n) {
  int64_t sum = 0;
  for (int32_t k = 0; k < n; k++) {
    int64_t b = 0;
    loom_type_bytes(&g->values[ids[k]].type, &b);
    sum += b;
  }
  return sum;
}

/* Expected seconds of stage st on each device, from the models: its ops' work by class, and
 * its inputs brought from the host and its outputs taken back. NULL seconds where a device has
 * no model. */
static loom_status stage_seconds(share_run *r, stage *st) {
  if (!r->models || !st->st.graph) return LOOM_OK;
  loom_sched_task work = {0};
  for (int32_t o = 0; o < st->st.graph->n_ops; o++)
    if (loom_sched_op_work(st->st.graph, o, work.size, work.kernels) != LOOM_OK) return LOOM_OK;
  int64_t moved = values_bytes(r->g, st->st.inputs, st->st.n_inputs) +
                  values_bytes(r->g, st->st.outputs, st->st.n_outputs);
  st->seconds = loom__calloc((size_t)r->n_workers, sizeof *st->seconds);
  if (!st->seconds) return loom__oom("a stage's expected times");
  for (int32_t i = 0; i < r->n_workers; i++) {
    int32_t d = loom_sched_platform_find(r->models, r->workers[i].runner.device);
    const loom_sched_device *sd = loom_sched_platform_device(r->models, d);
    st->seconds[i] = sd ? loom_sched_platform_transfer_time(r->models, 0, sd->node, moved) +
                              loom__sched_task_time(&work, &sd->model)
                        : INFINITY;
  }
  return LOOM_OK;
}

/* stats->stage_device for n stages, none placed yet; false when it cannot be had. */
static bool stage_devices_init(loom_share_stats *stats, int32_t n) {
  stats->stage_device = loom__malloc(sizeof *stats->stage_device * (size_t)LOOM_MAX(n, 1));
  for (int32_t i = 0; stats->stage_device && i < n; i++) stats->stage_device[i] = -1;
  return stats->stage_device == NULL;
}

/* The plan's stages as they are (the sharing cut's, splitter/sharing.c, where the caller
 * planned as loom/share.h says), and the values between them. */
static loom_status run_init(share_run *r, const loom_plan *plan, const loom_tensor *inputs) {
  loom_status s = LOOM_OK;
  r->cut = plan;
  const loom_graph *g = r->g = loom_plan_graph(plan);
  r->vals = loom__calloc((size_t)LOOM_MAX(g->n_values, 1), sizeof *r->vals);
  r->n_stages = loom_plan_stage_count(r->cut);
  r->stages = loom__calloc((size_t)LOOM_MAX(r->n_stages, 1), sizeof *r->stages);
  if (!r->vals || !r->stages || stage_devices_init(r->stats, r->n_stages))
    return loom__oom("the stages and the values between them");
  for (int32_t v = 0; v < g->n_values; v++) r->vals[v].producer = -1;
  for (int32_t p = 0; p < g->n_params; p++) r->vals[g->params[p]].t = inputs[p];
  for (int32_t i = 0; i < g->n_outputs; i++) r->vals[g->outputs[i]].returned = true;
  for (int32_t i = 0; i < r->n_stages; i++) {
    stage *st = &r->stages[i];
    st->index = i;
    st->loop_op = -1;
    s = loom_plan_stage(r->cut, i, &st->st);
    if (s) return s;
    size_t n_in = (size_t)LOOM_MAX(st->st.n_inputs, 1), n_out = (size_t)LOOM_MAX(st->st.n_outputs, 1);
    st->ins = loom__calloc(1, (n_in + n_out) * (sizeof(loom_tensor) + sizeof(loom_buffer *)));
    if (!st->ins) return loom__oom("a stage's inputs and outputs");
    st->outs = st->ins + n_in;
    st->in_bufs = (loom_buffer **)(void *)(st->outs + n_out);
    st->out_bufs = st->in_bufs + n_in;
    for (int32_t k = 0; k < st->st.n_inputs; k++) r->vals[st->st.inputs[k]].readers++;
    for (int32_t k = 0; k < st->st.n_outputs; k++) r->vals[st->st.outputs[k]].producer = i;
    int32_t op = -1;
    if (r->n_workers > 1 && loom__share_lone_loop(st->st.graph, &op)) st->loop_op = op;
    if (!st->st.graph) {
      st->state = STAGE_DONE;
      r->n_done++;
    }
    if (!s && st->loop_op < 0) s = stage_seconds(r, st);
    st->footprint = loom__graph_footprint(st->st.graph);
    if (s) return s;
  }
  return LOOM_OK;
}

static void run_deinit(share_run *r) {
  for (int32_t i = 0; r->stages && i < r->n_stages; i++) {
    loom__share_loop_free(r->stages[i].L);
    if (r->stages[i].ins) outs_release(&r->stages[i]);
    loom__free(r->stages[i].ins);
    loom__free(r->stages[i].seconds);
  }
  for (int32_t v = 0; r->vals && v < r->g->n_values; v++) held_release(&r->vals[v]);
  loom__free(r->stages);
  loom__free(r->vals);
  loom_sched_platform_destroy(r->models);
}

static loom_status copy_tensor(const loom_tensor *src, loom_tensor *dst) {
  int64_t bytes = 0;
  loom_status s = loom__tensor_init_unzeroed(dst, &src->type);
  if (!s) s = loom_type_bytes(&src->type, &bytes);
  if (!s && bytes > 0) memcpy(dst->data, src->data, (size_t)bytes);
  return s;
}

/* The returned values: moved out where the run made them, copied otherwise (a parameter
 * returned, a value returned twice). */
static loom_status deliver(share_run *r, loom_tensor *outputs, int32_t n_outputs) {
  for (int32_t i = 0; i < n_outputs; i++) {
    held *h = &r->vals[r->g->outputs[i]];
    int32_t twin = -1;
    for (int32_t j = 0; j < i && twin < 0; j++)
      if (r->g->outputs[j] == r->g->outputs[i]) twin = j;
    loom_status s = LOOM_OK;
    if (twin >= 0) {
      s = copy_tensor(&outputs[twin], &outputs[i]);
    } else if (h->buf) { /* read back from the device its stage left it on */
      int64_t bytes = 0;
      s = loom__tensor_init_unzeroed(&outputs[i], &h->t.type);
      if (!s) s = loom_type_bytes(&h->t.type, &bytes);
      if (!s && bytes > 0) s = loom_buffer_read(h->buf, 0, outputs[i].data, bytes);
      if (!s) held_release(h);
    } else if (h->owned) {
      outputs[i] = h->t;
      memset(&h->t, 0, sizeof h->t);
      h->owned = false;
    } else {
      s = copy_tensor(&h->t, &outputs[i]);
    }
    if (s) return s;
  }
  return LOOM_OK;
}

/* The workers and their stats, one per device; the bytes their nodes moved so far (taken off
 * again at the end); the devices' models, where every one has one. */
static loom_status workers_init(share_run *r, const loom_runner *runners, int32_t n) {
  r->workers = loom__calloc((size_t)n, sizeof *r->workers);
  r->options = loom__calloc((size_t)n, sizeof *r->options);
  r->stats->devices = loom__calloc((size_t)n, sizeof *r->stats->devices);
  if (!r->workers || !r->options || !r->stats->devices) return loom__oom("the devices' workers");
  r->n_workers = r->stats->n_devices = n;
  char list[512] = "";
  size_t at = 0;
  for (int32_t i = 0; i < n; i++) {
    worker *w = &r->workers[i];
    loom_share_device_stats *ds = &r->stats->devices[i];
    w->run = r;
    w->index = i;
    w->runner = runners[i];
    w->stats = ds;
    snprintf(ds->device, sizeof ds->device, "%s", runners[i].device);
    ds->limit_bytes = runners[i].limit;
    loom_status s = loom__context_exec_device(r->ctx, runners[i].device, &w->dev);
    int32_t index = 0;
    loom_device_info info;
    if (!s) s = loom_context_find_device(r->ctx, runners[i].device, &index);
    if (!s) s = loom_context_device_info(r->ctx, index, &info);
    if (s) return s;
    w->is_cpu0 = strcasecmp(info.id, "cpu0") == 0;
    w->host_cores = loom__share_on_host_cores(&info);
    r->cpu0_runs |= w->is_cpu0;
    if (at < sizeof list) at += (size_t)snprintf(list + at, sizeof list - at, i ? ",%s" : "%s", info.id);
    loom_mem_node_stats ms;
    if (loom_mem_stats(w->dev->memory, w->dev->node, &ms) == LOOM_OK) {
      ds->bytes_in = -ms.bytes_in;
      ds->bytes_out = -ms.bytes_out;
    }
  }
  if (r->opts->policy == LOOM_SCHED_DMDA && n > 1 &&
      loom_sched_platform_from_context(r->ctx, list, &r->models) != LOOM_OK) {
    r->models = NULL; /* a device without a model: dmda goes by the ranges' times */
  }
  return LOOM_OK;
}
/* Ends the run's figures, and trims the pools of the devices' nodes and the host's: what the
 * run cached there does not outlive it (as loom_plan_run's does not), whichever worker gave it
 * back last. */
static void workers_finish(share_run *r) {
  const loom__exec_device *cpu = NULL;
  for (int32_t i = 0; i < r->n_workers; i++)
    if (r->workers[i].dev) loom_mem_trim(r->workers[i].dev->memory, r->workers[i].dev->node);
  if (loom__context_exec_device(r->ctx, "cpu0", &cpu) == LOOM_OK) loom_mem_trim(cpu->memory, cpu->node);
  for (int32_t i = 0; i < r->n_workers; i++) {
    loom_share_device_stats *ds = &r->stats->devices[i];
    loom_mem_node_stats ms;
    bool counted = false; /* a node two devices share is counted once */
    for (int32_t j = 0; j < i; j++)
      counted |= r->workers[j].dev && r->workers[j].dev->node == r->workers[i].dev->node;
    if (r->workers[i].dev && !counted &&
        loom_mem_stats(r->workers[i].dev->memory, r->workers[i].dev->node, &ms) == LOOM_OK) {
      ds->bytes_in += ms.bytes_in;
      ds->bytes_out += ms.bytes_out;
    } else {
      ds->bytes_in = ds->bytes_out = 0;
    }
    r->stats->peak_bytes = LOOM_MAX(r->stats->peak_bytes, ds->peak_bytes);
  }
}

/* FIXED: the plan as it is; each device's figures from the stages its runners ran. */
static loom_status run_fixed(share_run *r, const loom_plan *plan, const loom_tensor *inputs, int32_t n_inputs,
                             loom_tensor *outputs, int32_t n_outputs) {
  loom_status s = loom_plan_run_with_options(r->ctx, plan, r->opts->run, inputs, n_inputs, outputs, n_outputs,
                                             &r->stats->plan);
  if (stage_devices_init(r->stats, r->stats->plan.n_stages)) return s ? s : loom__oom("the stages' devices");
  for (int32_t i = 0; i < r->stats->plan.n_stages; i++) {
    loom_stage_info st;
    if (loom_plan_stage(plan, i, &st)) continue;
    for (int32_t d = 0; d < r->n_workers; d++) {
      if (strcasecmp(r->workers[d].runner.device, st.device) != 0) continue;
      if (st.graph) r->stats->stage_device[i] = d;
      loom_share_device_stats *ds = r->workers[d].stats;
      ds->busy_seconds += r->stats->plan.stages[i].seconds;
      ds->peak_bytes = LOOM_MAX(ds->peak_bytes, r->stats->plan.stages[i].peak_bytes);
      ds->stages++;
      break;
    }
  }
  r->stats->n_stages = r->stats->plan.n_stages;
  return s;
}

/* The plan's own runners' devices, in order, each once (FIXED with devices NULL). */
static loom_status plan_devices(const loom_plan *plan, char *buf, size_t size) {
  size_t n = 0;
  buf[0] = '\0';
  for (int32_t i = 0; i < loom_plan_stage_count(plan); i++) {
    loom_stage_info st;
    if (loom_plan_stage(plan, i, &st)) continue;
    char key[40];
    snprintf(key, sizeof key, ",%s,", st.device);
    char have[1100];
    snprintf(have, sizeof have, ",%s,", buf);
    if (strstr(have, key)) continue;
    n += (size_t)snprintf(buf + n, n < size ? size - n : 0, n ? ",%s" : "%s", st.device);
  }
  return n < size ? LOOM_OK : loom__error(LOOM_ERR_INVALID_ARGUMENT, "the plan's devices do not fit a list");
}

static loom_status check_args(loom_context *ctx, const loom_plan *plan, const loom_share_options *opts,
                              const loom_tensor *inputs, int32_t n_inputs, loom_tensor *outputs,
                              int32_t n_outputs) {
  if (!ctx || !plan || (n_outputs > 0 && !outputs) || (n_inputs > 0 && !inputs))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_plan_run_shared: NULL argument");
  if (opts->ranges_per_device < 1 || opts->ranges_per_device > 64)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_plan_run_shared: ranges_per_device %d is not 1 to 64",
                       (int)opts->ranges_per_device);
  if ((int)opts->policy < LOOM_SCHED_FIXED || opts->policy > LOOM_SCHED_DMDA)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_plan_run_shared: policy %d is none",
                       (int)opts->policy);
  const loom_graph *g = loom_plan_graph(plan);
  if (n_outputs != g->n_outputs)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "graph '%s' returns %d value%s, the caller has room for %d",
                       g->name, (int)g->n_outputs, g->n_outputs == 1 ? "" : "s", (int)n_outputs);
  return loom__check_inputs(g, inputs, n_inputs);
}

loom_status loom_plan_run_shared(loom_context *ctx, const loom_plan *plan, const loom_share_options *opts,
                                 const loom_tensor *inputs, int32_t n_inputs, loom_tensor *outputs,
                                 int32_t n_outputs, loom_share_stats *stats) {
  loom_share_options defaults;
  loom_share_stats own;
  loom_share_options_init(&defaults);
  if (!opts) opts = &defaults;
  if (!stats) stats = &own;
  memset(stats, 0, sizeof *stats);
  for (int32_t i = 0; outputs && i < n_outputs; i++) memset(&outputs[i], 0, sizeof outputs[i]);
  loom_status s = check_args(ctx, plan, opts, inputs, n_inputs, outputs, n_outputs);
  if (s) return s;
  share_run r;
  memset(&r, 0, sizeof r);
  r.ctx = ctx;
  r.opts = opts;
  r.g = loom_plan_graph(plan);
  r.stats = stats;
  loom_runner *runners = NULL;
  int32_t n = 0;
  char listed[1024];
  const char *devices = opts->devices;
  if (opts->policy == LOOM_SCHED_FIXED && !devices) {
    s = plan_devices(plan, listed, sizeof listed);
    devices = listed;
  }
  double t0 = loom__now();
  if (!s) s = loom_share_runners(ctx, devices, opts->limits, opts->n_limits, &runners, &n);
  if (!s) s = workers_init(&r, runners, n);
  if (!s && opts->policy == LOOM_SCHED_FIXED) {
    s = run_fixed(&r, plan, inputs, n_inputs, outputs, n_outputs);
  } else if (!s) {
    bool sync = pthread_mutex_init(&r.mu, NULL) == 0;
    if (sync && pthread_cond_init(&r.cv, NULL) != 0) {
      pthread_mutex_destroy(&r.mu);
      sync = false;
    }
    s = sync ? run_init(&r, plan, inputs)
             : loom__error(LOOM_ERR_UNAVAILABLE, "cannot make the workers' lock");
    stats->n_stages = r.n_stages;
    if (!s) s = run_workers(&r);
    if (!s) s = deliver(&r, outputs, n_outputs);
    if (sync) {
      pthread_cond_destroy(&r.cv);
      pthread_mutex_destroy(&r.mu);
    }
  }
  /* The values still held first: buffers freed go to their nodes' pools, which
   * workers_finish then trims. */
  run_deinit(&r);
  if (r.workers) workers_finish(&r);
  stats->seconds = loom__now() - t0;
  for (int32_t i = 0; s && outputs && i < n_outputs; i++) loom_tensor_deinit(&outputs[i]);
  loom__free(r.workers);
  loom__free(r.options);
  free(runners);
  if (stats == &own) loom_share_stats_deinit(&own);
  return s;
}
