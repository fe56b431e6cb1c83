/* The halo cut (docs/limits.md, "Halos"): temporal blocking of a time-stepped stencil.
 *
 * A stencil's steps, unrolled, are slices of the last grid at a few shifts, elementwise ops on
 * them, and concats that put the fixed boundary back around the new interior. No cut of the
 * chunk rewrite (chunk.c) takes such a chain: every step reads its grid at other positions
 * than it writes, so each grid is held whole. Here the graph's results are cut along axis 0
 * into pieces [lo, lo + P), and each value of the chain gets the window of its own axis-0
 * indices a piece needs, [lo - lft, lo + P + rgt), found backwards from the results:
 *   - a slice starting at s reads its operand's window shifted by s;
 *   - an elementwise op reads the same window of its operands (broadcast ones whole);
 *   - a concat along another axis reads the same window of each part;
 *   - a concat along axis 0 reads each part's window shifted by the part's place c_k.
 * The windows widen by the steps' radius on each side, step by step, back to the inputs, which
 * the loop reads through windows (zeros past their ends, docs/ir-loops.md "Windows"). The body
 * is one for every piece: it computes every value on its whole window, positions past the
 * value's ends included (what they hold is never read by a position inside: a slice, an
 * elementwise op and a concat map positions inside to positions inside). Only a concat along
 * axis 0 needs to know where the piece lies: it starts from its first part and takes part k
 * where the global position q >= c_k, read from a window of a boolean fill that is true on
 * [0, M) and false past its ends (the padding): q >= c_k is that mask at q - c_k, or for c_k
 * near the end its negation at q + M - c_k, whichever shift is smaller, so the mask's window
 * stays a halo wide. The redundant work is the halos' (about 2 x steps x radius rows a piece),
 * so the piece is the largest the estimator says fits.
 */
#include <stdio.h>
#include <string.h>

#include "ir/chunk_halo.h"
#include "ir/passes.h"
#include "loom/estimate.h"

enum { ROLE_NONE, ROLE_RANGE, ROLE_WHOLE };

typedef struct halo_val {
  int8_t role;
  int64_t lft, rgt; /* ROLE_RANGE: the window [lo - lft, lo + P + rgt) of its axis-0 indices */
} halo_val;

typedef struct halo_cut {
  const loom_graph *g;
  /* the fuse rewrite's options where every fused body runs fused wherever the plan may place
   * it (fused_runs set, fuse enabled): the pieces are sized on the fused body; else NULL */
  const loom_optimize_options *fuse;
  bool fused_anyway; /* the fuse rewrite will fuse the body whatever the time (loom__chunk_halo_one) */
  halo_val *v;
  bool *varies; /* depends on an input */
  /* a concat along another axis read only by a concat along axis 0 (or by such a split one):
   * never made whole, its parts each get the selects (split_concats) */
  bool *split;
  int64_t n;    /* the results' length along axis 0: the loop's n */
  int64_t halo; /* the widest input window's rows past the piece (lft + rgt) */
  int32_t rank; /* of the results */
  int64_t mask_n;
  halo_val mask; /* the mask's window (role ROLE_NONE: no concat along axis 0) */
} halo_cut;

static const int64_t HALO_MAX = INT64_MAX / 8;

static bool source(loom_op kind) {
  return kind == LOOM_OP_CONSTANT || kind == LOOM_OP_FILL;
}

/* Whether x is made by a fill (the same value at every position). */
static bool is_fill(const halo_cut *h, int32_t x) {
  int32_t op = h->g->values[x].op;
  return op >= 0 && h->g->ops[op].kind == LOOM_OP_FILL;
}

static const loom_type *type_of(const halo_cut *h, int32_t id) {
  return &h->g->values[id].type;
}

/* Widens value id's window to take [lo - lft, lo + P + rgt) too. */
static loom_status need(halo_cut *h, int32_t id, int64_t lft, int64_t rgt) {
  halo_val *hv = &h->v[id];
  if (hv->role == ROLE_WHOLE || type_of(h, id)->rank < 1) return LOOM_ERR_UNSUPPORTED;
  if (lft > HALO_MAX || rgt > HALO_MAX || lft < -HALO_MAX || rgt < -HALO_MAX) return LOOM_ERR_UNSUPPORTED;
  if (hv->role == ROLE_RANGE) {
    hv->lft = LOOM_MAX(hv->lft, lft);
    hv->rgt = LOOM_MAX(hv->rgt, rgt);
  } else {
    *hv = (halo_val){ROLE_RANGE, lft, rgt};
  }
  return LOOM_OK;
}

/* Operand id is taken whole by an elementwise op: it must not depend on an input. */
static loom_status whole(halo_cut *h, int32_t id) {
  if (h->varies[id] || h->v[id].role == ROLE_RANGE) return LOOM_ERR_UNSUPPORTED;
  h->v[id].role = ROLE_WHOLE;
  return LOOM_OK;
}

/* Whether operand x of an elementwise op with result r runs along r's axis 0 with it. */
static bool aligned(const halo_cut *h, int32_t x, int32_t r) {
  const loom_type *tx = type_of(h, x), *tr = type_of(h, r);
  return tx->rank == tr->rank && tx->dims[0] == tr->dims[0];
}

/* The shift from a position q of a concat with part k at c to the mask's index that says
 * q >= c: -c from the start, M - c (negated) from the end. */
