/* Rewriting a graph for a set of runners (see loom_graph_optimize_for_runners in plan.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"
#include "loom/plan.h"

/* The slices a loop holds of each streamed operand on these runners (loom_optimize_options):
 * on cpu devices a piece reads its slice in place from host memory, so a second slice would
 * overlap nothing and only halve the room for the pieces (a dot under a limit ran in pieces
 * half as long); a device with memory of its own writes the next slice in while a piece
 * computes, unless LOOM_WRITE_AHEAD=0 puts that write behind the piece. A loop may end up on
 * any of the runners, so one device that double buffers decides for all. */
static int32_t slices_for(const loom_runner *runners, int32_t n_runners) {
  const char *ahead = getenv("LOOM_WRITE_AHEAD");
  if (ahead && strcmp(ahead, "0") == 0) return 1;
  for (int32_t i = 0; i < n_runners; i++)
    if (strncasecmp(runners[i].device, "cpu", 3) != 0) return 2;
  return 1;
}

loom_status loom_graph_optimize_for_runners(const loom_graph *graph, const loom_runner *runners,
                                            int32_t n_runners, const loom_optimize_options *opts,
                                            loom_graph **out_graph, loom_rewrite_report *report, char *note,
                                            size_t note_size) {
  if (note && note_size) note[0] = '\0';
  if (!out_graph)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_optimize_for_runners: out_graph is NULL");
  *out_graph = NULL;
  if (n_runners < 0 || (n_runners > 0 && !runners))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_optimize_for_runners: bad runner list");
  loom_optimize_options o;
  if (opts)
    o = *opts;
  else
    loom_optimize_options_init(&o);
  o.limit = 0;
  for (int32_t i = 0; i < n_runners; i++) o.limit = LOOM_MAX(o.limit, runners[i].limit);
  if (o.slices == 0) o.slices = slices_for(runners, n_runners);
  loom_status s = loom_graph_optimize(graph, &o, out_graph, report);
  if (s != LOOM_ERR_OUT_OF_MEMORY || o.limit == 0) return s;
  /* The splitter can still fit the graph as several stages: rewrite without chunking. */
  const char *disabled[64];
  int32_t n = 0;
  for (int32_t i = 0; i < o.n_disabled && n < 63; i++) disabled[n++] = o.disabled[i];
  disabled[n++] = "chunk";
  if (note && note_size) {
    char lim[32];
    snprintf(
        note, note_size,
        "the chunk rewrite cannot fit the whole graph under %s (%s); the plan cuts it into stages instead",
        loom__format_bytes(o.limit, lim, sizeof lim), loom_last_error());
  }
  if (report) loom_rewrite_report_deinit(report);
  o.disabled = disabled;
  o.n_disabled = n;
  return loom_graph_optimize(graph, &o, out_graph, report);
}
