/* The devices a shared run may use (loom_share_runners, loom_share_plan_runners) and the graph
 * rewritten for them (loom_graph_optimize_for_sharing): loom/share.h. */
#include "runtime/share_run.h"

/* ---- devices ------------------------------------------------------------------------------ */

/* The limit `limits` gives device id (the smallest of the runners naming it), or `fallback`. */
static int64_t limit_of(const char *id, const loom_runner *limits, int32_t n_limits, int64_t fallback) {
  int64_t best = 0;
  for (int32_t i = 0; limits && i < n_limits; i++)
    if (strcasecmp(limits[i].device, id) == 0 && limits[i].limit > 0 && (best == 0 || limits[i].limit < best))
      best = limits[i].limit;
  return best > 0 ? best : fallback;
}

static loom_status add_runner(loom_context *ctx, const char *id, const loom_runner *limits, int32_t n_limits,
                              loom_runner *list, int32_t *n) {
  int32_t index = -1;
  loom_device_info info;
  loom_status s = loom_context_find_device(ctx, id, &index);
  if (!s) s = loom_context_device_info(ctx, index, &info);
  if (s) return s;
  for (int32_t i = 0; i < *n; i++)
    if (strcasecmp(list[i].device, info.id) == 0)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "device %s is named twice", info.id);
  loom_runner *r = &list[(*n)++];
  memset(r, 0, sizeof *r);
  snprintf(r->device, sizeof r->device, "%s", info.id);
  r->limit = limit_of(info.id, limits, n_limits, info.memory_bytes > 0 ? info.memory_bytes : INT64_MAX / 4);
  return LOOM_OK;
}

/* A device other than cpu0 that computes on the host's cores (an OpenCL CPU device, PoCL's):
 * beside cpu0 it adds no compute (auto, dmda's ranges and loom_share_plan_runners leave it out). */
bool loom__share_on_host_cores(const loom_device_info *info) {
  return strcasecmp(info->id, "cpu0") != 0 && info->kind == LOOM_DEVICE_CPU;
}

/* "auto": cpu0 first, then every other device a backend of this build runs, except OpenCL
 * devices of kind CPU (PoCL's): they compute on the host's cores, which cpu0 already keeps
 * busy, so beside it they only take cores from it (on 2 cores cpu0 with PoCL's two devices ran
 * kNN in twice the time cpu0 alone took), and a plan cut for devices that take no range is
 * cut for nothing. A list that names them runs them, under eager; dmda gives them no range
 * beside cpu0 (worker's host_cores). */
static loom_status auto_runners(loom_context *ctx, const loom_runner *limits, int32_t n_limits,
                                loom_runner *list, int32_t *n) {
  loom_status s = add_runner(ctx, "cpu0", limits, n_limits, list, n);
  for (int32_t i = 0; !s && i < loom_context_device_count(ctx); i++) {
    loom_device_info info;
    const loom__exec_device *dev;
    if (loom_context_device_info(ctx, i, &info) || strcasecmp(info.id, "cpu0") == 0 ||
        loom__share_on_host_cores(&info))
      continue;
    if (loom__context_exec_device(ctx, info.id, &dev) == LOOM_OK)
      s = add_runner(ctx, info.id, limits, n_limits, list, n);
  }
  return s;
}

static loom_status list_runners(loom_context *ctx, const char *devices, const loom_runner *limits,
                                int32_t n_limits, loom_runner *list, int32_t *n) {
  const char *p = devices;
  while (*p) {
    size_t len = strcspn(p, ",");
    char id[32];
    if (len == 0 || len >= sizeof id)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "devices '%s': an empty or overlong id at column %d",
                         devices, (int)(p - devices) + 1);
    snprintf(id, sizeof id, "%.*s", (int)len, p);
    const loom__exec_device *dev;
    loom_status s = loom__context_exec_device(ctx, id, &dev);
    if (!s) s = add_runner(ctx, id, limits, n_limits, list, n);
    if (s) return s;
    p += len + (p[len] == ',');
  }
  return LOOM_OK;
}

loom_status loom_share_runners(loom_context *ctx, const char *devices, const loom_runner *limits,
                               int32_t n_limits, loom_runner **out_runners, int32_t *out_count) {
  if (out_runners) *out_runners = NULL;
  if (out_count) *out_count = 0;
  if (!ctx || !out_runners || !out_count)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_share_runners: NULL argument");
  if (!devices) devices = "auto";
  int32_t cap = loom_context_device_count(ctx) + 1, n = 0;
  loom_runner *list = malloc(sizeof *list * (size_t)cap);
  if (!list) return loom__oom("the devices' runners");
  loom_status s = strcmp(devices, "auto") == 0 ? auto_runners(ctx, limits, n_limits, list, &n)
                  : *devices                   ? list_runners(ctx, devices, limits, n_limits, list, &n)
                             : loom__error(LOOM_ERR_INVALID_ARGUMENT, "devices: an empty list");
  if (s) {
    loom__error_prefix("devices '%s': ", devices);
    free(list);
    return s;
  }
  *out_runners = list;
  *out_count = n;
  return LOOM_OK;
}

/* ---- planning for several devices ------------------------------------------------------------ */

/* Whether device `id` computes on the host's cores beside cpu0. */
static loom_status computes_on_host_cores(loom_context *ctx, const char *id, bool *out) {
  int32_t index = 0;
  loom_device_info info;
  loom_status s = loom_context_find_device(ctx, id, &index);
  if (!s) s = loom_context_device_info(ctx, index, &info);
  if (!s) *out = loom__share_on_host_cores(&info);
  return s;
}

