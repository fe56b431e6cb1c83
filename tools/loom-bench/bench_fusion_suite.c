/* loom-bench fusion --suite: whether the fuse rewrite ever loses (issue 35, acceptance 4: "no case
 * of the suite is slower with fuse on than with --no-rewrite fuse"). Every op case of
 * `loom-bench suite` (as cpu0 runs it) and the graphs of the modes that fuse (chains, bodies,
 * reductions and matrix-vector dots over elementwise regions, softmax, kmv, kNN) are planned
 * twice on cpu0, as loom-run plans them with the default rewrites and with `fuse` off, in one
 * context; then the two plans run in alternate rounds, so a busy machine slows both alike.
 *
 * Per case: the best time of each side, the ratio on / off (fused over unfused: <= 1 means
 * fusion did not lose), and the spread of each side (median over best, minus 1). A case where
 * something was fused is flagged SLOWER where on / off passes 1 + noise, noise being the larger
 * of 5% and the two sides' spreads added: a loss inside the machine's own noise is not one this
 * run can show. Where nothing was fused both sides run the same plan, and are not judged. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "suite.h"

#define FS_MAX_ROUNDS 64

typedef struct fs_args {
  const char *profile; /* the suite's sizes: "quick" or "tiny" */
  int32_t rounds;
  const char *cases;
  bool fused_only; /* only the graphs the rewrite fuses (skip the suite's one-op cases) */
} fs_args;

typedef struct fs_side {
  loom_graph *opt;
  loom_plan *plan;
  int32_t fused; /* fuse entries of the rewrite report */
  double t[FS_MAX_ROUNDS];
} fs_side;

typedef struct fs_run {
  const fs_args *a;
  loom_context *ctx;
  int32_t cases, slower, failed;
} fs_run;

/* Plans g for cpu0 unchunked (the suite's runs have no limit) with fuse on or off. */
static loom_status fs_plan(loom_context *ctx, const loom_graph *g, bool fuse, fs_side *s) {
  const char *off[] = {"chunk", "fuse"};
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.disabled = off;
  o.n_disabled = fuse ? 1 : 2;
  loom_rewrite_report rep = {0};
  loom_status st = loom_graph_optimize(g, &o, &s->opt, &rep);
  for (int32_t i = 0; !st && i < rep.count; i++) s->fused += !strcmp(rep.entries[i].name, "fuse");
  loom_rewrite_report_deinit(&rep);
  loom_device_info info;
  int32_t index;
  if (!st) st = loom_context_find_device(ctx, "cpu0", &index);
  if (!st) st = loom_context_device_info(ctx, index, &info);
  loom_runner runner = {"cpu0", st ? 0 : info.memory_bytes};
  if (!st) st = loom_plan_split_by_memory(s->opt, &runner, 1, &s->plan);
  return st;
}

/* One run of a side: its seconds, or -1 (the error in loom_last_error). outs: the results. */
static double fs_once(loom_context *ctx, const fs_side *s, const loom_tensor *in, int32_t n_in,
                      loom_tensor *outs, int32_t n_out) {
  loom_run_stats stats = {0};
  double t = bench_now();
  loom_status st = loom_run(ctx, s->plan, NULL, in, n_in, outs, n_out, &stats);
  t = bench_now() - t;
  loom_run_stats_deinit(&stats);
  return st ? -1 : t;
}

/* Whether two results agree: floats within 1e-4 of the largest magnitude (the fused body may
 * add in another order, and its exp is libmvec's), integers (topk's indices) exactly; topk's
 * indices may differ where values tie within that tolerance, so they are compared as values. */
static bool fs_same(const loom_tensor *a, const loom_tensor *b) {
  int64_t n = 1;
  for (int32_t d = 0; d < a->type.rank; d++) n *= a->type.dims[d];
  loom_dtype dt = a->type.dtype;
  if (dt != LOOM_F32 && dt != LOOM_F64) return true; /* indices: judged by their values */
  double big = 0, diff = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = dt == LOOM_F32 ? ((const float *)a->data)[i] : ((const double *)a->data)[i];
    double y = dt == LOOM_F32 ? ((const float *)b->data)[i] : ((const double *)b->data)[i];
    big = fmax(big, fabs(y));
    diff = fmax(diff, fabs(x - y));
  }
  return diff <= 1e-4 * big || diff == 0;
}

