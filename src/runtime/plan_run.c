/* loom_plan_run: a plan's stages, one after the other, each under its runner's limit.
 *
 * Each stage graph runs through the same executor as a whole graph (loom__execute), with a
 * meter limited to the stage's runner limit, so no stage ever holds more than its limit and
 * the meter's peak is the stage's measured peak. Its buffers come from the context's memory
 * manager on the runner device's node, whose own limit (LOOM_MEM_LIMIT) holds too; a stage
 * is one span ("stage") in the manager's trace.
 *
 * Values cross stages in the HMM: a stage on a device leaves its outputs there, as buffers
 * the plan holds while a later stage or the graph's return needs them, and the stage that
 * reads one acquires it on its own node: on the same device it is read where it is; on
 * another device the HMM copies it in (between OpenCL devices of one platform, device to
 * device, queued behind an event of the device that made it), and on cpu0 it is read back.
 * cpu0's outputs are host tensors. A device never holds more than its runner's limit: before
 * a stage runs on a device, the held values it does not read leave it for host memory, and
 * those it reads are counted by the stage as inputs. A runner limit is the device's, not the
 * run's: while a stage runs, its limit caps the node's limit (loom__hmm_runner_limit_begin),
 * so all the runs sharing the device hold at most the smallest runner limit in force there
 * together; a stage is admitted there first, for its estimated peak, waiting in turn while the
 * other runs' stages leave it no room (run_admit.h, hmm/hmm_admit.c). While a stage runs, the next stage's
 * inputs already held are prefetched to its device when it is another one (the memory
 * manager's prefetch policy, adaptive by default), as far as its runner's limit allows. Values in host memory
 * between stages are not runner memory and are not counted against any limit. Each stage synchronizes its
 * device when it ends, so its time and its errors are its own.
 *
 * Resident runs (loom_plan_run_buffers) are the same run on the caller's buffers: the
 * parameters are held as borrowed buffers (read where they are, never freed or moved off a
 * device here), the values the graph returns are handed out as typed buffers where their
 * stages made them (cpu0's too), the pools are kept for the next call, and a device stage that
 * reads nothing from host memory returns with its work submitted rather than done.
 */
#include <string.h>

#include "hmm/hmm.h"
#include "loom/plan.h"
#include "runtime/context.h"
#include "runtime/exec.h"
#include "runtime/run_admit.h"
#include "splitter/restage.h"

/* The device a stage runs on: cpu0, or a device of the context a compute backend drives
 * (runtime/backends.c), opened on first use. A stage placed elsewhere is refused before
 * anything runs: NOT_FOUND when the context has no such device, UNSUPPORTED when no backend
 * of this build can run it. */
static loom_status stage_device(loom_context *ctx, const char *device, int32_t index,
                                const loom__exec_device **out) {
  loom_status s = loom__context_exec_device(ctx, device, out);
  if (s) loom__error_prefix("stage %d is placed on %s: ", (int)index, device);
  return s;
}

/* A value between stages: a host tensor, or a buffer a device stage left where it made it. */
typedef struct held_value {
  loom_tensor t;       /* the type always; data NULL when it is a buffer */
  loom_buffer *buffer; /* ours, the caller's (borrowed), or NULL */
  bool owned;          /* t.data is ours to free (a stage output); false: the caller's input */
  /* buffer is not ours, never freed here: the caller's input (resident runs), or the buffer
   * of the run that re-planned a stage (recover_stage) */
  bool borrowed;
  int32_t node;       /* the memory node of the stage that made it; -1: a parameter */
  int32_t last_stage; /* the last stage that reads it; INT32_MAX: the graph returns it */
} held_value;

/* The tries of recovery made so far (loom_plan_stats.recoveries). */
typedef struct recovery_log {
  loom_plan_recovery *items;
  int32_t count, cap;
} recovery_log;

typedef struct plan_run {
  loom_context *ctx;
  const loom_plan *plan;
  const loom_graph *g;
  held_value *vals;                  /* per plan-graph value */
  const loom_plan_run_options *opts; /* NULL in a re-plan's own run: it does not recover */
  recovery_log *log;
  int64_t failed_allocation; /* after an OUT_OF_MEMORY stage: its allocation that failed */
  /* A re-plan's run: the runner limit its stages put in force on the device, that of the
   * stage they replace (their own, lower, limits are their meters'); 0: each stage's own. */
  int64_t device_limit;
  double wait_seconds; /* loom_plan_run_options.wait_seconds */
  /* loom_plan_run_buffers: the parameters are the caller's buffers, the stages hand out the
   * values the graph returns as buffers on every device (cpu0 included), leave their pools
   * filled for the next run, and return without waiting where they can (exec.h no_wait). */
  bool resident;
  int64_t allocations; /* every stage's, as their meters counted them */
} plan_run;

static loom_status check_devices(loom_context *ctx, const loom_plan *plan) {
  for (int32_t i = 0; i < loom_plan_stage_count(plan); i++) {
    loom_stage_info st;
    const loom__exec_device *dev;
    loom_status s = loom_plan_stage(plan, i, &st);
    if (!s && st.graph) s = stage_device(ctx, st.device, i, &dev);
    if (s) return s;
  }
  return LOOM_OK;
}

/* The run's values, the parameters bound to the caller's host tensors `inputs`, or (inputs
 * NULL) to the caller's buffers `in_bufs`. */
