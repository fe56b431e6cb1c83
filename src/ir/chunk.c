/* Chunking (IR.md, "Rewrites: chunk"): a graph whose estimated peak passes the limit is
 * rewritten so the ops around its peak run in pieces along one axis.
 *
 * A chunk is cut at a *sink*: an op at or after the peak whose results are small. Walking
 * back from the sink, every op whose result can be computed piece by piece along the cut
 * axis joins the *region* (elementwise ops, views, reductions over other axes, dot rows or
 * columns, ...). Values the region reads from outside are computed once, whole, and each
 * piece reads a slice of them (a view: no copy), or the whole value where it does not vary
 * along the axis. Two modes:
 *   parallel  the axis is an axis of the sink's result: pieces are concatenated;
 *   reduced   the axis is one the sink reduces (reduce_sum/prod/max/min/mean): the pieces'
 *             partial reductions are combined as they come (add, mul, maximum, minimum).
 * A conv cut along a spatial axis of its output reads its x through a window: each piece the
 * rows of its receptive fields, overlapping the next piece's by the kernel's halo, with the
 * conv's padding read as zeros past x's ends (docs/ir-loops.md "Windows"); x's producer is
 * not cut with it, since a window is not a piece of it.
 * A value the region computes may also be read by another op that can itself be cut the same
 * way (two reductions of one intermediate, two heads of one score matrix): that op joins the
 * region as a further sink, so each piece is computed once and read by every sink, and no
 * whole copy of the value is ever made.
 * The region becomes one loop op (docs/ir-loops.md) whose body is the region for one piece:
 * values read from outside are its operands, sliced along their axis or passed whole (a graph
 * input read only that way is streamed, never held whole); parallel results are written in
 * place into their slots, reduced ones combined as the pieces come (topk and argmax/argmin
 * merged by candidates). The graph's size and the time to make it do not depend on the number
 * of pieces. The piece size is the largest for which the estimator says the rewritten graph
 * fits, so the promise is checked by the same model the executor's meter follows.
 */
#include <stdatomic.h>
#include <string.h>

#include "ir/chunk_halo.h"
#include "ir/chunk_region.h"
#include "ir/passes.h"
#include "ir/repiece.h"
#include "ir/view.h"

/* ---- choosing the cut ----------------------------------------------------------------- */

static loom_status peak_of(const loom_graph *g, int64_t *out) {
  loom_estimate e;
  loom_status s = loom_graph_estimate(g, NULL, &e);
  *out = e.peak_bytes;
  loom_estimate_deinit(&e);
  return s;
}

static bool tail_ok(const region *r, int64_t c);

/* c, or the nearest shorter piece whose last piece is long enough (a topk merged across
 * pieces needs k in each). */
static int64_t valid_piece(const region *r, int64_t c) {
  for (int64_t d = c; d >= r->min_piece; d--)
    if (tail_ok(r, d) && !(r->even_pieces && d % 2)) return d;
  for (int64_t d = c + 1; d < r->extent; d++) /* 11 in pieces of 5 for a top 5: pieces of 6 */
    if (tail_ok(r, d) && !(r->even_pieces && d % 2)) return d;
  return -1; /* none: 3 in pieces for a top 2 */
}

/* `outer` with the body of loop op o replaced by `body` (taken over). */
static loom_status with_body(const loom_graph *outer, int32_t o, loom_graph *body, loom_graph **out) {
  loom_status s = loom_graph_clone(outer, out);
  if (s) {
    loom_graph_destroy(body);
    return s;
  }
  loom__loop *l = (*out)->ops[o].loop;
  loom_graph_destroy(l->body);
  l->body = body;
  /* A cut inside the body must leave a body the loop can retype for its last piece: an inner
   * loop slicing the outer piece along the outer loop's own axis cannot be (docs/ir-loops.md),
   * and the retype is what finds it. */
  loom_graph *retyped = NULL;
  if (loom__loop_body_for(l, l->piece, &retyped)) {
    loom_graph_destroy(*out);
    *out = NULL;
    return LOOM_ERR_UNSUPPORTED;
  }
  loom_graph_destroy(retyped);
  return LOOM_OK;
}

/* The graph to measure for pieces of c: the region looped, put back into its outer graph when
 * it lies in a loop's body. */
static loom_status emit_candidate(const region *r, int64_t c, loom_graph **out) {
  loom_graph *looped = NULL;
  loom_status s = loom__chunk_emit_loop(r, c, &looped);
  if (s || !r->outer) {
    *out = looped;
    return s;
  }
  return with_body(r->outer, r->outer_op, looped, out);
}

/* The estimated peak of the graph with the region looped in pieces of c. */
static loom_status loop_peak(const region *r, int64_t c, loom_graph **keep, int64_t *peak) {
  c = valid_piece(r, c);
  if (c < 0) return LOOM_ERR_UNSUPPORTED;
  loom_graph *cand = NULL;
  loom_status s = emit_candidate(r, c, &cand);
  if (!s) s = peak_of(cand, peak);
  if (!s && keep)
    *keep = cand;
  else
    loom_graph_destroy(cand);
  return s;
}

