/* The "attention" rewrite (attention.h): o = softmax(q kt * scale) v becomes one fused op
 * whose body is the chain in a canonical form, which backends run as a streaming kernel.
 *
 * One matcher reads both the outer graph (where the rule looks for the chain) and a fused
 * body (where backends check the form): walking back from the final dot through the softmax,
 * each intermediate read only inside the chain. A score that anything else modifies (a mask
 * added or selected, a bias) breaks the chain, so masked attention is left as it is.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/attention.h"
#include "ir/pattern.h"

/* The chain found under a root dot, as value ids of the graph it was read from. */
typedef struct chain {
  int32_t q, kt, v;
  double scale;
  bool has_max;
  int n_ops; /* ops of the chain: 5, 7 with the max subtraction, one more with a scale */
} chain;

static bool is_last_axis(const loom__op *op, int32_t rank) {
  if (!(op->attrs.set & LOOM_ATTR_AXES) || op->attrs.axes.count != 1 || !op->attrs.keepdims) return false;
  int32_t a = -1;
  return loom__axis_normalize(op->attrs.axes.v[0], rank, &a) && a == rank - 1;
}

/* The value of v when it is one number: a fill, or a constant of one element (any rank). */
static bool scalar_value(const loom_graph *g, int32_t v, double *out) {
  const loom__op *op = loom__producer(g, v);
  const loom_type *t = &g->values[v].type;
  int64_t n = 0;
  if (!op || loom_type_elements(t, &n) || n != 1) return false;
  if (op->kind == LOOM_OP_FILL) {
    *out = op->attrs.value_is_int ? (double)op->attrs.ivalue : op->attrs.value;
    return true;
  }
  if (op->kind != LOOM_OP_CONSTANT || !op->const_data) return false;
  if (t->dtype == LOOM_F32)
    *out = ((const float *)op->const_data)[0];
  else if (t->dtype == LOOM_F64)
    *out = ((const double *)op->const_data)[0];
  else
    return false;
  return true;
}

/* The producer of v when it is of `kind` and v is read `uses` times (returns count as reads). */
static const loom__op *only(const loom_graph *g, const int32_t *use_counts, int32_t v, loom_op kind,
                            int32_t uses) {
  const loom__op *op = loom__producer_is(g, v, kind);
  return op && use_counts[v] == uses ? op : NULL;
}

/* s = dot(q, kt), maybe times or divided by a scalar: fills q, kt and the scale. */
static bool match_scores(const loom_graph *g, const int32_t *uses, int32_t s, chain *c) {
  c->scale = 1;
  const loom__op *dot = loom__producer_is(g, s, LOOM_OP_DOT);
  const loom__op *scaled = loom__producer(g, s);
  if (!dot && scaled && (scaled->kind == LOOM_OP_MUL || scaled->kind == LOOM_OP_DIV)) {
    for (int32_t side = 0; side < 2 && !dot; side++) {
      if (scaled->kind == LOOM_OP_DIV && side == 1) break; /* a scalar over scores is not a scale */
      double f = 0;
      if (!scalar_value(g, scaled->inputs[1 - side], &f)) continue;
      dot = only(g, uses, scaled->inputs[side], LOOM_OP_DOT, 1);
      c->scale = scaled->kind == LOOM_OP_DIV ? 1.0 / f : f;
    }
    if (!dot || !isfinite(c->scale)) return false;
    c->n_ops++;
  }
  if (!dot) return false;
  c->q = dot->inputs[0];
  c->kt = dot->inputs[1];
  c->n_ops++;
  return g->values[c->q].type.rank == 2 && g->values[c->kt].type.rank == 2;
}

/* Whether op `root` of g is dot(softmax(scores), v) with every intermediate read only by the
 * chain; fills *c. */
