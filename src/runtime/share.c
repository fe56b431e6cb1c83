/* The shared runner (loom/share.h): a plan cut into stages (by branch, share_cut.h, or around
 * its top-level loops), run by one worker thread per device for the whole run: each takes a
 * ready stage to run whole on its device, or a range of a shared loop's pieces; the ranges'
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
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "hmm/hmm.h"
#include "ir/loop_range.h"
#include "ir/rebuild.h"
#include "loom/share.h"
#include "runtime/combine.h"
#include "runtime/context.h"
#include "runtime/exec.h"
#include "runtime/run_admit.h"
#include "runtime/share_cut.h"
#include "runtime/stage_history.h"
#include "sched/sched_impl.h"

#define RANGES_PER_DEVICE_DEFAULT 6
/* A free worker whose device would finish later waits at most this long before it looks again
 * (a change wakes it sooner). */
#define DMDA_WAIT_SECONDS 0.05
/* A range's measured time per piece moves the device's rate this far from the one before (the
 * first sets it): one range, slowed by a neighbour's load, does not decide the rest. */
#define RATE_WEIGHT 0.5
/* Sharing chunks a graph to its unchunked peak over this many times the devices: pieces
 * enough that each device gets several ranges of several pieces. */
#define PIECES_PER_DEVICE 8

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
  loom_plan_stats_deinit(&stats->plan);
  memset(stats, 0, sizeof *stats);
}

/* ---- devices ------------------------------------------------------------------------------ */

/* The limit `limits` gives device id (the smallest of the runners naming it), or `fallback`. */
static int64_t limit_of(const char *id, const loom_runner *limits, int32_t n_limits, int64_t fallback) {
  int64_t best = 0;
  for (int32_t i = 0; limits && i < n_limits; i++)
    if (strcasecmp(limits[i].device, id) == 0 && limits[i].limit > 0 && (best == 0 || limits[i].limit < best))
      best = limits[i].limit;
  return best > 0 ? best : fallback;
}

static loom_status add_runner(loom_context *ctx, const char *id, const loom_runner *limits, int32_t n_limits,
                              loom_runner *list, int32_t *n) {
  int32_t index = -1;
  loom_device_info info;
  loom_status s = loom_context_find_device(ctx, id, &index);
  if (!s) s = loom_context_device_info(ctx, index, &info);
  if (s) return s;
  for (int32_t i = 0; i < *n; i++)
    if (strcasecmp(list[i].device, info.id) == 0)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "device %s is named twice", info.id);
  loom_runner *r = &list[(*n)++];
  memset(r, 0, sizeof *r);
  snprintf(r->device, sizeof r->device, "%s", info.id);
  r->limit = limit_of(info.id, limits, n_limits, info.memory_bytes > 0 ? info.memory_bytes : INT64_MAX / 4);
  return LOOM_OK;
}

/* A device other than cpu0 that computes on the host's cores (an OpenCL CPU device, PoCL's):
 * beside cpu0 it adds no compute (auto, dmda's ranges and loom_share_plan_runners leave it out). */
static bool on_host_cores(const loom_device_info *info) {
  return strcasecmp(info->id, "cpu0") != 0 && info->kind == LOOM_DEVICE_CPU;
}

/* "auto": cpu0 first, then every other device a backend of this build runs, except OpenCL
 * devices of kind CPU (PoCL's): they compute on the host's cores, which cpu0 already keeps
 * busy, so beside it they only take cores from it (on 2 cores cpu0 with PoCL's two devices ran
 * kNN in twice the time cpu0 alone took), and a plan cut for devices that take no range is
 * cut for nothing. A list that names them runs them, under eager; dmda gives them no range
 * beside cpu0 (worker's host_cores). */