/* The estimated peak of the new loop's own step in the graph looped in pieces of c (the
 * other steps may still pass the limit: later rounds cut them). */
static loom_status loop_step_peak(const region *r, int64_t c, int64_t *peak) {
  c = valid_piece(r, c);
  if (c < 0) return LOOM_ERR_UNSUPPORTED;
  loom_graph *cand = NULL;
  loom_status s = emit_candidate(r, c, &cand);
  loom_estimate e;
  if (!s) s = loom_graph_estimate(cand, NULL, &e);
  *peak = 0;
  for (int32_t p = 0; !s && p < e.n_steps; p++) {
    const loom__op *op = &cand->ops[e.steps[p].op];
    /* the loop this cut made: over the region's extent in pieces of c (an older loop that
     * looks the same only makes the figure more careful), or the loop whose body holds it */
    bool mine = r->outer ? e.steps[p].op == r->outer_op
                         : op->loop && op->loop->n == r->extent && op->loop->piece == c;
    if (mine) *peak = LOOM_MAX(*peak, e.steps[p].peak);
  }
  if (!s) loom_estimate_deinit(&e);
  loom_graph_destroy(cand);
  return s;
}

/* What the search for a cut has found: `least` is the smallest need it saw over the limit,
 * for the refusal's message. */
typedef struct chunk_search {
  int64_t limit;
  int32_t slices; /* of every loop it makes (loom_optimize_options.slices) */
  int64_t least;
  /* A cut that does not fit alone but lowers the graph's peak (below `current`): taken when
   * no cut fits, so a later round can cut what is left (two inputs each larger than the
   * limit, read by two ops: each is streamed by a loop of its own). */
  int64_t current;
  loom_graph *fallback;
  int64_t fallback_peak, fallback_c;
  int64_t fallback_held; /* its physical bytes: of two that lower the peak as far, the one holding less */
  bool fallback_new;     /* best_piece just set it: try_cut writes its detail */
  char fallback_detail[256];
  /* The cut found has an inner loop in its body (nested_fit): what that inner cut is. */
  char nested_detail[200];
} chunk_search;

/* Whether a last piece of c is allowed: a topk merged across pieces needs pieces of k. */
static bool tail_ok(const region *r, int64_t c) {
  int64_t tail = r->extent % c;
  return tail == 0 || tail >= r->min_piece;
}

/* The smallest piece does not fit, but the cut lowers the graph's peak to `low`: keeps it as
 * the round's fallback when it lowers it most, with the largest piece that stays within a
 * quarter of the limit above `low` (later rounds cut the rest in what is left). Of two that
 * lower it as far (another op's step is the peak either way), the one whose graph holds fewer
 * bytes: a conv and the relu after it cut together never hold the conv's result whole, the
 * conv cut alone does. Returns UNSUPPORTED: no cut that fits. */
static loom_status lowers_peak(region *r, chunk_search *cs, int64_t lo, int64_t low) {
  if (low >= cs->current || (cs->fallback && low > cs->fallback_peak)) return LOOM_ERR_UNSUPPORTED;
  int64_t fits = lo, fails = r->extent, peak;
  while (fails - fits > 1) {
    int64_t c = fits + (fails - fits) / 2;
    loom_status s = loop_step_peak(r, c, &peak);
    if (s) return s;
    if (peak <= cs->limit)
      fits = c;
    else
      fails = c;
  }
  int64_t trips = (r->extent + fits - 1) / fits, even = (r->extent + trips - 1) / trips;
  fits = valid_piece(r, tail_ok(r, even) ? even : fits);
  if (fits < 0) return LOOM_ERR_UNSUPPORTED;
  loom_graph *cand = NULL;
  loom_status s = loop_peak(r, fits, &cand, &peak);
  if (s) return s;
  loom_estimate e;
  int64_t held = INT64_MAX;
  if (peak < cs->current && !(s = loom_graph_estimate(cand, NULL, &e))) {
    held = e.physical_bytes;
    loom_estimate_deinit(&e);
  }
  if (s || peak >= cs->current || (cs->fallback && low == cs->fallback_peak && held >= cs->fallback_held)) {
    loom_graph_destroy(cand);
    return s ? s : LOOM_ERR_UNSUPPORTED;
  }
  loom_graph_destroy(cs->fallback);
  cs->fallback = cand;
  cs->fallback_held = held;
  cs->fallback_peak = low;
  cs->fallback_c = fits;
  cs->fallback_new = true;
  return LOOM_ERR_UNSUPPORTED;
}

static loom_status nested_round(const loom_graph *g, int32_t o, chunk_search *cs, loom_graph **out,
                                char *detail, size_t detail_size);

