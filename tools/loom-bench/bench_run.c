/* What the modes that time whole graphs share: parse, plan for one runner, run and measure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

long long bench_whole(const char *v, long long lo) {
  int64_t x = -1;
  return loom__cli_parse_int(v, lo, INT64_MAX, &x) ? x : -1; /* digits only, the whole text */
}

loom_graph *bench_parse(const char *text, const char *mode) {
  loom_graph *g = NULL;
  if (loom_graph_parse(text, strlen(text), mode, &g))
    fprintf(stderr, "loom-bench %s: %s\n", mode, loom_last_error());
  return g;
}

int64_t bench_node_peak(loom_context *ctx, const char *device) {
  loom_mem_manager *m = NULL;
  int32_t index, node;
  loom_mem_node_stats st;
  if (loom_context_memory(ctx, &m) || loom_context_find_device(ctx, device, &index) ||
      loom_mem_device_node(m, index, &node) || loom_mem_stats(m, node, &st))
    return -1;
  return st.peak_in_use;
}

/* The runner: the limit, or without one the device's own memory (and no chunking). */
static loom_status make_plan(loom_context *ctx, const char *device, const loom_graph *g, int64_t limit,
                             const char *const *disabled, int32_t n_disabled, loom_graph **opt,
                             loom_plan **plan) {
  const char *off[BENCH_MAX_DISABLED + 1];
  int32_t n_off = 0;
  for (int32_t i = 0; i < n_disabled && i < BENCH_MAX_DISABLED; i++) off[n_off++] = disabled[i];
  if (limit == 0) off[n_off++] = "chunk";
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.fused_runs = loom_fused_body_runs_everywhere; /* fuse first where that fits */
  o.disabled = off;
  o.n_disabled = n_off;
  loom_runner runner = {"", limit};
  snprintf(runner.device, sizeof runner.device, "%s", device);
  loom_status s = LOOM_OK;
  if (limit == 0) {
    loom_device_info info;
    int32_t index;
    s = loom_context_find_device(ctx, device, &index);
    if (!s) s = loom_context_device_info(ctx, index, &info);
    if (s) return s;
    runner.limit = info.memory_bytes;
    s = loom_graph_optimize(g, &o, opt, NULL);
  } else {
    s = loom_graph_optimize_for_runners(g, &runner, 1, &o, opt, NULL, NULL, 0);
  }
  return s ? s : loom_plan_split_by_memory(*opt, &runner, 1, plan);
}

void bench_plan_run(const char *device, const loom_graph *g, const loom_tensor *in, int32_t n_in,
                    int64_t limit, const char *const *disabled, int32_t n_disabled, int32_t repeats,
                    bench_run *r) {
  memset(r, 0, sizeof *r);
  loom_context *ctx = NULL;
  loom_graph *opt = NULL;
  loom_plan *plan = NULL;
  loom_context_options co;
  loom_context_options_init(&co);
  co.devices = device;
  loom_status s = loom_context_create(&co, &ctx);
  if (!s) s = make_plan(ctx, device, g, limit, disabled, n_disabled, &opt, &plan);
  for (int32_t rep = 0; !s && rep <= repeats; rep++) {
    loom_run_stats stats = {0};
    loom_tensor out;
    double t = bench_now();
    s = loom_run(ctx, plan, NULL, in, n_in, &out, 1, &stats);
    t = bench_now() - t;
    if (!s && stats.peak_bytes > r->meter_peak) r->meter_peak = stats.peak_bytes;
    loom_run_stats_deinit(&stats);
    if (s) break;
    if (rep == 0)
      r->out = out;
    else
      loom_tensor_deinit(&out);
    if ((rep > 0 || repeats == 0) && (r->best_seconds == 0 || t < r->best_seconds)) r->best_seconds = t;
  }
  if (s) {
    snprintf(r->why, sizeof r->why, "%s", loom_last_error());
    loom_tensor_deinit(&r->out);
  } else {
    r->node_peak = bench_node_peak(ctx, device);
    r->ok = true;
  }
  loom_plan_destroy(plan);
  loom_graph_destroy(opt);
  loom_context_destroy(ctx);
}
