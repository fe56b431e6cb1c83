/* Loops (docs/ir-loops.md): a body graph run over pieces of one axis.
 *
 * The body is typed for a full piece. Which of its values depend on the piece's length, and
 * along which axis, follows from the parameters' sliced axes through each op
 * (loom__loop_piece_axes); that one map is what checks a loop (a CONCAT result varies with
 * the piece along its axis, every other result not at all) and what retypes the body for the
 * last, shorter piece (loom__loop_body_for): the same ops on shorter parameters, with the
 * piece's length put into the `shape` of the reshapes and broadcasts that carry it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"

static const char *const combine_names[LOOM_COMBINE_COUNT] = {
    [LOOM_COMBINE_CONCAT] = "concat", [LOOM_COMBINE_SUM] = "sum",   [LOOM_COMBINE_PROD] = "prod",
    [LOOM_COMBINE_MAX] = "max",       [LOOM_COMBINE_MIN] = "min",   [LOOM_COMBINE_ARGMAX] = "argmax",
    [LOOM_COMBINE_ARGMIN] = "argmin", [LOOM_COMBINE_TOPK] = "topk", [LOOM_COMBINE_INDEX] = "index",
};

const char *loom_combine_name(loom_combine c) {
  return ((int)c >= 0 && c < LOOM_COMBINE_COUNT) ? combine_names[c] : "?";
}

void loom__loop_free(loom__loop *loop) {
  if (!loop) return;
  loom_graph_destroy(loop->body);
  loom__free(loop->rules);
  loom__free(loop->combines);
  loom__free(loop);
}

static loom__loop *loop_make(const loom_graph *body, int64_t n, int64_t piece, const loom_loop_input *rules,
                             int32_t n_rules, const loom_loop_output *combines, int32_t n_combines) {
  loom__loop *l = loom__calloc(1, sizeof *l);
  if (!l) return NULL;
  l->n = n;
  l->piece = piece;
  l->slices = LOOM_LOOP_SLICES_DEFAULT;
  l->rules = loom__malloc(sizeof *rules * (size_t)LOOM_MAX(n_rules, 1));
  l->combines = loom__malloc(sizeof *combines * (size_t)LOOM_MAX(n_combines, 1));
  if (!l->rules || !l->combines || loom_graph_clone(body, &l->body)) {
    loom__loop_free(l);
    return NULL;
  }
  if (n_rules) memcpy(l->rules, rules, sizeof *rules * (size_t)n_rules);
  if (n_combines) memcpy(l->combines, combines, sizeof *combines * (size_t)n_combines);
  return l;
}

loom__loop *loom__loop_clone(const loom__loop *l) {
  loom__loop *c =
      loop_make(l->body, l->n, l->piece, l->rules, l->body->n_params, l->combines, l->body->n_outputs);
  if (c) c->slices = l->slices;
  return c;
}

int64_t loom__loop_trips(const loom__loop *l) {
  return (l->n + l->piece - 1) / l->piece;
}

bool loom__loop_windowed(const loom_loop_input *r) {
  return r->axis >= 0 && (r->stride > 1 || r->halo > 0);
}

void loom__loop_window(const loom_loop_input *r, int64_t lo, int64_t len, int64_t *first, int64_t *count) {
  int64_t step = r->stride > 1 ? r->stride : 1;
  *first = r->offset + lo * step;
  *count = len > 0 ? (len - 1) * step + 1 + r->halo : 0;
}

bool loom__loop_window_pads(const loom__loop *l, int32_t i, int64_t dim) {
  const loom_loop_input *r = &l->rules[i];
  if (!loom__loop_windowed(r)) return false;
  int64_t lo = (loom__loop_trips(l) - 1) * l->piece, first, count, last_first, last_count;
  loom__loop_window(r, 0, LOOM_MIN(l->piece, l->n), &first, &count);
  loom__loop_window(r, lo, l->n - lo, &last_first, &last_count);
  return first < 0 || last_first + last_count > dim;
}

/* ---- which values depend on the piece --------------------------------------------------- */

static loom_status piece_fail(const loom_graph *b, const loom__op *op, const char *why) {
  char buf[32];
  return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loop body: %s '%s' %s", loom_op_name(op->kind),
                     loom__value_label(b, op->outputs[0], buf, sizeof buf), why);
}

/* Where the piece's axis of operand i (its axis `ai`) lands in op's results: an axis, -1 when
 * the op removes it (a reduction over it, dot's k), -2 when the op cannot take another length
 * there. */
