/* The IR's internal representation, shared by the builder, parser, printer, estimator,
 * rewrites, splitter and runtime. Public code sees only loom/graph.h's opaque handles.
 *
 * Ops are stored in the order they were added. The builder only lets an op use values that
 * already exist, so that order is always a topological order (the default schedule).
 */
#ifndef LOOM_IR_H
#define LOOM_IR_H

#include "core/core.h"
#include "loom/graph.h"

/* What kind of op, for the rules every pass shares. */
typedef enum loom__op_class {
  LOOM_CLASS_SOURCE,  /* constant iota fill */
  LOOM_CLASS_UNARY,   /* same shape and dtype */
  LOOM_CLASS_BINARY,  /* arithmetic with broadcasting */
  LOOM_CLASS_COMPARE, /* -> bool */
  LOOM_CLASS_LOGIC,   /* and or (bool) */
  LOOM_CLASS_SELECT,
  LOOM_CLASS_CAST,
  LOOM_CLASS_LAYOUT,    /* reshape transpose broadcast slice concat tile */
  LOOM_CLASS_REDUCE,    /* reduce_* */
  LOOM_CLASS_ARGREDUCE, /* argmax argmin */
  LOOM_CLASS_TOPK,
  LOOM_CLASS_DOT,
  LOOM_CLASS_CONV,
  LOOM_CLASS_FOURIER,
  LOOM_CLASS_LOOP,  /* a body run over pieces (loop.c) */
  LOOM_CLASS_FUSED, /* a body run as one kernel (fused.c, docs/ir-fusion.md) */
  LOOM_CLASS_QUANT, /* quantize dequantize (docs/ir-quant.md) */
} loom__op_class;

typedef struct loom__op_info {
  const char *name;
  loom__op_class cls;
  int32_t min_inputs, max_inputs; /* max -1: any number (concat) */
  int32_t n_results;
  uint32_t allowed;  /* LOOM_ATTR_* bits the op accepts */
  uint32_t required; /* LOOM_ATTR_* bits it needs */
} loom__op_info;

/* The table for every op; never NULL for a valid op. */
const loom__op_info *loom__op_info_of(loom_op op);

/* Whether an op of this kind maps each element of its (broadcast) operands to one of its
 * result: the unary, binary, compare, logic, select and cast classes. */
static inline bool loom__op_is_elementwise(loom_op op) {
  loom__op_class c = loom__op_info_of(op)->cls;
  return c == LOOM_CLASS_UNARY || c == LOOM_CLASS_BINARY || c == LOOM_CLASS_COMPARE ||
         c == LOOM_CLASS_LOGIC || c == LOOM_CLASS_SELECT || c == LOOM_CLASS_CAST;
}

typedef struct loom__value {
  loom_type type;
  int32_t op;     /* producing op index, or -1 for a parameter */
  int32_t result; /* result index in that op, or parameter index */
  char *name;     /* owned; NULL until named (printed as v<id>) */
} loom__value;

/* A loop op's own part (graph.h "loops"): one rule per operand, one combine per result. */
typedef struct loom__loop {
  loom_graph *body; /* owned */
  int64_t n, piece;
  loom_loop_input *rules;     /* per operand, owned */
  loom_loop_output *combines; /* per result, owned */
  /* Slices of each streamed operand held through the run (loom_graph_loop_set_slices): 2 to
   * bring the next piece's in while a piece runs, 1 where nothing would overlap (cpu0). */
  int32_t slices;
} loom__loop;

typedef struct loom__op {
  loom_op kind;
  int32_t n_inputs;
  int32_t *inputs; /* value ids, owned */
  int32_t n_outputs;
  int32_t outputs[LOOM_LOOP_MAX_RESULTS];
  loom__loop *loop;  /* loops only, owned */
  loom_graph *fused; /* fused ops only: the body (docs/ir-fusion.md), owned */
  loom_attrs attrs;
  void *const_data; /* constant's contents (dense, C order), owned */
  int64_t const_bytes;
  int32_t line, col; /* where the parser found it; 0 when built from C */
} loom__op;

struct loom_graph {
  char *name;
  loom__value *values;
  int32_t n_values, cap_values;
  loom__op *ops;
  int32_t n_ops, cap_ops;
  int32_t *params;
  int32_t n_params, cap_params;
  int32_t *outputs;
  int32_t n_outputs;
  bool returned;
  /* The sticky builder error: the first failure, with its message. */
  loom_status error;
  char *error_message;
  /* Names -> value ids, open addressing: -1 empty, -2 a removed entry. */
  int32_t *name_slots;
  int32_t name_cap, name_used;
  /* The parser sets where the next op comes from, so messages and ops carry it. */
  int32_t cur_line, cur_col;
};

static inline loom__value *loom__val(const loom_graph *g, int32_t id) {
  return &g->values[id];
}
static inline bool loom__value_ok(const loom_graph *g, loom_value v) {
  return v.id >= 0 && v.id < g->n_values;
}

