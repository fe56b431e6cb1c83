/* loom-bench gemm: one Loom call of a dot against the same product in NumPy (issue 35, point
 * 5: one Loom call is never slower than the same library call from NumPy): SGEMM 4096^3 and
 * DGEMM 2048^3 by default. Three sides, one call each per round, alternating (so a busy machine
 * slows them alike), best of R rounds after a warm-up call each:
 *   Loom     a one-op graph `dot a b` run on cpu0 from host tensors into a new result, as
 *            loom-run and loom_run do
 *   OpenBLAS cblas_sgemm/dgemm of the OpenBLAS Loom links, called here into a new array: what
 *            Loom's call costs around the library
 *   NumPy    `a @ b` in a python3 child answering call by call through a pipe (its own inputs of
 *            the same shape and dtype, its own BLAS: Debian's libblas.so.3 alternative)
 * The ratio NumPy / Loom is >= 1 where Loom's call is as fast. Each side's CPU seconds per call
 * (every thread of its process) are printed beside its wall time, and the load average before
 * and after: other work on the machine moves every figure, the wall times most. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "measure.h"

enum { GEMM_MAX_CASES = 8 };

typedef struct gemm_case {
  loom_dtype dtype; /* f32 or f64 */
  int64_t n;
} gemm_case;

typedef struct gemm_args {
  gemm_case cases[GEMM_MAX_CASES];
  int32_t n_cases, repeats;
  const char *python;
} gemm_args;

static void usage(FILE *f) {
  fputs(
      "usage: loom-bench gemm [--case f32:N|f64:N]... [--repeats R] [--python PROGRAM]\n"
      "  --case T:N       an N x N x N product of dtype T (repeatable; default f32:4096 and f64:2048)\n"
      "  --repeats R      rounds after the warm-up, one call of each side per round (default 5)\n"
      "  --python PROGRAM the interpreter with NumPy (default /usr/bin/python3)\n"
      "  Prints each side's best seconds and GFLOP/s, NumPy / Loom and OpenBLAS / Loom.\n",
      f);
}

static int parse_case(const char *text, gemm_case *c) {
  int64_t n = 0;
  const char *colon = strchr(text, ':');
  if (!colon || !loom__cli_parse_int(colon + 1, 1, 16384, &n)) return -1;
  if (colon - text == 3 && strncmp(text, "f32", 3) == 0)
    c->dtype = LOOM_F32;
  else if (colon - text == 3 && strncmp(text, "f64", 3) == 0)
    c->dtype = LOOM_F64;
  else
    return -1;
  c->n = n;
  return 0;
}

static int parse_args(int argc, char **argv, gemm_args *a) {
  memset(a, 0, sizeof *a);
  a->repeats = 5;
  a->python = "/usr/bin/python3";
  const char *texts[GEMM_MAX_CASES];
  int32_t n_texts = 0;
  const bench_opt opts[] = {
      BENCH_OPT_REPEAT("case", texts, GEMM_MAX_CASES, &n_texts, "T:N, as f32:4096"),
      BENCH_OPT_INT("repeats", BENCH_I32, &a->repeats, 1, 100, "a count from 1 to 100"),
      BENCH_OPT_TEXT("python", &a->python, "a program"),
      BENCH_OPT_END,
  };
  bench_cli b = {.mode = "gemm", .synopsis = "loom-bench gemm [options]", .usage = usage, .opts = opts};
  int rc = bench_args(&b, argc, argv);
  if (rc) return rc;
  for (int32_t i = 0; i < n_texts; i++)
    if (parse_case(texts[i], &a->cases[a->n_cases++]))
      return loom__cli_bad_value("loom-bench gemm", "--case", texts[i],
                                 "T:N, T f32 or f64, N from 1 to 16384");
  if (a->n_cases == 0) {
    a->cases[0] = (gemm_case){LOOM_F32, 4096};
    a->cases[1] = (gemm_case){LOOM_F64, 2048};
    a->n_cases = 2;
  }
  return 0;
}

/* ---- NumPy: a child answering call by call (bench_py) ---- */

static bool numpy_open(bench_py *p, const char *python, const gemm_case *c) {
  char setup[512];
  long long n = (long long)c->n;
  const char *t = c->dtype == LOOM_F32 ? "float32" : "float64";
  snprintf(setup, sizeof setup,
           "import numpy\na = numpy.random.rand(%lld, %lld).astype('%s')\n"
           "b = numpy.random.rand(%lld, %lld).astype('%s')\n"
           "def run():\n c = a @ b\n",
           n, n, t, n, n, t);
  return bench_py_open(p, python, setup);
}

