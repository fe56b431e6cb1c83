/* The chunk rewrite's regions (chunk_region.h): which ops around a sink run piece by piece along which axis,
 * and the loop op they become. */
#include "ir/chunk_region.h"
#include <stdatomic.h>
#include <string.h>

/* Loop bodies emitted since the process started, the search's included
 * (loom__chunk_pieces_emitted). */
static _Atomic int64_t pieces_emitted;

int64_t loom__chunk_pieces_emitted(void) {
  return atomic_load(&pieces_emitted);
}

static int64_t norm_axis(int64_t axis, int32_t rank) {
  return axis < 0 ? axis + rank : axis;
}

/* Input axis j of an operand broadcast to `out`, for output axis ax. */
static int32_t map_broadcast(const loom_type *in, const loom_type *out, int32_t ax) {
  int32_t j = ax - (out->rank - in->rank);
  if (j < 0 || (in->dims[j] == 1 && out->dims[ax] != 1)) return AX_WHOLE;
  return j;
}

static int32_t map_dot(const loom_type *in, const loom_type *other, const loom_type *out, int32_t ax,
                       int32_t i) {
  if (in->rank < 2 && other->rank < 2) return AX_FAIL;
  if (in->rank < 2) return AX_WHOLE; /* a vector's only axis is contracted */
  if (other->rank < 2) {
    /* matrix . vector: the matrix's rows (or vector . matrix: its columns), and batch axes as
     * they are, since the vector's axis is gone from the result */
    if (ax == out->rank - 1) return i == 0 ? in->rank - 2 : in->rank - 1;
    return ax;
  }
  if (ax == out->rank - 2) return i == 0 ? in->rank - 2 : AX_WHOLE;
  if (ax == out->rank - 1) return i == 1 ? in->rank - 1 : AX_WHOLE;
  int32_t j = ax - (out->rank - in->rank);
  if (j < 0 || (in->dims[j] == 1 && out->dims[ax] != 1)) return AX_WHOLE;
  return j;
}

/* A reshape keeps axis ax when the dims before it hold as many elements in both shapes and
 * the axis itself has the same length: then a slice of one is a slice of the other. */
static int32_t map_reshape(const loom_type *in, const loom_type *out, int32_t ax) {
  int64_t before_out = 1, before_in = 1;
  for (int32_t i = 0; i < ax; i++) before_out *= out->dims[i];
  for (int32_t j = 0; j < in->rank; j++) {
    if (before_in == before_out && in->dims[j] == out->dims[ax]) return j;
    before_in *= in->dims[j];
    if (before_in > before_out) break;
  }
  return AX_FAIL;
}

/* A conv's stride, padding or dilation along spatial axis j (its default where not given). */
static int64_t conv_attr(const loom_attrs *a, uint32_t bit, const loom_int_list *l, int32_t j, int64_t dflt) {
  return (a->set & bit) ? l->v[j] : dflt;
}

/* A slice that takes all of axis ax (a column of a matrix cut by rows: the distance rewrite's
 * direct form) is cut along ax with its input, so the input can stream. */
static bool slice_keeps(const loom_attrs *a, const loom_type *in, int32_t ax) {
  int64_t step = (a->set & LOOM_ATTR_STEP) ? a->step.v[ax] : 1;
  return a->start.v[ax] == 0 && a->stop.v[ax] == in->dims[ax] && step == 1;
}

/* Which axis of operand i a piece along output axis ax reads; AX_WHOLE: all of it;
 * AX_FAIL: the op cannot be computed in pieces along ax. */
static int32_t map_back(const loom_graph *g, const loom__op *op, int32_t ax, int32_t i) {
  const loom_type *in = &g->values[op->inputs[i]].type, *out = &g->values[op->outputs[0]].type;
  const loom_attrs *a = &op->attrs;
  switch (loom__op_info_of(op->kind)->cls) {
    case LOOM_CLASS_UNARY:
    case LOOM_CLASS_BINARY:
    case LOOM_CLASS_COMPARE:
    case LOOM_CLASS_LOGIC:
    case LOOM_CLASS_SELECT:
    case LOOM_CLASS_CAST:
      return map_broadcast(in, out, ax);
    case LOOM_CLASS_REDUCE: {
      if (a->keepdims) return ax;
      for (int32_t j = 0, seen = -1; j < in->rank; j++)
        if (!loom__axes_contain(a, j, in->rank) && ++seen == ax) return j;
      return AX_FAIL;
    }
    case LOOM_CLASS_ARGREDUCE:
      return ax < norm_axis(a->axis, in->rank) ? ax : ax + 1;
    case LOOM_CLASS_TOPK:
    case LOOM_CLASS_FOURIER:
      return ax == norm_axis(a->axis, in->rank) ? AX_FAIL : ax;
    case LOOM_CLASS_DOT:
      return map_dot(in, &g->values[op->inputs[1 - i]].type, out, ax, i);
    case LOOM_CLASS_CONV:
      if (ax == 0) return i == 0 ? 0 : AX_WHOLE;
      if (ax < 2) return AX_FAIL;
      /* a spatial axis: x through a window, w whole; a 1-wide kernel stepping 1 over padding
       * would be a plain slice reading past the ends, which a loop does not take */
      if (i == 1) return AX_WHOLE;
      if (conv_attr(a, LOOM_ATTR_STRIDE, &a->stride, ax - 2, 1) == 1 &&
          g->values[op->inputs[1]].type.dims[ax] == 1 &&
          conv_attr(a, LOOM_ATTR_PADDING, &a->padding, ax - 2, 0) > 0)
        return AX_FAIL;
      return AX_WINDOW + ax;
    case LOOM_CLASS_QUANT: /* dequantize: q along ax, a per-channel scale where ax is its axis */
      if (op->kind != LOOM_OP_DEQUANTIZE) return AX_FAIL;
      if (i == 0) return ax;
      return (a->set & LOOM_ATTR_AXIS) && norm_axis(a->axis, out->rank) == ax ? 0 : AX_WHOLE;
    case LOOM_CLASS_LAYOUT:
      if (op->kind == LOOM_OP_TRANSPOSE) return (int32_t)a->perm.v[ax];
      if (op->kind == LOOM_OP_BROADCAST) return map_broadcast(in, out, ax);
      if (op->kind == LOOM_OP_RESHAPE) return map_reshape(in, out, ax);
      if (op->kind == LOOM_OP_SLICE) return slice_keeps(a, in, ax) ? ax : AX_FAIL;
      return AX_FAIL;
    default:
      return AX_FAIL;
  }
}

