/* Reorder (IR.md "Rewrites"): associative and commutative forms re-associated where it lowers
 * the peak memory or the work.
 *
 *   dot_chain      a tree of dots over 2-D matrices (and a row vector first or a column vector
 *                  last) whose inner products have no other reader, re-associated in
 *                  matrix-chain order: (A.B).v -> A.(B.v)
 *   sum_broadcast  a tree of adds whose inner sums have no other reader, re-associated so
 *                  that the operands broadcast over the fewest elements are added first:
 *                  (x[:,None] + y[None,:]) + s -> (x[:,None] + s) + y[None,:]
 *
 * Both are run by the driver of pattern.c, and an application is kept only when the graph's
 * estimated peak goes down, or stays equal with fewer flops (dot_chain) or fewer bytes
 * materialized (sum_broadcast). Float sums and products are reassociated, which IR.md's
 * tolerance allows; integer ones are exact (wrap-around is associative).
 */
#include <stdio.h>
#include <string.h>

#include "ir/pattern.h"

/* ---- dot_chain --------------------------------------------------------------------------- */

#define CHAIN_MAX 48

typedef struct chain_tree {
  uint8_t split[CHAIN_MAX][CHAIN_MAX];    /* node (i,j) = (i..k)(k+1..j), k = split[i][j] */
  bool right_first[CHAIN_MAX][CHAIN_MAX]; /* evaluate (k+1..j) before (i..k) */
} chain_tree;

typedef struct chain_cost {
  double flops, peak; /* see combine() */
  bool right_first;
} chain_cost;

typedef struct chain_match {
  int32_t root;
  int32_t n;                 /* leaves */
  int32_t leaves[CHAIN_MAX]; /* value ids, in order */
  double p[CHAIN_MAX + 1];   /* leaf i is p[i] x p[i+1] (a vector's missing side is 1) */
  double flops_old, flops_new;
  double peak_old, peak_new; /* the chain's own largest working set, elements */
  chain_tree old_tree, new_tree;
  chain_cost best[CHAIN_MAX][CHAIN_MAX]; /* the dynamic programme's table */
} chain_match;

/* A dot the chain may hold: 1-D or 2-D operands, no batch. */
static bool plain_dot(const loom_graph *g, const loom__op *op) {
  if (!op || op->kind != LOOM_OP_DOT) return false;
  int32_t ra = g->values[op->inputs[0]].type.rank, rb = g->values[op->inputs[1]].type.rank;
  return ra >= 1 && ra <= 2 && rb >= 1 && rb <= 2;
}

/* A dot result read only by one plain dot: an inner node of a chain. */
static bool inner_dot(const loom__match_ctx *m, int32_t v) {
  const loom__op *op = loom__producer(m->g, v);
  if (!plain_dot(m->g, op) || !loom__single_use(m, v)) return false;
  int32_t reader = m->first_reader[v];
  return reader >= 0 && plain_dot(m->g, &m->g->ops[reader]);
}

/* Collects the leaves under value v in order, recording the original tree. Returns the
 * index range [*lo, *hi] of the leaves of v; false when the chain is too long. */
static bool collect_chain(const loom__match_ctx *m, int32_t v, int32_t depth, chain_match *c, int32_t *lo,
                          int32_t *hi) {
  if (depth >= CHAIN_MAX) return false; /* a tree this deep has too many leaves anyway */
  if (depth > 0 && !inner_dot(m, v)) {
    if (c->n >= CHAIN_MAX) return false;
    *lo = *hi = c->n;
    c->leaves[c->n++] = v;
    return true;
  }
  const loom__op *op = loom__producer(m->g, v);
  int32_t l0, l1, r0, r1;
  if (!collect_chain(m, op->inputs[0], depth + 1, c, &l0, &l1) ||
      !collect_chain(m, op->inputs[1], depth + 1, c, &r0, &r1))
    return false;
  c->old_tree.split[l0][r1] = (uint8_t)l1;
  c->old_tree.right_first[l0][r1] = false;
  *lo = l0;
  *hi = r1;
  return true;
}

/* The dims p of the leaves: 1-D leaves only first (a row) or last (a column). */
static bool chain_dims(const loom_graph *g, chain_match *c) {
  for (int32_t i = 0; i < c->n; i++) {
    const loom_type *t = &g->values[c->leaves[i]].type;
    double rows, cols;
    if (t->rank == 2) {
      rows = (double)t->dims[0];
      cols = (double)t->dims[1];
    } else if (i == 0) {
      rows = 1;
      cols = (double)t->dims[0];
    } else if (i == c->n - 1) {
      rows = (double)t->dims[0];
      cols = 1;
    } else {
      return false;
    }
    if (i > 0 && c->p[i] != rows) return false;
    c->p[i] = rows;
    c->p[i + 1] = cols;
  }
  return true;
}

