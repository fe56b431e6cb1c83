/* loom-bench fusion: whether the fuse rewrite pays (issue 35, acceptance 4). Each case is a
 * graph planned as loom-run plans it, with the default rewrites and again with `fuse` off
 * (loom-run --no-rewrite fuse), run on cpu0 in the same process, alternately:
 *
 *   chain     N adds in a row on f32[E] (default 2,000 on f32[16], as `loom-bench overhead`):
 *             per op, beside NumPy's per op in this run
 *   chain_1m  the same chain, 16 adds on f32[2^20]: a chain whose operands leave the cache
 *   poly      x*x*a + x*b + c, exp and tanh over f32[2^20]: a body of several kinds of op
 *   sum_sq    sum((x - y)^2) over f32[2^22]: a region rooted in a reduction
 *   rows_max  max over the last axis of exp(x) * y, f32[2048,1024]
 *
 * A case's ratio is the time with fuse off over the time with it on: >= 1.00 means fusion did
 * not lose. Each time is the best of R runs after a warm-up; the two results are compared. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "measure.h"

typedef struct fusion_args {
  int64_t ops, size;
  int32_t reps;
  const char *cases;
  const char *python;
  bool no_python;
} fusion_args;

static int usage(FILE *f, int rc) {
  fputs(
      "usage: loom-bench fusion [--ops N] [--size E] [--reps R] [--cases LIST] [--python CMD | --no-python]\n"
      "       loom-bench fusion --suite [--help]: every case of the suite with fuse on and off\n"
      "  chain: N adds on f32[E] (default 2000 on f32[16]); chain_1m, poly, sum_sq, rows_max: larger\n"
      "  bodies. Each planned with the default rewrites and with fuse off, on cpu0; times, the\n"
      "  ratio off / on (>= 1: fusion did not lose) and, for the chain, NumPy's per op.\n"
      "  --reps R      timed runs per side after a warm-up; the best is kept (default 5)\n"
      "  --cases LIST  chain,chain_1m,poly,sum_sq,rows_max (default all)\n"
      "  --python CMD  the interpreter with NumPy (default /usr/bin/python3); --no-python: none\n",
      f);
  return rc;
}

static int parse_args(int argc, char **argv, fusion_args *a) {
  *a = (fusion_args){.ops = 2000, .size = 16, .reps = 5};
  for (int i = 1; i < argc; i++) {
    const char *f = argv[i];
    if (!strcmp(f, "--help")) return usage(stdout, -1);
    if (!strcmp(f, "--no-python")) {
      a->no_python = true;
      continue;
    }
    const char *v = i + 1 < argc ? argv[++i] : NULL;
    if (!v) return usage(stderr, 2);
    long long x = bench_whole(v, 1);
    if (!strcmp(f, "--ops") && x > 0 && x <= 100000) {
      a->ops = x;
    } else if (!strcmp(f, "--size") && x > 0 && x <= (1LL << 26)) {
      a->size = x;
    } else if (!strcmp(f, "--reps") && x > 0 && x <= 1000) {
      a->reps = (int32_t)x;
    } else if (!strcmp(f, "--cases")) {
      a->cases = v;
    } else if (!strcmp(f, "--python")) {
      a->python = v;
    } else {
      fprintf(stderr, "loom-bench fusion: bad option %s '%s'\n", f, v);
      return usage(stderr, 2);
    }
  }
  return 0;
}

/* The .lir text of a case (caller frees), NULL when out of memory. */
static char *case_text(const char *name, const fusion_args *a) {
  size_t cap = 256 + (size_t)(strcmp(name, "chain") == 0 ? a->ops : 16) * 40;
  char *t = malloc(cap);
  if (!t) return NULL;
  size_t len = 0;
  if (!strncmp(name, "chain", 5)) {
    int64_t ops = name[5] ? 16 : a->ops, size = name[5] ? (int64_t)1 << 20 : a->size;
    len += (size_t)snprintf(t + len, cap - len, "graph chain(x: f32[%lld], y: f32[%lld]) {\n  v0 = add x y\n",
                            (long long)size, (long long)size);
    for (int64_t i = 1; i < ops; i++)
      len +=
          (size_t)snprintf(t + len, cap - len, "  v%lld = add v%lld y\n", (long long)i, (long long)(i - 1));
    snprintf(t + len, cap - len, "  return v%lld\n}\n", (long long)(ops - 1));
  } else if (!strcmp(name, "poly")) {
    snprintf(t, cap,
             "graph poly(x: f32[1048576], a: f32[1048576], b: f32[1048576]) {\n"
             "  xx = mul x x\n  p = mul xx a\n  q = mul x b\n  r = add p q\n  e = exp x\n"
             "  s = add r e\n  z = tanh s\n  return z\n}\n");
  } else if (!strcmp(name, "sum_sq")) {
    snprintf(t, cap,
             "graph sum_sq(x: f32[4194304], y: f32[4194304]) {\n  d = sub x y\n  q = mul d d\n"
             "  s = reduce_sum q axes=[0]\n  return s\n}\n");
  } else {
    snprintf(t, cap,
             "graph rows_max(x: f32[2048,1024], y: f32[2048,1024]) {\n  e = exp x\n  p = mul e y\n"
             "  m = reduce_max p axes=[1]\n  return m\n}\n");
  }
  return t;
}

