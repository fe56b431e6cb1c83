/* The IR: graphs of tensor ops, built from C or parsed from .lir text (shared/IR.md).
 *
 * A graph owns its values and ops. Values are small handles (loom_value) valid only for the
 * graph that made them. Builder calls use a sticky error: once one fails, the graph remembers
 * the first error and every later builder call returns LOOM_VALUE_NONE without doing work,
 * so a chain of calls is checked once, at the end, by loom_graph_verify().
 *
 * Thread safety: a graph may be read (printed, estimated, run) from several threads at once,
 * but building it is single-threaded.
 */
#ifndef LOOM_GRAPH_H
#define LOOM_GRAPH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "loom/export.h"
#include "loom/status.h"
#include "loom/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(ENUM, "text name"). The order is part of the ABI; new ops go at the end. Laid out by hand,
 * grouped as IR.md groups the ops: clang-format reflows a macro of this shape differently on
 * each pass. */
/* clang-format off */
#define LOOM_OP_MAP(X)                                                                  \
  X(CONSTANT, "constant") X(IOTA, "iota") X(FILL, "fill")                               \
  X(NEG, "neg") X(ABS, "abs") X(SIGN, "sign") X(EXP, "exp") X(LOG, "log")               \
  X(SQRT, "sqrt") X(RSQRT, "rsqrt") X(SIN, "sin") X(COS, "cos") X(TANH, "tanh")         \
  X(SIGMOID, "sigmoid") X(RELU, "relu") X(FLOOR, "floor") X(CEIL, "ceil") X(NOT, "not") \
  X(ADD, "add") X(SUB, "sub") X(MUL, "mul") X(DIV, "div") X(POW, "pow")                 \
  X(MAXIMUM, "maximum") X(MINIMUM, "minimum")                                           \
  X(EQ, "eq") X(NE, "ne") X(LT, "lt") X(LE, "le") X(GT, "gt") X(GE, "ge")               \
  X(AND, "and") X(OR, "or")                                                             \
  X(SELECT, "select") X(CAST, "cast")                                                   \
  X(RESHAPE, "reshape") X(TRANSPOSE, "transpose") X(BROADCAST, "broadcast")             \
  X(SLICE, "slice") X(CONCAT, "concat") X(TILE, "tile")                                 \
  X(REDUCE_SUM, "reduce_sum") X(REDUCE_MAX, "reduce_max") X(REDUCE_MIN, "reduce_min")   \
  X(REDUCE_MEAN, "reduce_mean") X(REDUCE_PROD, "reduce_prod")                           \
  X(ARGMAX, "argmax") X(ARGMIN, "argmin") X(TOPK, "topk")                               \
  X(DOT, "dot") X(CONV, "conv")                                                         \
  X(FFT, "fft") X(IFFT, "ifft") X(RFFT, "rfft") X(IRFFT, "irfft")                       \
  X(SQUARE, "square") X(LOOP, "loop") X(FUSED, "fused")                                \
  X(QUANTIZE, "quantize") X(DEQUANTIZE, "dequantize")

typedef enum loom_op {
#define LOOM_X(e, name) LOOM_OP_##e,
  LOOM_OP_MAP(LOOM_X)
#undef LOOM_X
  LOOM_OP_COUNT
} loom_op;
/* clang-format on */

/* The .lir spelling of an op ("reduce_sum"); "?" when out of range. */
LOOM_API const char *loom_op_name(loom_op op);
/* Parses a .lir op name of `len` bytes; false when it names no op. */
LOOM_API bool loom_op_parse(const char *text, size_t len, loom_op *out_op);

/* A list attribute: at most LOOM_MAX_RANK integers. */
typedef struct loom_int_list {
  int32_t count;
  int64_t v[LOOM_MAX_RANK];
} loom_int_list;

/* Bits of loom_attrs.set: which attributes were given. */
enum {
  LOOM_ATTR_AXIS = 1u << 0,
  LOOM_ATTR_K = 1u << 1,
  LOOM_ATTR_N = 1u << 2,
  LOOM_ATTR_GROUPS = 1u << 3,
  LOOM_ATTR_LARGEST = 1u << 4,
  LOOM_ATTR_KEEPDIMS = 1u << 5,
  LOOM_ATTR_TO = 1u << 6,
  LOOM_ATTR_VALUE = 1u << 7,
  LOOM_ATTR_SHAPE = 1u << 8,
  LOOM_ATTR_PERM = 1u << 9,
  LOOM_ATTR_AXES = 1u << 10,
  LOOM_ATTR_START = 1u << 11,
  LOOM_ATTR_STOP = 1u << 12,
  LOOM_ATTR_STEP = 1u << 13,
  LOOM_ATTR_REPS = 1u << 14,
  LOOM_ATTR_STRIDE = 1u << 15,
  LOOM_ATTR_PADDING = 1u << 16,
  LOOM_ATTR_DILATION = 1u << 17,
};