static int32_t forward_axis(const loom_graph *b, const loom__op *op, int32_t i, int32_t ai) {
  const loom_type *in = &b->values[op->inputs[i]].type, *out = &b->values[op->outputs[0]].type;
  const loom_attrs *a = &op->attrs;
  int32_t shift = out->rank - in->rank, axis = 0;
  switch (loom__op_info_of(op->kind)->cls) {
    case LOOM_CLASS_UNARY:
    case LOOM_CLASS_BINARY:
    case LOOM_CLASS_COMPARE:
    case LOOM_CLASS_LOGIC:
    case LOOM_CLASS_SELECT:
    case LOOM_CLASS_CAST:
      return ai + shift;
    case LOOM_CLASS_REDUCE: {
      if (loom__axes_contain(a, ai, in->rank)) return -1;
      if (a->keepdims) return ai;
      int32_t before = 0;
      for (int32_t j = 0; j < ai; j++) before += loom__axes_contain(a, j, in->rank);
      return ai - before;
    }
    case LOOM_CLASS_ARGREDUCE:
    case LOOM_CLASS_TOPK:
      if (!loom__axis_normalize(a->axis, in->rank, &axis)) return -2;
      if (axis == ai) return -1; /* the piece is what it reduces: local indices */
      return op->kind == LOOM_OP_TOPK ? ai : (ai < axis ? ai : ai - 1);
    case LOOM_CLASS_FOURIER:
      if (!loom__axis_normalize(a->axis, in->rank, &axis)) return -2;
      return axis == ai ? -2 : ai;
    case LOOM_CLASS_DOT: {
      const loom_type *other = &b->values[op->inputs[1 - i]].type;
      if (in->rank == 1) return -1; /* a vector's only axis is contracted */
      if ((i == 0 && ai == in->rank - 1) || (i == 1 && ai == in->rank - 2)) return -1;
      if (i == 0 && ai == in->rank - 2) return out->rank - (other->rank == 1 ? 1 : 2);
      if (i == 1 && ai == in->rank - 1) return out->rank - 1;
      return other->rank == 1 ? ai : ai + shift; /* batch axes; a vector adds none */
    }
    case LOOM_CLASS_CONV:
      return (i == 0 && ai == 0) ? 0 : -2;
    case LOOM_CLASS_QUANT:
      /* dequantize carries q's axis, and a per-channel scale's along its channel axis; a
       * quantize's scales are the whole operand's (docs/ir-quant.md) */
      if (op->kind != LOOM_OP_DEQUANTIZE) return -2;
      if (i == 0) return ai;
      return (a->set & LOOM_ATTR_AXIS) && loom__axis_normalize(a->axis, out->rank, &axis) ? axis : -2;
    case LOOM_CLASS_LAYOUT:
      switch (op->kind) {
        case LOOM_OP_TRANSPOSE:
          for (int32_t k = 0; k < out->rank; k++)
            if (a->perm.v[k] == ai) return k;
          return -2;
        case LOOM_OP_BROADCAST:
          return ai + shift;
        case LOOM_OP_RESHAPE: {
          int64_t before_in = 1, before_out = 1;
          for (int32_t j = 0; j < ai; j++) before_in *= in->dims[j];
          for (int32_t k = 0; k < out->rank; k++) {
            if (before_out == before_in && out->dims[k] == in->dims[ai]) return k;
            before_out *= out->dims[k];
            if (before_out > before_in) break;
          }
          return -2;
        }
        case LOOM_OP_CONCAT:
          if (!loom__axis_normalize(a->axis, in->rank, &axis)) return -2;
          return axis == ai ? -2 : ai;
        case LOOM_OP_SLICE: {
          int64_t step = (a->set & LOOM_ATTR_STEP) ? a->step.v[ai] : 1;
          bool all = a->start.v[ai] == 0 && a->stop.v[ai] >= in->dims[ai] && step == 1;
          return all ? ai : -2;
        }
        case LOOM_OP_TILE:
          return a->reps.v[ai] == 1 ? ai : -2;
        default:
          return -2;
      }
    default:
      return -2;
  }
}

static loom_status piece_axes(const loom_graph *b, const int32_t *param_axis, int32_t *axis_of);

/* A window along axis 0 through a layout op (a halo cut's time steps, chunk_halo.c): a slice
 * with step 1 keeps it a window, shorter where it drops halo (each step of a stencil reads its
 * grid at a few shifts), and a concat along another axis carries it. Only axis 0, since a
 * window's parameter is dense in its buffer and views of it take the operand's strides there
 * alone (exec_loop.c). */
static int32_t window_layout(const loom__op *op, int32_t ai) {
  const loom_attrs *a = &op->attrs;
  if (ai != LOOM_LOOP_WINDOW) return -2;
  if (op->kind == LOOM_OP_CONCAT) return a->axis != 0 ? ai : -2;
  if (op->kind != LOOM_OP_SLICE) return -2;
  if (a->set & LOOM_ATTR_STEP)
    for (int32_t d = 0; d < a->step.count; d++)
      if (a->step.v[d] != 1) return -2;
  return ai;
}

/* forward_axis for a window (ai >= LOOM_LOOP_WINDOW): elementwise ops carry it as a window,
 * a conv's x along a spatial axis turns it into the piece's axis (each output position reads
 * its receptive field; the window holds the piece's fields, padding included, so the body's
 * conv has none there), anything else cannot take it. */