static loom_status run_init(plan_run *r, const loom_plan *plan, const loom_tensor *inputs,
                            loom_buffer *const *in_bufs) {
  memset(r, 0, sizeof *r);
  r->plan = plan;
  r->g = loom_plan_graph(plan);
  r->vals = loom__calloc((size_t)LOOM_MAX(r->g->n_values, 1), sizeof *r->vals);
  if (!r->vals) return loom__oom("the values between stages");
  for (int32_t v = 0; v < r->g->n_values; v++) r->vals[v].last_stage = r->vals[v].node = -1;
  for (int32_t p = 0; p < r->g->n_params; p++) {
    held_value *h = &r->vals[r->g->params[p]];
    if (inputs && !(in_bufs && in_bufs[p])) {
      h->t = inputs[p];
      continue;
    }
    h->t.type = r->g->values[r->g->params[p]].type;
    h->buffer = in_bufs[p];
    h->borrowed = true;
  }
  for (int32_t i = 0; i < loom_plan_stage_count(plan); i++) {
    loom_stage_info st;
    loom_plan_stage(plan, i, &st);
    for (int32_t k = 0; k < st.n_inputs; k++) r->vals[st.inputs[k]].last_stage = i;
  }
  for (int32_t i = 0; i < r->g->n_outputs; i++) r->vals[r->g->outputs[i]].last_stage = INT32_MAX;
  return LOOM_OK;
}

static void release_value(held_value *h) {
  if (h->owned) loom_tensor_deinit(&h->t);
  if (!h->borrowed) loom_buffer_free(h->buffer);
  memset(&h->t, 0, sizeof h->t);
  h->buffer = NULL;
  h->owned = h->borrowed = false;
}

/* Frees the values still held, then the pools of the nodes the stages ran on: what the run
 * cached there does not outlive it (as a single run's does not, exec.h); a resident run
 * leaves it for the next. */
static void run_deinit(plan_run *r) {
  if (r->vals)
    for (int32_t v = 0; v < r->g->n_values; v++) release_value(&r->vals[v]);
  for (int32_t i = 0; r->ctx && !r->resident && i < loom_plan_stage_count(r->plan); i++) {
    loom_stage_info st;
    const loom__exec_device *dev;
    if (loom_plan_stage(r->plan, i, &st) == LOOM_OK && st.graph &&
        loom__context_exec_device(r->ctx, st.device, &dev) == LOOM_OK)
      loom_mem_trim(dev->memory, dev->node);
  }
  loom__free(r->vals);
  memset(r, 0, sizeof *r);
}

/* The stage's parameters, from the values held: host tensors, or buffers (in_bufs[k]). */
static loom_status gather_inputs(plan_run *r, const loom_stage_info *st, int32_t index, loom_tensor *ins,
                                 loom_buffer **in_bufs) {
  for (int32_t k = 0; k < st->n_inputs; k++) {
    const held_value *h = &r->vals[st->inputs[k]];
    int64_t bytes = 0;
    loom_type_bytes(&r->g->values[st->inputs[k]].type, &bytes);
    in_bufs[k] = h->buffer;
    if (bytes > 0 && !h->t.data && !h->buffer) {
      char buf[32];
      return loom__error(LOOM_ERR_INTERNAL, "stage %d: its input '%s' was not made by an earlier stage",
                         (int)index, loom__value_label(r->g, st->inputs[k], buf, sizeof buf));
    }
    ins[k] = h->t;
  }
  return LOOM_OK;
}

/* Whether stage st reads plan value v. */
static bool stage_reads(const loom_stage_info *st, int32_t v) {
  for (int32_t k = 0; k < st->n_inputs; k++)
    if (st->inputs[k] == v) return true;
  return false;
}

/* Before a stage runs on a device: the held buffers it does not read that have a copy there
 * go to host memory, so the device holds only what the stage counts. The caller's buffers
 * stay where the caller put them (resident runs): moving them would undo what residency is
 * for, and they count in the node's limit, which the memory manager keeps anyway. */
static loom_status clear_device(plan_run *r, const loom_stage_info *st, const loom__exec_device *dev) {
  if (dev->backend->host_memory) return LOOM_OK;
  const loom__exec_device *cpu;
  loom_status s = loom__context_exec_device(r->ctx, "cpu0", &cpu);
  for (int32_t v = 0; !s && v < r->g->n_values; v++) {
    loom_buffer_node_info info;
    if (!r->vals[v].buffer || r->vals[v].borrowed || stage_reads(st, v) ||
        loom_buffer_node_info_get(r->vals[v].buffer, dev->node, &info) != LOOM_OK ||
        info.storage == LOOM_MEM_STORAGE_NONE)
      continue;
    s = loom_buffer_migrate(r->vals[v].buffer, cpu->node);
  }
  return s;
}

/* The bytes of the held values' copies on node. */
static int64_t held_bytes_on(const plan_run *r, int32_t node) {
  int64_t bytes = 0;
  for (int32_t v = 0; v < r->g->n_values; v++) {
    loom_buffer_node_info info;
    if (r->vals[v].buffer && loom_buffer_node_info_get(r->vals[v].buffer, node, &info) == LOOM_OK)
      bytes += info.allocated_bytes;
  }
  return bytes;
}