/* Attributes of one op, as plain data. Only the fields whose bit is in `set` are meaningful;
 * the others take their documented defaults (keepdims=false, largest=true, groups=1, conv
 * stride 1, padding 0, dilation 1, slice step 1). Fill with loom_attrs_init(). */
typedef struct loom_attrs {
  uint32_t set;
  int64_t axis, k, n, groups;
  bool largest, keepdims;
  loom_dtype to;
  /* fill's value=V: the integer form is kept exactly when the literal was an integer. */
  double value;
  int64_t ivalue;
  bool value_is_int;
  loom_int_list shape, perm, axes, start, stop, step, reps, stride, padding, dilation;
} loom_attrs;

LOOM_API void loom_attrs_init(loom_attrs *attrs);

typedef struct loom_graph loom_graph;

/* A value handle. id < 0 is no value (a failed builder call). */
typedef struct loom_value {
  int32_t id;
} loom_value;
#define LOOM_VALUE_NONE ((loom_value){-1})

/* Creates an empty graph named `name` (a .lir name; NULL gives "main").
 * The caller owns *out_graph. Errors: INVALID_ARGUMENT (bad name), OUT_OF_MEMORY. */
LOOM_API loom_status loom_graph_create(const char *name, loom_graph **out_graph);
/* Frees a graph and everything in it. Accepts NULL. */
LOOM_API void loom_graph_destroy(loom_graph *graph);
/* A deep copy. The caller owns *out_graph. */
LOOM_API loom_status loom_graph_clone(const loom_graph *graph, loom_graph **out_graph);

/* Adds an input parameter `name` of `type`. Parameters are the graph's inputs, in order. */
LOOM_API loom_value loom_graph_param(loom_graph *graph, const char *name, const loom_type *type);

/* The generic builder call: adds one op with `n_inputs` operands and `attrs` (NULL for none),
 * infers its result types, and writes its results (1, or 2 for topk) to outs[0..n_outs).
 * `const_data` is the contents for constant (dense, C order, as loom_tensor), else NULL;
 * the graph copies it. `result_type` is required for constant, iota and fill, and otherwise,
 * when non-NULL, must equal the inferred type (the .lir `: TYPE` annotation).
 * On failure the graph's sticky error is set, outs are LOOM_VALUE_NONE, and the status is
 * returned; the message names the op, its operands and the rule broken. */
LOOM_API loom_status loom_graph_add(loom_graph *graph, loom_op op, const loom_value *inputs, int32_t n_inputs,
                                    const loom_attrs *attrs, const loom_type *result_type,
                                    const void *const_data, loom_value *outs, int32_t n_outs);

/* Convenience builders over loom_graph_add. Each returns the (first) result. */
LOOM_API loom_value loom_unary(loom_graph *graph, loom_op op, loom_value x);
LOOM_API loom_value loom_binary(loom_graph *graph, loom_op op, loom_value a, loom_value b);
LOOM_API loom_value loom_constant(loom_graph *graph, const loom_type *type, const void *data);
LOOM_API loom_value loom_scalar_f64(loom_graph *graph, loom_dtype dtype, double value);
LOOM_API loom_value loom_fill(loom_graph *graph, const loom_type *type, double value);
LOOM_API loom_value loom_iota(loom_graph *graph, const loom_type *type, int64_t axis);
LOOM_API loom_value loom_select(loom_graph *graph, loom_value cond, loom_value a, loom_value b);
LOOM_API loom_value loom_cast(loom_graph *graph, loom_value x, loom_dtype to);
LOOM_API loom_value loom_reshape(loom_graph *graph, loom_value x, int32_t rank, const int64_t *shape);
LOOM_API loom_value loom_transpose(loom_graph *graph, loom_value x, int32_t rank, const int64_t *perm);
LOOM_API loom_value loom_broadcast(loom_graph *graph, loom_value x, int32_t rank, const int64_t *shape);
/* step may be NULL (all 1). */
LOOM_API loom_value loom_slice(loom_graph *graph, loom_value x, int32_t rank, const int64_t *start,
                               const int64_t *stop, const int64_t *step);
