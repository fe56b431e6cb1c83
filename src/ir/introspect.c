/* The public queries on a graph's ops (loom/graph.h): what a tool or a host program reads to
 * list a graph or a plan without the IR's insides. */
#include <stdio.h>

#include "ir/ir.h"

static bool op_ok(const loom_graph *g, int32_t index) {
  return g && index >= 0 && index < g->n_ops;
}

loom_status loom_graph_op_info_get(const loom_graph *graph, int32_t index, loom_op_info *out_info) {
  if (out_info) *out_info = (loom_op_info){0};
  if (!graph || !out_info)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_op_info_get: NULL %s",
                       graph ? "out_info" : "graph");
  if (!op_ok(graph, index))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "loom_graph_op_info_get: op %d out of range (graph '%s' has %d)", (int)index,
                       graph->name, (int)graph->n_ops);
  const loom__op *op = &graph->ops[index];
  *out_info = (loom_op_info){.kind = op->kind,
                             .n_inputs = op->n_inputs,
                             .n_outputs = op->n_outputs,
                             .line = op->line,
                             .col = op->col};
  return LOOM_OK;
}

loom_value loom_graph_op_input(const loom_graph *graph, int32_t index, int32_t k) {
  if (!op_ok(graph, index) || k < 0 || k >= graph->ops[index].n_inputs) return LOOM_VALUE_NONE;
  return (loom_value){graph->ops[index].inputs[k]};
}

loom_value loom_graph_op_output(const loom_graph *graph, int32_t index, int32_t k) {
  if (!op_ok(graph, index) || k < 0 || k >= graph->ops[index].n_outputs) return LOOM_VALUE_NONE;
  return (loom_value){graph->ops[index].outputs[k]};
}

const char *loom_value_label(const loom_graph *graph, loom_value v, char *buf, size_t size) {
  if (!graph || !loom__value_ok(graph, v)) return "?";
  if (!buf || size == 0) return graph->values[v.id].name ? graph->values[v.id].name : "?";
  return loom__value_label(graph, v.id, buf, size);
}
