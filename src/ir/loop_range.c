/* A range of a loop's pieces as a graph of its own (loop_range.h). */
#include <stdio.h>
#include <string.h>

#include "ir/loop_range.h"

/* Names value v of r as `name` where the name is not taken (an operand passed twice, or a
 * result named as an operand, keeps its v<id>). */
static void name_if_free(loom_graph *r, loom_value v, const char *name) {
  if (name && loom_graph_find(r, name).id < 0) loom_value_set_name(r, v, name);
}

/* The loop's parameters: the operands whole, as typed in g. */
static loom_status range_params(const loom_graph *g, const loom__op *o, loom_graph *r, loom_value *params) {
  for (int32_t i = 0; i < o->n_inputs; i++) {
    const loom__value *v = loom__val(g, o->inputs[i]);
    params[i] = loom_graph_param(r, NULL, &v->type);
    if (params[i].id < 0) return r->error ? r->error : loom__oom("a loop range's parameters");
    name_if_free(r, params[i], v->name);
  }
  return LOOM_OK;
}

/* The rules with each sliced operand's offset moved to the range's first element. */
static loom_loop_input *range_rules(const loom__loop *l, int32_t n, int64_t first) {
  loom_loop_input *rules = loom__malloc(sizeof *rules * (size_t)LOOM_MAX(n, 1));
  if (!rules) return NULL;
  for (int32_t i = 0; i < n; i++) {
    rules[i] = l->rules[i];
    if (rules[i].axis >= 0) rules[i].offset += first * l->piece * (rules[i].stride > 1 ? rules[i].stride : 1);
  }
  return rules;
}

static loom_status range_build(const loom_graph *g, const loom__op *o, int64_t first, int64_t last,
                               loom_graph *r) {
  const loom__loop *l = o->loop;
  int64_t lo = first * l->piece, len = LOOM_MIN(last * l->piece, l->n) - lo;
  int64_t piece = LOOM_MIN(l->piece, len);
  loom_value params[64], *pv = o->n_inputs <= 64 ? params : loom__malloc(sizeof *pv * (size_t)o->n_inputs);
  loom_loop_input *rules = range_rules(l, o->n_inputs, first);
  loom_graph *tail = NULL;
  loom_status s = pv && rules ? range_params(g, o, r, pv) : loom__oom("a loop range");
  /* A range of only the last, shorter piece is a loop of one piece of that length: its body is
   * the one the whole loop runs for that piece. */
  if (!s && piece < l->piece) s = loom__loop_body_for(l, piece, &tail);
  loom_value outs[LOOM_LOOP_MAX_RESULTS];
  if (!s)
    s = loom_graph_add_loop(r, len, piece, tail ? tail : l->body, pv, rules, o->n_inputs, l->combines,
                            o->n_outputs, outs);
  if (!s) s = loom_graph_loop_set_slices(r, r->n_ops - 1, l->slices);
  for (int32_t j = 0; !s && j < o->n_outputs; j++)
    name_if_free(r, outs[j], loom__val(g, o->outputs[j])->name);
  if (!s) s = loom_graph_return(r, outs, o->n_outputs);
  loom_graph_destroy(tail);
  loom__free(rules);
  if (pv != params) loom__free(pv);
  return s;
}

loom_status loom__loop_range_graph(const loom_graph *g, int32_t op, int64_t first, int64_t last,
                                   loom_graph **out) {
  if (!out) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loop range: NULL out");
  *out = NULL;
  if (!g || op < 0 || op >= g->n_ops || !g->ops[op].loop)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loop range: op %d is not a loop of graph '%s'", (int)op,
                       g ? g->name : "(null)");
  const loom__op *o = &g->ops[op];
  int64_t trips = loom__loop_trips(o->loop);
  if (first < 0 || first >= last || last > trips)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "loop range: pieces [%lld, %lld) of op %d (a loop of %lld pieces): needs 0 <= first < "
                       "last <= %lld",
                       (long long)first, (long long)last, (int)op, (long long)trips, (long long)trips);
  char name[96];
  snprintf(name, sizeof name, "%s_range_%lld_%lld", g->name ? g->name : "main", (long long)first,
           (long long)last);
  loom_graph *r = NULL;
  loom_status s = loom_graph_create(name, &r);
  if (s) return s;
  s = range_build(g, o, first, last, r);
  if (!s) s = loom_graph_verify(r);
  if (s) {
    loom__error_prefix("loop range [%lld, %lld) of op %d: ", (long long)first, (long long)last, (int)op);
    loom_graph_destroy(r);
    return s;
  }
  *out = r;
  return LOOM_OK;
}
