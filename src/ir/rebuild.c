/* Building one graph from another (see rebuild.h). */
#include <string.h>

#include "ir/rebuild.h"

static loom_status alloc_map(loom__rebuild *rb, const loom_graph *src) {
  memset(rb, 0, sizeof *rb);
  rb->src = src;
  rb->map = loom__malloc(sizeof(int32_t) * (size_t)(src->n_values ? src->n_values : 1));
  if (!rb->map) return loom__oom("a rebuild map");
  for (int32_t i = 0; i < src->n_values; i++) rb->map[i] = -1;
  return LOOM_OK;
}

loom_status loom__rebuild_init_empty(loom__rebuild *rb, const loom_graph *src, const char *name) {
  loom_status s = alloc_map(rb, src);
  if (!s) s = loom_graph_create(name ? name : src->name, &rb->dst);
  if (s) loom__rebuild_deinit(rb);
  return s;
}

loom_status loom__rebuild_init(loom__rebuild *rb, const loom_graph *src) {
  loom_status s = loom__rebuild_init_empty(rb, src, NULL);
  if (s) return s;
  for (int32_t p = 0; p < src->n_params; p++) {
    int32_t id = src->params[p];
    char buf[32];
    loom_value v =
        loom_graph_param(rb->dst, loom__value_label(src, id, buf, sizeof buf), &src->values[id].type);
    if (v.id < 0) {
      loom_status failed = rb->dst->error;
      loom__rebuild_deinit(rb);
      return failed;
    }
    rb->map[id] = v.id;
  }
  return LOOM_OK;
}

loom_value loom__rebuild_get(const loom__rebuild *rb, int32_t src_value) {
  return (loom_value){rb->map[src_value]};
}

void loom__rebuild_set(loom__rebuild *rb, int32_t src_value, loom_value v) {
  rb->map[src_value] = v.id;
  const char *name = rb->src->values[src_value].name;
  if (v.id >= 0 && name && !rb->dst->values[v.id].name) {
    loom_value holder = loom_graph_find(rb->dst, name);
    /* A name already taken (or reserved) stays with its holder; v prints as v<N>. */
    if (holder.id < 0) (void)loom_value_set_name(rb->dst, v, name);
  }
}

loom_status loom__rebuild_copy(loom__rebuild *rb, int32_t op_index) {
  const loom__op *op = &rb->src->ops[op_index];
  loom_value ins[64];
  loom_value *in = op->n_inputs <= 64 ? ins : loom__malloc(sizeof(loom_value) * (size_t)op->n_inputs);
  if (!in) return loom__oom("operands");
  for (int32_t i = 0; i < op->n_inputs; i++) {
    in[i] = loom__rebuild_get(rb, op->inputs[i]);
    if (in[i].id < 0) {
      char buf[32];
      if (in != ins) loom__free(in);
      return loom__error(LOOM_ERR_INTERNAL, "rebuild: operand '%s' of %s is not mapped",
                         loom__value_label(rb->src, op->inputs[i], buf, sizeof buf), loom_op_name(op->kind));
    }
  }
  loom_value outs[LOOM_LOOP_MAX_RESULTS];
  for (int32_t r = 0; r < LOOM_LOOP_MAX_RESULTS; r++) outs[r] = LOOM_VALUE_NONE;
  const loom_type *type =
      loom__op_info_of(op->kind)->cls == LOOM_CLASS_SOURCE ? &rb->src->values[op->outputs[0]].type : NULL;
  int32_t saved_line = rb->dst->cur_line, saved_col = rb->dst->cur_col;
  rb->dst->cur_line = op->line;
  rb->dst->cur_col = op->col;
  const loom__loop *l = op->loop;
  loom_status s = l ? loom_graph_add_loop(rb->dst, l->n, l->piece, l->body, in, l->rules, op->n_inputs,
                                          l->combines, op->n_outputs, outs)
                  : op->fused ? loom__graph_add_fused(rb->dst, op->fused, in, op->n_inputs, outs)
                              : loom_graph_add(rb->dst, op->kind, in, op->n_inputs, &op->attrs, type,
                                               op->const_data, outs, op->n_outputs);
  if (!s && l) rb->dst->ops[rb->dst->n_ops - 1].loop->slices = l->slices;
  rb->dst->cur_line = saved_line;
  rb->dst->cur_col = saved_col;
  if (in != ins) loom__free(in);
  if (s) return s;
  for (int32_t r = 0; r < op->n_outputs; r++) loom__rebuild_set(rb, op->outputs[r], outs[r]);
  return LOOM_OK;
}