/* While stage `index` runs on `cur`, the next stage's inputs already held are brought to the
 * next stage's device, if that is another device (DESIGN.md: adaptive prefetch). The device
 * then holds at most its runner's limit: each value goes only while the bytes held there
 * stay within it (the next stage counts its inputs anyway). The memory manager's prefetch
 * policy decides (none: nothing moves) and never evicts for it; a hint it cannot follow is
 * dropped, the stage's own access making the copy later. */
static void prefetch_next(plan_run *r, int32_t index, const loom__exec_device *cur) {
  loom_stage_info next;
  const loom__exec_device *dev;
  if (index + 1 >= loom_plan_stage_count(r->plan) || loom_plan_stage(r->plan, index + 1, &next) != LOOM_OK ||
      !next.graph || loom__context_exec_device(r->ctx, next.device, &dev) != LOOM_OK ||
      dev->backend->host_memory || dev->node == cur->node)
    return;
  int64_t room = next.limit > 0 ? next.limit - held_bytes_on(r, dev->node) : INT64_MAX;
  loom_buffer *list[64];
  int32_t n = 0;
  for (int32_t k = 0; k < next.n_inputs && n < LOOM_ARRAY_SIZE(list); k++) {
    loom_buffer *b = r->vals[next.inputs[k]].buffer;
    loom_buffer_node_info info;
    loom_buffer_info bi;
    if (!b || loom_buffer_node_info_get(b, dev->node, &info) != LOOM_OK ||
        info.storage != LOOM_MEM_STORAGE_NONE || loom_buffer_get_info(b, &bi) != LOOM_OK || bi.bytes > room)
      continue;
    room -= bi.bytes;
    list[n++] = b;
  }
  if (n > 0) loom_mem_prefetch_hint(dev->memory, dev->node, list, n, 1, NULL);
}

static loom_status recover_stage(plan_run *r, int32_t index, const loom_stage_info *st,
                                 const loom__exec_device *dev, const loom_tensor *ins, loom_buffer **in_bufs,
                                 loom_tensor *outs, loom_buffer **out_bufs, loom_stage_stats *stats);

/* The node's refused allocations so far (loom_mem_node_stats.failed_allocations). */
static int64_t node_refusals(const loom__exec_device *dev) {
  loom_mem_node_stats ms;
  return dev && loom_mem_stats(dev->memory, dev->node, &ms) == LOOM_OK ? ms.failed_allocations : 0;
}

/* Runs stage `index` under its runner's limit; its outputs join the values held. */
static loom_status run_stage(plan_run *r, int32_t index, loom_stage_stats *stats) {
  loom_stage_info st;
  loom_status s = loom_plan_stage(r->plan, index, &st);
  if (s) return s;
  stats->estimated_peak_bytes = st.estimated_peak;
  stats->limit_bytes = st.limit;
  if (!st.graph) return LOOM_OK;
  /* The stage's tensors, buffer slots and flags in one allocation (tensors first, for
   * alignment). */
  size_t n_in = (size_t)LOOM_MAX(st.n_inputs, 1), n_out = (size_t)LOOM_MAX(st.n_outputs, 1);
  loom_tensor *ins =
      loom__calloc(1, (n_in + n_out) * (sizeof(loom_tensor) + sizeof(loom_buffer *)) + n_out * sizeof(bool));
  loom_tensor *outs = ins ? ins + n_in : NULL;
  loom_buffer **in_bufs = ins ? (loom_buffer **)(void *)(outs + n_out) : NULL;
  loom_buffer **out_bufs = ins ? in_bufs + n_in : NULL;
  bool *on_host = ins ? (bool *)(void *)(out_bufs + n_out) : NULL;
  if (!ins) s = loom__oom("a stage's inputs and outputs");
  if (!s) s = gather_inputs(r, &st, index, ins, in_bufs);
  loom__meter meter = {0};
  loom__exec_options opts = {0};
  if (!s) s = stage_device(r->ctx, st.device, index, &opts.device);
  double t0 = loom__now();
  if (!s) s = clear_device(r, &st, opts.device);
  if (!s) prefetch_next(r, index, opts.device);
  opts.input_buffers = in_bufs;
  opts.output_buffers = out_bufs;
  /* A resident run's cpu0 stages hand out the values the graph returns as buffers; values only
   * later stages read stay host tensors, outside the memory node, as in loom_plan_run (a
   * buffer would sit in host0 under the later stages' runner limits, uncounted by them). */
  for (int32_t k = 0; ins && k < st.n_outputs; k++)
    on_host[k] = r->resident && r->vals[st.outputs[k]].last_stage == INT32_MAX;
  opts.host_buffers = on_host;
  opts.keep_pool = opts.no_wait = r->resident;
  int64_t refusals = node_refusals(opts.device);
  bool ran = !s; /* recovery is for the stage's own memory, not the bookkeeping above */
  /* The runner limit is the device's, for every run sharing it: the stage waits for its turn
   * and its room there (run_admit.h), for its estimated peak. */
  loom__admit_spec admit = {.limit = r->device_limit > 0 ? r->device_limit : st.limit,
                            .estimate = st.estimated_peak,
                            .wait_seconds = r->wait_seconds};
  meter.limit = st.limit;
  if (!s) s = loom__execute_admitted(st.graph, &opts, ins, outs, &meter, &admit);
  if (ran) loom__hmm_trace_event(opts.device->memory, "stage", opts.device->node, t0);
  if (ran && s)
    loom__error_prefix("stage %d (%s, limit %lld bytes): ", (int)index, st.device, (long long)st.limit);
  stats->peak_bytes = meter.peak;
  r->allocations += meter.allocations;
  if (ran && s == LOOM_ERR_OUT_OF_MEMORY) {
    /* The memory manager refused the allocation the meter had just counted; where the meter
     * itself refused it, it was not counted. */
    r->failed_allocation = meter.allocations + (node_refusals(opts.device) > refusals ? 0 : 1);
    if (r->opts && r->opts->recover)
      s = recover_stage(r, index, &st, opts.device, ins, in_bufs, outs, out_bufs, stats);
  }
  stats->seconds = loom__now() - t0;
  for (int32_t k = 0; !s && k < st.n_outputs; k++) {
    held_value *h = &r->vals[st.outputs[k]];
    release_value(h);
    h->t = outs[k];
    h->buffer = out_bufs[k];
    h->owned = true;
    h->node = opts.device->node;
    memset(&outs[k], 0, sizeof outs[k]);
    if (h->last_stage <= index) release_value(h); /* nobody reads it (cannot happen by construction) */
  }
  /* Inputs whose last reader was this stage. */
  for (int32_t k = 0; !s && k < st.n_inputs; k++)
    if (r->vals[st.inputs[k]].last_stage == index) release_value(&r->vals[st.inputs[k]]);
  loom__free(ins); /* and outs, in_bufs, out_bufs */
  return s;
}