/* Appends op with its checked operands and inferred result types (no checks here). */
loom_status loom__graph_append(loom_graph *g, loom_op op, const loom_value *inputs, int32_t n_inputs,
                               const loom_attrs *attrs, const loom_type *types, int32_t n_results,
                               const void *const_data, loom_value *outs, int32_t n_outs);

/* Records the graph's sticky error (the first one wins) from the thread's last message. */
loom_status loom__graph_fail(loom_graph *g, loom_status status);

/* Infers the result types of an op from its inputs and attributes. Returns a status with a
 * message that names the op, its operands and the rule broken ("sub: shapes f32[3,4] and
 * f32[5] do not broadcast"). For sources, result_type gives the type. */
loom_status loom__infer(const loom_graph *g, loom_op op, const int32_t *inputs, int32_t n_inputs,
                        const loom_attrs *attrs, const loom_type *result_type, loom_type *out_types);

/* NumPy broadcasting of two shapes into *out (dtype taken from a). False when they do not
 * broadcast. */
bool loom__broadcast_shapes(const loom_type *a, const loom_type *b, loom_type *out);

/* Axis attributes (axis of iota, concat, argmax/argmin, topk, fft..; the entries of reduce
 * axes) may be negative, Python style: -1 is the last axis. The graph keeps them as written,
 * so every pass reading one normalizes it here: false when axis is outside -rank..rank-1.
 * (transpose's perm is not normalized: it must be a permutation of 0..rank-1.) */
bool loom__axis_normalize(int64_t axis, int32_t rank, int32_t *out_axis);

/* Whether a reduction's `axes` attribute names axis j of an operand of `rank` (entries
 * normalized as loom__axis_normalize does). */
bool loom__axes_contain(const loom_attrs *attrs, int32_t j, int32_t rank);

/* The integer list of attrs that a list-valued LOOM_ATTR_* bit names (shape, perm, axes, start,
 * stop, step, reps, stride, padding, dilation), for the text format's reader and printer. */
loom_int_list *loom__attrs_list(loom_attrs *attrs, uint32_t bit);

/* The name of a value for messages and printing: its name, or "v<id>". Returns buf or the
 * stored name. */
const char *loom__value_label(const loom_graph *g, int32_t id, char *buf, size_t size);

/* ---- loops (loop.c) ---- */

/* Frees a loop's part (accepts NULL). */
void loom__loop_free(loom__loop *loop);
/* A deep copy of a loop's part. NULL when out of memory. */
loom__loop *loom__loop_clone(const loom__loop *loop);
/* The trip count: pieces of the loop. */
int64_t loom__loop_trips(const loom__loop *loop);

/* The axis along which each value of a body depends on the piece's length: the sliced axis
 * of each parameter (rules[p].axis, -1 for a whole one) carried through the ops; -1 for a value
 * that does not depend on it. axis_of has body->n_values entries. Errors: INVALID_ARGUMENT
 * naming the body op that cannot take a piece of another length (a slice, pad or source along
 * the piece's axis). */
loom_status loom__loop_piece_axes(const loom_graph *body, const loom_loop_input *rules, int32_t *axis_of);

/* In loom__loop_piece_axes' map, a value that varies with the piece as a window (a windowed
 * operand, docs/ir-loops.md "Windows", and elementwise ops of it) along axis a holds
 * LOOM_LOOP_WINDOW + a: it is longer than the piece there, and only a conv's x turns it back
 * into the piece's own axis. */
#define LOOM_LOOP_WINDOW 64

/* Whether rule r reads a window (stride > 1 or halo > 0) rather than a plain slice. */
bool loom__loop_windowed(const loom_loop_input *r);
/* The elements along r's axis that piece [lo, lo + len) of a sliced operand reads: from *first
 * (negative, or past the operand's end, where a window reads padding) *count of them. */
void loom__loop_window(const loom_loop_input *r, int64_t lo, int64_t len, int64_t *first, int64_t *count);
/* Whether operand i of loop l (`dim` long along its rule's axis) is read through a window that
 * passes one of its ends in some piece: that piece's parameter is then a copy, padding and the
 * part in reach (docs/ir-loops.md "Windows"), not a view. */
bool loom__loop_window_pads(const loom__loop *l, int32_t i, int64_t dim);

/* The body retyped for a piece of `len` elements (the last, shorter piece): the same ops on
 * parameters `len` long along their sliced axes. The caller destroys *out. */
loom_status loom__loop_body_for(const loom__loop *loop, int64_t len, loom_graph **out);
/* Adds to g the ops that merge a loop result's running value a with a piece's b as combine c
 * says, in this order (the executor and the partials' combine run them by index): SUM, PROD,
 * MAX, MIN one binary op; ARGMAX/ARGMIN 0 worse (b <= a, or >=), 1 better (not worse),
 * 2 a == a, 3 wins (better and a not NaN), 4 the select of the values, 5 wins as i64 (which
 * indices to take); TOPK 0 the concat of both, 1 their topk. Errors are sticky in g. */