static int32_t forward_window(const loom_graph *b, const loom__op *op, int32_t i, int32_t ai) {
  const loom_type *in = &b->values[op->inputs[i]].type, *out = &b->values[op->outputs[0]].type;
  switch (loom__op_info_of(op->kind)->cls) {
    case LOOM_CLASS_UNARY:
    case LOOM_CLASS_BINARY:
    case LOOM_CLASS_COMPARE:
    case LOOM_CLASS_LOGIC:
    case LOOM_CLASS_SELECT:
    case LOOM_CLASS_CAST:
      return ai + out->rank - in->rank;
    case LOOM_CLASS_CONV:
      return i == 0 && ai - LOOM_LOOP_WINDOW >= 2 ? ai - LOOM_LOOP_WINDOW : -2;
    case LOOM_CLASS_LAYOUT:
      return window_layout(op, ai);
    default:
      return -2;
  }
}

/* A loop in a body reading values that vary with the outer piece: the axes its results vary
 * along, from its own body's map with its parameters varying where its operands do. An
 * operand it slices along the outer piece's own axis cannot be. */
static loom_status inner_loop_axes(const loom_graph *b, const loom__op *op, const int32_t *axis_of,
                                   int32_t *out_axis) {
  const loom__loop *in = op->loop;
  const loom_graph *ib = in->body;
  int32_t *param_axis = loom__malloc(sizeof(int32_t) * (size_t)LOOM_MAX(op->n_inputs, 1));
  int32_t *inner = loom__malloc(sizeof(int32_t) * (size_t)LOOM_MAX(ib->n_values, 1));
  loom_status s = (!param_axis || !inner) ? loom__oom("a loop's piece axes") : LOOM_OK;
  for (int32_t i = 0; !s && i < op->n_inputs; i++) {
    /* a window of the outer piece passes in as it is: the inner body's ops take it as the
     * outer body's would (a tile's rows outside, its columns inside) */
    param_axis[i] = axis_of[op->inputs[i]];
    int32_t outer_axis = param_axis[i] >= LOOM_LOOP_WINDOW ? param_axis[i] - LOOM_LOOP_WINDOW : param_axis[i];
    if (param_axis[i] >= 0 && outer_axis == in->rules[i].axis)
      s = piece_fail(b, op, "(a loop) slices the outer loop's piece along the outer loop's axis");
  }
  if (!s) s = piece_axes(ib, param_axis, inner);
  for (int32_t j = 0; !s && j < op->n_outputs; j++) {
    int32_t ax = inner[ib->outputs[j]];
    if (ax >= 0 && in->combines[j].combine == LOOM_COMBINE_CONCAT && in->combines[j].axis == ax)
      s = piece_fail(b, op, "(a loop) concatenates along the outer loop's axis");
    out_axis[j] = ax;
  }
  loom__free(param_axis);
  loom__free(inner);
  return s;
}

/* A fused op in a body reading values that vary with the piece: its results vary along the
 * axes its body's outputs do, with its parameters varying where its operands do. */
static loom_status fused_axes(const loom__op *op, const int32_t *axis_of, int32_t *out_axis) {
  const loom_graph *fb = op->fused;
  int32_t *param_axis = loom__malloc(sizeof(int32_t) * (size_t)LOOM_MAX(op->n_inputs, 1));
  int32_t *inner = loom__malloc(sizeof(int32_t) * (size_t)LOOM_MAX(fb->n_values, 1));
  loom_status s = (!param_axis || !inner) ? loom__oom("a loop's piece axes") : LOOM_OK;
  for (int32_t i = 0; !s && i < op->n_inputs; i++) param_axis[i] = axis_of[op->inputs[i]];
  if (!s) s = piece_axes(fb, param_axis, inner);
  for (int32_t j = 0; !s && j < op->n_outputs; j++) out_axis[j] = inner[fb->outputs[j]];
  loom__free(param_axis);
  loom__free(inner);
  return s;
}

static loom_status piece_axes(const loom_graph *b, const int32_t *param_axis, int32_t *axis_of) {
  for (int32_t v = 0; v < b->n_values; v++) axis_of[v] = -1;
  for (int32_t p = 0; p < b->n_params; p++) axis_of[b->params[p]] = param_axis[p];
  for (int32_t o = 0; o < b->n_ops; o++) {
    const loom__op *op = &b->ops[o];
    if (op->loop || op->fused) {
      bool varies = false;
      for (int32_t i = 0; i < op->n_inputs; i++) varies |= axis_of[op->inputs[i]] >= 0;
      if (!varies) continue; /* its results keep -1 */
      int32_t out_axis[LOOM_LOOP_MAX_RESULTS];
      loom_status s =
          op->loop ? inner_loop_axes(b, op, axis_of, out_axis) : fused_axes(op, axis_of, out_axis);
      if (s) return s;
      for (int32_t j = 0; j < op->n_outputs; j++) axis_of[op->outputs[j]] = out_axis[j];
      continue;
    }
    int32_t ax = -1;
    bool any = false;
    for (int32_t i = 0; i < op->n_inputs; i++) {
      int32_t ai = axis_of[op->inputs[i]];
      if (ai < 0) continue;
      int32_t fa = ai >= LOOM_LOOP_WINDOW ? forward_window(b, op, i, ai) : forward_axis(b, op, i, ai);
      if (fa == -2 && ai >= LOOM_LOOP_WINDOW)
        return piece_fail(b, op,
                          "cannot read a window of the piece (only elementwise ops and a conv's x can)");
      if (fa == -2) return piece_fail(b, op, "cannot take a piece of another length along the loop's axis");
      if (any && fa != ax) return piece_fail(b, op, "reads the loop's piece along axes that do not line up");
      ax = fa;
      any = true;
    }
    for (int32_t r = 0; r < op->n_outputs; r++) {
      int32_t rank = b->values[op->outputs[r]].type.rank;
      /* topk's and argmax's partners keep the axis they share (values and indices) */
      axis_of[op->outputs[r]] = (ax >= LOOM_LOOP_WINDOW ? ax - LOOM_LOOP_WINDOW : ax) < rank ? ax : -1;
    }
  }
  return LOOM_OK;
}