static loom_status copy_tensor(const loom_tensor *src, loom_tensor *dst) {
  loom_status s = loom__tensor_init_unzeroed(dst, &src->type);
  int64_t bytes = 0;
  if (!s) s = loom_type_bytes(&src->type, &bytes);
  if (!s && bytes > 0) memcpy(dst->data, src->data, (size_t)bytes);
  return s;
}

/* ---- recovery from out of memory (loom_plan_run_options.recover) ------------------------ */

/* The device's free memory as the memory manager counts it: its limit less what it holds,
 * the held values (after clear_device, the stage's own inputs, which it counts itself) not
 * counted. */
static int64_t device_free(const plan_run *r, const loom__exec_device *dev) {
  loom_mem_node_stats ms;
  if (loom_mem_stats(dev->memory, dev->node, &ms) != LOOM_OK) return INT64_MAX;
  return ms.limit - ms.in_use + held_bytes_on(r, dev->node);
}

/* Hands the re-plan's returned value k over as the stage's output k (outs[k], out_bufs[k]):
 * moved where the re-plan made it, else copied (one of the stage's inputs, or a value returned
 * twice, from its first place). */
static loom_status hand_over(plan_run *sub, int32_t k, loom_tensor *outs, loom_buffer **out_bufs) {
  int32_t v = sub->g->outputs[k], twin = -1;
  for (int32_t j = 0; j < k && twin < 0; j++)
    if (sub->g->outputs[j] == v) twin = j;
  held_value *h = &sub->vals[v];
  char buf[32];
  if (twin >= 0 && out_bufs[twin])
    return loom__error(LOOM_ERR_UNSUPPORTED, "the re-plan returns '%s', a device buffer, twice",
                       loom__value_label(sub->g, v, buf, sizeof buf));
  if (twin >= 0) return copy_tensor(&outs[twin], &outs[k]);
  if (h->owned || (h->buffer && !h->borrowed)) {
    outs[k] = h->t;
    out_bufs[k] = h->buffer;
    memset(&h->t, 0, sizeof h->t);
    h->buffer = NULL;
    h->owned = false;
    return LOOM_OK;
  }
  if (h->buffer)
    return loom__error(LOOM_ERR_UNSUPPORTED, "the re-plan returns its input '%s', a device buffer, as it is",
                       loom__value_label(sub->g, v, buf, sizeof buf));
  return copy_tensor(&h->t, &outs[k]);
}

/* Runs the re-plan `sub` of a stage from the stage's inputs (host tensors in `ins`, or the
 * buffers in_bufs, which stay the outer run's) and fills outs and out_bufs as loom__execute
 * fills them for the stage. The re-plan's stages do not recover themselves. */
static loom_status run_replan(plan_run *outer, const loom_stage_info *st, const loom_plan *sub,
                              const loom_tensor *ins, loom_buffer **in_bufs, loom_tensor *outs,
                              loom_buffer **out_bufs, loom_plan_recovery *rec) {
  plan_run r;
  loom_status s = run_init(&r, sub, ins, NULL);
  r.ctx = outer->ctx;
  /* What else the device holds (another run's stages, a program's own buffers) is no part of
   * the re-plan's limit: the device keeps the runner limit of the stage it replaces. */
  r.device_limit = st->limit;
  r.wait_seconds = outer->wait_seconds;
  for (int32_t p = 0; !s && p < r.g->n_params; p++) {
    r.vals[r.g->params[p]].buffer = in_bufs[p];
    r.vals[r.g->params[p]].borrowed = in_bufs[p] != NULL;
  }
  for (int32_t i = 0; !s && i < loom_plan_stage_count(sub); i++) {
    loom_stage_stats one = {0};
    s = run_stage(&r, i, &one);
    rec->peak_bytes = LOOM_MAX(rec->peak_bytes, one.peak_bytes);
  }
  if (s) {
    outer->failed_allocation = r.failed_allocation;
    loom__error_prefix("re-plan "); /* "re-plan stage 0 (...)": the re-plan's stage numbers */
  }
  int32_t made = 0;
  for (; !s && made < r.g->n_outputs; made++) s = hand_over(&r, made, outs, out_bufs);
  for (int32_t k = 0; s && k < made; k++) {
    loom_tensor_deinit(&outs[k]);
    loom_buffer_free(out_bufs[k]);
    out_bufs[k] = NULL;
  }
  run_deinit(&r);
  return s;
}