/* The region's loop at pieces of c, then a region of its body cut into an inner loop so the
 * whole fits (an input the outer loop passes whole streamed by the inner one): *out is that
 * graph, or NULL with UNSUPPORTED when no inner cut fits. */
static loom_status nested_try(const region *r, int64_t c, int64_t limit, loom_graph **out, char *detail,
                              size_t detail_size) {
  *out = NULL;
  c = valid_piece(r, c);
  if (c < 0) return LOOM_ERR_UNSUPPORTED;
  loom_graph *cand = NULL;
  loom_status s = loom__chunk_emit_loop(r, c, &cand);
  if (s) return s;
  int32_t o = -1;
  for (int32_t i = 0; i < cand->n_ops; i++)
    if (cand->ops[i].loop && cand->ops[i].loop->n == r->extent && cand->ops[i].loop->piece == c) o = i;
  int64_t peak = 0;
  if (o >= 0 && !(s = peak_of(cand, &peak))) {
    chunk_search inner = {.limit = limit, .slices = r->slices, .least = INT64_MAX, .current = peak};
    s = nested_round(cand, o, &inner, out, detail, detail_size);
    loom_graph_destroy(inner.fallback);
  }
  loom_graph_destroy(cand);
  if (o < 0) return LOOM_ERR_UNSUPPORTED;
  return s;
}

/* ceil(n / d) for n >= 0, d >= 1, without the overflow of n + d - 1: the trips of pieces of d,
 * or the piece of d even trips. */
static int64_t split_trips(int64_t n, int64_t d) {
  return n / d + (n % d != 0);
}

/* The trip count after t (< n) in nested_fit's search: a quarter more (at least one more), n at
 * most, so pieces of 1 are reached (their trip, n, ends the search: its piece is the least). */
static int64_t more_trips(int64_t t, int64_t n) {
  int64_t step = LOOM_MAX(1, t / 4);
  return t >= n - step ? n : t + step;
}

/* When even the smallest piece does not fit because the body reads an input whole: the largest
 * outer piece for which an inner cut of the body fits (a dot under a sixteenth of its need:
 * rows of a outside, k inside, so neither a nor b is held whole). Each try is a small search of
 * its own; the outer pieces that fit are a prefix, so a bisection finds the largest. */
static loom_status nested_fit(region *r, chunk_search *cs, loom_graph **out, int64_t *out_c) {
  int64_t lo = r->min_piece, hi = r->extent - 1;
  char detail[200];
  loom_graph *best = NULL;
  loom_status s = nested_try(r, lo, cs->limit, &best, cs->nested_detail, sizeof cs->nested_detail);
  if (s) return s;
  int64_t fits = lo, fails = hi + 1;
  while (fails - fits > 1) {
    int64_t c = fits + (fails - fits) / 2;
    loom_graph *g = NULL;
    s = nested_try(r, c, cs->limit, &g, detail, sizeof detail);
    if (s && s != LOOM_ERR_UNSUPPORTED && s != LOOM_ERR_OUT_OF_MEMORY) break;
    if (!s) {
      loom_graph_destroy(best);
      best = g;
      fits = c;
      snprintf(cs->nested_detail, sizeof cs->nested_detail, "%s", detail);
    } else {
      fails = c;
    }
    s = LOOM_OK;
  }
  if (s) {
    loom_graph_destroy(best);
    return s;
  }
  /* The largest outer piece leaves the inner loop the least room: a dot's inner pieces of 2
   * along k run at a fraction of the speed. Shorter outer pieces are tried too, and the one of
   * least predicted time wins (near-square tiles: few pieces, none memory-bound). Each is an
   * even split of the extent, so no last piece is needlessly short, and the trip counts grow
   * by a quarter at a time: a GEMM tile of 512 rows ran 1.5x faster than one of 63, and one of
   * 510 (four pieces and a fifth of 8 rows) would not be tried as such. The search stops past
   * the valley, where a candidate takes four times the best. */
  int64_t best_c = fits, prev_c = fits;
  double best_time = loom__chunk_predicted_time(best);
  for (int64_t t = split_trips(r->extent, fits); s == LOOM_OK; t = more_trips(t, r->extent)) {
    int64_t c = split_trips(r->extent, t); /* the piece of t even trips */
    if (c < lo || (c == prev_c && c == lo)) break;
    if (c == prev_c) continue;
    prev_c = c;
    loom_graph *g = NULL;
    loom_status u = nested_try(r, c, cs->limit, &g, detail, sizeof detail);
    if (u == LOOM_ERR_UNSUPPORTED || u == LOOM_ERR_OUT_OF_MEMORY) break;
    if ((s = u)) break;
    double time = loom__chunk_predicted_time(g);
    if (time < best_time) {
      loom_graph_destroy(best);
      best = g;
      best_c = c;
      best_time = time;
      snprintf(cs->nested_detail, sizeof cs->nested_detail, "%s", detail);
    } else {
      loom_graph_destroy(g);
    }
    if (time > 4 * best_time || c == lo) break;
  }
  if (s) {
    loom_graph_destroy(best);
    return s;
  }
  *out = best;
  *out_c = valid_piece(r, best_c);
  return LOOM_OK;
}

