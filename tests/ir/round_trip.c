/* The round trip shared by the printer's, the loops' and the fused ops' text tests (round_trip.h). */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "round_trip.h"

static const char *diff(const loom_graph *a, const loom_graph *b, bool body, char *buf, size_t size);

/* Whether two loop ops differ in their figures, rules, combines or bodies. */
static bool loop_diff(const loom__op *x, const loom__op *y) {
  const loom__loop *p = x->loop, *q = y->loop;
  if (p->n != q->n || p->piece != q->piece) return true;
  for (int32_t k = 0; k < x->n_inputs; k++)
    if (p->rules[k].axis != q->rules[k].axis || p->rules[k].offset != q->rules[k].offset ||
        p->rules[k].stride != q->rules[k].stride || p->rules[k].halo != q->rules[k].halo)
      return true;
  for (int32_t k = 0; k < x->n_outputs; k++) {
    const loom_loop_output *c = &p->combines[k], *d = &q->combines[k];
    if (c->combine != d->combine || c->axis != d->axis || c->k != d->k || c->largest != d->largest)
      return true;
  }
  char buf[64];
  return diff(p->body, q->body, true, buf, sizeof buf) != NULL;
}

/* A loop body's name is not in the text (a parsed body is "body"): compared at the top only. */
static const char *diff(const loom_graph *a, const loom_graph *b, bool body, char *buf, size_t size) {
  if (!body && strcmp(a->name, b->name) != 0) return "graph names";
  if (a->n_values != b->n_values || a->n_ops != b->n_ops || a->n_params != b->n_params) return "counts";
  if (a->n_outputs != b->n_outputs ||
      (a->n_outputs && memcmp(a->outputs, b->outputs, sizeof(int32_t) * (size_t)a->n_outputs)))
    return "outputs";
  for (int32_t i = 0; i < a->n_values; i++) {
    if (!loom_type_equal(&a->values[i].type, &b->values[i].type)) {
      snprintf(buf, size, "type of value %d", (int)i);
      return buf;
    }
    char la[32], lb[32];
    if (strcmp(loom__value_label(a, i, la, sizeof la), loom__value_label(b, i, lb, sizeof lb)) != 0)
      return "names";
  }
  for (int32_t i = 0; i < a->n_ops; i++) {
    const loom__op *x = &a->ops[i], *y = &b->ops[i];
    snprintf(buf, size, "op %d (%s)", (int)i, loom_op_name(x->kind));
    if (x->kind != y->kind || x->n_inputs != y->n_inputs || x->n_outputs != y->n_outputs) return buf;
    if (x->n_inputs && memcmp(x->inputs, y->inputs, sizeof(int32_t) * (size_t)x->n_inputs) != 0) return buf;
    const loom_attrs *p = &x->attrs, *q = &y->attrs;
    if (p->set != q->set || p->axis != q->axis || p->k != q->k || p->n != q->n || p->groups != q->groups ||
        p->largest != q->largest || p->keepdims != q->keepdims)
      return buf;
    if ((p->set & LOOM_ATTR_TO) && p->to != q->to) return buf;
    if ((p->set & LOOM_ATTR_VALUE) && (p->value_is_int != q->value_is_int || p->ivalue != q->ivalue ||
                                       memcmp(&p->value, &q->value, sizeof p->value) != 0))
      return buf;
    if (x->const_bytes != y->const_bytes) return buf;
    if (x->const_bytes && memcmp(x->const_data, y->const_data, (size_t)x->const_bytes) != 0) return buf;
    if (!x->loop != !y->loop) return buf;
    if (x->loop && loop_diff(x, y)) return buf;
    char inner[64];
    if (!x->fused != !y->fused) return buf;
    if (x->fused && diff(x->fused, y->fused, true, inner, sizeof inner)) return buf;
  }
  return NULL;
}

const char *ir_graph_diff(const loom_graph *a, const loom_graph *b, char *buf, size_t size) {
  return diff(a, b, false, buf, size);
}

/* print, parse, print: the two prints are equal and the graphs too. Returns the first print. */
char *ir_round_trip(const loom_graph *g, char *why, size_t size) {
  char *t1 = NULL, *t2 = NULL;
  loom_graph *g2 = NULL;
  why[0] = '\0';
  if (loom_graph_to_string(g, &t1)) {
    snprintf(why, size, "print: %s", loom_last_error());
  } else if (loom_graph_parse(t1, strlen(t1), "printed.lir", &g2)) {
    snprintf(why, size, "re-parse: %s\n%s", loom_last_error(), t1);
  } else if (loom_graph_to_string(g2, &t2)) {
    snprintf(why, size, "second print: %s", loom_last_error());
  } else if (strcmp(t1, t2) != 0) {
    snprintf(why, size, "prints differ:\n%s---\n%s", t1, t2);
  } else {
    char buf[64];
    const char *d = ir_graph_diff(g, g2, buf, sizeof buf);
    if (d) snprintf(why, size, "re-parsed graph differs in %s", d);
  }
  free(t2);
  loom_graph_destroy(g2);
  if (why[0]) {
    free(t1);
    return NULL;
  }
  return t1;
}
