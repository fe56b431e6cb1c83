/* loom_graph_run and loom_graph_run_on_device: a whole graph on one device. */
#include <string.h>

#include "hmm/hmm.h"
#include "runtime/context.h"
#include "runtime/exec.h"

loom_status loom_graph_run(loom_context *ctx, const loom_graph *graph, const loom_tensor *inputs,
                           int32_t n_inputs, loom_tensor *outputs, int32_t n_outputs, loom_run_stats *stats) {
  return loom_graph_run_on_device(ctx, "cpu0", graph, inputs, n_inputs, outputs, n_outputs, stats);
}

loom_status loom_graph_run_on_device(loom_context *ctx, const char *device, const loom_graph *graph,
                                     const loom_tensor *inputs, int32_t n_inputs, loom_tensor *outputs,
                                     int32_t n_outputs, loom_run_stats *stats) {
  if (stats) memset(stats, 0, sizeof *stats);
  if (!ctx || !device || !graph || (n_outputs > 0 && !outputs) || (n_inputs > 0 && !inputs))
    return loom__error(
        LOOM_ERR_INVALID_ARGUMENT, "%s: NULL argument",
        strcmp(device ? device : "", "cpu0") == 0 ? "loom_graph_run" : "loom_graph_run_on_device");
  for (int32_t i = 0; i < n_outputs; i++) memset(&outputs[i], 0, sizeof outputs[i]);
  loom_status s = loom_graph_verify(graph);
  if (s) return s;
  if (n_outputs != graph->n_outputs)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "graph '%s' returns %d value%s, the caller has room for %d",
                       graph->name, (int)graph->n_outputs, graph->n_outputs == 1 ? "" : "s", (int)n_outputs);
  if ((s = loom__check_inputs(graph, inputs, n_inputs))) return s;
  loom__exec_options opts = {0};
  if ((s = loom__context_exec_device(ctx, device, &opts.device))) return s;
  loom__meter meter = {0};
  double t0 = loom__now();
  s = loom__execute(graph, &opts, inputs, outputs, &meter);
  loom__hmm_trace_event(opts.device->memory, "run", opts.device->node, t0);
  if (stats) {
    stats->peak_bytes = meter.peak;
    stats->allocations = meter.allocations;
    stats->seconds = loom__now() - t0;
  }
  return s;
}
