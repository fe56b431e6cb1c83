/* A stage planned again for one runner (restage.h): what the shared runner and recovery ask of
 * the splitter instead of cutting or rewriting a graph themselves. */
#include "splitter/restage.h"

#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "ir/repiece.h"
#include "loom/estimate.h"

/* g for `limit` on `device`: cut by memory where its estimated peak `peak` fits, else first
 * rewritten for the limit (chunked). */
static loom_status plan_for(const loom_graph *g, const char *device, int64_t limit, int64_t peak,
                            const loom_optimize_options *optimize, loom_plan **out) {
  loom_runner runner;
  memset(&runner, 0, sizeof runner);
  snprintf(runner.device, sizeof runner.device, "%s", device);
  runner.limit = limit;
  if (peak <= limit) return loom_plan_split_by_memory(g, &runner, 1, out);
  loom_graph *chunked = NULL;
  loom_status s = loom_graph_optimize_for_runners(g, &runner, 1, optimize, &chunked, NULL, NULL, 0);
  if (!s) s = loom_plan_split_by_memory(chunked, &runner, 1, out);
  loom_graph_destroy(chunked);
  return s;
}

/* Recovery's re-plan: the loops' pieces made smaller (a fused op is not cut by the chunk
 * rewrite: its body's ops are, and fusion joins them again in the pieces, where the whole
 * graph was fused before chunking one fused op being the stage), then plan_for. */
static loom_status refit(const loom_graph *g, const loom_runner *runner, const loom__restage *how,
                         loom_plan **out, int64_t *out_limit) {
  loom_graph *plain = NULL, *fitted = NULL;
  int64_t peak = 0, limit = runner->limit;
  loom_status s = loom__graph_unfuse(g, &plain);
  if (!s) s = loom__loops_fit(plain, limit, &fitted, &peak);
  loom_graph_destroy(plain);
  if (!s) s = plan_for(fitted, runner->device, limit, peak, how->optimize, out);
  if (s == LOOM_ERR_OUT_OF_MEMORY && peak > limit && peak < how->ceiling) {
    *out_limit = peak;
    s = plan_for(fitted, runner->device, peak, peak, how->optimize, out);
  }
  loom_graph_destroy(fitted);
  return s;
}

loom_status loom__plan_restage(const loom_graph *g, const loom_runner *runner, const loom__restage *how,
                               loom_plan **out, int64_t *out_limit) {
  int64_t ignored = 0;
  if (!out_limit) out_limit = &ignored;
  if (out) *out = NULL;
  if (!g || !runner || !out || runner->limit <= 0)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "re-staging: NULL argument or a runner without a limit");
  *out_limit = runner->limit;
  if (how && how->refit) return refit(g, runner, how, out, out_limit);
  return loom_plan_split_by_memory(g, runner, 1, out);
}