/* TODO(#34): a round of the graph itself takes the first cut that fits, in the largest piece
 * that fits, and a round's fallback is the cut that lowers the peak most; only inside a body
 * are cuts weighed by predicted time (chunk_tile.c's roofline, not yet the scheduler's
 * calibrated model). A tile's dot gets its k loop only afterwards (chunk_tile.c), and a block
 * of B's columns, not one run of B, is still held whole by the tile row's loop, so at 1/128
 * of gemm's need the tiles stay near 31 x 31. */

/* The largest piece c < extent for which the looped graph fits the limit. The graph's size does
 * not depend on c, so each try costs one small rebuild and estimate: a bisection (a piece's
 * need grows with c). The pieces found are then evened out (the same trip count, the last
 * piece as long as the others where it can be), so no piece is needlessly short. */
static loom_status best_piece(region *r, chunk_search *cs, loom_graph **out, int64_t *out_c) {
  int64_t lo = r->min_piece, hi = r->extent - 1, peak;
  if (hi < lo) return LOOM_ERR_UNSUPPORTED;
  loom_status s = loop_peak(r, lo, NULL, &peak);
  if (s) return s;
  if (peak > cs->limit) {
    cs->least = LOOM_MIN(cs->least, peak);
    if (!r->outer) {
      s = nested_fit(r, cs, out, out_c);
      if (s != LOOM_ERR_UNSUPPORTED && s != LOOM_ERR_OUT_OF_MEMORY) return s;
      cs->nested_detail[0] = '\0';
    }
    return lowers_peak(r, cs, lo, peak);
  }
  int64_t fits = lo, fails = hi + 1;
  if ((s = loop_peak(r, hi, NULL, &peak))) return s;
  if (peak <= cs->limit) fits = hi;
  while (fails - fits > 1) {
    int64_t c = fits + (fails - fits) / 2;
    if ((s = loop_peak(r, c, NULL, &peak))) return s;
    if (peak <= cs->limit)
      fits = c;
    else
      fails = c;
  }
  int64_t trips = (r->extent + fits - 1) / fits, even = (r->extent + trips - 1) / trips;
  int64_t c = valid_piece(r, tail_ok(r, even) ? even : fits);
  if (c < 0) return LOOM_ERR_UNSUPPORTED;
  if ((s = loop_peak(r, c, out, &peak))) return s;
  if (peak > cs->limit) { /* the need was not monotone in c after all */
    cs->least = LOOM_MIN(cs->least, peak);
    loom_graph_destroy(*out);
    *out = NULL;
    return LOOM_ERR_UNSUPPORTED;
  }
  *out_c = c;
  return LOOM_OK;
}

/* Ops worth trying as sinks: the peak op and what follows it, small results first. */
static int32_t collect_sinks(const loom_graph *g, int32_t peak_op, int32_t *sinks, int32_t max) {
  int32_t n = 0;
  bool *reach = loom__calloc((size_t)g->n_values + 1, sizeof(bool));
  if (!reach) return 0;
  for (int32_t o = peak_op; o < g->n_ops && n < max; o++) {
    const loom__op *op = &g->ops[o];
    bool hit = o == peak_op;
    for (int32_t i = 0; i < op->n_inputs && !hit; i++) hit = reach[op->inputs[i]];
    if (!hit) continue;
    for (int32_t k = 0; k < op->n_outputs; k++) reach[op->outputs[k]] = true;
    sinks[n++] = o;
  }
  loom__free(reach);
  /* smallest results first: they are where a computation comes back down */
  for (int32_t i = 1; i < n; i++)
    for (int32_t j = i; j > 0; j--) {
      int64_t a, b;
      loom_type_bytes(&g->values[g->ops[sinks[j]].outputs[0]].type, &a);
      loom_type_bytes(&g->values[g->ops[sinks[j - 1]].outputs[0]].type, &b);
      if (a >= b) break;
      int32_t t = sinks[j];
      sinks[j] = sinks[j - 1];
      sinks[j - 1] = t;
    }
  return n;
}

