/* loom-bench limits: the kernels of examples/limits/ run whole and under fractions of their
 * need on one device, each against its own whole run in the same process (issue 34: what a
 * memory limit costs in speed, and whether the planner's predicted time says so).
 *
 * For each kernel the whole need is the estimated peak of the graph rewritten without
 * chunking. The whole run is that graph on one runner holding what the device has; each
 * limited run is the graph prepared for one runner of the limit (as loom-plan and loom-run
 * prepare it: loom_graph_optimize_for_runners, then loom_plan_split_by_memory), both run
 * through loom_plan_run: one warm-up run, then the best of R (default 3). Printed per limit:
 * the ratio whole time / limited time beside issue 34's goal for the kernel's kind (a pass or
 * fail column), the plan's stages and loop pieces, the predicted time (loom_plan_predict)
 * beside the measured one, the estimated and measured peaks, and whether the results equal
 * the whole run's; or the planner's reason where it refuses the limit.
 *
 * Each configuration runs in a context of its own, so the memory node's peak is its own. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "loom/internal/json.h"
#include "loom/loom.h"
#include "loom/predict.h"
#include "measure.h"

enum { MAX_FRACTIONS = 4, MAX_OUTPUTS = 4 };

typedef enum kind { PRODUCT, MATVEC, STENCIL } kind;

/* A kernel of examples/limits/ and its goals (issue 34, acceptance 2). */
typedef struct kernel {
  const char *name;
  kind kind;
  bool deep; /* also at 1/32 and 1/128 (the gemm-like product: >= 0.5 and >= 0.25) */
} kernel;

static const kernel kernels[] = {
    {"gemm", PRODUCT, true},    {"2mm", PRODUCT, false},        {"3mm", PRODUCT, false},
    {"syrk", PRODUCT, false},   {"syr2k", PRODUCT, false},      {"symm", PRODUCT, false},
    {"trmm", PRODUCT, false},   {"covariance", PRODUCT, false}, {"correlation", PRODUCT, false},
    {"gemver", MATVEC, false},  {"atax", MATVEC, false},        {"bicg", MATVEC, false},
    {"mvt", MATVEC, false},     {"jacobi1d", STENCIL, false},   {"jacobi2d", STENCIL, false},
    {"heat3d", STENCIL, false}, {"fdtd2d", STENCIL, false},
};
enum { N_KERNELS = sizeof kernels / sizeof kernels[0] };

static const char *const kind_names[] = {"product", "mat-vec", "stencil"};

typedef struct limits_args {
  const char *dir, *only, *device, *json;
  int32_t repeats;
  bool small;
  double search; /* --max-slowdown F: also the smallest limit predicted within F (0: not) */
} limits_args;

static void usage(FILE *f) {
  fputs(
      "usage: loom-bench limits [--dir DIR] [--kernels LIST] [--small] [--repeats R] [--device ID]\n"
      "                         [--max-slowdown F] [--json FILE]\n"
      "  --dir DIR          the kernels' folder (default examples/limits, from the repository root)\n"
      "  --kernels LIST     only these kernels, comma-separated (default all 17)\n"
      "  --small            the test sizes (NAME.small.lir) instead of the benchmark's (NAME.lir)\n"
      "  --repeats R        timed runs per configuration after one warm-up; the best is kept (3)\n"
      "  --device ID        the runner's device (default cpu0)\n"
      "  --max-slowdown F   also plan each kernel at the smallest limit whose predicted time is\n"
      "                     within F times its whole time (loom-plan --max-slowdown; the search\n"
      "                     keeps a margin: it asks for F / 1.6) and measure it (goal: 1.25 F)\n"
      "  --json FILE        also write every figure as one JSON object\n"
      "  Ratios are whole time / limited time at 1/8 of each kernel's need (and 1/32, 1/128 for\n"
      "  gemm); goals (issue 34): >= 0.6 products and updates, >= 0.5 mat-vec pairs, >= 0.25\n"
      "  stencils; gemm >= 0.5 at 1/32 and >= 0.25 at 1/128.\n",
      f);
}