static bool is_sink(const region *r, int32_t o) {
  return r->sink_axis && r->sink_axis[o] != AX_FAIL;
}

/* In reduced mode, the axis of operand i of sink o that is cut: its cut axis on input 0, and
 * for dot the matching k axis of b. */
static int32_t sink_operand_axis(const region *r, int32_t o, int32_t i) {
  const loom__op *op = &r->g->ops[o];
  if (op->kind != LOOM_OP_DOT || i == 0) return r->sink_axis[o];
  const loom_type *b = &r->g->values[op->inputs[1]].type;
  return b->rank >= 2 ? b->rank - 2 : 0;
}

/* The axis operand i of region op o is read along in a piece. */
static int32_t operand_axis(const region *r, int32_t o, int32_t i) {
  if (is_sink(r, o) && r->reducing[o]) return sink_operand_axis(r, o, i);
  if (r->out_axis[o] == AX_WHOLE) return AX_WHOLE; /* a view moved into the body (join_whole_view) */
  return map_back(r->g, &r->g->ops[o], r->out_axis[o], i);
}

void loom__chunk_region_free(region *r) {
  loom__free(r->axis_of);
  loom__free(r->out_axis);
  loom__free(r->in_region);
  loom__free(r->downstream);
  loom__free(r->dup);
  loom__free(r->uses);
  loom__free(r->region_uses);
  loom__free(r->sinks);
  loom__free(r->sink_axis);
  loom__free(r->reducing);
  memset(r, 0, sizeof *r);
}

/* Adds op o to the region with its results cut along ax, and marks what it reads. */
static bool join(region *r, int32_t o, int32_t ax) {
  const loom__op *op = &r->g->ops[o];
  /* An op that reads nothing (an iota, a constant, a fill) makes its result from its type and
   * attributes alone: a piece of it would need a type of its own and, for an iota along the cut
   * axis, the piece's offset. Left out, it is made whole and the pieces read its slices. */
  if (op->n_inputs == 0) return false;
  /* A broadcast that makes the cut axis out of an operand read whole would bring the piece's
   * length into the body through its shape alone, which no body may (docs/ir-loops.md: the
   * piece enters through the parameters; a last, shorter piece could not be retyped). Left
   * out, its result (a view) is the loop's sliced operand instead. */
  if (op->kind == LOOM_OP_BROADCAST && ax >= 0 && ax < AX_WINDOW && map_back(r->g, op, ax, 0) == AX_WHOLE &&
      r->g->values[op->outputs[0]].type.dims[ax] != 1)
    return false;
  r->out_axis[o] = ax;
  for (int32_t i = 0; i < op->n_inputs; i++) {
    int32_t v = op->inputs[i], p = r->g->values[v].op, ai = operand_axis(r, o, i);
    /* a value made in the region exists only as pieces along the axis its op is cut along,
     * and a combined one (a reducing sink's) not at all until the last piece */
    if (ai == AX_FAIL ||
        (p >= 0 && r->in_region[p] && ((is_sink(r, p) && r->reducing[p]) || r->out_axis[p] != ai))) {
      r->out_axis[o] = AX_FAIL;
      return false;
    }
  }
  r->in_region[o] = true;
  for (int32_t i = 0; i < op->n_inputs; i++) {
    int32_t v = op->inputs[i], ai = operand_axis(r, o, i);
    r->region_uses[v]++;
    r->axis_of[v] = (r->axis_of[v] == AX_UNSET || r->axis_of[v] == ai) ? ai : AX_FAIL;
  }
  return true;
}

/* The axis producer op o's results would be cut along if every reader is in the region and
 * they agree on it; AX_FAIL otherwise. */
static int32_t candidate_axis(const region *r, int32_t o) {
  const loom__op *op = &r->g->ops[o];
  if (loom__op_info_of(op->kind)->cls == LOOM_CLASS_SOURCE) return AX_FAIL;
  int32_t ax = AX_FAIL;
  for (int32_t k = 0; k < op->n_outputs; k++) {
    int32_t v = op->outputs[k];
    if (r->uses[v] == 0) continue;
    if (r->region_uses[v] != r->uses[v] || r->axis_of[v] < 0 || r->axis_of[v] >= AX_WINDOW) return AX_FAIL;
    if (ax != AX_FAIL && ax != r->axis_of[v]) return AX_FAIL;
    ax = r->axis_of[v];
  }
  return ax;
}

/* Whether op reduces its input's axis ax in a way pieces can be combined: reductions (sum,
 * prod, max, min, mean), argmax/argmin and topk (merged), dot over k (partials summed). */
bool loom__chunk_reduced_by(const loom__op *op, int32_t ax, int32_t rank) {
  switch (op->kind) {
    case LOOM_OP_REDUCE_SUM:
    case LOOM_OP_REDUCE_PROD:
    case LOOM_OP_REDUCE_MAX:
    case LOOM_OP_REDUCE_MIN:
    case LOOM_OP_REDUCE_MEAN:
      return loom__axes_contain(&op->attrs, ax, rank);
    case LOOM_OP_ARGMAX:
    case LOOM_OP_ARGMIN:
    case LOOM_OP_TOPK:
      return ax == norm_axis(op->attrs.axis, rank);
    case LOOM_OP_DOT:
      return ax == rank - 1;
    default:
      return false;
  }
}