static loom_status auto_runners(loom_context *ctx, const loom_runner *limits, int32_t n_limits,
                                loom_runner *list, int32_t *n) {
  loom_status s = add_runner(ctx, "cpu0", limits, n_limits, list, n);
  for (int32_t i = 0; !s && i < loom_context_device_count(ctx); i++) {
    loom_device_info info;
    const loom__exec_device *dev;
    if (loom_context_device_info(ctx, i, &info) || strcasecmp(info.id, "cpu0") == 0 || on_host_cores(&info))
      continue;
    if (loom__context_exec_device(ctx, info.id, &dev) == LOOM_OK)
      s = add_runner(ctx, info.id, limits, n_limits, list, n);
  }
  return s;
}

static loom_status list_runners(loom_context *ctx, const char *devices, const loom_runner *limits,
                                int32_t n_limits, loom_runner *list, int32_t *n) {
  const char *p = devices;
  while (*p) {
    size_t len = strcspn(p, ",");
    char id[32];
    if (len == 0 || len >= sizeof id)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "devices '%s': an empty or overlong id at column %d",
                         devices, (int)(p - devices) + 1);
    snprintf(id, sizeof id, "%.*s", (int)len, p);
    const loom__exec_device *dev;
    loom_status s = loom__context_exec_device(ctx, id, &dev);
    if (!s) s = add_runner(ctx, id, limits, n_limits, list, n);
    if (s) return s;
    p += len + (p[len] == ',');
  }
  return LOOM_OK;
}

loom_status loom_share_runners(loom_context *ctx, const char *devices, const loom_runner *limits,
                               int32_t n_limits, loom_runner **out_runners, int32_t *out_count) {
  if (out_runners) *out_runners = NULL;
  if (out_count) *out_count = 0;
  if (!ctx || !out_runners || !out_count)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_share_runners: NULL argument");
  if (!devices) devices = "auto";
  int32_t cap = loom_context_device_count(ctx) + 1, n = 0;
  loom_runner *list = malloc(sizeof *list * (size_t)cap);
  if (!list) return loom__oom("the devices' runners");
  loom_status s = strcmp(devices, "auto") == 0 ? auto_runners(ctx, limits, n_limits, list, &n)
                  : *devices                   ? list_runners(ctx, devices, limits, n_limits, list, &n)
                             : loom__error(LOOM_ERR_INVALID_ARGUMENT, "devices: an empty list");
  if (s) {
    loom__error_prefix("devices '%s': ", devices);
    free(list);
    return s;
  }
  *out_runners = list;
  *out_count = n;
  return LOOM_OK;
}

/* ---- planning for several devices ------------------------------------------------------------ */

/* Whether device `id` computes on the host's cores beside cpu0. */
static loom_status computes_on_host_cores(loom_context *ctx, const char *id, bool *out) {
  int32_t index = 0;
  loom_device_info info;
  loom_status s = loom_context_find_device(ctx, id, &index);
  if (!s) s = loom_context_device_info(ctx, index, &info);
  if (!s) *out = on_host_cores(&info);
  return s;
}

loom_status loom_share_plan_runners(loom_context *ctx, const loom_runner *runners, int32_t n,
                                    loom_sched_policy policy, loom_runner *out, int32_t *out_count,
                                    char *left_out, size_t left_out_size) {
  if (left_out && left_out_size) left_out[0] = '\0';
  if (out_count) *out_count = 0;
  if (!ctx || !runners || !out || !out_count || n < 1 || (left_out && !left_out_size))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_share_plan_runners: NULL argument or no runners");
  bool drop = policy == LOOM_SCHED_DMDA && strcasecmp(runners[0].device, "cpu0") == 0;
  size_t at = 0;
  for (int32_t i = 0; i < n; i++) {
    bool host = false;
    loom_status s = drop ? computes_on_host_cores(ctx, runners[i].device, &host) : LOOM_OK;
    if (s) return s;
    if (!host) {
      out[(*out_count)++] = runners[i];
      continue;
    }
    if (left_out && at < left_out_size)
      at += (size_t)snprintf(left_out + at, left_out_size - at, "%s%s", at ? "," : "", runners[i].device);
  }
  return LOOM_OK;
}

static bool has_loop(const loom_graph *g) {
  for (int32_t i = 0; i < g->n_ops; i++)
    if (g->ops[i].loop) return true;
  return false;
}