void loom__loop_merge_ops(loom_graph *g, const loom_loop_output *c, loom_value a, loom_value b);

/* ---- fused ops (fused.c, docs/ir-fusion.md) ---- */

/* The largest contracted length of a dot computed inline in a fused body. */
#define LOOM_FUSE_MAX_K 16
/* A fused op's results: its final op's (topk: values and indices), or one elementwise value. */
#define LOOM_FUSE_MAX_RESULTS 2

/* Checks that body has the form the evaluators rely on (docs/ir-fusion.md, "The body"): views
 * of parameters, scalar constants, elementwise ops and small dots over one space S, then at
 * most one final reduction, argmax/argmin or topk whose results are the body's outputs.
 * Errors: INVALID_ARGUMENT "fused body: <op> '<value>': <the rule broken>". */
loom_status loom__fused_check(const loom_graph *body);

/* The space S of a checked body: the final op's input type, else its output's. */
const loom_type *loom__fused_space(const loom_graph *body);

/* The final op of a checked body (reduce_*, argmax/argmin, topk), or NULL for an elementwise
 * body. */
const loom__op *loom__fused_final(const loom_graph *body);

/* Appends a fused op running `body` (verified, checked by loom__fused_check; the graph copies
 * it) on operands[0..n): each operand's type must equal its body parameter's. outs gets the
 * body's outputs' counterparts (body->n_outputs of them). Errors (sticky, as loom_graph_add):
 * INVALID_ARGUMENT "fused: ..." naming the operand or body op; OUT_OF_MEMORY. */
loom_status loom__graph_add_fused(loom_graph *g, const loom_graph *body, const loom_value *operands,
                                  int32_t n, loom_value *outs);

/* g with each of its own fused ops (not those in loop bodies) replaced by the ops of its body,
 * so a re-plan can cut what fusion had joined (the chunk rewrite does not cut a fused op).
 * Caller owns *out. Errors: OUT_OF_MEMORY; INTERNAL for a malformed graph. */
loom_status loom__graph_unfuse(const loom_graph *g, loom_graph **out);

/* The work model (ir/work.c): adds the work of op `index` of g to sizes[] and kernels[]
 * (LOOM_OP_CLASS_COUNT entries each of loom/sched.h's classes, added to, not cleared), as
 * loom_sched_op_work documents it. Errors: INVALID_ARGUMENT (bad graph, index or NULL arrays). */
loom_status loom__op_work(const loom_graph *g, int32_t index, double *sizes, int32_t *kernels);
/* The work of every op of `body`, times `scale` (a loop's pieces), added to sizes[] and
 * kernels[] (kernels rounded up). Errors: as loom__op_work. */
loom_status loom__body_work(const loom_graph *body, double scale, double *sizes, int32_t *kernels);

/* Whether an op of this kind is a source (constant, fill, iota) or a view (reshape, transpose,
 * broadcast, slice), which does no work of its own (ir/work.c): what a loop's stage may hold
 * beside the loop, made on the host for its ranges, and a light group may join a loop's stage
 * with. */
bool loom__op_is_light(loom_op kind);

/* Whether dot op (of g) is a matrix-matrix product, which a GEMM runs, packing both operands on
 * every call (both operands of rank 2 or more, its result more than one row and one column);
 * a matrix-vector product packs nothing. The chunker's roofline and the scheduler's
 * predictions price the packing by it. */
bool loom__dot_is_gemm(const loom_graph *g, const loom__op *op);

/* The number of results op gives: its kind's, or its body's for a loop or a fused op. */
static inline int32_t loom__op_result_count(const loom__op *op) {
  if (op->fused) return op->fused->n_outputs;
  if (op->loop) return op->loop->body->n_outputs;
  return loom__op_info_of(op->kind)->n_results;
}

/* Layout of every value: which values are views of another value's storage, and the element
 * strides through which the view reads it. The estimator and the runtime both read this, so
 * what is estimated is what is allocated. */
typedef struct loom__layout {
  int32_t base;                   /* the value whose storage this reads: itself when it owns
                                     storage; for fill (and views of it) the fill, which
                                     has no storage, only a scalar */
  int64_t offset;                 /* element offset into base's storage */
  int64_t strides[LOOM_MAX_RANK]; /* element strides, 0 on broadcast dims */
  bool owns;                      /* true: materialized, physical bytes = its bytes */
} loom__layout;

/* Fills layouts[n_values]. A reshape of non-contiguous data, and every non-view op,
 * owns storage. */
loom_status loom__graph_layouts(const loom_graph *g, loom__layout *layouts);

/* As loom__graph_layouts, with the parameters' layouts already in layouts (a loop's body
 * reads its operands where they are, through their own strides). */
loom_status loom__graph_layouts_given(const loom_graph *g, loom__layout *layouts);

/* True when layout describes dense C-order storage for type. */
bool loom__layout_contiguous(const loom__layout *l, const loom_type *type);

#endif