static int64_t mask_shift(const halo_cut *h, int64_t c, bool *negate) {
  *negate = h->mask_n - c < c;
  return *negate ? h->mask_n - c : -c;
}

static loom_status infer_concat0(halo_cut *h, const loom__op *op, const halo_val *r) {
  int64_t c = 0;
  for (int32_t i = 0; i < op->n_inputs; i++) {
    int32_t x = op->inputs[i];
    if (h->varies[x] || is_fill(h, x)) {
      loom_status s = need(h, x, r->lft + c, r->rgt - c);
      if (s) return s;
    } else {
      return LOOM_ERR_UNSUPPORTED; /* a constant part would need its positions */
    }
    if (i > 0) {
      bool neg;
      int64_t sh = mask_shift(h, c, &neg);
      halo_val m = {ROLE_RANGE, r->lft - sh, r->rgt + sh};
      if (h->mask.role == ROLE_NONE) h->mask = m;
      h->mask.lft = LOOM_MAX(h->mask.lft, m.lft);
      h->mask.rgt = LOOM_MAX(h->mask.rgt, m.rgt);
    }
    c += type_of(h, x)->dims[0];
  }
  return LOOM_OK;
}

/* The windows op's operands need for its result's window r. */
static loom_status infer_op(halo_cut *h, const loom__op *op, const halo_val *r) {
  int32_t res = op->outputs[0], axis = 0;
  const loom_attrs *a = &op->attrs;
  if (op->kind == LOOM_OP_FILL) return LOOM_OK; /* made in the body at the window's length */
  if (!h->varies[res]) return LOOM_ERR_UNSUPPORTED;
  if (loom__op_is_elementwise(op->kind)) {
    for (int32_t i = 0; i < op->n_inputs; i++) {
      int32_t x = op->inputs[i];
      bool ranged = aligned(h, x, res) && (h->varies[x] || is_fill(h, x));
      loom_status s = ranged ? need(h, x, r->lft, r->rgt) : whole(h, x);
      if (s) return s;
    }
    return LOOM_OK;
  }
  if (op->kind == LOOM_OP_SLICE) {
    int64_t s0 = a->start.v[0];
    if ((a->set & LOOM_ATTR_STEP) && a->step.v[0] != 1) return LOOM_ERR_UNSUPPORTED;
    if (s0 < 0) return LOOM_ERR_UNSUPPORTED;
    return need(h, op->inputs[0], r->lft - s0, r->rgt + s0);
  }
  if (op->kind == LOOM_OP_CONCAT) {
    if (!loom__axis_normalize(a->axis, type_of(h, res)->rank, &axis)) return LOOM_ERR_UNSUPPORTED;
    if (axis == 0) return infer_concat0(h, op, r);
    for (int32_t i = 0; i < op->n_inputs; i++) {
      /* a fill's one row (emit_op) would not line up with the other parts' windows */
      loom_status s =
          is_fill(h, op->inputs[i]) ? LOOM_ERR_UNSUPPORTED : need(h, op->inputs[i], r->lft, r->rgt);
      if (s) return s;
    }
    return LOOM_OK;
  }
  return LOOM_ERR_UNSUPPORTED;
}

/* Which values depend on an input, the mask's length (the longest concat along axis 0), and
 * whether every op is one the cut takes. */
static loom_status classify(halo_cut *h) {
  const loom_graph *g = h->g;
  for (int32_t p = 0; p < g->n_params; p++) h->varies[g->params[p]] = true;
  for (int32_t o = 0; o < g->n_ops; o++) {
    const loom__op *op = &g->ops[o];
    if (op->loop || op->fused || op->n_outputs != 1) return LOOM_ERR_UNSUPPORTED;
    bool v = false;
    for (int32_t i = 0; i < op->n_inputs; i++) v |= h->varies[op->inputs[i]];
    h->varies[op->outputs[0]] = v;
    if (!v && !source(op->kind)) return LOOM_ERR_UNSUPPORTED; /* folded before: not a stencil */
    if (v && !loom__op_is_elementwise(op->kind) && op->kind != LOOM_OP_SLICE && op->kind != LOOM_OP_CONCAT)
      return LOOM_ERR_UNSUPPORTED;
    const loom_type *t = type_of(h, op->outputs[0]);
    int32_t axis;
    if (v && op->kind == LOOM_OP_CONCAT && loom__axis_normalize(op->attrs.axis, t->rank, &axis) &&
        axis == 0) {
      if (t->rank != h->rank) return LOOM_ERR_UNSUPPORTED;
      h->mask_n = LOOM_MAX(h->mask_n, t->dims[0]);
    }
  }
  return LOOM_OK;
}

/* Whether x is made by a concat along an axis other than 0 that depends on an input. */
static bool concat_across(const halo_cut *h, int32_t x) {
  int32_t op = h->g->values[x].op, axis = 0;
  if (op < 0 || !h->varies[x] || h->g->ops[op].kind != LOOM_OP_CONCAT) return false;
  return loom__axis_normalize(h->g->ops[op].attrs.axis, type_of(h, x)->rank, &axis) && axis != 0;
}

/* Marks the concats along other axes read only by a concat along axis 0, or by such a marked
 * one: the frames whose parts get the selects one by one. */
