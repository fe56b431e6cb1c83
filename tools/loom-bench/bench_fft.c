/* loom-bench fft: batched complex FFTs through Loom on cpu0 beside FFTW's measured plan called
 * directly and SciPy's pocketfft, timed in the same run (issue 35, acceptance 1).
 *
 *   rows  c64[1024,4096], fft along axis 1 (1,024 transforms of 4,096 points, each contiguous)
 *   cols  c64[4096,1024], fft along axis 0 (1,024 transforms of 4,096 points, 1,024 apart)
 *
 * Loom runs a one-op graph from host memory into a new result each call, as a user's call
 * would; FFTW (fftwf_plan_many_dft, FFTW_MEASURE, OpenMP threads as many as Loom's) is planned
 * once outside the timing and writes into a new fftwf_malloc'ed array each call; SciPy runs
 * scipy.fft.fft(x, axis=A, workers=T) in a child python3 on the same shape (its own random
 * input), which allocates its result each call too. The three alternate call by call; each
 * side's figure is the best of R timed calls after a warm-up call (Loom's warm-up makes and measures
 * its plans, or reads them from the wisdom in the cache folder). Ratios are peer time / Loom
 * time: 1.00 is as fast as the peer, above is faster. Loom's result is checked against FFTW's. */
#include <fcntl.h>
#include <fftw3.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "measure.h"

typedef struct fft_case {
  const char *name;
  int64_t rows, cols;
  int32_t axis;
} fft_case;

static const fft_case fft_cases[] = {
    {"rows", 1024, 4096, 1},
    {"cols", 4096, 1024, 0},
};

typedef struct fft_args {
  int32_t reps;
  const char *cases;  /* "rows,cols"; NULL: both */
  const char *python; /* NULL: /usr/bin/python3 */
  bool no_python;
} fft_args;

static void usage(FILE *f) {
  fputs(
      "usage: loom-bench fft [--reps R] [--cases LIST] [--python CMD | --no-python]\n"
      "  rows: c64[1024,4096] along axis 1; cols: c64[4096,1024] along axis 0\n"
      "  --reps R      timed calls per side after a warm-up; the best is kept (default 5)\n"
      "  --cases LIST  rows,cols (default both)\n"
      "  --python CMD  the interpreter with SciPy (default /usr/bin/python3); --no-python: none\n"
      "  Prints Loom's, FFTW's (FFTW_MEASURE, plan_many) and SciPy's (workers = threads) times\n"
      "  and the ratios peer / Loom.\n",
      f);
}

static int parse_args(int argc, char **argv, fft_args *a) {
  *a = (fft_args){.reps = 5};
  const bench_opt opts[] = {
      BENCH_OPT_INT("reps", BENCH_I32, &a->reps, 1, 1000, "a count from 1 to 1000"),
      BENCH_OPT_TEXT("cases", &a->cases, "rows, cols or rows,cols"),
      BENCH_OPT_TEXT("python", &a->python, "an interpreter"),
      BENCH_OPT_FLAG("no-python", &a->no_python),
      BENCH_OPT_END,
  };
  bench_cli b = {.mode = "fft",
                 .synopsis = "loom-bench fft [--reps R] [--cases LIST] [--python CMD | --no-python]",
                 .usage = usage,
                 .opts = opts};
  return bench_args(&b, argc, argv);
}

/* SciPy's side: a child python3 holding the case's input, which runs scipy.fft.fft once each
 * time a line reaches its stdin and prints the seconds it took, so its calls alternate with
 * Loom's and FFTW's and a busy machine slows all three alike. */
typedef struct scipy_side {
  pid_t pid;
  FILE *to, *from;
} scipy_side;

static void scipy_close(scipy_side *p) {
  if (p->to) fclose(p->to);
  if (p->from) fclose(p->from);
  if (p->pid > 0) waitpid(p->pid, NULL, 0);
  memset(p, 0, sizeof *p);
}