/* The report's line for a cut. */
static void describe_cut(const loom_graph *g, const region *r, int32_t sink, chunk_mode mode, int32_t axis,
                         int64_t c, char *detail, size_t detail_size) {
  char buf[32], more[48] = "";
  int32_t n_ops = 0;
  for (int32_t o = 0; o < g->n_ops; o++) n_ops += r->in_region[o];
  if (r->n_sinks > 1)
    snprintf(more, sizeof more, " (with %d more sink%s)", (int)(r->n_sinks - 1), r->n_sinks > 2 ? "s" : "");
  snprintf(detail, detail_size,
           "%s '%s'%s and the %d ops before it, along %s axis %d, in %lld pieces of %lld (one loop)",
           loom_op_name(g->ops[sink].kind), loom__value_label(g, g->ops[sink].outputs[0], buf, sizeof buf),
           more, (int)(n_ops - r->n_sinks), mode == MODE_PARALLEL ? "its result's" : "the reduced", (int)axis,
           (long long)((r->extent + c - 1) / c), (long long)c);
}

/* Tries one (sink, mode, axis); LOOM_ERR_UNSUPPORTED when that cut does not fit. */
static loom_status try_cut(const loom_graph *g, const loom_graph *outer, int32_t outer_op, int32_t sink,
                           chunk_mode mode, int32_t axis, chunk_search *cs, loom_graph **out, char *detail,
                           size_t detail_size) {
  region r;
  int64_t c = 0;
  loom_status s = LOOM_ERR_UNSUPPORTED;
  cs->nested_detail[0] = '\0'; /* an earlier cut's inner loop is not this one's */
  /* First with every reader that can be cut the same way as a further sink; then, when that
   * did not fit (a piece would wait for a whole result, or the further sinks' results are too
   * big together), the first sink alone; last with the transposes of inputs the region reads
   * whole moved into the body, so a cut of the body can stream those inputs too (A A^T). */
  static const unsigned hows[] = {CUT_MORE_SINKS, 0, CUT_MORE_SINKS | CUT_VIEWS_INSIDE,
                                  CUT_MORE_SINKS | CUT_VIEWS_INSIDE | CUT_RECOMPUTE};
  bool alone = false;
  for (int attempt = 0; attempt < 4 && s == LOOM_ERR_UNSUPPORTED; attempt++) {
    if (attempt == 1 && alone) continue; /* the second attempt would build the same region */
    s = loom__chunk_region_build(&r, g, sink, mode, axis, hows[attempt]);
    r.outer = outer;
    r.outer_op = outer_op;
    r.slices = cs->slices;
    alone |= attempt == 0 && s == LOOM_OK && r.n_sinks == 1;
    /* the later attempts are worth measuring only where they grew the region */
    bool moved = false, dup = false;
    for (int32_t o = 0; s == LOOM_OK && o < g->n_ops; o++) {
      moved |= r.in_region[o] && r.out_axis[o] == AX_WHOLE;
      dup |= r.dup[o];
    }
    if (!s && ((attempt == 2 && !moved) || (attempt == 3 && !dup))) s = LOOM_ERR_UNSUPPORTED;
    if (!s && r.extent < 2) s = LOOM_ERR_UNSUPPORTED;
    if (!s) s = best_piece(&r, cs, out, &c);
    if (!s) break;
    if (cs->fallback_new) {
      cs->fallback_new = false;
      describe_cut(g, &r, sink, mode, axis, cs->fallback_c, cs->fallback_detail, sizeof cs->fallback_detail);
    }
    loom__chunk_region_free(&r);
  }
  if (s) return s;
  describe_cut(g, &r, sink, mode, axis, c, detail, detail_size);
  if (cs->nested_detail[0]) {
    size_t used = strlen(detail);
    snprintf(detail + used, detail_size - used, "; %s", cs->nested_detail);
  }
  loom__chunk_region_free(&r);
  return s;
}

/* The pieces loop l runs, its inner loops' included (each inner loop's for every piece). */
static int64_t body_pieces(const loom__loop *l) {
  int64_t trips = (l->n + l->piece - 1) / l->piece, inner = 0;
  for (int32_t j = 0; j < l->body->n_ops; j++)
    if (l->body->ops[j].loop) inner += body_pieces(l->body->ops[j].loop);
  return trips * (1 + inner);
}

/* The cuts that fit, as a round finds them: the one of least predicted time is kept. */
typedef struct cut_choice {
  loom_graph *best;
  double best_time;
  int32_t found;
  char detail[256];
} cut_choice;

/* How many cuts that fit a round inside a loop's body weighs before it takes the best: each
 * costs a search of its own, and the first few (smallest sinks first) hold the good ones. A
 * round of the graph itself takes the first that fits: it may leave ops for later rounds, whose
 * cost no candidate yet shows, and its many rounds on a long graph must stay cheap. */
enum { CUTS_WEIGHED = 8 };

/* Tries one (sink, mode, axis) and keeps its graph where it is the fastest so far: LOOM_OK
 * while the round should go on, an error to stop it. */