/* Whether c's results are read in the region (by ops after it) along ax and no other axis: a
 * sink whose results are cut along ax is read by the region only as pieces along ax. A
 * further sink joined without this check (syrk's `a` read as rows by a dot and whole through
 * `at = transpose a`, `at` made a sink cut along its columns) gave a body whose dot read the
 * piece twice: "loop body: dot 'v2' reads the loop's piece along axes that do not line up". */
static bool results_read_along(const region *r, const loom__op *op, int32_t ax) {
  for (int32_t k = 0; k < op->n_outputs; k++) {
    int32_t v = op->outputs[k];
    if (r->region_uses[v] > 0 && r->axis_of[v] != ax) return false;
  }
  return true;
}

/* The axis of c's input 0 that c reduces when its operand i is read along a, or AX_FAIL: a
 * reduction of input 0, or a dot's k (input 0's last axis, input 1's rows). */
static int32_t reduced_axis(const region *r, const loom__op *op, int32_t i, int32_t a) {
  const loom_graph *g = r->g;
  const loom_type *t0 = &g->values[op->inputs[0]].type, *ti = &g->values[op->inputs[i]].type;
  if (op->kind == LOOM_OP_TOPK || ti->dims[a] != r->extent) return AX_FAIL;
  if (i == 0) return loom__chunk_reduced_by(op, a, t0->rank) ? a : AX_FAIL;
  if (op->kind != LOOM_OP_DOT || i != 1 || a != (ti->rank >= 2 ? ti->rank - 2 : 0)) return AX_FAIL;
  return t0->rank - 1;
}

/* c joins as a sink that reduces the cut axis (combined across pieces; topk's merge needs
 * pieces of at least k, fixed by the first sink). */
static bool join_reducing_sink(region *r, int32_t c, int32_t i, int32_t a) {
  const loom__op *op = &r->g->ops[c];
  int32_t ax = reduced_axis(r, op, i, a);
  /* a combined result is whole only after the last piece: no piece may read it */
  if (ax == AX_FAIL || !results_read_along(r, op, AX_UNSET)) return false;
  r->sink_axis[c] = ax;
  r->reducing[c] = true;
  if (join(r, c, ax)) return true;
  r->sink_axis[c] = AX_FAIL;
  r->reducing[c] = false;
  return false;
}

/* c joins as a sink whose results hold the cut axis (written in place, piece by piece). */
static bool join_parallel_sink(region *r, int32_t c, int32_t i, int32_t a) {
  const loom_graph *g = r->g;
  const loom__op *op = &g->ops[c];
  const loom_type *ot = &g->values[op->outputs[0]].type;
  for (int32_t ax = 0; ax < ot->rank; ax++) {
    if (ot->dims[ax] != r->extent || map_back(g, op, ax, i) != a || !results_read_along(r, op, ax)) continue;
    for (int32_t k = 1; k < op->n_outputs; k++)
      if (g->values[op->outputs[k]].type.rank <= ax || g->values[op->outputs[k]].type.dims[ax] != r->extent)
        return false;
    r->sink_axis[c] = ax;
    if (join(r, c, ax)) return true;
    r->sink_axis[c] = AX_FAIL;
  }
  return false;
}

/* Makes op c, which reads a region value as operand i, a further sink cut the same way: along
 * the axis of its results that reads the value's cut axis, or reducing that axis (a dot over
 * it as k). Either kind joins either mode's region, so one pass over a matrix serves A p and
 * A^T r alike (bicg, mvt): the mode's own kind is tried first. False when it cannot. */
static bool join_sink(region *r, int32_t c, int32_t i) {
  int32_t a = r->axis_of[r->g->ops[c].inputs[i]];
  if (a < 0 || a >= AX_WINDOW) return false;
  if (r->mode == MODE_REDUCED) return join_reducing_sink(r, c, i, a) || join_parallel_sink(r, c, i, a);
  return join_parallel_sink(r, c, i, a) || join_reducing_sink(r, c, i, a);
}

static int64_t value_elements(const loom_graph *g, int32_t v) {
  int64_t n = 0;
  loom_type_elements(&g->values[v].type, &n);
  return n;
}

/* Whether elementwise op `op` may be made whole in the body: it reads, at its own size, a graph
 * input or another elementwise op's result (a chain back to an input: covariance's centred
 * data made again for `cen^T cen`, chunk_stream.c), its smaller operands (a mean, a scale)
 * passed whole. */
static bool whole_elementwise(const loom_graph *g, const loom__op *op) {
  switch (loom__op_info_of(op->kind)->cls) {
    case LOOM_CLASS_UNARY:
    case LOOM_CLASS_BINARY:
    case LOOM_CLASS_COMPARE:
    case LOOM_CLASS_SELECT:
    case LOOM_CLASS_CAST:
      break;
    default:
      return false;
  }
  if (op->loop || op->fused || op->n_outputs != 1) return false;
  bool chain = false;
  for (int32_t i = 0; i < op->n_inputs; i++) {
    int32_t v = op->inputs[i], p = g->values[v].op;
    if (value_elements(g, v) != value_elements(g, op->outputs[0])) continue;
    if (p < 0 || whole_elementwise(g, &g->ops[p])) chain = true;
  }
  return chain;
}

/* Whether every reader of v is a region dot, or an op made whole in the body that such a dot
 * reads in turn: the chain a product's operand is made of (an elementwise op read whole
 * elsewhere, a reduction's operand, stays out: moved in, it would change cuts that fit). */
static bool read_whole_by_products(const region *r, int32_t v) {
  const loom_graph *g = r->g;
  for (int32_t o = g->values[v].op + 1; o < g->n_ops; o++) {
    const loom__op *op = &g->ops[o];
    for (int32_t i = 0; i < op->n_inputs; i++)
      if (op->inputs[i] == v && !(r->in_region[o] && (op->kind == LOOM_OP_DOT || r->out_axis[o] == AX_WHOLE)))
        return false;
  }
  return true;
}

