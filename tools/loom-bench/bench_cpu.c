/* loom-bench cpu: the cpu backend against the libraries it calls, on the same inputs in the
 * same process (issue 14, point 5):
 *   sgemm  C = A.B, f32, N x N x N (default 2048): a one-op graph through Loom vs
 *          cblas_sgemm called directly; the first call in a fresh process (each side in a
 *          child of its own, forked before either touched BLAS: thread start included) and
 *          the best of R calls after it
 *   fft    a batch of B complex f32 FFTs of length L along the last axis (default 1024 x 4096):
 *          through Loom vs fftwf_plan_many_dft with FFTW's OpenMP threads (the plan made once,
 *          outside the timing)
 * Both sides run from host memory into a new result each call, as a user's call would (the
 * library side mallocs its output; Loom hands over a new tensor), so fresh pages cost both the
 * same. The ratio is library time / Loom time (1.00: as fast as the library called directly).
 * The sides alternate, so a busy machine slows both. */
#include <cblas.h>
#include <fftw3.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "measure.h"

typedef struct cpu_args {
  int64_t n;          /* sgemm size */
  int64_t batch, len; /* fft */
  int32_t reps;
} cpu_args;

static void usage(FILE *f) {
  fputs(
      "usage: loom-bench cpu [--n N] [--fft BxL] [--reps R]\n"
      "  --n N      sgemm N x N x N, f32 (default 2048)\n"
      "  --fft BxL  a batch of B complex f32 FFTs of length L (default 1024x4096)\n"
      "  --reps R   timed calls per side after the first (default 5); the best is kept\n"
      "  Prints Loom's and the library's times and the ratio library / Loom, for the first\n"
      "  sgemm in a fresh process and for later calls, and for the batched FFT.\n",
      f);
}

static int parse_args(int argc, char **argv, cpu_args *a) {
  *a = (cpu_args){2048, 1024, 4096, 5};
  const char *fft = NULL;
  const bench_opt opts[] = {
      BENCH_OPT_INT("n", BENCH_I64, &a->n, 1, 16384, "a size from 1 to 16384"),
      BENCH_OPT_INT("reps", BENCH_I32, &a->reps, 1, 1000, "a count from 1 to 1000"),
      BENCH_OPT_TEXT("fft", &fft, "BxL, as 1024x4096"),
      BENCH_OPT_END,
  };
  bench_cli b = {.mode = "cpu",
                 .synopsis = "loom-bench cpu [--n N] [--fft BxL] [--reps R]",
                 .usage = usage,
                 .opts = opts};
  int rc = bench_args(&b, argc, argv);
  if (rc || !fft) return rc;
  const char *x = strchr(fft, 'x');
  char batch[32];
  int64_t bl = 0, len = 0;
  snprintf(batch, sizeof batch, "%.*s", x ? (int)(x - fft) : 0, fft);
  if (!x || !loom__cli_parse_int(batch, 1, 1 << 28, &bl) || !loom__cli_parse_int(x + 1, 2, 1 << 28, &len) ||
      bl * len > (1LL << 28))
    return loom__cli_bad_value("loom-bench cpu", "--fft", fft,
                               "BxL: B FFTs of length L, L at least 2, B x L at most 2^28 (1024x4096)");
  a->batch = bl;
  a->len = len;
  return 0;
}

/* ---- Loom's side: a one-op graph run on cpu0 ---- */

typedef struct loom_side {
  loom_context *ctx;
  bench_op op;
} loom_side;

static void side_close(loom_side *L) {
  bench_op_close(&L->op);
  loom_context_destroy(L->ctx);
  L->ctx = NULL;
}

static int side_open(loom_side *L, const char *text) {
  memset(L, 0, sizeof *L);
  loom_context_options co;
  loom_context_options_init(&co);
  co.devices = "cpu0";
  if (bench_op_open(&L->op, text, 5) || loom_context_create(&co, &L->ctx)) {
    fprintf(stderr, "loom-bench cpu: %s\n", loom_last_error());
    side_close(L);
    return 1;
  }
  return 0;
}

/* One run; the result is freed. Seconds, or -1 on failure. */
static double side_run(loom_side *L) {
  double t = bench_op_run(L->ctx, "cpu0", &L->op);
  if (t < 0) fprintf(stderr, "loom-bench cpu: %s\n", loom_last_error());
  return t;
}

/* ---- the library's side ---- */

static double blas_sgemm(int64_t n, const float *a, const float *b) {
  double t = bench_now();
  float *c = malloc((size_t)(n * n) * sizeof *c);
  if (!c) return -1;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a, (int)n, b, (int)n,
              0.0f, c, (int)n);
  t = bench_now() - t;
  free(c);
  return t;
}

/* ---- sgemm ---- */

static char *gemm_text(int64_t n) {
  static char text[256];
  snprintf(text, sizeof text,
           "graph sgemm(a: f32[%lld,%lld], b: f32[%lld,%lld]) {\n  c = dot a b\n  return c\n}\n",
           (long long)n, (long long)n, (long long)n, (long long)n);
  return text;
}

/* The first sgemm of a fresh process, on `which` side (0 Loom, 1 the library), in a child:
 * its seconds, or -1. */