static loom_status weigh_cut(const loom_graph *g, const loom_graph *outer, int32_t outer_op, int32_t sink,
                             chunk_mode mode, int32_t axis, chunk_search *cs, cut_choice *cc) {
  loom_graph *cand = NULL;
  char detail[256];
  loom_status s = try_cut(g, outer, outer_op, sink, mode, axis, cs, &cand, detail, sizeof detail);
  if (s == LOOM_ERR_UNSUPPORTED) return LOOM_OK;
  if (s) return s;
  double t = loom__chunk_predicted_time(cand);
  cc->found++;
  if (cc->best && t >= cc->best_time) {
    loom_graph_destroy(cand);
    return LOOM_OK;
  }
  loom_graph_destroy(cc->best);
  cc->best = cand;
  cc->best_time = t;
  snprintf(cc->detail, sizeof cc->detail, "%s", detail);
  return LOOM_OK;
}

/* One round: cuts the region around the peak op so the graph's peak drops; inside a loop's
 * body, of the first cuts that fit, the one of least predicted time (a product cut with the ops
 * after it, so each inner piece makes one tile of the result, rather than the product alone). */
static loom_status chunk_round(const loom_graph *g, const loom_graph *outer, int32_t outer_op,
                               int32_t peak_op, chunk_search *cs, loom_graph **out, char *detail,
                               size_t detail_size) {
  int32_t sinks[64];
  int32_t n = collect_sinks(g, peak_op, sinks, 64);
  cut_choice cc = {0};
  loom_status s = LOOM_OK;
  int32_t weighed = outer ? CUTS_WEIGHED : 1;
  for (int32_t k = 0; !s && k < n && cc.found < weighed; k++) {
    const loom__op *op = &g->ops[sinks[k]];
    const loom_type *rt = &g->values[op->outputs[0]].type;
    for (int32_t ax = 0; !s && ax < rt->rank && cc.found < weighed; ax++)
      s = weigh_cut(g, outer, outer_op, sinks[k], MODE_PARALLEL, ax, cs, &cc);
    if (op->n_inputs == 0) continue; /* a constant or an iota at the peak reduces nothing */
    const loom_type *it = &g->values[op->inputs[0]].type;
    for (int32_t ax = 0; !s && ax < it->rank && cc.found < weighed; ax++)
      if (loom__chunk_reduced_by(op, ax, it->rank))
        s = weigh_cut(g, outer, outer_op, sinks[k], MODE_REDUCED, ax, cs, &cc);
  }
  if (s || !cc.best) {
    loom_graph_destroy(cc.best);
    return s ? s : LOOM_ERR_UNSUPPORTED;
  }
  *out = cc.best;
  snprintf(detail, detail_size, "%s", cc.detail);
  return LOOM_OK;
}

/* When the op at the peak is a loop whose one piece passes the limit: cuts a region of its
 * body into an inner loop (a dot's rows outside, its k inside), each candidate measured in the
 * whole graph, where an input the outer loop passes whole and the inner one slices is
 * streamed. */
static loom_status nested_round(const loom_graph *g, int32_t o, chunk_search *cs, loom_graph **out,
                                char *detail, size_t detail_size) {
  const loom_graph *body = g->ops[o].loop->body;
  loom_estimate e;
  loom_status s = loom_graph_estimate(body, NULL, &e);
  if (s) return s;
  int32_t peak_op = e.peak_step >= 0 ? e.steps[e.peak_step].op : -1;
  loom_estimate_deinit(&e);
  if (peak_op < 0) return LOOM_ERR_UNSUPPORTED;
  char inner[200];
  s = chunk_round(body, g, o, peak_op, cs, out, inner, sizeof inner);
  char buf[32];
  const char *name = loom__value_label(g, g->ops[o].outputs[0], buf, sizeof buf);
  if (!s) snprintf(detail, detail_size, "inside loop '%s': %s", name, inner);
  if (cs->fallback && strncmp(cs->fallback_detail, "inside", 6) != 0) {
    snprintf(inner, sizeof inner, "%.199s", cs->fallback_detail);
    snprintf(cs->fallback_detail, sizeof cs->fallback_detail, "inside loop '%s': %s", name, inner);
  }
  return s;
}

/* When the op at the peak is a loop: the same loop in smaller pieces, where some fit. */
static loom_status shrink_round(const loom_graph *g, int32_t o, int64_t limit, loom_graph **out, char *detail,
                                size_t detail_size) {
  loom_status s = loom__loop_shrink(g, o, limit, out);
  if (s) return s;
  const loom__loop *before = g->ops[o].loop, *after = (*out)->ops[o].loop;
  char buf[32];
  snprintf(detail, detail_size, "loop '%s' in smaller pieces: %lld -> %lld (%lld pieces)",
           loom__value_label(g, g->ops[o].outputs[0], buf, sizeof buf), (long long)before->piece,
           (long long)after->piece, (long long)((after->n + after->piece - 1) / after->piece));
  return LOOM_OK;
}

