/* loom-bench dot: a dot run under memory limits against the same dot unconstrained, in the
 * same run (issue 13: what memory safety costs in speed).
 *
 * For each dot (default f64[1000,1200] x [1200,1100] and f32[2048,2048] x [2048,2048]) the
 * naive peak is the estimate of the rewritten but unchunked graph (inputs, result and the
 * dot's temporary). Each limit is a fraction of it (default 0.8, 1/2, 1/4, 1/16: a naive need
 * of 1.25x, 2x, 4x and 16x the limit); the graph is prepared for one runner of that limit
 * (loom_graph_optimize_for_runners, then loom_plan_split_by_memory) and run through
 * loom_run, as loom-run runs it. Printed per limit: the planned graph's ops and stages,
 * the time to plan, the best run's time, the time ratio (unconstrained / constrained: 1.00
 * is as fast; goals >= 0.8 at 2x and >= 0.6 at 16x), the peak the run's meter measured, the
 * device memory node's peak (the memory manager's stats), and the result's largest
 * difference from the unconstrained run's, relative to its largest magnitude.
 *
 * Each configuration runs in a context of its own, so the node's peak is that
 * configuration's alone. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "loom/loom.h"

enum { MAX_DOTS = 4, MAX_FRACTIONS = 8 };

typedef struct dot_spec {
  loom_dtype dtype;
  int64_t m, k, n; /* [m,k] x [k,n] */
} dot_spec;

typedef struct dot_args {
  dot_spec dots[MAX_DOTS];
  int32_t n_dots;
  double fractions[MAX_FRACTIONS];
  int32_t n_fractions;
  int32_t repeats;
  const char *device;
} dot_args;

static void usage(FILE *f) {
  fputs(
      "usage: loom-bench dot [--dots LIST] [--fractions LIST] [--repeats R] [--device ID]\n"
      "  --dots LIST       dots as DTYPE:MxKxN ([M,K] x [K,N], f32 or f64), comma-separated\n"
      "                    (default f64:1000x1200x1100,f32:2048x2048x2048)\n"
      "  --fractions LIST  the limits as fractions of the naive peak (the unchunked graph's\n"
      "                    estimate), each in (0, 1] (default 0.8,0.5,0.25,0.0625)\n"
      "  --repeats R       timed runs per limit after one warm-up; the best is kept (default 5)\n"
      "  --device ID       the runner's device (default cpu0)\n"
      "  Each limit's time is compared with the unconstrained dot's: ratio = unconstrained /\n"
      "  constrained; goals (issue 13) >= 0.8 at a naive need of 2x the limit, >= 0.6 at 16x.\n",
      f);
}

/* "f64:1000x1200x1100" into *d; false when it does not read. */
static bool parse_dot(const char *t, dot_spec *d) {
  const char *colon = strchr(t, ':');
  if (!colon || !loom_dtype_parse(t, (size_t)(colon - t), &d->dtype) ||
      (d->dtype != LOOM_F32 && d->dtype != LOOM_F64))
    return false;
  int64_t *dims[3] = {&d->m, &d->k, &d->n};
  const char *p = colon + 1;
  for (int32_t i = 0; i < 3; i++) {
    char *end = NULL;
    if (*p < '0' || *p > '9') return false; /* no sign, no blank */
    long long x = strtoll(p, &end, 10);
    if (end == p || x < 1 || x > 1000000 || *end != (i < 2 ? 'x' : '\0')) return false;
    *dims[i] = x;
    p = end + 1;
  }
  return true;
}

/* Splits v at commas and reads each item with `item`; 2 (with a message) on a bad one. */
static int parse_list(const char *flag, const char *v, int32_t max, int32_t *count,
                      bool (*item)(const char *t, void *out, int32_t i), void *out, const char *want) {
  char *copy = strdup(v), *save = NULL;
  if (!copy) return 2;
  *count = 0;
  int rc = 0;
  for (char *t = strtok_r(copy, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save)) {
    if (*count == max || !item(t, out, *count)) {
      fprintf(stderr, "loom-bench dot: %s: '%s': %s\n", flag, t, *count == max ? "too many items" : want);
      rc = 2;
    } else
      (*count)++;
  }
  if (!rc && *count == 0) {
    fprintf(stderr, "loom-bench dot: %s: an empty list\n", flag);
    rc = 2;
  }
  free(copy);
  return rc;
}