/* The estimated peak of g rewritten with neither chunking nor fusion: what the whole space
 * holds, which the pieces divide. */
static loom_status unchunked_peak(const loom_graph *graph, const loom_optimize_options *opts, int64_t *out) {
  loom_optimize_options o = *opts;
  const char **off = loom__malloc(sizeof *off * (size_t)(opts->n_disabled + 1));
  if (!off) return loom__oom("the rewrites' names");
  for (int32_t i = 0; i < opts->n_disabled; i++) off[i] = opts->disabled[i];
  off[opts->n_disabled] = "fuse";
  o.disabled = off;
  o.n_disabled = opts->n_disabled + 1;
  o.limit = 0;
  o.fused_runs = NULL;
  loom_graph *g = NULL;
  loom_estimate e;
  memset(&e, 0, sizeof e);
  loom_status s = loom_graph_optimize(graph, &o, &g, NULL);
  if (!s) s = loom_graph_estimate(g, NULL, &e);
  if (!s) *out = e.peak_bytes;
  loom_estimate_deinit(&e);
  loom_graph_destroy(g);
  loom__free(off);
  return s;
}

/* The graph chunked for sharing: every runner at `limit`, chunk before fuse. */
static loom_status chunked_for_sharing(const loom_graph *graph, const loom_runner *runners, int32_t n,
                                       const loom_optimize_options *opts, int64_t limit, loom_graph **out,
                                       loom_rewrite_report *report) {
  loom_runner *small = loom__malloc(sizeof *small * (size_t)n);
  if (!small) return loom__oom("the runners");
  for (int32_t i = 0; i < n; i++) {
    small[i] = runners[i];
    small[i].limit = limit;
  }
  loom_optimize_options o = *opts;
  o.fused_runs = NULL;
  char note[256] = "";
  loom_status s = loom_graph_optimize_for_runners(graph, small, n, &o, out, report, note, sizeof note);
  loom__free(small);
  if (!s && !has_loop(*out)) {
    loom_graph_destroy(*out);
    *out = NULL;
    return loom__error(LOOM_ERR_UNSUPPORTED, "chunking to %lld bytes made no loop%s%s", (long long)limit,
                       note[0] ? ": " : "", note);
  }
  return s;
}

loom_status loom_graph_optimize_for_sharing(const loom_graph *graph, const loom_runner *runners,
                                            int32_t n_runners, const loom_optimize_options *opts,
                                            loom_graph **out_graph, loom_rewrite_report *report, char *note,
                                            size_t note_size) {
  if (note && note_size) note[0] = '\0';
  if (out_graph) *out_graph = NULL;
  if (!graph || !out_graph || (n_runners > 0 && !runners))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_optimize_for_sharing: NULL argument");
  loom_optimize_options defaults;
  loom_optimize_options_init(&defaults);
  if (!opts) opts = &defaults;
  if (n_runners > 1) {
    int64_t peak = 0, smallest = INT64_MAX;
    for (int32_t i = 0; i < n_runners; i++) smallest = LOOM_MIN(smallest, runners[i].limit);
    loom_rewrite_report mine = {0};
    loom_status s = unchunked_peak(graph, opts, &peak);
    /* Fewer, larger pieces where the smallest do not fit (what a piece holds beside its slice,
     * an operand read whole, may pass the limit of the finest cut). */
    for (int64_t div = PIECES_PER_DEVICE * (int64_t)n_runners; !s; div /= 4) {
      int64_t limit = LOOM_MAX(LOOM_MIN(smallest, peak / div), 1);
      loom_rewrite_report_deinit(&mine);
      s = chunked_for_sharing(graph, runners, n_runners, opts, limit, out_graph, &mine);
      if (!s || div < 4 || limit == smallest) break;
      s = LOOM_OK;
    }
    if (!s) {
      if (report) {
        loom_rewrite_report_deinit(report);
        *report = mine;
      } else {
        loom_rewrite_report_deinit(&mine);
      }
      return LOOM_OK;
    }
    loom_rewrite_report_deinit(&mine);
    if (note && note_size)
      snprintf(note, note_size, "not chunked for sharing (%s): planned as for one device", loom_last_error());
  }
  char inner[256] = "";
  loom_status s = loom_graph_optimize_for_runners(graph, runners, n_runners, opts, out_graph, report, inner,
                                                  sizeof inner);
  if (!s && inner[0] && note && note_size && !note[0]) snprintf(note, note_size, "%s", inner);
  return s;
}