loom_status loom__loop_piece_axes(const loom_graph *b, const loom_loop_input *rules, int32_t *axis_of) {
  int32_t *param_axis = loom__malloc(sizeof(int32_t) * (size_t)LOOM_MAX(b->n_params, 1));
  if (!param_axis) return loom__oom("a loop's piece axes");
  for (int32_t p = 0; p < b->n_params; p++)
    param_axis[p] = rules[p].axis + (loom__loop_windowed(&rules[p]) ? LOOM_LOOP_WINDOW : 0);
  loom_status s = piece_axes(b, param_axis, axis_of);
  loom__free(param_axis);
  return s;
}

/* ---- the body for a shorter piece --------------------------------------------------------- */

/* Axis a of piece_axes' map without its window mark. */
static int32_t plain_axis(int32_t a) {
  return a >= LOOM_LOOP_WINDOW ? a - LOOM_LOOP_WINDOW : a;
}

/* The axes along which op's operands vary (inner_axis) and their lengths there in the retyped
 * graph g, whose values ins are (a nested body's parameters take them). False: none varies. */
static bool inner_lengths(const loom_graph *g, const loom__op *op, const int32_t *axis_of,
                          const loom_value *ins, int32_t *inner_axis, int64_t *inner_len) {
  bool varies = false;
  for (int32_t i = 0; i < op->n_inputs; i++) {
    inner_axis[i] = axis_of[op->inputs[i]];
    inner_len[i] = inner_axis[i] >= 0 ? g->values[ins[i].id].type.dims[plain_axis(inner_axis[i])] : 0;
    varies |= inner_axis[i] >= 0;
  }
  return varies;
}

/* Body b retyped for a piece of len: parameter p param_len[p] long along param_axis[p] (-1:
 * unchanged; a window is longer than the piece). */