/* The refusal: the peak op's need, and the least any cut of it left the graph needing. */
static loom_status too_big(const loom_graph *g, const loom_estimate *e, const chunk_search *cs) {
  const loom_estimate_step *st = &e->steps[e->peak_step];
  const loom__op *op = &g->ops[st->op];
  char buf[32], need[32], lim[32], least[32];
  const char *name = loom__value_label(g, op->outputs[0], buf, sizeof buf);
  loom__format_bytes_vs(st->peak, cs->limit, need, sizeof need);
  if (cs->least == INT64_MAX)
    return loom__error(LOOM_ERR_OUT_OF_MEMORY,
                       "%s '%s' needs %s at its step, more than the limit of %s, and cannot be chunked",
                       loom_op_name(op->kind), name, need,
                       loom__format_bytes_vs(cs->limit, st->peak, lim, sizeof lim));
  char over[32];
  return loom__error(LOOM_ERR_OUT_OF_MEMORY,
                     "%s '%s' needs %s at its step; chunked as far as it goes, the graph still needs %s, %s "
                     "over the limit of %s",
                     loom_op_name(op->kind), name, need,
                     loom__format_bytes_vs(cs->least, cs->limit, least, sizeof least),
                     loom__format_bytes(cs->least - cs->limit, over, sizeof over),
                     loom__format_bytes(cs->limit, lim, sizeof lim));
}

/* An input held whole (read by an op that is not a loop slicing it) that passes the limit
 * alone: the clearest refusal, naming it. */
static loom_status input_too_big(const loom_graph *g, int64_t limit) {
  for (int32_t p = 0; p < g->n_params; p++) {
    int64_t bytes;
    loom_type_bytes(&g->values[g->params[p]].type, &bytes);
    if (bytes > limit && !loom__value_streamed(g, g->params[p])) {
      char name[32], need[32], lim[32];
      return loom__error(LOOM_ERR_OUT_OF_MEMORY,
                         "input '%s' holds %s, more than the limit of %s, and is read whole (by an op "
                         "that cannot take it in pieces)",
                         loom__value_label(g, g->params[p], name, sizeof name),
                         loom__format_bytes_vs(bytes, limit, need, sizeof need),
                         loom__format_bytes_vs(limit, bytes, lim, sizeof lim));
    }
  }
  return LOOM_OK;
}

/* cur (taken over) with its nested loops grown into the room the rounds left (an inner loop
 * sized for the outer piece of its round), reported where any grew. */
static loom_status grown(loom_graph *cur, int64_t limit, loom_graph **out, loom_rewrite_report *report) {
  loom_graph *g = NULL;
  loom_status s = loom__nested_loops_grow(cur, limit, &g);
  int64_t pieces_before = 0, pieces_after = 0;
  for (int32_t o = 0; !s && o < cur->n_ops; o++) {
    const loom__loop *a = cur->ops[o].loop, *b = g->ops[o].loop;
    if (!a) continue;
    pieces_before += body_pieces(a);
    pieces_after += body_pieces(b);
  }
  if (!s && pieces_after < pieces_before)
    s = loom__report_add(report, "chunk", 0,
                         "nested loops grown into the room left: %lld pieces in all -> %lld",
                         (long long)pieces_before, (long long)pieces_after);
  loom_graph *tiled = NULL;
  char what[256];
  if (!s) s = loom__chunk_tiles_balance(g, limit, &tiled, what, sizeof what);
  if (!s && what[0]) s = loom__report_add(report, "chunk", 0, "%s", what);
  loom_graph_destroy(g);
  g = s ? NULL : tiled;
  if (s) loom_graph_destroy(tiled);
  loom_graph_destroy(cur);
  *out = g;
  return s;
}

