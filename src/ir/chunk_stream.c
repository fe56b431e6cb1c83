/* A reduction of a large input cut into a loop of its own, ahead of the ops that read both its
 * result and the input (issue 34: mean-centring). In covariance, `mean = reduce_mean data` is
 * read by `cen = data - mean`, which `cen^T cen` reads in pieces of data's rows: no piece of
 * that product may wait for the whole mean, so one loop cannot stream data for both, and the
 * mean held data whole (refused at an eighth: "input 'data' ... is held whole"). Two passes
 * do: the mean's own loop streams data first, then the product's loop streams it again with
 * the mean whole (small). Correlation adds a third: the variance of the centred data, its
 * centring recomputed in its pieces (CUT_RECOMPUTE) so that it too streams data. */
#include <string.h>

#include "ir/chunk_region.h"

static bool is_reduction(const loom__op *op) {
  switch (op->kind) {
    case LOOM_OP_REDUCE_SUM:
    case LOOM_OP_REDUCE_PROD:
    case LOOM_OP_REDUCE_MAX:
    case LOOM_OP_REDUCE_MIN:
    case LOOM_OP_REDUCE_MEAN:
      return !op->loop && !op->fused;
    default:
      return false;
  }
}

/* An input the region reads along its cut axis that no runner could hold whole (more than the
 * limit) and that the graph does not stream yet; -1 when there is none. */
static int32_t large_input(const region *r, int64_t limit) {
  const loom_graph *g = r->g;
  for (int32_t p = 0; p < g->n_params; p++) {
    int32_t v = g->params[p];
    int64_t bytes = 0;
    loom_type_bytes(&g->values[v].type, &bytes);
    if (r->region_uses[v] > 0 && r->axis_of[v] == r->axis && bytes > limit && !loom__value_streamed(g, v))
      return v;
  }
  return -1;
}

/* Whether an op after the loop reads both the reduction's result (through any ops) and input
 * v whole (directly, or through ops that stay whole: outside the region, or made again after
 * it): the pattern no single loop can stream, where a pass of its own pays. Two reductions of
 * one input need no such pass (join_input_readers_as_sinks makes them one loop). */
static bool needs_own_pass(const region *r, int32_t v, bool *after, bool *whole) {
  const loom_graph *g = r->g;
  memset(after, 0, sizeof *after * (size_t)g->n_values);
  memset(whole, 0, sizeof *whole * (size_t)g->n_values);
  for (int32_t k = 0; k < g->ops[r->sink].n_outputs; k++) after[g->ops[r->sink].outputs[k]] = true;
  whole[v] = true;
  for (int32_t o = r->sink + 1; o < g->n_ops; o++) {
    const loom__op *op = &g->ops[o];
    bool a = false, w = false;
    for (int32_t i = 0; i < op->n_inputs; i++) {
      a |= after[op->inputs[i]];
      w |= whole[op->inputs[i]];
    }
    if (a && w) return true;
    for (int32_t k = 0; k < op->n_outputs; k++) {
      after[op->outputs[k]] = a;
      whole[op->outputs[k]] = w;
    }
  }
  /* the ops before the sink that are made again after the loop (recomputed) read v whole */
  for (int32_t o = 0; o < r->sink; o++)
    if (r->dup[o])
      for (int32_t i = 0; i < g->ops[o].n_inputs; i++)
        if (g->ops[o].inputs[i] == v) return true;
  return false;
}

/* What the new loop's step holds for pieces of c, less the large inputs the graph still holds
 * whole beside it (the later rounds stream them), plus the slices of input v it will hold once
 * v is streamed (now it reads views of v held whole): the bytes the loop itself will need. */
