/* loom-bench share: kNN (n x m points in d dims, k nearest) run on several devices at once by
 * the shared runner (loom/share.h) against each device alone, in one process, the
 * configurations interleaved round by round so that each is measured in the same minutes as the
 * others (best of R). Prints the times and the ratios issue 15's acceptance asks for: the first
 * device of the list alone over the list (with its own plan, and with the list's plan run on it
 * alone), and the best single device over `auto`. The neighbours' distances of every run are
 * compared with the first run's. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "loom/loom.h"

typedef struct share_args {
  int64_t n, m, d, k;
  int32_t repeats;
  const char *devices; /* the list shared */
  loom_sched_policy policy;
  bool with_auto;
} share_args;

static void usage(FILE *f) {
  fputs(
      "usage: loom-bench share [--n N] [--m M] [--d D] [--k K] [--repeats R] [--devices LIST]\n"
      "                        [--policy dmda|eager] [--no-auto]\n"
      "  defaults: n = 20000, m = 30000, d = 3, k = 10, R = 3, LIST ocl0,ocl1, dmda\n"
      "  Runs, R rounds of each (after one warm-up round), best of R:\n"
      "    each device of LIST (and of auto) alone, planned as for itself (fused whole where\n"
      "    that fits); the first device of LIST alone on LIST's plan (chunked into a loop);\n"
      "    LIST sharing the loop; auto (every device) sharing it (--no-auto: not run)\n"
      "  Acceptance (issue 15, POCL_DEVICES=\"basic basic\"): first device / LIST >= 1.7, and\n"
      "  best single device / auto >= 1.0. Times on a shared machine are noisy: set\n"
      "  OMP_WAIT_POLICY=passive and read the ratios, not the seconds.\n",
      f);
}

static int parse_args(int argc, char **argv, share_args *a) {
  *a = (share_args){20000, 30000, 3, 10, 3, "ocl0,ocl1", LOOM_SCHED_DMDA, true};
  static const char *const policies[] = {"dmda", "eager"};
  const char *policy = NULL;
  bool no_auto = false;
  const bench_opt opts[] = {
      BENCH_OPT_INT("n", BENCH_I64, &a->n, 1, (int64_t)1 << 40, "a point count of at least 1"),
      BENCH_OPT_INT("m", BENCH_I64, &a->m, 1, (int64_t)1 << 40, "a point count of at least 1"),
      BENCH_OPT_INT("d", BENCH_I64, &a->d, 1, 1 << 20, "dimensions from 1 to 2^20"),
      BENCH_OPT_INT("k", BENCH_I64, &a->k, 1, 1 << 20, "a neighbour count from 1 to 2^20"),
      BENCH_OPT_INT("repeats", BENCH_I32, &a->repeats, 1, 100, "a count from 1 to 100"),
      BENCH_OPT_TEXT("devices", &a->devices, "a list of devices"),
      BENCH_OPT_TEXT("policy", &policy, "dmda or eager"),
      BENCH_OPT_FLAG("no-auto", &no_auto),
      BENCH_OPT_END,
  };
  bench_cli b = {.mode = "share", .synopsis = "loom-bench share [options]", .usage = usage, .opts = opts};
  int rc = bench_args(&b, argc, argv);
  if (rc) return rc;
  a->with_auto = !no_auto;
  if (policy && loom__cli_choice("loom-bench share", "--policy", policy, policies, 2) < 0) return 2;
  if (policy) loom_sched_policy_parse(policy, &a->policy);
  if (a->m < a->k)
    return bench_usage_error(&b, "--k %lld is more than --m %lld", (long long)a->k, (long long)a->m);
  return 0;
}

/* One configuration: a plan and the devices it runs on. */
typedef struct config {
  char label[640];
  char devices[256]; /* loom_run_options.devices */
  loom_graph *optimized;
  loom_plan *plan;
  bool ok;
  char why[512];
  double best;
  loom_run_stats stats; /* of the best run */
  loom_tensor out[2];   /* of the first run */
} config;

static void config_fail(config *c, const char *what) {
  c->ok = false;
  snprintf(c->why, sizeof c->why, "%s: %s", what, loom_last_error());
}