static loom_status retype(const loom_graph *b, const int32_t *param_axis, const int64_t *param_len,
                          int64_t len, loom_graph **out) {
  *out = NULL;
  int32_t *axis_of = loom__malloc(sizeof(int32_t) * (size_t)LOOM_MAX(b->n_values, 1));
  int32_t *map = loom__malloc(sizeof(int32_t) * (size_t)LOOM_MAX(b->n_values, 1));
  loom_graph *g = NULL;
  loom_status s = (!axis_of || !map) ? loom__oom("a loop's last piece") : LOOM_OK;
  if (!s) s = piece_axes(b, param_axis, axis_of);
  if (!s) s = loom_graph_create(b->name, &g);
  for (int32_t p = 0; !s && p < b->n_params; p++) {
    int32_t v = b->params[p];
    loom_type t = b->values[v].type;
    if (param_axis[p] >= 0) t.dims[plain_axis(param_axis[p])] = param_len[p];
    loom_value nv = loom_graph_param(g, b->values[v].name, &t);
    if (nv.id < 0) s = g->error ? g->error : LOOM_ERR_INVALID_ARGUMENT;
    map[v] = nv.id;
  }
  loom_value ins[64], outs[LOOM_LOOP_MAX_RESULTS];
  for (int32_t o = 0; !s && o < b->n_ops; o++) {
    const loom__op *op = &b->ops[o];
    if (op->n_inputs > 64) {
      s = loom__error(LOOM_ERR_UNSUPPORTED, "loop body: %s has more than 64 operands",
                      loom_op_name(op->kind));
      break;
    }
    for (int32_t i = 0; i < op->n_inputs; i++) ins[i] = (loom_value){map[op->inputs[i]]};
    g->cur_line = op->line;
    g->cur_col = op->col;
    if (op->kind == LOOM_OP_LOOP) {
      /* an inner loop whose operands vary with the piece gets its body retyped the same way */
      const loom__loop *in = op->loop;
      int32_t inner_axis[64];
      int64_t inner_len[64];
      bool varies = inner_lengths(g, op, axis_of, ins, inner_axis, inner_len);
      loom_graph *inner = NULL;
      if (varies) s = retype(in->body, inner_axis, inner_len, len, &inner);
      if (!s)
        s = loom_graph_add_loop(g, in->n, in->piece, inner ? inner : in->body, ins, in->rules, op->n_inputs,
                                in->combines, op->n_outputs, outs);
      if (!s) g->ops[g->n_ops - 1].loop->slices = in->slices;
      loom_graph_destroy(inner);
    } else if (op->kind == LOOM_OP_FUSED) {
      /* a fused body reading the piece is retyped as the loop's own body is */
      int32_t inner_axis[64];
      int64_t inner_len[64];
      bool varies = inner_lengths(g, op, axis_of, ins, inner_axis, inner_len);
      loom_graph *inner = NULL;
      if (varies) s = retype(op->fused, inner_axis, inner_len, len, &inner);
      if (!s) s = loom__graph_add_fused(g, inner ? inner : op->fused, ins, op->n_inputs, outs);
      loom_graph_destroy(inner);
    } else {
      loom_attrs attrs = op->attrs;
      int32_t ax = axis_of[op->outputs[0]];
      if ((op->kind == LOOM_OP_RESHAPE || op->kind == LOOM_OP_BROADCAST) && ax >= 0 &&
          ax < LOOM_LOOP_WINDOW && attrs.shape.v[ax] != -1)
        attrs.shape.v[ax] = len;
      if (op->kind == LOOM_OP_SLICE && ax >= 0 && ax < LOOM_LOOP_WINDOW)
        attrs.stop.v[ax] = len; /* takes all of the piece */
      /* a window keeps its halo: shorter by as much as the piece */
      if (op->kind == LOOM_OP_SLICE && ax >= LOOM_LOOP_WINDOW)
        attrs.stop.v[plain_axis(ax)] -= b->values[op->inputs[0]].type.dims[plain_axis(ax)] -
                                        g->values[ins[0].id].type.dims[plain_axis(ax)];
      const loom_type *rt =
          loom__op_info_of(op->kind)->cls == LOOM_CLASS_SOURCE ? &b->values[op->outputs[0]].type : NULL;
      s = loom_graph_add(g, op->kind, ins, op->n_inputs, &attrs, rt, op->const_data, outs, op->n_outputs);
    }
    for (int32_t r = 0; !s && r < op->n_outputs; r++) {
      map[op->outputs[r]] = outs[r].id;
      const char *name = b->values[op->outputs[r]].name;
      if (name) s = loom_value_set_name(g, outs[r], name);
    }
  }
  loom_value rets[LOOM_LOOP_MAX_RESULTS];
  for (int32_t k = 0; !s && k < b->n_outputs && k < LOOM_LOOP_MAX_RESULTS; k++)
    rets[k] = (loom_value){map[b->outputs[k]]};
  if (!s) s = loom_graph_return(g, rets, b->n_outputs);
  if (s)
    loom_graph_destroy(g);
  else
    *out = g;
  loom__free(axis_of);
  loom__free(map);
  return s;
}

loom_status loom__loop_body_for(const loom__loop *l, int64_t len, loom_graph **out) {
  const loom_graph *b = l->body;
  int32_t *param_axis = loom__malloc(sizeof(int32_t) * (size_t)LOOM_MAX(b->n_params, 1));
  if (!param_axis) return loom__oom("a loop's last piece");
  int64_t *param_len = loom__malloc(sizeof(int64_t) * (size_t)LOOM_MAX(b->n_params, 1));
  loom_status s = param_len ? LOOM_OK : loom__oom("a loop's last piece");
  for (int32_t p = 0; !s && p < b->n_params; p++) {
    int64_t first;
    param_axis[p] = l->rules[p].axis + (loom__loop_windowed(&l->rules[p]) ? LOOM_LOOP_WINDOW : 0);
    loom__loop_window(&l->rules[p], 0, len, &first, &param_len[p]);
  }
  if (!s) s = retype(b, param_axis, param_len, len, out);
  loom__free(param_axis);
  loom__free(param_len);
  if (s) loom__error_prefix("the loop's last piece of %lld: ", (long long)len);
  return s;
}

/* ---- the builder ---------------------------------------------------------------------------- */

static loom_status bad(const char *fmt, ...) LOOM_PRINTF(1, 2);
static loom_status bad(const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loop: %s", msg);
}