LOOM_API loom_value loom_concat(loom_graph *graph, const loom_value *xs, int32_t n, int64_t axis);
LOOM_API loom_value loom_tile(loom_graph *graph, loom_value x, int32_t rank, const int64_t *reps);
/* op is one of the reduce_* ops. */
LOOM_API loom_value loom_reduce(loom_graph *graph, loom_op op, loom_value x, int32_t n_axes,
                                const int64_t *axes, bool keepdims);
/* op is LOOM_OP_ARGMAX or LOOM_OP_ARGMIN. */
LOOM_API loom_value loom_argreduce(loom_graph *graph, loom_op op, loom_value x, int64_t axis);
/* Writes values to *out_values and i64 indices to *out_indices (either may be NULL). */
LOOM_API loom_status loom_topk(loom_graph *graph, loom_value x, int64_t k, int64_t axis, bool largest,
                               loom_value *out_values, loom_value *out_indices);
LOOM_API loom_value loom_dot(loom_graph *graph, loom_value a, loom_value b);
/* stride, padding, dilation may be NULL for the defaults; n_spatial is rank(x) - 2. */
LOOM_API loom_value loom_conv(loom_graph *graph, loom_value x, loom_value w, const int64_t *stride,
                              const int64_t *padding, const int64_t *dilation, int64_t groups);
/* op is fft, ifft, rfft (n ignored) or irfft (n = output length along axis). */
LOOM_API loom_value loom_fourier(loom_graph *graph, loom_op op, loom_value x, int64_t axis, int64_t n);

/* ---- quantized values (docs/ir-quant.md) ---------------------------------------------------
 * `quantize x to=q8|q4 [axis=A]`: f32 x -> its quantized values (x's shape) and their f32
 * scale, symmetric: scale = max|x| / 127 (q8) or / 7 (q4) over the whole tensor (axis < 0: a
 * scale of shape []) or per index of axis A (a scale of shape [dims[A]]); q = x / scale
 * rounded half to even, saturated. Writes q to *out_q and the scale to *out_scale (either may
 * be NULL); the status is the graph's sticky error. */
LOOM_API loom_status loom_quantize(loom_graph *graph, loom_value x, loom_dtype to, int64_t axis,
                                   loom_value *out_q, loom_value *out_scale);
/* `dequantize q scale [axis=A]`: f32 q * scale, the scale per tensor (axis < 0, scale f32[]) or
 * per index of axis A (scale f32[dims[A]]). */
LOOM_API loom_value loom_dequantize(loom_graph *graph, loom_value q, loom_value scale, int64_t axis);

/* ---- loops (docs/ir-loops.md) -------------------------------------------------------------
 *
 * A loop runs a body graph over pieces of one axis of length n: piece i covers
 * [i * piece, min((i + 1) * piece, n)), so the last piece is shorter where piece does not
 * divide n. Each operand is either sliced (the body sees `piece` elements of its `axis`,
 * starting at `offset` + the piece's start) or passed whole. Each result is combined across
 * pieces as its loom_loop_output says. The body's parameters are the operands as one full
 * piece sees them; its returned values are one piece's results. A body may hold loops. */

/* How a loop combines one result across pieces. */
typedef enum loom_combine {
  LOOM_COMBINE_CONCAT, /* each piece's result written in place at the piece's start along axis */
  LOOM_COMBINE_SUM,    /* elementwise over pieces (dot over k is a sum of partial products) */
  LOOM_COMBINE_PROD,
  LOOM_COMBINE_MAX, /* NaN propagates, as reduce_max */
  LOOM_COMBINE_MIN,
  /* Pairs: this result holds the best values and the next must be LOOM_COMBINE_INDEX, the body's
   * i64 indices along the loop axis counted from the piece's start; the loop gives indices
   * counted from 0. ARGMAX/ARGMIN keep, per element, the piece with the better value (ties and
   * NaN as argmax/argmin); TOPK merges the candidates along `axis` (k and largest as topk). */
  LOOM_COMBINE_ARGMAX,
  LOOM_COMBINE_ARGMIN,
  LOOM_COMBINE_TOPK,
  LOOM_COMBINE_INDEX,
  LOOM_COMBINE_COUNT
} loom_combine;

