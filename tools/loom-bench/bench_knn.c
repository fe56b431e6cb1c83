/* loom-bench knn: IR.md's kNN (n x m points in d dims, k nearest) on cpu0, rewritten but
 * unchunked, against the same graph chunked under several limits. Prints each run's time as
 * a ratio to the unchunked run and the peak bytes the runtime's allocator measured, and
 * checks that every chunked run returns the unchunked run's neighbours. Beside them, in the
 * same process run, FAISS's IndexFlatL2 (the peer of issue 35) searches the same points with
 * as many threads: its time, Loom's time over it, and its neighbours against Loom's. The rate
 * column counts 3d flops per pair of points (d subs, d muls, d adds, as issue 35 counts), over
 * the FMA peak measured first (the suite's loop, suite_host_peaks). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <omp.h>

#include "bench.h"
#include "loom/internal/fused.h"
#include "loom/loom.h"
#include "suite.h"

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
  bool faiss;              /* --peer faiss (default) or none */
  const char *python;      /* --python: the interpreter the peer runs in */
  bool no_whole;           /* --no-unchunked: the limits' runs only */
} knn_args;

static void usage(FILE *f) {
  fputs(
      "usage: loom-bench knn [--n N] [--m M] [--d D] [--k K] [--repeats R] [--limits L1,L2,...]\n"
      "                      [--metric l2|l1] [--no-rewrite NAME]... [--form auto|expanded|direct]\n"
      "                      [--peer faiss|none] [--python PROG] [--no-unchunked]\n"
      "  defaults: n = m = 50000, d = 3, k = 10, R = 3, limits 16MiB,64MiB,256MiB, l2, auto\n"
      "  --no-rewrite NAME turns a rewrite off in every run (e.g. fuse, to compare; distance\n"
      "                    leaves the graph's own sub, mul and reduce_sum over n x m x d)\n"
      "  --form F          the distance rewrite's form: auto (the direct form under a limit\n"
      "                    at d <= 4), expanded (|a|^2 + |b|^2 - 2 a.b) or direct (summed\n"
      "                    feature by feature, exact to rounding; d <= 32)\n"
      "  --no-unchunked    skip the run without a limit (neighbours then compared with the\n"
      "                    largest limit's run)\n"
      "  --peer faiss      also time FAISS's IndexFlatL2 (k nearest, L2 only) on the same points\n"
      "                    with Loom's thread count, through PROG (default /usr/bin/python3);\n"
      "                    'faiss x' is FAISS's best time over Loom's (goal of issue 35 at\n"
      "                    d = 128 under 64 MiB: >= 2). Without FAISS it says so and goes on.\n"
      "  GFLOP/s counts 3d flops per pair; 'of peak' divides it by the FMA loop's rate\n"
      "  measured first on every thread (as `loom-bench suite` measures it)\n"
      "  cpu s is the process's CPU time for a run (best of R): on a shared machine it moves\n"
      "  far less than the wall time\n"
      "  The unchunked run holds several n x m f32 arrays (18.6 GiB at the defaults' size);\n"
      "  when that passes 90% of the memory available, it is skipped and the chunked runs\n"
      "  are compared with the largest limit's run instead.\n",
      f);
}

