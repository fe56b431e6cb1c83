/* loom-bench blas: Loom's libblas.so.3 against the host BLAS (OpenBLAS) called directly, in one
 * run: the cost a forwarded call adds (dgemm 8x8x8, daxpy of 16: ns per call, best of several
 * batches), and each level-3 routine at a few sizes (best of R runs, the ratio host/shim).
 * The shim runs as the environment sets it (LOOM_BLAS_FORCE, LOOM_BLAS_DEVICES, ...: docs/blas.md).
 *
 *   loom-bench blas [--shim PATH] [--sizes 256,1024] [--repeat R] [--json FILE]
 *
 * The shim is opened by path (default: blas/libblas.so.3 beside this executable, the build
 * tree's layout) and OpenBLAS by its own file, each routine with dlsym on its own handle, so the
 * two sides are the two libraries whatever the process links.
 *
 *   loom-bench blas --devices LIST --versus LIST2 [--sizes 4096] [--repeat R]
 *
 * compares two settings of LOOM_BLAS_DEVICES on dgemm (e.g. ocl0,ocl1 shared against ocl0 alone;
 * "host": OpenBLAS called directly). The shim reads its settings once per process, so each
 * configuration runs in a process of its own (this program again with --once), the two
 * alternating R times (A B A B: both see the same minutes of a shared machine), each checking its
 * C against OpenBLAS's.
 */
#include <cblas.h>
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "bench_blas.h"

typedef void gemm_fn(const char *, const char *, const int *, const int *, const int *, const double *,
                     const double *, const int *, const double *, const int *, const double *, double *,
                     const int *, size_t, size_t);
typedef void symm_fn(const char *, const char *, const int *, const int *, const double *, const double *,
                     const int *, const double *, const int *, const double *, double *, const int *, size_t,
                     size_t);
typedef void syrk_fn(const char *, const char *, const int *, const int *, const double *, const double *,
                     const int *, const double *, double *, const int *, size_t, size_t);
typedef void syr2k_fn(const char *, const char *, const int *, const int *, const double *, const double *,
                      const int *, const double *, const int *, const double *, double *, const int *, size_t,
                      size_t);
typedef void trxm_fn(const char *, const char *, const char *, const char *, const int *, const int *,
                     const double *, const double *, const int *, double *, const int *, size_t, size_t,
                     size_t, size_t);
typedef void axpy_fn(const int *, const double *, const double *, const int *, double *, const int *);

typedef struct blas_side {
  gemm_fn *gemm;
  symm_fn *symm;
  syrk_fn *syrk;
  syr2k_fn *syr2k;
  trxm_fn *trmm, *trsm;
  axpy_fn *axpy;
} blas_side;

static bool side_open(const char *path, blas_side *s) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return false;
  *(void **)&s->gemm = dlsym(lib, "dgemm_");
  *(void **)&s->symm = dlsym(lib, "dsymm_");
  *(void **)&s->syrk = dlsym(lib, "dsyrk_");
  *(void **)&s->syr2k = dlsym(lib, "dsyr2k_");
  *(void **)&s->trmm = dlsym(lib, "dtrmm_");
  *(void **)&s->trsm = dlsym(lib, "dtrsm_");
  *(void **)&s->axpy = dlsym(lib, "daxpy_");
  return s->gemm && s->symm && s->syrk && s->syr2k && s->trmm && s->trsm && s->axpy;
}

typedef struct blas_data {
  int n;
  double *a, *b, *c;
} blas_data;

/* One call of routine r (0 gemm, 1 symm, 2 syrk, 3 syr2k, 4 trmm, 5 trsm) at size n. */
static void call(const blas_side *s, int r, blas_data *d) {
  int n = d->n;
  double one = 1.0, half = 0.5;
  switch (r) {
    case 0:
      s->gemm("N", "N", &n, &n, &n, &one, d->a, &n, d->b, &n, &half, d->c, &n, 1, 1);
      break;
    case 1:
      s->symm("L", "U", &n, &n, &one, d->a, &n, d->b, &n, &half, d->c, &n, 1, 1);
      break;
    case 2:
      s->syrk("U", "N", &n, &n, &one, d->a, &n, &half, d->c, &n, 1, 1);
      break;
    case 3:
      s->syr2k("U", "N", &n, &n, &one, d->a, &n, d->b, &n, &half, d->c, &n, 1, 1);
      break;
    case 4:
      s->trmm("L", "U", "N", "N", &n, &n, &one, d->a, &n, d->c, &n, 1, 1, 1, 1);
      break;
    default:
      s->trsm("L", "U", "N", "N", &n, &n, &one, d->a, &n, d->c, &n, 1, 1, 1, 1);
      break;
  }
}