/* Plans g for `plan_devices` (sharing where there are several; as loom-run does, for those the
 * policy gives work: loom_share_plan_runners) to run on `run_devices`. */
static void config_plan(config *c, loom_context *ctx, const loom_graph *g, const char *plan_devices,
                        const char *run_devices, loom_sched_policy policy) {
  loom_runner *runners = NULL;
  int32_t n = 0;
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.fused_runs = loom_fused_body_runs_everywhere;
  snprintf(c->devices, sizeof c->devices, "%s", run_devices);
  c->ok = true;
  if (loom_share_runners(ctx, plan_devices, NULL, 0, &runners, &n)) return config_fail(c, "devices");
  int32_t n_devices = n; /* the cut's: independent branches only where several devices run */
  if (loom_share_plan_runners(ctx, runners, n, policy, runners, &n, NULL, 0)) {
    free(runners);
    return config_fail(c, "devices");
  }
  if (loom_graph_optimize_for_sharing(g, runners, n, &o, &c->optimized, NULL, NULL, 0) ||
      loom_share_cut(c->optimized, runners, n_devices, &c->plan))
    config_fail(c, "planning");
  free(runners);
}

static void config_run(config *c, loom_context *ctx, loom_sched_policy policy, const loom_tensor *in,
                       bool timed) {
  if (!c->ok) return;
  loom_run_options ro;
  loom_run_options_init(&ro);
  ro.devices = c->devices;
  ro.policy = policy;
  loom_tensor out[2];
  loom_run_stats st;
  memset(&st, 0, sizeof st);
  double t0 = bench_now();
  loom_status s = loom_run(ctx, c->plan, &ro, in, 2, out, 2, &st);
  double took = bench_now() - t0;
  if (s) {
    config_fail(c, "run");
    loom_run_stats_deinit(&st);
    return;
  }
  if (timed && (c->best == 0 || took < c->best)) {
    c->best = took;
    loom_run_stats_deinit(&c->stats);
    c->stats = st;
  } else {
    loom_run_stats_deinit(&st);
  }
  for (int i = 0; i < 2; i++) {
    if (!c->out[i].data)
      c->out[i] = out[i];
    else
      loom_tensor_deinit(&out[i]);
  }
}

static void config_deinit(config *c) {
  loom_plan_destroy(c->plan);
  loom_graph_destroy(c->optimized);
  loom_run_stats_deinit(&c->stats);
  loom_tensor_deinit(&c->out[0]);
  loom_tensor_deinit(&c->out[1]);
}

/* Distances of c's neighbours against the reference's (relative 1e-4; the forms of the
 * distance differ in rounding): how many differ. */
static int64_t differing(const config *c, const config *ref) {
  int64_t n = 0, bad = 0;
  loom_type_elements(&c->out[0].type, &n);
  const float *a = c->out[0].data, *b = ref->out[0].data;
  for (int64_t i = 0; i < n; i++)
    if (fabsf(a[i] - b[i]) > 1e-4f * fmaxf(1.0f, fabsf(b[i]))) bad++;
  return bad;
}

static void print_config(const config *c, const config *ref) {
  if (!c->ok) {
    printf("  %-34s failed: %s\n", c->label, c->why);
    return;
  }
  printf("  %-34s %8.3f s", c->label, c->best);
  for (int32_t i = 0; i < c->stats.n_devices; i++)
    if (c->stats.devices[i].pieces > 0)
      printf("  %s %lld pieces", c->stats.devices[i].device, (long long)c->stats.devices[i].pieces);
  if (ref && ref->ok && c != ref)
    printf("  (distances differing from the first: %lld)", (long long)differing(c, ref));
  putchar('\n');
}

/* Two whole runs at once, one per thread (each configuration on its own device): what the
 * machine gives two devices working side by side, the most that sharing one kNN can reach. */
typedef struct pair_job {
  config *c;
  loom_context *ctx;
  const loom_tensor *in;
  loom_sched_policy policy;
} pair_job;

static void *pair_main(void *arg) {
  pair_job *j = arg;
  config_run(j->c, j->ctx, j->policy, j->in, false);
  return NULL;
}

