/* The ONNX module's shared parts: the protobuf allocator, tensors, and the lowering context
 * that every op family's file (onnx_lower_*.c) works through. */
#ifndef LOOM_ONNX_INTERNAL_H
#define LOOM_ONNX_INTERNAL_H

#include "core/core.h"
#include "ir/ir.h"
#include "loom/onnx.h"
#include "onnx/onnx.pb-c.h"

/* protobuf-c allocates through Loom's host allocator, so a tensor's raw bytes can be handed to
 * the graph as a constant's storage without a copy (loom__onnx_tensor_decode). */
extern ProtobufCAllocator loom__onnx_allocator;

/* The Loom dtype of an ONNX TensorProto.DataType; false for those Loom has none of (string,
 * uint16/32/64, the undefined 0). */
bool loom__onnx_dtype(int32_t elem_type, loom_dtype *out);
/* ONNX's name of a TensorProto.DataType, for messages ("UINT32"). */
const char *loom__onnx_dtype_name(int32_t elem_type);

/* The type and contents of tensor t: *out_data is loom__malloc'd storage the caller owns
 * (NULL for an empty tensor), taken from t's raw_data without a copy where it can be (t's
 * raw_data is then emptied), else converted from the typed fields, or read from the external
 * file through a mapping. `path` is the model's (external locations are relative to its
 * folder) and `what` names the tensor in messages ("initializer 'W'"). Errors: INVALID_ARGUMENT
 * "<path>: <what>: ..." (an unknown element type, more than LOOM_MAX_RANK dims, data that does
 * not match dims and type), IO (an external file missing or too short), OUT_OF_MEMORY. */
loom_status loom__onnx_tensor_decode(Onnx__TensorProto *t, const char *path, const char *what,
                                     loom_type *out_type, void **out_data);

/* ---- the lowering context ---------------------------------------------------------------- */

/* One ONNX value by name: its type, its IR value once it has one, and its contents where they
 * are known when the model is read (initializers, Constant nodes, shapes, and what is computed
 * from them), so ops that need them as attributes (Reshape's shape, Slice's starts) read them
 * here, and a constant reaches the graph only if an op reads it as a tensor. */
typedef struct loom__onnx_val {
  char *name; /* the ONNX name, owned */
  loom_type type;
  loom_value v;    /* LOOM_VALUE_NONE until it is in the graph */
  void *host;      /* the known contents, or NULL */
  bool host_owned; /* host is ours to free (else the graph's constant storage) */
  bool named;      /* v took this ONNX name (loom__onnx_out), so an output returns it as is */
} loom__onnx_val;

typedef struct loom__onnx {
  loom_graph *g;
  const char *path;
  int64_t opset; /* of the default domain */
  loom__onnx_val *vals;
  int32_t n_vals, cap_vals;
  int32_t *slots; /* name -> vals index, open addressing, -1 empty */
  int32_t n_slots;
  const Onnx__NodeProto *node; /* the node being lowered */
  int32_t node_index;
} loom__onnx;

/* A lowering: reads the node's inputs and attributes through the context and defines its
 * outputs. Returns UNSUPPORTED through loom__onnx_refuse for what Loom cannot run. */
typedef loom_status (*loom__onnx_lower_fn)(loom__onnx *c, const Onnx__NodeProto *n, int64_t arg);

typedef struct loom__onnx_op {
  const char *op_type;
  loom__onnx_lower_fn lower;
  int64_t arg;       /* passed to lower: an IR op, a variant */
  const char *attrs; /* the attributes it reads, comma-separated; any other is refused */
} loom__onnx_op;

/* Each op family's table, ended by an entry with op_type NULL. */
extern const loom__onnx_op loom__onnx_ops_math[];
extern const loom__onnx_op loom__onnx_ops_layout[];
extern const loom__onnx_op loom__onnx_ops_reduce[];
extern const loom__onnx_op loom__onnx_ops_nn[];
extern const loom__onnx_op loom__onnx_ops_gather[];
extern const loom__onnx_op loom__onnx_ops_loss[];
extern const loom__onnx_op loom__onnx_ops_resize[];
extern const loom__onnx_op loom__onnx_ops_einsum[];