/* A transpose of a graph input whose every reader is a region op reading it whole (syrk's
 * `at = transpose a`), or an elementwise chain from such an input (whole_elementwise), joins
 * the region whole: the body makes the view or the values from the input it is passed whole,
 * so the input is read by loops alone, and a cut of the body can stream it (rows of a outside,
 * rows of a again inside for the columns: a 2-D tiling of A A^T with a read only in pieces). */
static bool join_whole_view(region *r, int32_t o) {
  const loom__op *op = &r->g->ops[o];
  bool view = op->kind == LOOM_OP_TRANSPOSE; /* before its operands: a source op has none */
  if (!view && !whole_elementwise(r->g, op)) return false;
  int32_t v = op->outputs[0];
  if (r->uses[v] == 0 || r->region_uses[v] != r->uses[v] || r->axis_of[v] != AX_WHOLE ||
      (view && r->g->values[op->inputs[0]].op >= 0))
    return false;
  if (!view && !read_whole_by_products(r, v)) return false;
  r->out_axis[o] = AX_WHOLE;
  r->in_region[o] = true;
  for (int32_t i = 0; i < op->n_inputs; i++) {
    int32_t in = op->inputs[i];
    r->region_uses[in]++;
    r->axis_of[in] = (r->axis_of[in] == AX_UNSET || r->axis_of[in] == AX_WHOLE) ? AX_WHOLE : AX_FAIL;
  }
  return true;
}

/* Whether op costs little enough to compute twice: elementwise ops and views. */
static bool cheap(const loom__op *op) {
  return loom__op_is_elementwise(op->kind) || op->kind == LOOM_OP_TRANSPOSE ||
         op->kind == LOOM_OP_BROADCAST || op->kind == LOOM_OP_RESHAPE || op->kind == LOOM_OP_SLICE;
}

/* The axis a cheap op joins along when the region reads its result along one axis and ops
 * outside the region read it too: it is computed in the pieces, and again, whole, after the
 * loop for those readers (r->dup). gemver's A + u1 v1^T + u2 v2^T is read by A^T y and then,
 * once x is known, by A x: each loop recomputes its pieces from A, so the sum is never held
 * whole while the first loop runs, and the next round cuts the second. AX_FAIL: it cannot. */
static int32_t recompute_axis(const region *r, int32_t o) {
  const loom__op *op = &r->g->ops[o];
  if (op->n_outputs != 1 || op->n_inputs == 0 || !cheap(op)) return AX_FAIL;
  int32_t v = op->outputs[0], ax = r->axis_of[v];
  if (r->region_uses[v] == 0 || r->region_uses[v] == r->uses[v]) return AX_FAIL;
  return ax >= 0 && ax < AX_WINDOW ? ax : AX_FAIL;
}

/* A recomputed op is made again after the loop from what it reads: every region op it reads
 * (not a sink, whose result the loop gives) is recomputed too, and must be cheap. */
static bool close_recomputed(region *r) {
  const loom_graph *g = r->g;
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t o = g->n_ops - 1; o >= 0; o--) {
      if (!r->dup[o]) continue;
      for (int32_t i = 0; i < g->ops[o].n_inputs; i++) {
        int32_t p = g->values[g->ops[o].inputs[i]].op;
        if (p < 0 || !r->in_region[p] || r->dup[p] || is_sink(r, p)) continue;
        if (!cheap(&g->ops[p])) return false;
        r->dup[p] = changed = true;
      }
    }
  }
  return true;
}

/* Producer o is read both inside the region, along one axis, and by ops outside it: tries to
 * bring each of those readers in as a sink of its own. True when any joined. */
static bool join_readers_as_sinks(region *r, int32_t o) {
  const loom_graph *g = r->g;
  const loom__op *op = &g->ops[o];
  if (loom__op_info_of(op->kind)->cls == LOOM_CLASS_SOURCE) return false;
  bool outside = false;
  for (int32_t k = 0; k < op->n_outputs; k++) {
    int32_t v = op->outputs[k];
    if (r->uses[v] == 0) continue;
    if (r->region_uses[v] == 0 || r->axis_of[v] < 0 || r->axis_of[v] >= AX_WINDOW) return false;
    outside |= r->region_uses[v] < r->uses[v];
  }
  if (!outside) return false;
  bool joined = false;
  for (int32_t c = o + 1; c < g->n_ops; c++) {
    if (r->in_region[c]) continue;
    for (int32_t i = 0; i < g->ops[c].n_inputs; i++)
      if (g->values[g->ops[c].inputs[i]].op == o && join_sink(r, c, i)) {
        joined = true;
        break;
      }
  }
  return joined;
}

/* The same for the graph's inputs read in the region along one axis and by ops outside it
 * (two reductions of one input): each such reader joins as a sink of its own, so the input is
 * read only in pieces. True when any joined. */
static bool join_input_readers_as_sinks(region *r) {
  const loom_graph *g = r->g;
  bool joined = false;
  for (int32_t p = 0; p < g->n_params; p++) {
    int32_t v = g->params[p];
    if (r->region_uses[v] == 0 || r->region_uses[v] == r->uses[v] || r->axis_of[v] < 0 ||
        r->axis_of[v] >= AX_WINDOW)
      continue;
    for (int32_t c = 0; c < g->n_ops; c++) {
      if (r->in_region[c]) continue;
      for (int32_t i = 0; i < g->ops[c].n_inputs; i++)
        if (g->ops[c].inputs[i] == v && join_sink(r, c, i)) {
          joined = true;
          break;
        }
    }
  }
  return joined;
}

/* Producer o's results are read in the region along one axis and returned by the graph, and by
 * nothing else: o joins as a sink whose results are written in place along that axis (the
 * returned value, written piece by piece, or streamed out), its results read in the pieces by
 * the region ops after it. How a sum of a value the graph also returns is cut (a layer's
 * activations and their mean, a spectrum and its round trip's error). */