static loom_status check_operands(const loom_graph *g, int64_t n, int64_t piece, const loom_graph *body,
                                  const loom_value *operands, const loom_loop_input *rules,
                                  int32_t n_operands) {
  if (body->n_params != n_operands)
    return bad("the body takes %d parameter%s, the loop has %d operand%s", (int)body->n_params,
               body->n_params == 1 ? "" : "s", (int)n_operands, n_operands == 1 ? "" : "s");
  for (int32_t i = 0; i < n_operands; i++) {
    if (!loom__value_ok(g, operands[i]))
      return bad("operand %d is not a value of graph '%s'", (int)i + 1, g->name);
    loom_type t = g->values[operands[i].id].type;
    const loom_loop_input *r = &rules[i];
    char lab[32], a[LOOM_TYPE_STRING_MAX], b[LOOM_TYPE_STRING_MAX];
    const char *name = loom__value_label(g, operands[i].id, lab, sizeof lab);
    if (r->axis < -1 || r->axis >= t.rank)
      return bad("operand '%s' (%s): axis %d is out of range", name, loom_type_format(&t, a, sizeof a),
                 (int)r->axis);
    if (r->axis < 0 && (r->offset != 0 || r->stride != 0 || r->halo != 0))
      return bad("operand '%s' is passed whole but has an offset, stride or halo", name);
    if (r->stride < 0 || r->halo < 0)
      return bad("operand '%s': stride %lld and halo %lld must not be negative", name, (long long)r->stride,
                 (long long)r->halo);
    if (loom__loop_windowed(r)) {
      /* a window may read padding past either end, but never padding alone: the run's
       * reads are in reach of the operand */
      int64_t first, count, dim = t.dims[r->axis];
      bool huge = r->halo > INT64_MAX / 4 || r->stride > INT64_MAX / 4 / n || r->offset < -INT64_MAX / 4 ||
                  r->offset > INT64_MAX / 4;
      if (!huge) loom__loop_window(r, 0, n, &first, &count);
      if (huge || first >= dim || first + count <= 0)
        return bad(
            "operand '%s' (%s): a window from %lld over n %lld (stride %lld, halo %lld) along axis %d "
            "reads none of its %lld elements",
            name, loom_type_format(&t, a, sizeof a), (long long)r->offset, (long long)n,
            (long long)LOOM_MAX(r->stride, 1), (long long)r->halo, (int)r->axis, (long long)dim);
      loom__loop_window(r, 0, piece, &first, &count);
      t.dims[r->axis] = count;
    } else if (r->axis >= 0) {
      if (r->offset < 0 || r->offset > t.dims[r->axis] || n > t.dims[r->axis] - r->offset)
        return bad("operand '%s' (%s): axis %d holds %lld elements, fewer than offset %lld + n %lld", name,
                   loom_type_format(&t, a, sizeof a), (int)r->axis, (long long)t.dims[r->axis],
                   (long long)r->offset, (long long)n);
      /* a q4 piece starts on a whole byte of its rows (docs/ir-quant.md) */
      if (t.dtype == LOOM_Q4 && r->axis == t.rank - 1 && (piece % 2 || r->offset % 2))
        return bad(
            "operand '%s' (%s): a q4 row is sliced at whole bytes: piece %lld and offset %lld must be even",
            name, loom_type_format(&t, a, sizeof a), (long long)piece, (long long)r->offset);
      t.dims[r->axis] = piece;
    }
    const loom_type *pt = &body->values[body->params[i]].type;
    if (!loom_type_equal(pt, &t))
      return bad("operand '%s': the body's parameter %d is %s, a piece of it is %s", name, (int)i + 1,
                 loom_type_format(pt, a, sizeof a), loom_type_format(&t, b, sizeof b));
  }
  return LOOM_OK;
}

static bool pair_head(loom_combine c) {
  return c == LOOM_COMBINE_ARGMAX || c == LOOM_COMBINE_ARGMIN || c == LOOM_COMBINE_TOPK;
}

