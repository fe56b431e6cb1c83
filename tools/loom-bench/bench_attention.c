/* loom-bench attention: softmax attention, o = softmax(q k^T / sqrt(dh)) v, with an n x n score
 * matrix (default 4096 x 4096 f32: 64 MiB) under a limit smaller than the scores (default
 * 16 MiB), against the same graph unconstrained (issue 14). Three runs: unconstrained (every
 * rewrite but chunk), under the limit with every rewrite, and under the limit with
 * `--no-rewrite fuse`. Printed per run: the best time, its ratio to the unconstrained run
 * (unconstrained / run: 1.00 is as fast), the run meter's and the device node's peaks, and the
 * largest difference from the unconstrained result relative to its largest magnitude. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct attention_args {
  int64_t n, dh, limit;
  int32_t repeats;
  const char *device;
} attention_args;

static void usage(FILE *f) {
  fputs(
      "usage: loom-bench attention [--n N] [--dh D] [--limit BYTES] [--device ID] [--repeats R]\n"
      "  defaults: n = 4096 (the scores are n x n f32), dh = 64, limit 16MiB, cpu0, R = 3\n",
      f);
}

static int parse_args(int argc, char **argv, attention_args *a) {
  *a = (attention_args){4096, 64, 16 << 20, 3, "cpu0"};
  const bench_opt opts[] = {
      BENCH_OPT_INT("n", BENCH_I64, &a->n, 1, 1 << 20, "a size from 1 to 2^20"),
      BENCH_OPT_INT("dh", BENCH_I64, &a->dh, 1, 1 << 16, "a size from 1 to 2^16"),
      BENCH_OPT_INT("repeats", BENCH_I32, &a->repeats, 1, 100, "a count from 1 to 100"),
      BENCH_OPT_TEXT("device", &a->device, "a device id"),
      BENCH_OPT_BYTES("limit", &a->limit, 1, INT64_MAX),
      BENCH_OPT_END,
  };
  bench_cli b = {
      .mode = "attention", .synopsis = "loom-bench attention [options]", .usage = usage, .opts = opts};
  return bench_args(&b, argc, argv);
}

static loom_graph *attention_graph(const attention_args *a) {
  char text[1024];
  long long n = (long long)a->n, d = (long long)a->dh;
  snprintf(text, sizeof text,
           "graph attention(q: f32[%lld,%lld], k: f32[%lld,%lld], v: f32[%lld,%lld]) {\n"
           "  kt = transpose k perm=[1,0]\n"
           "  s0 = dot q kt\n"
           "  scale = constant %.9g : f32[]\n"
           "  s = mul s0 scale\n"
           "  mx = reduce_max s axes=[1] keepdims=true\n"
           "  c = sub s mx\n"
           "  e = exp c\n"
           "  z = reduce_sum e axes=[1] keepdims=true\n"
           "  p = div e z\n"
           "  o = dot p v\n"
           "  return o\n}\n",
           n, d, n, d, n, d, 1.0 / sqrt((double)a->dh));
  return bench_parse(text, "attention");
}

static double rel_diff(const loom_tensor *x, const loom_tensor *ref) {
  int64_t n = 0;
  loom_type_elements(&ref->type, &n);
  const float *u = x->data, *v = ref->data;
  double diff = 0, mag = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)u[i] - (double)v[i]);
    if (!(e <= diff)) diff = e; /* NaN counts */
    if (fabs((double)v[i]) > mag) mag = fabs((double)v[i]);
  }
  return mag > 0 ? diff / mag : diff;
}

int loom_bench_attention(int argc, char **argv) {
  attention_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;
  loom_graph *g = attention_graph(&a);
  loom_tensor in[3] = {0};
  bool ok = g != NULL;
  for (int32_t p = 0; p < 3 && ok; p++) {
    ok = !loom_tensor_init(&in[p], loom_value_type(g, loom_graph_param_at(g, p))) &&
         !loom_tensor_fill_random(&in[p], 3, (uint64_t)p);
    if (!ok) fprintf(stderr, "loom-bench attention: inputs: %s\n", loom_last_error());
  }
  if (!ok) {
    for (int32_t p = 0; p < 3; p++) loom_tensor_deinit(&in[p]);
    loom_graph_destroy(g);
    return 1;
  }
  static const char *const no_fuse[] = {"fuse"};
  bench_run runs[3];
  const char *names[3] = {"unconstrained", "limit", "limit, unfused"};
  bench_plan_run(a.device, g, in, 3, 0, NULL, 0, a.repeats, &runs[0]);
  bench_plan_run(a.device, g, in, 3, a.limit, NULL, 0, a.repeats, &runs[1]);
  bench_plan_run(a.device, g, in, 3, a.limit, no_fuse, 1, a.repeats, &runs[2]);
  char lim[32], sc[32];
  printf("softmax attention on %s: n = %lld, dh = %lld, f32 (scores %s), limit %s; best of %d runs\n",
         a.device, (long long)a.n, (long long)a.dh, loom_bytes_format(a.n * a.n * 4, sc, sizeof sc),
         loom_bytes_format(a.limit, lim, sizeof lim), (int)a.repeats);
  printf("%-16s %10s %8s %12s %12s %12s\n", "run", "seconds", "ratio", "meter peak", "node peak",
         "vs unconstr.");
  rc = 0;
  for (int32_t i = 0; i < 3; i++) {
    const bench_run *r = &runs[i];
    char meter[32], node[32];
    if (!r->ok) {
      printf("%-16s did not run: %s\n", names[i], r->why);
      rc = 1;
      continue;
    }
    double diff = runs[0].ok ? rel_diff(&r->out, &runs[0].out) : NAN;
    bool bad = i > 0 && (r->meter_peak > a.limit || r->node_peak > a.limit || !(diff <= 1e-4));
    printf("%-16s %10.3f %8.2f %12s %12s %12.1e%s\n", names[i], r->best_seconds,
           runs[0].ok ? runs[0].best_seconds / r->best_seconds : NAN,
           loom_bytes_format(r->meter_peak, meter, sizeof meter),
           r->node_peak < 0 ? "?" : loom_bytes_format(r->node_peak, node, sizeof node), diff,
           bad ? "  FAILED (over the limit or off the unconstrained result)" : "");
    rc |= bad;
  }
  for (int32_t i = 0; i < 3; i++) loom_tensor_deinit(&runs[i].out);
  for (int32_t p = 0; p < 3; p++) loom_tensor_deinit(&in[p]);
  loom_graph_destroy(g);
  return rc;
}