/* Computes node n now where its inputs are known small integer vectors (onnx_fold.c): true
 * when it did (its output then known, *out_status the result), false to lower it. */
bool loom__onnx_fold(loom__onnx *c, const Onnx__NodeProto *n, loom_status *out_status);

/* The value named `name`, or NULL. */
loom__onnx_val *loom__onnx_find(loom__onnx *c, const char *name);
/* Adds a value named `name` (an error if it is defined already). */
loom_status loom__onnx_add(loom__onnx *c, const char *name, const loom_type *type, loom__onnx_val **out);

/* Input k of the node being lowered: NULL when absent (past the end or an empty name). */
loom__onnx_val *loom__onnx_in(loom__onnx *c, int32_t k);
/* Input k as an IR value, the constant added to the graph on first use. LOOM_VALUE_NONE (and
 * the graph's sticky error set) when absent. */
loom_value loom__onnx_value(loom__onnx *c, int32_t k);
loom_value loom__onnx_materialize(loom__onnx *c, loom__onnx_val *x);
/* The integer contents of input k (i32 or i64, known when the model is read) into out[0..max);
 * refuses (naming the input) where they are not known or are more than max. */
loom_status loom__onnx_in_ints(loom__onnx *c, int32_t k, int64_t *out, int32_t max, int32_t *out_count);
/* Defines output k of the node as v (a name given nothing is ignored). */
/* A .lir name for an ONNX name into buf: each character .lir does not take becomes `_`, a
 * leading digit (or an auto label's v and digit) gets a `_` before it, and a name the graph
 * already holds gets a suffix (_2, _3, ...). */
void loom__onnx_lir_name(const loom_graph *g, const char *name, char *buf, size_t size);
loom_status loom__onnx_out(loom__onnx *c, int32_t k, loom_value v);
/* Defines output k as a constant known now: data (loom__malloc'd, taken) of type. */
loom_status loom__onnx_out_const(loom__onnx *c, int32_t k, const loom_type *type, void *data);

/* "<path>: node '<name>' (<op>): <message>" with UNSUPPORTED: what Loom cannot run. */
loom_status loom__onnx_refuse(loom__onnx *c, const char *fmt, ...) LOOM_PRINTF(2, 3);
/* The same with INVALID_ARGUMENT: what the model gets wrong. */
loom_status loom__onnx_invalid(loom__onnx *c, const char *fmt, ...) LOOM_PRINTF(2, 3);

/* Rewrites this thread's message with each control character (a newline in a name read from
 * the file) as '?', so that it stays one line, and starting with "<path>: " where it does not
 * yet; returns status. */
loom_status loom__onnx_one_line(loom_status status, const char *path);

/* Attributes of the node being lowered. */
const Onnx__AttributeProto *loom__onnx_attr(const Onnx__NodeProto *n, const char *name);
int64_t loom__onnx_attr_i(const Onnx__NodeProto *n, const char *name, int64_t def);
float loom__onnx_attr_f(const Onnx__NodeProto *n, const char *name, float def);
/* The ints of a list attribute into out[0..max); -1 when absent, -2 when more than max. */
int32_t loom__onnx_attr_ints(const Onnx__NodeProto *n, const char *name, int64_t *out, int32_t max);
/* Whether string attribute `name` equals s (def when absent). */
bool loom__onnx_attr_s_is(const Onnx__NodeProto *n, const char *name, const char *s, bool def);

/* A scalar constant of dtype, shape [] (broadcasts against anything). */
loom_value loom__onnx_scalar(loom__onnx *c, loom_dtype dtype, double value);
/* The type of v. */
const loom_type *loom__onnx_type(loom__onnx *c, loom_value v);
/* select(mask, values, 0) summed over axis (broadcasting mask and values), the gather of a
 * one-hot mask; bools are summed as u8 (onnx_lower_gather.c). */
loom_value loom__onnx_masked_sum(loom__onnx *c, loom_value mask, loom_value values, int64_t axis);
/* Normalizes an ONNX axis (negative counts from the end) for rank; refuses when outside. */
loom_status loom__onnx_axis(loom__onnx *c, int64_t axis, int32_t rank, int32_t *out);

#endif
