/* Smaller pieces for the loops of a chunked graph (repiece.h).
 *
 * A loop's body is typed for one piece, and loom__loop_body_for retypes it for any length, so
 * a loop in smaller pieces is the same loop op with the body retyped: operands, slicing rules
 * and combines stay. Chunking the graph again instead would cut inside the loops' bodies,
 * nesting a loop along the axis the outer one already slices, which a loop may not do. */
#include <string.h>

#include "ir/rebuild.h"
#include "ir/repiece.h"
#include "loom/optimize.h"

/* The least piece loop l allows: topk candidates merged across pieces need k per piece. */
static int64_t least_piece(const loom__loop *l) {
  int64_t least = 1;
  for (int32_t j = 0; j < l->body->n_outputs; j++)
    if (l->combines[j].combine == LOOM_COMBINE_TOPK) least = LOOM_MAX(least, l->combines[j].k);
  return LOOM_MIN(least, l->n);
}

/* Whether pieces of p leave a last piece of at least `least` (or none shorter than p). */
static bool tail_ok(int64_t n, int64_t p, int64_t least) {
  return n % p == 0 || n % p >= least;
}

/* Loop l's piece at `scale` (0 < scale <= 1), at least its least, with a last piece that is
 * not shorter than that least either: the nearest such piece below, else above (n always is). */
static int64_t scaled_piece(const loom__loop *l, double scale) {
  int64_t least = least_piece(l);
  int64_t piece = LOOM_MAX(least, LOOM_MIN(l->piece, (int64_t)((double)l->piece * scale)));
  for (int64_t p = piece; p >= least; p--)
    if (tail_ok(l->n, p, least)) return p;
  for (int64_t p = piece + 1; p < l->n; p++)
    if (tail_ok(l->n, p, least)) return p;
  return l->n;
}

/* Loop op o of rb->src again into rb->dst, in pieces of `piece`. */
static loom_status copy_loop(loom__rebuild *rb, int32_t o, int64_t piece) {
  const loom__op *op = &rb->src->ops[o];
  const loom__loop *l = op->loop;
  if (piece == l->piece) return loom__rebuild_copy(rb, o);
  loom_graph *body = NULL;
  loom_value *ins = loom__malloc(sizeof *ins * (size_t)LOOM_MAX(op->n_inputs, 1));
  loom_status s = ins ? loom__loop_body_for(l, piece, &body) : loom__oom("a loop's operands");
  for (int32_t i = 0; !s && i < op->n_inputs; i++) ins[i] = loom__rebuild_get(rb, op->inputs[i]);
  loom_value outs[LOOM_LOOP_MAX_RESULTS];
  if (!s)
    s = loom_graph_add_loop(rb->dst, l->n, piece, body, ins, l->rules, op->n_inputs, l->combines,
                            op->n_outputs, outs);
  if (!s) s = loom_graph_loop_set_slices(rb->dst, rb->dst->n_ops - 1, l->slices);
  for (int32_t k = 0; !s && k < op->n_outputs; k++) loom__rebuild_set(rb, op->outputs[k], outs[k]);
  loom_graph_destroy(body);
  loom__free(ins);
  return s;
}

/* g with its loops in new pieces, and its estimated peak: loop op `which` in pieces of
 * `piece` and every other op as it is, or with which < 0 every loop at `scale`. */
static loom_status repieced(const loom_graph *g, int32_t which, int64_t piece, double scale, loom_graph **out,
                            int64_t *peak) {
  loom__rebuild rb;
  loom_status s = loom__rebuild_init(&rb, g);
  for (int32_t o = 0; !s && o < g->n_ops; o++) {
    const loom__loop *l = g->ops[o].loop;
    if (!l || (which >= 0 && o != which))
      s = loom__rebuild_copy(&rb, o);
    else
      s = copy_loop(&rb, o, which >= 0 ? piece : scaled_piece(l, scale));
  }
  if (!s) s = loom__rebuild_finish(&rb, out);
  loom__rebuild_deinit(&rb);
  loom_estimate e;
  if (!s && !(s = loom_graph_estimate(*out, NULL, &e))) {
    *peak = e.peak_bytes;
    loom_estimate_deinit(&e);
  }
  if (s) {
    loom_graph_destroy(*out);
    *out = NULL;
  }
  return s;
}