static double best_of(const blas_side *s, int r, blas_data *d, int repeat) {
  double best = 1e30;
  call(s, r, d); /* first calls: OpenBLAS's buffers, Loom's context and caches */
  for (int i = 0; i < repeat; i++) {
    double t0 = bench_now();
    call(s, r, d);
    double t = bench_now() - t0;
    best = t < best ? t : best;
  }
  return best;
}

static blas_data data_make(int n) {
  blas_data d = {n, malloc(sizeof(double) * n * n), malloc(sizeof(double) * n * n),
                 malloc(sizeof(double) * n * n)};
  for (int64_t i = 0; i < (int64_t)n * n; i++) {
    d.a[i] = (double)((i * 7919) % 1000) / 1000.0;
    d.b[i] = (double)((i * 104729) % 1000) / 1000.0;
    d.c[i] = 0.0;
  }
  for (int i = 0; i < n; i++) d.a[(int64_t)i * n + i] += n; /* a solvable triangle for trsm */
  return d;
}

/* ns per call of a forwarded routine: best of 7 batches. */
static double ns_per_call(const blas_side *s, bool gemm, blas_data *d) {
  int n = 8, inc = 1, len = 16;
  double one = 1.0, zero = 0.0, best = 1e30;
  const int calls = 20000;
  for (int b = 0; b < 7; b++) {
    double t0 = bench_now();
    for (int i = 0; i < calls; i++) {
      if (gemm)
        s->gemm("N", "N", &n, &n, &n, &one, d->a, &n, d->b, &n, &zero, d->c, &n, 1, 1);
      else
        s->axpy(&len, &one, d->a, &inc, d->c, &inc);
    }
    double t = (bench_now() - t0) / calls * 1e9;
    best = t < best ? t : best;
  }
  return best;
}

static int fail(const char *what, const char *name) {
  const char *err = dlerror();
  fprintf(stderr, "loom-bench blas: %s %s%s%s\n", what, name, err ? ": " : "", err ? err : "");
  return 1;
}

static void default_shim(char *path, size_t size) {
  char exe[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[len > 0 ? len : 0] = 0;
  snprintf(path, size, "%s/blas/libblas.so.3", len > 0 ? dirname(exe) : ".");
}

/* ---- --devices / --versus: one configuration per process ---------------------------------- */

/* Timed dgemm calls per process: enough for a few seconds' work, 1 to 20. */
static int once_calls(int n) {
  double c = 4e10 / (2.0 * n * n * n);
  return c < 1 ? 1 : c > 20 ? 20 : (int)c;
}

/* The largest |C - Cref| over the largest |Cref|. */
static double rel_error(const double *c, const double *ref, int64_t len) {
  double err = 0, top = 0;
  for (int64_t i = 0; i < len; i++) {
    err = fmax(err, fabs(c[i] - ref[i]));
    top = fmax(top, fabs(ref[i]));
  }
  return top > 0 ? err / top : err;
}

/* The process's CPU seconds, every thread's. */
static double cpu_seconds(void) {
  struct timespec t;
  return clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) == 0 ? (double)t.tv_sec + 1e-9 * (double)t.tv_nsec : 0;
}

/* --once: dgemm of n with LOOM_BLAS_DEVICES=devices ("host": OpenBLAS directly), one warm-up
 * call (the context, the kernels' build), the best of once_calls(n) timed, C checked against
 * OpenBLAS's. Prints "once DEVICES N SECONDS ERROR CPU_SECONDS" (CPU: every thread's, in the
 * fastest call: what the call cost the machine whatever else ran; on a loaded machine two
 * devices' wall time cannot show their gain, their CPU time against one device's shows what the
 * split adds); 1 when the error passes 1e-12. */