/* ---- the run's state ------------------------------------------------------------------------------ */

typedef struct share_run share_run;
typedef struct shared_loop shared_loop;

/* One device's worker: a host thread feeding the device's in-order queue, for the whole run. */
typedef struct worker {
  share_run *run;
  int32_t index;
  const loom__exec_device *dev;
  loom_runner runner;
  loom_share_device_stats *stats;
  /* A device other than cpu0 that computes on the host's cores (an OpenCL CPU device, PoCL's):
   * beside cpu0, which keeps every core busy already, it adds no compute, only takes cores from
   * cpu0 (on 2 cores cpu0 with PoCL's two devices ran kNN in twice cpu0's time alone), so dmda
   * gives it no work where cpu0 is one of the run's devices. */
  bool host_cores;
  bool is_cpu0;
  bool busy;         /* running a task */
  double busy_until; /* when its task is expected done (now where nothing says) */
  pthread_t thread;
  bool started;
} worker;

/* What one device knows of one shared loop. */
typedef struct lane {
  double rate;   /* seconds per piece: model, then measured; 0 unknown */
  bool measured; /* rate comes from its own ranges */
  bool eligible; /* its limit holds a range, and the policy gives it ranges */
  int32_t ranges;
} lane;

/* A loop stage whose pieces the devices share. */
struct shared_loop {
  const loom_graph *sg; /* the stage's graph: the loop, beside sources and views */
  int32_t op, stage;
  loom_tensor *operands;   /* the loop's, in operand order: the stage's inputs, or made[] */
  loom_tensor *made;       /* the operands the stage makes (owned) */
  loom_tensor *params;     /* the stage's inputs on the host: its ins, or read back (read[k]) */
  bool *read;              /* params[k] was read back from a device's buffer (owned) */
  int64_t trips, chunk;    /* pieces; pieces per range */
  int64_t next;            /* the first piece no range has taken */
  int32_t n_ranges, n_out; /* ranges taken so far */
  int32_t running;         /* ranges being run */
  loom__partial *parts;    /* per range taken: its pieces and results (up to trips of them) */
  loom_tensor *results;    /* trips x n_out: range r's at r * n_out */
  lane *lanes;             /* per worker */
};

typedef enum stage_state {
  STAGE_WAITING, /* for stages it reads from */
  STAGE_READY,
  STAGE_BUSY,   /* run whole by a worker, or a loop being opened or combined */
  STAGE_SHARED, /* a loop whose ranges the workers take */
  STAGE_DONE,
} stage_state;

typedef struct stage {
  int32_t index;
  loom_stage_info st;
  stage_state state;
  int32_t loop_op; /* the loop the devices share; -1: run whole */
  shared_loop *L;  /* while shared */
  loom_tensor *ins, *outs;
  /* per input: the buffer holding it where an earlier stage left it on its device (ins[k] then
   * gives its type); per output: the buffer a whole stage on a device hands it out in */
  loom_buffer **in_bufs, **out_bufs;
  double *seconds;    /* per worker: expected seconds from the models, transfers included; NULL: none */
  uint64_t footprint; /* of its graph: its measured times in the context's history */
} stage;

/* A value between stages: a host tensor, the caller's or ours. */
typedef struct held {
  loom_tensor t;    /* a host tensor; or, with buf, only the value's type */
  loom_buffer *buf; /* where a whole stage on a device left it, resident there: the next
                     * stages read it from there (the memory manager copies it where they
                     * run, ordered behind the work that made it) */
  bool owned;
  bool returned;    /* a graph output: kept to the end */
  int32_t readers;  /* stages that read it and are not done */
  int32_t producer; /* the stage making it; -1: a parameter */
} held;

