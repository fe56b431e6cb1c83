/* loom-bench kmv: the Gaussian kernel matrix-vector product (issue 14)
 *
 *     a_i = sum_j exp(-|x_i - y_j|^2 / 2) b_j,   x, y: N points in d dimensions, f32
 *
 * written as a user writes it in .lir (broadcast difference, square, sum over d, exp, times b,
 * sum over j), planned for one runner under a limit as loom-run plans it
 * (loom_graph_optimize_for_runners, then loom_plan_split_by_memory), and run through
 * loom_plan_run twice per N: with every rewrite ("fused") and with `--no-rewrite fuse`
 * ("unfused"). Printed per run: the best time, the unfused / fused time ratio, the peak the
 * run's meter measured and the device memory node's peak (the memory manager's stats), the
 * arithmetic rate and its fraction of the device's f32 peak (device_peak: on cpu the FMA loop
 * `loom-bench suite` measures, run here first), and the
 * largest relative difference from a float64 reference over sampled rows.
 *
 * Flops per pair are counted as KeOps counts them: 3d for the squared distance (d subs,
 * d muls, d adds), then the scale, the exp, the product with b and the sum: 3d + 4.
 *
 * Each run has a context of its own (bench_plan_run), so the node's peak is that run's alone. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "loom/loom.h"
#include "measure.h"
#include "suite.h"

enum { MAX_SIZES = 8, SAMPLE_ROWS = 64 };

typedef struct kmv_args {
  int64_t sizes[MAX_SIZES];
  int32_t n_sizes;
  int64_t d;
  int64_t limit;
  int64_t unfused_max; /* larger N run fused only: unfused takes minutes */
  int32_t repeats;
  const char *device;
} kmv_args;

static void usage(FILE *f) {
  fputs(
      "usage: loom-bench kmv [--n LIST] [--d D] [--limit BYTES] [--device ID] [--repeats R]\n"
      "                      [--unfused-max N]\n"
      "  --n LIST         point counts N, comma-separated (default 10000,100000)\n"
      "  --d D            dimensions (default 3)\n"
      "  --limit BYTES    the runner's memory limit (default 64MiB)\n"
      "  --device ID      the runner's device (default cpu0)\n"
      "  --repeats R      timed runs after one warm-up; the best is kept (default 3)\n"
      "  --unfused-max N  run the unfused graph only up to N points (default 100000)\n"
      "  Prints fused and unfused times, their ratio (goal: fused >= 10x faster on cpu0,\n"
      "  >= 5x on an OpenCL device), measured peaks, GFLOP/s and the fraction of the\n"
      "  device's f32 peak, and the error against a float64 reference.\n",
      f);
}

static int parse_args(int argc, char **argv, kmv_args *a) {
  *a = (kmv_args){{10000, 100000}, 2, 3, 64 << 20, 100000, 3, "cpu0"};
  const char *sizes = NULL;
  const bench_opt opts[] = {
      BENCH_OPT_TEXT("n", &sizes, "a list of point counts"),
      BENCH_OPT_INT("d", BENCH_I64, &a->d, 1, 64, "dimensions from 1 to 64"),
      BENCH_OPT_BYTES("limit", &a->limit, 1, INT64_MAX),
      BENCH_OPT_TEXT("device", &a->device, "a device id"),
      BENCH_OPT_INT("repeats", BENCH_I32, &a->repeats, 1, 100, "a count from 1 to 100"),
      BENCH_OPT_INT("unfused-max", BENCH_I64, &a->unfused_max, 1, INT64_MAX, "a point count of at least 1"),
      BENCH_OPT_END,
  };
  bench_cli b = {.mode = "kmv", .synopsis = "loom-bench kmv [options]", .usage = usage, .opts = opts};
  int rc = bench_args(&b, argc, argv);
  if (!rc && sizes)
    rc = bench_list("kmv", "--n", sizes, false, 1, INT64_MAX / 64,
                    "point counts of at least 1, as 10000,100000", a->sizes, MAX_SIZES, &a->n_sizes);
  return rc;
}

static loom_graph *parse(const char *text) {
  loom_graph *g = NULL;
  if (loom_graph_parse(text, strlen(text), "kmv.lir", &g))
    fprintf(stderr, "loom-bench kmv: %s\n", loom_last_error());
  return g;
}