/* Costs of the node (i,j) split at k, from the costs of its parts: flops, and the chain's
 * largest working set (elements) with the left part held while the right one is computed or
 * the other way round, whichever is lower. Leaves are the chain's inputs: held already. */
static double held(const chain_match *c, int32_t i, int32_t j) {
  return i == j ? 0 : c->p[i] * c->p[j + 1];
}

static chain_cost combine(const chain_match *c, int32_t i, int32_t k, int32_t j, chain_cost l, chain_cost r) {
  double out = c->p[i] * c->p[j + 1];
  double hl = held(c, i, k), hr = held(c, k + 1, j);
  double last = hl + hr + 2 * out; /* dot: its output and as much again of temporaries */
  double left_first = LOOM_MAX(LOOM_MAX(l.peak, hl + r.peak), last);
  double right_first = LOOM_MAX(LOOM_MAX(r.peak, hr + l.peak), last);
  chain_cost x = {l.flops + r.flops + c->p[i] * c->p[k + 1] * c->p[j + 1], LOOM_MIN(left_first, right_first),
                  right_first < left_first};
  return x;
}

/* a better than b: by flops then peak (by_peak false), or peak then flops. */
static bool better(chain_cost a, chain_cost b, bool by_peak) {
  if (by_peak) return a.peak < b.peak || (a.peak == b.peak && a.flops < b.flops);
  return a.flops < b.flops || (a.flops == b.flops && a.peak < b.peak);
}

/* Matrix-chain dynamic programming over the interval lengths. */
static chain_cost chain_dp(const chain_match *c, bool by_peak, chain_tree *tree,
                           chain_cost (*best)[CHAIN_MAX]) {
  for (int32_t i = 0; i < c->n; i++) best[i][i] = (chain_cost){0, 0, false};
  for (int32_t len = 2; len <= c->n; len++)
    for (int32_t i = 0; i + len - 1 < c->n; i++) {
      int32_t j = i + len - 1;
      for (int32_t k = i; k < j; k++) {
        chain_cost x = combine(c, i, k, j, best[i][k], best[k + 1][j]);
        if (k == i || better(x, best[i][j], by_peak)) {
          best[i][j] = x;
          tree->split[i][j] = (uint8_t)k;
          tree->right_first[i][j] = x.right_first;
        }
      }
    }
  return best[0][c->n - 1];
}

/* The costs of an existing tree. */
static chain_cost tree_cost(const chain_match *c, const chain_tree *t, int32_t i, int32_t j) {
  if (i == j) return (chain_cost){0, 0, false};
  int32_t k = t->split[i][j];
  return combine(c, i, k, j, tree_cost(c, t, i, k), tree_cost(c, t, k + 1, j));
}

static bool same_tree(const chain_tree *a, const chain_tree *b, int32_t i, int32_t j) {
  if (i == j) return true;
  int32_t k = a->split[i][j];
  return k == b->split[i][j] && same_tree(a, b, i, k) && same_tree(a, b, k + 1, j);
}

/* Writes the tree as "A.(B.v)" with leaf names. */
static size_t format_tree(const loom_graph *g, const chain_match *c, const chain_tree *t, int32_t i,
                          int32_t j, char *buf, size_t size, size_t len) {
  if (len >= size) return len;
  if (i == j) {
    char label[32];
    return len + (size_t)snprintf(buf + len, size - len, "%s",
                                  loom__value_label(g, c->leaves[i], label, sizeof label));
  }
  int32_t k = t->split[i][j];
  bool top = i == 0 && j == c->n - 1;
  if (!top) len += (size_t)snprintf(buf + len, size - len, "(");
  len = format_tree(g, c, t, i, k, buf, size, len);
  if (len < size) len += (size_t)snprintf(buf + len, size - len, ".");
  len = format_tree(g, c, t, k + 1, j, buf, size, len);
  if (!top && len < size) len += (size_t)snprintf(buf + len, size - len, ")");
  return len;
}