/* The .lir spelling of a combine ("concat", "sum", ..., "index"); "?" when out of range. */
LOOM_API const char *loom_combine_name(loom_combine combine);

/* How one operand reaches the body: sliced along `axis` (>= 0) from `offset` on, or whole
 * (axis -1, offset 0). A sliced operand may read a window (docs/ir-loops.md, "Windows"): with
 * `stride` S > 1 or `halo` H > 0, piece [lo, hi) reads elements [offset + lo S, offset + (hi - 1)
 * S + 1 + H) along the axis, overlapping its neighbours' where H >= S, and reads zeros where
 * that passes either end of the operand (a convolution's padding: offset may then be
 * negative). stride 0 means 1, so {axis, offset} alone is a plain slice. */
typedef struct loom_loop_input {
  int32_t axis;
  int64_t offset;
  int64_t stride;
  int64_t halo;
} loom_loop_input;

/* How one result is combined: `axis` for CONCAT (the result's axis the pieces fill) and TOPK
 * (the candidates' axis), `k` and `largest` for TOPK; unused fields 0. */
typedef struct loom_loop_output {
  loom_combine combine;
  int32_t axis;
  int64_t k;
  bool largest;
} loom_loop_output;

/* Adds a loop over n elements in pieces of `piece` (1 <= piece <= n): `body` (verified, with
 * one parameter per operand and one returned value per result; the graph copies it, the
 * caller keeps its own) runs once per piece on operands[i] as rules[i] says, and its results
 * are combined into outs[0..n_outputs) as combines[j] says (at most LOOM_LOOP_MAX_RESULTS).
 * The checks: each parameter's type is its operand's as a full piece sees it (for a window,
 * (piece - 1) stride + 1 + halo long on its axis); a sliced axis holds offset + n elements (a
 * window reads some of its operand's elements, not only padding); a CONCAT result depends on the piece along
 * `axis` (its length there is the piece's) and every other result does not depend on it at all; INDEX follows
 * ARGMAX/ARGMIN/TOPK with an i64 result of the same shape; TOPK's values hold k along axis,
 * and the last piece holds at least k elements. Errors: INVALID_ARGUMENT naming the loop,
 * the operand or result and the rule broken (sticky, as loom_graph_add); OUT_OF_MEMORY. */
#define LOOM_LOOP_MAX_RESULTS 16
LOOM_API loom_status loom_graph_add_loop(loom_graph *graph, int64_t n, int64_t piece, const loom_graph *body,
                                         const loom_value *operands, const loom_loop_input *rules,
                                         int32_t n_operands, const loom_loop_output *combines,
                                         int32_t n_outputs, loom_value *outs);

/* The body of loop op `index` (NULL when it is not a loop), owned by the graph, and its
 * figures; any out pointer may be NULL. Errors: INVALID_ARGUMENT (not a loop, bad index). */
LOOM_API loom_status loom_graph_loop_get(const loom_graph *graph, int32_t index, const loom_graph **out_body,
                                         int64_t *out_n, int64_t *out_piece);
/* How many slices of each streamed operand (docs/ir-loops.md, Memory) loop op `index` holds
 * through its run where it runs more than one piece: 2 (LOOM_LOOP_SLICES_DEFAULT, every loop
 * loom_graph_add_loop makes), the piece's and the next one's, which a device with memory of
 * its own writes while the piece computes (double buffering); or 1, where there is no copy to
 * overlap (cpu0 reads host memory in place) and the room is better spent on longer pieces.
 * The estimate counts what this says, and the executor holds no more. The chunk rewrite sets
 * it from loom_optimize_options.slices. Errors: INVALID_ARGUMENT (not a loop, slices not 1 or
 * 2; the loop is unchanged). */
#define LOOM_LOOP_SLICES_DEFAULT 2
LOOM_API loom_status loom_graph_loop_set_slices(loom_graph *graph, int32_t index, int32_t slices);
/* The slices of loop op `index` (1 or 2); 0 when it is not a loop. */
LOOM_API int32_t loom_graph_loop_slices(const loom_graph *graph, int32_t index);
/* The rule of operand k and the combine of result k of loop op `index`. Errors:
 * INVALID_ARGUMENT (not a loop, k out of range, NULL out). */
LOOM_API loom_status loom_graph_loop_input_rule(const loom_graph *graph, int32_t index, int32_t k,
                                                loom_loop_input *out_rule);
LOOM_API loom_status loom_graph_loop_output_combine(const loom_graph *graph, int32_t index, int32_t k,
                                                    loom_loop_output *out_combine);