static int fs_cmp(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* Best and median of n times. */
static void fs_stats(const double *t, int32_t n, double *best, double *median) {
  double s[FS_MAX_ROUNDS];
  memcpy(s, t, sizeof *t * (size_t)n);
  qsort(s, (size_t)n, sizeof *s, fs_cmp);
  *best = s[0];
  *median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static void fs_print(fs_run *r, const char *name, const char *size, const fs_side *on, const fs_side *off) {
  double b_on, m_on, b_off, m_off;
  fs_stats(on->t, r->a->rounds, &b_on, &m_on);
  fs_stats(off->t, r->a->rounds, &b_off, &m_off);
  double sp_on = m_on / b_on - 1, sp_off = m_off / b_off - 1, ratio = b_on / b_off;
  double noise = fmax(0.05, sp_on + sp_off);
  bool slower = on->fused > 0 && ratio > 1 + noise; /* nothing fused: one plan, twice */
  r->slower += slower;
  printf("%-12s %-22s %5d %11.4f %11.4f %7.3f %6.1f%% %6.1f%%  %s\n", name, size, (int)on->fused, b_on * 1e3,
         b_off * 1e3, ratio, 100 * sp_on, 100 * sp_off,
         slower              ? "SLOWER"
         : on->fused == 0    ? "nothing fused"
         : ratio < 1 - noise ? "faster"
                             : "within noise");
}

/* Plans, checks and times one case both ways; prints its row. */
static void fs_case(fs_run *r, const char *name, const char *size, const char *text) {
  if (!bench_id_listed(r->a->cases, name)) return;
  r->cases++;
  loom_graph *g = bench_parse(text, "fusion");
  fs_side on = {0}, off = {0};
  int32_t n_in = g ? loom_graph_param_count(g) : 0, n_out = g ? loom_graph_output_count(g) : 0;
  loom_tensor in[8], a[4], b[4];
  memset(in, 0, sizeof in);
  bool ok = g && n_in <= 8 && n_out <= 4;
  for (int32_t p = 0; ok && p < n_in; p++)
    ok = !loom_tensor_init(&in[p], loom_value_type(g, loom_graph_param_at(g, p))) &&
         !loom_tensor_fill_random(&in[p], 11, (uint64_t)p);
  ok = ok && !fs_plan(r->ctx, g, true, &on) && !fs_plan(r->ctx, g, false, &off);
  if (ok && r->a->fused_only && on.fused == 0) {
    r->cases--;
    goto done;
  }
  /* a warm-up of each, whose results are compared */
  ok = ok && fs_once(r->ctx, &on, in, n_in, a, n_out) >= 0;
  ok = ok && fs_once(r->ctx, &off, in, n_in, b, n_out) >= 0;
  bool same = true;
  for (int32_t k = 0; ok && k < n_out; k++) {
    same &= fs_same(&a[k], &b[k]);
    loom_tensor_deinit(&a[k]);
    loom_tensor_deinit(&b[k]);
  }
  for (int32_t i = 0; ok && same && i < r->a->rounds; i++) {
    bool first = i % 2 == 0; /* which side opens the round alternates too */
    fs_side *x = first ? &on : &off, *y = first ? &off : &on;
    ok = (x->t[i] = fs_once(r->ctx, x, in, n_in, a, n_out)) >= 0;
    for (int32_t k = 0; ok && k < n_out; k++) loom_tensor_deinit(&a[k]);
    ok = ok && (y->t[i] = fs_once(r->ctx, y, in, n_in, a, n_out)) >= 0;
    for (int32_t k = 0; ok && k < n_out; k++) loom_tensor_deinit(&a[k]);
  }
  if (ok && same) {
    fs_print(r, name, size, &on, &off);
  } else {
    r->failed++;
    printf("%-12s %-22s failed: %s\n", name, size,
           !ok ? loom_last_error() : "the fused result differs from the unfused one");
  }
done:
  loom_plan_destroy(on.plan);
  loom_plan_destroy(off.plan);
  loom_graph_destroy(on.opt);
  loom_graph_destroy(off.opt);
  for (int32_t p = 0; p < n_in && p < 8; p++) loom_tensor_deinit(&in[p]);
  loom_graph_destroy(g);
}

static void fs_suite_case(const char *name, const char *dtype, const char *size, const char *text,
                          void *user) {
  char label[48];
  snprintf(label, sizeof label, "%s %s", dtype, size);
  fs_case(user, name, label, text);
}

/* The graphs that fuse: each in the form the modes that time them write it; n scales them
 * (quick: n = 1; tiny: the arrays 64 times smaller). */
static void fs_fused_cases(fs_run *r) {
  bool tiny = !strcmp(r->a->profile, "tiny");
  long long v = tiny ? 1 << 14 : 1 << 20, R = tiny ? 64 : 2048, C = tiny ? 64 : 1024, n = tiny ? 256 : 4096;
  char t[4096];
  /* the 2,000-add chain of acceptance 4, longer than t */
  size_t cap = 2000 * 32 + 128;
  char *chain = malloc(cap);
  if (chain) {
    size_t l = (size_t)snprintf(chain, cap, "graph chain(x: f32[16], y: f32[16]) {\n  v0 = add x y\n");
    for (int i = 1; i < 2000; i++) l += (size_t)snprintf(chain + l, cap - l, "  v%d = add v%d y\n", i, i - 1);
    snprintf(chain + l, cap - l, "  return v1999\n}\n");
    fs_case(r, "chain", "2000 adds f32[16]", chain);
    free(chain);
  }
  size_t len = (size_t)snprintf(t, sizeof t, "graph c(x: f32[%lld], y: f32[%lld]) {\n  v0 = add x y\n", v, v);
  for (int i = 1; i < 16; i++)
    len += (size_t)snprintf(t + len, sizeof t - len, "  v%d = add v%d y\n", i, i - 1);
  snprintf(t + len, sizeof t - len, "  return v15\n}\n");
  fs_case(r, "chain_1m", "16 adds", t);
  snprintf(t, sizeof t,
           "graph poly(x: f32[%lld], a: f32[%lld], b: f32[%lld]) {\n  xx = mul x x\n  p = mul xx a\n"
           "  q = mul x b\n  r = add p q\n  e = exp x\n  s = add r e\n  z = tanh s\n  return z\n}\n",
           v, v, v);
  fs_case(r, "poly", "f32 elementwise", t);
  snprintf(
      t, sizeof t,
      "graph s(x: f32[%lld], y: f32[%lld]) {\n  d = sub x y\n  q = mul d d\n  s = reduce_sum q axes=[0]\n"
      "  return s\n}\n",
      4 * v, 4 * v);
  fs_case(r, "sum_sq", "sum (x-y)^2", t);
  snprintf(t, sizeof t,
           "graph m(x: f32[%lld,%lld], y: f32[%lld,%lld]) {\n  e = exp x\n  p = mul e y\n"
           "  m = reduce_max p axes=[1]\n  return m\n}\n",
           R, C, R, C);
  fs_case(r, "rows_max", "max_j exp(x)*y", t);
  snprintf(t, sizeof t,
           "graph m(x: f32[%lld,%lld], y: f32[%lld,%lld]) {\n  d = sub x y\n  q = mul d d\n"
           "  m = reduce_sum q axes=[0]\n  return m\n}\n",
           R, C, R, C);
  fs_case(r, "cols_sum", "sum_i (x-y)^2", t);
  snprintf(t, sizeof t,
           "graph m(x: f32[%lld,%lld], y: f32[%lld,%lld]) {\n  d = sub x y\n  q = mul d d\n"
           "  m = reduce_mean q axes=[1]\n  return m\n}\n",
           R, C, R, C);
  fs_case(r, "rows_mean", "mean_j (x-y)^2", t);
  snprintf(t, sizeof t,
           "graph m(x: f32[%lld,%lld], y: f32[%lld,%lld]) {\n  d = sub x y\n  a = abs d\n"
           "  i = argmax a axis=1\n  return i\n}\n",
           R, C, R, C);
  fs_case(r, "rows_argmax", "argmax_j |x-y|", t);
  snprintf(t, sizeof t,
           "graph m(x: f32[%lld,%lld], y: f32[%lld,%lld]) {\n  d = sub x y\n  q = mul d d\n"
           "  v, i = topk q k=8 axis=1\n  return v, i\n}\n",
           R, C, R, C);
  fs_case(r, "rows_topk", "topk_j (x-y)^2 k=8", t);
  snprintf(t, sizeof t,
           "graph m(a: f32[%lld,%lld], v: f32[%lld]) {\n  e = exp a\n  y = dot e v\n  return y\n}\n", R, R,
           R);
  fs_case(r, "mv_exp", "exp(A) v", t);
  snprintf(t, sizeof t,
           "graph m(a: f32[%lld,%lld], b: f32[%lld,%lld], v: f32[%lld]) {\n  s = add a b\n  y = dot s v\n"
           "  return y\n}\n",
           R, R, R, R, R);
  fs_case(r, "mv_add", "(A+B) v", t);
  snprintf(t, sizeof t,
           "graph sm(x: f32[%lld,%lld]) {\n  m = reduce_max x axes=[1] keepdims=true\n  d = sub x m\n"
           "  e = exp d\n  z = reduce_sum e axes=[1] keepdims=true\n  y = div e z\n  return y\n}\n",
           R, C);
  fs_case(r, "softmax", "rows", t);
  snprintf(t, sizeof t,
           "graph kmv(x: f32[%lld,3], y: f32[%lld,3], b: f32[%lld]) {\n"
           "  xe = reshape x shape=[%lld,1,3]\n  ye = reshape y shape=[1,%lld,3]\n  diff = sub xe ye\n"
           "  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n  h = constant -0.5 : f32[]\n"
           "  e = mul d2 h\n  k = exp e\n  be = reshape b shape=[1,%lld]\n  kb = mul k be\n"
           "  a = reduce_sum kb axes=[1]\n  return a\n}\n",
           n, n, n, n, n, n);
  fs_case(r, "kmv", "d=3", t);
  snprintf(t, sizeof t,
           "graph knn(x: f32[%lld,3], y: f32[%lld,3]) {\n  xe = reshape x shape=[%lld,1,3]\n"
           "  ye = reshape y shape=[1,%lld,3]\n  diff = sub xe ye\n  sq = mul diff diff\n"
           "  d2 = reduce_sum sq axes=[2]\n  val, idx = topk d2 k=10 axis=1 largest=false\n"
           "  return val, idx\n}\n",
           n, n, n, n);
  fs_case(r, "knn", "d=3 k=10", t);
}

static void fs_usage(FILE *f) {
  fputs(
      "usage: loom-bench fusion --suite [--tiny] [--rounds R] [--cases LIST] [--fused-only]\n"
      "  Every op case of `loom-bench suite --quick` on cpu0 and the graphs the fuse rewrite fuses\n"
      "  (chains, bodies, reductions, matrix-vector dots, softmax, kmv, kNN), each planned with the\n"
      "  default rewrites and with fuse off, run alternately R rounds (default 7). Per case: fused ops,\n"
      "  best ms of each side, on/off (<= 1: fusion did not lose), each side's spread (median/best-1);\n"
      "  SLOWER where on/off > 1 + max(5%, the spreads added). Exit 1 when a case is SLOWER (not judged\n"
      "  at --tiny sizes) or fails (an error, or a fused result unlike the unfused one).\n"
      "  --rounds R    alternate rounds per case (default 7, at most 64)\n"
      "  --cases LIST  only these cases, by name (gemm, fft, add, ..., chain, poly, kmv, knn)\n"
      "  --tiny        the suite's tiny sizes and small fused graphs (for the tests)\n"
      "  --fused-only  only the cases where the rewrite fuses something\n",
      f);
}

static int fs_parse(int argc, char **argv, fs_args *a) {
  *a = (fs_args){.profile = "quick", .rounds = 7};
  bool suite = false, tiny = false;
  const bench_opt opts[] = {
      BENCH_OPT_FLAG("suite", &suite),
      BENCH_OPT_FLAG("tiny", &tiny),
      BENCH_OPT_FLAG("fused-only", &a->fused_only),
      BENCH_OPT_INT("rounds", BENCH_I32, &a->rounds, 1, FS_MAX_ROUNDS, "a count from 1 to 64"),
      BENCH_OPT_TEXT("cases", &a->cases, "a list of case names"),
      BENCH_OPT_END,
  };
  bench_cli b = {.mode = "fusion --suite",
                 .synopsis = "loom-bench fusion --suite [--tiny] [--rounds R] [--cases LIST] [--fused-only]",
                 .usage = fs_usage,
                 .opts = opts};
  int rc = bench_args(&b, argc, argv);
  if (!rc && tiny) a->profile = "tiny";
  return rc;
}

int loom_bench_fusion_suite(int argc, char **argv) {
  fs_args a;
  int rc = fs_parse(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;
  loom_context_options co;
  loom_context_options_init(&co);
  co.devices = "cpu0";
  fs_run r = {.a = &a};
  if (loom_context_create(&co, &r.ctx)) {
    fprintf(stderr, "loom-bench fusion --suite: %s\n", loom_last_error());
    return 1;
  }
  printf(
      "the fuse rewrite on cpu0, every case: default rewrites (on) vs --no-rewrite fuse (off), %d "
      "alternate rounds\n",
      (int)a.rounds);
  printf("%-12s %-22s %5s %11s %11s %7s %7s %7s\n", "case", "size", "fused", "on ms", "off ms", "on/off",
         "spr on", "spr off");
  if (!a.fused_only) suite_each_graph(a.profile, fs_suite_case, &r);
  fs_fused_cases(&r);
  loom_context_destroy(r.ctx);
  bool tiny = !strcmp(a.profile, "tiny");
  printf("%d cases, %d slower with fuse on beyond noise%s, %d failed\n", (int)r.cases, (int)r.slower,
         tiny ? " (tiny sizes: not judged)" : "", (int)r.failed);
  /* at --tiny sizes a run takes microseconds and its times mean nothing: only failures count */
  return r.failed || (r.slower && !tiny) ? 1 : 0;
}
