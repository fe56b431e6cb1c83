/* Helpers of the memory tests (mem_util.h). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mem_util.h"

loom_graph *mem_parse(const char *text, const char *file, int line) {
  loom_graph *g = NULL;
  if (loom_graph_parse(text, strlen(text), "memory.lir", &g)) {
    loom_test_fail(file, line, "parse failed: %s", loom_last_error());
    return NULL;
  }
  return g;
}

loom_graph *mem_load_example(const char *name, const char *file, int line) {
  char path[4096];
  const char *root = getenv("LOOM_SOURCE_DIR");
  if (root && *root) {
    snprintf(path, sizeof path, "%s/examples/%s", root, name);
  } else {
    /* This file is <root>/tests/memory/mem_util.c. */
    snprintf(path, sizeof path, "%s", __FILE__);
    char *cut = strstr(path, "tests/memory/mem_util.c");
    if (!cut) {
      loom_test_fail(file, line, "set LOOM_SOURCE_DIR to find examples/%s", name);
      return NULL;
    }
    snprintf(cut, sizeof path - (size_t)(cut - path), "examples/%s", name);
  }
  loom_graph *g = NULL;
  if (loom_graph_load(path, &g)) {
    loom_test_fail(file, line, "%s: %s", path, loom_last_error());
    return NULL;
  }
  return g;
}