/* ---- OpenBLAS called directly, into a new array as Loom's call makes one ---- */

static double blas_run(const gemm_case *c, const bench_op *op) {
  int n = (int)c->n;
  size_t bytes = (size_t)(c->n * c->n) * (c->dtype == LOOM_F32 ? 4 : 8);
  double t = bench_now();
  void *out = malloc(bytes);
  if (!out) return -1;
  if (c->dtype == LOOM_F32)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, op->in[0].data, n, op->in[1].data,
                n, 0.0f, out, n);
  else
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, op->in[0].data, n, op->in[1].data, n,
                0.0, out, n);
  t = bench_now() - t;
  free(out);
  return t;
}

static double load_average(void) {
  double l = -1;
  FILE *f = fopen("/proc/loadavg", "r");
  if (f && fscanf(f, "%lf", &l) != 1) l = -1;
  if (f) fclose(f);
  return l;
}

static double best(double cur, double t) {
  return t >= 0 && (cur < 0 || t < cur) ? t : cur;
}

/* This process's CPU seconds, every thread's: beside the wall time, what a call spent, which a
 * loaded machine inflates far less than the wall time. */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The best wall and CPU seconds of one side over the counted rounds. */
typedef struct side {
  double wall, cpu;
} side;

static void keep(side *s, double wall, double cpu) {
  s->wall = best(s->wall, wall);
  if (wall >= 0) s->cpu = best(s->cpu, cpu);
}

/* One case: rounds of Loom, OpenBLAS, NumPy; prints its line. 1 when Loom's side failed. */
static int run_case(const gemm_args *a, const gemm_case *c, loom_context *ctx) {
  char text[256];
  const char *dt = loom_dtype_name(c->dtype);
  long long n = (long long)c->n;
  snprintf(text, sizeof text,
           "graph gemm(a: %s[%lld,%lld], b: %s[%lld,%lld]) {\n  c = dot a b\n  return c\n}\n", dt, n, n, dt,
           n, n);
  bench_op op;
  if (bench_op_open(&op, text, 3)) return bench_fail("gemm", 1, "%s", loom_last_error());
  bench_py py;
  bool have_py = numpy_open(&py, a->python, c);
  side L = {-1, -1}, B = {-1, -1}, N = {-1, -1};
  int rc = 0;
  for (int32_t r = 0; r <= a->repeats && !rc; r++) { /* round 0 warms each side up */
    double c0 = cpu_now();
    double t = bench_op_run(ctx, "cpu0", &op);
    double c1 = cpu_now();
    if (t < 0) rc = bench_fail("gemm", 1, "%s", loom_last_error());
    double b = blas_run(c, &op);
    double c2 = cpu_now();
    double p = have_py ? bench_py_call(&py) : -1;
    if (r == 0) continue;
    keep(&L, t, c1 - c0);
    keep(&B, b, c2 - c1);
    keep(&N, p, py.last_cpu);
  }
  if (have_py) bench_py_close(&py);
  bench_op_close(&op);
  if (rc) return rc;
  double flop = 2.0 * (double)c->n * (double)c->n * (double)c->n;
  printf("%-4s %5lld^3  Loom %8.2f ms (cpu %8.2f) %6.1f GFLOP/s  OpenBLAS %8.2f ms (cpu %8.2f) %5.3f  ", dt,
         n, L.wall * 1e3, L.cpu * 1e3, flop / L.wall * 1e-9, B.wall * 1e3, B.cpu * 1e3, B.wall / L.wall);
  if (N.wall > 0)
    printf("NumPy %8.2f ms (cpu %8.2f) %5.3f\n", N.wall * 1e3, N.cpu * 1e3, N.wall / L.wall);
  else
    printf("NumPy not measured (no %s with numpy)\n", a->python);
  return 0;
}

int loom_bench_gemm(int argc, char **argv) {
  gemm_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;
  loom_context_options co;
  loom_context_options_init(&co);
  co.devices = "cpu0";
  loom_context *ctx = NULL;
  if (loom_context_create(&co, &ctx)) return bench_fail("gemm", 1, "%s", loom_last_error());
  double load0 = load_average();
  printf(
      "gemm on cpu0, best of %d rounds (Loom, OpenBLAS, NumPy alternating); ratios are the other side's "
      "time / Loom's\n",
      (int)a.repeats);
  for (int32_t i = 0; i < a.n_cases && !rc; i++) rc = run_case(&a, &a.cases[i], ctx);
  printf("load average %.2f before, %.2f after\n", load0, load_average());
  loom_context_destroy(ctx);
  return rc;
}