static int blas_once(const char *shim_path, const blas_side *host, const char *devices, int n) {
  blas_side shim;
  bool direct = strcmp(devices, "host") == 0;
  if (!direct && setenv("LOOM_BLAS_DEVICES", devices, 1) != 0)
    return bench_fail("blas", 1, "cannot set LOOM_BLAS_DEVICES");
  if (!direct && !side_open(shim_path, &shim)) return fail("cannot open the shim", shim_path);
  const blas_side *side = direct ? host : &shim;
  blas_data d = data_make(n);
  double *ref = malloc(sizeof(double) * n * n);
  if (!ref) return bench_fail("blas", 1, "out of memory for n = %d", n);
  int warm = n < 1024 ? n : 1024;
  side->gemm("N", "N", &warm, &warm, &warm, &(double){1.0}, d.a, &warm, d.b, &warm, &(double){0.0}, d.c,
             &warm, 1, 1);
  double best = 1e30, best_cpu = 0, zero = 0.0, one = 1.0;
  for (int i = once_calls(n); i > 0; i--) {
    double t0 = bench_now(), c0 = cpu_seconds();
    side->gemm("N", "N", &n, &n, &n, &one, d.a, &n, d.b, &n, &zero, d.c, &n, 1, 1);
    double t = bench_now() - t0;
    if (t < best) best = t, best_cpu = cpu_seconds() - c0;
  }
  host->gemm("N", "N", &n, &n, &n, &one, d.a, &n, d.b, &n, &zero, ref, &n, 1, 1);
  double err = rel_error(d.c, ref, (int64_t)n * n);
  printf("once %s %d %.6f %.3g %.6f\n", devices, n, best, err, best_cpu);
  free(ref), free(d.a), free(d.b), free(d.c);
  return err <= 1e-12 ? 0 : bench_fail("blas", 1, "dgemm n=%d on %s: relative error %.3g", n, devices, err);
}

static double load_average(void) {
  double l = -1;
  FILE *f = fopen("/proc/loadavg", "r");
  if (f && fscanf(f, "%lf", &l) != 1) l = -1;
  if (f) fclose(f);
  return l;
}

/* One child process (this program with --once); its seconds (and in *cpu its CPU seconds), or
 * -1 when it failed. */