static bool dot_item(const char *t, void *out, int32_t i) {
  return parse_dot(t, &((dot_spec *)out)[i]);
}

static bool fraction_item(const char *t, void *out, int32_t i) {
  double x = 0;
  if (!loom__cli_parse_double(t, 0, 1, &x) || x == 0) return false;
  ((double *)out)[i] = x;
  return true;
}

static int parse_args(int argc, char **argv, dot_args *a) {
  *a = (dot_args){.dots = {{LOOM_F64, 1000, 1200, 1100}, {LOOM_F32, 2048, 2048, 2048}},
                  .n_dots = 2,
                  .fractions = {0.8, 0.5, 0.25, 0.0625},
                  .n_fractions = 4,
                  .repeats = 5,
                  .device = "cpu0"};
  const char *dots = NULL, *fractions = NULL;
  const bench_opt opts[] = {
      BENCH_OPT_TEXT("dots", &dots, "a list of dots"),
      BENCH_OPT_TEXT("fractions", &fractions, "a list of fractions"),
      BENCH_OPT_INT("repeats", BENCH_I32, &a->repeats, 1, 1000, "a count from 1 to 1000"),
      BENCH_OPT_TEXT("device", &a->device, "a device id"),
      BENCH_OPT_END,
  };
  bench_cli b = {.mode = "dot",
                 .synopsis = "loom-bench dot [--dots LIST] [--fractions LIST] [--repeats R] [--device ID]",
                 .usage = usage,
                 .opts = opts};
  int rc = bench_args(&b, argc, argv);
  if (!rc && dots)
    rc = parse_list(
        "--dots", dots, MAX_DOTS, &a->n_dots, dot_item, a->dots,
        "want DTYPE:MxKxN with DTYPE f32 or f64 and sizes from 1 to 1000000, as f64:1000x1200x1100");
  if (!rc && fractions)
    rc = parse_list("--fractions", fractions, MAX_FRACTIONS, &a->n_fractions, fraction_item, a->fractions,
                    "want a fraction of the naive peak in (0, 1], as 0.5");
  return rc;
}

/* ---- one configuration -------------------------------------------------------------------------- */

typedef struct dot_result {
  bool ok;
  int64_t limit; /* the runner's limit */
  double plan_seconds, best_seconds;
  int64_t estimated, meter_peak, node_peak;
  int32_t ops, stages;
  loom_tensor out; /* the first run's result */
  char why[768];   /* why it did not run */
} dot_result;

static loom_graph *dot_graph(const dot_spec *d) {
  char text[512];
  const char *t = loom_dtype_name(d->dtype);
  snprintf(text, sizeof text,
           "graph dot(a: %s[%lld,%lld], b: %s[%lld,%lld]) {\n  c = dot a b\n  return c\n}\n", t,
           (long long)d->m, (long long)d->k, t, (long long)d->k, (long long)d->n);
  loom_graph *g = NULL;
  if (loom_graph_parse(text, strlen(text), "dot.lir", &g))
    fprintf(stderr, "loom-bench dot: the graph: %s\n", loom_last_error());
  return g;
}

/* What an unconstrained run may hold: 90% of the device's free memory (or its size), so that
 * a dot too big for this machine is refused by the meter instead of killed by the kernel. */
static int64_t unconstrained_limit(loom_context *ctx, const char *device) {
  int32_t index;
  loom_device_info d;
  int64_t bytes = 0;
  if (!loom_context_find_device(ctx, device, &index) && !loom_context_device_info(ctx, index, &d))
    bytes = d.free_bytes > 0 ? d.free_bytes : d.memory_bytes;
  int64_t avail = (int64_t)sysconf(_SC_AVPHYS_PAGES) * (int64_t)sysconf(_SC_PAGESIZE);
  if (avail > 0 && (bytes <= 0 || avail < bytes)) bytes = avail;
  return bytes > 0 ? bytes / 10 * 9 : INT64_MAX / 2;
}

/* The graph prepared and cut for one runner: unconstrained (limit 0: no chunking, the
 * runner's limit what the device has) or under `limit`. */