static loom_status split_concats(halo_cut *h) {
  const loom_graph *g = h->g;
  int32_t *uses = loom__calloc((size_t)LOOM_MAX(g->n_values, 1), sizeof *uses);
  if (!uses) return loom__oom("a halo cut");
  for (int32_t o = 0; o < g->n_ops; o++)
    for (int32_t i = 0; i < g->ops[o].n_inputs; i++) uses[g->ops[o].inputs[i]]++;
  for (int32_t j = 0; j < g->n_outputs; j++) uses[g->outputs[j]]++;
  for (int32_t o = g->n_ops - 1; o >= 0; o--) {
    const loom__op *op = &g->ops[o];
    int32_t res = op->outputs[0], axis = 0;
    if (op->kind != LOOM_OP_CONCAT || !h->varies[res] || h->v[res].role != ROLE_RANGE) continue;
    if (!loom__axis_normalize(op->attrs.axis, type_of(h, res)->rank, &axis)) continue;
    if (axis != 0 && !h->split[res]) continue;
    for (int32_t i = 0; i < op->n_inputs; i++)
      if (uses[op->inputs[i]] == 1 && concat_across(h, op->inputs[i])) h->split[op->inputs[i]] = true;
  }
  loom__free(uses);
  return LOOM_OK;
}

/* The windows of every value, backwards from the results'. */
static loom_status infer(halo_cut *h) {
  const loom_graph *g = h->g;
  if (g->n_outputs < 1 || g->n_outputs > LOOM_LOOP_MAX_RESULTS || g->n_params < 1)
    return LOOM_ERR_UNSUPPORTED;
  h->rank = type_of(h, g->outputs[0])->rank;
  h->n = h->rank > 0 ? type_of(h, g->outputs[0])->dims[0] : 0;
  if (h->n < 2) return LOOM_ERR_UNSUPPORTED;
  loom_status s = classify(h);
  for (int32_t j = 0; !s && j < g->n_outputs; j++) {
    const loom_type *t = type_of(h, g->outputs[j]);
    if (!h->varies[g->outputs[j]] || t->rank != h->rank || t->dims[0] != h->n ||
        g->values[g->outputs[j]].op < 0)
      return LOOM_ERR_UNSUPPORTED;
    s = need(h, g->outputs[j], 0, 0);
  }
  for (int32_t o = g->n_ops - 1; !s && o >= 0; o--) {
    const loom__op *op = &g->ops[o];
    halo_val r = h->v[op->outputs[0]];
    if (r.role == ROLE_RANGE) s = infer_op(h, op, &r);
  }
  for (int32_t v = 0; !s && v < g->n_values; v++)
    if (h->v[v].role == ROLE_RANGE && h->v[v].lft + h->v[v].rgt < 0) s = LOOM_ERR_UNSUPPORTED;
  /* An input read only at the piece's own rows (fdtd-2d's ex in a group of one step) would be
   * a plain slice, whose axis the body's ops could not line up with the other inputs' windows:
   * one row more makes it a window too. */
  for (int32_t p = 0; !s && p < g->n_params; p++)
    if (h->v[g->params[p]].role == ROLE_RANGE && h->v[g->params[p]].lft + h->v[g->params[p]].rgt == 0)
      h->v[g->params[p]].rgt = 1;
  if (!s && h->mask.role == ROLE_RANGE && h->mask.lft + h->mask.rgt == 0) h->mask.rgt = 1;
  return s ? s : split_concats(h);
}

/* ---- the body for pieces of P ------------------------------------------------------------ */

typedef struct body_build {
  const halo_cut *h;
  loom_graph *b;
  int32_t *map; /* graph value -> body value, -1 none */
  int32_t mask; /* the body's mask parameter, -1 none */
  int64_t piece;
} body_build;

static int64_t win_len(const body_build *bb, const halo_val *hv) {
  return bb->piece + hv->lft + hv->rgt;
}

/* A view of body value `id` (whose window has `have_lft`) holding len positions from
 * lo - want_lft on. */
static loom_value window_view(body_build *bb, int32_t id, int64_t have_lft, int64_t want_lft, int64_t len) {
  const loom_type *t = &bb->b->values[id].type;
  int64_t start = have_lft - want_lft;
  if (start == 0 && len == t->dims[0]) return (loom_value){id};
  loom_attrs a;
  loom_attrs_init(&a);
  a.set = LOOM_ATTR_START | LOOM_ATTR_STOP;
  a.start.count = a.stop.count = t->rank;
  for (int32_t d = 0; d < t->rank; d++) {
    a.start.v[d] = 0;
    a.stop.v[d] = t->dims[d];
  }
  a.start.v[0] = start;
  a.stop.v[0] = start + len;
  loom_value out = LOOM_VALUE_NONE;
  loom_graph_add(bb->b, LOOM_OP_SLICE, &(loom_value){id}, 1, &a, NULL, NULL, &out, 1);
  return out;
}

/* Value x of the graph as the body holds it, over the window of r. */
static loom_value operand(body_build *bb, int32_t x, const halo_val *r, int64_t shift) {
  const halo_val *hx = &bb->h->v[x];
  if (hx->role == ROLE_WHOLE || is_fill(bb->h, x)) return (loom_value){bb->map[x]};
  return window_view(bb, bb->map[x], hx->lft, r->lft + shift, win_len(bb, r));
}

enum { MAX_PARTS = 16 };

/* A part of a concat along axis 0 in the select chain: graph value x at place c, its index
 * along each other axis a the box's less shift[a]. */
typedef struct chain_part {
  int32_t x;
  int64_t c;
  int64_t shift[LOOM_MAX_RANK];
} chain_part;