static loom_status own_need(const region *r, int32_t v, int64_t c, int64_t limit, int64_t *need,
                            loom_graph **keep) {
  loom_graph *cand = NULL;
  loom_status s = loom__chunk_emit_loop(r, c, &cand);
  loom_estimate e;
  if (!s) s = loom_graph_estimate(cand, NULL, &e);
  if (s) {
    loom_graph_destroy(cand);
    return s;
  }
  int64_t held = 0;
  for (int32_t p = 0; p < cand->n_params; p++) {
    int32_t v = cand->params[p];
    int64_t bytes = 0;
    loom_type_bytes(&cand->values[v].type, &bytes);
    if (bytes > limit && !loom__value_streamed(cand, v)) held += bytes;
  }
  *need = INT64_MAX;
  for (int32_t k = 0; k < e.n_steps; k++) {
    const loom__loop *l = cand->ops[e.steps[k].op].loop;
    if (l && l->n == r->extent && l->piece == c) *need = e.steps[k].peak - held;
  }
  int64_t v_bytes = 0;
  loom_type_bytes(&r->g->values[v].type, &v_bytes);
  int32_t slices = r->extent > c ? r->slices : 1;
  if (*need != INT64_MAX) *need += v_bytes / r->extent * c * LOOM_MAX(slices, 1);
  loom_estimate_deinit(&e);
  if (keep)
    *keep = cand;
  else
    loom_graph_destroy(cand);
  return LOOM_OK;
}

static bool piece_ok(const region *r, int64_t c) {
  int64_t tail = r->extent % c;
  return tail == 0 || tail >= r->min_piece;
}

/* The region looped in the largest piece whose own need fits the limit (a bisection: the need
 * grows with the piece), evened out so the last piece is not needlessly short. */
static loom_status fit_region(const region *r, int32_t v, int64_t limit, loom_graph **out, int64_t *out_c) {
  int64_t fits = r->min_piece, fails = r->extent, need;
  loom_status s = own_need(r, v, fits, limit, &need, NULL);
  if (!s && need > limit) s = LOOM_ERR_UNSUPPORTED;
  while (!s && fails - fits > 1) {
    int64_t c = fits + (fails - fits) / 2;
    if (!(s = own_need(r, v, c, limit, &need, NULL))) *(need <= limit ? &fits : &fails) = c;
  }
  if (s) return s;
  int64_t trips = (r->extent + fits - 1) / fits, c = (r->extent + trips - 1) / trips;
  while (c > r->min_piece && !piece_ok(r, c)) c--;
  if (!piece_ok(r, c)) return LOOM_ERR_UNSUPPORTED;
  *out_c = c;
  return own_need(r, v, c, limit, &need, out);
}

/* Tries reduction o along axis a: OK with *out when it is the pattern and its loop fits. */
static loom_status try_reduction(const loom_graph *g, int32_t o, int32_t a, int64_t limit, int32_t slices,
                                 bool *after, bool *whole, loom_graph **out, char *detail, size_t size) {
  static const unsigned hows[] = {0, CUT_RECOMPUTE};
  loom_status s = LOOM_ERR_UNSUPPORTED;
  for (int h = 0; h < 2 && s == LOOM_ERR_UNSUPPORTED; h++) {
    region r;
    s = loom__chunk_region_build(&r, g, o, MODE_REDUCED, a, hows[h]);
    r.slices = slices;
    int32_t v = s ? -1 : large_input(&r, limit);
    int64_t c = 0;
    if (!s && (r.n_sinks != 1 || r.extent < 2 || v < 0 || !needs_own_pass(&r, v, after, whole)))
      s = LOOM_ERR_UNSUPPORTED;
    if (!s) s = fit_region(&r, v, limit, out, &c);
    if (!s) {
      char name[32], input[32];
      snprintf(detail, size,
               "%s '%s' in a pass of its own over '%s' (its axis %d in %lld pieces of %lld), so the ops "
               "that read both stream it after",
               loom_op_name(g->ops[o].kind), loom__value_label(g, g->ops[o].outputs[0], name, sizeof name),
               loom__value_label(g, v, input, sizeof input), (int)a, (long long)((r.extent + c - 1) / c),
               (long long)c);
    }
    loom__chunk_region_free(&r);
    if (s == LOOM_ERR_INVALID_ARGUMENT) s = LOOM_ERR_UNSUPPORTED; /* a body the loop refuses */
  }
  return s;
}

