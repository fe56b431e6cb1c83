/* loom-bench knn: IR.md's kNN (n x m points in d dims, k nearest) on cpu0, rewritten but
 * unchunked, against the same graph chunked under several limits. Prints each run's time as
 * a ratio to the unchunked run and the peak bytes the runtime's allocator measured, and
 * checks that every chunked run returns the unchunked run's neighbours. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "loom/loom.h"

static int64_t max64(int64_t a, int64_t b) {
  return a > b ? a : b;
}

typedef struct knn_args {
  int64_t n, m, d, k;
  int32_t repeats;
  int64_t limits[8];
  int32_t n_limits;
  bool l1;                 /* --metric l1: sum of |x - y| instead of the squared distance */
  const char *disabled[4]; /* --no-rewrite NAME, repeatable */
  int32_t n_disabled;
  loom_distance_form form; /* --form: the distance rewrite's form */
} knn_args;

static void usage(FILE *f) {
  fputs(
      "usage: loom-bench knn [--n N] [--m M] [--d D] [--k K] [--repeats R] [--limits L1,L2,...]\n"
      "                      [--metric l2|l1] [--no-rewrite NAME]... [--form auto|expanded|direct]\n"
      "  defaults: n = m = 50000, d = 3, k = 10, R = 3, limits 16MiB,64MiB,256MiB, l2, auto\n"
      "  --no-rewrite NAME turns a rewrite off in every run (e.g. fuse, to compare; distance\n"
      "                    leaves the graph's own sub, mul and reduce_sum over n x m x d)\n"
      "  --form F          the distance rewrite's form: auto (the direct form under a limit\n"
      "                    at d <= 4), expanded (|a|^2 + |b|^2 - 2 a.b) or direct (summed\n"
      "                    feature by feature, exact to rounding; d <= 32)\n"
      "  cpu s is the process's CPU time for a run (best of R): on a shared machine it moves\n"
      "  far less than the wall time\n"
      "  The unchunked run holds several n x m f32 arrays (18.6 GiB at the defaults' size);\n"
      "  when that passes 90% of the memory available, it is skipped and the chunked runs\n"
      "  are compared with the largest limit's run instead.\n",
      f);
}

static int parse_args(int argc, char **argv, knn_args *a) {
  *a = (knn_args){
      50000, 50000, 3, 10, 3, {16 << 20, 64 << 20, 256 << 20}, 3, false, {NULL}, 0, LOOM_DISTANCE_AUTO};
  static const char *const metrics[] = {"l2", "l1"}, *const forms[] = {"auto", "expanded", "direct"};
  static const loom_distance_form form_of[] = {LOOM_DISTANCE_AUTO, LOOM_DISTANCE_EXPANDED,
                                               LOOM_DISTANCE_DIRECT};
  static const char *const rewrites[] = {LOOM_REWRITE_NAMES};
  const char *limits = NULL, *metric = NULL, *form = NULL;
  const bench_opt opts[] = {
      BENCH_OPT_INT("n", BENCH_I64, &a->n, 1, (int64_t)1 << 40, "a point count of at least 1"),
      BENCH_OPT_INT("m", BENCH_I64, &a->m, 1, (int64_t)1 << 40, "a point count of at least 1"),
      BENCH_OPT_INT("d", BENCH_I64, &a->d, 1, 1 << 20, "dimensions from 1 to 2^20"),
      BENCH_OPT_INT("k", BENCH_I64, &a->k, 1, 1 << 20, "a neighbour count from 1 to 2^20"),
      BENCH_OPT_INT("repeats", BENCH_I32, &a->repeats, 1, 1000, "a count from 1 to 1000"),
      BENCH_OPT_TEXT("limits", &limits, "a list of byte sizes"),
      BENCH_OPT_TEXT("metric", &metric, "l2 or l1"),
      BENCH_OPT_TEXT("form", &form, "auto, expanded or direct"),
      BENCH_OPT_REPEAT("no-rewrite", a->disabled, 3, &a->n_disabled, "a rewrite's name"),
      BENCH_OPT_END,
  };
  bench_cli b = {.mode = "knn", .synopsis = "loom-bench knn [options]", .usage = usage, .opts = opts};
  int rc = bench_args(&b, argc, argv), k = 0;
  if (!rc && limits)
    rc = bench_list("knn", "--limits", limits, true, 1, INT64_MAX,
                    "byte sizes of at least 1 B, as 16MiB,64MiB (a limit of 0 holds nothing)", a->limits, 8,
                    &a->n_limits);
  if (!rc && metric && (k = loom__cli_choice("loom-bench knn", "--metric", metric, metrics, 2)) < 0) rc = 2;
  if (!rc && metric) a->l1 = k == 1;
  if (!rc && form && (k = loom__cli_choice("loom-bench knn", "--form", form, forms, 3)) < 0) rc = 2;
  if (!rc && form) a->form = form_of[k];
  for (int32_t i = 0; !rc && i < a->n_disabled; i++)
    if (loom__cli_choice("loom-bench knn", "--no-rewrite", a->disabled[i], rewrites,
                         (int)(sizeof rewrites / sizeof rewrites[0])) < 0)
      rc = 2;
  if (!rc && a->m < a->k)
    rc = bench_usage_error(&b, "--k %lld is more than --m %lld", (long long)a->k, (long long)a->m);
  return rc;
}

