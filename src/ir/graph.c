/* Graph construction: values, ops, parameters, outputs, names and the sticky error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

static bool valid_name(const char *s) {
  if (!s || !((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_')) return false;
  for (s++; *s; s++)
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
      return false;
  return true;
}

/* ---- the name index --------------------------------------------------------------------- */

static uint32_t name_hash(const char *s) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
  return h;
}

/* The slot holding `name`, or -1. */
static int32_t name_lookup(const loom_graph *g, const char *name) {
  if (!g->name_cap) return -1;
  uint32_t mask = (uint32_t)g->name_cap - 1;
  for (uint32_t i = name_hash(name) & mask, n = 0; n < (uint32_t)g->name_cap; i = (i + 1) & mask, n++) {
    int32_t id = g->name_slots[i];
    if (id == -1) return -1;
    if (id >= 0 && strcmp(g->values[id].name, name) == 0) return (int32_t)i;
  }
  return -1;
}

static void name_insert_slot(int32_t *slots, int32_t cap, const char *name, int32_t id) {
  uint32_t mask = (uint32_t)cap - 1, i = name_hash(name) & mask;
  while (slots[i] >= 0) i = (i + 1) & mask;
  slots[i] = id;
}

/* Indexes value id under its (already set) name, growing the table at half full. */
static loom_status name_insert(loom_graph *g, int32_t id) {
  if ((g->name_used + 1) * 2 > g->name_cap) {
    int32_t cap = g->name_cap ? g->name_cap * 2 : 64;
    int32_t *slots = loom__malloc(sizeof(int32_t) * (size_t)cap);
    if (!slots) return loom__oom("the name index");
    for (int32_t i = 0; i < cap; i++) slots[i] = -1;
    g->name_used = 0;
    for (int32_t i = 0; i < g->name_cap; i++)
      if (g->name_slots[i] >= 0) {
        name_insert_slot(slots, cap, g->values[g->name_slots[i]].name, g->name_slots[i]);
        g->name_used++;
      }
    loom__free(g->name_slots);
    g->name_slots = slots;
    g->name_cap = cap;
  }
  name_insert_slot(g->name_slots, g->name_cap, g->values[id].name, id);
  g->name_used++;
  return LOOM_OK;
}

loom_status loom_graph_create(const char *name, loom_graph **out) {
  if (!out) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_create: out_graph is NULL");
  *out = NULL;
  if (!name) name = "main";
  if (!valid_name(name))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "graph name '%s' is not [A-Za-z_][A-Za-z0-9_]*", name);
  loom_graph *g = loom__calloc(1, sizeof *g);
  if (!g) return loom__oom("a graph");
  g->name = loom__strdup(name);
  if (!g->name) {
    loom__free(g);
    return loom__oom("a graph name");
  }
  *out = g;
  return LOOM_OK;
}

void loom_graph_destroy(loom_graph *g) {
  if (!g) return;
  for (int32_t i = 0; i < g->n_values; i++) loom__free(g->values[i].name);
  for (int32_t i = 0; i < g->n_ops; i++) {
    loom__free(g->ops[i].inputs);
    loom__free(g->ops[i].const_data);
    loom__loop_free(g->ops[i].loop);
    loom_graph_destroy(g->ops[i].fused);
  }
  loom__free(g->name_slots);
  loom__free(g->values);
  loom__free(g->ops);
  loom__free(g->params);
  loom__free(g->outputs);
  loom__free(g->error_message);
  loom__free(g->name);
  loom__free(g);
}

loom_status loom__graph_fail(loom_graph *g, loom_status status) {
  if (g->error == LOOM_OK) {
    g->error = status;
    /* If this copy fails the status is still sticky; only the text is lost. */
    g->error_message = loom__strdup(loom_last_error());
  }
  return status;
}

const char *loom__value_label(const loom_graph *g, int32_t id, char *buf, size_t size) {
  if (id >= 0 && id < g->n_values && g->values[id].name) return g->values[id].name;
  snprintf(buf, size, "v%d", (int)id);
  return buf;
}

/* Appends a value; returns its id or -1 (message set). */
static int32_t add_value(loom_graph *g, const loom_type *type, int32_t op, int32_t result) {
  if (loom__grow((void **)&g->values, &g->cap_values, g->n_values + 1, sizeof *g->values)) return -1;
  loom__value *v = &g->values[g->n_values];
  memset(v, 0, sizeof *v);
  v->type = *type;
  v->op = op;
  v->result = result;
  return g->n_values++;
}