static double run_pair(config *a, config *b, loom_context *ctx, const loom_tensor *in) {
  pair_job ja = {a, ctx, in, LOOM_SCHED_DMDA}, jb = {b, ctx, in, LOOM_SCHED_DMDA};
  pthread_t t;
  double t0 = bench_now();
  if (pthread_create(&t, NULL, pair_main, &jb) != 0) return NAN;
  pair_main(&ja);
  pthread_join(t, NULL);
  return bench_now() - t0;
}

static loom_graph *knn_graph(const share_args *a) {
  char text[1024];
  snprintf(text, sizeof text,
           "graph knn(x: f32[%lld,%lld], y: f32[%lld,%lld]) {\n"
           "  xe = reshape x shape=[%lld,1,%lld]\n  ye = reshape y shape=[1,%lld,%lld]\n"
           "  diff = sub xe ye\n  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n"
           "  val, idx = topk d2 k=%lld axis=1 largest=false\n  return val, idx\n}\n",
           (long long)a->n, (long long)a->d, (long long)a->m, (long long)a->d, (long long)a->n,
           (long long)a->d, (long long)a->m, (long long)a->d, (long long)a->k);
  return bench_parse(text, "share");
}

/* The ids of a list, each once, into ids[] (at most max). */
static int32_t split_ids(const char *list, char ids[][32], int32_t max) {
  int32_t n = 0;
  for (const char *p = list; *p && n < max;) {
    size_t len = strcspn(p, ",");
    snprintf(ids[n], 32, "%.*s", (int)len, p);
    bool seen = false;
    for (int32_t i = 0; i < n; i++) seen |= strcmp(ids[i], ids[n]) == 0;
    n += !seen && len > 0;
    p += len + (p[len] == ',');
  }
  return n;
}

