/* A graph planned for a shared run (loom/share.h): rewritten for the devices
 * (loom_graph_optimize_for_sharing) and cut into the stages the shared runner places on them
 * (loom_share_cut: by branch, share_cut.h, or around the top-level loops). The runner runs
 * these stages as they are: every cut is made here, when the plan is. */
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "loom/share.h"
#include "splitter/share_cut.h"

/* Sharing chunks a graph to its unchunked peak over this many times the devices: pieces
 * enough that each device gets several ranges of several pieces. */
#define PIECES_PER_DEVICE 8

/* ---- the rewrite -------------------------------------------------------------------------- */

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

/* ---- the cut ------------------------------------------------------------------------------ */

/* loom_plan_split's predicate: a cut before each top-level loop and before the op after one. */
typedef struct cut_acc {
  bool seen, after_loop;
  const int32_t *stage_of_op; /* the branch cut's, where there is one */
} cut_acc;

static bool cut_around_loops(const loom_graph *g, int32_t op, void *acc) {
  cut_acc *a = acc;
  if (a->stage_of_op) return op > 0 && a->stage_of_op[op] != a->stage_of_op[op - 1];
  bool loop = g->ops[op].loop != NULL, cut = a->seen && (loop || a->after_loop);
  a->seen = true;
  a->after_loop = loop;
  return cut;
}

loom_status loom_share_cut(const loom_graph *graph, const loom_runner *runner, int32_t n_devices,
                           loom_plan **out_plan) {
  if (out_plan) *out_plan = NULL;
  if (!graph || !runner || !out_plan || n_devices < 1)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_share_cut: NULL argument or no devices");
  loom__branch_cut branches;
  bool found = false;
  memset(&branches, 0, sizeof branches);
  loom_status s = n_devices > 1 ? loom__branch_cut_make(graph, &branches, &found) : LOOM_OK;
  cut_acc acc = {false, false, found ? branches.stage_of_op : NULL};
  if (!s) s = loom_plan_split(found ? branches.graph : graph, cut_around_loops, &acc, runner, 1, out_plan);
  loom__branch_cut_deinit(&branches);
  return s;
}