static loom_graph *kmv_graph(int64_t n, int64_t d) {
  char text[1024];
  long long N = (long long)n, D = (long long)d;
  snprintf(text, sizeof text,
           "graph kmv(x: f32[%lld,%lld], y: f32[%lld,%lld], b: f32[%lld]) {\n"
           "  xe = reshape x shape=[%lld,1,%lld]\n"
           "  ye = reshape y shape=[1,%lld,%lld]\n"
           "  diff = sub xe ye\n"
           "  sq = mul diff diff\n"
           "  d2 = reduce_sum sq axes=[2]\n"
           "  h = constant -0.5 : f32[]\n"
           "  e = mul d2 h\n"
           "  k = exp e\n"
           "  be = reshape b shape=[1,%lld]\n"
           "  kb = mul k be\n"
           "  a = reduce_sum kb axes=[1]\n"
           "  return a\n}\n",
           N, D, N, D, N, N, D, N, D, N);
  return parse(text);
}

/* The device's f32 peak: on a cpu device the suite's FMA loop measured now on every thread
 * (suite_host_peaks, `loom-bench suite`'s "of peak" denominator), since a table's clock is
 * the base clock and the cores run faster; elsewhere what the device says
 * (bench_spec_peak_gflops), and where it does not say, the rate of an unconstrained f32 dot
 * of 2048^3 through its BLAS. */
static double device_peak(const kmv_args *a, char *source, size_t size) {
  if (strncmp(a->device, "cpu", 3) == 0) {
    suite_peaks p;
    suite_host_peaks(1 << 20, &p);
    snprintf(source, size, "%s", p.fma_source);
    if (p.gflops_f32 > 0) return p.gflops_f32;
  }
  loom_context *ctx = NULL;
  loom_context_options co;
  loom_context_options_init(&co);
  co.devices = a->device;
  int32_t index;
  loom_device_info info;
  double peak = 0;
  if (!loom_context_create(&co, &ctx) && !loom_context_find_device(ctx, a->device, &index) &&
      !loom_context_device_info(ctx, index, &info))
    peak = bench_spec_peak_gflops(&info, source, size);
  loom_context_destroy(ctx);
  if (peak > 0) return peak;
  loom_graph *g = parse(
      "graph peak(p: f32[2048,2048], q: f32[2048,2048]) {\n"
      "  r = dot p q\n  return r\n}\n");
  if (!g) return 0;
  loom_tensor in[2] = {0};
  bool ok = true;
  for (int32_t p = 0; p < 2 && ok; p++)
    ok = !loom_tensor_init(&in[p], loom_value_type(g, loom_graph_param_at(g, p))) &&
         !loom_tensor_fill_random(&in[p], 7, (uint64_t)p);
  bench_run r;
  if (ok) bench_plan_run(a->device, g, in, 2, 0, NULL, 0, 3, &r);
  if (ok && r.ok) {
    peak = 2.0 * 2048 * 2048 * 2048 / r.best_seconds / 1e9;
    snprintf(source, size, "measured: an unconstrained f32 dot of 2048^3");
    loom_tensor_deinit(&r.out);
  }
  if (ok && !r.ok) fprintf(stderr, "loom-bench kmv: the reference dot: %s\n", r.why);
  loom_tensor_deinit(&in[0]);
  loom_tensor_deinit(&in[1]);
  loom_graph_destroy(g);
  return peak;
}

/* max over sampled rows of |a_i - ref_i| / max |ref|, the reference in float64. */
static double reference_diff(const loom_tensor *in, const loom_tensor *out, int64_t n, int64_t d) {
  const float *x = in[0].data, *y = in[1].data, *b = in[2].data, *got = out->data;
  double diff = 0, mag = 0;
  for (int64_t s = 0; s < SAMPLE_ROWS && s < n; s++) {
    int64_t i = n <= SAMPLE_ROWS ? s : s * (n - 1) / (SAMPLE_ROWS - 1);
    double sum = 0;
    for (int64_t j = 0; j < n; j++) {
      double d2 = 0;
      for (int64_t c = 0; c < d; c++) {
        double t = (double)x[i * d + c] - (double)y[j * d + c];
        d2 += t * t;
      }
      sum += exp(-0.5 * d2) * (double)b[j];
    }
    double e = fabs((double)got[i] - sum);
    if (!(e <= diff)) diff = e; /* NaN counts */
    if (fabs(sum) > mag) mag = fabs(sum);
  }
  return mag > 0 ? diff / mag : diff;
}