static bool has_loop(const loom_graph *g) {
  for (int32_t o = 0; o < g->n_ops; o++)
    if (g->ops[o].loop) return true;
  return false;
}

loom_status loom__loops_fit(const loom_graph *g, int64_t limit, loom_graph **out, int64_t *out_peak) {
  *out = NULL;
  int64_t peak = 0;
  loom_graph *best = NULL;
  loom_status s = repieced(g, -1, 0, 1.0, &best, &peak);
  if (s || peak <= limit || !has_loop(g)) {
    *out = best;
    if (out_peak) *out_peak = peak;
    return s;
  }
  /* Bisect the scale: the peak grows with the pieces. 2^-20 reaches the least piece of any
   * loop under a million pieces; 20 halvings cost 20 rebuilds of a graph the size of g. */
  double lo = 0.0, hi = 1.0;
  int64_t best_peak = peak;
  bool fits = false;
  for (int32_t i = 0; !s && i < 20; i++) {
    double mid = (lo + hi) / 2;
    loom_graph *cand = NULL;
    int64_t p = 0;
    s = repieced(g, -1, 0, mid, &cand, &p);
    if (s) break;
    /* A fit is at a larger scale than the fits before it; until one, keep the closest. */
    if (p <= limit || (!fits && p < best_peak)) {
      fits = p <= limit;
      loom_graph_destroy(best);
      best = cand;
      best_peak = p;
    } else {
      loom_graph_destroy(cand);
    }
    if (p <= limit)
      lo = mid;
    else
      hi = mid;
  }
  if (s) {
    loom_graph_destroy(best);
    return s;
  }
  *out = best;
  if (out_peak) *out_peak = best_peak;
  return LOOM_OK;
}

/* The largest piece in [lo, hi] of loop op `which` of *g with a valid last piece for which the
 * graph's peak stays at most `limit`, bisected (the peak grows with the piece), with *g
 * replaced by the graph at that piece. *g at lo fits already. */
static loom_status grow_loop(loom_graph **g, int32_t which, int64_t limit) {
  const loom__loop *l = (*g)->ops[which].loop;
  int64_t least = least_piece(l), lo = l->piece, hi = l->n;
  loom_status s = LOOM_OK;
  while (!s && lo < hi) {
    int64_t mid = lo + (hi - lo + 1) / 2;
    while (mid > lo && !tail_ok(l->n, mid, least)) mid--;
    if (mid == lo) break;
    loom_graph *cand = NULL;
    int64_t peak = 0;
    s = repieced(*g, which, mid, 1.0, &cand, &peak);
    if (s) break;
    if (peak <= limit) {
      loom_graph_destroy(*g);
      *g = cand;
      l = (*g)->ops[which].loop;
      lo = mid;
    } else {
      loom_graph_destroy(cand);
      hi = mid - 1;
    }
  }
  return s;
}

loom_status loom__loops_grow(const loom_graph *g, int64_t limit,
                             bool (*grows)(const loom__loop *loop, void *arg), void *arg, loom_graph **out) {
  *out = NULL;
  loom_graph *cur = NULL;
  loom_status s = loom_graph_clone(g, &cur);
  /* A rebuild copies op by op, so op o stays op o through the growth of each loop. */
  for (int32_t o = 0; !s && o < g->n_ops; o++)
    if (cur->ops[o].loop && grows(cur->ops[o].loop, arg)) s = grow_loop(&cur, o, limit);
  if (s) {
    loom_graph_destroy(cur);
    return s;
  }
  *out = cur;
  return LOOM_OK;
}