static bool chain_find(const loom__match_ctx *m, int32_t o, int32_t variant, void *mv, char *detail,
                       size_t size) {
  const loom_graph *g = m->g;
  chain_match *c = mv;
  if (variant > 1 || !plain_dot(g, &g->ops[o]) || inner_dot(m, g->ops[o].outputs[0])) return false;
  memset(c, 0, sizeof *c); /* find_clears: only for the ops that root a chain */
  int32_t lo, hi;
  c->root = o;
  if (!collect_chain(m, g->ops[o].outputs[0], 0, c, &lo, &hi) || c->n < 3 || !chain_dims(g, c)) return false;
  chain_tree other;
  chain_cost old = tree_cost(c, &c->old_tree, 0, c->n - 1);
  chain_cost mine = chain_dp(c, variant == 1, &c->new_tree, c->best);
  if (same_tree(&c->new_tree, &c->old_tree, 0, c->n - 1)) return false;
  if (variant == 1) { /* only when it differs from variant 0 */
    chain_dp(c, false, &other, c->best);
    if (same_tree(&c->new_tree, &other, 0, c->n - 1)) return false;
  }
  c->flops_old = old.flops;
  c->flops_new = mine.flops;
  c->peak_old = old.peak;
  c->peak_new = mine.peak;
  char was[96], now[96], r[96];
  format_tree(g, c, &c->old_tree, 0, c->n - 1, was, sizeof was, 0);
  format_tree(g, c, &c->new_tree, 0, c->n - 1, now, sizeof now, 0);
  snprintf(
      detail, size, "%s = %s -> %s (%s order): %.4g -> %.4g flops, largest working set %.4g -> %.4g elements",
      loom__describe(g, g->ops[o].outputs[0], r, sizeof r), was, now,
      variant == 1 ? "least-memory" : "matrix-chain", 2 * old.flops, 2 * mine.flops, old.peak, mine.peak);
  return true;
}

static bool chain_keep(const void *mv, int64_t before, int64_t after) {
  const chain_match *c = mv;
  return after < before || (after == before && c->flops_new < c->flops_old);
}

static loom_value chain_build(loom__rebuild *rb, const chain_match *c, int32_t i, int32_t j) {
  if (i == j) return loom__rebuild_get(rb, c->leaves[i]);
  int32_t k = c->new_tree.split[i][j];
  loom_value l, r;
  if (c->new_tree.right_first[i][j]) {
    r = chain_build(rb, c, k + 1, j);
    l = chain_build(rb, c, i, k);
  } else {
    l = chain_build(rb, c, i, k);
    r = chain_build(rb, c, k + 1, j);
  }
  return loom_dot(rb->dst, l, r);
}

static loom_status chain_emit(loom__rebuild *rb, const void *mv) {
  const chain_match *c = mv;
  int32_t out = rb->src->ops[c->root].outputs[0];
  loom_value v = chain_build(rb, c, 0, c->n - 1);
  const loom_type *t = loom_value_type(rb->dst, v);
  if (t && !loom_type_equal(t, &rb->src->values[out].type))
    return loom__error(LOOM_ERR_INTERNAL, "dot_chain: the reordered chain changed the result type");
  loom__rebuild_set(rb, out, v);
  return loom__dst_status(rb);
}

/* ---- sum_broadcast ----------------------------------------------------------------------- */

#define SUM_MAX 32

typedef struct sum_match {
  int32_t root;
  int32_t n;
  int32_t leaves[SUM_MAX];   /* operands, explicit broadcasts stripped */
  int32_t steps[SUM_MAX][2]; /* add terms a and b; term n + s is step s's sum */
  int32_t rank;
  int64_t shape[SUM_MAX * 2][LOOM_MAX_RANK]; /* each term's shape, right-aligned to rank */
  double bytes_old, bytes_new;               /* bytes the adds materialize */
} sum_match;

static bool inner_add(const loom__match_ctx *m, int32_t v) {
  const loom__op *op = loom__producer(m->g, v);
  if (!op || op->kind != LOOM_OP_ADD || !loom__single_use(m, v)) return false;
  int32_t reader = m->first_reader[v];
  return reader >= 0 && m->g->ops[reader].kind == LOOM_OP_ADD;
}

static double type_bytes(const loom_type *t) {
  int64_t b = 0;
  loom_type_bytes(t, &b);
  return (double)b;
}

static bool collect_sum(const loom__match_ctx *m, int32_t v, int32_t depth, sum_match *s) {
  const loom_graph *g = m->g;
  if (depth >= SUM_MAX) return false; /* a tree this deep has too many leaves anyway */
  if (depth > 0 && !inner_add(m, v)) {
    if (s->n >= SUM_MAX) return false;
    while (loom__producer_is(g, v, LOOM_OP_BROADCAST)) v = loom__producer(g, v)->inputs[0];
    s->leaves[s->n++] = v;
    return true;
  }
  s->bytes_old += type_bytes(&g->values[v].type);
  const loom__op *op = loom__producer(g, v);
  return collect_sum(m, op->inputs[0], depth + 1, s) && collect_sum(m, op->inputs[1], depth + 1, s);
}

static double shape_elements(const int64_t *dims, int32_t rank) {
  double n = 1;
  for (int32_t i = 0; i < rank; i++) n *= (double)dims[i];
  return n;
}