static double first_in_child(const cpu_args *a, int which) {
  int fd[2];
  if (pipe(fd)) return -1;
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(fd[0]);
    double t = -1;
    loom_side L;
    if (!side_open(&L, gemm_text(a->n))) {
      t = which == 0 ? side_run(&L) : blas_sgemm(a->n, L.op.in[0].data, L.op.in[1].data);
      side_close(&L);
    }
    ssize_t w = write(fd[1], &t, sizeof t);
    _exit(w == (ssize_t)sizeof t ? 0 : 1);
  }
  close(fd[1]);
  double t = -1;
  if (read(fd[0], &t, sizeof t) != (ssize_t)sizeof t) t = -1;
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? t : -1;
}

static void print_row(const char *what, double loom_s, double lib_s, double flops) {
  if (loom_s < 0 || lib_s < 0) {
    printf("%-34s failed (see above)\n", what);
    return;
  }
  printf("%-34s %10.2f %10.2f %8.2f %10.1f\n", what, loom_s * 1e3, lib_s * 1e3, lib_s / loom_s,
         flops / loom_s / 1e9);
}

static int bench_sgemm(const cpu_args *a) {
  double flops = 2.0 * (double)a->n * (double)a->n * (double)a->n;
  /* Forked before this process touches BLAS or OpenMP, so each child starts them itself. */
  double first_loom = first_in_child(a, 0), first_lib = first_in_child(a, 1);
  char what[64];
  snprintf(what, sizeof what, "sgemm %lld^3, first in a process", (long long)a->n);
  print_row(what, first_loom, first_lib, flops);
  loom_side L;
  if (side_open(&L, gemm_text(a->n))) return 1;
  double best_loom = 1e30, best_lib = 1e30;
  for (int32_t r = 0; r <= a->reps; r++) {
    double tl = side_run(&L), tb = blas_sgemm(a->n, L.op.in[0].data, L.op.in[1].data);
    if (tl < 0 || tb < 0) {
      side_close(&L);
      return 1;
    }
    if (r > 0 && tl < best_loom) best_loom = tl;
    if (r > 0 && tb < best_lib) best_lib = tb;
  }
  snprintf(what, sizeof what, "sgemm %lld^3, best of %d", (long long)a->n, (int)a->reps);
  print_row(what, best_loom, best_lib, flops);
  side_close(&L);
  return first_loom < 0 || first_lib < 0;
}

/* ---- fft ---- */

static int bench_fft(const cpu_args *a) {
  char text[256];
  snprintf(text, sizeof text, "graph fft(x: c64[%lld,%lld]) {\n  y = fft x axis=-1\n  return y\n}\n",
           (long long)a->batch, (long long)a->len);
  loom_side L;
  if (side_open(&L, text)) return 1;
  size_t bytes = (size_t)(a->batch * a->len) * sizeof(fftwf_complex);
  fftwf_complex *x = L.op.in[0].data, *probe = fftwf_malloc(bytes);
  if (!probe) {
    side_close(&L);
    return 1;
  }
  fftwf_init_threads();
  fftwf_plan_with_nthreads(omp_get_max_threads());
  int n = (int)a->len;
  /* FFTW_ESTIMATE, as Loom plans by default; the output array given at planning is only a
   * stand-in of the same alignment (new-array execute). */
  fftwf_plan plan = fftwf_plan_many_dft(1, &n, (int)a->batch, x, NULL, 1, n, probe, NULL, 1, n, FFTW_FORWARD,
                                        FFTW_ESTIMATE);
  fftwf_free(probe);
  if (!plan) {
    fprintf(stderr, "loom-bench cpu: FFTW could not plan the batch\n");
    side_close(&L);
    return 1;
  }
  double best_loom = 1e30, best_lib = 1e30;
  int rc = 0;
  for (int32_t r = 0; r <= a->reps && !rc; r++) {
    double tl = side_run(&L);
    double tb = bench_now();
    fftwf_complex *y = fftwf_malloc(bytes);
    if (y) fftwf_execute_dft(plan, x, y);
    tb = bench_now() - tb;
    fftwf_free(y);
    rc = tl < 0 || !y;
    if (r > 0 && tl < best_loom) best_loom = tl;
    if (r > 0 && tb < best_lib) best_lib = tb;
  }
  fftwf_destroy_plan(plan);
  char what[64];
  snprintf(what, sizeof what, "fft %lldx%lld c64, best of %d", (long long)a->batch, (long long)a->len,
           (int)a->reps);
  /* 5 L log2 L flops per transform, the usual FFT count */
  double log2l = 0;
  for (int64_t l = a->len; l > 1; l >>= 1) log2l += 1;
  if (!rc) print_row(what, best_loom, best_lib, 5.0 * (double)a->batch * (double)a->len * log2l);
  side_close(&L);
  return rc;
}

int loom_bench_cpu(int argc, char **argv) {
  cpu_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;
  printf("cpu0 against its libraries (OpenBLAS, FFTW with %d threads); times in ms\n", omp_get_max_threads());
  printf("%-34s %10s %10s %8s %10s\n", "workload", "Loom", "library", "ratio", "GFLOP/s");
  rc = bench_sgemm(&a);
  rc |= bench_fft(&a);
  return rc;
}
