/* loom_graph_optimize: the rewrites of IR.md run as a pipeline of passes, each building a new
 * graph from the last one (see passes.h):
 *
 *   match (distance, attention, dot_transpose, tile_broadcast, reduce_broadcast)
 *   -> reorder (dot_chain, sum_broadcast) -> schedule -> chunk (only with a limit) -> fuse
 *
 * With loom_optimize_options.fused_runs set, a graph over the limit is fused first, and where
 * the fused graph fits, chunking is skipped (fuse_instead_of_chunk); where it must be chunked,
 * the loops whose bodies fuse grow their pieces after the fuse pass (grow_fused_loops), since
 * the chunk sized them for the ops one by one.
 *
 * Matching runs first because it changes what there is to reorder (the distance rewrite
 * leaves a dot and sums of broadcasts); the schedule comes after the forms are fixed; chunking
 * comes next, as it cuts the final ops into pieces sized for the limit; fusion last, inside
 * the pieces too, since a fused op needs no more memory than the ops it replaces.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/passes.h"
#include "ir/repiece.h"

static const char *const rewrite_names[] = {LOOM_REWRITE_NAMES};

void loom_optimize_options_init(loom_optimize_options *opts) {
  if (opts) memset(opts, 0, sizeof *opts);
}

void loom_rewrite_report_deinit(loom_rewrite_report *report) {
  if (!report) return;
  loom__free(report->entries);
  memset(report, 0, sizeof *report);
}

loom_status loom__report_add(loom_rewrite_report *report, const char *name, int64_t bytes_saved,
                             const char *fmt, ...) {
  if (!report) return LOOM_OK;
  loom_rewrite_entry *grown = loom__realloc(report->entries, sizeof *grown * (size_t)(report->count + 1));
  if (!grown) return loom__oom("a rewrite report entry");
  report->entries = grown;
  loom_rewrite_entry *e = &grown[report->count++];
  memset(e, 0, sizeof *e);
  snprintf(e->name, sizeof e->name, "%s", name);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->detail, sizeof e->detail, fmt, ap);
  va_end(ap);
  e->bytes_saved = bytes_saved;
  return LOOM_OK;
}

bool loom__rewrite_enabled(const loom_optimize_options *opts, const char *name) {
  if (!opts || !opts->disabled) return true;
  for (int32_t i = 0; i < opts->n_disabled; i++)
    if (opts->disabled[i] && strcmp(opts->disabled[i], name) == 0) return false;
  return true;
}

static loom_status check_options(const loom_optimize_options *opts) {
  if (!opts) return LOOM_OK;
  if (opts->n_disabled < 0 || (opts->n_disabled > 0 && !opts->disabled))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_optimize: %d disabled rewrites at %p",
                       (int)opts->n_disabled, (const void *)opts->disabled);
  if (opts->limit < 0)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_optimize: limit %lld is negative",
                       (long long)opts->limit);
  if (opts->distance_form < LOOM_DISTANCE_AUTO || opts->distance_form > LOOM_DISTANCE_DIRECT)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "loom_graph_optimize: distance_form %d is not a loom_distance_form",
                       (int)opts->distance_form);
  if (opts->slices < 0 || opts->slices > 2)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "loom_graph_optimize: slices=%d: a loop holds 1 or 2 slices of a streamed operand "
                       "(0: the default)",
                       (int)opts->slices);
  for (int32_t i = 0; i < opts->n_disabled; i++) {
    const char *name = opts->disabled[i];
    bool known = false;
    for (int32_t k = 0; name && k < LOOM_ARRAY_SIZE(rewrite_names); k++)
      known |= strcmp(name, rewrite_names[k]) == 0;
    if (known) continue;
    char list[256];
    size_t len = 0;
    for (int32_t k = 0; k < LOOM_ARRAY_SIZE(rewrite_names) && len < sizeof list; k++)
      len += (size_t)snprintf(list + len, sizeof list - len, k ? ", %s" : "%s", rewrite_names[k]);
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "unknown rewrite '%s' (known: %s)", name ? name : "(null)",
                       list);
  }
  return LOOM_OK;
}

typedef loom_status (*pass_fn)(const loom_graph *, const loom_optimize_options *, loom_graph **,
                               loom_rewrite_report *);

static int64_t peak_of(const loom_graph *g) {
  loom_estimate e;
  if (loom_graph_estimate(g, NULL, &e)) return INT64_MAX;
  int64_t peak = e.peak_bytes;
  loom_estimate_deinit(&e);
  return peak;
}

/* Fusion before chunking (loom_optimize_options.fused_runs): where g passes the limit but its
 * fused form fits it, and every fused body runs fused everywhere, *out is that fused form with
 * a chunk entry saying why nothing was cut; else *out is NULL and the report is as it was. */
