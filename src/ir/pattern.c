/* Shared machinery of the rewrites (see pattern.h). */
#include <stdio.h>
#include <string.h>

#include "ir/pattern.h"

/* ---- the match context ------------------------------------------------------------------- */

loom_status loom__match_ctx_init(loom__match_ctx *m, const loom_graph *g) {
  memset(m, 0, sizeof *m);
  m->g = g;
  size_t n = (size_t)(g->n_values ? g->n_values : 1);
  m->uses = loom__malloc(n * sizeof *m->uses);
  m->first_reader = loom__malloc(n * sizeof *m->first_reader);
  m->layouts = loom__malloc(n * sizeof *m->layouts);
  if (!m->uses || !m->first_reader || !m->layouts) {
    loom__match_ctx_deinit(m);
    return loom__oom("a rewrite scan");
  }
  loom__use_counts(g, m->uses);
  for (int32_t v = 0; v < g->n_values; v++) m->first_reader[v] = -1;
  for (int32_t o = g->n_ops - 1; o >= 0; o--)
    for (int32_t i = 0; i < g->ops[o].n_inputs; i++) m->first_reader[g->ops[o].inputs[i]] = o;
  loom_status s = loom__graph_layouts(g, m->layouts);
  if (s) loom__match_ctx_deinit(m);
  return s;
}

void loom__match_ctx_deinit(loom__match_ctx *m) {
  loom__free(m->uses);
  loom__free(m->first_reader);
  loom__free(m->layouts);
  memset(m, 0, sizeof *m);
}

/* ---- value queries ----------------------------------------------------------------------- */

static bool element_is(loom_dtype dtype, const void *data, int64_t i, double want) {
  switch (dtype) {
    case LOOM_F32:
      return ((const float *)data)[i] == (float)want;
    case LOOM_F64:
      return ((const double *)data)[i] == want;
    case LOOM_F16:
      return loom_f16_to_f32(((const uint16_t *)data)[i]) == (float)want;
    case LOOM_BF16:
      return loom_bf16_to_f32(((const uint16_t *)data)[i]) == (float)want;
    default:
      return false;
  }
}

bool loom__value_is_float(const loom_graph *g, int32_t v, double want) {
  const loom__op *op = loom__producer(g, v);
  const loom_type *t = &g->values[v].type;
  if (!op || !loom_dtype_is_float(t->dtype)) return false;
  if (op->kind == LOOM_OP_FILL)
    return (op->attrs.value_is_int ? (double)op->attrs.ivalue : op->attrs.value) == want;
  if (op->kind != LOOM_OP_CONSTANT) return false;
  int64_t n = 0;
  if (loom_type_elements(t, &n) || n == 0) return false;
  for (int64_t i = 0; i < n; i++)
    if (!element_is(t->dtype, op->const_data, i, want)) return false;
  return true;
}

/* ---- lifting a value through views ------------------------------------------------------- */

/* For one view op: map[i] = the input axis that output axis i reads, -1 when constant along
 * it. False when the op is not a view this lifting follows. */
static bool view_axis_map(const loom_graph *g, const loom__op *op, int32_t *map) {
  const loom_type *in = &g->values[op->inputs[0]].type;
  const loom_type *out = &g->values[op->outputs[0]].type;
  switch (op->kind) {
    case LOOM_OP_BROADCAST: {
      int32_t shift = out->rank - in->rank;
      for (int32_t i = 0; i < out->rank; i++) {
        int32_t j = i - shift;
        map[i] = (j >= 0 && in->dims[j] == out->dims[i]) ? j : -1;
      }
      return true;
    }
    case LOOM_OP_TRANSPOSE:
      for (int32_t i = 0; i < out->rank; i++) map[i] = (int32_t)op->attrs.perm.v[i];
      return true;
    case LOOM_OP_RESHAPE: { /* only size-1 axes inserted or removed: the other dims in order */
      int32_t j = 0;
      for (int32_t i = 0; i < out->rank; i++) {
        if (out->dims[i] == 1) {
          map[i] = -1;
          continue;
        }
        while (j < in->rank && in->dims[j] == 1) j++;
        if (j >= in->rank || in->dims[j] != out->dims[i]) return false;
        map[i] = j++;
      }
      while (j < in->rank && in->dims[j] == 1) j++;
      return j == in->rank;
    }
    default:
      return false;
  }
}

void loom__lift_operand(const loom_graph *g, int32_t v, const loom_type *target, loom__lift *out) {
  const loom_type *t = &g->values[v].type;
  int32_t shift = target->rank - t->rank;
  for (int32_t k = 0; k < target->rank; k++) {
    int32_t j = k - shift;
    out->axis[k] = (j >= 0 && t->dims[j] == target->dims[k]) ? j : -1;
  }
  int32_t cur = v;
  for (;;) {
    const loom__op *op = loom__producer(g, cur);
    int32_t map[LOOM_MAX_RANK];
    if (!op || !view_axis_map(g, op, map)) break;
    for (int32_t k = 0; k < target->rank; k++)
      if (out->axis[k] >= 0) out->axis[k] = map[out->axis[k]];
    cur = op->inputs[0];
  }
  out->source = cur;
}

/* ---- emit helpers ------------------------------------------------------------------------ */

loom_value loom__scalar_fill(loom_graph *g, loom_dtype dtype, double v) {
  loom_type t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  return loom_fill(g, &t, v);
}