/* The rounds of the rewrite on g, which passes `limit`. */
static loom_status chunk_rounds(const loom_graph *g, int64_t limit, int32_t slices, loom_graph **out,
                                loom_rewrite_report *report) {
  loom_graph *cur;
  loom_status s = loom_graph_clone(g, &cur);
  if (s) return s;
  for (int32_t round = 0; round < MAX_ROUNDS; round++) {
    loom_estimate e;
    if ((s = loom_graph_estimate(cur, NULL, &e))) break;
    if (e.peak_bytes <= limit) {
      loom_estimate_deinit(&e);
      return round > 0 ? grown(cur, limit, out, report) : (*out = cur, LOOM_OK);
    }
    if (e.peak_step < 0) { /* no op to cut: the inputs alone (returned as they are) pass it */
      loom_estimate_deinit(&e);
      if (!(s = input_too_big(cur, limit)))
        s = loom__error(LOOM_ERR_OUT_OF_MEMORY,
                        "chunk: the graph's inputs pass the limit and it has no op to cut");
      break;
    }
    char detail[256];
    loom_graph *next = NULL;
    chunk_search cs = {.limit = limit, .slices = slices, .least = INT64_MAX, .current = e.peak_bytes};
    int32_t peak_op = e.steps[e.peak_step].op;
    s = chunk_round(cur, NULL, 0, peak_op, &cs, &next, detail, sizeof detail);
    /* No cut fits: a reduction read with its input by the ops after it (mean-centring) first
     * gets a pass of its own, and a product V^T V two loops over blocks of V's input
     * (chunk_stream.c), rather than a fallback that holds the input. */
    if (s == LOOM_ERR_UNSUPPORTED &&
        (loom__chunk_stream_reduction(cur, limit, slices, &next, detail, sizeof detail) == LOOM_OK ||
         loom__chunk_stream_gram(cur, limit, slices, &next, detail, sizeof detail) == LOOM_OK))
      s = LOOM_OK;
    if (s == LOOM_ERR_UNSUPPORTED && !cs.fallback && cur->ops[peak_op].loop)
      s = shrink_round(cur, peak_op, limit, &next, detail, sizeof detail);
    if (s == LOOM_ERR_UNSUPPORTED && !cs.fallback && cur->ops[peak_op].loop)
      s = nested_round(cur, peak_op, &cs, &next, detail, sizeof detail);
    if (s == LOOM_ERR_UNSUPPORTED && cs.fallback) {
      next = cs.fallback;
      cs.fallback = NULL;
      snprintf(detail, sizeof detail, "%s", cs.fallback_detail);
      s = LOOM_OK;
    }
    loom_graph_destroy(cs.fallback);
    if (s == LOOM_ERR_UNSUPPORTED && !(s = input_too_big(cur, limit))) s = too_big(cur, &e, &cs);
    int64_t before = e.peak_bytes, after = 0;
    loom_estimate_deinit(&e);
    if (s) break;
    peak_of(next, &after);
    loom_graph_destroy(cur);
    cur = next;
    if ((s = loom__report_add(report, "chunk", before - after, "%s", detail))) break;
  }
  if (!s)
    s = loom__error(LOOM_ERR_OUT_OF_MEMORY, "chunk: the graph still passes the limit after %d rounds",
                    MAX_ROUNDS);
  loom_graph_destroy(cur);
  return s;
}

/* Appends report `from`'s entries to `to`. */
static loom_status report_append(loom_rewrite_report *to, const loom_rewrite_report *from) {
  loom_status s = LOOM_OK;
  for (int32_t i = 0; !s && i < from->count; i++)
    s = loom__report_add(to, from->entries[i].name, from->entries[i].bytes_saved, "%s",
                         from->entries[i].detail);
  return s;
}

loom_status loom__rewrite_chunk(const loom_graph *g, const loom_optimize_options *opts, loom_graph **out,
                                loom_rewrite_report *report) {
  *out = NULL;
  int64_t limit = opts ? opts->limit : 0;
  int32_t slices = opts && opts->slices ? opts->slices : LOOM_LOOP_SLICES_DEFAULT;
  if (limit <= 0) return loom_graph_clone(g, out);
  loom_rewrite_report first = {0};
  loom_status s = chunk_rounds(g, limit, slices, out, report ? &first : NULL);
  if (s != LOOM_ERR_OUT_OF_MEMORY) {
    if (!s && report) s = report_append(report, &first);
    loom_rewrite_report_deinit(&first);
    return s;
  }
  loom_rewrite_report_deinit(&first);
  /* Products no cut streams (A^T v, (A B)(C D)) in forms that one does, tried only where the
   * graph as written cannot be fitted: the refusal of the graph as written stands otherwise. */
  char why[512], what[256], halo[512] = "";
  snprintf(why, sizeof why, "%s", loom_last_error());
  /* a time-stepped stencil: every step reads its grid shifted, so only temporal blocking cuts it */
  if (loom__chunk_halo(g, opts, limit, slices, out, halo, sizeof halo) == LOOM_OK) {
    int64_t before = 0, after = 0;
    peak_of(g, &before);
    peak_of(*out, &after);
    return report ? loom__report_add(report, "chunk", before - after, "halo cut: %s", halo) : LOOM_OK;
  }
  /* one the halo cut fits no piece of: its reason, not the graph as written's */
  if (halo[0]) snprintf(why, sizeof why, "chunk: %s", halo);
  loom_graph *alt = NULL;
  if (loom__chunk_streamable(g, &alt, what, sizeof what)) return loom__error(s, "%s", why);
  loom_rewrite_report second = {0};
  loom_status t = chunk_rounds(alt, limit, slices, out, report ? &second : NULL);
  int64_t before = 0, after = 0;
  if (!t) {
    peak_of(g, &before);
    peak_of(alt, &after);
  }
  if (!t && report)
    t = loom__report_add(report, "chunk", before - after, "%s, so the pieces stream it", what);
  if (!t && report) t = report_append(report, &second);
  loom_rewrite_report_deinit(&second);
  loom_graph_destroy(alt);
  if (!t) return LOOM_OK;
  loom_graph_destroy(*out);
  *out = NULL;
  return loom__error(s, "%s", why);
}