static loom_graph *knn_graph(const knn_args *a) {
  char text[1024];
  snprintf(text, sizeof text,
           "graph knn(x: f32[%lld,%lld], y: f32[%lld,%lld]) {\n"
           "  xe = reshape x shape=[%lld,1,%lld]\n  ye = reshape y shape=[1,%lld,%lld]\n"
           "  diff = sub xe ye\n  sq = %s diff%s\n  d2 = reduce_sum sq axes=[2]\n"
           "  val, idx = topk d2 k=%lld axis=1 largest=false\n  return val, idx\n}\n",
           (long long)a->n, (long long)a->d, (long long)a->m, (long long)a->d, (long long)a->n,
           (long long)a->d, (long long)a->m, (long long)a->d, a->l1 ? "abs" : "mul", a->l1 ? "" : " diff",
           (long long)a->k);
  loom_graph *g = NULL;
  if (loom_graph_parse(text, strlen(text), "knn.lir", &g))
    fprintf(stderr, "loom-bench knn: %s\n", loom_last_error());
  return g;
}

typedef struct result {
  bool ok;
  double best_seconds;
  double best_cpu; /* process CPU seconds of a run: what a shared machine's waiting leaves out */
  int64_t peak, estimated;
  int32_t stages;
  loom_tensor out[2];
} result;

static double cpu_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One configuration: limit 0 runs the rewritten graph whole, else chunked and split. */
static void run_config(loom_context *ctx, const loom_graph *g, const loom_tensor *in, const knn_args *a,
                       int64_t limit, result *r) {
  int32_t repeats = a->repeats;
  memset(r, 0, sizeof *r);
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.fused_runs = loom_fused_body_runs_everywhere; /* fuse first where that fits */
  o.limit = limit;
  o.distance_form = a->form;
  loom_graph *opt = NULL;
  loom_plan *plan = NULL;
  const char *off[5];
  int32_t n_off = 0;
  for (int32_t i = 0; i < a->n_disabled; i++) off[n_off++] = a->disabled[i];
  if (limit == 0) off[n_off++] = "chunk";
  o.disabled = off;
  o.n_disabled = n_off;
  /* Unchunked still runs under the memory this machine has free, so a graph too big for it
   * is refused by the allocator's meter instead of being killed by the kernel. */
  int64_t avail = (int64_t)sysconf(_SC_AVPHYS_PAGES) * (int64_t)sysconf(_SC_PAGESIZE);
  loom_runner runner = {"cpu0", limit > 0 ? limit : (avail > 0 ? avail * 9 / 10 : INT64_MAX)};
  if (loom_graph_optimize(g, &o, &opt, NULL) || loom_plan_split_by_memory(opt, &runner, 1, &plan)) {
    fprintf(stderr, "  %s\n", loom_last_error());
    loom_graph_destroy(opt);
    return;
  }
  for (int32_t rep = 0; rep < repeats; rep++) {
    loom_plan_stats stats = {0};
    loom_tensor out[2];
    double cpu0 = cpu_seconds();
    if (loom_plan_run(ctx, plan, in, 2, out, 2, &stats)) {
      fprintf(stderr, "  %s\n", loom_last_error());
      loom_plan_stats_deinit(&stats);
      break;
    }
    double cpu = cpu_seconds() - cpu0;
    if (!r->ok || stats.seconds < r->best_seconds) r->best_seconds = stats.seconds;
    if (!r->ok || cpu < r->best_cpu) r->best_cpu = cpu;
    r->peak = max64(r->peak, stats.peak_bytes);
    r->stages = stats.n_stages;
    for (int32_t s = 0; s < stats.n_stages; s++)
      r->estimated = max64(r->estimated, stats.stages[s].estimated_peak_bytes);
    loom_plan_stats_deinit(&stats);
    if (r->ok) {
      loom_tensor_deinit(&out[0]);
      loom_tensor_deinit(&out[1]);
    } else {
      r->out[0] = out[0];
      r->out[1] = out[1];
    }
    r->ok = true;
  }
  loom_plan_destroy(plan);
  loom_graph_destroy(opt);
}

/* The metric in double, from the f32 inputs. */
static double metric(const knn_args *a, const loom_tensor *in, int64_t i, int64_t j) {
  const float *x = (const float *)in[0].data + i * a->d, *y = (const float *)in[1].data + j * a->d;
  double s = 0;
  for (int64_t k = 0; k < a->d; k++) {
    double t = (double)x[k] - (double)y[k];
    s += a->l1 ? fabs(t) : t * t;
  }
  return s;
}

static double norm2(const float *p, int64_t d) {
  double s = 0;
  for (int64_t k = 0; k < d; k++) s += (double)p[k] * p[k];
  return s;
}