static double run_once(const char *shim_path, const char *devices, int n, double *cpu) {
  char exe[PATH_MAX], cmd[3 * PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0) return -1;
  exe[len] = 0;
  snprintf(cmd, sizeof cmd, "'%s' blas --once --shim '%s' --devices '%s' --sizes %d", exe, shim_path, devices,
           n);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  char line[512], got[256];
  double secs = -1, err;
  int size;
  while (fgets(line, sizeof line, p))
    if (sscanf(line, "once %255s %d %lf %lf %lf", got, &size, &secs, &err, cpu) != 5) secs = -1;
  return pclose(p) == 0 ? secs : -1;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* --devices A --versus B: per size, R rounds of A then B, each in its own process. */
static int blas_versus(const char *shim_path, const char *a, const char *b, const int64_t *sizes,
                       int32_t n_sizes, int32_t rounds, FILE *json) {
  printf(
      "dgemm, LOOM_BLAS_DEVICES=%s against %s (\"host\": OpenBLAS directly), %d alternating rounds,\n"
      "seconds per call (best of each process's calls); speedup = %s / %s:\n",
      a, b, (int)rounds, b, a);
  if (json) fprintf(json, "],\n \"versus\": [");
  for (int32_t k = 0; k < n_sizes; k++) {
    int n = (int)sizes[k];
    double ta[100], tb[100], ca = INFINITY, cb = INFINITY, load0 = load_average(), load1;
    for (int32_t r = 0; r < rounds; r++) {
      double cpu_a = 0, cpu_b = 0;
      ta[r] = run_once(shim_path, a, n, &cpu_a);
      tb[r] = run_once(shim_path, b, n, &cpu_b);
      if (ta[r] < 0 || tb[r] < 0)
        return bench_fail("blas", 1, "dgemm n=%d: a run on %s failed", n, ta[r] < 0 ? a : b);
      ca = fmin(ca, cpu_a), cb = fmin(cb, cpu_b);
      printf("  n=%-6d round %d  %s %.4f (cpu %.3f)  %s %.4f (cpu %.3f)  %s / %s %.3f\n", n, (int)r + 1, a,
             ta[r], cpu_a, b, tb[r], cpu_b, b, a, tb[r] / ta[r]);
      fflush(stdout);
    }
    load1 = load_average();
    qsort(ta, (size_t)rounds, sizeof ta[0], cmp_double);
    qsort(tb, (size_t)rounds, sizeof tb[0], cmp_double);
    double ma = ta[rounds / 2], mb = tb[rounds / 2];
    printf(
        "  n=%-6d %s best %.4f median %.4f  %s best %.4f median %.4f  speedup best %.3f median %.3f"
        "  (load %.2f -> %.2f)\n"
        "  n=%-6d cpu seconds of a call, least: %s %.3f  %s %.3f  (%s / %s %.3f)\n",
        n, a, ta[0], ma, b, tb[0], mb, tb[0] / ta[0], mb / ma, load0, load1, n, a, ca, b, cb, b, a, cb / ca);
    if (json)
      fprintf(
          json,
          "%s\n  {\"n\": %d, \"devices\": \"%s\", \"versus\": \"%s\", \"best_s\": %.6g, "
          "\"median_s\": %.6g, \"versus_best_s\": %.6g, \"versus_median_s\": %.6g, \"speedup_best\": "
          "%.4f, \"speedup_median\": %.4f, \"cpu_s\": %.6g, \"versus_cpu_s\": %.6g, \"load\": [%.2f, %.2f]}",
          k ? "," : "", n, a, b, ta[0], ma, tb[0], mb, tb[0] / ta[0], mb / ma, ca, cb, load0, load1);
  }
  return 0;
}

static void usage(FILE *f) {
  fputs(
      "usage: loom-bench blas [--shim PATH] [--sizes 256,1024] [--repeat R] [--json FILE]\n"
      "  --shim PATH    Loom's libblas.so.3 (default: blas/libblas.so.3 beside loom-bench)\n"
      "  --sizes LIST   the level-3 routines' n, comma-separated (default 256,1024)\n"
      "  --repeat R     timed calls per routine and side; the best is kept (default 5)\n"
      "  --json FILE    also write the figures as JSON\n"
      "  --devices LIST --versus LIST2\n"
      "                 dgemm at --sizes with LOOM_BLAS_DEVICES=LIST against LIST2 (host:\n"
      "                 OpenBLAS directly), each in a process of its own, alternating --repeat\n"
      "                 times, C checked against OpenBLAS's (in place of the tables above)\n"
      "  --once         (with --devices, one size) one such process: prints\n"
      "                 'once LIST N SECONDS ERROR CPU_SECONDS'\n"
      "  --simulate PLATFORM.json\n"
      "                 dgemm at --sizes predicted on the platform's models for Loom, OpenBLAS\n"
      "                 (its cpu0) and NVBLAS (tiles of 2048 on its GPU); nothing runs\n",
      f);
}

int loom_bench_blas(int argc, char **argv) {
  char shim_path[PATH_MAX];
  default_shim(shim_path, sizeof shim_path);
  const char *json_path = NULL, *sizes_text = "256,1024", *shim_given = NULL, *devices = NULL, *versus = NULL,
             *simulate = NULL;
  bool once = false;
  int32_t repeat = 5, n_sizes = 0;
  int64_t sizes[16];
  const bench_opt opts[] = {
      BENCH_OPT_TEXT("shim", &shim_given, "a path to a libblas.so.3"),
      BENCH_OPT_TEXT("json", &json_path, "a file name"),
      BENCH_OPT_TEXT("sizes", &sizes_text, "a list of sizes"),
      BENCH_OPT_INT("repeat", BENCH_I32, &repeat, 1, 1000, "a count from 1 to 1000"),
      BENCH_OPT_TEXT("devices", &devices, "a LOOM_BLAS_DEVICES list or host"),
      BENCH_OPT_TEXT("versus", &versus, "a LOOM_BLAS_DEVICES list or host"),
      BENCH_OPT_FLAG("once", &once),
      BENCH_OPT_TEXT("simulate", &simulate, "a platform file"),
      BENCH_OPT_END,
  };
  bench_cli b = {.mode = "blas",
                 .synopsis = "loom-bench blas [--shim PATH] [--sizes 256,1024] [--repeat R] [--json FILE]",
                 .usage = usage,
                 .opts = opts};
  int rc = bench_args(&b, argc, argv);
  if (!rc)
    rc = bench_list("blas", "--sizes", sizes_text, false, 1, 1 << 16, "sizes from 1 to 65536, as 256,1024",
                    sizes, 16, &n_sizes);
  if (!rc && (once ? !devices || versus || n_sizes != 1 : (devices != NULL) != (versus != NULL)))
    rc = bench_usage_error(&b, once ? "--once takes --devices and one size, without --versus"
                                    : "--devices and --versus go together");
  if (!rc && versus && repeat > 100) rc = bench_usage_error(&b, "--repeat: at most 100 with --versus");
  if (!rc && simulate && (once || versus)) rc = bench_usage_error(&b, "--simulate runs alone");
  if (rc) return rc < 0 ? 0 : rc;
  if (simulate) {
    FILE *json = json_path ? fopen(json_path, "w") : NULL;
    if (json_path && !json) return fail("cannot write", json_path);
    if (json) fprintf(json, "{\"platform\": \"%s\", \"simulated\": [", simulate);
    rc = bench_blas_simulate(simulate, sizes, n_sizes, json);
    if (json) fprintf(json, "\n]}\n"), fclose(json);
    return rc;
  }
  if (shim_given) snprintf(shim_path, sizeof shim_path, "%s", shim_given);
  blas_side shim, host;
  Dl_info info;
  if (!dladdr((void *)openblas_get_config, &info) || !side_open(info.dli_fname, &host))
    return fail("cannot open OpenBLAS by its own file", "openblas_get_config");
  /* The shim is opened after LOOM_BLAS_DEVICES is set (--once), or in the child processes. */
  if (once) return blas_once(shim_path, &host, devices, (int)sizes[0]);
  FILE *json = json_path ? fopen(json_path, "w") : NULL;
  if (json_path && !json) return fail("cannot write", json_path);
  if (json)
    fprintf(json, "{\"shim\": \"%s\", \"host\": \"%s\",\n \"overhead\": [", shim_path, info.dli_fname);
  if (versus) {
    rc = blas_versus(shim_path, devices, versus, sizes, n_sizes, repeat, json);
    if (json) fprintf(json, "\n]}\n"), fclose(json);
    return rc;
  }
  if (!side_open(shim_path, &shim)) return fail("cannot open the shim", shim_path);

  blas_data small = data_make(16);
  printf("forwarded calls (ns per call, best of 7 x 20000):\n");
  for (int g = 1; g >= 0; g--) {
    double h = ns_per_call(&host, g, &small), s = ns_per_call(&shim, g, &small);
    const char *name = g ? "dgemm 8x8x8" : "daxpy 16";
    printf("  %-12s  host %8.1f  shim %8.1f  extra %6.1f ns\n", name, h, s, s - h);
    if (json)
      fprintf(json, "%s\n  {\"call\": \"%s\", \"host_ns\": %.2f, \"shim_ns\": %.2f, \"extra_ns\": %.2f}",
              g ? "" : ",", name, h, s, s - h);
  }
  if (json) fprintf(json, "],\n \"level3\": [");

  static const char *const names[] = {"dgemm", "dsymm", "dsyrk", "dsyr2k", "dtrmm", "dtrsm"};
  printf("level 3 (seconds, best of %d; ratio = host / shim, above 1 when the shim is faster):\n", repeat);
  bool first = true;
  for (int32_t k = 0; k < n_sizes; k++) {
    int n = (int)sizes[k];
    blas_data d = data_make(n);
    for (int r = 0; r < 6; r++) {
      double h = best_of(&host, r, &d, repeat), s = best_of(&shim, r, &d, repeat);
      printf("  %-7s n=%-6d host %10.6f  shim %10.6f  ratio %.3f\n", names[r], n, h, s, h / s);
      if (json)
        fprintf(json,
                "%s\n  {\"routine\": \"%s\", \"n\": %d, \"host_s\": %.6g, \"shim_s\": %.6g, \"ratio\": %.4f}",
                first ? "" : ",", names[r], n, h, s, h / s);
      first = false;
    }
    free(d.a), free(d.b), free(d.c);
  }
  if (json) fprintf(json, "\n]}\n"), fclose(json);
  free(small.a), free(small.b), free(small.c);
  return 0;
}