/* NumPy's seconds per add of the chain, or -1. */
static double numpy_per_op(const fusion_args *a) {
  char cmd[1024];
  snprintf(
      cmd, sizeof cmd,
      "%s -c \"import time, numpy\nx = numpy.random.rand(%lld).astype('float32')\ny = x.copy()\n"
      "best = 1e9\nfor r in range(%d):\n t = time.perf_counter()\n v = x\n for i in range(%lld): v = v + y\n"
      " best = min(best, time.perf_counter() - t)\nprint(best / %lld)\" 2>/dev/null",
      a->python ? a->python : "/usr/bin/python3", (long long)a->size, (int)a->reps + 1, (long long)a->ops,
      (long long)a->ops);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  double s = -1;
  if (fscanf(p, "%lf", &s) != 1) s = -1;
  if (pclose(p) != 0) s = -1;
  return s;
}

/* Whether two f32 results agree within a relative 1e-5 of the largest magnitude (fusion may
 * reorder a reduction's sums). */
static bool same_result(const loom_tensor *a, const loom_tensor *b) {
  int64_t n = 1;
  for (int32_t d = 0; d < a->type.rank; d++) n *= a->type.dims[d];
  const float *x = a->data, *y = b->data;
  double big = 0, diff = 0;
  for (int64_t i = 0; i < n; i++) {
    big = fmax(big, fabs((double)y[i]));
    diff = fmax(diff, fabs((double)x[i] - (double)y[i]));
  }
  return diff <= 1e-5 * big || diff == 0;
}

/* Runs one case both ways and prints its row; 1 on failure. */
static int run_case(const char *name, const fusion_args *a) {
  char *text = case_text(name, a);
  loom_graph *g = text ? bench_parse(text, "fusion") : NULL;
  free(text);
  if (!g) return 1;
  int32_t n_in = loom_graph_param_count(g);
  loom_tensor in[3];
  memset(in, 0, sizeof in);
  int rc = 0;
  for (int32_t p = 0; p < n_in && !rc; p++)
    rc = loom_tensor_init(&in[p], loom_value_type(g, loom_graph_param_at(g, p))) ||
         loom_tensor_fill_random(&in[p], 11, (uint64_t)p);
  static const char *const no_fuse[] = {"fuse"};
  bench_run on = {0}, off = {0};
  double best_on = 0, best_off = 0;
  /* alternate the sides, one best-of-1 each round, so a busy machine slows both alike */
  for (int32_t r = 0; r < a->reps && !rc; r++) {
    bench_plan_run("cpu0", g, in, n_in, 0, NULL, 0, 1, &on);
    bench_plan_run("cpu0", g, in, n_in, 0, no_fuse, 1, 1, &off);
    if (!on.ok || !off.ok) {
      fprintf(stderr, "loom-bench fusion: %s: %s\n", name, on.ok ? off.why : on.why);
      rc = 1;
    } else if (!same_result(&on.out, &off.out)) {
      fprintf(stderr, "loom-bench fusion: %s: the fused result differs from the unfused one\n", name);
      rc = 1;
    }
    if (!rc) bench_keep(&best_on, on.best_seconds);
    if (!rc) bench_keep(&best_off, off.best_seconds);
    loom_tensor_deinit(&on.out);
    loom_tensor_deinit(&off.out);
  }
  if (!rc) {
    bool chain = !strcmp(name, "chain");
    double per = chain ? 1e6 / (double)a->ops : 1e3;
    printf("%-10s %12.3f %12.3f %8.2f %s\n", name, best_on * per, best_off * per, best_off / best_on,
           chain ? "us per op" : "ms");
  }
  for (int32_t p = 0; p < n_in; p++) loom_tensor_deinit(&in[p]);
  loom_graph_destroy(g);
  return rc;
}

int loom_bench_fusion_suite(int argc, char **argv); /* bench_fusion_suite.c */

int loom_bench_fusion(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--suite")) return loom_bench_fusion_suite(argc, argv);
  fusion_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;
  static const char *const names[] = {"chain", "chain_1m", "poly", "sum_sq", "rows_max"};
  printf("the fuse rewrite on cpu0: default rewrites vs --no-rewrite fuse, best of %d\n", (int)a.reps);
  printf("%-10s %12s %12s %8s\n", "case", "fuse on", "fuse off", "off/on");
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (bench_id_listed(a.cases, names[i])) rc |= run_case(names[i], &a);
  if (!a.no_python && bench_id_listed(a.cases, "chain")) {
    double np = numpy_per_op(&a);
    if (np > 0)
      printf("NumPy chain %.3f us per op (%lld adds on f32[%lld])\n", np * 1e6, (long long)a.ops,
             (long long)a.size);
  }
  return rc;
}