/* Checks combine j against the body's result and writes the loop's result type. */
static loom_status check_result(const loom_graph *body, const int32_t *axis_of, int64_t n, int64_t piece,
                                const loom_loop_output *c, int32_t j, int32_t n_outputs, loom_type *out) {
  int32_t v = body->outputs[j];
  const loom_type *t = &body->values[v].type;
  char a[LOOM_TYPE_STRING_MAX];
  const char *cn = loom_combine_name(c[j].combine);
  *out = *t;
  if ((int)c[j].combine < 0 || c[j].combine >= LOOM_COMBINE_COUNT)
    return bad("result %d: unknown combine %d", (int)j + 1, (int)c[j].combine);
  if (c[j].combine == LOOM_COMBINE_CONCAT) {
    if (c[j].axis < 0 || c[j].axis >= t->rank)
      return bad("result %d (%s): concat axis %d is out of range", (int)j + 1,
                 loom_type_format(t, a, sizeof a), (int)c[j].axis);
    /* a window along axis 0 sliced down to the piece (a halo cut's last step) is the piece there */
    int32_t ax = axis_of[v] == LOOM_LOOP_WINDOW ? 0 : axis_of[v];
    if (ax != c[j].axis || t->dims[c[j].axis] != piece)
      return bad("result %d (%s): concat along axis %d needs a result that holds the piece there", (int)j + 1,
                 loom_type_format(t, a, sizeof a), (int)c[j].axis);
    if (t->dtype == LOOM_Q4 && c[j].axis == t->rank - 1 && piece % 2)
      return bad(
          "result %d (%s): q4 rows are written at whole bytes: concat along the last axis needs an even "
          "piece",
          (int)j + 1, loom_type_format(t, a, sizeof a));
    out->dims[c[j].axis] = n;
    return LOOM_OK;
  }
  if (axis_of[v] >= 0)
    return bad("result %d (%s) varies with the piece along axis %d: only concat combines such a result",
               (int)j + 1, loom_type_format(t, a, sizeof a), (int)axis_of[v]);
  bool is_complex = t->dtype == LOOM_C64 || t->dtype == LOOM_C128;
  if (loom_dtype_is_quantized(t->dtype))
    return bad("result %d: %s of %s (quantized values are read only by dequantize)", (int)j + 1, cn,
               loom_dtype_name(t->dtype));
  switch (c[j].combine) {
    case LOOM_COMBINE_SUM:
    case LOOM_COMBINE_PROD:
      if (t->dtype == LOOM_BOOL) return bad("result %d: %s of bool", (int)j + 1, cn);
      return LOOM_OK;
    case LOOM_COMBINE_MAX:
    case LOOM_COMBINE_MIN:
      if (is_complex || t->dtype == LOOM_BOOL)
        return bad("result %d: %s of %s", (int)j + 1, cn, loom_dtype_name(t->dtype));
      return LOOM_OK;
    case LOOM_COMBINE_INDEX:
      if (j == 0 || !pair_head(c[j - 1].combine))
        return bad("result %d: index follows an argmax, argmin or topk result", (int)j + 1);
      if (t->dtype != LOOM_I64)
        return bad("result %d: indices are i64, got %s", (int)j + 1, loom_type_format(t, a, sizeof a));
      {
        const loom_type *head = &body->values[body->outputs[j - 1]].type;
        bool same = head->rank == t->rank;
        for (int32_t d = 0; same && d < t->rank; d++) same = head->dims[d] == t->dims[d];
        if (!same)
          return bad("result %d: its indices do not have the shape of result %d", (int)j + 1, (int)j);
      }
      return LOOM_OK;
    default: /* argmax argmin topk */
      if (j + 1 >= n_outputs || c[j + 1].combine != LOOM_COMBINE_INDEX)
        return bad("result %d: %s needs the next result to be its indices (combine index)", (int)j + 1, cn);
      if (is_complex || t->dtype == LOOM_BOOL)
        return bad("result %d: %s of %s", (int)j + 1, cn, loom_dtype_name(t->dtype));
      if (c[j].combine == LOOM_COMBINE_TOPK) {
        if (c[j].axis < 0 || c[j].axis >= t->rank || c[j].k < 1 || t->dims[c[j].axis] != c[j].k)
          return bad("result %d (%s): topk needs k >= 1 candidates along an axis of it (k %lld, axis %d)",
                     (int)j + 1, loom_type_format(t, a, sizeof a), (long long)c[j].k, (int)c[j].axis);
        int64_t last = n % piece ? n % piece : piece;
        if (last < c[j].k)
          return bad("result %d: topk of %lld needs pieces of at least that many; the last piece has %lld",
                     (int)j + 1, (long long)c[j].k, (long long)last);
      }
      return LOOM_OK;
  }
}

loom_status loom_graph_add_loop(loom_graph *g, int64_t n, int64_t piece, const loom_graph *body,
                                const loom_value *operands, const loom_loop_input *rules, int32_t n_operands,
                                const loom_loop_output *combines, int32_t n_outputs, loom_value *outs) {
  for (int32_t i = 0; outs && i < n_outputs; i++) outs[i] = LOOM_VALUE_NONE;
  if (!g) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_add_loop: graph is NULL");
  if (g->error) return g->error;
  loom_status s = LOOM_OK;
  if (g->returned)
    s = bad("the graph has already returned");
  else if (!body || (n_operands > 0 && (!operands || !rules)) || n_operands < 0 || n_outputs < 1 || !combines)
    s = bad("missing body, operands, rules or combines");
  else if (n_outputs > LOOM_LOOP_MAX_RESULTS)
    s = bad("%d results, at most %d", (int)n_outputs, LOOM_LOOP_MAX_RESULTS);
  else if (n < 1 || piece < 1 || piece > n)
    s = bad("n %lld in pieces of %lld: needs 1 <= piece <= n", (long long)n, (long long)piece);
  else if ((s = loom_graph_verify(body)))
    loom__error_prefix("loop body: ");
  else if (body->n_outputs != n_outputs)
    s = bad("the body returns %d value%s, the loop combines %d", (int)body->n_outputs,
            body->n_outputs == 1 ? "" : "s", (int)n_outputs);
  if (!s) s = check_operands(g, n, piece, body, operands, rules, n_operands);
  int32_t *axis_of = NULL;
  loom_type types[LOOM_LOOP_MAX_RESULTS];
  if (!s && !(axis_of = loom__malloc(sizeof(int32_t) * (size_t)LOOM_MAX(body->n_values, 1))))
    s = loom__oom("a loop");
  if (!s) s = loom__loop_piece_axes(body, rules, axis_of);
  for (int32_t j = 0; !s && j < n_outputs; j++)
    s = check_result(body, axis_of, n, piece, combines, j, n_outputs, &types[j]);
  loom__free(axis_of);
  loom__loop *l = NULL;
  if (!s && !(l = loop_make(body, n, piece, rules, n_operands, combines, n_outputs))) s = loom__oom("a loop");
  if (!s && n % piece) { /* the last piece must build too */
    loom_graph *tail = NULL;
    s = loom__loop_body_for(l, n % piece, &tail);
    loom_graph_destroy(tail);
  }
  if (!s) {
    loom_value tmp[LOOM_LOOP_MAX_RESULTS];
    s = loom__graph_append(g, LOOM_OP_LOOP, operands, n_operands, NULL, types, n_outputs, NULL,
                           outs ? outs : tmp, n_outputs);
    if (!s) {
      g->ops[g->n_ops - 1].loop = l;
      l = NULL;
    }
  }
  loom__loop_free(l);
  return s ? loom__graph_fail(g, s) : LOOM_OK;
}