static void union_shape(const int64_t *a, const int64_t *b, int32_t rank, int64_t *out) {
  for (int32_t i = 0; i < rank; i++) out[i] = a[i] != 1 ? a[i] : b[i];
}

/* Greedy: add the two terms whose sum has the fewest elements, until one is left. */
static void sum_order(sum_match *s, double dsize) {
  bool alive[SUM_MAX * 2] = {false};
  for (int32_t i = 0; i < s->n; i++) alive[i] = true;
  for (int32_t step = 0; step < s->n - 1; step++) {
    int32_t ba = -1, bb = -1;
    double best = 0;
    for (int32_t a = 0; a < s->n + step; a++)
      for (int32_t b = a + 1; alive[a] && b < s->n + step; b++) {
        if (!alive[b]) continue;
        int64_t u[LOOM_MAX_RANK];
        union_shape(s->shape[a], s->shape[b], s->rank, u);
        double e = shape_elements(u, s->rank);
        if (ba < 0 || e < best) {
          ba = a;
          bb = b;
          best = e;
        }
      }
    int32_t t = s->n + step;
    union_shape(s->shape[ba], s->shape[bb], s->rank, s->shape[t]);
    alive[ba] = alive[bb] = false;
    alive[t] = true;
    s->steps[step][0] = ba;
    s->steps[step][1] = bb;
    s->bytes_new += best * dsize;
  }
}

static bool sum_find(const loom__match_ctx *m, int32_t o, int32_t variant, void *mv, char *detail,
                     size_t size) {
  const loom_graph *g = m->g;
  sum_match *s = mv;
  const loom__op *op = &g->ops[o];
  if (variant > 0 || op->kind != LOOM_OP_ADD || inner_add(m, op->outputs[0])) return false;
  memset(s, 0, sizeof *s); /* find_clears */
  const loom_type *out = &g->values[op->outputs[0]].type;
  s->root = o;
  s->rank = out->rank;
  if (!collect_sum(m, op->outputs[0], 0, s) || s->n < 3) return false;
  for (int32_t i = 0; i < s->n; i++) {
    const loom_type *t = &g->values[s->leaves[i]].type;
    int32_t shift = out->rank - t->rank;
    for (int32_t k = 0; k < out->rank; k++) s->shape[i][k] = k < shift ? 1 : t->dims[k - shift];
  }
  sum_order(s, (double)loom_dtype_size(out->dtype));
  if (s->bytes_new >= s->bytes_old) return false;
  char r[96];
  snprintf(detail, size,
           "%s = sum of %d broadcast operands re-associated, the smallest added first: "
           "%.4g -> %.4g bytes materialized",
           loom__describe(g, op->outputs[0], r, sizeof r), (int)s->n, s->bytes_old, s->bytes_new);
  return true;
}

static bool sum_keep(const void *mv, int64_t before, int64_t after) {
  const sum_match *s = mv;
  return after < before || (after == before && s->bytes_new < s->bytes_old);
}

static loom_status sum_emit(loom__rebuild *rb, const void *mv) {
  const sum_match *s = mv;
  const loom_type *out = &rb->src->values[rb->src->ops[s->root].outputs[0]].type;
  loom_value terms[SUM_MAX * 2];
  for (int32_t i = 0; i < s->n; i++) terms[i] = loom__rebuild_get(rb, s->leaves[i]);
  for (int32_t step = 0; step < s->n - 1; step++)
    terms[s->n + step] =
        loom_binary(rb->dst, LOOM_OP_ADD, terms[s->steps[step][0]], terms[s->steps[step][1]]);
  loom_value v = terms[2 * s->n - 2];
  const loom_type *t = loom_value_type(rb->dst, v);
  /* Every operand was broadcast along some axis: the sum is too, as a view. */
  if (t && !loom_type_equal(t, out)) v = loom_broadcast(rb->dst, v, out->rank, out->dims);
  loom__rebuild_set(rb, rb->src->ops[s->root].outputs[0], v);
  return loom__dst_status(rb);
}

/* ---- the pass ---------------------------------------------------------------------------- */

static const loom__rule reorder_rules[] = {
    {"dot_chain", sizeof(chain_match), chain_find, chain_emit, chain_keep, true},
    {"sum_broadcast", sizeof(sum_match), sum_find, sum_emit, sum_keep, true},
};

loom_status loom__rewrite_reorder(const loom_graph *g, const loom_optimize_options *opts, loom_graph **out,
                                  loom_rewrite_report *report) {
  return loom__rules_run(g, reorder_rules, LOOM_ARRAY_SIZE(reorder_rules), opts, out, report);
}
