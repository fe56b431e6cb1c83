/* The lowering context: ONNX values by name, a node's inputs, outputs and attributes, and the
 * messages that name the node. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

static uint32_t name_hash(const char *s) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
  return h;
}

loom__onnx_val *loom__onnx_find(loom__onnx *c, const char *name) {
  if (!name || !c->n_slots) return NULL;
  uint32_t mask = (uint32_t)c->n_slots - 1;
  for (uint32_t i = name_hash(name) & mask;; i = (i + 1) & mask) {
    int32_t id = c->slots[i];
    if (id < 0) return NULL;
    if (!strcmp(c->vals[id].name, name)) return &c->vals[id];
  }
}

/* Doubles the index (kept at most half full) and puts every name back. */
static loom_status grow_slots(loom__onnx *c) {
  int32_t n = c->n_slots ? 2 * c->n_slots : 64;
  int32_t *slots = loom__malloc((size_t)n * sizeof *slots);
  if (!slots) return loom__oom("the ONNX name index");
  for (int32_t i = 0; i < n; i++) slots[i] = -1;
  for (int32_t v = 0; v < c->n_vals; v++) {
    uint32_t i = name_hash(c->vals[v].name) & (uint32_t)(n - 1);
    while (slots[i] >= 0) i = (i + 1) & (uint32_t)(n - 1);
    slots[i] = v;
  }
  loom__free(c->slots);
  c->slots = slots;
  c->n_slots = n;
  return LOOM_OK;
}

loom_status loom__onnx_add(loom__onnx *c, const char *name, const loom_type *type, loom__onnx_val **out) {
  *out = NULL;
  if (loom__onnx_find(c, name))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: value '%s' is defined twice", c->path, name);
  if (2 * (c->n_vals + 1) > c->n_slots && grow_slots(c)) return LOOM_ERR_OUT_OF_MEMORY;
  if (loom__grow((void **)&c->vals, &c->cap_vals, c->n_vals + 1, sizeof *c->vals))
    return loom__oom("ONNX values");
  loom__onnx_val *v = &c->vals[c->n_vals];
  memset(v, 0, sizeof *v);
  if (!(v->name = loom__strdup(name))) return loom__oom("an ONNX name");
  v->type = *type;
  v->v = LOOM_VALUE_NONE;
  uint32_t mask = (uint32_t)c->n_slots - 1, i = name_hash(name) & mask;
  while (c->slots[i] >= 0) i = (i + 1) & mask;
  c->slots[i] = c->n_vals++;
  *out = v;
  return LOOM_OK;
}

/* "node 'name' (Op)", or for a node without a name its index and first output. */
static void node_label(const loom__onnx *c, char *buf, size_t size) {
  const Onnx__NodeProto *n = c->node;
  if (!n) {
    snprintf(buf, size, "graph");
  } else if (n->name && *n->name) {
    snprintf(buf, size, "node '%s' (%s)", n->name, n->op_type);
  } else {
    snprintf(buf, size, "node %d with output '%s' (%s)", c->node_index, n->n_output ? n->output[0] : "",
             n->op_type);
  }
}

static loom_status node_error(loom__onnx *c, loom_status status, const char *fmt, va_list ap) {
  char what[512], label[384];
  vsnprintf(what, sizeof what, fmt, ap);
  node_label(c, label, sizeof label);
  return loom__error(status, "%s: %s: %s", c->path, label, what);
}

loom_status loom__onnx_refuse(loom__onnx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  loom_status s = node_error(c, LOOM_ERR_UNSUPPORTED, fmt, ap);
  va_end(ap);
  return s;
}

loom_status loom__onnx_invalid(loom__onnx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  loom_status s = node_error(c, LOOM_ERR_INVALID_ARGUMENT, fmt, ap);
  va_end(ap);
  return s;
}

loom__onnx_val *loom__onnx_in(loom__onnx *c, int32_t k) {
  const Onnx__NodeProto *n = c->node;
  if (k < 0 || (size_t)k >= n->n_input || !n->input[k][0]) return NULL;
  return loom__onnx_find(c, n->input[k]);
}

loom_value loom__onnx_materialize(loom__onnx *c, loom__onnx_val *x) {
  if (x->v.id >= 0 || !x->host) return x->v;
  loom_value out = LOOM_VALUE_NONE;
  if (x->host_owned) {
    /* The known contents become the constant's storage: appended with no data (zeroed
     * storage would be a second copy), then handed over. */
    if (loom__graph_append(c->g, LOOM_OP_CONSTANT, NULL, 0, NULL, &x->type, 1, NULL, &out, 1)) return out;
    loom__op *op = &c->g->ops[c->g->n_ops - 1];
    loom__free(op->const_data);
    op->const_data = x->host;
    x->host_owned = false;
  } else {
    out = loom_constant(c->g, &x->type, x->host);
  }
  x->v = out;
  return out;
}

loom_value loom__onnx_value(loom__onnx *c, int32_t k) {
  loom__onnx_val *x = loom__onnx_in(c, k);
  if (!x) {
    loom__onnx_invalid(c, "input %d is missing", k);
    loom__graph_fail(c->g, LOOM_ERR_INVALID_ARGUMENT);
    return LOOM_VALUE_NONE;
  }
  return loom__onnx_materialize(c, x);
}