/* Starts the child; false (and nothing left open) when it cannot be started. */
static bool scipy_open(scipy_side *p, const fft_args *a, const fft_case *c, int threads) {
  char script[1024];
  snprintf(
      script, sizeof script,
      "import sys, time, numpy, scipy.fft\n"
      "x = (numpy.random.rand(%lld, %lld) + 1j * numpy.random.rand(%lld, %lld)).astype(numpy.complex64)\n"
      "print('ready', flush=True)\n"
      "for line in sys.stdin:\n"
      " t = time.perf_counter()\n y = scipy.fft.fft(x, axis=%d, workers=%d)\n"
      " print(time.perf_counter() - t, flush=True)\n",
      (long long)c->rows, (long long)c->cols, (long long)c->rows, (long long)c->cols, (int)c->axis, threads);
  int in[2], out[2];
  memset(p, 0, sizeof *p);
  if (pipe(in)) return false;
  if (pipe(out)) {
    close(in[0]);
    close(in[1]);
    return false;
  }
  fflush(stdout);
  p->pid = fork();
  if (p->pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, 2);
    close(in[0]);
    close(in[1]);
    close(out[0]);
    close(out[1]);
    const char *py = a->python ? a->python : "/usr/bin/python3";
    execlp(py, py, "-c", script, (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  p->to = p->pid > 0 ? fdopen(in[1], "w") : NULL;
  p->from = p->pid > 0 ? fdopen(out[0], "r") : NULL;
  if (!p->to) close(in[1]);
  if (!p->from) close(out[0]);
  char word[16] = "";
  if (!p->to || !p->from || fscanf(p->from, "%15s", word) != 1 || strcmp(word, "ready") != 0) {
    scipy_close(p);
    return false;
  }
  return true;
}

/* One SciPy call's seconds, or -1. */
static double scipy_run(scipy_side *p) {
  double s = -1;
  if (!p->pid || fputs("run\n", p->to) == EOF || fflush(p->to) || fscanf(p->from, "%lf", &s) != 1) return -1;
  return s;
}

/* FFTW's measured plan of the case, made on stand-ins (FFTW_MEASURE writes its arrays). */
static fftwf_plan fftw_plan_case(const fft_case *c) {
  size_t count = (size_t)(c->rows * c->cols);
  fftwf_complex *a = fftwf_malloc(count * sizeof *a), *b = fftwf_malloc(count * sizeof *b);
  fftwf_plan p = NULL;
  if (a && b) {
    int n = (int)(c->axis == 1 ? c->cols : c->rows), howmany = (int)(c->axis == 1 ? c->rows : c->cols);
    int stride = c->axis == 1 ? 1 : (int)c->cols, dist = c->axis == 1 ? n : 1;
    p = fftwf_plan_many_dft(1, &n, howmany, a, NULL, stride, dist, b, NULL, stride, dist, FFTW_FORWARD,
                            FFTW_MEASURE);
  }
  fftwf_free(a);
  fftwf_free(b);
  return p;
}

/* One FFTW call into a new array: its seconds (-1 out of memory); *keep receives the result
 * when not NULL (the caller frees it), else it is freed. */
static double fftw_run(fftwf_plan p, fftwf_complex *x, size_t count, fftwf_complex **keep) {
  double t = bench_now();
  fftwf_complex *y = fftwf_malloc(count * sizeof *y);
  if (!y) return -1;
  fftwf_execute_dft(p, x, y);
  t = bench_now() - t;
  if (keep)
    *keep = y;
  else
    fftwf_free(y);
  return t;
}

/* The largest |Loom - FFTW| over the largest |FFTW|. */
static double rel_error(const float *loom, const float *ref, size_t reals) {
  double diff = 0, big = 0;
  for (size_t i = 0; i < reals; i++) {
    diff = fmax(diff, fabs((double)loom[i] - (double)ref[i]));
    big = fmax(big, fabs((double)ref[i]));
  }
  return big > 0 ? diff / big : diff;
}

/* Loom's, FFTW's and SciPy's best seconds for the case, their calls alternating (SciPy's 0 where
 * py is not running), and the check of Loom's first result. */
static int three_sides(const fft_args *a, const fft_case *c, loom_context *ctx, scipy_side *py,
                       double *loom_s, double *fftw_s, double *scipy_s, double *err) {
  char text[256];
  snprintf(text, sizeof text, "graph fft(x: c64[%lld,%lld]) {\n  y = fft x axis=%d\n  return y\n}\n",
           (long long)c->rows, (long long)c->cols, (int)c->axis);
  bench_op op;
  if (bench_op_open(&op, text, 7)) {
    fprintf(stderr, "loom-bench fft: %s\n", loom_last_error());
    return 1;
  }
  fftwf_plan p = fftw_plan_case(c);
  size_t count = (size_t)(c->rows * c->cols);
  int rc = p ? 0 : 1;
  if (!p) fprintf(stderr, "loom-bench fft: FFTW could not plan the %s case\n", c->name);
  /* the check: Loom's result against FFTW's on the same input */
  loom_tensor out = {0};
  fftwf_complex *ref = NULL;
  if (!rc && (loom_graph_run_on_device(ctx, "cpu0", op.g, op.in, 1, &out, 1, NULL) ||
              fftw_run(p, op.in[0].data, count, &ref) < 0)) {
    fprintf(stderr, "loom-bench fft: %s: %s\n", c->name, loom_last_error());
    rc = 1;
  }
  if (!rc) *err = rel_error(out.data, (const float *)ref, 2 * count);
  loom_tensor_deinit(&out);
  fftwf_free(ref);
  *loom_s = *fftw_s = *scipy_s = 0;
  if (py->pid && scipy_run(py) < 0) scipy_close(py); /* its warm-up */
  for (int32_t r = 0; !rc && r < a->reps; r++) {
    double tl = bench_op_run(ctx, "cpu0", &op), tf = fftw_run(p, op.in[0].data, count, NULL);
    double ts = py->pid ? scipy_run(py) : -1;
    if (ts > 0) bench_keep(scipy_s, ts);
    if (tl < 0 || tf < 0) {
      fprintf(stderr, "loom-bench fft: %s: %s\n", c->name, tl < 0 ? loom_last_error() : "out of memory");
      rc = 1;
    }
    bench_keep(loom_s, tl);
    bench_keep(fftw_s, tf);
  }
  if (p) fftwf_destroy_plan(p);
  bench_op_close(&op);
  return rc;
}

static void print_ratio(double peer, double loom) {
  if (peer > 0)
    printf(" %8.2f", peer / loom);
  else
    printf(" %8s", "-");
}

int loom_bench_fft(int argc, char **argv) {
  fft_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;
  int threads = omp_get_max_threads();
  signal(SIGPIPE, SIG_IGN); /* a SciPy child that dies fails its call, not this process */
  fftwf_init_threads();
  fftwf_plan_with_nthreads(threads);
  loom_context_options co;
  loom_context_options_init(&co);
  co.devices = "cpu0";
  loom_context *ctx = NULL;
  if (loom_context_create(&co, &ctx)) {
    fprintf(stderr, "loom-bench fft: %s\n", loom_last_error());
    return 1;
  }
  printf("batched c64 FFTs on cpu0, %d threads, best of %d; times in ms, ratios peer / Loom\n", threads,
         (int)a.reps);
  printf("%-26s %9s %9s %9s %8s %8s %9s\n", "case", "Loom", "FFTW", "SciPy", "FFTW/L", "SciPy/L", "error");
  for (size_t i = 0; i < sizeof fft_cases / sizeof fft_cases[0]; i++) {
    const fft_case *c = &fft_cases[i];
    if (!bench_id_listed(a.cases, c->name)) continue;
    double loom_s = 0, fftw_s = 0, scipy_s = 0, err = 0;
    scipy_side py;
    memset(&py, 0, sizeof py);
    if (!a.no_python && !scipy_open(&py, &a, c, threads))
      fprintf(stderr, "loom-bench fft: no SciPy side (%s with scipy.fft did not start)\n",
              a.python ? a.python : "/usr/bin/python3");
    int bad = three_sides(&a, c, ctx, &py, &loom_s, &fftw_s, &scipy_s, &err);
    scipy_close(&py);
    if (bad) {
      rc = 1;
      continue;
    }
    char what[64];
    snprintf(what, sizeof what, "%s c64[%lld,%lld] axis=%d", c->name, (long long)c->rows, (long long)c->cols,
             (int)c->axis);
    printf("%-26s %9.2f %9.2f", what, loom_s * 1e3, fftw_s * 1e3);
    if (scipy_s > 0)
      printf(" %9.2f", scipy_s * 1e3);
    else
      printf(" %9s", "-");
    print_ratio(fftw_s, loom_s);
    print_ratio(scipy_s, loom_s);
    printf(" %9.1e\n", err);
  }
  loom_context_destroy(ctx);
  return rc;
}