/* Re-plans stage st for rec->limit_bytes on its device and runs the re-plan in its place.
 * Its loops get smaller pieces; what still passes the limit is chunked. Where no plan fits
 * the limit (a step that cannot be cut) but the smallest pieces hold less than `ceiling`
 * (what the stage last failed with), the re-plan is made for what those hold, and
 * rec->limit_bytes says so. */
static loom_status replan_stage(plan_run *r, const loom_stage_info *st, int64_t ceiling,
                                const loom_tensor *ins, loom_buffer **in_bufs, loom_tensor *outs,
                                loom_buffer **out_bufs, loom_plan_recovery *rec) {
  loom_plan *sub = NULL;
  int64_t limit = rec->limit_bytes;
  loom_runner runner;
  memset(&runner, 0, sizeof runner);
  snprintf(runner.device, sizeof runner.device, "%s", st->device);
  runner.limit = limit;
  loom__restage how = {.refit = true, .optimize = r->opts->optimize, .ceiling = ceiling};
  loom_status s = loom__plan_restage(st->graph, &runner, &how, &sub, &rec->limit_bytes);
  if (s) {
    char lim[32];
    loom__error_prefix("re-planning for %s: ", loom__format_bytes(limit, lim, sizeof lim));
    return s;
  }
  rec->n_stages = loom_plan_stage_count(sub);
  for (int32_t i = 0; i < rec->n_stages; i++) {
    loom_stage_info info;
    if (loom_plan_stage(sub, i, &info) == LOOM_OK)
      rec->estimated_peak_bytes = LOOM_MAX(rec->estimated_peak_bytes, info.estimated_peak);
  }
  s = run_replan(r, st, sub, ins, in_bufs, outs, out_bufs, rec);
  loom_plan_destroy(sub);
  return s;
}

/* A new entry at the end of the log, zeroed; NULL when the log cannot grow. */
static loom_plan_recovery *log_push(recovery_log *log) {
  if (loom__grow((void **)&log->items, &log->cap, log->count + 1, sizeof *log->items)) return NULL;
  loom_plan_recovery *rec = &log->items[log->count++];
  memset(rec, 0, sizeof *rec);
  return rec;
}

/* The limit of try `t`: the device's free memory where it is below what the stage was planned
 * to hold (the first try) or below half the last limit tried (the later ones), else half of
 * that. */
static int64_t next_limit(int32_t t, int64_t last, int64_t free_bytes) {
  if (t == 1 && free_bytes < last) return free_bytes;
  return LOOM_MIN(free_bytes, last / 2);
}

/* Stage `index` failed with OUT_OF_MEMORY (the message is loom_last_error()): re-plans it for
 * less memory and runs the re-plan, up to recover_tries times (loom_plan_run_options). On
 * success outs and out_bufs hold the stage's outputs and stats the re-plan's figures. */
static loom_status recover_stage(plan_run *r, int32_t index, const loom_stage_info *st,
                                 const loom__exec_device *dev, const loom_tensor *ins, loom_buffer **in_bufs,
                                 loom_tensor *outs, loom_buffer **out_bufs, loom_stage_stats *stats) {
  if (st->limit <= 0) return LOOM_ERR_OUT_OF_MEMORY; /* no limit to lower: the error stands */
  char cause[256], tried[128] = "";
  snprintf(cause, sizeof cause, "%s", loom_last_error());
  /* What the stage meant to hold: halving a limit far above it would change nothing. */
  int64_t last = st->estimated_peak > 0 ? LOOM_MIN(st->limit, st->estimated_peak) : st->limit;
  int32_t made = 0;
  loom_status s = LOOM_ERR_OUT_OF_MEMORY;
  for (int32_t t = 1; t <= r->opts->recover_tries; t++) {
    loom_plan_recovery *rec = log_push(r->log);
    if (!rec) return loom__oom("the record of a recovery");
    made++;
    rec->stage = index;
    snprintf(rec->device, sizeof rec->device, "%s", st->device);
    rec->attempt = t;
    rec->tries = r->opts->recover_tries;
    rec->allocation = r->failed_allocation;
    snprintf(rec->error, sizeof rec->error, "%s", cause);
    /* What can go goes: held values the stage does not read, and the pool's cache. */
    s = clear_device(r, st, dev);
    if (!s) s = loom_mem_trim(dev->memory, dev->node);
    if (s) break;
    rec->free_bytes = device_free(r, dev);
    rec->limit_bytes = next_limit(t, last, rec->free_bytes);
    s = rec->limit_bytes > 0 ? replan_stage(r, st, last, ins, in_bufs, outs, out_bufs, rec)
                             : loom__error(LOOM_ERR_OUT_OF_MEMORY, "%s has no memory free", st->device);
    char lim[32];
    loom__format_bytes(rec->limit_bytes, lim, sizeof lim);
    snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s%s", t > 1 ? ", " : "", lim);
    if (!s) {
      rec->succeeded = true;
      stats->limit_bytes = rec->limit_bytes;
      stats->estimated_peak_bytes = rec->estimated_peak_bytes;
      stats->peak_bytes = rec->peak_bytes;
      return LOOM_OK;
    }
    /* A re-plan that could not be made for this limit cannot be for a lower one. */
    if (s != LOOM_ERR_OUT_OF_MEMORY || rec->n_stages == 0) break;
    snprintf(cause, sizeof cause, "%s", loom_last_error());
    last = rec->limit_bytes;
  }
  if (s != LOOM_ERR_OUT_OF_MEMORY) {
    loom__error_prefix("stage %d (%s): recovering from out of memory: ", (int)index, st->device);
    return s;
  }
  snprintf(cause, sizeof cause, "%s", loom_last_error());
  return loom__error(
      LOOM_ERR_OUT_OF_MEMORY,
      "stage %d (%s): out of memory, and recovery failed after %d tr%s (re-planned for %s): %s", (int)index,
      st->device, (int)made, made == 1 ? "y" : "ies", tried, cause);
}