static loom_status fuse_instead_of_chunk(const loom_graph *g, const loom_optimize_options *opts,
                                         loom_graph **out, loom_rewrite_report *report) {
  *out = NULL;
  if (!opts->fused_runs || !loom__rewrite_enabled(opts, "fuse")) return LOOM_OK;
  int64_t before = peak_of(g);
  if (before <= opts->limit) return LOOM_OK; /* nothing to chunk: the passes run as always */
  int32_t entries = report ? report->count : 0;
  loom_graph *fused = NULL;
  loom_status s = loom__rewrite_fuse(g, opts, &fused, report);
  bool take = !s && fused;
  int64_t after = take ? peak_of(fused) : INT64_MAX;
  take = take && after <= opts->limit;
  for (int32_t i = 0; take && i < fused->n_ops; i++)
    take = !fused->ops[i].fused || opts->fused_runs(fused->ops[i].fused);
  if (take) {
    char a[32], b[32], l[32];
    s = loom__report_add(report, "chunk", 0,
                         "nothing cut: fused, the graph's peak falls from %s to %s, within the limit %s",
                         loom__format_bytes(before, b, sizeof b), loom__format_bytes(after, a, sizeof a),
                         loom__format_bytes(opts->limit, l, sizeof l));
  }
  if (s || !take) {
    loom_graph_destroy(fused);
    if (report) report->count = entries;
    return s;
  }
  *out = fused;
  return LOOM_OK;
}

/* Whether loop l's body was fused and runs fused wherever the plan may place it (arg: the
 * options' fused_runs): its pieces were sized for its ops one by one. */
static bool body_fused(const loom__loop *l, void *arg) {
  bool (*fused_runs)(const loom_graph *) = *(bool (**)(const loom_graph *))arg;
  bool any = false;
  for (int32_t i = 0; i < l->body->n_ops; i++) {
    const loom__op *op = &l->body->ops[i];
    if (op->loop) return false; /* an inner loop sized its own pieces for the outer piece */
    if (op->fused && !fused_runs(op->fused)) return false;
    any = any || op->fused;
  }
  return any;
}

/* After chunk then fuse: the loops whose bodies were fused grow their pieces to the limit
 * (loom__loops_grow), one report entry per loop that grew. Only with fused_runs, as fusion
 * before chunking: a body run op by op would need its intermediates for the larger piece. */
static loom_status grow_fused_loops(loom_graph **g, const loom_optimize_options *opts,
                                    loom_rewrite_report *report) {
  if (!opts->fused_runs || !loom__rewrite_enabled(opts, "fuse")) return LOOM_OK;
  bool (*fused_runs)(const loom_graph *) = opts->fused_runs;
  loom_graph *grown = NULL;
  loom_status s = loom__loops_grow(*g, opts->limit, body_fused, &fused_runs, &grown);
  for (int32_t o = 0; !s && o < grown->n_ops; o++) {
    const loom__loop *before = (*g)->ops[o].loop, *after = grown->ops[o].loop;
    if (!after || after->piece == before->piece) continue;
    char buf[32];
    const char *name = loom__value_label(grown, grown->ops[o].outputs[0], buf, sizeof buf);
    s = loom__report_add(report, "chunk", 0,
                         "loop '%s' grown from pieces of %lld to %lld (%lld pieces): its body is fused and "
                         "holds less than its ops one by one",
                         name, (long long)before->piece, (long long)after->piece,
                         (long long)((after->n + after->piece - 1) / after->piece));
  }
  if (s) {
    loom_graph_destroy(grown);
    return s;
  }
  loom_graph_destroy(*g);
  *g = grown;
  return LOOM_OK;
}

loom_status loom_graph_optimize(const loom_graph *graph, const loom_optimize_options *opts,
                                loom_graph **out_graph, loom_rewrite_report *report) {
  if (!out_graph) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_optimize: out_graph is NULL");
  *out_graph = NULL;
  loom_status s = loom_graph_verify(graph);
  if (!s) s = check_options(opts);
  if (s) return s;
  bool chunk = opts && opts->limit > 0 && loom__rewrite_enabled(opts, "chunk");
  pass_fn passes[] = {loom__rewrite_match, loom__rewrite_reorder, loom__rewrite_schedule,
                      chunk ? loom__rewrite_chunk : NULL, loom__rewrite_fuse};
  enum { CHUNK_PASS = 3 };
  int32_t entries_before = report ? report->count : 0;
  loom_graph *cur = NULL;
  for (int32_t p = 0; !s && p < LOOM_ARRAY_SIZE(passes); p++) {
    if (!passes[p]) continue;
    if (p == CHUNK_PASS) {
      loom_graph *fused = NULL;
      s = fuse_instead_of_chunk(cur ? cur : graph, opts, &fused, report);
      if (!s && fused) {
        loom_graph_destroy(cur);
        cur = fused;
        break; /* fused already, and nothing to chunk */
      }
    }
    loom_graph *next = NULL;
    if (!s) s = passes[p](cur ? cur : graph, opts, &next, report);
    loom_graph_destroy(cur);
    cur = next;
  }
  /* Only where the graph needed chunking: a loop of a graph that fits keeps the pieces it has. */
  if (!s && chunk && cur && peak_of(graph) > opts->limit) s = grow_fused_loops(&cur, opts, report);
  if (s) {
    loom_graph_destroy(cur);
    if (report) report->count = entries_before; /* a failed call reports nothing */
    return s;
  }
  *out_graph = cur;
  return LOOM_OK;
}