/* Part p over the window of r and the box [lo, hi) of the other axes. */
static loom_value leaf_part(body_build *bb, const chain_part *p, const halo_val *r, const int64_t *lo,
                            const int64_t *hi) {
  loom_value v = operand(bb, p->x, r, p->c);
  if (v.id < 0) return v;
  const loom_type *t = &bb->b->values[v.id].type;
  loom_attrs a;
  loom_attrs_init(&a);
  a.set = LOOM_ATTR_START | LOOM_ATTR_STOP;
  a.start.count = a.stop.count = t->rank;
  bool whole = true;
  for (int32_t d = 0; d < t->rank; d++) {
    a.start.v[d] = d ? lo[d] - p->shift[d] : 0;
    a.stop.v[d] = d ? hi[d] - p->shift[d] : t->dims[d];
    whole &= a.start.v[d] == 0 && a.stop.v[d] == t->dims[d];
  }
  if (whole) return v;
  loom_value out = LOOM_VALUE_NONE;
  loom_graph_add(bb->b, LOOM_OP_SLICE, &v, 1, &a, NULL, NULL, &out, 1);
  return out;
}

/* The selects of concat op's parts in the box (a leaf: no part left to split): part k where
 * the position q >= c_k. */
static loom_status leaf_chain(body_build *bb, int32_t n, const chain_part *parts, const halo_val *r,
                              const int64_t *lo, const int64_t *hi, loom_value *out) {
  const halo_cut *h = bb->h;
  loom_value res = leaf_part(bb, &parts[0], r, lo, hi);
  for (int32_t i = 1; i < n && res.id >= 0; i++) {
    bool neg;
    int64_t sh = mask_shift(h, parts[i].c, &neg);
    /* outside = the mask's negation: q >= c where it is false at q - c, or true at q + M - c */
    loom_value outside = window_view(bb, bb->mask, h->mask.lft, r->lft - sh, win_len(bb, r));
    loom_value part = leaf_part(bb, &parts[i], r, lo, hi);
    loom_value ins[3] = {outside, neg ? part : res, neg ? res : part};
    loom_status s = loom_graph_add(bb->b, LOOM_OP_SELECT, ins, 3, NULL, NULL, NULL, &res, 1);
    if (s) return s;
  }
  *out = res;
  return bb->b->error;
}

static loom_status chain_box(body_build *bb, int32_t n, const chain_part *parts, const halo_val *r,
                             const int64_t *lo, const int64_t *hi, loom_value *out);

/* Part k, a concat along axis `a` of the chain, split: the chain over each of its parts' boxes,
 * the narrowest first (the widest then reads the grid last, which dies with it), then
 * concatenated along a. */
static loom_status split_part(body_build *bb, int32_t n, const chain_part *parts, int32_t k,
                              const halo_val *r, const int64_t *lo, const int64_t *hi, loom_value *out) {
  const halo_cut *h = bb->h;
  const loom__op *m = &h->g->ops[h->g->values[parts[k].x].op];
  int32_t a = 0;
  loom__axis_normalize(m->attrs.axis, type_of(h, parts[k].x)->rank, &a);
  if (m->n_inputs > MAX_PARTS) return LOOM_ERR_UNSUPPORTED;
  loom_value subs[MAX_PARTS];
  int64_t from[MAX_PARTS], to[MAX_PARTS];
  int32_t n_sub = 0, order[MAX_PARTS];
  for (int32_t j = 0, d = 0; j < m->n_inputs; d += (int32_t)type_of(h, m->inputs[j])->dims[a], j++) {
    from[j] = LOOM_MAX(lo[a], parts[k].shift[a] + d);
    to[j] = LOOM_MIN(hi[a], parts[k].shift[a] + d + type_of(h, m->inputs[j])->dims[a]);
    int32_t at = n_sub++;
    while (at > 0 && to[order[at - 1]] - from[order[at - 1]] > to[j] - from[j])
      order[at] = order[at - 1], at--;
    order[at] = j;
  }
  for (int32_t i = 0; i < n_sub; i++) {
    int32_t j = order[i];
    subs[j] = LOOM_VALUE_NONE;
    if (from[j] >= to[j]) continue;
    chain_part sub[MAX_PARTS];
    memcpy(sub, parts, sizeof *parts * (size_t)n);
    int64_t d = 0;
    for (int32_t q = 0; q < j; q++) d += type_of(h, m->inputs[q])->dims[a];
    sub[k].x = m->inputs[j];
    sub[k].shift[a] += d;
    int64_t lo2[LOOM_MAX_RANK], hi2[LOOM_MAX_RANK];
    memcpy(lo2, lo, sizeof lo2);
    memcpy(hi2, hi, sizeof hi2);
    lo2[a] = from[j];
    hi2[a] = to[j];
    loom_status s = chain_box(bb, n, sub, r, lo2, hi2, &subs[j]);
    if (s) return s;
  }
  loom_value kept[MAX_PARTS];
  int32_t n_kept = 0;
  for (int32_t j = 0; j < n_sub; j++)
    if (from[j] < to[j]) kept[n_kept++] = subs[j];
  if (n_kept == 1) return *out = kept[0], LOOM_OK;
  loom_attrs at;
  loom_attrs_init(&at);
  at.set = LOOM_ATTR_AXIS;
  at.axis = a;
  return loom_graph_add(bb->b, LOOM_OP_CONCAT, kept, n_kept, &at, NULL, NULL, out, 1);
}