loom_status loom__loop_shrink(const loom_graph *g, int32_t which, int64_t limit, loom_graph **out) {
  *out = NULL;
  const loom__loop *l = g->ops[which].loop;
  int64_t least = least_piece(l), lo = least, hi = l->piece - 1;
  loom_graph *best = NULL;
  loom_status s = LOOM_OK;
  /* The largest piece below the loop's own that fits: bisected, the peak growing with it. */
  while (!s && lo <= hi) {
    int64_t mid = lo + (hi - lo + 1) / 2, p = mid;
    while (p >= lo && !tail_ok(l->n, p, least)) p--;
    if (p < lo) {
      hi = mid - 1;
      continue;
    }
    loom_graph *cand = NULL;
    int64_t peak = 0;
    s = repieced(g, which, p, 1.0, &cand, &peak);
    if (s) break;
    if (peak <= limit) {
      loom_graph_destroy(best);
      best = cand;
      lo = mid + 1;
    } else {
      loom_graph_destroy(cand);
      hi = p - 1;
    }
  }
  if (s) {
    loom_graph_destroy(best);
    return s;
  }
  *out = best;
  return best ? LOOM_OK : LOOM_ERR_UNSUPPORTED;
}

/* *g with the body of its loop op o replaced by `body` (taken over), kept only where the loop
 * can still retype that body for its last piece and the graph's peak stays at most `limit`;
 * true when it was. */
static loom_status try_body(loom_graph **g, int32_t o, loom_graph *body, int64_t limit, bool *taken) {
  *taken = false;
  loom_graph *cand = NULL;
  loom_status s = loom_graph_clone(*g, &cand);
  if (s) {
    loom_graph_destroy(body);
    return s;
  }
  loom__loop *l = cand->ops[o].loop;
  loom_graph_destroy(l->body);
  l->body = body;
  loom_graph *last = NULL;
  loom_estimate e;
  if (loom__loop_body_for(l, l->piece, &last) || loom_graph_estimate(cand, NULL, &e)) {
    loom_graph_destroy(last);
    loom_graph_destroy(cand);
    return LOOM_OK; /* not a body this loop can run: the growth is not taken */
  }
  loom_graph_destroy(last);
  *taken = e.peak_bytes <= limit;
  loom_estimate_deinit(&e);
  if (*taken) {
    loom_graph_destroy(*g);
    *g = cand;
  } else {
    loom_graph_destroy(cand);
  }
  return LOOM_OK;
}

/* Inner loop j of the body of *g's loop op o grown to the largest piece (bisected) for which
 * the whole graph stays within limit. */
static loom_status grow_inner(loom_graph **g, int32_t o, int32_t j, int64_t limit) {
  const loom__loop *in = (*g)->ops[o].loop->body->ops[j].loop;
  int64_t least = least_piece(in), lo = in->piece, hi = in->n, n = in->n;
  loom_status s = LOOM_OK;
  while (!s && lo < hi) {
    int64_t mid = lo + (hi - lo + 1) / 2;
    while (mid > lo && !tail_ok(n, mid, least)) mid--;
    if (mid == lo) break;
    loom_graph *body = NULL;
    int64_t ignored = 0;
    bool taken = false;
    s = repieced((*g)->ops[o].loop->body, j, mid, 1.0, &body, &ignored);
    if (!s) s = try_body(g, o, body, limit, &taken);
    if (taken)
      lo = mid;
    else
      hi = mid - 1;
  }
  return s;
}

loom_status loom__nested_loops_grow(const loom_graph *g, int64_t limit, loom_graph **out) {
  *out = NULL;
  loom_graph *cur = NULL;
  loom_status s = loom_graph_clone(g, &cur);
  for (int32_t o = 0; !s && o < cur->n_ops; o++) {
    if (!cur->ops[o].loop) continue;
    for (int32_t j = 0; !s && j < cur->ops[o].loop->body->n_ops; j++)
      if (cur->ops[o].loop->body->ops[j].loop) s = grow_inner(&cur, o, j, limit);
  }
  if (s) {
    loom_graph_destroy(cur);
    return s;
  }
  *out = cur;
  return LOOM_OK;
}
