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

static loom_status split_gram_copy(const loom_graph *g, int64_t limit, loom_graph **out, char *detail,
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

/* ---- a gram product streamed by blocks of rows ------------------------------------------ */

/* V^T V with V made elementwise from an input X [m, n] larger than the limit (covariance's
 * `cent cen`, correlation's `nt nrm`) as two nested loops: the product's rows (X's columns) in
 * blocks of bi outside, X's rows (the product's k) in blocks of br inside, each inner piece
 * making V's rows again from one dense block of X (V's block of bi columns from the same rows)
 * and summing Vblk_cols^T Vblk into the block of results (the backend's dot accumulates into the
 * loop's sum: no add, no cleared piece). The cut split_gram leaves to the generic search keeps
 * k whole and makes tiles of the result: each tile gathered X's columns from every row (a cache
 * and TLB miss a row), centred them again, and OpenBLAS packed both operands of a k = m GEMM
 * again for each tile; at an eighth of covariance's need that was twice the GEMM's own time.
 * Here X is read densely once per block of bi, and nothing but the product repeats. */

typedef struct gram {
  const loom_graph *g;
  int32_t dot, x;        /* the product op, the input V is made from */
  const bool *chain;     /* per op: makes V from X (elementwise, at X's size) */
  int32_t epi[16];       /* elementwise ops after the product, in order: in the outer body */
  int32_t n_epi, result; /* the value the outer loop gives (the last epilogue op's) */
  int32_t small[16];     /* the chain's other operands (constant along X's rows) */
  bool cols[16];         /* ... sliced along X's columns for the block of V's columns */
  int32_t n_small;
  int32_t epi_in[16]; /* the epilogue's other operands */
  bool epi_rows[16];  /* ... sliced along the result's rows */
  int32_t n_epi_in;
  int64_t m, n;
} gram;

/* Adds v to list (distinct); false when full. */
static bool add_distinct(int32_t *list, int32_t *count, int32_t max, int32_t v) {
  for (int32_t k = 0; k < *count; k++)
    if (list[k] == v) return true;
  if (*count == max) return false;
  list[(*count)++] = v;
  return true;
}

/* An operand that does not vary along the rows of an [r, c] result it broadcasts into: a
 * scalar, a vector along the columns, or a [1, c] row. */
static bool row_invariant(const loom_type *t) {
  return t->rank <= 1 || (t->rank == 2 && t->dims[0] == 1);
}

/* Checks that the chain reads X and otherwise only row-invariant operands, and lists those. */
static bool gram_operands(gram *gr) {
  const loom_graph *g = gr->g;
  for (int32_t o = 0; o < g->n_ops; o++) {
    if (!gr->chain[o]) continue;
    for (int32_t i = 0; i < g->ops[o].n_inputs; i++) {
      int32_t v = g->ops[o].inputs[i], p = g->values[v].op;
      if (v == gr->x || (p >= 0 && gr->chain[p])) continue;
      const loom_type *t = &g->values[v].type;
      if (!row_invariant(t) || !add_distinct(gr->small, &gr->n_small, 16, v)) return false;
    }
  }
  for (int32_t k = 0; k < gr->n_small; k++) {
    const loom_type *t = &g->values[gr->small[k]].type;
    gr->cols[k] = t->rank >= 1 && t->dims[t->rank - 1] == gr->n && gr->n > 1;
  }
  return true;
}

static bool same_shape(const loom_type *a, const loom_type *b) {
  if (a->rank != b->rank) return false;
  for (int32_t d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

/* The elementwise ops after the product that read it alone at its size (covariance's scale):
 * run on each block of rows in the outer body, so the result is written once, in place. */
static void gram_epilogue(gram *gr, const int32_t *uses) {
  const loom_graph *g = gr->g;
  gr->result = g->ops[gr->dot].outputs[0];
  for (int32_t o = gr->dot + 1; o < g->n_ops && gr->n_epi < 16; o++) {
    const loom__op *op = &g->ops[o];
    int32_t found = -1;
    for (int32_t i = 0; i < op->n_inputs; i++)
      if (op->inputs[i] == gr->result) found = i;
    if (found < 0) continue;
    if (uses[gr->result] != 1 || !elementwise(op) || op->n_inputs > 8 ||
        !same_shape(&g->values[op->outputs[0]].type, &g->values[gr->result].type))
      return;
    int32_t n_in = gr->n_epi_in;
    for (int32_t i = 0; i < op->n_inputs; i++) {
      int32_t v = op->inputs[i];
      const loom_type *t = &g->values[v].type;
      bool rows = t->rank == 2 && t->dims[0] == gr->n && t->dims[0] > 1;
      if (i == found) continue;
      if (g->values[v].op >= gr->dot || (!rows && !row_invariant(t)) ||
          !add_distinct(gr->epi_in, &gr->n_epi_in, 16, v)) {
        gr->n_epi_in = n_in;
        return;
      }
      for (int32_t k = 0; k < gr->n_epi_in; k++)
        if (gr->epi_in[k] == v) gr->epi_rows[k] = rows;
    }
    gr->epi[gr->n_epi++] = o;
    gr->result = op->outputs[0];
  }
}

/* A parameter of body b standing for src value v, typed t: named after v (with suffix) where
 * that name is free in b, else in<k><suffix>. */
static loom_value gram_param(loom_graph *b, const loom_graph *g, int32_t v, const char *suffix,
                             const loom_type *t) {
  char name[48], buf[32];
  snprintf(name, sizeof name, "%s%s", loom__value_label(g, v, buf, sizeof buf), suffix);
  for (int32_t k = b->n_params; !g->values[v].name || loom_graph_find(b, name).id >= 0; k++) {
    snprintf(name, sizeof name, "in%d%s", (int)k, suffix);
    if (loom_graph_find(b, name).id < 0) break;
  }
  return loom_graph_param(b, name, t);
}

/* V made in body b from its X (xv) and the small operands' body values (sv): the chain's ops
 * copied in order (map: src value -> body value). */
static loom_value make_v(const gram *gr, loom_graph *b, loom_value xv, const loom_value *sv, int32_t *map) {
  const loom_graph *g = gr->g;
  for (int32_t v = 0; v < g->n_values; v++) map[v] = -1;
  map[gr->x] = xv.id;
  for (int32_t k = 0; k < gr->n_small; k++) map[gr->small[k]] = sv[k].id;
  for (int32_t o = 0; o < g->n_ops; o++) {
    const loom__op *op = &g->ops[o];
    loom_value ins[8], res = LOOM_VALUE_NONE;
    if (!gr->chain[o] || op->n_inputs > 8) continue; /* gram_find refuses wider ops */
    for (int32_t i = 0; i < op->n_inputs; i++) ins[i] = (loom_value){map[op->inputs[i]]};
    loom_graph_add(b, op->kind, ins, op->n_inputs, &op->attrs, NULL, NULL, &res, 1);
    map[op->outputs[0]] = res.id;
  }
  return (loom_value){map[g->ops[gr->dot].inputs[1]]};
}

/* Adds body b's parameters for the small operands: the blocks of bi columns of those sliced,
 * then each whole. cols[k]: operand k's block (where not sliced, its whole parameter). */
static void small_params(loom_graph *b, const gram *gr, int64_t bi, loom_value *cols, loom_value *whole) {
  const loom_graph *g = gr->g;
  for (int32_t k = 0; k < gr->n_small; k++) {
    loom_type t = g->values[gr->small[k]].type;
    if (!gr->cols[k]) continue;
    t.dims[t.rank - 1] = bi;
    cols[k] = gram_param(b, g, gr->small[k], "_cols", &t);
  }
  for (int32_t k = 0; k < gr->n_small; k++) {
    whole[k] = gram_param(b, g, gr->small[k], "", &g->values[gr->small[k]].type);
    if (!gr->cols[k]) cols[k] = whole[k];
  }
}

/* The inner body: one block of br rows of X, whole and in its block of bi columns (its
 * parameters: those two, the small operands' blocks of columns, the small operands whole). */
static loom_status inner_body(const gram *gr, int64_t bi, int64_t br, int32_t *map, loom_graph **out) {
  const loom_graph *g = gr->g;
  loom_graph *b = NULL;
  loom_status s = loom_graph_create("rows", &b);
  if (s) return s;
  loom_type tc = g->values[gr->x].type, tr = tc;
  tc.dims[0] = tr.dims[0] = br;
  tc.dims[1] = bi;
  loom_value xc = gram_param(b, g, gr->x, "_cols", &tc), xr = gram_param(b, g, gr->x, "", &tr);
  loom_value si[16], sw[16];
  small_params(b, gr, bi, si, sw);
  loom_value vr = make_v(gr, b, xr, sw, map), vc = make_v(gr, b, xc, si, map);
  int64_t perm[2] = {1, 0};
  loom_value p = loom_dot(b, loom_transpose(b, vc, 2, perm), vr);
  if (!b->error) loom_graph_return(b, &p, 1);
  s = b->error;
  if (s) loom_graph_destroy(b);
  *out = s ? NULL : b;
  return s;
}

/* The outer body: one block of bi of the result's rows (X's columns), the inner loop over X's
 * rows, then the epilogue. Its parameters: X's block of columns, X whole (the inner loop
 * streams both by rows), the small operands' blocks of columns and whole, the epilogue's. */
static loom_status outer_body(const gram *gr, int64_t bi, int64_t br, int32_t slices, int32_t *map,
                              loom_graph **out) {
  const loom_graph *g = gr->g;
  loom_graph *b = NULL, *inner = NULL;
  loom_status s = loom_graph_create("cols", &b);
  if (!s) s = inner_body(gr, bi, br, map, &inner);
  if (s) {
    loom_graph_destroy(b);
    return s;
  }
  loom_type tc = g->values[gr->x].type;
  tc.dims[1] = bi;
  loom_value ops[34], cols[16], whole[16];
  loom_loop_input rules[34];
  int32_t n = 0;
  ops[n++] = gram_param(b, g, gr->x, "_cols", &tc);
  ops[n++] = gram_param(b, g, gr->x, "", &g->values[gr->x].type);
  small_params(b, gr, bi, cols, whole);
  for (int32_t k = 0; k < gr->n_small; k++)
    if (gr->cols[k]) ops[n++] = cols[k];
  for (int32_t k = 0; k < gr->n_small; k++) ops[n++] = whole[k];
  for (int32_t k = 0; k < n; k++) rules[k] = (loom_loop_input){k < 2 ? 0 : -1, 0, 0, 0};
  loom_value epi_in[16]; /* parameters come before ops */
  for (int32_t k = 0; k < gr->n_epi_in; k++) {
    loom_type t = g->values[gr->epi_in[k]].type;
    if (gr->epi_rows[k]) t.dims[0] = bi;
    epi_in[k] = gram_param(b, g, gr->epi_in[k], "", &t);
  }
  loom_value acc = LOOM_VALUE_NONE;
  loom_loop_output sum = {LOOM_COMBINE_SUM, 0, 0, false};
  if (!b->error) loom_graph_add_loop(b, gr->m, br, inner, ops, rules, n, &sum, 1, &acc);
  loom_graph_destroy(inner);
  if (!b->error) loom_graph_loop_set_slices(b, b->n_ops - 1, slices);
  for (int32_t v = 0; v < g->n_values; v++) map[v] = -1;
  map[g->ops[gr->dot].outputs[0]] = acc.id;
  for (int32_t k = 0; k < gr->n_epi_in; k++) map[gr->epi_in[k]] = epi_in[k].id;
  for (int32_t e = 0; e < gr->n_epi && !b->error; e++) {
    const loom__op *op = &g->ops[gr->epi[e]];
    loom_value ins[8], res = LOOM_VALUE_NONE;
    for (int32_t i = 0; i < op->n_inputs; i++) ins[i] = (loom_value){map[op->inputs[i]]};
    loom_graph_add(b, op->kind, ins, op->n_inputs, &op->attrs, NULL, NULL, &res, 1);
    map[op->outputs[0]] = res.id;
  }
  loom_value r = {map[gr->result]};
  if (!b->error) loom_graph_return(b, &r, 1);
  s = b->error;
  if (s) loom_graph_destroy(b);
  *out = s ? NULL : b;
  return s;
}

/* The outer loop's operands (outer_body's parameters, in order) and how each is read. */
static int32_t outer_operands(const gram *gr, const loom__rebuild *rb, loom_value *ops,
                              loom_loop_input *rules) {
  const loom_graph *g = gr->g;
  int32_t n = 0;
  rules[n] = (loom_loop_input){1, 0, 0, 0};
  ops[n++] = loom__rebuild_get(rb, gr->x);
  rules[n] = (loom_loop_input){-1, 0, 0, 0};
  ops[n++] = loom__rebuild_get(rb, gr->x);
  for (int32_t k = 0; k < gr->n_small; k++)
    if (gr->cols[k]) {
      rules[n] = (loom_loop_input){g->values[gr->small[k]].type.rank - 1, 0, 0, 0};
      ops[n++] = loom__rebuild_get(rb, gr->small[k]);
    }
  for (int32_t k = 0; k < gr->n_small; k++) {
    rules[n] = (loom_loop_input){-1, 0, 0, 0};
    ops[n++] = loom__rebuild_get(rb, gr->small[k]);
  }
  for (int32_t k = 0; k < gr->n_epi_in; k++) {
    rules[n] = (loom_loop_input){gr->epi_rows[k] ? 0 : -1, 0, 0, 0};
    ops[n++] = loom__rebuild_get(rb, gr->epi_in[k]);
  }
  return n;
}

/* g with the product and its epilogue as the two loops, in blocks of bi and br. */
static loom_status gram_emit(const gram *gr, int64_t bi, int64_t br, int32_t slices, loom_graph **out) {
  const loom_graph *g = gr->g;
  *out = NULL;
  int32_t *map = loom__malloc(sizeof(int32_t) * (size_t)LOOM_MAX(g->n_values, 1));
  loom_graph *body = NULL;
  loom_status s =
      map ? outer_body(gr, bi, br, slices, map, &body) : loom__oom("the chunk rewrite's gram loops");
  loom__rebuild rb;
  bool rb_ok = !s && !(s = loom__rebuild_init(&rb, g));
  for (int32_t o = 0; !s && o < g->n_ops; o++) {
    bool epi = false;
    for (int32_t e = 0; e < gr->n_epi; e++) epi |= gr->epi[e] == o;
    if (epi) continue;
    if (o != gr->dot) {
      s = loom__rebuild_copy(&rb, o);
      continue;
    }
    loom_value ops[50], res = LOOM_VALUE_NONE;
    loom_loop_input rules[50];
    int32_t n = outer_operands(gr, &rb, ops, rules);
    loom_loop_output rows = {LOOM_COMBINE_CONCAT, 0, 0, false};
    s = loom_graph_add_loop(rb.dst, gr->n, bi, body, ops, rules, n, &rows, 1, &res);
    if (!s) s = loom_graph_loop_set_slices(rb.dst, rb.dst->n_ops - 1, slices);
    if (!s) loom__rebuild_set(&rb, gr->result, res);
  }
  if (!s) s = rb.dst->error;
  if (!s) s = loom__rebuild_finish(&rb, out);
  if (rb_ok) loom__rebuild_deinit(&rb);
  loom_graph_destroy(body);
  loom__free(map);
  return s;
}

static loom_status gram_peak(const gram *gr, int64_t bi, int64_t br, int32_t slices, int64_t *peak) {
  loom_graph *c = NULL;
  loom_estimate e;
  loom_status s = gram_emit(gr, bi, br, slices, &c);
  if (!s && !(s = loom_graph_estimate(c, NULL, &e))) {
    *peak = e.peak_bytes;
    loom_estimate_deinit(&e);
  }
  loom_graph_destroy(c);
  return s;
}

/* The piece of one side (bi: rows false, br: rows true; the other side fixed) in [1, hi]: the
 * largest whose graph fits the limit (the need grows with it), evened out over the pieces it
 * makes; 0 where even 1 does not fit. */
static loom_status largest_fit(const gram *gr, bool rows, int64_t fixed, int64_t hi, int64_t limit,
                               int32_t slices, int64_t *out) {
  int64_t fits = 0, fails = hi + 1, peak = 0;
  while (fails - fits > 1) {
    int64_t c = fits + (fails - fits) / 2;
    loom_status s = rows ? gram_peak(gr, fixed, c, slices, &peak) : gram_peak(gr, c, fixed, slices, &peak);
    if (s) return s;
    *(peak <= limit ? &fits : &fails) = c;
  }
  int64_t trips = fits ? (hi + fits - 1) / fits : 0;
  *out = trips ? (hi + trips - 1) / trips : 0;
  return LOOM_OK;
}

/* The blocks: the widest bi that fits beside an inner k of 64 rows, and 3/4, 1/2 and 1/4 of it,
 * each with the longest br that then fits. The widest whose br reaches 128 rows is taken: each
 * outer block makes V again from all of X, and those passes cost more than k blocks of 128 rows
 * or more lose in the GEMMs, which chunk_tile.c's roofline does not see (at an eighth of
 * correlation's need, one thread, the run's CPU time: 0.50 s in blocks of 128 x 179, 0.60 s in
 * the 82 x 241 it predicted faster, 0.49 s whole). Where none reaches it, the least predicted
 * time. */
static loom_status gram_fit(const gram *gr, int64_t limit, int32_t slices, loom_graph **out, int64_t *out_bi,
                            int64_t *out_br) {
  int64_t widest = 0;
  loom_status s = largest_fit(gr, false, LOOM_MIN(gr->m, 64), gr->n, limit, slices, &widest);
  if (!s && !widest) s = largest_fit(gr, false, 1, gr->n, limit, slices, &widest);
  if (!s && !widest) return LOOM_ERR_UNSUPPORTED;
  double best_time = 0;
  *out = NULL;
  for (int32_t q = 4; !s && q >= 1; q--) {
    int64_t bi = widest * q / 4, br = 0;
    if (bi < 1 || (q < 4 && bi == widest)) continue;
    int64_t trips = (gr->n + bi - 1) / bi;
    bi = (gr->n + trips - 1) / trips;
    if ((s = largest_fit(gr, true, bi, gr->m, limit, slices, &br)) || !br) continue;
    loom_graph *c = NULL;
    if ((s = gram_emit(gr, bi, br, slices, &c))) break;
    double t = loom__chunk_predicted_time(c);
    bool long_k = br >= LOOM_MIN(gr->m, 128);
    if (*out && !long_k && t >= best_time) {
      loom_graph_destroy(c);
      continue;
    }
    loom_graph_destroy(*out);
    *out = c;
    best_time = t;
    *out_bi = bi;
    *out_br = br;
    if (long_k) break;
  }
  if (!s && !*out) s = LOOM_ERR_UNSUPPORTED;
  return s;
}

/* Finds V^T V in g with V made from an input larger than the limit, in the form the loops
 * take: OK with *gr filled (chain: caller's, n_ops long). */
static loom_status gram_find(const loom_graph *g, int64_t limit, bool *chain, gram *gr) {
  int32_t which = 0, d = gram_dot(g, limit, chain, &which);
  if (d < 0 || which != 1) return LOOM_ERR_UNSUPPORTED; /* V V^T: its k is X's columns */
  const loom__op *t = &g->ops[g->values[g->ops[d].inputs[0]].op];
  if (t->attrs.perm.count != 2 || t->attrs.perm.v[0] != 1) return LOOM_ERR_UNSUPPORTED;
  memset(gr, 0, sizeof *gr);
  gr->g = g;
  gr->dot = d;
  gr->chain = chain;
  gr->x = -1;
  for (int32_t o = 0; o < g->n_ops; o++)
    for (int32_t i = 0; chain[o] && i < g->ops[o].n_inputs; i++) {
      int32_t v = g->ops[o].inputs[i];
      if (g->values[v].op < 0 && elements_of(g, v) == elements_of(g, g->ops[o].outputs[0])) {
        if (gr->x >= 0 && gr->x != v) return LOOM_ERR_UNSUPPORTED; /* two inputs of V's size */
        gr->x = v;
      }
      if (g->ops[o].n_inputs > 8) return LOOM_ERR_UNSUPPORTED;
    }
  const loom_type *xt = gr->x >= 0 ? &g->values[gr->x].type : NULL;
  const loom_type *vt = &g->values[g->ops[d].inputs[1]].type;
  if (!xt || xt->rank != 2 || !same_shape(xt, vt)) return LOOM_ERR_UNSUPPORTED;
  gr->m = xt->dims[0];
  gr->n = xt->dims[1];
  if (gr->m < 2 || !gram_operands(gr)) return LOOM_ERR_UNSUPPORTED;
  int32_t *uses = loom__malloc(sizeof(int32_t) * (size_t)LOOM_MAX(g->n_values, 1));
  if (!uses) return loom__oom("the chunk rewrite's gram loops");
  loom__use_counts(g, uses);
  gram_epilogue(gr, uses);
  loom__free(uses);
  return LOOM_OK;
}

loom_status loom__chunk_stream_gram(const loom_graph *g, int64_t limit, int32_t slices, loom_graph **out,
                                    char *detail, size_t detail_size) {
  *out = NULL;
  bool *chain = loom__calloc((size_t)LOOM_MAX(g->n_ops, 1), sizeof(bool));
  if (!chain) return loom__oom("the chunk rewrite's gram products");
  gram gr;
  int64_t bi = 0, br = 0;
  loom_status s = gram_find(g, limit, chain, &gr);
  if (!s) s = gram_fit(&gr, limit, slices, out, &bi, &br);
  if (!s) {
    char name[32], vb[32], xb[32];
    const char *v = loom__value_label(g, g->ops[gr.dot].inputs[1], vb, sizeof vb);
    snprintf(detail, detail_size,
             "dot '%s' of '%s' with its transpose in %lld blocks of %lld of its rows, each summed over "
             "'%s''s rows in %lld blocks of %lld ('%s' made again in each)",
             loom__value_label(g, g->ops[gr.dot].outputs[0], name, sizeof name), v,
             (long long)((gr.n + bi - 1) / bi), (long long)bi, loom__value_label(g, gr.x, xb, sizeof xb),
             (long long)((gr.m + br - 1) / br), (long long)br, v);
  }
  loom__free(chain);
  /* a product this form does not take (V V^T, another operand of V's size) gets V made twice */
  if (s == LOOM_ERR_UNSUPPORTED) return split_gram_copy(g, limit, out, detail, detail_size);
  return s;
}