loom_value loom_graph_param(loom_graph *g, const char *name, const loom_type *type) {
  if (!g) return LOOM_VALUE_NONE;
  if (g->error) return LOOM_VALUE_NONE;
  loom_status s = LOOM_OK;
  if (g->n_ops > 0 || g->returned)
    s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "parameter '%s': parameters must come before ops",
                    name ? name : "?");
  else if (!type)
    s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "parameter '%s': type is NULL", name ? name : "?");
  loom_type checked;
  if (!s) s = loom_type_make(type->dtype, type->rank, type->dims, &checked);
  if (s) {
    loom__graph_fail(g, s);
    return LOOM_VALUE_NONE;
  }
  if (loom__grow((void **)&g->params, &g->cap_params, g->n_params + 1, sizeof *g->params)) {
    loom__graph_fail(g, LOOM_ERR_OUT_OF_MEMORY);
    return LOOM_VALUE_NONE;
  }
  int32_t id = add_value(g, &checked, -1, g->n_params);
  if (id < 0) {
    loom__graph_fail(g, LOOM_ERR_OUT_OF_MEMORY);
    return LOOM_VALUE_NONE;
  }
  loom_value v = {id};
  if (name && (s = loom_value_set_name(g, v, name))) {
    g->n_values--;
    loom__graph_fail(g, s);
    return LOOM_VALUE_NONE;
  }
  g->params[g->n_params++] = id;
  return v;
}

/* Checks that inputs are values of this graph. */
static loom_status check_inputs(const loom_graph *g, loom_op op, const loom_value *in, int32_t n) {
  const loom__op_info *info = loom__op_info_of(op);
  if (n < info->min_inputs || (info->max_inputs >= 0 && n > info->max_inputs)) {
    if (info->min_inputs == info->max_inputs)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: takes %d operand%s, got %d", info->name,
                         (int)info->min_inputs, info->min_inputs == 1 ? "" : "s", (int)n);
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: takes at least %d operand%s, got %d", info->name,
                       (int)info->min_inputs, info->min_inputs == 1 ? "" : "s", (int)n);
  }
  for (int32_t i = 0; i < n; i++)
    if (!loom__value_ok(g, in[i]))
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: operand %d is not a value of graph '%s'", info->name,
                         (int)i + 1, g->name);
  return LOOM_OK;
}

static loom_status check_attrs(loom_op op, const loom_attrs *attrs) {
  const loom__op_info *info = loom__op_info_of(op);
  uint32_t set = attrs ? attrs->set : 0;
  static const char *names[] = {"axis", "k",     "n",     "groups", "largest", "keepdims",
                                "to",   "value", "shape", "perm",   "axes",    "start",
                                "stop", "step",  "reps",  "stride", "padding", "dilation"};
  for (int32_t b = 0; b < LOOM_ARRAY_SIZE(names); b++) {
    uint32_t bit = 1u << b;
    if ((set & bit) && !(info->allowed & bit))
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: takes no attribute '%s'", info->name, names[b]);
    if (!(set & bit) && (info->required & bit))
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: needs attribute '%s'", info->name, names[b]);
  }
  return LOOM_OK;
}

loom_status loom__graph_append(loom_graph *g, loom_op op, const loom_value *inputs, int32_t n_inputs,
                               const loom_attrs *attrs, const loom_type *types, int32_t n_results,
                               const void *const_data, loom_value *outs, int32_t n_outs) {
  if (loom__grow((void **)&g->ops, &g->cap_ops, g->n_ops + 1, sizeof *g->ops)) return LOOM_ERR_OUT_OF_MEMORY;
  if (loom__grow((void **)&g->values, &g->cap_values, g->n_values + n_results, sizeof *g->values))
    return LOOM_ERR_OUT_OF_MEMORY;
  loom__op *o = &g->ops[g->n_ops];
  memset(o, 0, sizeof *o);
  o->kind = op;
  if (attrs)
    o->attrs = *attrs;
  else
    loom_attrs_init(&o->attrs);
  o->line = g->cur_line;
  o->col = g->cur_col;
  if (n_inputs > 0) {
    o->inputs = loom__malloc(sizeof(int32_t) * (size_t)n_inputs);
    if (!o->inputs) return loom__oom("op operands");
    for (int32_t i = 0; i < n_inputs; i++) o->inputs[i] = inputs[i].id;
  }
  o->n_inputs = n_inputs;
  if (op == LOOM_OP_CONSTANT) {
    if (loom_type_bytes(&types[0], &o->const_bytes)) {
      loom__free(o->inputs);
      return LOOM_ERR_INVALID_ARGUMENT;
    }
    o->const_data = loom__malloc((size_t)o->const_bytes);
    if (!o->const_data) {
      loom__free(o->inputs);
      return loom__oom("constant data");
    }
    if (const_data)
      memcpy(o->const_data, const_data, (size_t)o->const_bytes);
    else
      memset(o->const_data, 0, (size_t)o->const_bytes);
  }
  o->n_outputs = n_results;
  for (int32_t r = 0; r < n_results; r++) {
    int32_t id = add_value(g, &types[r], g->n_ops, r); /* cannot fail: capacity grown above */
    o->outputs[r] = id;
    if (r < n_outs) outs[r] = (loom_value){id};
  }
  g->n_ops++;
  return LOOM_OK;
}