/* Hands the returned values to the caller: moved where the plan owns them, else copied (an
 * input returned as is, or a value returned twice). */
static loom_status deliver_outputs(plan_run *r, loom_tensor *outputs, int32_t n_outputs) {
  for (int32_t i = 0; i < n_outputs; i++) {
    int32_t v = r->g->outputs[i];
    int32_t twin = -1;
    for (int32_t j = 0; j < i && twin < 0; j++)
      if (r->g->outputs[j] == v) twin = j;
    held_value *h = &r->vals[v];
    loom_status s;
    if (twin >= 0) {
      s = copy_tensor(&outputs[twin], &outputs[i]);
    } else if (h->buffer) { /* read back from where its stage left it */
      int64_t bytes = 0;
      s = loom__tensor_init_unzeroed(&outputs[i], &h->t.type);
      if (!s) s = loom_type_bytes(&h->t.type, &bytes);
      if (!s) s = loom_buffer_read(h->buffer, 0, outputs[i].data, bytes);
      if (!s) release_value(h);
    } else if (h->owned) {
      outputs[i] = h->t;
      memset(&h->t, 0, sizeof h->t);
      h->owned = false;
      s = LOOM_OK;
    } else {
      int64_t bytes = 0;
      loom_type_bytes(&r->g->values[v].type, &bytes);
      char buf[32];
      s = (bytes > 0 && !h->t.data) ? loom__error(LOOM_ERR_INTERNAL, "output '%s' was made by no stage",
                                                  loom__value_label(r->g, v, buf, sizeof buf))
                                    : copy_tensor(&h->t, &outputs[i]);
    }
    if (s) return s;
  }
  return LOOM_OK;
}

static loom_status check_args(loom_context *ctx, const loom_plan *plan, const loom_tensor *inputs,
                              int32_t n_inputs, loom_tensor *outputs, int32_t n_outputs) {
  if (!ctx || !plan || (n_outputs > 0 && !outputs) || (n_inputs > 0 && !inputs))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_plan_run: NULL argument");
  const loom_graph *g = loom_plan_graph(plan);
  if (n_outputs != g->n_outputs)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "graph '%s' returns %d value%s, the caller has room for %d",
                       g->name, (int)g->n_outputs, g->n_outputs == 1 ? "" : "s", (int)n_outputs);
  loom_status s = loom__check_inputs(g, inputs, n_inputs);
  return s ? s : check_devices(ctx, plan);
}

static loom_status deliver_buffers(plan_run *r, loom_buffer **outputs, int32_t n_outputs);

/* Runs every stage of the plan on the caller's host tensors (inputs, outputs) or buffers
 * (in_bufs, out_bufs: a resident run), arguments already checked, recovering from out of
 * memory where opts say so, and fills stats. */
static loom_status run_all(loom_context *ctx, const loom_plan *plan, const loom_plan_run_options *opts,
                           bool resident, const loom_tensor *inputs, loom_buffer *const *in_bufs,
                           loom_tensor *outputs, loom_buffer **out_bufs, int32_t n_outputs,
                           loom_plan_stats *stats) {
  recovery_log log = {0};
  int32_t n_stages = loom_plan_stage_count(plan);
  loom_stage_stats *per = loom__calloc((size_t)LOOM_MAX(n_stages, 1), sizeof *per);
  plan_run r;
  memset(&r, 0, sizeof r);
  loom_status s = per ? run_init(&r, plan, inputs, in_bufs) : loom__oom("plan statistics");
  r.ctx = ctx;
  r.opts = opts && opts->recover ? opts : NULL;
  r.wait_seconds = opts ? opts->wait_seconds : 0;
  r.log = &log;
  r.resident = resident;
  double t0 = loom__now();
  for (int32_t i = 0; !s && i < n_stages; i++) s = run_stage(&r, i, &per[i]);
  if (!s) s = resident ? deliver_buffers(&r, out_bufs, n_outputs) : deliver_outputs(&r, outputs, n_outputs);
  for (int32_t i = 0; s && i < n_outputs; i++) {
    if (outputs) loom_tensor_deinit(&outputs[i]);
    if (out_bufs) {
      loom_buffer_free(out_bufs[i]);
      out_bufs[i] = NULL;
    }
  }
  int64_t allocations = r.allocations;
  run_deinit(&r);
  if (stats && per) {
    stats->n_stages = n_stages;
    stats->stages = per;
    for (int32_t i = 0; i < n_stages; i++) stats->peak_bytes = LOOM_MAX(stats->peak_bytes, per[i].peak_bytes);
    stats->allocations = allocations;
    stats->seconds = loom__now() - t0;
    stats->n_recoveries = log.count;
    stats->recoveries = log.items;
    log.items = NULL;
    per = NULL;
  }
  loom__free(per);
  loom__free(log.items);
  return s;
}