static loom_status chain_box(body_build *bb, int32_t n, const chain_part *parts, const halo_val *r,
                             const int64_t *lo, const int64_t *hi, loom_value *out) {
  for (int32_t k = 0; k < n; k++)
    if (bb->h->split[parts[k].x]) return split_part(bb, n, parts, k, r, lo, hi, out);
  return leaf_chain(bb, n, parts, r, lo, hi, out);
}

/* A concat along axis 0: selects on the piece's positions, split along the other axes where a
 * part is itself a concat there (the frame of a 2-D or 3-D grid), so neither the framed
 * interior nor the grid outlives its step's selects. */
static loom_status emit_concat0(body_build *bb, const loom__op *op, const halo_val *r, loom_value *out) {
  const halo_cut *h = bb->h;
  if (op->n_inputs > MAX_PARTS) return LOOM_ERR_UNSUPPORTED;
  chain_part parts[MAX_PARTS];
  int64_t c = 0, lo[LOOM_MAX_RANK] = {0}, hi[LOOM_MAX_RANK] = {0};
  const loom_type *t = type_of(h, op->outputs[0]);
  for (int32_t d = 0; d < t->rank; d++) hi[d] = t->dims[d];
  for (int32_t i = 0; i < op->n_inputs; i++) {
    parts[i] = (chain_part){.x = op->inputs[i], .c = c};
    c += type_of(h, op->inputs[i])->dims[0];
  }
  return chain_box(bb, op->n_inputs, parts, r, lo, hi, out);
}

/* Op o of the graph in the body, over its result's window. */
static loom_status emit_op(body_build *bb, const loom__op *op) {
  const halo_cut *h = bb->h;
  loom_graph *b = bb->b;
  int32_t res = op->outputs[0], axis = 0;
  const halo_val *r = &h->v[res];
  loom_value out = LOOM_VALUE_NONE, ins[64];
  loom_attrs a = op->attrs;
  loom_status s = LOOM_OK;
  if (op->n_inputs > 64) return LOOM_ERR_UNSUPPORTED;
  if (h->split[res]) return LOOM_OK; /* made part by part by the concat along axis 0 reading it */
  if (source(op->kind)) {
    loom_type t = *type_of(h, res);
    /* a fill on the window's positions is one row that broadcasts: its shape does not hold the
     * piece, so the last, shorter piece's body retypes */
    if (r->role == ROLE_RANGE) t.dims[0] = 1;
    s = loom_graph_add(b, op->kind, NULL, 0, &a, &t, op->const_data, &out, 1);
  } else if (op->kind == LOOM_OP_SLICE) {
    int32_t x = op->inputs[0];
    a.start.v[0] = h->v[x].lft - r->lft + op->attrs.start.v[0];
    a.stop.v[0] = a.start.v[0] + win_len(bb, r);
    s = loom_graph_add(b, LOOM_OP_SLICE, &(loom_value){bb->map[x]}, 1, &a, NULL, NULL, &out, 1);
  } else if (op->kind == LOOM_OP_CONCAT && loom__axis_normalize(a.axis, type_of(h, res)->rank, &axis) &&
             axis == 0) {
    s = emit_concat0(bb, op, r, &out);
  } else {
    for (int32_t i = 0; i < op->n_inputs; i++) ins[i] = operand(bb, op->inputs[i], r, 0);
    s = b->error ? b->error : loom_graph_add(b, op->kind, ins, op->n_inputs, &a, NULL, NULL, &out, 1);
  }
  if (s || b->error) return s ? s : b->error;
  bb->map[res] = out.id;
  return LOOM_OK;
}

static loom_status body_params(body_build *bb) {
  const halo_cut *h = bb->h;
  const loom_graph *g = h->g;
  for (int32_t p = 0; p < g->n_params; p++) {
    int32_t v = g->params[p];
    if (h->v[v].role != ROLE_RANGE) continue;
    loom_type t = g->values[v].type;
    t.dims[0] = win_len(bb, &h->v[v]);
    bb->map[v] = loom_graph_param(bb->b, g->values[v].name, &t).id;
    if (bb->map[v] < 0) return bb->b->error;
  }
  if (h->mask.role != ROLE_RANGE) return LOOM_OK;
  loom_type t = {.dtype = LOOM_BOOL, .rank = h->rank};
  for (int32_t d = 0; d < h->rank; d++) t.dims[d] = 1;
  t.dims[0] = win_len(bb, &h->mask);
  /* read once by an elementwise op: a padded piece binds the parameter to a dense copy whose
   * strides its views would not follow (the fill's are 0), and the negation is what the
   * selects want anyway */
  loom_value m = loom_graph_param(bb->b, "halo_mask", &t);
  if (m.id >= 0) m = loom_unary(bb->b, LOOM_OP_NOT, m);
  bb->mask = m.id;
  return bb->mask < 0 ? bb->b->error : LOOM_OK;
}