loom_status loom_graph_add(loom_graph *g, loom_op op, const loom_value *inputs, int32_t n_inputs,
                           const loom_attrs *attrs, const loom_type *result_type, const void *const_data,
                           loom_value *outs, int32_t n_outs) {
  for (int32_t i = 0; i < n_outs; i++) outs[i] = LOOM_VALUE_NONE;
  if (!g) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_add: graph is NULL");
  if (g->error) return g->error;
  const loom__op_info *info = loom__op_info_of(op);
  loom_status s = LOOM_OK;
  if (!info)
    s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_add: unknown op %d", (int)op);
  else if (g->returned)
    s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: the graph has already returned", info->name);
  else if (op == LOOM_OP_LOOP)
    s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "loop: has a body; add it with loom_graph_add_loop");
  else if (op == LOOM_OP_FUSED)
    s = loom__error(LOOM_ERR_INVALID_ARGUMENT,
                    "fused: has a body; only the fusion pass and the parser make it");
  else if (n_inputs < 0 || (n_inputs > 0 && !inputs))
    s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: bad operand list", info->name);
  if (!s) s = check_inputs(g, op, inputs, n_inputs);
  if (!s) s = check_attrs(op, attrs);
  loom_type types[2];
  int32_t ids[64];
  int32_t *in_ids = n_inputs <= 64 ? ids : loom__malloc(sizeof(int32_t) * (size_t)n_inputs);
  if (!s && !in_ids) s = loom__oom("op operands");
  if (!s) {
    for (int32_t i = 0; i < n_inputs; i++) in_ids[i] = inputs[i].id;
    loom_attrs defaults;
    loom_attrs_init(&defaults);
    s = loom__infer(g, op, in_ids, n_inputs, attrs ? attrs : &defaults, result_type, types);
  }
  if (in_ids != ids) loom__free(in_ids);
  if (!s && result_type && info->cls != LOOM_CLASS_SOURCE && !loom_type_equal(result_type, &types[0])) {
    char want[LOOM_TYPE_STRING_MAX], got[LOOM_TYPE_STRING_MAX];
    s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: declared type %s does not equal the inferred type %s",
                    info->name, loom_type_format(result_type, want, sizeof want),
                    loom_type_format(&types[0], got, sizeof got));
  }
  if (!s)
    s = loom__graph_append(g, op, inputs, n_inputs, attrs, types, info->n_results, const_data, outs, n_outs);
  if (s) return loom__graph_fail(g, s);
  return LOOM_OK;
}

loom_status loom_graph_return(loom_graph *g, const loom_value *values, int32_t n) {
  if (!g) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_return: graph is NULL");
  if (g->error) return g->error;
  loom_status s = LOOM_OK;
  if (g->returned)
    s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "return: graph '%s' has already returned", g->name);
  else if (n < 1 || !values)
    s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "return: a graph returns at least one value");
  for (int32_t i = 0; !s && i < n; i++)
    if (!loom__value_ok(g, values[i]))
      s = loom__error(LOOM_ERR_INVALID_ARGUMENT, "return: result %d is not a value of graph '%s'", (int)i + 1,
                      g->name);
  if (!s) {
    g->outputs = loom__malloc(sizeof(int32_t) * (size_t)n);
    if (!g->outputs) s = loom__oom("graph outputs");
  }
  if (s) return loom__graph_fail(g, s);
  for (int32_t i = 0; i < n; i++) g->outputs[i] = values[i].id;
  g->n_outputs = n;
  g->returned = true;
  return LOOM_OK;
}

