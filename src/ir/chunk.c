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
 * A value the region computes may also be read by another op that can itself be cut the same
 * way (two reductions of one intermediate, two heads of one score matrix): that op joins the
 * region as a further sink, so each piece is computed once and read by every sink, and no
 * whole copy of the value is ever made.
 * The piece size is the largest for which the estimator says the rewritten graph fits, so
 * the promise is checked by the same model the executor's meter follows.
 */
#include <stdatomic.h>
#include <string.h>

#include "ir/passes.h"

enum { AX_UNSET = -2, AX_WHOLE = -1, AX_FAIL = -3 };
enum { MAX_PIECES = 1 << 17, MAX_ROUNDS = 16 };

/* Pieces emitted since the process started, probes included (loom__chunk_pieces_emitted). */
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
  int32_t *sink_axis;   /* per op: for a sink, its cut axis (of its results or its input) */
  int32_t *axis_of;     /* per value: the axis a region value is cut along */
  int32_t *out_axis;    /* per op: the axis its results are cut along (region ops) */
  bool *in_region;      /* per op */
  bool *downstream;     /* per op: reads a region result, so runs after the pieces */
  int32_t *uses;        /* per value */
  int32_t *region_uses; /* per value: reads by region ops */
  bool probe;           /* emit only the first three pieces: a quick estimate of a piece size */
  int64_t min_piece;    /* topk merged across pieces needs pieces of at least k */
} region;

static int64_t norm_axis(int64_t axis, int32_t rank) {
  return axis < 0 ? axis + rank : axis;
}

static bool reduces_axis(const loom_attrs *a, int32_t j, int32_t rank) {
  for (int32_t k = 0; k < a->axes.count; k++)
    if (norm_axis(a->axes.v[k], rank) == j) return true;
  return false;
}

/* Input axis j of an operand broadcast to `out`, for output axis ax. */
static int32_t map_broadcast(const loom_type *in, const loom_type *out, int32_t ax) {
  int32_t j = ax - (out->rank - in->rank);
  if (j < 0 || (in->dims[j] == 1 && out->dims[ax] != 1)) return AX_WHOLE;
  return j;
}

static int32_t map_dot(const loom_type *in, const loom_type *other, const loom_type *out, int32_t ax,
                       int32_t i) {
  if (in->rank < 2 || other->rank < 2) return AX_FAIL;
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
        if (!reduces_axis(a, j, in->rank) && ++seen == ax) return j;
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
      return ax == 0 ? (i == 0 ? 0 : AX_WHOLE) : AX_FAIL;
    case LOOM_CLASS_LAYOUT:
      if (op->kind == LOOM_OP_TRANSPOSE) return (int32_t)a->perm.v[ax];
      if (op->kind == LOOM_OP_BROADCAST) return map_broadcast(in, out, ax);
      if (op->kind == LOOM_OP_RESHAPE) return map_reshape(in, out, ax);
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
  if (r->mode == MODE_REDUCED && is_sink(r, o)) return sink_operand_axis(r, o, i);
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
  memset(r, 0, sizeof *r);
}