struct share_run {
  loom_context *ctx;
  const loom_share_options *opts;
  const loom_graph *g; /* the graph cut: the plan's, or the branch cut's reordering */
  loom_plan *cut;
  held *vals;
  worker *workers;
  int32_t n_workers;
  bool cpu0_runs; /* cpu0 is one of the devices */
  loom_share_stats *stats;
  loom_sched_platform *models; /* every device's model, where each has one; else NULL */
  stage *stages;
  int32_t n_stages, n_done;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool failed;
  loom_status status;
  char error[1024];
};

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
static double free_at(const worker *w, double now) {
  return w->busy ? fmax(now, w->busy_until) : now;
}

/* Whether a device other than w's is running something. */
static bool others_busy(const share_run *r, const worker *w) {
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
    double at = free_at(e, now);
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
static int32_t claim_range(share_run *r, shared_loop *L, worker *w, bool waited, double now) {
  lane *ln = &L->lanes[w->index];
  if (!ln->eligible || L->next >= L->trips) return -1;
  if (r->opts->policy == LOOM_SCHED_DMDA && !dmda_takes(r, L, w, now) && !(waited && !others_busy(r, w)))
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
static loom_status run_range(shared_loop *L, worker *w, int32_t c, int64_t *peak) {
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
static loom_status combine_stage(shared_loop *L, loom_tensor *outs) {
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
static bool lone_loop(const loom_graph *sg, int32_t *op) {
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

static void loop_free(shared_loop *L) {
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
static loom_status loop_open(share_run *r, stage *st, shared_loop **out) {
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
    loop_free(L);
    return s;
  }
  *out = L;
  return LOOM_OK;
}

/* ---- stages ------------------------------------------------------------------------------------ */

/* Whether w may run stage st whole: under dmda, beside cpu0, not a device on the host's cores;
 * and a device whose limit holds the stage's estimate, where any does. */
static bool stage_eligible(const share_run *r, const worker *w, const stage *st) {
  if (r->opts->policy == LOOM_SCHED_DMDA && r->cpu0_runs && w->host_cores) return false;
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

/* Under r->mu: whether free worker w takes ready stage st to run whole. eager: yes. dmda, where
 * every device it may go to has an expected time (expected_seconds): where no other device
 * would end it sooner, from when it is free (the models count the transfers of its inputs
 * and outputs: values between stages are on the host; measured times hold them). Otherwise
 * the first free device of the list (cpu0 first under auto) takes it, so a graph with no
 * independent work runs on one device as it did before sharing, and a stage ready while that
 * device is busy goes to the next; the times it measures are the history the next run of the
 * same stage goes by. */
static bool takes_stage(const share_run *r, const worker *w, const stage *st, double now) {
  if (!stage_eligible(r, w, st)) return false;
  if (r->opts->policy == LOOM_SCHED_EAGER) return true;
  double mine = 0;
  bool known = expected_seconds(r, st, w->index, &mine);
  for (int32_t i = 0; known && i < r->n_workers; i++) {
    const worker *e = &r->workers[i];
    double theirs = 0;
    if (e == w || !stage_eligible(r, e, st)) continue;
    known = expected_seconds(r, st, i, &theirs);
    if (known && free_at(e, now) + theirs < now + mine) return false;
  }
  if (known) return true;
  for (int32_t i = 0; i < w->index; i++)
    if (!r->workers[i].busy && stage_eligible(r, &r->workers[i], st)) return false;
  return true;
}

/* A stage run whole on w's device, as loom_plan_run runs it, cut by memory where it passes
 * that device's limit. */
static loom_status run_whole(share_run *r, worker *w, stage *st) {
  loom_plan *sub = NULL;
  loom_plan_stats ps;
  memset(&ps, 0, sizeof ps);
  task_clock clock;
  clock_start(w, &clock);
  loom_status s = loom_plan_split_by_memory(st->st.graph, &w->runner, 1, &sub);
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
    int32_t c = st->state == STAGE_SHARED ? claim_range(r, st->L, w, waited, now) : -1;
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
  loom_status s = run_range(L, w, t->range, &peak);
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
  s = combine_stage(L, t->st->outs);
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
  loop_free(L);
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
    s = loop_open(r, st, &L);
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

/* ---- the cut ------------------------------------------------------------------------------------- */

/* loom_plan_split's predicate: a cut before each top-level loop and before the op after one. */
typedef struct cut_acc {
  bool seen, after_loop;
  const int32_t *stage_of_op; /* the branch cut's, where there is one */
} cut_acc;

static bool cut_around_loops(const loom_graph *g, int32_t op, void *acc) {
  cut_acc *a = acc;
  if (a->stage_of_op) return op > 0 && a->stage_of_op[op] != a->stage_of_op[op - 1];
  bool loop = g->ops[op].loop != NULL, cut = a->seen && (loop || a->after_loop);
  a->seen = true;
  a->after_loop = loop;
  return cut;
}

loom_status loom_share_cut(const loom_graph *graph, const loom_runner *runner, int32_t n_devices,
                           loom_plan **out_plan) {
  if (out_plan) *out_plan = NULL;
  if (!graph || !runner || !out_plan || n_devices < 1)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_share_cut: NULL argument or no devices");
  loom__branch_cut branches;
  bool found = false;
  memset(&branches, 0, sizeof branches);
  loom_status s = n_devices > 1 ? loom__branch_cut_make(graph, &branches, &found) : LOOM_OK;
  cut_acc acc = {false, false, found ? branches.stage_of_op : NULL};
  if (!s) s = loom_plan_split(found ? branches.graph : graph, cut_around_loops, &acc, runner, 1, out_plan);
  loom__branch_cut_deinit(&branches);
  return s;
}

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

/* The cut (loom_share_cut), the values between stages and the stages. */
static loom_status run_init(share_run *r, const loom_graph *plan_graph, const loom_tensor *inputs) {
  loom_status s = loom_share_cut(plan_graph, &r->workers[0].runner, r->n_workers, &r->cut);
  if (s) return s;
  const loom_graph *g = r->g = loom_plan_graph(r->cut);
  r->vals = loom__calloc((size_t)LOOM_MAX(g->n_values, 1), sizeof *r->vals);
  r->n_stages = loom_plan_stage_count(r->cut);
  r->stages = loom__calloc((size_t)LOOM_MAX(r->n_stages, 1), sizeof *r->stages);
  if (!r->vals || !r->stages) return loom__oom("the stages and the values between them");
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
    if (r->n_workers > 1 && lone_loop(st->st.graph, &op)) st->loop_op = op;
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
    loop_free(r->stages[i].L);
    if (r->stages[i].ins) outs_release(&r->stages[i]);
    loom__free(r->stages[i].ins);
    loom__free(r->stages[i].seconds);
  }
  for (int32_t v = 0; r->vals && v < r->g->n_values; v++) held_release(&r->vals[v]);
  loom__free(r->stages);
  loom__free(r->vals);
  loom_plan_destroy(r->cut);
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
  r->stats->devices = loom__calloc((size_t)n, sizeof *r->stats->devices);
  if (!r->workers || !r->stats->devices) return loom__oom("the devices' workers");
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
    w->host_cores = on_host_cores(&info);
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
  for (int32_t i = 0; i < r->stats->plan.n_stages; i++) {
    loom_stage_info st;
    if (loom_plan_stage(plan, i, &st)) continue;
    for (int32_t d = 0; d < r->n_workers; d++) {
      if (strcasecmp(r->workers[d].runner.device, st.device) != 0) continue;
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
    s = sync ? run_init(&r, loom_plan_graph(plan), inputs)
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
  free(runners);
  if (stats == &own) loom_share_stats_deinit(&own);
  return s;
}
