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

#include "ir/passes.h"
#include "ir/repiece.h"
#include "ir/view.h"

/* AX_WINDOW + a: read through a window along axis a (a conv's x along a spatial axis: each
 * piece of its output reads the rows of its receptive fields, overlapping the next piece's). */
enum { AX_UNSET = -2, AX_WHOLE = -1, AX_FAIL = -3, AX_WINDOW = LOOM_LOOP_WINDOW };
enum { MAX_ROUNDS = 16 };

/* Loop bodies emitted since the process started, the search's included
 * (loom__chunk_pieces_emitted). */
static _Atomic int64_t pieces_emitted;

int64_t loom__chunk_pieces_emitted(void) {
  return atomic_load(&pieces_emitted);
}

typedef enum chunk_mode { MODE_PARALLEL, MODE_REDUCED } chunk_mode;

typedef struct region {
  const loom_graph *g;
  int32_t sink; /* the sink the cut was chosen for */
  chunk_mode mode;
  int32_t axis;   /* parallel: axis of the sink's results; reduced: of its input */
  int64_t extent; /* length of that axis */
  int32_t *sinks; /* every sink, in op order: the first sink and those that joined it */
  int32_t n_sinks;
  int32_t *sink_axis; /* per op: for a sink, its cut axis (of its results or its input) */
  /* per op: a sink that reduces its input's cut axis (combined across pieces), not one whose
   * results hold the axis (written in place). Every sink of a reduced region reduces, but a
   * returned value that the region reads joins either kind of region as one that does not. */
  bool *reducing;
  int32_t *axis_of;     /* per value: the axis a region value is cut along */
  int32_t *out_axis;    /* per op: the axis its results are cut along (region ops) */
  bool *in_region;      /* per op */
  bool *downstream;     /* per op: reads a region result, so runs after the pieces */
  int32_t *uses;        /* per value */
  int32_t *region_uses; /* per value: reads by region ops */
  int64_t min_piece;    /* topk merged across pieces needs pieces of at least k */
  bool even_pieces;     /* a q4 value is read along its rows: pieces start on whole bytes */
  /* A region inside a loop's body (g is that body): each candidate body is put back into a
   * copy of `outer` at loop op `outer_op`, and measured there. NULL at the top. */
  const loom_graph *outer;
  int32_t outer_op;
  int32_t slices; /* the loop's streamed slices (loom_optimize_options.slices) */
} region;

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
  return map_back(r->g, &r->g->ops[o], r->out_axis[o], i);
}

