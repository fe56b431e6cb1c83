/* ONNX models read into the IR (docs/onnx.md).
 *
 * An ONNX model (.onnx, a ModelProto) becomes a loom_graph: its inputs that are not
 * initializers become the graph's parameters and its outputs the graph's results, in the
 * model's order, each under its ONNX name (a name that is not a .lir name is spelt with `_` for
 * each character .lir does not take, and a leading `_` before a digit: "input:0" is input_0).
 * Initializers and Constant nodes become constants held once, in the graph; tensors in
 * external-data files are read through a mapping of the file. Each node is lowered to IR ops or
 * to a composition of them; a node Loom cannot run (an op, an attribute value, a dtype, a shape
 * known only when the model runs) is refused when the model is read, with a message naming the
 * file, the node, its op type and what is missing, never run with a wrong result.
 *
 * Thread safety: every call here works on its own arguments only; several models may be read
 * at once from several threads.
 */
#ifndef LOOM_ONNX_H
#define LOOM_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "loom/export.h"
#include "loom/graph.h"
#include "loom/status.h"
#include "loom/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a model is read. Fill with loom_onnx_options_init, then set what differs. */
typedef struct loom_onnx_options {
  /* Types for some of the model's inputs, by ONNX name: they replace the type the model
   * declares (an input whose shape has a symbolic dimension, "batch", needs one, since a Loom
   * graph's shapes are fixed). Each must have the declared rank and element type, and equal
   * every dimension the model fixes. n_input_types entries; the arrays stay the caller's. */
  int32_t n_input_types;
  const char *const *input_names;
  const loom_type *input_types;
  /* Values for some of the model's inputs, by ONNX name, known when the model is read: each
   * becomes a constant (copied) rather than a parameter. An input that fixes a shape (Reshape's
   * shape, Slice's starts, TopK's k, a reduction's axes) must be given here, since a Loom
   * graph's shapes are fixed. Each value's type must match the model's input as input_types
   * must. n_input_values entries; the arrays stay the caller's. */
  int32_t n_input_values;
  const char *const *value_names;
  const loom_tensor *input_values;
} loom_onnx_options;

/* Fills *options with the defaults: no input types or values given. */
LOOM_API void loom_onnx_options_init(loom_onnx_options *options);

/* Reads the ONNX model at `path` into a new graph, named after the model's graph. `options`
 * may be NULL for the defaults. The caller owns *out_graph (loom_graph_destroy); it is NULL on
 * failure. Errors, each with a one-line message that starts with the path:
 * IO (the file cannot be read; an external-data file is missing or shorter than a tensor
 * says), INVALID_ARGUMENT (not an ONNX model, truncated, a tensor whose data does not match its
 * dims and type, an input type in `options` that does not match the model), UNSUPPORTED (an
 * opset outside 7 to 17, an op or attribute Loom cannot run: the message names the node and
 * its op type), OUT_OF_MEMORY. */
LOOM_API loom_status loom_graph_from_onnx(const char *path, const loom_onnx_options *options,
                                          loom_graph **out_graph);

/* As loom_graph_from_onnx, from `size` bytes of a model already in memory (the bytes stay the
 * caller's and may be freed once this returns). `path` names the model in messages and is the
 * file that external-data locations are relative to; it is not opened itself. */
LOOM_API loom_status loom_graph_from_onnx_bytes(const void *data, size_t size, const char *path,
                                                const loom_onnx_options *options, loom_graph **out_graph);

/* Reads a graph from `path`, as the tools do: an ONNX model (loom_graph_from_onnx with the
 * default options) where the name ends in ".onnx" or the file starts as a ModelProto does (its
 * ir_version field), else a .lir file (loom_graph_load). A pipe or FIFO (/dev/stdin, a shell's
 * <(...)) is read whole once, up to 1 GiB, and parsed from memory as its first byte says. The
 * caller owns *out_graph. Errors: those of the reader chosen; IO (a stream that cannot be read),
 * INVALID_ARGUMENT (a stream over 1 GiB). */
LOOM_API loom_status loom_graph_load_any(const char *path, loom_graph **out_graph);

/* Reads one ONNX TensorProto file (.pb, as ONNX's test data holds its inputs and outputs) into
 * *out, allocated by Loom: the caller releases it with loom_tensor_deinit. *out_name, when not
 * NULL, receives the tensor's name (possibly empty), which the caller frees with free(); NULL
 * on failure. Errors (message starting with the path): IO, INVALID_ARGUMENT (not a
 * TensorProto, a data size that does not match its dims, an element type Loom has no dtype
 * for: string, uint16/32/64), OUT_OF_MEMORY. */
LOOM_API loom_status loom_tensor_load_onnx_pb(const char *path, loom_tensor *out, char **out_name);

#ifdef __cplusplus
}
#endif
#endif