const char *loom__describe(const loom_graph *g, int32_t v, char *buf, size_t size) {
  char label[32], type[LOOM_TYPE_STRING_MAX];
  snprintf(buf, size, "%s %s", loom__value_label(g, v, label, sizeof label),
           loom_type_format(&g->values[v].type, type, sizeof type));
  return buf;
}

loom_status loom__peak_of(const loom_graph *g, int64_t *out_peak) {
  loom_estimate e;
  loom_status s = loom_graph_estimate(g, NULL, &e);
  if (s) return s;
  *out_peak = e.peak_bytes;
  loom_estimate_deinit(&e);
  return LOOM_OK;
}

/* ---- the driver -------------------------------------------------------------------------- */

/* g rebuilt with op `root` replaced by the rule's emission (every other op copied, dead ops
 * dropped by the rebuild's finish). */
static loom_status apply_one(const loom_graph *g, int32_t root, const loom__rule *rule, const void *match,
                             loom_graph **out) {
  loom__rebuild rb;
  loom_status s = loom__rebuild_init(&rb, g);
  if (s) return s;
  for (int32_t o = 0; !s && o < g->n_ops; o++) {
    if (o != root) {
      s = loom__rebuild_copy(&rb, o);
      continue;
    }
    s = rule->emit(&rb, match);
    if (!s) s = loom__dst_status(&rb);
    if (s) loom__error_prefix("rewrite %s: ", rule->name);
  }
  if (!s) s = loom__rebuild_finish(&rb, out);
  loom__rebuild_deinit(&rb);
  return s;
}

/* The state of one run of the driver: the current graph (owned unless it is the input) and
 * its estimated peak (computed the first time an application needs it). */
typedef struct driver {
  const loom_graph *input;
  const loom_optimize_options *opts;
  loom_graph *cur; /* NULL: still the input */
  int64_t peak;
  bool have_peak;
  void *match;
} driver;

static const loom_graph *driver_graph(const driver *d) {
  return d->cur ? d->cur : d->input;
}

/* Tries every variant of rule at op; on a kept application replaces the current graph and
 * reports it, setting *applied. */
static loom_status try_root(driver *d, const loom__match_ctx *m, const loom__rule *rule, int32_t op,
                            loom_rewrite_report *report, bool *applied) {
  char detail[256];
  for (int32_t variant = 0; variant < 8; variant++) {
    if (!rule->find_clears) memset(d->match, 0, rule->match_size);
    detail[0] = '\0';
    if (!rule->find(m, op, variant, d->match, detail, sizeof detail)) return LOOM_OK;
    loom_graph *next = NULL;
    int64_t after = 0;
    loom_status s = apply_one(driver_graph(d), op, rule, d->match, &next);
    if (!s && !d->have_peak) s = loom__peak_of(driver_graph(d), &d->peak);
    if (!s) d->have_peak = true;
    if (!s) s = loom__peak_of(next, &after);
    if (s) {
      loom_graph_destroy(next);
      return s;
    }
    if (rule->keep && !rule->keep(d->match, d->peak, after)) {
      loom_graph_destroy(next);
      continue;
    }
    s = loom__report_add(report, rule->name, d->peak - after, "%s", detail);
    if (s) {
      loom_graph_destroy(next);
      return s;
    }
    loom_graph_destroy(d->cur);
    d->cur = next;
    d->peak = after;
    *applied = true;
    return LOOM_OK;
  }
  return LOOM_OK;
}

/* One scan of the current graph for rule; *applied when an application was kept. */
static loom_status scan_once(driver *d, const loom__rule *rule, loom_rewrite_report *report, bool *applied) {
  loom__match_ctx m;
  *applied = false;
  loom_status s = loom__match_ctx_init(&m, driver_graph(d));
  m.opts = d->opts;
  for (int32_t op = 0; !s && !*applied && op < driver_graph(d)->n_ops; op++)
    s = try_root(d, &m, rule, op, report, applied);
  loom__match_ctx_deinit(&m);
  return s;
}

static loom_status run_rule(driver *d, const loom__rule *rule, loom_rewrite_report *report) {
  d->match = loom__calloc(1, rule->match_size);
  if (!d->match) return loom__oom("a rewrite match");
  /* Every application removes its root and emits nothing the same rule matches, so the
   * loop ends; the bound only guards against a rule that breaks that promise. */
  int32_t bound = driver_graph(d)->n_ops + 16;
  loom_status s = LOOM_OK;
  for (int32_t i = 0; !s && i < bound; i++) {
    bool applied;
    s = scan_once(d, rule, report, &applied);
    if (!applied) break;
  }
  loom__free(d->match);
  d->match = NULL;
  return s;
}

loom_status loom__rules_run(const loom_graph *g, const loom__rule *rules, int32_t n_rules,
                            const loom_optimize_options *opts, loom_graph **out,
                            loom_rewrite_report *report) {
  *out = NULL;
  driver d = {.input = g, .opts = opts};
  loom_status s = LOOM_OK;
  for (int32_t r = 0; !s && r < n_rules; r++)
    if (loom__rewrite_enabled(opts, rules[r].name)) s = run_rule(&d, &rules[r], report);
  if (s) {
    loom_graph_destroy(d.cur);
    return s;
  }
  if (d.cur) {
    *out = d.cur;
    return LOOM_OK;
  }
  return loom_graph_clone(g, out);
}