static bool match_chain(const loom_graph *g, const int32_t *uses, int32_t root, chain *c) {
  memset(c, 0, sizeof *c);
  const loom__op *o = &g->ops[root];
  if (o->kind != LOOM_OP_DOT) return false;
  int32_t p = o->inputs[0];
  const loom_type *pt = &g->values[p].type, *vt = &g->values[o->inputs[1]].type;
  /* f32 only: the kernels are (f64 would run op by op, holding the scores). */
  if (pt->rank != 2 || vt->rank != 2 || pt->dtype != LOOM_F32) return false;
  const loom__op *div = only(g, uses, p, LOOM_OP_DIV, 1);
  if (!div) return false;
  int32_t e = div->inputs[0];
  const loom__op *sum = only(g, uses, div->inputs[1], LOOM_OP_REDUCE_SUM, 1);
  const loom__op *ex = only(g, uses, e, LOOM_OP_EXP, 2);
  if (!sum || !ex || sum->inputs[0] != e || !is_last_axis(sum, 2)) return false;
  int32_t s = ex->inputs[0];
  const loom__op *sub = only(g, uses, s, LOOM_OP_SUB, 1);
  if (sub) {
    const loom__op *mx = only(g, uses, sub->inputs[1], LOOM_OP_REDUCE_MAX, 1);
    if (!mx || mx->inputs[0] != sub->inputs[0] || !is_last_axis(mx, 2)) return false;
    s = sub->inputs[0];
    if (uses[s] != 2) return false;
    c->has_max = true;
    c->n_ops += 2;
  } else if (uses[s] != 1) {
    return false;
  }
  c->v = o->inputs[1];
  c->n_ops += 4; /* exp, reduce_sum, div and the final dot */
  if (!match_scores(g, uses, s, c)) return false;
  /* Shapes: the dots' own rules hold them; the softmax must run over the keys, m. */
  const loom_type *q = &g->values[c->q].type, *kt = &g->values[c->kt].type;
  return q->dims[1] == kt->dims[0] && kt->dims[1] == pt->dims[1] && q->dtype == pt->dtype &&
         kt->dtype == pt->dtype && vt->dtype == pt->dtype;
}

bool loom__attention_body(const loom_graph *b, loom__attention *out) {
  if (!b || b->n_params != 3 || b->n_outputs != 1 || b->n_ops < 7 || b->n_ops > 9) return false;
  const loom__op *last = &b->ops[b->n_ops - 1];
  if (last->outputs[0] != b->outputs[0]) return false;
  int32_t uses[64];
  if (b->n_values > LOOM_ARRAY_SIZE(uses)) return false;
  loom__use_counts(b, uses);
  chain c;
  if (!match_chain(b, uses, b->n_ops - 1, &c) || !c.has_max) return false;
  if (c.q != b->params[0] || c.kt != b->params[1] || c.v != b->params[2]) return false;
  /* Nothing else in the body: the chain's ops and the scale's constant. */
  if (b->n_ops != c.n_ops + (c.scale != 1 ? 1 : 0)) return false;
  if (out) {
    const loom_type *q = &b->values[c.q].type, *kt = &b->values[c.kt].type, *v = &b->values[c.v].type;
    *out = (loom__attention){.n = q->dims[0],
                             .m = kt->dims[1],
                             .d = q->dims[1],
                             .dv = v->dims[1],
                             .scale = c.scale,
                             .dtype = q->dtype};
  }
  return true;
}

/* ---- the rewrite ------------------------------------------------------------------------- */