static bool join_returned_as_sink(region *r, int32_t o) {
  const loom_graph *g = r->g;
  const loom__op *op = &g->ops[o];
  /* Only beside a reduction: in a region cut along a result's axis, a producer brought in this
   * way pulls its own inputs in along that axis, and a graph such as a dot whose result feeds a
   * second dot was cut into a million pieces of one (tests/mpi/data/chain.lir) where two loops
   * of large pieces do. */
  if (r->mode != MODE_REDUCED) return false;
  if (loom__op_info_of(op->kind)->cls == LOOM_CLASS_SOURCE || op->loop) return false;
  int32_t ax = AX_FAIL;
  for (int32_t k = 0; k < op->n_outputs; k++) {
    int32_t v = op->outputs[k], returned = 0;
    for (int32_t j = 0; j < g->n_outputs; j++) returned += g->outputs[j] == v;
    if (r->region_uses[v] == 0 || returned == 0 || r->region_uses[v] + returned != r->uses[v]) return false;
    int32_t a = r->axis_of[v];
    if (a < 0 || a >= AX_WINDOW || g->values[v].type.dims[a] != r->extent || (ax != AX_FAIL && a != ax))
      return false;
    ax = a;
  }
  if (ax == AX_FAIL) return false;
  r->sink_axis[o] = ax;
  r->reducing[o] = false;
  if (join(r, o, ax)) return true;
  r->sink_axis[o] = AX_FAIL;
  return false;
}

/* Whether a region reshape puts the piece right after axes of length 1 that hold as many
 * elements before it ([c] -> [1,c], gemver's v1^T): in a body typed for a piece of 1 the two
 * look alike, and the loop builder, which finds the piece's axis from the shapes (the first
 * output axis with the piece's length and as many elements before it), takes the wrong one
 * ("add 'v10' reads the loop's piece along axes that do not line up"), so the cut was refused
 * at its first, smallest piece and never tried at any other. Pieces (and a last piece) of at
 * least 2 keep the axes apart. */
static bool reshape_needs_two(const region *r) {
  for (int32_t o = 0; o < r->g->n_ops; o++) {
    const loom__op *op = &r->g->ops[o];
    int32_t ax = r->out_axis[o];
    if (!r->in_region[o] || op->kind != LOOM_OP_RESHAPE || ax < 0 || ax >= AX_WINDOW) continue;
    const loom_type *out = &r->g->values[op->outputs[0]].type;
    int64_t before = 1;
    for (int32_t k = 0; k < ax; k++) before *= out->dims[k];
    /* an earlier axis of 1 with the same elements before it is where a piece of 1 is seen */
    int64_t seen = 1;
    for (int32_t k = 0; k < ax; k++) {
      if (seen == before && out->dims[k] == 1) return true;
      seen *= out->dims[k];
    }
  }
  return false;
}

/* Marks the ops that run after the pieces (they read a sink's result, or a region value from
 * outside the region), and checks that no region op needs such a result: a piece cannot wait
 * for the whole. */
static bool mark_downstream(region *r) {
  const loom_graph *g = r->g;
  for (int32_t o = 0; o < g->n_ops; o++) {
    bool waits = false;
    for (int32_t i = 0; i < g->ops[o].n_inputs && !waits; i++) {
      int32_t p = g->values[g->ops[o].inputs[i]].op;
      /* a region op reads a sink's results only where they hold the piece (written in place) */
      waits = p >= 0 && ((is_sink(r, p) && (r->reducing[p] || !r->in_region[o])) || r->downstream[p] ||
                         (r->in_region[p] && !r->in_region[o]));
    }
    if (waits && r->in_region[o]) return false;
    r->downstream[o] = waits;
  }
  return true;
}

loom_status loom__chunk_region_build(region *r, const loom_graph *g, int32_t sink, chunk_mode mode,
                                     int32_t axis, unsigned how) {
  bool more_sinks = how & CUT_MORE_SINKS, views_inside = how & CUT_VIEWS_INSIDE,
       recompute = how & CUT_RECOMPUTE;
  memset(r, 0, sizeof *r);
  r->g = g;
  r->sink = sink;
  r->mode = mode;
  r->axis = axis;
  size_t nv = (size_t)g->n_values + 1, no = (size_t)g->n_ops + 1;
  r->axis_of = loom__malloc(nv * sizeof(int32_t));
  r->out_axis = loom__malloc(no * sizeof(int32_t));
  r->sink_axis = loom__malloc(no * sizeof(int32_t));
  r->sinks = loom__malloc(no * sizeof(int32_t));
  r->reducing = loom__calloc(no, sizeof(bool));
  r->in_region = loom__calloc(no, sizeof(bool));
  r->downstream = loom__calloc(no, sizeof(bool));
  r->dup = loom__calloc(no, sizeof(bool));
  r->uses = loom__malloc(nv * sizeof(int32_t));
  r->region_uses = loom__calloc(nv, sizeof(int32_t));
  if (!r->axis_of || !r->out_axis || !r->sink_axis || !r->sinks || !r->reducing || !r->in_region ||
      !r->downstream || !r->dup || !r->uses || !r->region_uses)
    return loom__oom("a chunk region");
  for (size_t v = 0; v < nv; v++) r->axis_of[v] = AX_UNSET;
  for (size_t o = 0; o < no; o++) r->out_axis[o] = r->sink_axis[o] = AX_FAIL;
  loom__use_counts(g, r->uses);
  const loom_type *t = mode == MODE_PARALLEL ? &g->values[g->ops[sink].outputs[0]].type
                                             : &g->values[g->ops[sink].inputs[0]].type;
  r->extent = t->dims[axis];
  r->min_piece = 1;
  if (mode == MODE_REDUCED && g->ops[sink].kind == LOOM_OP_TOPK) {
    /* merged through a gather on the last axis only */
    if (axis != t->rank - 1) return LOOM_ERR_UNSUPPORTED;
    r->min_piece = LOOM_MAX(g->ops[sink].attrs.k, 1);
  }
  r->sink_axis[sink] = axis;
  r->reducing[sink] = mode == MODE_REDUCED;
  if (!join(r, sink, axis)) return LOOM_ERR_UNSUPPORTED;
  /* Walk back from the end; a sink that joins may bring in producers already passed, so walk
   * again until nothing changes (without further sinks one walk is enough). */
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t o = g->n_ops - 1; o >= 0; o--) {
      if (r->in_region[o]) continue;
      int32_t ax = candidate_axis(r, o);
      if (ax >= 0)
        join(r, o, ax);
      else if (views_inside && join_whole_view(r, o))
        changed = true;
      else if (recompute && (ax = recompute_axis(r, o)) >= 0 && join(r, o, ax))
        r->dup[o] = true;
      else if (more_sinks && join_readers_as_sinks(r, o))
        changed = true;
      else if (more_sinks && join_returned_as_sink(r, o))
        changed = true;
    }
    if (more_sinks && join_input_readers_as_sinks(r)) changed = true;
  }
  if (recompute && !close_recomputed(r)) return LOOM_ERR_UNSUPPORTED;
  for (int32_t o = 0; o < g->n_ops; o++)
    if (is_sink(r, o)) r->sinks[r->n_sinks++] = o;
  if (reshape_needs_two(r)) r->min_piece = LOOM_MAX(r->min_piece, 2);
  for (int32_t v = 0; v < g->n_values; v++) {
    const loom_type *vt = &g->values[v].type;
    if (vt->dtype == LOOM_Q4 && r->axis_of[v] >= 0 && r->axis_of[v] == vt->rank - 1) r->even_pieces = true;
  }
  return mark_downstream(r) ? LOOM_OK : LOOM_ERR_UNSUPPORTED;
}