static loom_status make_plan(loom_context *ctx, const loom_graph *g, const char *device, int64_t limit,
                             loom_runner *runner, loom_graph **opt, loom_plan **plan) {
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.fused_runs = loom_fused_body_runs_everywhere; /* fuse first where that fits */
  snprintf(runner->device, sizeof runner->device, "%s", device);
  runner->limit = limit > 0 ? limit : unconstrained_limit(ctx, device);
  static const char *const no_chunk[] = {"chunk"};
  loom_status s;
  if (limit == 0) {
    o.disabled = no_chunk;
    o.n_disabled = 1;
    s = loom_graph_optimize(g, &o, opt, NULL);
  } else {
    s = loom_graph_optimize_for_runners(g, runner, 1, &o, opt, NULL, NULL, 0);
  }
  return s ? s : loom_plan_split_by_memory(*opt, runner, 1, plan);
}

/* The plan's runs: a warm-up, then `repeats` timed; the first result kept. */
static loom_status time_runs(loom_context *ctx, const loom_plan *plan, const loom_tensor *in, int32_t repeats,
                             dot_result *r) {
  for (int32_t rep = 0; rep <= repeats; rep++) {
    loom_run_stats stats = {0};
    loom_tensor out;
    double t = bench_now();
    loom_status s = loom_run(ctx, plan, NULL, in, 2, &out, 1, &stats);
    t = bench_now() - t;
    for (int32_t i = 0; !s && i < stats.n_stages; i++)
      if (stats.stages[i].estimated_peak_bytes > r->estimated)
        r->estimated = stats.stages[i].estimated_peak_bytes;
    if (stats.peak_bytes > r->meter_peak) r->meter_peak = stats.peak_bytes;
    loom_run_stats_deinit(&stats);
    if (s) return s;
    if (rep == 0)
      r->out = out;
    else
      loom_tensor_deinit(&out);
    if (rep > 0 && (r->best_seconds == 0 || t < r->best_seconds)) r->best_seconds = t;
  }
  return LOOM_OK;
}

static void run_config(const dot_args *a, const loom_graph *g, const loom_tensor *in, int64_t limit,
                       dot_result *r) {
  memset(r, 0, sizeof *r);
  loom_context *ctx = NULL;
  loom_graph *opt = NULL;
  loom_plan *plan = NULL;
  loom_runner runner;
  loom_context_options co;
  loom_context_options_init(&co);
  co.devices = a->device;
  loom_status s = loom_context_create(&co, &ctx);
  double t = bench_now();
  if (!s) s = make_plan(ctx, g, a->device, limit, &runner, &opt, &plan);
  r->plan_seconds = bench_now() - t;
  r->limit = limit > 0 ? limit : runner.limit;
  if (!s) {
    r->ops = loom_graph_op_count(opt);
    r->stages = loom_plan_stage_count(plan);
    s = time_runs(ctx, plan, in, a->repeats, r);
  }
  if (s) {
    snprintf(r->why, sizeof r->why, "%s", loom_last_error());
    loom_tensor_deinit(&r->out);
  } else {
    r->node_peak = bench_node_peak(ctx, a->device);
    r->ok = true;
  }
  loom_plan_destroy(plan);
  loom_graph_destroy(opt);
  loom_context_destroy(ctx);
}

/* ---- the figures -------------------------------------------------------------------------------- */

/* max |x - ref| / max |ref|. */
static double rel_diff(const loom_tensor *x, const loom_tensor *ref) {
  int64_t n = 0;
  loom_type_elements(&ref->type, &n);
  double diff = 0, mag = 0;
  for (int64_t i = 0; i < n; i++) {
    double u = ref->type.dtype == LOOM_F64 ? ((const double *)x->data)[i] : ((const float *)x->data)[i];
    double v = ref->type.dtype == LOOM_F64 ? ((const double *)ref->data)[i] : ((const float *)ref->data)[i];
    if (!(fabs(u - v) <= diff)) diff = fabs(u - v); /* NaN counts as a difference */
    if (fabs(v) > mag) mag = fabs(v);
  }
  return mag > 0 ? diff / mag : diff;
}