loom_status loom__onnx_in_ints(loom__onnx *c, int32_t k, int64_t *out, int32_t max, int32_t *out_count) {
  loom__onnx_val *x = loom__onnx_in(c, k);
  if (!x) return loom__onnx_invalid(c, "input %d is missing", k);
  if (!x->host)
    return loom__onnx_refuse(
        c, "input %d ('%s') must be known when the model is read (Loom's shapes are fixed)", k, x->name);
  if (x->type.dtype != LOOM_I64 && x->type.dtype != LOOM_I32)
    return loom__onnx_invalid(c, "input %d ('%s') must be int32 or int64", k, x->name);
  int64_t n;
  loom_type_elements(&x->type, &n);
  if (n > max)
    return loom__onnx_refuse(c, "input %d ('%s') holds %lld values, at most %d", k, x->name, (long long)n,
                             max);
  for (int64_t i = 0; i < n; i++)
    out[i] = x->type.dtype == LOOM_I64 ? ((const int64_t *)x->host)[i] : ((const int32_t *)x->host)[i];
  *out_count = (int32_t)n;
  return LOOM_OK;
}

loom_status loom__onnx_out(loom__onnx *c, int32_t k, loom_value v) {
  const Onnx__NodeProto *n = c->node;
  if (c->g->error) return c->g->error;
  if ((size_t)k >= n->n_output || !n->output[k][0]) return LOOM_OK;
  loom__onnx_val *o;
  loom_status s = loom__onnx_add(c, n->output[k], loom_value_type(c->g, v), &o);
  if (s) return s;
  o->v = v;
  /* The value carries the node's output name, so that plans and listings say which part of
   * the model each stage holds (PyTorch's `/layers.4/norm2/...`); a value named already (an
   * input, a value an Identity passes on) keeps its name. A name .lir refuses is left out. */
  char name[256];
  if (!loom_value_name(c->g, v)) {
    loom__onnx_lir_name(c->g, n->output[k], name, sizeof name);
    o->named = loom_value_set_name(c->g, v, name) == LOOM_OK;
  }
  return LOOM_OK;
}

loom_status loom__onnx_out_const(loom__onnx *c, int32_t k, const loom_type *type, void *data) {
  const Onnx__NodeProto *n = c->node;
  if ((size_t)k >= n->n_output || !n->output[k][0]) {
    loom__free(data);
    return LOOM_OK;
  }
  loom__onnx_val *o;
  loom_status s = loom__onnx_add(c, n->output[k], type, &o);
  if (s) {
    loom__free(data);
    return s;
  }
  o->host = data;
  o->host_owned = true;
  return LOOM_OK;
}

const Onnx__AttributeProto *loom__onnx_attr(const Onnx__NodeProto *n, const char *name) {
  for (size_t i = 0; i < n->n_attribute; i++)
    if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name)) return n->attribute[i];
  return NULL;
}

int64_t loom__onnx_attr_i(const Onnx__NodeProto *n, const char *name, int64_t def) {
  const Onnx__AttributeProto *a = loom__onnx_attr(n, name);
  return a && a->has_i ? a->i : def;
}

float loom__onnx_attr_f(const Onnx__NodeProto *n, const char *name, float def) {
  const Onnx__AttributeProto *a = loom__onnx_attr(n, name);
  return a && a->has_f ? a->f : def;
}

int32_t loom__onnx_attr_ints(const Onnx__NodeProto *n, const char *name, int64_t *out, int32_t max) {
  const Onnx__AttributeProto *a = loom__onnx_attr(n, name);
  if (!a) return -1;
  if (a->n_ints > (size_t)max) return -2;
  for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
  return (int32_t)a->n_ints;
}

bool loom__onnx_attr_s_is(const Onnx__NodeProto *n, const char *name, const char *s, bool def) {
  const Onnx__AttributeProto *a = loom__onnx_attr(n, name);
  if (!a || !a->has_s) return def;
  return a->s.len == strlen(s) && !memcmp(a->s.data, s, a->s.len);
}

loom_value loom__onnx_scalar(loom__onnx *c, loom_dtype dtype, double value) {
  return loom_scalar_f64(c->g, dtype, value);
}

const loom_type *loom__onnx_type(loom__onnx *c, loom_value v) {
  static const loom_type none = {LOOM_F32, 0, {0}};
  const loom_type *t = loom_value_type(c->g, v);
  return t ? t : &none;
}

loom_status loom__onnx_axis(loom__onnx *c, int64_t axis, int32_t rank, int32_t *out) {
  if (axis < -rank || axis >= (rank ? rank : 1))
    return loom__onnx_invalid(c, "axis %lld is outside a rank-%d tensor", (long long)axis, rank);
  *out = (int32_t)(axis < 0 ? axis + rank : axis);
  return LOOM_OK;
}

loom_status loom__onnx_one_line(loom_status status, const char *path) {
  char msg[2048];
  size_t n = strlen(path);
  const char *last = loom_last_error();
  bool named = !strncmp(last, path, n) && last[n] == ':';
  snprintf(msg, sizeof msg, "%s%s%s", named ? "" : path, named ? "" : ": ", last);
  for (char *p = msg; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
  return loom__error(status, "%s", msg);
}