/* ---- emitting the loop ------------------------------------------------------------------ */

/* The body under construction: the region's ops for one piece of c, its parameters one per
 * (outside value, axis it is read along). */
typedef struct body_build {
  const region *r;
  loom_graph *body;
  int64_t c;
  int32_t *local;  /* per src value: its body value, -1 when not there */
  int32_t *pvalue; /* per body parameter: the src value it reads */
  loom_loop_input *rules;
  int32_t n_params;
  loom_value rets[LOOM_LOOP_MAX_RESULTS];
  loom_loop_output combines[LOOM_LOOP_MAX_RESULTS];
  int32_t n_rets;
} body_build;

/* A slice along the loop's axis (step 1, whole on every other axis) is the loop's offset into
 * what it slices: the loop reads the sliced value itself from that offset, so a stencil's
 * shifted reads (x[1:] - x[:-1]) stream the input instead of holding it whole for the views. */
static void see_through_slices(const loom_graph *g, int32_t *v, int32_t axis, int64_t *offset) {
  for (;;) {
    int32_t p = g->values[*v].op;
    if (p < 0 || g->ops[p].kind != LOOM_OP_SLICE) return;
    const loom__op *op = &g->ops[p];
    const loom_type *in = &g->values[op->inputs[0]].type;
    for (int32_t d = 0; d < in->rank; d++) {
      int64_t step = (op->attrs.set & LOOM_ATTR_STEP) ? op->attrs.step.v[d] : 1;
      int64_t start = op->attrs.start.v[d], stop = LOOM_MIN(op->attrs.stop.v[d], in->dims[d]);
      if (step != 1 || start < 0 || (d != axis && (start != 0 || stop != in->dims[d]))) return;
    }
    *offset += op->attrs.start.v[axis];
    *v = op->inputs[0];
  }
}

/* How operand i of region op o enters the body: whole, sliced along its axis, or for a conv's
 * x along a spatial axis through the window of the piece's receptive fields: from the first
 * output's first row (-padding: the rows before x's start are the padding's zeros) by the
 * stride, each piece's window (kernel - 1) x dilation rows longer than its strided rows. */
static loom_loop_input operand_rule(const region *r, int32_t o, int32_t i) {
  int32_t ax = operand_axis(r, o, i);
  if (ax < AX_WINDOW) return (loom_loop_input){ax >= 0 ? ax : -1, 0, 0, 0};
  const loom__op *op = &r->g->ops[o];
  const loom_attrs *a = &op->attrs;
  int32_t axis = ax - AX_WINDOW, j = axis - 2;
  int64_t k = r->g->values[op->inputs[1]].type.dims[axis];
  int64_t stride = conv_attr(a, LOOM_ATTR_STRIDE, &a->stride, j, 1);
  int64_t pad = conv_attr(a, LOOM_ATTR_PADDING, &a->padding, j, 0);
  int64_t dilation = conv_attr(a, LOOM_ATTR_DILATION, &a->dilation, j, 1);
  return (loom_loop_input){axis, -pad, stride > 1 ? stride : 0, (k - 1) * dilation};
}

/* The body parameter for outside value v read by `rule`: registered by the first pass over the
 * region (make), found by the second. Parameters come before ops. */
static int32_t body_param_index(body_build *bb, int32_t v, loom_loop_input rule, bool make) {
  if (rule.axis >= 0 && !loom__loop_windowed(&rule))
    see_through_slices(bb->r->g, &v, rule.axis, &rule.offset);
  for (int32_t p = 0; p < bb->n_params; p++) {
    const loom_loop_input *q = &bb->rules[p];
    if (bb->pvalue[p] == v && q->axis == rule.axis && q->offset == rule.offset && q->stride == rule.stride &&
        q->halo == rule.halo)
      return p;
  }
  if (!make) return -1;
  bb->pvalue[bb->n_params] = v;
  bb->rules[bb->n_params] = rule;
  return bb->n_params++;
}

static void body_params_make(body_build *bb) {
  for (int32_t p = 0; p < bb->n_params; p++) {
    int32_t v = bb->pvalue[p];
    loom_type t = bb->r->g->values[v].type;
    int64_t first, count;
    loom__loop_window(&bb->rules[p], 0, bb->c, &first, &count);
    if (bb->rules[p].axis >= 0) t.dims[bb->rules[p].axis] = count;
    /* Unnamed values print as v<id>: a parameter named after one could clash with a body value. */
    char name[40], buf[32];
    const char *label = loom__value_label(bb->r->g, v, buf, sizeof buf);
    if (bb->r->g->values[v].name && loom_graph_find(bb->body, label).id < 0)
      snprintf(name, sizeof name, "%s", label);
    else /* the first free in<k>: a body cut again may already hold that name */
      for (int32_t k = p;
           snprintf(name, sizeof name, "in%d", (int)k), loom_graph_find(bb->body, name).id >= 0;)
        k++;
    loom_graph_param(bb->body, name, &t);
  }
}