static int parse_args(int argc, char **argv, knn_args *a) {
  *a = (knn_args){50000,
                  50000,
                  3,
                  10,
                  3,
                  {16 << 20, 64 << 20, 256 << 20},
                  3,
                  false,
                  {NULL},
                  0,
                  LOOM_DISTANCE_AUTO,
                  true,
                  "/usr/bin/python3",
                  false};
  static const char *const metrics[] = {"l2", "l1"}, *const forms[] = {"auto", "expanded", "direct"};
  static const loom_distance_form form_of[] = {LOOM_DISTANCE_AUTO, LOOM_DISTANCE_EXPANDED,
                                               LOOM_DISTANCE_DIRECT};
  static const char *const rewrites[] = {LOOM_REWRITE_NAMES};
  static const char *const peers[] = {"faiss", "none"};
  const char *limits = NULL, *metric = NULL, *form = NULL, *peer = NULL;
  const bench_opt opts[] = {
      BENCH_OPT_INT("n", BENCH_I64, &a->n, 1, (int64_t)1 << 40, "a point count of at least 1"),
      BENCH_OPT_INT("m", BENCH_I64, &a->m, 1, (int64_t)1 << 40, "a point count of at least 1"),
      BENCH_OPT_INT("d", BENCH_I64, &a->d, 1, 1 << 20, "dimensions from 1 to 2^20"),
      BENCH_OPT_INT("k", BENCH_I64, &a->k, 1, 1 << 20, "a neighbour count from 1 to 2^20"),
      BENCH_OPT_INT("repeats", BENCH_I32, &a->repeats, 1, 1000, "a count from 1 to 1000"),
      BENCH_OPT_TEXT("limits", &limits, "a list of byte sizes"),
      BENCH_OPT_TEXT("metric", &metric, "l2 or l1"),
      BENCH_OPT_TEXT("form", &form, "auto, expanded or direct"),
      BENCH_OPT_TEXT("peer", &peer, "faiss or none"),
      BENCH_OPT_TEXT("python", &a->python, "a program"),
      BENCH_OPT_FLAG("no-unchunked", &a->no_whole),
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
  if (!rc && peer && (k = loom__cli_choice("loom-bench knn", "--peer", peer, peers, 2)) < 0) rc = 2;
  if (!rc && peer) a->faiss = k == 0;
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
  /* fuse first where that fits; the plan's one runner is cpu0, so what cpu0 runs fused (a topk
   * over GEMM tiles, which the GPU kernel generator leaves op by op) may grow its pieces */
  o.fused_runs = loom__fused_body_runs_on_cpu;
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
    loom_run_stats stats = {0};
    loom_tensor out[2];
    double cpu0 = cpu_seconds();
    if (loom_run(ctx, plan, NULL, in, 2, out, 2, &stats)) {
      fprintf(stderr, "  %s\n", loom_last_error());
      loom_run_stats_deinit(&stats);
      break;
    }
    double cpu = cpu_seconds() - cpu0;
    if (!r->ok || stats.seconds < r->best_seconds) r->best_seconds = stats.seconds;
    if (!r->ok || cpu < r->best_cpu) r->best_cpu = cpu;
    r->peak = max64(r->peak, stats.peak_bytes);
    r->stages = stats.n_stages;
    for (int32_t s = 0; s < stats.n_stages; s++)
      r->estimated = max64(r->estimated, stats.stages[s].estimated_peak_bytes);
    loom_run_stats_deinit(&stats);
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

/* ---- FAISS's IndexFlatL2, the peer ---- */

/* Python defining run(): FAISS's exact search for the k nearest rows of y to each row of x, read
 * from the .npy files in dir, on `threads` OpenMP threads; at exit the last search's neighbours
 * go to dir/faiss_idx.npy, outside the timed calls. */
static void faiss_setup(const knn_args *a, const char *dir, int threads, char *buf, size_t size) {
  snprintf(buf, size,
           "import atexit, numpy, faiss\nfaiss.omp_set_num_threads(%d)\n"
           "x = numpy.load('%s/x.npy')\ny = numpy.load('%s/y.npy')\n"
           "index = faiss.IndexFlatL2(%lld)\nindex.add(y)\nI = None\n"
           "def run():\n global I\n D, I = index.search(x, %lld)\n"
           "def save():\n if I is not None: numpy.save('%s/faiss_idx.npy', I)\n"
           "atexit.register(save)\n",
           threads, dir, dir, (long long)a->d, (long long)a->k, dir);
}

/* The peer's best of R timed searches after one warm-up, and its neighbours in r->out[1]; false
 * with the reason in why when it does not run (no FAISS, an L1 metric, no room for the files). */
static bool faiss_run(const knn_args *a, const loom_tensor *in, int threads, result *r, char *why,
                      size_t size) {
  memset(r, 0, sizeof *r);
  if (a->l1) return snprintf(why, size, "IndexFlatL2 is the L2 metric's"), false;
  if (bench_python(a->python, "import faiss; print(0)") < 0)
    return snprintf(why, size, "%s cannot import faiss (Debian: python3-faiss)", a->python), false;
  char dir[] = "/tmp/loom-bench-knn-XXXXXX", px[64], py[64], pi[64], setup[1024];
  if (!mkdtemp(dir)) return snprintf(why, size, "no temporary folder in /tmp"), false;
  snprintf(px, sizeof px, "%s/x.npy", dir);
  snprintf(py, sizeof py, "%s/y.npy", dir);
  snprintf(pi, sizeof pi, "%s/faiss_idx.npy", dir);
  bool ok = !loom_tensor_save_npy(px, &in[0]) && !loom_tensor_save_npy(py, &in[1]);
  if (!ok) snprintf(why, size, "the points as .npy: %s", loom_last_error());
  faiss_setup(a, dir, threads, setup, sizeof setup);
  bench_py child = {0};
  if (ok && !(ok = bench_py_open(&child, a->python, setup)))
    snprintf(why, size, "%s failed to load the points into FAISS", a->python);
  for (int32_t rep = 0; ok && rep <= a->repeats; rep++) {
    double t = bench_py_call(&child), c = child.last_cpu;
    if (!(ok = t >= 0)) snprintf(why, size, "a FAISS search failed");
    if (ok && rep > 0 && (!r->ok || t < r->best_seconds)) r->best_seconds = t;
    if (ok && rep > 0 && (!r->ok || c < r->best_cpu)) r->best_cpu = c;
    r->ok = ok && rep > 0;
  }
  if (child.pid) bench_py_close(&child);
  if (ok && (ok = !loom_tensor_load_npy(pi, &r->out[1])) == false)
    snprintf(why, size, "FAISS's neighbours: %s", loom_last_error());
  r->ok = ok;
  unlink(px);
  unlink(py);
  unlink(pi);
  rmdir(dir);
  return ok;
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
  suite_peaks peaks;
  suite_host_peaks(1 << 20, &peaks);
  double flops = 3.0 * (double)a.d * (double)a.n * (double)a.m;
  result whole, chunked[8], peer = {0};
  char peer_why[256] = "";
  if (a.no_whole)
    memset(&whole, 0, sizeof whole);
  else
    run_config(ctx, g, in, &a, 0, &whole);
  const result *ref = whole.ok ? &whole : NULL;
  for (int32_t i = 0; i < a.n_limits; i++) run_config(ctx, g, in, &a, a.limits[i], &chunked[i]);
  if (!ref)
    for (int32_t i = a.n_limits - 1; i >= 0 && !ref; i--)
      if (chunked[i].ok) ref = &chunked[i];
  bool have_peer = a.faiss && faiss_run(&a, in, omp_get_max_threads(), &peer, peer_why, sizeof peer_why);
  printf("%-12s %8s %10s %10s %16s %16s %9s %8s %8s %8s %s\n", "limit", "stages", "seconds", "cpu s",
         "estimated peak", "measured peak", "time x", "GFLOP/s", "of peak", "faiss x", "neighbours");
  rc = 0;
  for (int32_t i = -1; i <= a.n_limits; i++) {
    const result *r = i < 0 ? &whole : i < a.n_limits ? &chunked[i] : &peer;
    char lim[32], est[32], peak[32], vs[16] = "-";
    if (i == a.n_limits && !have_peer) break;
    if (i < 0 && a.no_whole) continue;
    if (i < 0)
      snprintf(lim, sizeof lim, "unchunked");
    else if (i == a.n_limits)
      snprintf(lim, sizeof lim, "FAISS");
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
    if (have_peer && i < a.n_limits) snprintf(vs, sizeof vs, "%.2f", peer.best_seconds / r->best_seconds);
    double rate = flops / r->best_seconds * 1e-9;
    if (i == a.n_limits)
      printf("%-12s %8s %10.3f %10.3f %16s %16s %9.2f %8.1f %7.1f%% %8s %s%s\n", lim, "-", r->best_seconds,
             r->best_cpu, "-", "-", r->best_seconds / ref->best_seconds, rate, 100 * rate / peaks.gflops_f32,
             vs, same ? "equal" : "DIFFER", tie_note);
    else
      printf("%-12s %8d %10.3f %10.3f %16s %16s %9.2f %8.1f %7.1f%% %8s %s%s\n", lim, (int)r->stages,
             r->best_seconds, r->best_cpu, loom_bytes_format(r->estimated, est, sizeof est),
             loom_bytes_format(r->peak, peak, sizeof peak), r->best_seconds / ref->best_seconds, rate,
             100 * rate / peaks.gflops_f32, vs, same ? "equal" : "DIFFER", tie_note);
  }
  printf("FMA peak: %.1f GFLOP/s (%s); flops counted: 3d per pair, %.3g in all\n", peaks.gflops_f32,
         peaks.fma_source, flops);
  if (a.faiss && !have_peer) printf("FAISS: not run: %s\n", peer_why);
  if (have_peer)
    printf(
        "(faiss x: FAISS IndexFlatL2's best time over Loom's, %d threads each; its neighbours are\n"
        " compared with Loom's as the limits' are)\n",
        omp_get_max_threads());
  if (!whole.ok)
    printf("(time x is relative to the largest limit: the unchunked graph %s)\n",
           a.no_whole ? "was not run (--no-unchunked)" : "did not run");
  for (int32_t i = -1; i <= a.n_limits; i++) {
    result *r = i < 0 ? &whole : i < a.n_limits ? &chunked[i] : &peer;
    if (i == a.n_limits && !a.faiss) break;
    loom_tensor_deinit(&r->out[0]);
    loom_tensor_deinit(&r->out[1]);
  }
  loom_tensor_deinit(&in[0]);
  loom_tensor_deinit(&in[1]);
  loom_context_destroy(ctx);
  loom_graph_destroy(g);
  return rc;
}