static int parse_args(int argc, char **argv, limits_args *a) {
  *a = (limits_args){.dir = "examples/limits", .device = "cpu0", .repeats = 3};
  const bench_opt opts[] = {
      BENCH_OPT_TEXT("dir", &a->dir, "a folder"),
      BENCH_OPT_TEXT("kernels", &a->only, "a list of kernel names"),
      BENCH_OPT_FLAG("small", &a->small),
      BENCH_OPT_INT("repeats", BENCH_I32, &a->repeats, 1, 100, "a count from 1 to 100"),
      BENCH_OPT_TEXT("device", &a->device, "a device id"),
      BENCH_OPT_DOUBLE("max-slowdown", &a->search, 1, 1000, "a factor from 1 to 1000, as 2"),
      BENCH_OPT_TEXT("json", &a->json, "a file name"),
      BENCH_OPT_END,
  };
  bench_cli b = {.mode = "limits",
                 .synopsis = "loom-bench limits [--kernels LIST] [--small] [--repeats R] [options]",
                 .usage = usage,
                 .opts = opts};
  int rc = bench_args(&b, argc, argv);
  for (const char *p = a->only; !rc && p && *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    bool known = false;
    for (int i = 0; i < N_KERNELS; i++)
      known |= strlen(kernels[i].name) == len && !strncmp(kernels[i].name, p, len);
    if (!known)
      rc = bench_usage_error(&b, "--kernels: '%.*s' is not a kernel of examples/limits (gemm, 2mm, ...)",
                             (int)len, p);
    p = end ? end + 1 : NULL;
  }
  return rc;
}

/* ---- one configuration -------------------------------------------------------------------- */

typedef struct config {
  bool ok, refused; /* refused: the planner said no (why); !ok && !refused: the run failed */
  char why[512];
  double fraction; /* of the need; 0: whole */
  int64_t limit;
  double best_s, predicted_s, plan_s;
  int64_t estimated, meter_peak, node_peak, pieces;
  int32_t stages, loops;
  loom_tensor out[MAX_OUTPUTS];
  int32_t n_out;
  double diff; /* against the whole run's results, relative to their largest magnitude */
} config;

typedef struct kernel_run {
  const kernel *k;
  loom_graph *g;
  loom_tensor in[16];
  int32_t n_in;
  int64_t need;
  config whole, limited[MAX_FRACTIONS], searched;
  int32_t n_limited;
  loom_limit_search search;
  bool searched_ok;
} kernel_run;

/* Pieces each loop of g runs, nested loops' pieces counted per outer piece. */
static int64_t count_pieces(const loom_graph *g, int32_t *loops) {
  int64_t total = 0;
  for (int32_t o = 0; o < loom_graph_op_count(g); o++) {
    const loom_graph *body;
    int64_t n, piece;
    loom_op_info info;
    if (loom_graph_op_info_get(g, o, &info) || info.kind != LOOM_OP_LOOP ||
        loom_graph_loop_get(g, o, &body, &n, &piece))
      continue;
    (*loops)++;
    int64_t inner = count_pieces(body, loops);
    total += (n + piece - 1) / piece * (inner > 0 ? inner : 1);
  }
  return total;
}

/* What a whole run may hold: 90% of the host's available memory. */
static int64_t unconstrained_limit(void) {
  int64_t avail = (int64_t)sysconf(_SC_AVPHYS_PAGES) * (int64_t)sysconf(_SC_PAGESIZE);
  return avail > 0 ? avail / 10 * 9 : INT64_MAX / 2;
}

static loom_status make_plan(const limits_args *a, const loom_graph *g, int64_t limit, loom_graph **opt,
                             loom_plan **plan) {
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.fused_runs = loom_fused_body_runs_everywhere; /* as loom-plan and loom-run */
  loom_runner r;
  memset(&r, 0, sizeof r);
  snprintf(r.device, sizeof r.device, "%s", a->device);
  r.limit = limit > 0 ? limit : unconstrained_limit();
  static const char *const no_chunk[] = {"chunk"};
  loom_status s;
  if (limit == 0) {
    o.disabled = no_chunk;
    o.n_disabled = 1;
    s = loom_graph_optimize(g, &o, opt, NULL);
  } else {
    s = loom_graph_optimize_for_runners(g, &r, 1, &o, opt, NULL, NULL, 0);
  }
  return s ? s : loom_plan_split_by_memory(*opt, &r, 1, plan);
}