loom_status loom__chunk_stream_reduction(const loom_graph *g, int64_t limit, int32_t slices, loom_graph **out,
                                         char *detail, size_t detail_size) {
  *out = NULL;
  bool *after = loom__malloc(sizeof(bool) * (size_t)LOOM_MAX(g->n_values, 1));
  bool *whole = loom__malloc(sizeof(bool) * (size_t)LOOM_MAX(g->n_values, 1));
  loom_status s = (!after || !whole) ? loom__oom("the chunk rewrite's reductions") : LOOM_ERR_UNSUPPORTED;
  for (int32_t o = 0; s == LOOM_ERR_UNSUPPORTED && o < g->n_ops; o++) {
    const loom__op *op = &g->ops[o];
    if (!is_reduction(op)) continue;
    const loom_type *in = &g->values[op->inputs[0]].type;
    for (int32_t a = 0; a < in->rank && s == LOOM_ERR_UNSUPPORTED; a++)
      if (loom__chunk_reduced_by(op, a, in->rank) && in->dims[a] > 1)
        s = try_reduction(g, o, a, limit, slices, after, whole, out, detail, detail_size);
  }
  loom__free(after);
  loom__free(whole);
  return s;
}

/* ---- a gram product's operand made twice ---------------------------------------------- */

/* Elementwise ops, which a chain copied for the second operand of V^T V may hold. */
static bool elementwise(const loom__op *op) {
  if (op->loop || op->fused || op->n_outputs != 1) return false;
  switch (loom__op_info_of(op->kind)->cls) {
    case LOOM_CLASS_UNARY:
    case LOOM_CLASS_BINARY:
    case LOOM_CLASS_COMPARE:
    case LOOM_CLASS_SELECT:
    case LOOM_CLASS_CAST:
      return true;
    default:
      return false;
  }
}

static int64_t elements_of(const loom_graph *g, int32_t v) {
  int64_t n = 0;
  loom_type_elements(&g->values[v].type, &n);
  return n;
}

/* Marks in `chain` the elementwise ops that make v at its full size (operands of fewer
 * elements, a mean or a scale broadcast over it, stay shared); true when the chain reads an
 * input larger than the limit that the graph does not stream. */
static bool mark_chain(const loom_graph *g, int32_t v, int64_t limit, bool *chain) {
  int32_t p = g->values[v].op;
  if (p < 0) {
    int64_t bytes = 0;
    loom_type_bytes(&g->values[v].type, &bytes);
    return bytes > limit && !loom__value_streamed(g, v);
  }
  const loom__op *op = &g->ops[p];
  if (!elementwise(op)) return false;
  chain[p] = true;
  bool large = false;
  for (int32_t i = 0; i < op->n_inputs; i++)
    if (elements_of(g, op->inputs[i]) == elements_of(g, v))
      large |= mark_chain(g, op->inputs[i], limit, chain);
  return large;
}

/* The dot reading V^T and V (covariance's cent cen), V made by elementwise ops from an input
 * larger than the limit; -1 when none. *which: the dot's operand that is V. */
static int32_t gram_dot(const loom_graph *g, int64_t limit, bool *chain, int32_t *which) {
  for (int32_t o = 0; o < g->n_ops; o++) {
    const loom__op *op = &g->ops[o];
    if (op->kind != LOOM_OP_DOT || op->n_inputs != 2) continue;
    for (int32_t i = 0; i < 2; i++) {
      int32_t v = op->inputs[i], t = g->values[op->inputs[1 - i]].op;
      /* V an input itself (syrk's A A^T) needs no copy: the region's views inside stream it */
      if (t < 0 || g->ops[t].kind != LOOM_OP_TRANSPOSE || g->ops[t].inputs[0] != v || g->values[v].op < 0)
        continue;
      memset(chain, 0, sizeof *chain * (size_t)g->n_ops);
      if (mark_chain(g, v, limit, chain)) {
        *which = i;
        return o;
      }
    }
  }
  return -1;
}