static uint64_t rng(uint64_t *s) {
  *s += 0x9E3779B97F4A7C15ull;
  uint64_t z = *s;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

loom_status mem_inputs(const loom_graph *g, uint64_t seed, double lo, double hi, loom_tensor **out) {
  int32_t n = loom_graph_param_count(g);
  loom_tensor *t = calloc((size_t)n + 1, sizeof *t);
  if (!t) return LOOM_ERR_OUT_OF_MEMORY;
  uint64_t s = seed * 0x2545F4914F6CDD1Dull + 7;
  for (int32_t p = 0; p < n; p++) {
    loom_status st = loom_tensor_init(&t[p], loom_value_type(g, loom_graph_param_at(g, p)));
    if (st) {
      mem_tensors_free(t, n);
      return st;
    }
    int64_t count = 0;
    loom_type_elements(&t[p].type, &count);
    loom_dtype dt = t[p].type.dtype;
    if (dt == LOOM_C64 || dt == LOOM_C128) count *= 2;
    for (int64_t i = 0; i < count; i++) {
      double u = lo + (hi - lo) * ((double)(rng(&s) >> 11) / 9007199254740992.0);
      if (dt == LOOM_F32 || dt == LOOM_C64)
        ((float *)t[p].data)[i] = (float)u;
      else if (dt == LOOM_F64 || dt == LOOM_C128)
        ((double *)t[p].data)[i] = u;
    }
  }
  *out = t;
  return LOOM_OK;
}

void mem_tensors_free(loom_tensor *t, int32_t n) {
  for (int32_t i = 0; t && i < n; i++) loom_tensor_deinit(&t[i]);
  free(t);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *mib(int64_t bytes, char *buf, size_t size) {
  snprintf(buf, size, "%.3f MiB", (double)bytes / (double)MIB);
  return buf;
}

bool mem_run_under(const loom_graph *g, int64_t limit, const char *const *disabled, int32_t n_disabled,
                   const loom_tensor *in, loom_tensor **out, mem_run_info *info, const char *file, int line) {
  loom_runner runner;
  memset(&runner, 0, sizeof runner);
  snprintf(runner.device, sizeof runner.device, "cpu0");
  runner.limit = limit;
  return mem_run_runners(g, &runner, 1, disabled, n_disabled, in, out, info, file, line);
}

bool mem_run_runners(const loom_graph *g, const loom_runner *runners, int32_t n_runners,
                     const char *const *disabled, int32_t n_disabled, const loom_tensor *in,
                     loom_tensor **out, mem_run_info *info, const char *file, int line) {
  mem_run_info local;
  if (!info) info = &local;
  memset(info, 0, sizeof *info);
  *out = NULL;
  const char *name = loom_graph_name(g);
  char lim[128] = "";
  for (int32_t i = 0; i < n_runners; i++) {
    size_t used = strlen(lim);
    snprintf(lim + used, sizeof lim - used, "%s%g", i ? "," : "", (double)runners[i].limit / (double)MIB);
  }
  snprintf(lim + strlen(lim), sizeof lim - strlen(lim), " MiB");
  double t0 = now();
  loom_optimize_options opts;
  loom_optimize_options_init(&opts);
  opts.disabled = disabled;
  opts.n_disabled = n_disabled;
  loom_graph *opt = NULL;
  loom_plan *plan = NULL;
  loom_context *ctx = NULL;
  loom_rewrite_report report = {0};
  loom_plan_stats stats = {0};
  int32_t n_out = loom_graph_output_count(g);
  loom_tensor *res = calloc((size_t)n_out + 1, sizeof *res);
  bool ok = false;
  loom_status s = res ? LOOM_OK : LOOM_ERR_OUT_OF_MEMORY;
  const char *step = "allocating outputs";
  if (!s) {
    step = "loom_graph_optimize_for_runners";
    s = loom_graph_optimize_for_runners(g, runners, n_runners, &opts, &opt, &report, info->note,
                                        sizeof info->note);
  }
  if (!s) {
    step = "loom_plan_split_by_memory";
    s = loom_plan_split_by_memory(opt, runners, n_runners, &plan);
  }
  if (!s) {
    step = "loom_context_create";
    loom_context_options co;
    loom_context_options_init(&co);
    co.devices = "cpu0";
    s = loom_context_create(&co, &ctx);
  }
  if (!s) {
    step = "loom_plan_run";
    s = loom_plan_run(ctx, plan, in, loom_graph_param_count(g), res, n_out, &stats);
  }
  if (s) {
    loom_test_fail(file, line, "graph '%s' under %s: %s: %s: %s", name, lim, step, loom_status_string(s),
                   loom_last_error());
    goto done;
  }
  info->n_ops_in = loom_graph_op_count(g);
  info->n_ops = loom_graph_op_count(loom_plan_graph(plan));
  info->n_stages = stats.n_stages;
  for (int32_t i = 0; i < report.count; i++) {
    size_t used = strlen(info->rewrites);
    if (strstr(info->rewrites, report.entries[i].name)) continue;
    snprintf(info->rewrites + used, sizeof info->rewrites - used, "%s%s", used ? "," : "",
             report.entries[i].name);
  }
  if (stats.n_stages != loom_plan_stage_count(plan)) {
    loom_test_fail(file, line, "graph '%s' under %s: stats for %d stages, the plan has %d", name, lim,
                   (int)stats.n_stages, (int)loom_plan_stage_count(plan));
    goto done;
  }
  for (int32_t i = 0; i < stats.n_stages; i++) {
    const loom_stage_stats *st = &stats.stages[i];
    char a[32], b[32];
    loom_stage_info si;
    if (loom_plan_stage(plan, i, &si) || si.runner < 0 || si.runner >= n_runners ||
        si.limit != runners[si.runner].limit || st->limit_bytes != si.limit ||
        st->estimated_peak_bytes != si.estimated_peak) {
      loom_test_fail(file, line,
                     "graph '%s' under %s: stage %d of %d: runner or limit or estimate differ between "
                     "the plan and the stats",
                     name, lim, (int)i + 1, (int)stats.n_stages);
      goto done;
    }
    if (st->estimated_peak_bytes > info->est_peak) info->est_peak = st->estimated_peak_bytes;
    if (st->peak_bytes > info->peak) info->peak = st->peak_bytes;
    if (st->peak_bytes > st->limit_bytes || st->estimated_peak_bytes > st->limit_bytes) {
      loom_test_fail(file, line,
                     "graph '%s' under %s: stage %d of %d: measured peak %s, estimated %s, limit %lld", name,
                     lim, (int)i + 1, (int)stats.n_stages, mib(st->peak_bytes, a, sizeof a),
                     mib(st->estimated_peak_bytes, b, sizeof b), (long long)st->limit_bytes);
      goto done;
    }
    if (st->peak_bytes <= 0 || fabs((double)st->peak_bytes - (double)st->estimated_peak_bytes) >
                                   0.1 * (double)st->estimated_peak_bytes) {
      loom_test_fail(file, line,
                     "graph '%s' under %s: stage %d of %d: measured peak %s not within 10%% of the "
                     "estimate %s",
                     name, lim, (int)i + 1, (int)stats.n_stages, mib(st->peak_bytes, a, sizeof a),
                     mib(st->estimated_peak_bytes, b, sizeof b));
      goto done;
    }
  }
  info->seconds = now() - t0;
  {
    char a[32], b[32];
    printf(
        "    %-12s under %-10s %d stage(s), est peak %s, measured %s, ops %d -> %d, %.2f s run / %.2f s in "
        "all%s%s%s%s\n",
        name, lim, (int)info->n_stages, mib(info->est_peak, a, sizeof a), mib(info->peak, b, sizeof b),
        (int)info->n_ops_in, (int)info->n_ops, stats.seconds, info->seconds,
        info->rewrites[0] ? "; rewrites: " : "", info->rewrites, info->note[0] ? "; note: " : "", info->note);
  }
  for (int32_t i = 0; stats.n_stages > 1 && i < stats.n_stages; i++) {
    loom_stage_info si;
    char a[32], b[32];
    loom_plan_stage(plan, i, &si);
    printf("      stage %d: runner %d (limit %g MiB), %d ops, est peak %s, measured %s\n", (int)i + 1,
           (int)si.runner + 1, (double)si.limit / (double)MIB, (int)si.n_ops,
           mib(stats.stages[i].estimated_peak_bytes, a, sizeof a),
           mib(stats.stages[i].peak_bytes, b, sizeof b));
  }
  *out = res;
  res = NULL;
  ok = true;
done:
  mem_tensors_free(res, n_out);
  loom_plan_stats_deinit(&stats);
  loom_rewrite_report_deinit(&report);
  loom_context_destroy(ctx);
  loom_plan_destroy(plan);
  loom_graph_destroy(opt);
  return ok;
}

double mem_max_abs_diff(const float *got, const double *want, int64_t n, int64_t *where) {
  double worst = -1;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)got[i] - want[i]);
    if (isnan(e)) e = INFINITY;
    if (e > worst) {
      worst = e;
      if (where) *where = i;
    }
  }
  return worst < 0 ? 0 : worst;
}