static void mark_live(const loom_graph *g, bool *live_value, bool *live_op);

/* *out: whether every op of g is needed by its outputs, so dead-code elimination would copy
 * the whole graph for nothing (a copy per rewrite applied made planning a long graph slow). */
static loom_status every_op_live(const loom_graph *g, bool *out) {
  bool *live_value = loom__calloc((size_t)(g->n_values ? g->n_values : 1), sizeof(bool));
  bool *live_op = loom__calloc((size_t)(g->n_ops ? g->n_ops : 1), sizeof(bool));
  loom_status s = (!live_value || !live_op) ? loom__oom("dead-code elimination") : LOOM_OK;
  if (!s) mark_live(g, live_value, live_op);
  *out = !s;
  for (int32_t o = 0; !s && o < g->n_ops && *out; o++) *out = live_op[o];
  loom__free(live_value);
  loom__free(live_op);
  return s;
}

loom_status loom__rebuild_finish(loom__rebuild *rb, loom_graph **out) {
  *out = NULL;
  loom_value outs[64] = {{0}};
  int32_t n = rb->src->n_outputs;
  loom_value *o = n <= 64 ? outs : loom__malloc(sizeof(loom_value) * (size_t)n);
  if (!o) return loom__oom("outputs");
  for (int32_t i = 0; i < n; i++) o[i] = loom__rebuild_get(rb, rb->src->outputs[i]);
  loom_status s = loom_graph_return(rb->dst, o, n);
  if (o != outs) loom__free(o);
  bool all_live = false;
  if (!s) s = every_op_live(rb->dst, &all_live);
  if (!s && all_live) { /* the usual case: the graph as built, not a copy of it */
    *out = rb->dst;
    rb->dst = NULL;
    return LOOM_OK;
  }
  if (!s) s = loom__graph_dce(rb->dst, out);
  return s;
}

void loom__rebuild_deinit(loom__rebuild *rb) {
  if (!rb) return;
  loom_graph_destroy(rb->dst);
  loom__free(rb->map);
  memset(rb, 0, sizeof *rb);
}

void loom__use_counts(const loom_graph *g, int32_t *out) {
  memset(out, 0, sizeof(int32_t) * (size_t)g->n_values);
  for (int32_t o = 0; o < g->n_ops; o++)
    for (int32_t i = 0; i < g->ops[o].n_inputs; i++) out[g->ops[o].inputs[i]]++;
  for (int32_t i = 0; i < g->n_outputs; i++) out[g->outputs[i]]++;
}

/* Marks the ops whose results are needed, walking back from the outputs. */
static void mark_live(const loom_graph *g, bool *live_value, bool *live_op) {
  for (int32_t i = 0; i < g->n_outputs; i++) live_value[g->outputs[i]] = true;
  for (int32_t o = g->n_ops - 1; o >= 0; o--) {
    const loom__op *op = &g->ops[o];
    for (int32_t r = 0; r < op->n_outputs; r++) live_op[o] |= live_value[op->outputs[r]];
    if (!live_op[o]) continue;
    for (int32_t i = 0; i < op->n_inputs; i++) live_value[op->inputs[i]] = true;
  }
}

loom_status loom__graph_dce(const loom_graph *g, loom_graph **out) {
  *out = NULL;
  bool *live_value = loom__calloc((size_t)(g->n_values ? g->n_values : 1), sizeof(bool));
  bool *live_op = loom__calloc((size_t)(g->n_ops ? g->n_ops : 1), sizeof(bool));
  loom__rebuild rb;
  loom_status s = (!live_value || !live_op) ? loom__oom("dead-code elimination") : LOOM_OK;
  if (!s) {
    mark_live(g, live_value, live_op);
    s = loom__rebuild_init(&rb, g);
  }
  if (!s) {
    for (int32_t o = 0; !s && o < g->n_ops; o++)
      if (live_op[o]) s = loom__rebuild_copy(&rb, o);
    loom_value outs[64];
    int32_t n = g->n_outputs;
    loom_value *ov = n <= 64 ? outs : loom__malloc(sizeof(loom_value) * (size_t)n);
    if (!s && !ov) s = loom__oom("outputs");
    for (int32_t i = 0; !s && i < n; i++) ov[i] = loom__rebuild_get(&rb, g->outputs[i]);
    if (!s) s = loom_graph_return(rb.dst, ov, n);
    if (ov && ov != outs) loom__free(ov);
    if (!s) {
      *out = rb.dst;
      rb.dst = NULL;
    }
    loom__rebuild_deinit(&rb);
  }
  loom__free(live_value);
  loom__free(live_op);
  return s;
}