/* The loop's body for pieces of `piece`: *out owned by the caller. */
static loom_status make_body(const halo_cut *h, int64_t piece, loom_graph **out) {
  const loom_graph *g = h->g;
  body_build bb = {.h = h, .mask = -1, .piece = piece};
  bb.map = loom__malloc(sizeof(int32_t) * (size_t)LOOM_MAX(g->n_values, 1));
  loom_status s = bb.map ? loom_graph_create(g->name, &bb.b) : loom__oom("a halo cut's body");
  for (int32_t v = 0; !s && v < g->n_values; v++) bb.map[v] = -1;
  if (!s) s = body_params(&bb);
  for (int32_t o = 0; !s && o < g->n_ops; o++)
    if (h->v[g->ops[o].outputs[0]].role != ROLE_NONE) s = emit_op(&bb, &g->ops[o]);
  loom_value rets[LOOM_LOOP_MAX_RESULTS];
  halo_val at_piece = {ROLE_RANGE, 0, 0};
  for (int32_t j = 0; !s && j < g->n_outputs; j++) {
    rets[j] = operand(&bb, g->outputs[j], &at_piece, 0);
    s = bb.b->error;
    /* a result that later steps read wider (fdtd-2d's ey and ex, which hz's update reads a row
     * past the piece) is a view of its window: a one-part concat copies it, so the loop writes
     * it out piece by piece rather than holding the whole result */
    const loom_type *t = s ? NULL : &bb.b->values[rets[j].id].type;
    if (!s && rets[j].id != bb.map[g->outputs[j]] && t->rank >= 2) {
      loom_attrs a;
      loom_attrs_init(&a);
      a.set = LOOM_ATTR_AXIS;
      a.axis = 1;
      loom_value view = rets[j];
      s = loom_graph_add(bb.b, LOOM_OP_CONCAT, &view, 1, &a, NULL, NULL, &rets[j], 1);
    }
  }
  if (!s) s = loom_graph_return(bb.b, rets, g->n_outputs);
  loom__free(bb.map);
  if (s) {
    loom_graph_destroy(bb.b);
    return s;
  }
  *out = bb.b;
  return LOOM_OK;
}

/* ---- the graph for pieces of P --------------------------------------------------------- */

/* The operands of the loop: each input the chain reads through its window, then the mask. */
static int32_t loop_operands(const halo_cut *h, loom_graph *ng, loom_value *ops, loom_loop_input *rules) {
  const loom_graph *g = h->g;
  int32_t n = 0;
  for (int32_t p = 0; p < g->n_params; p++) {
    const halo_val *hv = &h->v[g->params[p]];
    if (hv->role != ROLE_RANGE) continue;
    ops[n] = loom_graph_param_at(ng, p);
    rules[n++] = (loom_loop_input){.axis = 0, .offset = -hv->lft, .stride = 1, .halo = hv->lft + hv->rgt};
  }
  if (h->mask.role != ROLE_RANGE) return n;
  loom_type t = {.dtype = LOOM_BOOL, .rank = h->rank};
  for (int32_t d = 0; d < h->rank; d++) t.dims[d] = 1;
  t.dims[0] = h->mask_n;
  loom_attrs a;
  loom_attrs_init(&a);
  a.set = LOOM_ATTR_VALUE;
  a.value = 1;
  a.ivalue = 1;
  a.value_is_int = true;
  loom_graph_add(ng, LOOM_OP_FILL, NULL, 0, &a, &t, NULL, &ops[n], 1);
  rules[n++] =
      (loom_loop_input){.axis = 0, .offset = -h->mask.lft, .stride = 1, .halo = h->mask.lft + h->mask.rgt};
  return n;
}

static loom_status make_graph(const halo_cut *h, int64_t piece, int32_t slices, loom_graph **out) {
  const loom_graph *g = h->g;
  loom_graph *body = NULL, *ng = NULL;
  loom_status s = make_body(h, piece, &body);
  if (!s) s = loom_graph_create(g->name, &ng);
  for (int32_t p = 0; !s && p < g->n_params; p++)
    if (loom_graph_param(ng, g->values[g->params[p]].name, &g->values[g->params[p]].type).id < 0)
      s = ng->error;
  loom_value ops[64], outs[LOOM_LOOP_MAX_RESULTS];
  loom_loop_input rules[64];
  loom_loop_output combines[LOOM_LOOP_MAX_RESULTS];
  for (int32_t j = 0; j < g->n_outputs; j++) combines[j] = (loom_loop_output){.combine = LOOM_COMBINE_CONCAT};
  int32_t n_ops = 0;
  if (!s && g->n_params >= 63) s = LOOM_ERR_UNSUPPORTED;
  if (!s) n_ops = loop_operands(h, ng, ops, rules);
  if (!s && ng->error) s = ng->error;
  if (!s) s = loom_graph_add_loop(ng, h->n, piece, body, ops, rules, n_ops, combines, g->n_outputs, outs);
  if (!s) ng->ops[ng->n_ops - 1].loop->slices = slices;
  for (int32_t j = 0; !s && j < g->n_outputs; j++)
    if (g->values[g->outputs[j]].name) s = loom_value_set_name(ng, outs[j], g->values[g->outputs[j]].name);
  if (!s) s = loom_graph_return(ng, outs, g->n_outputs);
  loom_graph_destroy(body);
  if (s) {
    loom_graph_destroy(ng);
    return s;
  }
  *out = ng;
  return LOOM_OK;
}

/* The graph in pieces of `piece` and its estimated peak. */
static loom_status try_piece(const halo_cut *h, int64_t piece, int32_t slices, loom_graph **out,
                             int64_t *peak) {
  loom_graph *cand = NULL;
  loom_status s = make_graph(h, piece, slices, &cand);
  loom_estimate e;
  if (!s) s = loom_graph_estimate(cand, NULL, &e);
  if (s) {
    loom_graph_destroy(cand);
    return s;
  }
  *peak = e.peak_bytes;
  loom_estimate_deinit(&e);
  if (out)
    *out = cand;
  else
    loom_graph_destroy(cand);
  return LOOM_OK;
}