/* Adds op o to the region with its results cut along ax, and marks what it reads. */
static bool join(region *r, int32_t o, int32_t ax) {
  const loom__op *op = &r->g->ops[o];
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
    if (r->region_uses[v] != r->uses[v] || r->axis_of[v] < 0) return AX_FAIL;
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
      return reduces_axis(&op->attrs, ax, rank);
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
  if (a < 0) return false;
  if (r->mode == MODE_REDUCED) {
    const loom_type *t = &g->values[op->inputs[0]].type;
    /* topk's merge needs pieces of at least k, fixed by the first sink */
    if (i != 0 || op->kind == LOOM_OP_TOPK || t->dims[a] != r->extent || !reduced_by(op, a, t->rank))
      return false;
    r->sink_axis[c] = a;
    if (join(r, c, a)) return true;
    r->sink_axis[c] = AX_FAIL;
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
    if (r->region_uses[v] == 0 || r->axis_of[v] < 0) return false;
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

/* Marks the ops that run after the pieces (they read a sink's result, or a region value from
 * outside the region), and checks that no region op needs such a result: a piece cannot wait
 * for the whole. */
static bool mark_downstream(region *r) {
  const loom_graph *g = r->g;
  for (int32_t o = 0; o < g->n_ops; o++) {
    bool waits = false;
    for (int32_t i = 0; i < g->ops[o].n_inputs && !waits; i++) {
      int32_t p = g->values[g->ops[o].inputs[i]].op;
      waits = p >= 0 && (is_sink(r, p) || r->downstream[p] || (r->in_region[p] && !r->in_region[o]));
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
  r->in_region = loom__calloc(no, sizeof(bool));
  r->downstream = loom__calloc(no, sizeof(bool));
  r->uses = loom__malloc(nv * sizeof(int32_t));
  r->region_uses = loom__calloc(nv, sizeof(int32_t));
  if (!r->axis_of || !r->out_axis || !r->sink_axis || !r->sinks || !r->in_region || !r->downstream ||
      !r->uses || !r->region_uses)
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
    }
  }
  for (int32_t o = 0; o < g->n_ops; o++)
    if (is_sink(r, o)) r->sinks[r->n_sinks++] = o;
  return mark_downstream(r) ? LOOM_OK : LOOM_ERR_UNSUPPORTED;
}

/* ---- emitting the chunked graph ------------------------------------------------------ */

typedef struct piece {
  int64_t lo, hi;
  int32_t *local; /* per src value: its piece in dst, valid when stamp matches */
  int32_t *stamp;
  int32_t id;
} piece;

static loom_value slice_along(loom_graph *dst, loom_value whole, int32_t axis, int64_t lo, int64_t hi) {
  const loom_type *t = loom_value_type(dst, whole);
  if (!t) return LOOM_VALUE_NONE;
  int64_t start[LOOM_MAX_RANK] = {0}, stop[LOOM_MAX_RANK];
  for (int32_t i = 0; i < t->rank; i++) stop[i] = t->dims[i];
  start[axis] = lo;
  stop[axis] = hi;
  return loom_slice(dst, whole, t->rank, start, stop, NULL);
}

static loom_value piece_operand(const region *r, loom__rebuild *rb, piece *pc, int32_t o, int32_t i) {
  int32_t v = r->g->ops[o].inputs[i];
  int32_t producer = r->g->values[v].op;
  if (producer >= 0 && r->in_region[producer]) return (loom_value){pc->local[v]};
  loom_value whole = loom__rebuild_get(rb, v);
  int32_t ax = operand_axis(r, o, i);
  return ax >= 0 ? slice_along(rb->dst, whole, ax, pc->lo, pc->hi) : whole;
}

static loom_status emit_piece_op(const region *r, loom__rebuild *rb, piece *pc, int32_t o) {
  const loom__op *op = &r->g->ops[o];
  loom_value ins[16];
  if (op->n_inputs > 16)
    return loom__error(LOOM_ERR_UNSUPPORTED, "chunk: %s has too many operands", loom_op_name(op->kind));
  for (int32_t i = 0; i < op->n_inputs; i++) ins[i] = piece_operand(r, rb, pc, o, i);
  loom_attrs attrs = op->attrs;
  loom_op kind = op->kind;
  int32_t ax = r->out_axis[o];
  if ((kind == LOOM_OP_RESHAPE || kind == LOOM_OP_BROADCAST) && ax >= 0 && attrs.shape.v[ax] != -1)
    attrs.shape.v[ax] = pc->hi - pc->lo;
  if (r->mode == MODE_REDUCED && is_sink(r, o) && kind == LOOM_OP_REDUCE_MEAN) kind = LOOM_OP_REDUCE_SUM;
  loom_value outs[2] = {LOOM_VALUE_NONE, LOOM_VALUE_NONE};
  loom_status s = loom_graph_add(rb->dst, kind, ins, op->n_inputs, &attrs, NULL, NULL, outs, op->n_outputs);
  if (s) return s;
  for (int32_t k = 0; k < op->n_outputs; k++) {
    pc->local[op->outputs[k]] = outs[k].id;
    pc->stamp[op->outputs[k]] = pc->id;
  }
  return LOOM_OK;
}

static loom_value combine(loom_graph *dst, loom_op reduce, loom_value acc, loom_value part) {
  if (acc.id < 0) return part;
  loom_op op = reduce == LOOM_OP_REDUCE_PROD  ? LOOM_OP_MUL
               : reduce == LOOM_OP_REDUCE_MAX ? LOOM_OP_MAXIMUM
               : reduce == LOOM_OP_REDUCE_MIN ? LOOM_OP_MINIMUM
                                              : LOOM_OP_ADD;
  return loom_binary(dst, op, acc, part);
}

static loom_value scalar_i64(loom_graph *dst, int64_t v) {
  return loom_scalar_f64(dst, LOOM_I64, (double)v);
}

/* x[..., pos[..., j]] along the last axis, from IR ops alone: a one-hot mask of the positions
 * selects, and a sum gathers (small: the candidates of a topk merge). */
static loom_value gather_last(loom_graph *dst, loom_value x, loom_value pos) {
  const loom_type *xt = loom_value_type(dst, x), *pt = loom_value_type(dst, pos);
  if (!xt || !pt) return LOOM_VALUE_NONE;
  int32_t r = xt->rank;
  int64_t xs[LOOM_MAX_RANK], ps[LOOM_MAX_RANK], m = xt->dims[r - 1];
  for (int32_t i = 0; i < r - 1; i++) xs[i] = ps[i] = xt->dims[i];
  xs[r - 1] = 1, xs[r] = m;
  ps[r - 1] = pt->dims[r - 1], ps[r] = 1;
  loom_type it;
  if (r + 1 > LOOM_MAX_RANK || loom_type_make(LOOM_I64, 1, &m, &it)) return LOOM_VALUE_NONE;
  loom_value mask = loom_binary(dst, LOOM_OP_EQ, loom_reshape(dst, pos, r + 1, ps), loom_iota(dst, &it, 0));
  loom_value picked = loom_select(dst, mask, loom_reshape(dst, x, r + 1, xs), scalar_i64(dst, 0));
  int64_t last = r;
  return loom_reduce(dst, LOOM_OP_REDUCE_SUM, picked, 1, &last, false);
}

/* Folds one piece of an argmax/argmin into acc = (index, value): the piece wins when its best
 * is strictly better, or NaN where acc's is not (NaN counts as largest, the first NaN wins). */
static void merge_arg(loom_graph *dst, loom_op kind, loom_value idx, loom_value val, loom_value *acc) {
  if (acc[0].id < 0) {
    acc[0] = idx, acc[1] = val;
    return;
  }
  loom_value better = loom_binary(dst, kind == LOOM_OP_ARGMAX ? LOOM_OP_GT : LOOM_OP_LT, val, acc[1]);
  loom_value nan_first = loom_binary(dst, LOOM_OP_AND, loom_binary(dst, LOOM_OP_NE, val, val),
                                     loom_binary(dst, LOOM_OP_EQ, acc[1], acc[1]));
  loom_value take = loom_binary(dst, LOOM_OP_OR, better, nan_first);
  acc[0] = loom_select(dst, take, idx, acc[0]);
  acc[1] = loom_select(dst, take, val, acc[1]);
}

/* Folds one piece of a topk into acc = (values, indices): the candidates so far then the
 * piece's, in that order, so ties keep the lower index. */
static void merge_topk(loom_graph *dst, const loom__op *sink, int32_t axis, loom_value vals, loom_value idx,
                       loom_value *acc) {
  if (acc[0].id < 0) {
    acc[0] = vals, acc[1] = idx;
    return;
  }
  loom_value cv = loom_concat(dst, (loom_value[]){acc[0], vals}, 2, axis);
  loom_value ci = loom_concat(dst, (loom_value[]){acc[1], idx}, 2, axis);
  loom_value nv, pos;
  loom_topk(dst, cv, sink->attrs.k, axis, sink->attrs.largest, &nv, &pos);
  acc[0] = nv;
  acc[1] = gather_last(dst, ci, pos);
}

/* Folds the results of sink o for one piece into acc (reduced mode). */
static void merge_piece(const region *r, loom__rebuild *rb, piece *pc, int32_t o, loom_value *acc) {
  const loom__op *sink = &r->g->ops[o];
  int32_t axis = r->sink_axis[o];
  loom_graph *dst = rb->dst;
  loom_value part = {pc->local[sink->outputs[0]]};
  if (sink->kind == LOOM_OP_TOPK) {
    loom_value idx =
        loom_binary(dst, LOOM_OP_ADD, (loom_value){pc->local[sink->outputs[1]]}, scalar_i64(dst, pc->lo));
    merge_topk(dst, sink, axis, part, idx, acc);
  } else if (sink->kind == LOOM_OP_ARGMAX || sink->kind == LOOM_OP_ARGMIN) {
    loom_value idx = loom_binary(dst, LOOM_OP_ADD, part, scalar_i64(dst, pc->lo));
    loom_value in = piece_operand(r, rb, pc, o, 0);
    int64_t ax = axis;
    loom_value val = loom_reduce(dst, sink->kind == LOOM_OP_ARGMAX ? LOOM_OP_REDUCE_MAX : LOOM_OP_REDUCE_MIN,
                                 in, 1, &ax, false);
    merge_arg(dst, sink->kind, idx, val, acc);
  } else {
    acc[0] = combine(dst, sink->kind == LOOM_OP_DOT ? LOOM_OP_REDUCE_SUM : sink->kind, acc[0], part);
  }
}

/* Emits every piece; the results of sink j go to parts[(2 j + k) stride + piece] (parallel)
 * or into acc[2 j], acc[2 j + 1] (reduced). */
static loom_status emit_pieces(const region *r, loom__rebuild *rb, int64_t c, loom_value *parts,
                               int64_t stride, loom_value *acc) {
  const loom_graph *g = r->g;
  piece pc = {0};
  pc.local = loom__malloc(sizeof(int32_t) * (size_t)g->n_values);
  pc.stamp = loom__calloc((size_t)g->n_values, sizeof(int32_t));
  loom_status s = (!pc.local || !pc.stamp) ? loom__oom("chunk pieces") : LOOM_OK;
  int32_t last = r->sinks[r->n_sinks - 1];
  int32_t n = 0;
  int64_t end = r->probe ? LOOM_MIN(r->extent, 3 * c) : r->extent;
  for (int64_t lo = 0; !s && lo < end; lo = pc.hi, n++) {
    pc.lo = lo;
    pc.hi = LOOM_MIN(lo + c, r->extent);
    if (r->extent - pc.hi < r->min_piece) pc.hi = r->extent; /* no last piece shorter than k */
    pc.id = n + 1;
    atomic_fetch_add(&pieces_emitted, 1);
    for (int32_t o = 0; !s && o <= last; o++)
      if (r->in_region[o]) s = emit_piece_op(r, rb, &pc, o);
    for (int32_t j = 0; !s && j < r->n_sinks; j++) {
      const loom__op *sink = &g->ops[r->sinks[j]];
      if (r->mode == MODE_PARALLEL) {
        for (int32_t k = 0; k < sink->n_outputs; k++)
          parts[(2 * j + k) * stride + n] = (loom_value){pc.local[sink->outputs[k]]};
      } else {
        merge_piece(r, rb, &pc, r->sinks[j], &acc[2 * j]);
        if (acc[2 * j].id < 0)
          s = rb->dst->error ? rb->dst->error : loom__error(LOOM_ERR_INTERNAL, "chunk: merge failed");
      }
    }
  }
  loom__free(pc.local);
  loom__free(pc.stamp);
  return s ? s : rb->dst->error;
}

/* Maps the results of sink o to the joined pieces: parts[k stride + piece] (parallel) or
 * acc[0], acc[1] (reduced). */
static loom_status finish_sink(const region *r, loom__rebuild *rb, int32_t o, int32_t n_pieces,
                               int64_t covered, loom_value *parts, loom_value *acc) {
  int64_t stride = n_pieces + 1;
  const loom__op *sink = &r->g->ops[o];
  int32_t axis = r->sink_axis[o];
  if (r->mode == MODE_REDUCED) {
    if (sink->kind == LOOM_OP_REDUCE_MEAN) {
      loom_dtype dt = r->g->values[sink->outputs[0]].type.dtype;
      acc[0] =
          loom_binary(rb->dst, LOOM_OP_MUL, acc[0], loom_scalar_f64(rb->dst, dt, 1.0 / (double)r->extent));
    }
    loom__rebuild_set(rb, sink->outputs[0], acc[0]);
    if (sink->kind == LOOM_OP_TOPK) loom__rebuild_set(rb, sink->outputs[1], acc[1]);
    return rb->dst->error;
  }
  for (int32_t k = 0; k < sink->n_outputs; k++) {
    loom_value *p = &parts[k * stride];
    int32_t n = n_pieces;
    if (r->probe && covered < r->extent) {
      /* A probe emits the first pieces only; a fill (a view, no bytes) stands for the rest so
       * what follows the sink sees the shape it expects. */
      loom_type rest = r->g->values[sink->outputs[k]].type;
      rest.dims[axis] = r->extent - covered;
      p[n++] = loom_fill(rb->dst, &rest, 0.0);
    }
    loom_value joined = n == 1 ? p[0] : loom_concat(rb->dst, p, n, axis);
    loom__rebuild_set(rb, sink->outputs[k], joined);
  }
  return rb->dst->error;
}

/* The graph with the region computed in pieces of c along the axis. */
static loom_status emit_chunked(const region *r, int64_t c, loom_graph **out) {
  const loom_graph *g = r->g;
  *out = NULL;
  int64_t n_pieces = (r->extent + c - 1) / c;
  if (r->probe && n_pieces > 3) n_pieces = 3;
  if (n_pieces > MAX_PIECES)
    return loom__error(LOOM_ERR_OUT_OF_MEMORY, "chunk: more than %d pieces", MAX_PIECES);
  loom_value *parts = NULL, *acc = loom__malloc(sizeof(loom_value) * 2 * (size_t)r->n_sinks);
  if (acc && r->mode == MODE_PARALLEL)
    parts = loom__malloc(sizeof(loom_value) * 2 * (size_t)r->n_sinks * (size_t)(n_pieces + 1));
  if (!acc || (r->mode == MODE_PARALLEL && !parts)) {
    loom__free(acc);
    return loom__oom("chunk pieces");
  }
  for (int32_t j = 0; j < 2 * r->n_sinks; j++) acc[j] = LOOM_VALUE_NONE;
  loom__rebuild rb;
  loom_status s = loom__rebuild_init(&rb, g);
  for (int32_t o = 0; !s && o < g->n_ops; o++)
    if (!r->in_region[o] && !r->downstream[o]) s = loom__rebuild_copy(&rb, o);
  if (!s) s = emit_pieces(r, &rb, c, parts, n_pieces + 1, acc);
  for (int32_t j = 0; !s && j < r->n_sinks; j++)
    s = finish_sink(r, &rb, r->sinks[j], (int32_t)n_pieces, LOOM_MIN(r->extent, n_pieces * c),
                    parts ? &parts[2 * j * (n_pieces + 1)] : NULL, &acc[2 * j]);
  for (int32_t o = 0; !s && o < g->n_ops; o++)
    if (r->downstream[o]) s = loom__rebuild_copy(&rb, o);
  if (!s) s = loom__rebuild_finish(&rb, out);
  loom__rebuild_deinit(&rb);
  loom__free(parts);
  loom__free(acc);
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

/* The estimated peak of the region cut in pieces of c; probe: from its first three pieces,
 * which hold as much at once as any later piece does, less the results gathered so far. */
static loom_status piece_peak(region *r, int64_t c, bool probe, loom_graph **keep, int64_t *peak) {
  loom_graph *cand = NULL;
  r->probe = probe;
  loom_status s = emit_chunked(r, c, &cand);
  r->probe = false;
  if (!s) s = peak_of(cand, peak);
  if (!s && keep)
    *keep = cand;
  else
    loom_graph_destroy(cand);
  return s;
}

/* What the search for a cut has found: `least` is the smallest need it saw over the limit
 * (a whole chunked graph's peak, else a probe's, which that graph cannot go under), for the
 * refusal's message. */
typedef struct chunk_search {
  int64_t limit;
  int64_t least;
} chunk_search;

/* Fewest elements a piece may have: k for a topk merge, and no more than MAX_PIECES pieces. */
static int64_t smallest_piece(const region *r) {
  return LOOM_MAX(r->min_piece, (r->extent + MAX_PIECES - 1) / MAX_PIECES);
}

/* The largest c in [lo, extent) (to within 1/16) whose probe fits the limit; 0 when none
 * does. A probe's peak grows with c, so the lengths that fit are a prefix: halved from half the
 * extent until one fits, then bisected. Probes cost three pieces whatever c is. */
static loom_status probe_search(region *r, int64_t lo, chunk_search *cs, int64_t *out_c) {
  int64_t fits = 0, fails = r->extent, peak;
  *out_c = 0;
  for (int64_t c = LOOM_MAX(r->extent / 2, lo); fails - fits > LOOM_MAX(1, fits / 16);) {
    loom_status s = piece_peak(r, c, true, NULL, &peak);
    if (s) return s;
    if (peak <= cs->limit)
      fits = c;
    else
      fails = c, cs->least = LOOM_MIN(cs->least, peak);
    if (fits == 0 && c <= lo) break;
    c = fits == 0 ? LOOM_MAX(c / 2, lo) : (fits + fails) / 2;
  }
  *out_c = fits;
  return LOOM_OK;
}

/* The largest piece length c < extent for which the chunked graph fits the limit: searched on
 * probes, then checked on the whole rewritten graph, shrinking c by a quarter while the
 * results gathered from every piece still pass the limit. The part of the need that shrinks
 * with the pieces is at most linear in c, so the steps left can take off at most three times
 * what the last step did: when even four times that leaves the need over the limit (what is
 * held beside the pieces passes it alone), the cut is given up after a few rebuilds instead of
 * one per length down to the smallest (issue 16: 30 s and 2 GB for a refusal). */
static loom_status best_piece(region *r, chunk_search *cs, loom_graph **out, int64_t *out_c) {
  int64_t lo = smallest_piece(r), c = 0, before = -1;
  if (r->extent / 2 < lo) return LOOM_ERR_UNSUPPORTED;
  loom_status s = probe_search(r, lo, cs, &c);
  while (!s && c > 0) {
    loom_graph *cand = NULL;
    int64_t whole;
    if ((s = piece_peak(r, c, false, &cand, &whole))) break;
    if (whole <= cs->limit) {
      *out = cand;
      *out_c = c;
      return LOOM_OK;
    }
    loom_graph_destroy(cand);
    cs->least = LOOM_MIN(cs->least, whole);
    if (c == lo || (before >= 0 && whole - 4 * (before - whole) > cs->limit)) break;
    before = whole;
    c = LOOM_MAX(c * 3 / 4, lo);
  }
  return s ? s : LOOM_ERR_UNSUPPORTED;
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

/* Tries one (sink, mode, axis); LOOM_ERR_UNSUPPORTED when that cut does not fit. */
static loom_status try_cut(const loom_graph *g, int32_t sink, chunk_mode mode, int32_t axis, chunk_search *cs,
                           loom_graph **out, char *detail, size_t detail_size) {
  region r;
  int64_t c = 0;
  loom_status s = LOOM_ERR_UNSUPPORTED;
  /* First with every reader that can be cut the same way as a further sink; then, when that
   * did not fit (a piece would wait for a whole result, or the further sinks' results are too
   * big together), the first sink alone. */
  for (int attempt = 0; attempt < 2 && s == LOOM_ERR_UNSUPPORTED; attempt++) {
    s = region_build(&r, g, sink, mode, axis, attempt == 0);
    bool alone = s == LOOM_OK && r.n_sinks == 1;
    if (!s && r.extent < 2) s = LOOM_ERR_UNSUPPORTED;
    if (!s) s = best_piece(&r, cs, out, &c);
    if (!s) break;
    region_free(&r);
    if (alone) return s; /* the second attempt would build the same region */
  }
  if (s) return s;
  char buf[32], more[48] = "";
  int32_t n_ops = 0;
  for (int32_t o = 0; o < g->n_ops; o++) n_ops += r.in_region[o];
  if (r.n_sinks > 1)
    snprintf(more, sizeof more, " (with %d more sink%s)", (int)(r.n_sinks - 1), r.n_sinks > 2 ? "s" : "");
  snprintf(detail, detail_size,
           "%s '%s'%s and the %d ops before it, along %s axis %d, in %lld pieces of %lld",
           loom_op_name(g->ops[sink].kind), loom__value_label(g, g->ops[sink].outputs[0], buf, sizeof buf),
           more, (int)(n_ops - r.n_sinks), mode == MODE_PARALLEL ? "its result's" : "the reduced", (int)axis,
           (long long)((r.extent + c - 1) / c), (long long)c);
  region_free(&r);
  return s;
}

/* One round: cuts the region around the peak op so the graph's peak drops. */
static loom_status chunk_round(const loom_graph *g, int32_t peak_op, chunk_search *cs, loom_graph **out,
                               char *detail, size_t detail_size) {
  int32_t sinks[64];
  int32_t n = collect_sinks(g, peak_op, sinks, 64);
  for (int32_t k = 0; k < n; k++) {
    const loom__op *op = &g->ops[sinks[k]];
    const loom_type *rt = &g->values[op->outputs[0]].type;
    for (int32_t ax = 0; ax < rt->rank; ax++) {
      loom_status s = try_cut(g, sinks[k], MODE_PARALLEL, ax, cs, out, detail, detail_size);
      if (s != LOOM_ERR_UNSUPPORTED) return s;
    }
    const loom_type *it = &g->values[op->inputs[0]].type;
    for (int32_t ax = 0; ax < it->rank; ax++) {
      if (!reduced_by(op, ax, it->rank)) continue;
      loom_status s = try_cut(g, sinks[k], MODE_REDUCED, ax, cs, out, detail, detail_size);
      if (s != LOOM_ERR_UNSUPPORTED) return s;
    }
  }
  return LOOM_ERR_UNSUPPORTED;
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

static loom_status check_inputs_fit(const loom_graph *g, int64_t limit) {
  for (int32_t p = 0; p < g->n_params; p++) {
    int64_t bytes;
    loom_type_bytes(&g->values[g->params[p]].type, &bytes);
    if (bytes > limit) {
      char name[32], need[32], lim[32];
      return loom__error(LOOM_ERR_OUT_OF_MEMORY, "input '%s' holds %s, more than the limit of %s",
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
  loom_graph *cur;
  loom_status s = loom_graph_clone(g, &cur);
  if (s || limit <= 0) {
    *out = s ? NULL : cur;
    return s;
  }
  if ((s = check_inputs_fit(g, limit))) {
    loom_graph_destroy(cur);
    return s;
  }
  for (int32_t round = 0; round < MAX_ROUNDS; round++) {
    loom_estimate e;
    if ((s = loom_graph_estimate(cur, NULL, &e))) break;
    if (e.peak_bytes <= limit || e.peak_step < 0) {
      loom_estimate_deinit(&e);
      *out = cur;
      return LOOM_OK;
    }
    char detail[256];
    loom_graph *next = NULL;
    chunk_search cs = {limit, INT64_MAX};
    s = chunk_round(cur, e.steps[e.peak_step].op, &cs, &next, detail, sizeof detail);
    if (s == LOOM_ERR_UNSUPPORTED) s = too_big(cur, &e, &cs);
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
