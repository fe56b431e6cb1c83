/* loom_graph_run_buffers: a whole graph on one device, its inputs and outputs buffers of the
 * context's memory manager, so that data the caller keeps on the device (the output of an
 * earlier run, the caller's own OpenCL memory wrapped by loom/opencl.h) stays there. */
#include <string.h>

#include "hmm/hmm.h"
#include "runtime/context.h"
#include "runtime/exec.h"

/* The parameters' types (data NULL: the buffers hold the values), after checking each buffer
 * against its parameter. */
static loom_status input_types(const loom_graph *graph, const loom__exec_device *dev,
                               loom_buffer *const *inputs, loom_tensor *types) {
  for (int32_t p = 0; p < graph->n_params; p++) {
    const loom_type *want = &graph->values[graph->params[p]].type;
    char buf[32], type[LOOM_TYPE_STRING_MAX];
    const char *label = loom__value_label(graph, graph->params[p], buf, sizeof buf);
    if (!inputs[p])
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_run_buffers: input %d (%s): NULL buffer",
                         (int)p + 1, label);
    if (inputs[p]->m != dev->memory)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                         "loom_graph_run_buffers: input %d (%s): a buffer of another memory manager than the "
                         "context's (loom_context_memory)",
                         (int)p + 1, label);
    int64_t bytes = 0;
    loom_type_bytes(want, &bytes);
    if (inputs[p]->bytes < bytes)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                         "loom_graph_run_buffers: input %d (%s): its buffer holds %lld bytes, %s needs %lld",
                         (int)p + 1, label, (long long)inputs[p]->bytes,
                         loom_type_format(want, type, sizeof type), (long long)bytes);
    types[p].type = *want;
    types[p].data = NULL;
  }
  return LOOM_OK;
}

/* An output the executor read back to host memory (a view of an input, a value on cpu0), put
 * into a new buffer on the device's node. */
static loom_status output_from_host(const loom__exec_device *dev, const loom_tensor *t, loom_buffer **out) {
  int64_t bytes = 0;
  loom_status s = loom_type_bytes(&t->type, &bytes);
  if (!s) s = loom_buffer_allocate(dev->memory, bytes, t->type.dtype, dev->node, 0, out);
  if (!s && bytes) s = loom_buffer_write(*out, 0, t->data, bytes);
  if (s) {
    loom_buffer_free(*out);
    *out = NULL;
  }
  return s;
}

loom_status loom_graph_run_buffers(loom_context *ctx, const char *device, const loom_graph *graph,
                                   loom_buffer *const *inputs, int32_t n_inputs, loom_buffer **outputs,
                                   int32_t n_outputs, loom_run_stats *stats) {
  if (stats) memset(stats, 0, sizeof *stats);
  if (!ctx || !device || !graph || (n_outputs > 0 && !outputs) || (n_inputs > 0 && !inputs))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_run_buffers: NULL argument");
  for (int32_t i = 0; i < n_outputs; i++) outputs[i] = NULL;
  loom_status s = loom_graph_verify(graph);
  if (s) return s;
  if (n_outputs != graph->n_outputs || n_inputs != graph->n_params)
    return loom__error(
        LOOM_ERR_INVALID_ARGUMENT,
        "loom_graph_run_buffers: graph '%s' takes %d input(s) and returns %d value(s); the caller "
        "gave %d input(s) and room for %d output(s)",
        graph->name, (int)graph->n_params, (int)graph->n_outputs, (int)n_inputs, (int)n_outputs);
  loom__exec_options opts = {0};
  if ((s = loom__context_exec_device(ctx, device, &opts.device))) return s;
  loom_tensor *types = loom__calloc((size_t)n_inputs + 1, sizeof *types);
  loom_tensor *host = loom__calloc((size_t)n_outputs + 1, sizeof *host);
  if (!types || !host) s = loom__oom("a run's inputs and outputs");
  if (!s) s = input_types(graph, opts.device, inputs, types);
  loom__meter meter = {0};
  double t0 = loom__now();
  if (!s) {
    opts.input_buffers = inputs;
    opts.output_buffers = outputs;
    s = loom__execute(graph, &opts, types, host, &meter);
    loom__hmm_trace_event(opts.device->memory, "run", opts.device->node, t0);
  }
  for (int32_t i = 0; !s && i < n_outputs; i++)
    if (!outputs[i]) s = output_from_host(opts.device, &host[i], &outputs[i]);
  for (int32_t i = 0; host && i < n_outputs; i++) loom_tensor_deinit(&host[i]);
  if (s)
    for (int32_t i = 0; i < n_outputs; i++) {
      loom_buffer_free(outputs[i]);
      outputs[i] = NULL;
    }
  if (stats && !s) {
    stats->peak_bytes = meter.peak;
    stats->allocations = meter.allocations;
    stats->seconds = loom__now() - t0;
  }
  loom__free(types);
  loom__free(host);
  return s;
}