/* A warm-up run and `repeats` timed ones; the first run's results kept in c->out. */
static loom_status time_runs(loom_context *ctx, const loom_plan *plan, const kernel_run *kr, int32_t repeats,
                             config *c) {
  for (int32_t rep = 0; rep <= repeats; rep++) {
    loom_run_stats stats;
    memset(&stats, 0, sizeof stats);
    loom_tensor out[MAX_OUTPUTS];
    memset(out, 0, sizeof out);
    double t = bench_now();
    loom_status s = loom_run(ctx, plan, NULL, kr->in, kr->n_in, out, c->n_out, &stats);
    t = bench_now() - t;
    for (int32_t i = 0; !s && i < stats.n_stages; i++)
      if (stats.stages[i].estimated_peak_bytes > c->estimated)
        c->estimated = stats.stages[i].estimated_peak_bytes;
    if (stats.peak_bytes > c->meter_peak) c->meter_peak = stats.peak_bytes;
    loom_run_stats_deinit(&stats);
    if (s) return s;
    for (int32_t i = 0; i < c->n_out; i++) {
      if (rep == 0)
        c->out[i] = out[i];
      else
        loom_tensor_deinit(&out[i]);
    }
    if (rep > 0) bench_keep(&c->best_s, t);
  }
  return LOOM_OK;
}

static void run_config(const limits_args *a, const loom_sched_platform *pf, const kernel_run *kr,
                       int64_t limit, config *c) {
  c->limit = limit;
  c->n_out = loom_graph_output_count(kr->g);
  loom_context *ctx = NULL;
  loom_graph *opt = NULL;
  loom_plan *plan = NULL;
  loom_context_options co;
  loom_context_options_init(&co);
  co.devices = a->device;
  loom_status s = loom_context_create(&co, &ctx);
  double t = bench_now();
  if (!s && (s = make_plan(a, kr->g, limit, &opt, &plan))) c->refused = true;
  c->plan_s = bench_now() - t;
  if (!s) {
    c->stages = loom_plan_stage_count(plan);
    c->pieces = count_pieces(loom_plan_graph(plan), &c->loops);
    if (loom_plan_predict(pf, plan, &c->predicted_s)) c->predicted_s = -1;
    s = time_runs(ctx, plan, kr, a->repeats, c);
  }
  if (s) {
    snprintf(c->why, sizeof c->why, "%s", loom_last_error());
  } else {
    c->node_peak = bench_node_peak(ctx, a->device);
    c->ok = true;
  }
  loom_plan_destroy(plan);
  loom_graph_destroy(opt);
  loom_context_destroy(ctx);
}

/* max |x - ref| / max |ref| over every f32 or f64 result. */
static double rel_diff(const config *c, const config *ref) {
  double diff = 0, mag = 0;
  for (int32_t k = 0; k < c->n_out; k++) {
    const loom_tensor *x = &c->out[k], *r = &ref->out[k];
    int64_t n = 0;
    loom_type_elements(&r->type, &n);
    bool f64 = r->type.dtype == LOOM_F64;
    for (int64_t i = 0; i < n; i++) {
      double u = f64 ? ((const double *)x->data)[i] : ((const float *)x->data)[i];
      double v = f64 ? ((const double *)r->data)[i] : ((const float *)r->data)[i];
      if (!(fabs(u - v) <= diff)) diff = fabs(u - v); /* NaN counts as a difference */
      if (fabs(v) > mag) mag = fabs(v);
    }
  }
  return mag > 0 ? diff / mag : diff;
}

static void config_deinit(config *c) {
  for (int32_t i = 0; i < c->n_out; i++) loom_tensor_deinit(&c->out[i]);
}

/* ---- the figures ---------------------------------------------------------------------------- */

static double goal_of(const kernel *k, double fraction) {
  if (fraction < 1.0 / 100) return 0.25;
  if (fraction < 1.0 / 16) return 0.5;
  return k->kind == PRODUCT ? 0.6 : k->kind == MATVEC ? 0.5 : 0.25;
}

static const char *mib(int64_t bytes, char *buf, size_t size) {
  snprintf(buf, size, "%.2f", (double)bytes / (1 << 20));
  return buf;
}