/* g (its last op the loop) in pieces of `piece`, the loop's body retyped for it
 * (loom__loop_body_for), and its estimated peak. */
static loom_status retyped(const loom_graph *g, int64_t piece, loom_graph **out, int64_t *peak) {
  *out = NULL;
  loom_graph *c = NULL, *body = NULL;
  loom_status s = loom_graph_clone(g, &c);
  loom__loop *l = s ? NULL : c->ops[c->n_ops - 1].loop;
  if (!s) s = loom__loop_body_for(l, piece, &body);
  if (!s) {
    loom_graph_destroy(l->body);
    l->body = body;
    l->piece = piece;
  }
  loom_estimate e;
  if (!s && !(s = loom_graph_estimate(c, NULL, &e))) {
    *peak = e.peak_bytes;
    loom_estimate_deinit(&e);
  }
  if (s) {
    loom_graph_destroy(c);
    return s;
  }
  *out = c;
  return LOOM_OK;
}

/* Whether every fused op of loop body b runs fused wherever the plan may place it. */
static bool body_runs_fused(const loom_graph *b, bool (*fused_runs)(const loom_graph *)) {
  bool any = false;
  for (int32_t o = 0; o < b->n_ops; o++) {
    if (b->ops[o].fused && !fused_runs(b->ops[o].fused)) return false;
    any = any || b->ops[o].fused;
  }
  return any;
}

/* The graph at the first piece that does not fit, `over`, with its body fused as the fuse
 * rewrite fuses a graph over its limit: each step's stencil and its selects one op, so the body
 * holds the grids between steps and not each op's result; NULL where no body fuses so or where
 * a fused body would not run fused wherever the plan may place it. */
static loom_status fused_at(const halo_cut *h, int64_t over, int64_t limit, int32_t slices,
                            loom_graph **out) {
  *out = NULL;
  loom_optimize_options o = *h->fuse;
  o.limit = limit;
  loom_graph *g = NULL, *f = NULL;
  int64_t peak = 0;
  loom_status s = try_piece(h, over, slices, &g, &peak);
  if (!s) s = loom__rewrite_fuse(g, &o, &f, NULL);
  loom_graph_destroy(g);
  if (s == LOOM_ERR_OUT_OF_MEMORY) return s;
  const loom__op *loop = f ? &f->ops[f->n_ops - 1] : NULL;
  if (s || !loop->loop || !body_runs_fused(loop->loop->body, h->fuse->fused_runs)) {
    loom_graph_destroy(f);
    return LOOM_OK;
  }
  *out = f;
  return LOOM_OK;
}

/* Graph f (fused at pieces of `fits` + 1) in the largest pieces up to n whose estimated peak
 * fits, found by retyping its body, evened out over its pieces; NULL where none above `fits`
 * does. Fusing once and retyping costs a few estimates; fusing each probe again would cost the
 * fuse rewrite on a body of thousands of ops each time. */
static loom_status grow_fused(const halo_cut *h, const loom_graph *f, int64_t fits, int64_t limit,
                              loom_graph **out, int64_t *out_piece) {
  *out = NULL;
  int64_t lo = fits, hi = h->n + 1, peak = 0;
  while (hi - lo > 1) {
    int64_t c = lo + (hi - lo) / 2;
    loom_graph *cand = NULL;
    loom_status s = retyped(f, c, &cand, &peak);
    loom_graph_destroy(cand);
    if (s == LOOM_ERR_OUT_OF_MEMORY) return s;
    if (!s && peak <= limit)
      lo = c;
    else
      hi = c;
  }
  if (lo <= fits) return LOOM_OK;
  int64_t trips = (h->n + lo - 1) / lo, even = (h->n + trips - 1) / trips;
  loom_status s = retyped(f, even, out, &peak);
  if (!s && peak > limit) {
    loom_graph_destroy(*out);
    s = retyped(f, even = lo, out, &peak);
  }
  *out_piece = even;
  return s;
}

/* Whether pieces of `fused` with the body fused beat pieces of `plain` op by op: the fused
 * evaluator costs more an element than the plain kernels on data in cache (fuse.c's cost
 * constants; 7x on jacobi-1d's pieces of 131072, measured), so the fused body pays only where
 * its longer pieces redo much less of the halos' work, a step's window averaging a piece and
 * half the halo. */
static bool fusion_pays(const halo_cut *h, int64_t plain, int64_t fused) {
  if (!h->fuse) return false;
  if (h->fused_anyway) return true;
  if (plain < 1) return true; /* nothing fits op by op */
  double work_plain = (double)(plain + h->halo / 2) / (double)plain;
  double work_fused = (double)(fused + h->halo / 2) / (double)fused;
  return work_plain >= 1.5 * work_fused;
}

/* The largest piece that fits, evened out over its pieces: a bisection on the estimate of the
 * body op by op, then, where the body fuses and that pays, of the fused body. */