loom_status loom_value_set_name(loom_graph *g, loom_value v, const char *name) {
  if (!g || !loom__value_ok(g, v))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_value_set_name: not a value of this graph");
  if (!valid_name(name))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "name '%s' is not [A-Za-z_][A-Za-z0-9_]*",
                       name ? name : "(null)");
  loom_value other = loom_graph_find(g, name);
  if (other.id >= 0 && other.id != v.id)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "name '%s' is already defined", name);
  /* An auto label such as v3 may only name value 3, so printing never collides. */
  if (name[0] == 'v' && name[1]) {
    char *end;
    long n = strtol(name + 1, &end, 10);
    if (*end == '\0' && name[1] >= '0' && name[1] <= '9' && n != v.id) {
      loom_value holder = {(int32_t)n};
      if (loom__value_ok(g, holder) && !g->values[n].name)
        return loom__error(LOOM_ERR_INVALID_ARGUMENT, "name '%s' is reserved for value %ld", name, n);
    }
  }
  if (other.id == v.id) return LOOM_OK;
  char *copy = loom__strdup(name);
  if (!copy) return loom__oom("a value name");
  char *old = g->values[v.id].name;
  if (old) {
    int32_t slot = name_lookup(g, old);
    if (slot >= 0) g->name_slots[slot] = -2;
  }
  g->values[v.id].name = copy;
  loom_status s = name_insert(g, v.id);
  if (s) {
    g->values[v.id].name = old;
    if (old) name_insert_slot(g->name_slots, g->name_cap, old, v.id);
    loom__free(copy);
    return s;
  }
  loom__free(old);
  return LOOM_OK;
}

loom_value loom_graph_find(const loom_graph *g, const char *name) {
  if (!g || !name) return LOOM_VALUE_NONE;
  int32_t slot = name_lookup(g, name);
  return slot >= 0 ? (loom_value){g->name_slots[slot]} : LOOM_VALUE_NONE;
}

loom_status loom_graph_verify(const loom_graph *g) {
  if (!g) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_verify: graph is NULL");
  if (g->error)
    return loom__error(g->error, "%s", g->error_message ? g->error_message : loom_status_string(g->error));
  if (!g->returned) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "graph '%s' has no return", g->name);
  for (int32_t i = 0; i < g->n_ops; i++) {
    const loom__op *o = &g->ops[i];
    for (int32_t j = 0; j < o->n_inputs; j++)
      if (o->inputs[j] < 0 || o->inputs[j] >= g->n_values || (g->values[o->inputs[j]].op >= i))
        return loom__error(LOOM_ERR_INTERNAL, "%s (op %d): operand %d is not defined before it",
                           loom_op_name(o->kind), (int)i, (int)j + 1);
    if (o->loop && o->loop->slices != 1 && o->loop->slices != 2)
      return loom__error(LOOM_ERR_INTERNAL, "loop (op %d): slices=%d, not 1 or 2", (int)i,
                         (int)o->loop->slices);
  }
  return LOOM_OK;
}

const char *loom_graph_name(const loom_graph *g) {
  return g ? g->name : NULL;
}
int32_t loom_graph_param_count(const loom_graph *g) {
  return g ? g->n_params : 0;
}
loom_value loom_graph_param_at(const loom_graph *g, int32_t i) {
  return (g && i >= 0 && i < g->n_params) ? (loom_value){g->params[i]} : LOOM_VALUE_NONE;
}
int32_t loom_graph_output_count(const loom_graph *g) {
  return g ? g->n_outputs : 0;
}
loom_value loom_graph_output_at(const loom_graph *g, int32_t i) {
  return (g && i >= 0 && i < g->n_outputs) ? (loom_value){g->outputs[i]} : LOOM_VALUE_NONE;
}
int32_t loom_graph_op_count(const loom_graph *g) {
  return g ? g->n_ops : 0;
}
const loom_type *loom_value_type(const loom_graph *g, loom_value v) {
  return (g && loom__value_ok(g, v)) ? &g->values[v.id].type : NULL;
}
const char *loom_value_name(const loom_graph *g, loom_value v) {
  return (g && loom__value_ok(g, v)) ? g->values[v.id].name : NULL;
}