static void print_header(void) {
  printf("%-11s %-7s %9s %9s %9s %7s %5s %-4s %7s %6s %9s %9s %6s %9s %9s  %s\n", "kernel", "at", "limit MiB",
         "whole ms", "run ms", "ratio", "goal", "", "pieces", "stages", "pred ms", "pred whole", "p/m",
         "est MiB", "meas MiB", "results");
}

static bool print_config(const kernel_run *kr, const config *c, const char *at, double goal) {
  char lim[32], est[32], meas[32];
  if (!c->ok) {
    printf("%-11s %-7s %9s   %s: %s\n", kr->k->name, at, mib(c->limit, lim, sizeof lim),
           c->refused ? "refused" : "failed", c->why);
    return false;
  }
  const config *w = &kr->whole;
  double ratio = w->ok ? w->best_s / c->best_s : 0;
  bool equal = c == w || c->diff <= 1e-4;
  bool over = c != w && (c->meter_peak > c->limit || c->node_peak > c->limit);
  bool pass = c == w || (goal > 0 && ratio >= goal);
  printf("%-11s %-7s %9s %9.2f %9.2f %7.3f %5.2f %-4s %7lld %6d %9.2f %9.2f %6.2f %9s %9s  %s", kr->k->name,
         at, c == w ? "-" : mib(c->limit, lim, sizeof lim), w->best_s * 1e3, c->best_s * 1e3, ratio, goal,
         c == w      ? ""
         : goal <= 0 ? "-"
         : pass      ? "pass"
                     : "FAIL",
         (long long)c->pieces, (int)c->stages, c->predicted_s * 1e3, w->predicted_s * 1e3,
         c->predicted_s / c->best_s, mib(c->estimated, est, sizeof est),
         mib(c->meter_peak, meas, sizeof meas),
         c == w  ? "reference"
         : equal ? "equal"
                 : "DIFFER");
  if (c != w) printf(" (%.1e)%s", c->diff, over ? " OVER THE LIMIT" : "");
  printf("\n");
  return equal && !over;
}

static void json_config(loom__json *j, const kernel_run *kr, const config *c, double goal) {
  loom__json_begin_object(j);
  loom__json_kv_double(j, "fraction", c->fraction);
  loom__json_kv_int64(j, "limit_bytes", c->limit);
  loom__json_kv_bool(j, "ran", c->ok);
  if (!c->ok) {
    loom__json_kv_bool(j, "refused", c->refused);
    loom__json_kv_string(j, "why", c->why);
    loom__json_end_object(j);
    return;
  }
  loom__json_kv_double(j, "seconds", c->best_s);
  loom__json_kv_double(j, "ratio", kr->whole.ok ? kr->whole.best_s / c->best_s : 0);
  loom__json_kv_double(j, "goal", goal);
  loom__json_kv_double(j, "predicted_seconds", c->predicted_s);
  loom__json_kv_double(j, "plan_seconds", c->plan_s);
  loom__json_kv_int64(j, "stages", c->stages);
  loom__json_kv_int64(j, "loops", c->loops);
  loom__json_kv_int64(j, "pieces", c->pieces);
  loom__json_kv_int64(j, "estimated_peak_bytes", c->estimated);
  loom__json_kv_int64(j, "measured_peak_bytes", c->meter_peak);
  loom__json_kv_int64(j, "node_peak_bytes", c->node_peak);
  loom__json_kv_double(j, "difference", c->diff);
  loom__json_end_object(j);
}

static void json_kernel(loom__json *j, const kernel_run *kr) {
  loom__json_begin_object(j);
  loom__json_kv_string(j, "kernel", kr->k->name);
  loom__json_kv_string(j, "kind", kind_names[kr->k->kind]);
  loom__json_kv_int64(j, "need_bytes", kr->need);
  loom__json_key(j, "whole");
  json_config(j, kr, &kr->whole, 0);
  loom__json_key(j, "limited");
  loom__json_begin_array(j);
  for (int32_t i = 0; i < kr->n_limited; i++)
    json_config(j, kr, &kr->limited[i], goal_of(kr->k, kr->limited[i].fraction));
  loom__json_end_array(j);
  if (kr->searched_ok) {
    loom__json_key(j, "max_slowdown");
    json_config(j, kr, &kr->searched, 0);
  }
  loom__json_end_object(j);
}