loom_status loom_graph_loop_get(const loom_graph *g, int32_t index, const loom_graph **out_body,
                                int64_t *out_n, int64_t *out_piece) {
  if (!g || index < 0 || index >= g->n_ops || !g->ops[index].loop)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_loop_get: op %d is not a loop", (int)index);
  const loom__loop *l = g->ops[index].loop;
  if (out_body) *out_body = l->body;
  if (out_n) *out_n = l->n;
  if (out_piece) *out_piece = l->piece;
  return LOOM_OK;
}

loom_status loom_graph_loop_input_rule(const loom_graph *g, int32_t index, int32_t k, loom_loop_input *out) {
  if (!g || index < 0 || index >= g->n_ops || !g->ops[index].loop || k < 0 || k >= g->ops[index].n_inputs ||
      !out)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "loom_graph_loop_input_rule: no operand %d of a loop at op %d", (int)k, (int)index);
  *out = g->ops[index].loop->rules[k];
  return LOOM_OK;
}

loom_status loom_graph_loop_output_combine(const loom_graph *g, int32_t index, int32_t k,
                                           loom_loop_output *out) {
  if (!g || index < 0 || index >= g->n_ops || !g->ops[index].loop || k < 0 || k >= g->ops[index].n_outputs ||
      !out)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "loom_graph_loop_output_combine: no result %d of a loop at op %d", (int)k, (int)index);
  *out = g->ops[index].loop->combines[k];
  return LOOM_OK;
}

loom_status loom_graph_loop_set_slices(loom_graph *g, int32_t index, int32_t slices) {
  if (!g || index < 0 || index >= g->n_ops || !g->ops[index].loop)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_graph_loop_set_slices: op %d is not a loop",
                       (int)index);
  if (slices != 1 && slices != 2)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "loop: slices=%d: a loop holds 1 or 2 slices of a streamed operand (2: the next "
                       "piece's is brought in while a piece runs)",
                       (int)slices);
  g->ops[index].loop->slices = slices;
  return LOOM_OK;
}

int32_t loom_graph_loop_slices(const loom_graph *g, int32_t index) {
  if (!g || index < 0 || index >= g->n_ops || !g->ops[index].loop) return 0;
  return g->ops[index].loop->slices;
}

void loom__loop_merge_ops(loom_graph *g, const loom_loop_output *c, loom_value a, loom_value b) {
  switch (c->combine) {
    case LOOM_COMBINE_SUM:
    case LOOM_COMBINE_PROD:
    case LOOM_COMBINE_MAX:
    case LOOM_COMBINE_MIN: {
      static const loom_op kinds[] = {[LOOM_COMBINE_SUM] = LOOM_OP_ADD,
                                      [LOOM_COMBINE_PROD] = LOOM_OP_MUL,
                                      [LOOM_COMBINE_MAX] = LOOM_OP_MAXIMUM,
                                      [LOOM_COMBINE_MIN] = LOOM_OP_MINIMUM};
      loom_binary(g, kinds[c->combine], a, b);
      return;
    }
    case LOOM_COMBINE_ARGMAX:
    case LOOM_COMBINE_ARGMIN: {
      /* a = acc, b = piece: the piece wins where it is strictly better, or NaN where acc is
       * not: not (b <= a) (not b >= a for argmin), and a == a. */
      loom_value worse = loom_binary(g, c->combine == LOOM_COMBINE_ARGMAX ? LOOM_OP_LE : LOOM_OP_GE, b, a);
      loom_value better = loom_unary(g, LOOM_OP_NOT, worse);
      loom_value wins = loom_binary(g, LOOM_OP_AND, better, loom_binary(g, LOOM_OP_EQ, a, a));
      loom_select(g, wins, b, a);
      loom_cast(g, wins, LOOM_I64);
      return;
    }
    case LOOM_COMBINE_TOPK: {
      loom_value both[2] = {a, b}, vals, idx;
      loom_topk(g, loom_concat(g, both, 2, c->axis), c->k, c->axis, c->largest, &vals, &idx);
      return;
    }
    default:
      return;
  }
}