void loom_plan_run_options_init(loom_plan_run_options *opts) {
  if (!opts) return;
  memset(opts, 0, sizeof *opts);
  opts->recover_tries = 3;
}

loom_status loom_plan_run(loom_context *ctx, const loom_plan *plan, const loom_tensor *inputs,
                          int32_t n_inputs, loom_tensor *outputs, int32_t n_outputs, loom_plan_stats *stats) {
  return loom_plan_run_with_options(ctx, plan, NULL, inputs, n_inputs, outputs, n_outputs, stats);
}

loom_status loom_plan_run_with_options(loom_context *ctx, const loom_plan *plan,
                                       const loom_plan_run_options *opts, const loom_tensor *inputs,
                                       int32_t n_inputs, loom_tensor *outputs, int32_t n_outputs,
                                       loom_plan_stats *stats) {
  if (stats) memset(stats, 0, sizeof *stats);
  for (int32_t i = 0; outputs && i < n_outputs; i++) memset(&outputs[i], 0, sizeof outputs[i]);
  loom_status s = check_args(ctx, plan, inputs, n_inputs, outputs, n_outputs);
  if (s) return s;
  if (opts && opts->recover && (opts->recover_tries < 1 || opts->recover_tries > 8))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_plan_run: recover_tries is %d, not 1 to 8",
                       (int)opts->recover_tries);
  return run_all(ctx, plan, opts, false, inputs, NULL, outputs, NULL, n_outputs, stats);
}

/* ---- resident runs ------------------------------------------------------------------------- */

/* Why the caller's buffer b cannot be parameter p (a message into why), or NULL when it can:
 * a buffer of the context's manager m, of the parameter's type (typed), or dtype and bytes
 * (untyped). Nothing is formatted when it fits: resident runs check every call. */
static const char *buffer_misfit(const loom_graph *g, int32_t p, const loom_buffer *b,
                                 const loom_mem_manager *m, char *why, size_t size) {
  const loom_type *want = &g->values[g->params[p]].type;
  if (!b) return "buffer is NULL";
  if (b->m != m) /* never changes: read without the lock */
    return "the buffer is not of the context's memory manager (loom_context_memory)";
  loom_type got;
  bool typed = false;
  int64_t want_bytes = 0;
  loom_buffer_get_type(b, &got, &typed);
  loom_type_bytes(want, &want_bytes);
  char a[LOOM_TYPE_STRING_MAX], w[LOOM_TYPE_STRING_MAX];
  if (typed && !loom_type_equal(&got, want)) {
    snprintf(why, size, "its buffer is %s, the graph takes %s", loom_type_format(&got, a, sizeof a),
             loom_type_format(want, w, sizeof w));
    return why;
  }
  if (!typed && (got.dtype != want->dtype || b->bytes != want_bytes)) {
    snprintf(why, size, "its buffer (no type set) holds %lld bytes of %s, the graph takes %s (%lld bytes)",
             (long long)b->bytes, loom_dtype_name(got.dtype), loom_type_format(want, w, sizeof w),
             (long long)want_bytes);
    return why;
  }
  return NULL;
}

/* Checks the caller's buffers against the graph's parameters: count, manager, type. */
static loom_status check_buffers(loom_context *ctx, const loom_graph *g, loom_buffer *const *inputs,
                                 int32_t n_inputs) {
  if (n_inputs != g->n_params)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "graph '%s' takes %d input%s, got %d", g->name,
                       (int)g->n_params, g->n_params == 1 ? "" : "s", (int)n_inputs);
  loom_mem_manager *m = NULL;
  loom_status s = loom_context_memory(ctx, &m);
  for (int32_t p = 0; !s && p < n_inputs; p++) {
    char why[2 * LOOM_TYPE_STRING_MAX + 96], label[32];
    const char *misfit = buffer_misfit(g, p, inputs[p], m, why, sizeof why);
    if (misfit)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "input %d (%s): %s", (int)p + 1,
                         loom__value_label(g, g->params[p], label, sizeof label), misfit);
  }
  return s;
}

/* A new buffer of `type` on node, filled from host memory at src (NULL for no bytes). */
static loom_status buffer_from_host(plan_run *r, int32_t node, const loom_type *type, const void *src,
                                    loom_buffer **out) {
  loom_mem_manager *m = NULL;
  int64_t bytes = 0;
  *out = NULL;
  loom_status s = loom_context_memory(r->ctx, &m);
  if (!s) s = loom_type_bytes(type, &bytes);
  /* The executor's flags, so that the pool serves the next run with what this one gave back;
   * an empty buffer takes a size class (devices refuse empty allocations). */
  uint32_t flags = bytes > 0 ? LOOM_MEM_DEVICE_LOCAL | LOOM_MEM_EXACT_SIZE : LOOM_MEM_DEVICE_LOCAL;
  if (!s) s = loom_buffer_allocate(m, bytes, type->dtype, node, flags, out);
  if (!s && bytes > 0) s = loom_buffer_write(*out, 0, src, bytes);
  if (!s) {
    loom__buffer_type_set(*out, type);
    return LOOM_OK;
  }
  loom_buffer_free(*out);
  *out = NULL;
  return s;
}

