/* Tiles of a nested cut in balance (loom__chunk_tiles_balance, passes.h).
 *
 * The chunk rewrite's rounds cut a product whose operands cannot be held whole into a loop of
 * row blocks with an inner loop of column blocks (or k blocks) in each, the outer piece taken
 * as the largest that fits on its own: where the outer body holds a whole row slab of every
 * operand, that leaves thin slabs (13 rows of a 2048-row gemm at 1/128 of its need), each with
 * many narrow inner pieces, and a GEMM of 13 x 27 tiles runs memory-bound, with a fixed cost per
 * piece on top (a library call, its threads woken, the slices placed). Here each top-level loop
 * with loops in its body is tried at longer outer pieces, its inner loops shrunk to their least
 * and grown back into the room the whole graph leaves (loom__nested_loops_grow), and the
 * candidate of least predicted time is kept: near-square tiles, fewer pieces.
 *
 * The predicted time is a roofline per op, summed over the pieces each loop runs: a dot takes
 * the longer of its flops at a GEMM rate and its operands' and result's bytes at a memory rate,
 * other ops their bytes at that rate, and each piece a fixed cost. The rates are nominal (the
 * choice depends on their ratio to the per-piece cost, not on the machine's figures): it orders
 * candidates, it does not predict a run (loom_plan_predict does that, with the calibrated model).
 */
#include <stdio.h>
#include <string.h>

#include "ir/passes.h"
#include "ir/repiece.h"

enum { MAX_TRIES = 12 };

static const double GEMM_RATE = 100e9;  /* flop/s */
static const double MEMORY_RATE = 15e9; /* bytes/s */
static const double PIECE_COST = 30e-6; /* s: measured on cpu0, 2 cores, OpenBLAS with OpenMP */

static double value_bytes(const loom_graph *g, int32_t v) {
  int64_t b = 0;
  loom_type_bytes(&g->values[v].type, &b);
  return (double)b;
}

static double graph_time(const loom_graph *g);

/* A GEMM's rate falls with its shortest sides: its blocking wants 64 rows and columns and a
 * k of 256 (an update of rank 79 to a wide result ran 1.4x slower than one of rank 512). */
static double side(double len, double full) {
  return len >= full ? 1 : len / full;
}

static double dot_time(const loom_graph *g, const loom__op *op) {
  const loom_type *a = &g->values[op->inputs[0]].type, *r = &g->values[op->outputs[0]].type;
  int64_t out = 0;
  loom_type_elements(r, &out);
  double k = (double)(a->rank ? a->dims[a->rank - 1] : 1);
  double m = r->rank >= 2 ? (double)r->dims[r->rank - 2] : 1,
         n = r->rank >= 1 ? (double)r->dims[r->rank - 1] : 1;
  double rate = GEMM_RATE * side(m, 64) * side(n, 64) * side(k, 256);
  return 2.0 * (double)out * k / rate;
}

/* One op's predicted time in g (a loop's: all its pieces). */
static double op_time(const loom_graph *g, int32_t o) {
  const loom__op *op = &g->ops[o];
  if (op->loop) {
    double trips = (double)((op->loop->n + op->loop->piece - 1) / op->loop->piece);
    return trips * (PIECE_COST + graph_time(op->loop->body));
  }
  if (op->fused) return graph_time(op->fused);
  if (loom__op_is_light(op->kind)) return 0;
  double bytes = 0;
  for (int32_t i = 0; i < op->n_inputs; i++) bytes += value_bytes(g, op->inputs[i]);
  for (int32_t k = 0; k < op->n_outputs; k++) bytes += value_bytes(g, op->outputs[k]);
  double t = bytes / MEMORY_RATE;
  if (op->kind == LOOM_OP_DOT) t = LOOM_MAX(t, dot_time(g, op));
  return t;
}

static double graph_time(const loom_graph *g) {
  double t = 0;
  for (int32_t o = 0; o < g->n_ops; o++) t += op_time(g, o);
  return t;
}

/* Whether loop l may run in pieces of p: no merge of topk candidates (whose pieces need k). */
static bool plain_loop(const loom__loop *l) {
  for (int32_t j = 0; j < l->body->n_outputs; j++)
    if (l->combines[j].combine == LOOM_COMBINE_TOPK) return false;
  return true;
}

static bool has_inner_loop(const loom__loop *l) {
  for (int32_t j = 0; j < l->body->n_ops; j++)
    if (l->body->ops[j].loop) return plain_loop(l->body->ops[j].loop);
  return false;
}