static void region_free(region *r) {
  loom__free(r->axis_of);
  loom__free(r->out_axis);
  loom__free(r->in_region);
  loom__free(r->downstream);
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
  /* A broadcast that makes the cut axis out of an operand read whole would bring the piece's
   * length into the body through its shape alone, which no body may (docs/ir-loops.md: the
   * piece enters through the parameters; a last, shorter piece could not be retyped). Left
   * out, its result (a view) is the loop's sliced operand instead. */
  if (op->kind == LOOM_OP_BROADCAST && ax >= 0 && ax < AX_WINDOW && map_back(r->g, op, ax, 0) == AX_WHOLE &&
      r->g->values[op->outputs[0]].type.dims[ax] != 1)
    return false;
  r->out_axis[o] = ax;
  for (int32_t i = 0; i < op->n_inputs; i++)
    if (operand_axis(r, o, i) == AX_FAIL) return false;
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
static bool reduced_by(const loom__op *op, int32_t ax, int32_t rank) {
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

/* Makes op c, which reads a region value as operand i, a further sink cut the same way:
 * parallel, along the axis of its results that reads the value's cut axis; reduced, when it
 * reduces that axis of its input 0. False when it cannot. */
static bool join_sink(region *r, int32_t c, int32_t i) {
  const loom_graph *g = r->g;
  const loom__op *op = &g->ops[c];
  int32_t a = r->axis_of[op->inputs[i]];
  if (a < 0 || a >= AX_WINDOW) return false;
  if (r->mode == MODE_REDUCED) {
    const loom_type *t = &g->values[op->inputs[0]].type;
    /* topk's merge needs pieces of at least k, fixed by the first sink */
    if (i != 0 || op->kind == LOOM_OP_TOPK || t->dims[a] != r->extent || !reduced_by(op, a, t->rank))
      return false;
    r->sink_axis[c] = a;
    r->reducing[c] = true;
    if (join(r, c, a)) return true;
    r->sink_axis[c] = AX_FAIL;
    r->reducing[c] = false;
    return false;
  }
  const loom_type *ot = &g->values[op->outputs[0]].type;
  for (int32_t ax = 0; ax < ot->rank; ax++) {
    if (ot->dims[ax] != r->extent || map_back(g, op, ax, i) != a) continue;
    for (int32_t k = 1; k < op->n_outputs; k++)
      if (g->values[op->outputs[k]].type.rank <= ax || g->values[op->outputs[k]].type.dims[ax] != r->extent)
        return false;
    r->sink_axis[c] = ax;
    if (join(r, c, ax)) return true;
    r->sink_axis[c] = AX_FAIL;
  }
  return false;
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

static loom_status region_build(region *r, const loom_graph *g, int32_t sink, chunk_mode mode, int32_t axis,
                                bool more_sinks) {
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
  r->uses = loom__malloc(nv * sizeof(int32_t));
  r->region_uses = loom__calloc(nv, sizeof(int32_t));
  if (!r->axis_of || !r->out_axis || !r->sink_axis || !r->sinks || !r->reducing || !r->in_region ||
      !r->downstream || !r->uses || !r->region_uses)
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
      else if (more_sinks && join_readers_as_sinks(r, o))
        changed = true;
      else if (more_sinks && join_returned_as_sink(r, o))
        changed = true;
    }
    if (more_sinks && join_input_readers_as_sinks(r)) changed = true;
  }
  for (int32_t o = 0; o < g->n_ops; o++)
    if (is_sink(r, o)) r->sinks[r->n_sinks++] = o;
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

/* The graph with the region run as one loop in pieces of c. */
static loom_status emit_loop(const region *r, int64_t c, loom_graph **out) {
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
  if (!s) s = loom_graph_loop_set_slices(rb.dst, rb.dst->n_ops - 1, r->slices);
  int32_t next = 0;
  for (int32_t j = 0; !s && j < r->n_sinks; j++) s = finish_sink(r, &rb, r->sinks[j], outs, &next);
  for (int32_t o = 0; !s && o < g->n_ops; o++)
    if (r->downstream[o]) s = loom__rebuild_copy(&rb, o);
  if (!s) s = loom__rebuild_finish(&rb, out);
  if (rb_ok) loom__rebuild_deinit(&rb);
  body_build_free(&bb);
  return s;
}

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
  loom_status s = emit_loop(r, c, &looped);
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
  loom_status s = emit_loop(r, c, &cand);
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

/* The piece of the inner loop in the body of g's loop over n in pieces of c (1 if none). */
static int64_t inner_piece(const loom_graph *g, int64_t n, int64_t c) {
  for (int32_t i = 0; g && i < g->n_ops; i++) {
    const loom__loop *l = g->ops[i].loop;
    if (!l || l->n != n || l->piece != c) continue;
    for (int32_t j = 0; j < l->body->n_ops; j++)
      if (l->body->ops[j].loop) return l->body->ops[j].loop->piece;
  }
  return 1;
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
   * along k run at a fraction of the speed. Shorter outer pieces are tried too, and the one
   * whose inner piece times outer piece (the tile an inner piece computes) is largest wins. */
  int64_t best_c = fits, best_area = fits * inner_piece(best, r->extent, fits);
  for (int64_t c = fits / 2; c >= lo && s == LOOM_OK; c /= 2) {
    loom_graph *g = NULL;
    loom_status t = nested_try(r, c, cs->limit, &g, detail, sizeof detail);
    if (t == LOOM_ERR_UNSUPPORTED || t == LOOM_ERR_OUT_OF_MEMORY) break;
    if ((s = t)) break;
    int64_t area = c * inner_piece(g, r->extent, valid_piece(r, c)); /* c valid: nested_try made g */
    if (area > best_area) {
      loom_graph_destroy(best);
      best = g;
      best_c = c;
      best_area = area;
      snprintf(cs->nested_detail, sizeof cs->nested_detail, "%s", detail);
    } else {
      loom_graph_destroy(g);
    }
    if (c == lo) break;
  }
  if (s) {
    loom_graph_destroy(best);
    return s;
  }
  *out = best;
  *out_c = valid_piece(r, best_c);
  return LOOM_OK;
}

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
  /* First with every reader that can be cut the same way as a further sink; then, when that
   * did not fit (a piece would wait for a whole result, or the further sinks' results are too
   * big together), the first sink alone. */
  for (int attempt = 0; attempt < 2 && s == LOOM_ERR_UNSUPPORTED; attempt++) {
    s = region_build(&r, g, sink, mode, axis, attempt == 0);
    r.outer = outer;
    r.outer_op = outer_op;
    r.slices = cs->slices;
    bool alone = s == LOOM_OK && r.n_sinks == 1;
    if (!s && r.extent < 2) s = LOOM_ERR_UNSUPPORTED;
    if (!s) s = best_piece(&r, cs, out, &c);
    if (!s) break;
    if (cs->fallback_new) {
      cs->fallback_new = false;
      describe_cut(g, &r, sink, mode, axis, cs->fallback_c, cs->fallback_detail, sizeof cs->fallback_detail);
    }
    region_free(&r);
    if (alone) return s; /* the second attempt would build the same region */
  }
  if (s) return s;
  describe_cut(g, &r, sink, mode, axis, c, detail, detail_size);
  if (cs->nested_detail[0]) {
    size_t used = strlen(detail);
    snprintf(detail + used, detail_size - used, "; %s", cs->nested_detail);
  }
  region_free(&r);
  return s;
}

/* One round: cuts the region around the peak op so the graph's peak drops. */
static loom_status chunk_round(const loom_graph *g, const loom_graph *outer, int32_t outer_op,
                               int32_t peak_op, chunk_search *cs, loom_graph **out, char *detail,
                               size_t detail_size) {
  int32_t sinks[64];
  int32_t n = collect_sinks(g, peak_op, sinks, 64);
  for (int32_t k = 0; k < n; k++) {
    const loom__op *op = &g->ops[sinks[k]];
    const loom_type *rt = &g->values[op->outputs[0]].type;
    for (int32_t ax = 0; ax < rt->rank; ax++) {
      loom_status s = try_cut(g, outer, outer_op, sinks[k], MODE_PARALLEL, ax, cs, out, detail, detail_size);
      if (s != LOOM_ERR_UNSUPPORTED) return s;
    }
    const loom_type *it = &g->values[op->inputs[0]].type;
    for (int32_t ax = 0; ax < it->rank; ax++) {
      if (!reduced_by(op, ax, it->rank)) continue;
      loom_status s = try_cut(g, outer, outer_op, sinks[k], MODE_REDUCED, ax, cs, out, detail, detail_size);
      if (s != LOOM_ERR_UNSUPPORTED) return s;
    }
  }
  return LOOM_ERR_UNSUPPORTED;
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

loom_status loom__rewrite_chunk(const loom_graph *g, const loom_optimize_options *opts, loom_graph **out,
                                loom_rewrite_report *report) {
  *out = NULL;
  int64_t limit = opts ? opts->limit : 0;
  int32_t slices = opts && opts->slices ? opts->slices : LOOM_LOOP_SLICES_DEFAULT;
  loom_graph *cur;
  loom_status s = loom_graph_clone(g, &cur);
  if (s || limit <= 0) {
    *out = s ? NULL : cur;
    return s;
  }
  for (int32_t round = 0; round < MAX_ROUNDS; round++) {
    loom_estimate e;
    if ((s = loom_graph_estimate(cur, NULL, &e))) break;
    if (e.peak_bytes <= limit) {
      loom_estimate_deinit(&e);
      *out = cur;
      return LOOM_OK;
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