/* The body of fused op `index` (docs/ir-fusion.md: the fusion pass makes fused ops; there is
 * no builder for them), owned by the graph: its parameters are the op's operands, its outputs
 * the op's results. Errors: INVALID_ARGUMENT (not a fused op, bad index, NULL out). */
LOOM_API loom_status loom_graph_fused_get(const loom_graph *graph, int32_t index,
                                          const loom_graph **out_body);

/* Marks the graph's outputs, in order. May be called once. */
LOOM_API loom_status loom_graph_return(loom_graph *graph, const loom_value *values, int32_t n);

/* Gives value `v` a .lir name (unique in the graph). Unnamed values print as v<N>. */
LOOM_API loom_status loom_value_set_name(loom_graph *graph, loom_value v, const char *name);

/* The first builder error, or LOOM_OK. Also checks that the graph has returned outputs and
 * that every op is well formed; the message names the first failing op. */
LOOM_API loom_status loom_graph_verify(const loom_graph *graph);

/* Queries. Pointers returned stay valid until the graph is changed or destroyed. */
LOOM_API const char *loom_graph_name(const loom_graph *graph);
LOOM_API int32_t loom_graph_param_count(const loom_graph *graph);
LOOM_API loom_value loom_graph_param_at(const loom_graph *graph, int32_t i);
LOOM_API int32_t loom_graph_output_count(const loom_graph *graph);
LOOM_API loom_value loom_graph_output_at(const loom_graph *graph, int32_t i);
LOOM_API int32_t loom_graph_op_count(const loom_graph *graph);
LOOM_API const loom_type *loom_value_type(const loom_graph *graph, loom_value v);
LOOM_API const char *loom_value_name(const loom_graph *graph, loom_value v);
/* Finds a value by name; LOOM_VALUE_NONE when absent. */
LOOM_API loom_value loom_graph_find(const loom_graph *graph, const char *name);

/* One op of a graph, as loom_graph_op_info_get describes it. Ops are indexed 0 ..
 * loom_graph_op_count - 1 in the graph's order (the order they were added or parsed in, which
 * is a valid execution order), the indexes loom_graph_estimate and plans report. */
typedef struct loom_op_info {
  loom_op kind;
  int32_t n_inputs;  /* loom_graph_op_input takes 0 .. n_inputs - 1 */
  int32_t n_outputs; /* 1, 2 for topk, a loop's count; loom_graph_op_output takes 0 .. n_outputs - 1 */
  int32_t line, col; /* where the parser found it; 0 when built through the C API */
} loom_op_info;

/* Describes op `index`. Errors: INVALID_ARGUMENT (NULL pointers, index out of range). */
LOOM_API loom_status loom_graph_op_info_get(const loom_graph *graph, int32_t index, loom_op_info *out_info);
/* The k-th input / result of op `index`; LOOM_VALUE_NONE when the graph is NULL or an index
 * is out of range. */
LOOM_API loom_value loom_graph_op_input(const loom_graph *graph, int32_t index, int32_t k);
LOOM_API loom_value loom_graph_op_output(const loom_graph *graph, int32_t index, int32_t k);
/* A value's label for messages and listings: its name, or "v<id>" for an unnamed value,
 * written into buf (size bytes, truncated to fit) unless the stored name is returned. Returns
 * the label (buf or a string owned by the graph), "?" for a NULL graph or a bad value. */
LOOM_API const char *loom_value_label(const loom_graph *graph, loom_value v, char *buf, size_t size);

/* Parses .lir text. `filename` is used only in messages ("file.lir:5:12: error: ...").
 * The caller owns *out_graph. Errors: INVALID_ARGUMENT with a one-line located message for
 * any syntax, type or name error; OUT_OF_MEMORY. */
LOOM_API loom_status loom_graph_parse(const char *text, size_t len, const char *filename,
                                      loom_graph **out_graph);
/* Reads and parses a .lir file. IO errors name the path. */
LOOM_API loom_status loom_graph_load(const char *path, loom_graph **out_graph);
/* Prints the graph as .lir text; parsing the result gives the same graph. */
LOOM_API loom_status loom_graph_print(const loom_graph *graph, FILE *stream);
/* Prints into a newly allocated NUL-terminated string the caller frees with free(). */
LOOM_API loom_status loom_graph_to_string(const loom_graph *graph, char **out_text);

#ifdef __cplusplus
}
#endif
#endif