/* The canonical body: q, kt, v; s = dot q kt [* scale]; the softmax with its max; dot p v. */
static loom_graph *canonical_body(const loom_graph *g, const loom__attention_match *am) {
  loom_graph *b = NULL;
  if (loom_graph_create("attention", &b)) return NULL;
  loom_value q = loom_graph_param(b, "q", &g->values[am->q].type);
  loom_value kt = loom_graph_param(b, "kt", &g->values[am->kt].type);
  loom_value v = loom_graph_param(b, "v", &g->values[am->v].type);
  loom_dtype dt = g->values[am->q].type.dtype;
  loom_value s = loom_dot(b, q, kt);
  if (am->scale != 1) s = loom_binary(b, LOOM_OP_MUL, s, loom_scalar_f64(b, dt, am->scale));
  int64_t axis = 1;
  loom_value mx = loom_reduce(b, LOOM_OP_REDUCE_MAX, s, 1, &axis, true);
  loom_value e = loom_unary(b, LOOM_OP_EXP, loom_binary(b, LOOM_OP_SUB, s, mx));
  loom_value z = loom_reduce(b, LOOM_OP_REDUCE_SUM, e, 1, &axis, true);
  loom_value o = loom_dot(b, loom_binary(b, LOOM_OP_DIV, e, z), v);
  if (loom_graph_return(b, &o, 1) || loom_graph_verify(b)) {
    loom_graph_destroy(b);
    return NULL;
  }
  return b;
}

/* Under a limit the op must run fused wherever the plan may place it: a backend that ran the
 * body op by op would need the whole scores, which is what the limit forbids. */
static bool runs_fused(const loom__match_ctx *m, const loom__attention_match *am) {
  const loom_optimize_options *o = m->opts;
  if (!o || o->limit <= 0) return true;
  if (!o->fused_runs) return false;
  loom_graph *body = canonical_body(m->g, am);
  bool ok = body && o->fused_runs(body);
  loom_graph_destroy(body);
  return ok;
}

bool loom__attention_find(const loom__match_ctx *m, int32_t op, int32_t variant, void *match, char *detail,
                          size_t detail_size) {
  const loom_graph *g = m->g;
  chain c;
  if (variant > 0 || !match_chain(g, m->uses, op, &c)) return false;
  loom__attention_match *am = match;
  *am = (loom__attention_match){.root = op,
                                .q = c.q,
                                .kt = c.kt,
                                .v = c.v,
                                .scale = c.scale,
                                .has_max = c.has_max,
                                .limit = m->opts ? m->opts->limit : 0};
  if (!runs_fused(m, am)) return false;
  const loom_type *q = &g->values[c.q].type, *kt = &g->values[c.kt].type;
  char o[96], a[96], k[96], scores[LOOM_TYPE_STRING_MAX];
  loom_type st = {.dtype = q->dtype, .rank = 2, .dims = {q->dims[0], kt->dims[1]}};
  snprintf(detail, detail_size,
           "%s = softmax(%s . %s * %.6g) v: the scores %s never stored -> fused attention (online "
           "softmax over blocks of keys)%s",
           loom__describe(g, g->ops[op].outputs[0], o, sizeof o), loom__describe(g, c.q, a, sizeof a),
           loom__describe(g, c.kt, k, sizeof k), c.scale, loom_type_format(&st, scores, sizeof scores),
           c.has_max ? "" : "; the row maximum subtracted, as the graph did not");
  return true;
}

loom_status loom__attention_emit(loom__rebuild *rb, const void *match) {
  const loom__attention_match *am = match;
  loom_graph *body = canonical_body(rb->src, am);
  if (!body) return loom__error(LOOM_ERR_INTERNAL, "attention: the fused body could not be built");
  loom_value ops[3] = {loom__rebuild_get(rb, am->q), loom__rebuild_get(rb, am->kt),
                       loom__rebuild_get(rb, am->v)};
  loom_value out = LOOM_VALUE_NONE;
  loom_status s = loom__graph_add_fused(rb->dst, body, ops, 3, &out);
  loom_graph_destroy(body);
  if (s) return s;
  loom__rebuild_set(rb, rb->src->ops[am->root].outputs[0], out);
  return loom__dst_status(rb);
}

bool loom__attention_keep(const void *match, int64_t peak_before, int64_t peak_after) {
  const loom__attention_match *am = match;
  (void)peak_before;
  return am->limit <= 0 || peak_after <= am->limit;
}