int loom_bench_share(int argc, char **argv) {
  share_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;
  loom_context *ctx = NULL;
  loom_graph *g = knn_graph(&a);
  if (!g || loom_context_create(NULL, &ctx)) {
    fprintf(stderr, "loom-bench share: %s\n", loom_last_error());
    loom_graph_destroy(g);
    return 1;
  }
  loom_tensor in[2];
  for (int p = 0; p < 2; p++) {
    loom_tensor_init(&in[p], loom_value_type(g, loom_graph_param_at(g, p)));
    loom_tensor_fill_random(&in[p], 1, (uint64_t)p);
  }
  /* the singles: every device of the list and of auto, each on its own plan */
  char ids[16][32], all[512] = "";
  int32_t n_ids = split_ids(a.devices, ids, 16);
  loom_runner *autos = NULL;
  int32_t n_auto = 0;
  if (a.with_auto && loom_share_runners(ctx, "auto", NULL, 0, &autos, &n_auto) == LOOM_OK)
    for (int32_t i = 0; i < n_auto && n_ids < 16; i++) {
      snprintf(ids[n_ids], 32, "%s", autos[i].device);
      bool seen = false;
      for (int32_t j = 0; j < n_ids; j++) seen |= strcmp(ids[j], ids[n_ids]) == 0;
      n_ids += !seen;
    }
  for (int32_t i = 0; autos && i < n_auto; i++)
    snprintf(all + strlen(all), sizeof all - strlen(all), i ? ",%s" : "%s", autos[i].device);
  free(autos);
  /* every device this build runs, named: auto leaves OpenCL CPU devices out beside cpu0 */
  char every[512] = "cpu0";
  for (int32_t i = 0; a.with_auto && i < loom_context_device_count(ctx); i++) {
    loom_device_info info;
    loom_runner *one = NULL;
    int32_t k = 0;
    if (loom_context_device_info(ctx, i, &info) || !strcmp(info.id, "cpu0") ||
        loom_share_runners(ctx, info.id, NULL, 0, &one, &k))
      continue;
    free(one);
    snprintf(every + strlen(every), sizeof every - strlen(every), ",%s", info.id);
    if (n_ids < 16 && !bench_id_listed(a.devices, info.id)) {
      bool seen = false;
      for (int32_t j = 0; j < n_ids; j++) seen |= strcmp(ids[j], info.id) == 0;
      if (!seen) snprintf(ids[n_ids++], 32, "%s", info.id);
    }
  }
  config cs[20];
  memset(cs, 0, sizeof cs);
  int32_t n = 0;
  for (int32_t i = 0; i < n_ids; i++, n++) {
    snprintf(cs[n].label, sizeof cs[n].label, "%s alone (its own plan)", ids[i]);
    config_plan(&cs[n], ctx, g, ids[i], ids[i], a.policy);
  }
  int32_t same = n++, list = n++, at_auto = a.with_auto && all[0] ? n++ : -1;
  int32_t at_every = a.with_auto && strcmp(every, all) != 0 && strcmp(every, a.devices) != 0 ? n++ : -1;
  snprintf(cs[same].label, sizeof cs[same].label, "%s alone (the plan of %s)", ids[0], a.devices);
  config_plan(&cs[same], ctx, g, a.devices, ids[0], a.policy);
  snprintf(cs[list].label, sizeof cs[list].label, "%s (%s)", a.devices, loom_sched_policy_name(a.policy));
  config_plan(&cs[list], ctx, g, a.devices, a.devices, a.policy);
  if (at_auto >= 0) {
    snprintf(cs[at_auto].label, sizeof cs[at_auto].label, "auto = %s (%s)", all,
             loom_sched_policy_name(a.policy));
    config_plan(&cs[at_auto], ctx, g, "auto", "auto", a.policy);
  }
  if (at_every >= 0) {
    snprintf(cs[at_every].label, sizeof cs[at_every].label, "%s (%s)", every,
             loom_sched_policy_name(a.policy));
    config_plan(&cs[at_every], ctx, g, every, every, a.policy);
  }
  printf("kNN n = %lld, m = %lld, d = %lld, k = %lld; best of %d, the runs interleaved round by round\n",
         (long long)a.n, (long long)a.m, (long long)a.d, (long long)a.k, (int)a.repeats);
  double pair = 0; /* the first two devices of the list, each a whole kNN of its own, at once */
  bool pairs = n_ids >= 2 && strchr(a.devices, ',');
  for (int32_t r = 0; r <= a.repeats; r++) { /* round 0: warm-up (programs built, devices opened) */
    for (int32_t i = 0; i < n; i++) config_run(&cs[i], ctx, a.policy, in, r > 0);
    double both = pairs ? run_pair(&cs[0], &cs[1], ctx, in) : NAN;
    if (r > 0 && (pair == 0 || both < pair)) pair = both;
  }
  for (int32_t i = 0; i < n; i++) print_config(&cs[i], &cs[0]);
  const config *first = &cs[0], *best = NULL;
  for (int32_t i = 0; i < n_ids; i++)
    if (cs[i].ok && (!best || cs[i].best < best->best)) best = &cs[i];
  if (first->ok && cs[list].ok)
    printf("ratio %s alone / %s: %.2f (its own plan), %.2f (the same plan on %s alone)\n", ids[0], a.devices,
           first->best / cs[list].best, cs[same].ok ? cs[same].best / cs[list].best : NAN, ids[0]);
  if (best && at_auto >= 0 && cs[at_auto].ok)
    printf("ratio best single device (%s) / auto: %.2f\n", best->label, best->best / cs[at_auto].best);
  if (best && at_every >= 0 && cs[at_every].ok)
    printf("ratio best single device / %s: %.2f\n", every, best->best / cs[at_every].best);
  if (pairs && cs[0].ok && cs[1].ok && pair > 0)
    printf(
        "the machine's ceiling: %s and %s each running a whole kNN at once, two threads: %.3f s, "
        "%.2f x the work of one alone per second\n",
        ids[0], ids[1], pair, (cs[0].best + cs[1].best) / pair);
  bool failed = false;
  for (int32_t i = 0; i < n; i++) {
    failed |= !cs[i].ok;
    config_deinit(&cs[i]);
  }
  loom_tensor_deinit(&in[0]);
  loom_tensor_deinit(&in[1]);
  loom_graph_destroy(g);
  loom_context_destroy(ctx);
  return failed ? 1 : 0;
}