/* Every row's neighbours equal, or differ only where two candidates are tied to rounding: the
 * distance rewrite's two forms round differently (the expanded one to a few f32 ulps of
 * |x|^2 + |y|^2), so runs under a limit (the direct form at small d) and without one may order
 * near ties differently. *ties counts those. */
static bool same_neighbours(const knn_args *a, const loom_tensor *in, const result *r, const result *ref,
                            int64_t *ties) {
  const int64_t *p = r->out[1].data, *q = ref->out[1].data;
  *ties = 0;
  for (int64_t i = 0; i < a->n; i++)
    for (int64_t j = 0; j < a->k; j++) {
      int64_t u = p[i * a->k + j], v = q[i * a->k + j];
      if (u == v) continue;
      if (u < 0 || u >= a->m || v < 0 || v >= a->m) return false;
      double du = metric(a, in, i, u), dv = metric(a, in, i, v);
      const float *x = (const float *)in[0].data + i * a->d, *y = in[1].data;
      double scale = norm2(x, a->d) + fmax(norm2(y + u * a->d, a->d), norm2(y + v * a->d, a->d));
      if (fabs(du - dv) > 1e-6 * (scale + fmax(du, dv))) return false;
      ++*ties;
    }
  return true;
}

int loom_bench_knn(int argc, char **argv) {
  knn_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;
  loom_graph *g = knn_graph(&a);
  loom_context *ctx = NULL;
  if (!g || loom_context_create(&(loom_context_options){"cpu0"}, &ctx)) {
    fprintf(stderr, "loom-bench knn: %s\n", loom_last_error());
    loom_graph_destroy(g);
    return 1;
  }
  loom_tensor in[2] = {0};
  for (int32_t p = 0; p < 2; p++) {
    if (loom_tensor_init(&in[p], loom_value_type(g, loom_graph_param_at(g, p))) ||
        loom_tensor_fill_random(&in[p], 1, (uint64_t)p)) {
      fprintf(stderr, "loom-bench knn: inputs: %s\n", loom_last_error());
      for (int32_t q = 0; q <= p; q++) loom_tensor_deinit(&in[q]);
      loom_context_destroy(ctx);
      loom_graph_destroy(g);
      return 1;
    }
  }
  printf("kNN (%s) on cpu0: n = %lld, m = %lld, d = %lld, k = %lld; best of %d runs", a.l1 ? "L1" : "L2",
         (long long)a.n, (long long)a.m, (long long)a.d, (long long)a.k, (int)a.repeats);
  for (int32_t i = 0; i < a.n_disabled; i++) printf("%s --no-rewrite %s", i ? "," : ";", a.disabled[i]);
  if (a.form != LOOM_DISTANCE_AUTO)
    printf("; --form %s", a.form == LOOM_DISTANCE_DIRECT ? "direct" : "expanded");
  printf("\n");
  printf("%-12s %8s %10s %10s %16s %16s %9s %s\n", "limit", "stages", "seconds", "cpu s", "estimated peak",
         "measured peak", "time x", "neighbours");
  result whole, chunked[8];
  run_config(ctx, g, in, &a, 0, &whole);
  const result *ref = whole.ok ? &whole : NULL;
  for (int32_t i = 0; i < a.n_limits; i++) run_config(ctx, g, in, &a, a.limits[i], &chunked[i]);
  if (!ref)
    for (int32_t i = a.n_limits - 1; i >= 0 && !ref; i--)
      if (chunked[i].ok) ref = &chunked[i];
  rc = 0;
  for (int32_t i = -1; i < a.n_limits; i++) {
    const result *r = i < 0 ? &whole : &chunked[i];
    char lim[32], est[32], peak[32];
    if (i < 0)
      snprintf(lim, sizeof lim, "unchunked");
    else
      loom_bytes_format(a.limits[i], lim, sizeof lim);
    if (!r->ok) {
      printf("%-12s %8s did not run (see above)\n", lim, "-");
      if (i >= 0) rc = 1;
      continue;
    }
    int64_t ties = 0;
    bool same = ref && same_neighbours(&a, in, r, ref, &ties);
    rc |= !same;
    char tie_note[48] = "";
    if (same && ties) snprintf(tie_note, sizeof tie_note, " (%lld near ties ordered apart)", (long long)ties);
    printf("%-12s %8d %10.3f %10.3f %16s %16s %9.2f %s%s\n", lim, (int)r->stages, r->best_seconds,
           r->best_cpu, loom_bytes_format(r->estimated, est, sizeof est),
           loom_bytes_format(r->peak, peak, sizeof peak), r->best_seconds / ref->best_seconds,
           same ? "equal" : "DIFFER", tie_note);
  }
  if (!whole.ok) printf("(time x is relative to the largest limit: the unchunked graph did not run)\n");
  for (int32_t i = -1; i < a.n_limits; i++) {
    result *r = i < 0 ? &whole : &chunked[i];
    loom_tensor_deinit(&r->out[0]);
    loom_tensor_deinit(&r->out[1]);
  }
  loom_tensor_deinit(&in[0]);
  loom_tensor_deinit(&in[1]);
  loom_context_destroy(ctx);
  loom_graph_destroy(g);
  return rc;
}