static void print_row(const char *need, const dot_result *r, const dot_result *ref, bool *bad) {
  char lim[32], est[32], meter[32], node[32];
  if (r == ref)
    snprintf(lim, sizeof lim, "none");
  else
    loom_bytes_format(r->limit, lim, sizeof lim);
  if (!r->ok) {
    printf("%-13s %11s   did not run: %s\n", need, lim, r->why);
    *bad = true;
    return;
  }
  printf("%-13s %11s %6d %6d %9.3f %9.3f %7.2f %11s %11s %11s", need, lim, (int)r->ops, (int)r->stages,
         r->plan_seconds * 1e3, r->best_seconds * 1e3, ref->ok ? ref->best_seconds / r->best_seconds : 0.0,
         loom_bytes_format(r->estimated, est, sizeof est),
         loom_bytes_format(r->meter_peak, meter, sizeof meter),
         r->node_peak < 0 ? "?" : loom_bytes_format(r->node_peak, node, sizeof node));
  if (r == ref) {
    printf("  reference\n");
    return;
  }
  double tol = r->out.type.dtype == LOOM_F64 ? 1e-10 : 1e-4, d = ref->ok ? rel_diff(&r->out, &ref->out) : NAN;
  bool over = r->meter_peak > r->limit || r->node_peak > r->limit;
  printf("  %s (%.1e)%s\n", d <= tol ? "equal" : "DIFFER", d, over ? " OVER THE LIMIT" : "");
  *bad |= !(d <= tol) || over;
}

/* One dot: its naive peak, the unconstrained run, then each limit. */
static int bench_dot(const dot_args *a, const dot_spec *d) {
  loom_graph *g = dot_graph(d), *whole = NULL;
  loom_tensor in[2];
  memset(in, 0, sizeof in);
  loom_estimate e = {0};
  static const char *const no_chunk[] = {"chunk"};
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.fused_runs = loom_fused_body_runs_everywhere; /* fuse first where that fits */
  o.disabled = no_chunk;
  o.n_disabled = 1;
  int rc = !g || loom_graph_optimize(g, &o, &whole, NULL) || loom_graph_estimate(whole, NULL, &e);
  for (int32_t p = 0; !rc && p < 2; p++)
    rc = loom_tensor_init(&in[p], loom_value_type(g, loom_graph_param_at(g, p))) ||
         loom_tensor_fill_random(&in[p], 1, (uint64_t)p);
  if (rc) {
    fprintf(stderr, "loom-bench dot: %s\n", loom_last_error());
  } else {
    const char *t = loom_dtype_name(d->dtype);
    char naive[32];
    printf("\ndot %s[%lld,%lld] x %s[%lld,%lld] on %s: naive peak %s (the unchunked graph's estimate)\n", t,
           (long long)d->m, (long long)d->k, t, (long long)d->k, (long long)d->n, a->device,
           loom_bytes_format(e.peak_bytes, naive, sizeof naive));
    printf("%-13s %11s %6s %6s %9s %9s %7s %11s %11s %11s  %s\n", "naive/limit", "limit", "ops", "stages",
           "plan ms", "run ms", "ratio", "estimated", "meter peak", "node peak", "result vs unconstrained");
    dot_result ref, r;
    run_config(a, g, in, 0, &ref);
    bool bad = false;
    print_row("unconstrained", &ref, &ref, &bad);
    for (int32_t i = 0; i < a->n_fractions; i++) {
      char need[32];
      snprintf(need, sizeof need, "%.3gx", 1 / a->fractions[i]);
      run_config(a, g, in, (int64_t)((double)e.peak_bytes * a->fractions[i]), &r);
      print_row(need, &r, &ref, &bad);
      loom_tensor_deinit(&r.out);
    }
    loom_tensor_deinit(&ref.out);
    rc = bad;
  }
  loom_estimate_deinit(&e);
  loom_tensor_deinit(&in[0]);
  loom_tensor_deinit(&in[1]);
  loom_graph_destroy(whole);
  loom_graph_destroy(g);
  return rc;
}

int loom_bench_dot(int argc, char **argv) {
  dot_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;
  loom_context *ctx = NULL;
  loom_context_options co;
  loom_context_options_init(&co);
  co.devices = a.device;
  if (loom_context_create(&co, &ctx)) { /* each configuration makes its own; this checks --device */
    fprintf(stderr, "loom-bench dot: --device %s: %s\n", a.device, loom_last_error());
    return 2;
  }
  loom_context_destroy(ctx);
  printf(
      "loom-bench dot: best of %d runs after a warm-up, each limit against the unconstrained dot;\n"
      "ratio = unconstrained time / time (goals: >= 0.8 at 2x, >= 0.6 at 16x)\n",
      (int)a.repeats);
  for (int32_t i = 0; i < a.n_dots; i++) rc |= bench_dot(&a, &a.dots[i]);
  return rc;
}