/* ---- one kernel ------------------------------------------------------------------------------- */

static int open_kernel(const limits_args *a, const kernel *k, kernel_run *kr) {
  memset(kr, 0, sizeof *kr);
  kr->k = k;
  char path[1024];
  snprintf(path, sizeof path, "%s/%s%s.lir", a->dir, k->name, a->small ? ".small" : "");
  if (loom_graph_load_any(path, &kr->g)) return bench_fail("limits", 1, "%s", loom_last_error());
  kr->n_in = loom_graph_param_count(kr->g);
  if (kr->n_in > 16 || loom_graph_output_count(kr->g) > MAX_OUTPUTS)
    return bench_fail("limits", 1, "%s: more than 16 inputs or %d outputs", path, MAX_OUTPUTS);
  for (int32_t p = 0; p < kr->n_in; p++) {
    if (loom_tensor_init(&kr->in[p], loom_value_type(kr->g, loom_graph_param_at(kr->g, p))) ||
        loom_tensor_fill_random(&kr->in[p], 1, (uint64_t)p))
      return bench_fail("limits", 1, "%s: inputs: %s", path, loom_last_error());
  }
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.fused_runs = loom_fused_body_runs_everywhere;
  loom_graph *whole = NULL;
  loom_estimate e;
  memset(&e, 0, sizeof e);
  static const char *const no_chunk[] = {"chunk"};
  o.disabled = no_chunk;
  o.n_disabled = 1;
  int rc = loom_graph_optimize(kr->g, &o, &whole, NULL) || loom_graph_estimate(whole, NULL, &e);
  if (rc) rc = bench_fail("limits", 1, "%s: %s", path, loom_last_error());
  kr->need = e.peak_bytes;
  loom_estimate_deinit(&e);
  loom_graph_destroy(whole);
  return rc;
}

static void close_kernel(kernel_run *kr) {
  config_deinit(&kr->whole);
  for (int32_t i = 0; i < kr->n_limited; i++) config_deinit(&kr->limited[i]);
  config_deinit(&kr->searched);
  for (int32_t p = 0; p < kr->n_in; p++) loom_tensor_deinit(&kr->in[p]);
  loom_graph_destroy(kr->g);
}

static void measure_at(const limits_args *a, const loom_sched_platform *pf, kernel_run *kr, config *c,
                       double fraction, int64_t limit) {
  c->fraction = fraction;
  run_config(a, pf, kr, limit, c);
  if (c->ok && kr->whole.ok) c->diff = rel_diff(c, &kr->whole);
}

/* The kernel whole, at 1/8 (and deeper for gemm), and at the searched limit; 1 when a result
 * differs or a limit was passed; a refusal or a missed goal is printed, not an error. */
static int bench_kernel(const limits_args *a, const loom_sched_platform *pf, kernel_run *kr, int tally[2]) {
  run_config(a, pf, kr, 0, &kr->whole);
  bool good = print_config(kr, &kr->whole, "whole", 0);
  static const double deep[] = {1.0 / 8, 1.0 / 32, 1.0 / 128};
  kr->n_limited = kr->k->deep ? 3 : 1;
  for (int32_t i = 0; i < kr->n_limited; i++) {
    config *c = &kr->limited[i];
    measure_at(a, pf, kr, c, deep[i], (int64_t)((double)kr->need * deep[i]));
    char at[16];
    snprintf(at, sizeof at, "1/%d", (int)lround(1 / deep[i]));
    double goal = goal_of(kr->k, deep[i]);
    bool ran = print_config(kr, c, at, goal);
    good &= ran || c->refused;
    tally[c->ok && kr->whole.ok && kr->whole.best_s / c->best_s >= goal]++;
  }
  if (a->search > 0) {
    loom_optimize_options o;
    loom_optimize_options_init(&o);
    o.fused_runs = loom_fused_body_runs_everywhere;
    if (loom_graph_smallest_limit(pf, a->device, kr->g, a->search, &o, &kr->search)) {
      printf("%-11s %-7s   no limit within %.3gx: %s\n", kr->k->name, "search", a->search, loom_last_error());
    } else {
      measure_at(a, pf, kr, &kr->searched, (double)kr->search.limit / (double)kr->need, kr->search.limit);
      kr->searched_ok = true;
      char at[16];
      snprintf(at, sizeof at, "<=%.3gx", a->search);
      good &= print_config(kr, &kr->searched, at, 1 / (1.25 * a->search));
    }
  }
  return !good;
}