static loom_value body_operand(body_build *bb, int32_t o, int32_t i) {
  const region *r = bb->r;
  int32_t v = r->g->ops[o].inputs[i], producer = r->g->values[v].op;
  if (producer >= 0 && r->in_region[producer]) return (loom_value){bb->local[v]};
  return loom_graph_param_at(bb->body, body_param_index(bb, v, operand_rule(r, o, i), false));
}

static loom_status body_op(body_build *bb, int32_t o) {
  const region *r = bb->r;
  const loom__op *op = &r->g->ops[o];
  loom_value ins[16];
  if (op->n_inputs > 16)
    return loom__error(LOOM_ERR_UNSUPPORTED, "chunk: %s has too many operands", loom_op_name(op->kind));
  for (int32_t i = 0; i < op->n_inputs; i++) ins[i] = body_operand(bb, o, i);
  loom_attrs attrs = op->attrs;
  loom_op kind = op->kind;
  int32_t ax = r->out_axis[o];
  if ((kind == LOOM_OP_RESHAPE || kind == LOOM_OP_BROADCAST) && ax >= 0 && attrs.shape.v[ax] != -1)
    attrs.shape.v[ax] = bb->c;
  if (kind == LOOM_OP_CONV && ax >= 2 && (attrs.set & LOOM_ATTR_PADDING))
    attrs.padding.v[ax - 2] = 0;                                  /* the window holds the padding */
  if (kind == LOOM_OP_SLICE && ax >= 0) attrs.stop.v[ax] = bb->c; /* all of the piece (slice_keeps) */
  if (is_sink(r, o) && r->reducing[o] && kind == LOOM_OP_REDUCE_MEAN) kind = LOOM_OP_REDUCE_SUM;
  loom_value outs[2] = {LOOM_VALUE_NONE, LOOM_VALUE_NONE};
  loom_status s = loom_graph_add(bb->body, kind, ins, op->n_inputs, &attrs, NULL, NULL, outs, op->n_outputs);
  for (int32_t k = 0; !s && k < op->n_outputs; k++) bb->local[op->outputs[k]] = outs[k].id;
  return s;
}

static loom_status body_result(body_build *bb, loom_value v, loom_loop_output combine) {
  if (bb->n_rets == LOOM_LOOP_MAX_RESULTS)
    return loom__error(LOOM_ERR_UNSUPPORTED, "chunk: a region with more than %d results",
                       LOOM_LOOP_MAX_RESULTS);
  bb->rets[bb->n_rets] = v;
  bb->combines[bb->n_rets++] = combine;
  return LOOM_OK;
}

/* The body's results for sink o: concatenated (parallel), or combined across pieces. */
static loom_status sink_results(body_build *bb, int32_t o) {
  const region *r = bb->r;
  const loom__op *sink = &r->g->ops[o];
  int32_t axis = r->sink_axis[o];
  loom_value first = {bb->local[sink->outputs[0]]};
  if (!r->reducing[o]) {
    loom_status s = LOOM_OK;
    for (int32_t k = 0; !s && k < sink->n_outputs; k++)
      s = body_result(bb, (loom_value){bb->local[sink->outputs[k]]},
                      (loom_loop_output){LOOM_COMBINE_CONCAT, axis, 0, false});
    return s;
  }
  loom_loop_output index = {LOOM_COMBINE_INDEX, 0, 0, false};
  switch (sink->kind) {
    case LOOM_OP_TOPK: {
      loom_status s = body_result(
          bb, first, (loom_loop_output){LOOM_COMBINE_TOPK, axis, sink->attrs.k, sink->attrs.largest});
      return s ? s : body_result(bb, (loom_value){bb->local[sink->outputs[1]]}, index);
    }
    case LOOM_OP_ARGMAX:
    case LOOM_OP_ARGMIN: {
      bool max = sink->kind == LOOM_OP_ARGMAX;
      int64_t ax = axis;
      loom_value best = loom_reduce(bb->body, max ? LOOM_OP_REDUCE_MAX : LOOM_OP_REDUCE_MIN,
                                    body_operand(bb, o, 0), 1, &ax, false);
      loom_status s = body_result(
          bb, best, (loom_loop_output){max ? LOOM_COMBINE_ARGMAX : LOOM_COMBINE_ARGMIN, 0, 0, false});
      return s ? s : body_result(bb, first, index);
    }
    case LOOM_OP_REDUCE_PROD:
      return body_result(bb, first, (loom_loop_output){LOOM_COMBINE_PROD, 0, 0, false});
    case LOOM_OP_REDUCE_MAX:
      return body_result(bb, first, (loom_loop_output){LOOM_COMBINE_MAX, 0, 0, false});
    case LOOM_OP_REDUCE_MIN:
      return body_result(bb, first, (loom_loop_output){LOOM_COMBINE_MIN, 0, 0, false});
    default: /* reduce_sum, reduce_mean (scaled after the loop), dot over k */
      return body_result(bb, first, (loom_loop_output){LOOM_COMBINE_SUM, 0, 0, false});
  }
}

static void body_build_free(body_build *bb) {
  loom_graph_destroy(bb->body);
  loom__free(bb->local);
  loom__free(bb->pvalue);
  loom__free(bb->rules);
}

