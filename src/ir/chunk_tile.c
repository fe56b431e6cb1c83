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
 * the longer of its flops at a GEMM rate plus its operands' bytes at a memory rate (a blocked
 * GEMM packs both operands on every call, so a slab of 63 rows repacks the wide operand 33
 * times where one of 512 does so 4 times: syrk at 1/8 of its need ran 1.5x slower in the
 * first), and its operands' and result's bytes at that rate; other ops their bytes at that
 * rate, and each piece a fixed cost. The rates are nominal (the
 * choice depends on their ratio to the per-piece cost, not on the machine's figures): it orders
 * candidates, it does not predict a run (loom_plan_predict does that, with the calibrated model).
 */
#include <stdio.h>
#include <string.h>

#include "ir/passes.h"
#include "ir/rebuild.h"
#include "ir/repiece.h"
#include "ir/view.h"

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
  if (op->kind == LOOM_OP_DOT) {
    double packed =
        loom__dot_is_gemm(g, op) ? value_bytes(g, op->inputs[0]) + value_bytes(g, op->inputs[1]) : 0;
    t = LOOM_MAX(t, dot_time(g, op) + packed / MEMORY_RATE);
  }
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

/* ---- k-blocked tiles ----------------------------------------------------------------------
 *
 * A tile of a product cut as rows outside, columns inside, holds its operands' k extent whole:
 * a block of A's rows and a block of B's columns, each K long. At 1/128 of gemm's need that
 * leaves tiles of 13 x 39, and each piece's GEMM gathers K rows of B's column block (a row a
 * cache and TLB miss: most of the piece's time). Here the inner body's dot gets a loop of its
 * own over k (C_tile = sum over k-blocks of A[i, k] B[k, j], summed into the tile in place):
 * A's row block and B's column block are then passed on to that loop, never held
 * (loom__loop_slice_passed), and a row of tiles of a result streamed out is written tile by
 * tile into the caller's output (loom__loop_result_passed_out), so the tiles can grow (86 x 228
 * at 1/128 of gemm's need); the tile sizes and the k-block (128 to 512: a GEMM's own k-block)
 * are searched by a time that counts the rows the dots gather from slices that are not dense. */

/* Per piece here, only the loop's own cost and a small GEMM's call: with one thread, tiles of
 * 31 x 31 in k-blocks of 512 (17,956 pieces) ran gemm at 1/128 twice as fast as 19 x 40 with k
 * whole (5,616), where the piece cost of the balance above would have kept the latter. */
static const double ROW_COST = 80e-9;       /* s: a row gathered from a slice that is not dense */
static const double TILE_PIECE_COST = 3e-6; /* s */

static double gather_graph_time(const loom_graph *g, const bool *dense);

/* Whether value v of g is dense where it lives: a parameter as `dense` says, else computed. */
static bool value_dense(const loom_graph *g, const bool *dense, int32_t v) {
  return g->values[v].op >= 0 || !dense || dense[g->values[v].result];
}

/* One loop's time: per piece its cost, its body's time and the rows its body's own ops gather
 * from slices that are not dense (a slice passed on to an inner loop is gathered there). */
static double gather_loop_time(const loom_graph *g, const bool *dense, const loom__op *op) {
  const loom__loop *l = op->loop;
  const loom_graph *b = l->body;
  bool inner[64];
  double rows = 0;
  if (b->n_params > 64) return graph_time(g);
  for (int32_t i = 0; i < op->n_inputs; i++) {
    const loom_loop_input *r = &l->rules[i];
    const loom_type *t = &g->values[op->inputs[i]].type, *pt = &b->values[b->params[i]].type;
    bool d = value_dense(g, dense, op->inputs[i]);
    for (int32_t k = 0; r->axis >= 0 && k < r->axis; k++) d &= t->dims[k] == 1;
    inner[i] = d;
    int64_t elems = 0;
    loom_type_elements(pt, &elems);
    if (!d && pt->rank > 0 && pt->dims[pt->rank - 1] > 0 && !loom__value_streamed(b, b->params[i]))
      rows += (double)(elems / pt->dims[pt->rank - 1]);
  }
  double trips = (double)loom__loop_trips(l);
  return trips * (TILE_PIECE_COST + rows * ROW_COST + gather_graph_time(b, inner));
}

static double gather_graph_time(const loom_graph *g, const bool *dense) {
  double t = 0;
  for (int32_t o = 0; o < g->n_ops; o++)
    t += g->ops[o].loop ? gather_loop_time(g, dense, &g->ops[o]) : op_time(g, o);
  return t;
}

/* Whether every result of loop l is its pieces side by side (rows or columns of a result). */
static bool concat_loop(const loom__loop *l) {
  for (int32_t j = 0; j < l->body->n_outputs; j++)
    if (l->combines[j].combine != LOOM_COMBINE_CONCAT) return false;
  return true;
}

/* The one plain 2-D dot of body b whose operands are both parameters, or -1. */
static int32_t tile_dot(const loom_graph *b) {
  int32_t found = -1;
  for (int32_t o = 0; o < b->n_ops; o++) {
    const loom__op *op = &b->ops[o];
    if (op->loop) return -1; /* k is cut already */
    if (op->kind != LOOM_OP_DOT || op->fused || op->attrs.set || op->n_inputs != 2) continue;
    const loom_type *x = &b->values[op->inputs[0]].type, *y = &b->values[op->inputs[1]].type;
    if (x->rank != 2 || y->rank != 2 || x->dims[1] != y->dims[0] || b->values[op->inputs[0]].op >= 0 ||
        b->values[op->inputs[1]].op >= 0 || found >= 0)
      return -1;
    found = o;
  }
  return found;
}

/* body b with its dot d run as a loop over k in pieces of kb, summed (slices as `slices`). */
static loom_status k_looped(const loom_graph *b, int32_t d, int64_t kb, int32_t slices, loom_graph **out) {
  const loom__op *dot = &b->ops[d];
  loom_type xt = b->values[dot->inputs[0]].type, yt = b->values[dot->inputs[1]].type;
  int64_t k = xt.dims[1];
  xt.dims[1] = yt.dims[0] = kb;
  loom_graph *kbody = NULL;
  loom_status s = loom_graph_create("k", &kbody);
  if (s) return s;
  loom_value xa = loom_graph_param(kbody, "a", &xt), yb = loom_graph_param(kbody, "b", &yt);
  loom_value p = loom_dot(kbody, xa, yb);
  s = loom_graph_return(kbody, &p, 1);
  loom__rebuild rb;
  if (!s) s = loom__rebuild_init(&rb, b);
  if (s) {
    loom_graph_destroy(kbody);
    return s;
  }
  for (int32_t o = 0; !s && o < b->n_ops; o++) {
    if (o != d) {
      s = loom__rebuild_copy(&rb, o);
      continue;
    }
    loom_value ins[2] = {loom__rebuild_get(&rb, dot->inputs[0]), loom__rebuild_get(&rb, dot->inputs[1])}, res;
    loom_loop_input rules[2] = {{.axis = 1}, {.axis = 0}};
    loom_loop_output sum = {.combine = LOOM_COMBINE_SUM};
    s = loom_graph_add_loop(rb.dst, k, kb, kbody, ins, rules, 2, &sum, 1, &res);
    if (!s) s = loom_graph_loop_set_slices(rb.dst, rb.dst->n_ops - 1, slices);
    if (!s) loom__rebuild_set(&rb, dot->outputs[0], res);
  }
  if (!s) s = loom__rebuild_finish(&rb, out);
  loom__rebuild_deinit(&rb);
  loom_graph_destroy(kbody);
  return s;
}

/* Loop l (in graph g's copy) retyped for pieces of p, with its body's loops as they are. */
static loom_status set_piece(loom__loop *l, int64_t p) {
  loom_graph *typed = NULL;
  int64_t was = l->piece;
  l->piece = p;
  loom_status s = loom__loop_body_for(l, p, &typed);
  loom_graph *last = NULL;
  if (!s && l->n % p) s = loom__loop_body_for(l, l->n % p, &last);
  loom_graph_destroy(last);
  if (s) {
    l->piece = was;
    return s;
  }
  loom_graph_destroy(l->body);
  l->body = typed;
  return LOOM_OK;
}

/* g with top-level loop o in pieces of ti, its inner loop j in pieces of tj and that loop's
 * dot over k in pieces of kb; NULL (LOOM_OK) where that cannot be built. */
static loom_status k_tiled(const loom_graph *g, int32_t o, int32_t j, int64_t ti, int64_t tj, int64_t kb,
                           loom_graph **out) {
  *out = NULL;
  loom_graph *cand = NULL;
  loom_status s = loom_graph_clone(g, &cand);
  if (s) return s;
  loom__loop *outer = cand->ops[o].loop, *inner = outer->body->ops[j].loop;
  loom_graph *kb_body = NULL;
  /* the inner piece first (its dot's k loop is made at that shape), then the outer */
  bool ok =
      !set_piece(inner, tj) && !k_looped(inner->body, tile_dot(inner->body), kb, inner->slices, &kb_body);
  if (ok) {
    loom_graph_destroy(inner->body);
    inner->body = kb_body;
    ok = !set_piece(inner, tj) && !set_piece(outer, ti);
  }
  if (ok) {
    *out = cand;
    return LOOM_OK;
  }
  loom_graph_destroy(cand);
  return LOOM_OK;
}

/* Pieces worth trying along an axis of n: evened-out pieces about 1.4x apart, from 8 up. */
static int32_t tile_sizes(int64_t n, int64_t *ps, int32_t max) {
  int32_t c = 0;
  for (double t = 8; c < max; t *= 1.41) {
    int64_t q = LOOM_MIN((int64_t)t, n), trips = (n + q - 1) / q, p = (n + trips - 1) / trips;
    if (!c || ps[c - 1] != p) ps[c++] = p;
    if (q == n) break;
  }
  return c;
}

enum { MAX_SIZES = 24, MIN_TILE_PIECES = 128 };

/* g k-tiled at (ti, tj, kb) where it fits the limit (else NULL), with its time. */
static loom_status k_candidate(const loom_graph *g, int32_t o, int32_t j, int64_t ti, int64_t tj, int64_t kb,
                               int64_t limit, loom_graph **out, double *t) {
  loom_status s = k_tiled(g, o, j, ti, tj, kb, out);
  loom_estimate e;
  bool fits = false;
  if (!s && *out && !loom_graph_estimate(*out, NULL, &e)) {
    fits = e.peak_bytes <= limit;
    loom_estimate_deinit(&e);
  }
  if (!fits) {
    loom_graph_destroy(*out);
    *out = NULL;
  }
  *t = fits ? gather_graph_time(*out, NULL) : 0;
  return s;
}

/* The k-blocked tiling of loop o's inner loop j of least time that fits, or NULL: for each
 * k-block and outer piece, the widest inner piece that fits (a bisection: wider needs more). */
static loom_status best_k_tiling(const loom_graph *g, int32_t o, int32_t j, int64_t limit, double *best_t,
                                 loom_graph **best) {
  const loom__loop *outer = g->ops[o].loop, *inner = outer->body->ops[j].loop;
  const loom__op *dot = &inner->body->ops[tile_dot(inner->body)];
  int64_t k = inner->body->values[dot->inputs[0]].type.dims[1];
  int64_t tis[MAX_SIZES], tjs[MAX_SIZES];
  int32_t nti = tile_sizes(outer->n, tis, MAX_SIZES), ntj = tile_sizes(inner->n, tjs, MAX_SIZES);
  loom_status s = LOOM_OK;
  for (int64_t kb0 = 128; !s && kb0 <= 512 && kb0 * 2 <= k; kb0 *= 2) {
    int64_t trips = (k + kb0 - 1) / kb0, kb = (k + trips - 1) / trips;
    for (int32_t a = 0; !s && a < nti; a++) {
      int32_t lo = -1, hi = ntj; /* tjs[lo] fits, tjs[hi] does not */
      loom_graph *fit = NULL;
      double fit_t = 0;
      while (!s && hi - lo > 1) {
        int32_t mid = lo + (hi - lo) / 2;
        loom_graph *cand = NULL;
        double t = 0;
        s = k_candidate(g, o, j, tis[a], tjs[mid], kb, limit, &cand, &t);
        if (cand) {
          loom_graph_destroy(fit);
          fit = cand;
          fit_t = t;
          lo = mid;
        } else {
          hi = mid;
        }
      }
      if (fit && fit_t < *best_t) {
        loom_graph_destroy(*best);
        *best = fit;
        *best_t = fit_t;
      } else {
        loom_graph_destroy(fit);
      }
    }
  }
  return s;
}

/* g's top-level loops whose inner loop holds one plain dot, each with that dot's k cut where
 * that is faster (gather_graph_time); `what` says what changed. */
static loom_status k_tiles(loom_graph **g, int64_t limit, char *what, size_t what_size) {
  loom_status s = LOOM_OK;
  for (int32_t o = 0; !s && o < (*g)->n_ops; o++) {
    const loom__loop *l = (*g)->ops[o].loop;
    if (!l) continue;
    for (int32_t j = 0; !s && j < l->body->n_ops; j++) {
      const loom__loop *in = l->body->ops[j].loop;
      /* a few pieces (an eighth of gemm's need: 52) cost little more than one GEMM: left as
       * they are; from 128 (a 32nd: 221 tiles of 158 x 123 -> 48 of 86 x 1024, whose k loops
       * run as one dot on cpu0) the k-blocked tiles are tried */
      if (!in || !concat_loop(l) || !concat_loop(in) || tile_dot(in->body) < 0 ||
          loom__loop_trips(l) * loom__loop_trips(in) < MIN_TILE_PIECES)
        continue;
      double before = gather_graph_time(*g, NULL), best_t = before;
      loom_graph *best = NULL;
      s = best_k_tiling(*g, o, j, limit, &best_t, &best);
      if (s || !best) continue;
      loom_graph_destroy(*g);
      *g = best;
      const loom__loop *nl = best->ops[o].loop, *ni = nl->body->ops[j].loop;
      const loom__loop *kl = NULL;
      for (int32_t q = 0; q < ni->body->n_ops && !kl; q++) kl = ni->body->ops[q].loop;
      char name[32];
      size_t used = strlen(what);
      snprintf(what + used, what_size - used,
               "%sloop '%s' in tiles of %lld x %lld, k in blocks of %lld (predicted %.3g -> %.3g s)",
               used ? "; " : "", loom__value_label(best, best->ops[o].outputs[0], name, sizeof name),
               (long long)nl->piece, (long long)ni->piece, (long long)(kl ? kl->piece : 0), before, best_t);
      break;
    }
  }
  return s;
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
  if (!s) s = k_tiles(&cur, limit, what, what_size);
  if (s) {
    loom_graph_destroy(cur);
    cur = NULL;
  }
  *out = cur;
  return s;
}