static int write_json(const limits_args *a, kernel_run *runs, int32_t n, bool calibrated) {
  FILE *f = fopen(a->json, "w");
  if (!f) return bench_fail("limits", 1, "--json %s: cannot write it", a->json);
  loom__json j;
  loom__json_init(&j, f, true);
  loom__json_begin_object(&j);
  loom__json_kv_string(&j, "device", a->device);
  loom__json_kv_int64(&j, "repeats", a->repeats);
  loom__json_kv_bool(&j, "small", a->small);
  loom__json_kv_bool(&j, "calibrated", calibrated);
  loom__json_key(&j, "kernels");
  loom__json_begin_array(&j);
  for (int32_t i = 0; i < n; i++) json_kernel(&j, &runs[i]);
  loom__json_end_array(&j);
  loom__json_end_object(&j);
  int rc = loom__json_finish(&j) != LOOM_OK;
  rc |= fclose(f) != 0;
  return rc ? bench_fail("limits", 1, "--json %s: writing failed", a->json) : 0;
}

/* The platform to predict with on `device`: its calibrated model, else its defaults
 * (*calibrated false), as loom-plan makes it. */
static loom_status open_platform(const char *device, loom_sched_platform **pf, bool *calibrated) {
  loom_context *ctx = NULL;
  loom_context_options co;
  loom_context_options_init(&co);
  co.devices = device;
  loom_status s = loom_context_create(&co, &ctx);
  if (!s) s = loom_sched_platform_from_context(ctx, device, pf);
  *calibrated = s == LOOM_OK;
  if (s == LOOM_ERR_NOT_FOUND) { /* no model file: the device's defaults, "uncalibrated" */
    int32_t index;
    loom_device_info info;
    s = loom_context_find_device(ctx, device, &index);
    if (!s) s = loom_context_device_info(ctx, index, &info);
    if (!s) s = loom_sched_platform_default(&info, pf);
  }
  loom_context_destroy(ctx);
  return s;
}

static bool wanted(const char *only, const char *name) {
  return bench_id_listed(only, name);
}

int loom_bench_limits(int argc, char **argv) {
  limits_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;
  struct stat sb;
  if (stat(a.dir, &sb) || !S_ISDIR(sb.st_mode))
    return bench_fail("limits", 2, "--dir %s: no such folder (run from the repository root, or give --dir)",
                      a.dir);
  loom_sched_platform *pf = NULL;
  bool calibrated = false;
  if (open_platform(a.device, &pf, &calibrated))
    return bench_fail("limits", 2, "--device %s: %s", a.device, loom_last_error());
  printf(
      "loom-bench limits: %s sizes on %s, best of %d runs after a warm-up; ratio = whole time / limited "
      "time;\n"
      "pred = loom_plan_predict's time%s, p/m = predicted / measured; MiB = 2^20 bytes\n",
      a.small ? "test" : "benchmark", a.device, (int)a.repeats, calibrated ? "" : " (uncalibrated)");
  print_header();
  kernel_run *runs = calloc(N_KERNELS, sizeof *runs);
  int32_t n = 0;
  int bad = 0;
  int tally[2] = {0, 0}; /* configurations that missed their goal (or did not run), met it */
  for (int32_t i = 0; runs && i < N_KERNELS && !rc; i++) {
    if (!wanted(a.only, kernels[i].name)) continue;
    rc = open_kernel(&a, &kernels[i], &runs[n]);
    n++;
    if (!rc) bad |= bench_kernel(&a, pf, &runs[n - 1], tally);
  }
  rc |= bad;
  printf("limited runs that met their goal: %d; that missed it or did not run: %d\n", tally[1], tally[0]);
  if (a.json && runs) rc |= write_json(&a, runs, n, calibrated);
  for (int32_t i = 0; runs && i < n; i++) close_kernel(&runs[i]);
  free(runs);
  loom_sched_platform_destroy(pf);
  return rc;
}