loom_status loom_graph_clone(const loom_graph *g, loom_graph **out) {
  if (!out) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_clone: out_graph is NULL");
  *out = NULL;
  if (!g) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_clone: graph is NULL");
  loom_graph *c;
  loom_status s = loom_graph_create(g->name, &c);
  if (s) return s;
  c->values = loom__calloc((size_t)LOOM_MAX(g->n_values, 1), sizeof *c->values);
  c->ops = loom__calloc((size_t)LOOM_MAX(g->n_ops, 1), sizeof *c->ops);
  c->params = loom__calloc((size_t)LOOM_MAX(g->n_params, 1), sizeof *c->params);
  c->outputs = loom__calloc((size_t)LOOM_MAX(g->n_outputs, 1), sizeof *c->outputs);
  if (!c->values || !c->ops || !c->params || !c->outputs) goto oom;
  c->cap_values = LOOM_MAX(g->n_values, 1);
  c->cap_ops = LOOM_MAX(g->n_ops, 1);
  c->cap_params = LOOM_MAX(g->n_params, 1);
  for (int32_t i = 0; i < g->n_values; i++, c->n_values++) {
    c->values[i] = g->values[i];
    c->values[i].name = NULL;
    if (g->values[i].name && !(c->values[i].name = loom__strdup(g->values[i].name))) goto oom;
  }
  for (int32_t i = 0; i < g->n_ops; i++) {
    const loom__op *o = &g->ops[i];
    c->ops[i] = *o;
    c->ops[i].inputs = NULL;
    c->ops[i].const_data = NULL;
    c->ops[i].loop = NULL;
    c->ops[i].fused = NULL;
    /* Counted before its parts are copied, so that a failure part way frees those copied. */
    c->n_ops++;
    if (o->loop && !(c->ops[i].loop = loom__loop_clone(o->loop))) goto oom;
    if (o->fused && loom_graph_clone(o->fused, &c->ops[i].fused)) goto oom;
    if (o->n_inputs) {
      if (!(c->ops[i].inputs = loom__malloc(sizeof(int32_t) * (size_t)o->n_inputs))) goto oom;
      memcpy(c->ops[i].inputs, o->inputs, sizeof(int32_t) * (size_t)o->n_inputs);
    }
    if (o->const_data) {
      if (!(c->ops[i].const_data = loom__malloc((size_t)o->const_bytes))) goto oom;
      memcpy(c->ops[i].const_data, o->const_data, (size_t)o->const_bytes);
    }
  }
  for (int32_t i = 0; i < c->n_values; i++)
    if (c->values[i].name && name_insert(c, i)) goto oom;
  /* A graph with no parameters (or not yet returned) has NULL arrays: memcpy may not read
   * from NULL even for zero bytes. */
  if (g->n_params) memcpy(c->params, g->params, sizeof(int32_t) * (size_t)g->n_params);
  c->n_params = g->n_params;
  if (g->n_outputs) memcpy(c->outputs, g->outputs, sizeof(int32_t) * (size_t)g->n_outputs);
  c->n_outputs = g->n_outputs;
  c->returned = g->returned;
  c->error = g->error;
  if (g->error_message && !(c->error_message = loom__strdup(g->error_message))) goto oom;
  *out = c;
  return LOOM_OK;
oom:
  loom_graph_destroy(c);
  return loom__oom("cloning a graph");
}

bool loom__axes_contain(const loom_attrs *a, int32_t j, int32_t rank) {
  for (int32_t k = 0; k < a->axes.count; k++) {
    int32_t ax;
    if (loom__axis_normalize(a->axes.v[k], rank, &ax) && ax == j) return true;
  }
  return false;
}

loom_int_list *loom__attrs_list(loom_attrs *a, uint32_t bit) {
  switch (bit) {
    case LOOM_ATTR_SHAPE:
      return &a->shape;
    case LOOM_ATTR_PERM:
      return &a->perm;
    case LOOM_ATTR_AXES:
      return &a->axes;
    case LOOM_ATTR_START:
      return &a->start;
    case LOOM_ATTR_STOP:
      return &a->stop;
    case LOOM_ATTR_STEP:
      return &a->step;
    case LOOM_ATTR_REPS:
      return &a->reps;
    case LOOM_ATTR_STRIDE:
      return &a->stride;
    case LOOM_ATTR_PADDING:
      return &a->padding;
    default:
      return &a->dilation;
  }
}
