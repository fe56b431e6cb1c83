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
 * input), which allocates its result each call too. Loom and FFTW alternate; each side's
 * figure is the best of R timed calls after a warm-up call (Loom's warm-up makes and measures
 * its plans, or reads them from the wisdom in the cache folder). Ratios are peer time / Loom
 * time: 1.00 is as fast as the peer, above is faster. Loom's result is checked against FFTW's. */
#include <fftw3.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static int usage(FILE *f, int rc) {
  fputs(
      "usage: loom-bench fft [--reps R] [--cases LIST] [--python CMD | --no-python]\n"
      "  rows: c64[1024,4096] along axis 1; cols: c64[4096,1024] along axis 0\n"
      "  --reps R      timed calls per side after a warm-up; the best is kept (default 5)\n"
      "  --cases LIST  rows,cols (default both)\n"
      "  --python CMD  the interpreter with SciPy (default /usr/bin/python3); --no-python: none\n"
      "  Prints Loom's, FFTW's (FFTW_MEASURE, plan_many) and SciPy's (workers = threads) times\n"
      "  and the ratios peer / Loom.\n",
      f);
  return rc;
}

static int parse_args(int argc, char **argv, fft_args *a) {
  *a = (fft_args){.reps = 5};
  for (int i = 1; i < argc; i++) {
    const char *f = argv[i];
    if (!strcmp(f, "--help")) return usage(stdout, -1);
    if (!strcmp(f, "--no-python")) {
      a->no_python = true;
      continue;
    }
    const char *v = i + 1 < argc ? argv[++i] : NULL;
    if (!v) return usage(stderr, 2);
    if (!strcmp(f, "--reps")) {
      long long x = bench_whole(v, 1);
      if (x < 1 || x > 1000) return usage(stderr, 2);
      a->reps = (int32_t)x;
    } else if (!strcmp(f, "--cases")) {
      a->cases = v;
    } else if (!strcmp(f, "--python")) {
      a->python = v;
    } else {
      return usage(stderr, 2);
    }
  }
  return 0;
}

/* SciPy's best seconds for the case, or -1 (no interpreter or no SciPy). */
static double scipy_time(const fft_args *a, const fft_case *c, int threads) {
  char cmd[1024];
  snprintf(
      cmd, sizeof cmd,
      "%s -c \"import time, numpy, scipy.fft\n"
      "x = (numpy.random.rand(%lld, %lld) + 1j * numpy.random.rand(%lld, %lld)).astype(numpy.complex64)\n"
      "best = 1e9\nfor r in range(%d):\n t = time.perf_counter()\n"
      " y = scipy.fft.fft(x, axis=%d, workers=%d)\n t = time.perf_counter() - t\n"
      " best = min(best, t) if r > 0 else best\nprint(best)\" 2>/dev/null",
      a->python ? a->python : "/usr/bin/python3", (long long)c->rows, (long long)c->cols, (long long)c->rows,
      (long long)c->cols, (int)a->reps + 1, (int)c->axis, threads);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  double s = -1;
  if (fscanf(p, "%lf", &s) != 1) s = -1;
  if (pclose(p) != 0) s = -1;
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

/* Loom's and FFTW's best seconds for the case (and the check of Loom's first result). */
static int loom_and_fftw(const fft_args *a, const fft_case *c, loom_context *ctx, double *loom_s,
                         double *fftw_s, double *err) {
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
  *loom_s = *fftw_s = 0;
  for (int32_t r = 0; !rc && r < a->reps; r++) {
    double tl = bench_op_run(ctx, "cpu0", &op), tf = fftw_run(p, op.in[0].data, count, NULL);
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
    double loom_s = 0, fftw_s = 0, err = 0;
    if (loom_and_fftw(&a, c, ctx, &loom_s, &fftw_s, &err)) {
      rc = 1;
      continue;
    }
    double scipy_s = a.no_python ? -1 : scipy_time(&a, c, threads);
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