static loom_status best_piece(const halo_cut *h, int64_t limit, int32_t slices, loom_graph **out,
                              int64_t *out_piece, int64_t *least) {
  int64_t fits = 0, fails = h->n + 1, peak = 0;
  while (fails - fits > 1) {
    int64_t c = fits + (fails - fits) / 2;
    loom_status s = try_piece(h, c, slices, NULL, &peak);
    if (s && s != LOOM_ERR_INVALID_ARGUMENT) return s;
    if (c == 1) *least = s ? -1 : peak;
    if (!s && peak <= limit)
      fits = c;
    else
      fails = c;
  }
  loom_graph *f = NULL;
  loom_status s =
      fusion_pays(h, fits, h->n) && fails <= h->n ? fused_at(h, fails, limit, slices, &f) : LOOM_OK;
  if (!s && f) s = grow_fused(h, f, fits, limit, out, out_piece);
  loom_graph_destroy(f);
  if (!s && *out && !fusion_pays(h, fits, *out_piece)) {
    loom_graph_destroy(*out);
    *out = NULL;
  }
  if (s || *out) return s;
  if (fits < 1) return LOOM_ERR_UNSUPPORTED;
  int64_t trips = (h->n + fits - 1) / fits, even = (h->n + trips - 1) / trips;
  loom_graph *cand = NULL;
  if (try_piece(h, even, slices, &cand, &peak) || peak > limit) {
    loom_graph_destroy(cand);
    cand = NULL;
    even = fits;
    s = try_piece(h, even, slices, &cand, &peak);
    if (s) return s;
  }
  *out = cand;
  *out_piece = even;
  return LOOM_OK;
}

loom_status loom__chunk_halo_one(const loom_graph *g, const loom_optimize_options *opts, int64_t limit,
                                 int32_t slices, bool fused_anyway, loom_graph **out, char *detail,
                                 size_t detail_size) {
  *out = NULL;
  halo_cut h = {.g = g, .fused_anyway = fused_anyway};
  if (opts && opts->fused_runs && loom__rewrite_enabled(opts, "fuse")) h.fuse = opts;
  h.v = loom__calloc((size_t)LOOM_MAX(g->n_values, 1), sizeof *h.v);
  h.varies = loom__calloc((size_t)LOOM_MAX(g->n_values, 1), sizeof *h.varies);
  h.split = loom__calloc((size_t)LOOM_MAX(g->n_values, 1), sizeof *h.split);
  loom_status s = (!h.v || !h.varies || !h.split) ? loom__oom("a halo cut") : infer(&h);
  int64_t piece = 0;
  for (int32_t p = 0; !s && p < g->n_params; p++)
    if (h.v[g->params[p]].role == ROLE_RANGE)
      h.halo = LOOM_MAX(h.halo, h.v[g->params[p]].lft + h.v[g->params[p]].rgt);
  int64_t least = -1;
  bool stencil = !s;
  if (!s) s = best_piece(&h, limit, slices, out, &piece, &least);
  if (s == LOOM_ERR_UNSUPPORTED && stencil) {
    char need[32];
    if (least > 0)
      snprintf(detail, detail_size, "in pieces of 1 row it needs %s (each input's window %lld rows wider)",
               loom__format_bytes(least, need, sizeof need), (long long)h.halo);
    else
      snprintf(detail, detail_size, "no loop of it runs in pieces of 1 row");
  }
  if (!s) {
    const loom_graph *body = (*out)->ops[(*out)->n_ops - 1].loop->body;
    int32_t fused = 0;
    for (int32_t o = 0; o < body->n_ops; o++) fused += body->ops[o].fused != NULL;
    char name[32], how[64] = "";
    if (fused) snprintf(how, sizeof how, ", sized on its body fused into %d ops", (int)fused);
    snprintf(detail, detail_size,
             "'%s' and the %d ops before it, along axis 0, in %lld pieces of %lld%s (the steps' halos: "
             "%lld more rows of each input a piece)",
             loom__value_label(g, g->outputs[0], name, sizeof name), (int)g->n_ops,
             (long long)((h.n + piece - 1) / piece), (long long)piece, how, (long long)h.halo);
  }
  loom__free(h.v);
  loom__free(h.varies);
  loom__free(h.split);
  /* a graph that is not such a chain, or fits no piece, leaves the caller's refusal standing */
  return s == LOOM_ERR_OUT_OF_MEMORY ? s : (s ? LOOM_ERR_UNSUPPORTED : LOOM_OK);
}

loom_status loom__chunk_halo(const loom_graph *g, const loom_optimize_options *opts, int64_t limit,
                             int32_t slices, loom_graph **out, char *detail, size_t detail_size) {
  char one[256] = "", groups[256] = "";
  loom_status s = loom__chunk_halo_one(g, opts, limit, slices, false, out, one, sizeof one);
  if (s != LOOM_ERR_UNSUPPORTED) {
    snprintf(detail, detail_size, "%s", one);
    return s;
  }
  s = loom__chunk_halo_groups(g, opts, limit, slices, out, groups, sizeof groups);
  if (s == LOOM_ERR_OUT_OF_MEMORY) return s;
  if (!s || !one[0]) { /* cut, or not a stencil (no reason: the caller's refusal stands) */
    snprintf(detail, detail_size, "%s", s ? "" : groups);
    return s ? LOOM_ERR_UNSUPPORTED : LOOM_OK;
  }
  char name[32], lim[32];
  snprintf(
      detail, detail_size,
      "'%s' is a time-stepped stencil whose halo cut fits no piece under %s: one loop over its %d ops %s; "
      "%s",
      loom__value_label(g, g->outputs[0], name, sizeof name), loom__format_bytes(limit, lim, sizeof lim),
      (int)g->n_ops, one, groups[0] ? groups : "its steps in groups fit no better");
  return LOOM_ERR_UNSUPPORTED;
}