/* Emits a copy of the chain's ops into rb->dst (copy[]: src value -> its copy's dst value). */
static loom_status copy_chain(loom__rebuild *rb, const bool *chain, int32_t *copy) {
  const loom_graph *g = rb->src;
  for (int32_t o = 0; o < g->n_ops; o++) {
    if (!chain[o]) continue;
    const loom__op *op = &g->ops[o];
    loom_value ins[8], res = LOOM_VALUE_NONE;
    if (op->n_inputs > 8) return loom__error(LOOM_ERR_UNSUPPORTED, "chunk: an op of more than 8 operands");
    for (int32_t i = 0; i < op->n_inputs; i++) {
      int32_t v = op->inputs[i];
      ins[i] = copy[v] >= 0 ? (loom_value){copy[v]} : loom__rebuild_get(rb, v);
    }
    loom_status s = loom_graph_add(rb->dst, op->kind, ins, op->n_inputs, &op->attrs, NULL, NULL, &res, 1);
    if (s) return s;
    copy[op->outputs[0]] = res.id;
  }
  return LOOM_OK;
}

/* g with the dot's operand V made again for it, so V^T V reads two values: the transpose's V,
 * which a cut along the product's rows reads in column blocks, and the dot's own, which it
 * reads whole and which the region then makes in its body from the input passed whole
 * (join_whole_view), where an inner cut streams it as syrk's A A^T. */
static loom_status split_gram(const loom_graph *g, int32_t d, int32_t which, const bool *chain,
                              loom_graph **out) {
  loom__rebuild rb;
  loom_status s = loom__rebuild_init(&rb, g);
  if (s) return s;
  int32_t *copy = loom__malloc(sizeof(int32_t) * (size_t)LOOM_MAX(g->n_values, 1));
  if (!copy) s = loom__oom("the chunk rewrite's copy of a product's operand");
  for (int32_t v = 0; !s && v < g->n_values; v++) copy[v] = -1;
  for (int32_t o = 0; !s && o < g->n_ops; o++) {
    if (o != d) {
      s = loom__rebuild_copy(&rb, o);
      continue;
    }
    int32_t v = g->ops[o].inputs[which], kept = rb.map[v];
    if (!(s = copy_chain(&rb, chain, copy))) {
      rb.map[v] = copy[v];
      s = loom__rebuild_copy(&rb, o);
      rb.map[v] = kept;
    }
  }
  if (!s) s = rb.dst->error;
  if (!s) s = loom__rebuild_finish(&rb, out);
  loom__rebuild_deinit(&rb);
  loom__free(copy);
  return s;
}

loom_status loom__chunk_split_gram(const loom_graph *g, int64_t limit, loom_graph **out, char *detail,
                                   size_t detail_size) {
  *out = NULL;
  bool *chain = loom__calloc((size_t)LOOM_MAX(g->n_ops, 1), sizeof(bool));
  if (!chain) return loom__oom("the chunk rewrite's gram products");
  int32_t which = 0, d = gram_dot(g, limit, chain, &which);
  loom_status s = d < 0 ? LOOM_ERR_UNSUPPORTED : split_gram(g, d, which, chain, out);
  if (!s) {
    char name[32], v[32];
    const char *label = loom__value_label(g, g->ops[d].inputs[which], v, sizeof v);
    snprintf(detail, detail_size, "dot '%s' reads '%s' and its transpose: '%s' made again for it",
             loom__value_label(g, g->ops[d].outputs[0], name, sizeof name), label, label);
  }
  loom__free(chain);
  return s;
}