static void print_row(int64_t n, const char *variant, const bench_run *r, double ratio, double flops,
                      double peak_rate, double err) {
  char meter[32], node[32];
  if (!r->ok) {
    printf("%-9lld %-8s did not run: %s\n", (long long)n, variant, r->why);
    return;
  }
  double rate = flops / r->best_seconds / 1e9;
  char ratio_text[16] = "-";
  if (ratio > 0) snprintf(ratio_text, sizeof ratio_text, "%.1fx", ratio);
  printf("%-9lld %-8s %10.3f %8s %12s %12s %9.1f %8.1f%% %10.1e\n", (long long)n, variant, r->best_seconds,
         ratio_text, loom_bytes_format(r->meter_peak, meter, sizeof meter),
         r->node_peak < 0 ? "?" : loom_bytes_format(r->node_peak, node, sizeof node), rate,
         peak_rate > 0 ? 100.0 * rate / peak_rate : 0.0, err);
}

int loom_bench_kmv(int argc, char **argv) {
  kmv_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;
  char lim[32];
  char source[160];
  double peak_rate = device_peak(&a, source, sizeof source);
  printf("kernel matrix-vector product on %s, d = %lld, f32, limit %s; best of %d runs\n", a.device,
         (long long)a.d, loom_bytes_format(a.limit, lim, sizeof lim), (int)a.repeats);
  printf("device's f32 peak: %.1f GFLOP/s (%s)\n", peak_rate, source);
  printf("%-9s %-8s %10s %8s %12s %12s %9s %9s %10s\n", "N", "variant", "seconds", "speedup", "meter peak",
         "node peak", "GFLOP/s", "of peak", "rel error");
  static const char *const no_fuse[] = {"fuse"};
  rc = 0;
  for (int32_t s = 0; s < a.n_sizes; s++) {
    int64_t n = a.sizes[s];
    loom_graph *g = kmv_graph(n, a.d);
    loom_tensor in[3] = {0};
    bool ok = g != NULL;
    for (int32_t p = 0; p < 3 && ok; p++) {
      ok = !loom_tensor_init(&in[p], loom_value_type(g, loom_graph_param_at(g, p))) &&
           !loom_tensor_fill_random(&in[p], 1, (uint64_t)p);
      if (!ok) fprintf(stderr, "loom-bench kmv: inputs: %s\n", loom_last_error());
    }
    if (!ok) {
      rc = 1;
    } else {
      double flops = (double)n * (double)n * (double)(3 * a.d + 4);
      bench_run fused, unfused;
      bench_plan_run(a.device, g, in, 3, a.limit, NULL, 0, a.repeats, &fused);
      bool with_unfused = n <= a.unfused_max;
      if (with_unfused)
        bench_plan_run(a.device, g, in, 3, a.limit, no_fuse, 1, n >= 100000 ? 0 : a.repeats, &unfused);
      double fe = fused.ok ? reference_diff(in, &fused.out, n, a.d) : NAN;
      double ratio = fused.ok && with_unfused && unfused.ok ? unfused.best_seconds / fused.best_seconds : 0;
      print_row(n, "fused", &fused, ratio, flops, peak_rate, fe);
      if (with_unfused)
        print_row(n, "unfused", &unfused, 0, flops, peak_rate,
                  unfused.ok ? reference_diff(in, &unfused.out, n, a.d) : NAN);
      bool bad = !fused.ok || !(fe <= 1e-4) || fused.meter_peak > a.limit || fused.node_peak > a.limit ||
                 (with_unfused && !unfused.ok);
      if (bad)
        printf("  FAILED: a run failed, passed the limit, or differs from the reference by over 1e-4\n");
      rc |= bad;
      loom_tensor_deinit(&fused.out);
      if (with_unfused) loom_tensor_deinit(&unfused.out);
    }
    for (int32_t p = 0; p < 3; p++) loom_tensor_deinit(&in[p]);
    loom_graph_destroy(g);
  }
  return rc;
}
