/* loom-plan's predicted times: see predict.h. The predictions are the library's
 * (loom/predict.h); this file makes the platform they need and says what they mean. */
#include "predict.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "loom/internal/json.h"

/* The platform to predict with on `device`: its calibrated model, else its defaults
 * (*calibrated false), from a context of that device alone. */
static loom_status open_platform(const char *device, loom_sched_platform **pf, bool *calibrated) {
  loom_context *ctx = NULL;
  loom_context_options co;
  loom_context_options_init(&co);
  co.devices = device; /* discovery of the other backends is not needed */
  loom_status s = loom_context_create(&co, &ctx);
  if (!s) s = loom_sched_platform_from_context(ctx, device, pf);
  *calibrated = s == LOOM_OK;
  if (s == LOOM_ERR_NOT_FOUND) { /* no model file: the device's defaults, "uncalibrated" */
    int32_t index;
    loom_device_info info;
    s = loom_context_find_device(ctx, device, &index);
    if (!s) s = loom_context_device_info(ctx, index, &info);
    if (!s) s = loom_sched_platform_default(&info, pf);
  }
  loom_context_destroy(ctx);
  return s;
}

void plan_predict(const char *device, int64_t limit, const loom_graph *graph, const loom_plan *plan,
                  const loom_optimize_options *opts, plan_prediction *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->device, sizeof out->device, "%s", device);
  out->limit = limit;
  loom_sched_platform *pf = NULL;
  loom_status s = open_platform(device, &pf, &out->calibrated);
  if (!s) s = loom_plan_predict(pf, plan, &out->seconds);
  if (!s) s = loom_graph_predict_whole(pf, device, graph, opts, &out->whole_need, &out->whole_seconds);
  if (s) {
    snprintf(out->why, sizeof out->why, "%s", loom_last_error());
    loom_sched_platform_destroy(pf);
    return;
  }
  out->ok = true;
  out->warn = out->seconds > LOOM_PLAN_WARN_FACTOR * out->whole_seconds;
  if (out->warn) {
    out->advice_ok =
        !loom_graph_smallest_limit(pf, device, graph, LOOM_PLAN_ADVICE_FACTOR, opts, &out->advice);
    if (!out->advice_ok) snprintf(out->why, sizeof out->why, "%s", loom_last_error());
  }
  loom_sched_platform_destroy(pf);
}

int plan_search_limit(const char *device, const loom_graph *graph, double factor,
                      const loom_optimize_options *opts, loom_limit_search *out, bool *out_calibrated) {
  loom_sched_platform *pf = NULL;
  loom_status s = open_platform(device, &pf, out_calibrated);
  if (!s) s = loom_graph_smallest_limit(pf, device, graph, factor, opts, out);
  loom_sched_platform_destroy(pf);
  if (s) fprintf(stderr, "loom-plan: --max-slowdown: %s\n", loom_last_error());
  return s ? 1 : 0;
}

/* Seconds as "4.1 s", "112 ms" or "36 us": three digits where they mean something. */
static const char *fmt_seconds(double t, char *buf, size_t size) {
  if (t >= 1)
    snprintf(buf, size, "%.3g s", t);
  else if (t >= 1e-3)
    snprintf(buf, size, "%.3g ms", t * 1e3);
  else
    snprintf(buf, size, "%.3g us", t * 1e6);
  return buf;
}

void plan_prediction_print(const plan_prediction *p) {
  if (!p->ok) {
    printf("\npredicted time: not available: %s\n", p->why);
    return;
  }
  char a[32], b[32], lim[32], need[32];
  printf("\npredicted time on %s%s: %s under the limit %s, %s whole (its need %s): %.2fx the whole time\n",
         p->device, p->calibrated ? "" : " (uncalibrated)", fmt_seconds(p->seconds, a, sizeof a),
         loom_bytes_format(p->limit, lim, sizeof lim), fmt_seconds(p->whole_seconds, b, sizeof b),
         loom_bytes_format(p->whole_need, need, sizeof need),
         p->whole_seconds > 0 ? p->seconds / p->whole_seconds : 0.0);
  if (!p->warn) return;
  printf("warning: the limit %s makes this run about %.0fx slower than whole (predicted %s vs %s)", lim,
         p->seconds / p->whole_seconds, a, b);
  if (p->advice_ok) {
    char c[32];
    printf("; the smallest limit within %.0fx is %s (--max-slowdown %.0f)\n", LOOM_PLAN_ADVICE_FACTOR,
           loom_bytes_format(p->advice.limit, c, sizeof c), LOOM_PLAN_ADVICE_FACTOR);
  } else {
    printf("; no limit found within %.0fx: %s\n", LOOM_PLAN_ADVICE_FACTOR, p->why);
  }
}

void plan_prediction_json(loom__json *j, const plan_prediction *p) {
  loom__json_key(j, "prediction");
  loom__json_begin_object(j);
  loom__json_kv_bool(j, "ok", p->ok);
  if (!p->ok) {
    loom__json_kv_string(j, "why", p->why);
    loom__json_end_object(j);
    return;
  }
  loom__json_kv_string(j, "device", p->device);
  loom__json_kv_bool(j, "calibrated", p->calibrated);
  loom__json_kv_int64(j, "limit_bytes", p->limit);
  loom__json_kv_double(j, "seconds", p->seconds);
  loom__json_kv_double(j, "whole_seconds", p->whole_seconds);
  loom__json_kv_int64(j, "whole_need_bytes", p->whole_need);
  loom__json_kv_double(j, "slowdown", p->whole_seconds > 0 ? p->seconds / p->whole_seconds : 0);
  loom__json_kv_bool(j, "warning", p->warn);
  if (p->warn && p->advice_ok) {
    loom__json_kv_int64(j, "smallest_limit_within_2x_bytes", p->advice.limit);
    loom__json_kv_double(j, "smallest_limit_within_2x_seconds", p->advice.seconds);
  }
  loom__json_end_object(j);
}