loom_status loom_share_plan_runners(loom_context *ctx, const loom_runner *runners, int32_t n,
                                    loom_sched_policy policy, loom_runner *out, int32_t *out_count,
                                    char *left_out, size_t left_out_size) {
  if (left_out && left_out_size) left_out[0] = '\0';
  if (out_count) *out_count = 0;
  if (!ctx || !runners || !out || !out_count || n < 1 || (left_out && !left_out_size))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_share_plan_runners: NULL argument or no runners");
  bool drop = policy == LOOM_SCHED_DMDA && strcasecmp(runners[0].device, "cpu0") == 0;
  size_t at = 0;
  for (int32_t i = 0; i < n; i++) {
    bool host = false;
    loom_status s = drop ? computes_on_host_cores(ctx, runners[i].device, &host) : LOOM_OK;
    if (s) return s;
    if (!host) {
      out[(*out_count)++] = runners[i];
      continue;
    }
    if (left_out && at < left_out_size)
      at += (size_t)snprintf(left_out + at, left_out_size - at, "%s%s", at ? "," : "", runners[i].device);
  }
  return LOOM_OK;
}

static bool has_loop(const loom_graph *g) {
  for (int32_t i = 0; i < g->n_ops; i++)
    if (g->ops[i].loop) return true;
  return false;
}

/* The estimated peak of g rewritten with neither chunking nor fusion: what the whole space
 * holds, which the pieces divide. */
static loom_status unchunked_peak(const loom_graph *graph, const loom_optimize_options *opts, int64_t *out) {
  loom_optimize_options o = *opts;
  const char **off = loom__malloc(sizeof *off * (size_t)(opts->n_disabled + 1));
  if (!off) return loom__oom("the rewrites' names");
  for (int32_t i = 0; i < opts->n_disabled; i++) off[i] = opts->disabled[i];
  off[opts->n_disabled] = "fuse";
  o.disabled = off;
  o.n_disabled = opts->n_disabled + 1;
  o.limit = 0;
  o.fused_runs = NULL;
  loom_graph *g = NULL;
  loom_estimate e;
  memset(&e, 0, sizeof e);
  loom_status s = loom_graph_optimize(graph, &o, &g, NULL);
  if (!s) s = loom_graph_estimate(g, NULL, &e);
  if (!s) *out = e.peak_bytes;
  loom_estimate_deinit(&e);
  loom_graph_destroy(g);
  loom__free(off);
  return s;
}

/* The graph chunked for sharing: every runner at `limit`, chunk before fuse. */
static loom_status chunked_for_sharing(const loom_graph *graph, const loom_runner *runners, int32_t n,
                                       const loom_optimize_options *opts, int64_t limit, loom_graph **out,
                                       loom_rewrite_report *report) {
  loom_runner *small = loom__malloc(sizeof *small * (size_t)n);
  if (!small) return loom__oom("the runners");
  for (int32_t i = 0; i < n; i++) {
    small[i] = runners[i];
    small[i].limit = limit;
  }
  loom_optimize_options o = *opts;
  o.fused_runs = NULL;
  char note[256] = "";
  loom_status s = loom_graph_optimize_for_runners(graph, small, n, &o, out, report, note, sizeof note);
  loom__free(small);
  if (!s && !has_loop(*out)) {
    loom_graph_destroy(*out);
    *out = NULL;
    return loom__error(LOOM_ERR_UNSUPPORTED, "chunking to %lld bytes made no loop%s%s", (long long)limit,
                       note[0] ? ": " : "", note);
  }
  return s;
}

loom_status loom_graph_optimize_for_sharing(const loom_graph *graph, const loom_runner *runners,
                                            int32_t n_runners, const loom_optimize_options *opts,
                                            loom_graph **out_graph, loom_rewrite_report *report, char *note,
                                            size_t note_size) {
  if (note && note_size) note[0] = '\0';
  if (out_graph) *out_graph = NULL;
  if (!graph || !out_graph || (n_runners > 0 && !runners))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_optimize_for_sharing: NULL argument");
  loom_optimize_options defaults;
  loom_optimize_options_init(&defaults);
  if (!opts) opts = &defaults;
  if (n_runners > 1) {
    int64_t peak = 0, smallest = INT64_MAX;
    for (int32_t i = 0; i < n_runners; i++) smallest = LOOM_MIN(smallest, runners[i].limit);
    loom_rewrite_report mine = {0};
    loom_status s = unchunked_peak(graph, opts, &peak);
    /* Fewer, larger pieces where the smallest do not fit (what a piece holds beside its slice,
     * an operand read whole, may pass the limit of the finest cut). */
    for (int64_t div = PIECES_PER_DEVICE * (int64_t)n_runners; !s; div /= 4) {
      int64_t limit = LOOM_MAX(LOOM_MIN(smallest, peak / div), 1);
      loom_rewrite_report_deinit(&mine);
      s = chunked_for_sharing(graph, runners, n_runners, opts, limit, out_graph, &mine);
      if (!s || div < 4 || limit == smallest) break;
      s = LOOM_OK;
    }
    if (!s) {
      if (report) {
        loom_rewrite_report_deinit(report);
        *report = mine;
      } else {
        loom_rewrite_report_deinit(&mine);
      }
      return LOOM_OK;
    }
    loom_rewrite_report_deinit(&mine);
    if (note && note_size)
      snprintf(note, note_size, "not chunked for sharing (%s): planned as for one device", loom_last_error());
  }
  char inner[256] = "";
  loom_status s = loom_graph_optimize_for_runners(graph, runners, n_runners, opts, out_graph, report, inner,
                                                  sizeof inner);
  if (!s && inner[0] && note && note_size && !note[0]) snprintf(note, note_size, "%s", inner);
  return s;
}