/* body with each of its loops in pieces of 1 (what the growth starts from). */
static loom_status inner_least(const loom_graph *body, loom_graph **out) {
  loom__rebuild rb;
  loom_status s = loom__rebuild_init(&rb, body);
  for (int32_t o = 0; !s && o < body->n_ops; o++) {
    const loom__op *op = &body->ops[o];
    if (!op->loop) {
      s = loom__rebuild_copy(&rb, o);
      continue;
    }
    const loom__loop *l = op->loop;
    loom_graph *b = NULL;
    loom_value ins[64], outs[LOOM_LOOP_MAX_RESULTS];
    if (op->n_inputs > 64) s = LOOM_ERR_UNSUPPORTED;
    if (!s) s = loom__loop_body_for(l, 1, &b);
    for (int32_t i = 0; !s && i < op->n_inputs; i++) ins[i] = loom__rebuild_get(&rb, op->inputs[i]);
    if (!s)
      s = loom_graph_add_loop(rb.dst, l->n, 1, b, ins, l->rules, op->n_inputs, l->combines, op->n_outputs,
                              outs);
    if (!s) s = loom_graph_loop_set_slices(rb.dst, rb.dst->n_ops - 1, l->slices);
    for (int32_t k = 0; !s && k < op->n_outputs; k++) loom__rebuild_set(&rb, op->outputs[k], outs[k]);
    loom_graph_destroy(b);
  }
  if (!s) s = loom__rebuild_finish(&rb, out);
  loom__rebuild_deinit(&rb);
  return s;
}

/* g with loop op o in pieces of p, its inner loops grown into the room left; NULL (LOOM_OK)
 * where that does not fit the limit or the loop cannot run so. */
static loom_status at_piece(const loom_graph *g, int32_t o, int64_t p, int64_t limit, loom_graph **out) {
  *out = NULL;
  loom_graph *typed = NULL, *least = NULL, *cand = NULL, *last = NULL;
  const loom__loop *l = g->ops[o].loop;
  if (loom__loop_body_for(l, p, &typed) || inner_least(typed, &least)) {
    loom_graph_destroy(typed);
    return LOOM_OK; /* a body this loop cannot take at p: not a candidate */
  }
  loom_graph_destroy(typed);
  loom_status s = loom_graph_clone(g, &cand);
  if (s) {
    loom_graph_destroy(least);
    return s;
  }
  loom__loop *cl = cand->ops[o].loop;
  loom_graph_destroy(cl->body);
  cl->body = least;
  cl->piece = p;
  loom_estimate e;
  bool fits = false;
  if (!loom__loop_body_for(cl, cl->n % p ? cl->n % p : p, &last) && !loom_graph_estimate(cand, NULL, &e)) {
    fits = e.peak_bytes <= limit;
    loom_estimate_deinit(&e);
  }
  loom_graph_destroy(last);
  if (fits) s = loom__nested_loops_grow(cand, limit, out);
  loom_graph_destroy(cand);
  return s;
}

/* The outer pieces worth trying above l's: doublings, each evened out (the same trips, the
 * last piece as long as the others where it can be). */
static int32_t outer_pieces(const loom__loop *l, int64_t *ps) {
  int32_t n = 0;
  for (int64_t p = l->piece * 2; n < MAX_TRIES; p *= 2) {
    int64_t q = LOOM_MIN(p, l->n), trips = (l->n + q - 1) / q;
    ps[n++] = (l->n + trips - 1) / trips;
    if (q == l->n) break;
  }
  return n;
}

double loom__chunk_predicted_time(const loom_graph *g) {
  return graph_time(g);
}

loom_status loom__chunk_tiles_balance(const loom_graph *g, int64_t limit, loom_graph **out, char *what,
                                      size_t what_size) {
  what[0] = '\0';
  loom_graph *cur = NULL;
  loom_status s = loom_graph_clone(g, &cur);
  for (int32_t o = 0; !s && o < cur->n_ops; o++) {
    const loom__loop *l = cur->ops[o].loop;
    if (!l || !plain_loop(l) || !has_inner_loop(l)) continue;
    double best_t = graph_time(cur), start_t = best_t;
    int64_t ps[MAX_TRIES], from = l->piece, to = l->piece;
    int32_t n = outer_pieces(l, ps);
    loom_graph *best = NULL;
    for (int32_t i = 0; !s && i < n; i++) {
      loom_graph *cand = NULL;
      s = at_piece(cur, o, ps[i], limit, &cand);
      if (s || !cand) break; /* longer pieces need more */
      double t = graph_time(cand);
      if (t < best_t) {
        loom_graph_destroy(best);
        best = cand;
        best_t = t;
        to = ps[i];
      } else {
        loom_graph_destroy(cand);
      }
    }
    if (!best) continue;
    loom_graph_destroy(cur);
    cur = best;
    char name[32];
    size_t used = strlen(what);
    snprintf(
        what + used, what_size - used,
        "%sloop '%s' in pieces of %lld instead of %lld, its inner loops regrown (predicted %.3g -> %.3g s)",
        used ? "; " : "", loom__value_label(cur, cur->ops[o].outputs[0], name, sizeof name), (long long)to,
        (long long)from, start_t, best_t);
  }
  if (s) {
    loom_graph_destroy(cur);
    cur = NULL;
  }
  *out = cur;
  return s;
}