/* The body for one piece of c: every region op up to the last sink, and the sinks' results. */
static loom_status build_body(const region *r, int64_t c, body_build *bb) {
  const loom_graph *g = r->g;
  memset(bb, 0, sizeof *bb);
  bb->r = r;
  bb->c = c;
  size_t nv = (size_t)LOOM_MAX(g->n_values, 1);
  bb->local = loom__malloc(sizeof(int32_t) * nv);
  /* at most one parameter per (value, read): a value is read whole or along one axis per use */
  int32_t uses = 0;
  for (int32_t o = 0; o < g->n_ops; o++) uses += r->in_region[o] ? g->ops[o].n_inputs : 0;
  bb->pvalue = loom__malloc(sizeof(int32_t) * (size_t)LOOM_MAX(uses, 1));
  bb->rules = loom__malloc(sizeof(loom_loop_input) * (size_t)LOOM_MAX(uses, 1));
  if (!bb->local || !bb->pvalue || !bb->rules) return loom__oom("a chunk's loop body");
  for (size_t v = 0; v < nv; v++) bb->local[v] = -1;
  loom_status s = loom_graph_create("piece", &bb->body);
  int32_t last = r->sinks[r->n_sinks - 1];
  for (int32_t o = 0; o <= last; o++) {
    if (!r->in_region[o]) continue;
    for (int32_t i = 0; i < g->ops[o].n_inputs; i++) {
      int32_t v = g->ops[o].inputs[i], producer = g->values[v].op;
      if (producer < 0 || !r->in_region[producer]) body_param_index(bb, v, operand_rule(r, o, i), true);
    }
  }
  if (!s) body_params_make(bb);
  for (int32_t o = 0; !s && o <= last; o++)
    if (r->in_region[o]) s = body_op(bb, o);
  for (int32_t j = 0; !s && j < r->n_sinks; j++) s = sink_results(bb, r->sinks[j]);
  if (!s) s = loom_graph_return(bb->body, bb->rets, bb->n_rets);
  if (!s) s = bb->body->error;
  return s;
}

/* Maps sink o's results to the loop's results from `*next` on (a mean is scaled here). */
static loom_status finish_sink(const region *r, loom__rebuild *rb, int32_t o, const loom_value *outs,
                               int32_t *next) {
  const loom__op *sink = &r->g->ops[o];
  if (!r->reducing[o] || sink->kind == LOOM_OP_TOPK) {
    for (int32_t k = 0; k < sink->n_outputs; k++) loom__rebuild_set(rb, sink->outputs[k], outs[(*next)++]);
    return rb->dst->error;
  }
  if (sink->kind == LOOM_OP_ARGMAX || sink->kind == LOOM_OP_ARGMIN) {
    loom__rebuild_set(rb, sink->outputs[0], outs[*next + 1]); /* the values' partner: indices */
    *next += 2;
    return rb->dst->error;
  }
  loom_value v = outs[(*next)++];
  if (sink->kind == LOOM_OP_REDUCE_MEAN) {
    /* the pieces' sums over every reduced axis, summed: divided by all those elements */
    const loom_type *in = &r->g->values[sink->inputs[0]].type;
    double count = 1;
    for (int32_t d = 0; d < in->rank; d++)
      if (loom__axes_contain(&sink->attrs, d, in->rank)) count *= (double)in->dims[d];
    loom_dtype dt = r->g->values[sink->outputs[0]].type.dtype;
    v = loom_binary(rb->dst, LOOM_OP_MUL, v, loom_scalar_f64(rb->dst, dt, 1.0 / count));
  }
  loom__rebuild_set(rb, sink->outputs[0], v);
  return rb->dst->error;
}

/* A body the loop builder refuses is a cut this region cannot take, not the user's error: the
 * search goes on with the next cut, and the message (should no cut be left) names the user's
 * op, not a value of the generated body ("loop body: add 'v11' ..."). */
static loom_status refuse_body(const region *r) {
  char buf[32], why[160];
  snprintf(why, sizeof why, "%s", loom_last_error());
  const loom__op *sink = &r->g->ops[r->sink];
  return loom__error(LOOM_ERR_UNSUPPORTED, "chunk: %s '%s' cannot be cut along %s axis %d (%s)",
                     loom_op_name(sink->kind), loom__value_label(r->g, sink->outputs[0], buf, sizeof buf),
                     r->mode == MODE_PARALLEL ? "its result's" : "the reduced", (int)r->axis, why);
}

/* The graph with the region run as one loop in pieces of c. */
loom_status loom__chunk_emit_loop(const region *r, int64_t c, loom_graph **out) {
  const loom_graph *g = r->g;
  *out = NULL;
  atomic_fetch_add(&pieces_emitted, 1);
  body_build bb;
  loom_status s = build_body(r, c, &bb);
  loom__rebuild rb;
  bool rb_ok = false;
  if (!s) s = loom__rebuild_init(&rb, g);
  rb_ok = s == LOOM_OK;
  for (int32_t o = 0; !s && o < g->n_ops; o++)
    if (!r->in_region[o] && !r->downstream[o]) s = loom__rebuild_copy(&rb, o);
  loom_value operands[256], outs[LOOM_LOOP_MAX_RESULTS];
  if (!s && bb.n_params > 256)
    s = loom__error(LOOM_ERR_UNSUPPORTED, "chunk: a region reading more than 256 values");
  for (int32_t p = 0; !s && p < bb.n_params; p++) operands[p] = loom__rebuild_get(&rb, bb.pvalue[p]);
  if (!s)
    s = loom_graph_add_loop(rb.dst, r->extent, c, bb.body, operands, bb.rules, bb.n_params, bb.combines,
                            bb.n_rets, outs);
  if (s == LOOM_ERR_INVALID_ARGUMENT) s = refuse_body(r);
  if (!s) s = loom_graph_loop_set_slices(rb.dst, rb.dst->n_ops - 1, r->slices);
  int32_t next = 0;
  for (int32_t j = 0; !s && j < r->n_sinks; j++) s = finish_sink(r, &rb, r->sinks[j], outs, &next);
  for (int32_t o = 0; !s && o < g->n_ops; o++)
    if (r->downstream[o] || r->dup[o]) s = loom__rebuild_copy(&rb, o);
  if (!s) s = loom__rebuild_finish(&rb, out);
  if (rb_ok) loom__rebuild_deinit(&rb);
  body_build_free(&bb);
  return s;
}