/* A copy of buffer src, typed `type`, on src's allocation node (read through a host map). */
static loom_status buffer_copy(plan_run *r, loom_buffer *src, const loom_type *type, loom_buffer **out) {
  void *ptr = NULL;
  *out = NULL;
  loom_status s = loom_buffer_map(src, LOOM_ACCESS_READ, &ptr);
  if (s) return s;
  s = buffer_from_host(r, src->node, type, ptr, out);
  loom_status u = loom_buffer_unmap(src, ptr);
  if (!s && u) {
    loom_buffer_free(*out);
    *out = NULL;
    s = u;
  }
  return s;
}

/* Hands the returned values to the caller as buffers: a stage's result buffer is moved out;
 * a host result (a cpu0 stage's view, a loop's streamed result), a parameter returned as is
 * and a value returned twice are copied into new buffers on the node that holds them. */
static loom_status deliver_buffers(plan_run *r, loom_buffer **outputs, int32_t n_outputs) {
  loom_status s = LOOM_OK;
  for (int32_t i = 0; !s && i < n_outputs; i++) {
    int32_t v = r->g->outputs[i];
    const loom_type *type = &r->g->values[v].type;
    int32_t twin = -1;
    for (int32_t j = 0; j < i && twin < 0; j++)
      if (r->g->outputs[j] == v) twin = j;
    held_value *h = &r->vals[v];
    if (twin >= 0) {
      s = buffer_copy(r, outputs[twin], type, &outputs[i]);
    } else if (h->buffer && !h->borrowed) {
      outputs[i] = h->buffer;
      h->buffer = NULL;
      loom__buffer_type_set(outputs[i], type);
    } else if (h->buffer) {
      s = buffer_copy(r, h->buffer, type, &outputs[i]);
    } else {
      int64_t bytes = 0;
      loom_type_bytes(type, &bytes);
      char buf[32];
      const loom__exec_device *cpu = NULL;
      if (bytes > 0 && !h->t.data)
        s = loom__error(LOOM_ERR_INTERNAL, "output '%s' was made by no stage",
                        loom__value_label(r->g, v, buf, sizeof buf));
      else if (h->node < 0) /* an empty parameter returned: it lives nowhere */
        s = loom__context_exec_device(r->ctx, "cpu0", &cpu);
      if (!s) s = buffer_from_host(r, h->node >= 0 ? h->node : cpu->node, type, h->t.data, &outputs[i]);
    }
    if (s) loom__error_prefix("output %d: ", (int)i + 1);
  }
  return s;
}

loom_status loom_plan_run_buffers(loom_context *ctx, const loom_plan *plan, loom_buffer *const *inputs,
                                  int32_t n_inputs, loom_buffer **outputs, int32_t n_outputs,
                                  loom_plan_stats *stats) {
  if (stats) memset(stats, 0, sizeof *stats);
  for (int32_t i = 0; outputs && i < n_outputs; i++) outputs[i] = NULL;
  if (!ctx || !plan || (n_outputs > 0 && !outputs) || (n_inputs > 0 && !inputs))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_plan_run_buffers: NULL argument");
  const loom_graph *g = loom_plan_graph(plan);
  if (n_outputs != g->n_outputs)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "graph '%s' returns %d value%s, the caller has room for %d",
                       g->name, (int)g->n_outputs, g->n_outputs == 1 ? "" : "s", (int)n_outputs);
  loom_status s = check_buffers(ctx, g, inputs, n_inputs);
  if (!s) s = check_devices(ctx, plan);
  if (s) return s;
  return run_all(ctx, plan, NULL, true, NULL, inputs, NULL, outputs, n_outputs, stats);
}

loom_status loom__plan_run_mixed(loom_context *ctx, const loom_plan *plan, const loom_tensor *inputs,
                                 loom_buffer *const *in_bufs, loom_tensor *outputs, loom_buffer **out_bufs,
                                 int32_t n_outputs, loom_plan_stats *stats) {
  if (stats) memset(stats, 0, sizeof *stats);
  for (int32_t i = 0; out_bufs && i < n_outputs; i++) out_bufs[i] = NULL;
  for (int32_t i = 0; outputs && !out_bufs && i < n_outputs; i++) memset(&outputs[i], 0, sizeof outputs[i]);
  const loom_graph *g = loom_plan_graph(plan);
  if (n_outputs != g->n_outputs || (n_outputs > 0 && !outputs && !out_bufs))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "graph '%s' returns %d values, the caller has room for %d",
                       g->name, (int)g->n_outputs, (int)n_outputs);
  loom_status s = check_devices(ctx, plan);
  if (s) return s;
  return run_all(ctx, plan, NULL, out_bufs != NULL, inputs, in_bufs, out_bufs ? NULL : outputs, out_bufs,
                 n_outputs, stats);
}

void loom_plan_stats_deinit(loom_plan_stats *stats) {
  if (!stats) return;
  loom__free(stats->stages);
  loom__free(stats->recoveries);
  memset(stats, 0, sizeof *stats);
}