double mem_max_abs(const double *x, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
  return m;
}

bool mem_check_close(const char *what, const float *got, const double *want, int64_t n, double scale,
                     double rtol, const char *file, int line) {
  int64_t at = 0;
  double worst = mem_max_abs_diff(got, want, n, &at);
  if (!(worst <= rtol * scale)) {
    loom_test_fail(file, line,
                   "%s: element %lld is %.9g, float64 says %.9g (|diff| %.3g > %.3g = %g x scale %.6g)", what,
                   (long long)at, (double)got[at], want[at], worst, rtol * scale, rtol, scale);
    return false;
  }
  return true;
}

double mem_d2(const float *x, const float *y, int64_t i, int64_t j, int64_t d) {
  double s = 0;
  for (int64_t c = 0; c < d; c++) {
    double t = (double)x[i * d + c] - (double)y[j * d + c];
    s += t * t;
  }
  return s;
}

double mem_l1(const float *x, const float *y, int64_t i, int64_t j, int64_t d) {
  double s = 0;
  for (int64_t c = 0; c < d; c++) s += fabs((double)x[i * d + c] - (double)y[j * d + c]);
  return s;
}

void mem_knn_best(const float *x, const float *y, int64_t n, int64_t m, int64_t d, int64_t k,
                  mem_dist_fn dist, double *best) {
#pragma omp parallel for schedule(dynamic, 64)
  for (int64_t i = 0; i < n; i++) {
    double *b = best + i * k;
    int64_t have = 0;
    for (int64_t j = 0; j < m; j++) {
      double v = dist(x, y, i, j, d);
      if (have == k && v >= b[k - 1]) continue;
      int64_t p = have < k ? have++ : k - 1;
      while (p > 0 && b[p - 1] > v) {
        b[p] = b[p - 1];
        p--;
      }
      b[p] = v;
    }
  }
}

static bool knn_close(double got, double want) {
  return fabs(got - want) <= 1e-3 * fabs(want) + 1e-6;
}

bool mem_check_knn(const float *x, const float *y, int64_t n, int64_t m, int64_t d, int64_t k,
                   mem_dist_fn dist, const double *best, const loom_tensor *val, const loom_tensor *idx,
                   const char *file, int line) {
  if (val->type.dtype != LOOM_F32 || idx->type.dtype != LOOM_I64 || val->type.rank != 2 ||
      idx->type.rank != 2 || val->type.dims[0] != n || val->type.dims[1] != k || idx->type.dims[0] != n ||
      idx->type.dims[1] != k) {
    char a[LOOM_TYPE_STRING_MAX], b[LOOM_TYPE_STRING_MAX];
    loom_test_fail(file, line, "kNN results are %s and %s, expected f32[%lld,%lld] and i64[%lld,%lld]",
                   loom_type_format(&val->type, a, sizeof a), loom_type_format(&idx->type, b, sizeof b),
                   (long long)n, (long long)k, (long long)n, (long long)k);
    return false;
  }
  const float *v = val->data;
  const int64_t *ix = idx->data;
  for (int64_t i = 0; i < n; i++) {
    for (int64_t j = 0; j < k; j++) {
      int64_t id = ix[i * k + j];
      if (id < 0 || id >= m) {
        loom_test_fail(file, line, "kNN row %lld: index %lld out of range [0,%lld)", (long long)i,
                       (long long)id, (long long)m);
        return false;
      }
      for (int64_t q = 0; q < j; q++)
        if (ix[i * k + q] == id) {
          loom_test_fail(file, line, "kNN row %lld: index %lld returned twice", (long long)i, (long long)id);
          return false;
        }
      double want = best[i * k + j], at = dist(x, y, i, id, d);
      if (!knn_close(at, want) || !knn_close((double)v[i * k + j], want)) {
        loom_test_fail(
            file, line,
            "kNN row %lld, neighbour %lld: index %lld at distance %.9g, returned value %.9g, the true "
            "distance is %.9g",
            (long long)i, (long long)j, (long long)id, at, (double)v[i * k + j], want);
        return false;
      }
    }
  }
  return true;
}
