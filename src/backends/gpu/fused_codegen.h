/* The generator of fused kernels (docs/ir-fusion.md), shared by the opencl and cuda backends: from a
 * fused op's body graph and the strides of its input views, the C source of one kernel that
 * computes the body's outputs without writing any intermediate to memory.
 *
 * The kernel, named `loom_fused`, takes for each body parameter p a pointer to its elements
 * and an element offset (p<k>, o<k>), then for each body output a pointer and an element
 * offset (r<k>, ro<k>). Each output element (a reduction's output, a topk row, or an element
 * of an elementwise body) evaluates the body's expression inline at the indices of the space
 * S: parameters and views of parameters are read through their base parameter's offset and
 * the view's strides (loom__graph_layouts_given, with the inputs' strides baked into the
 * text), scalar constants are literals, a small dot is k multiply-adds.
 *
 * Reductions (reduce_*, argmax/argmin) run in one of two ways, chosen by the caller:
 *  - group: one work-group of `group` work-items per output, each reducing a strided share of
 *    the reduced elements in index order, the shares merged by a tree in local memory;
 *    With LOOM__FZ_LOCKSTEP, the work-items take the reduced elements a round of `group` at a time
 *    with a barrier between rounds, which is what a CPU driver vectorizes (PoCL);
 *  - item: one work-item per output, the reduced elements in index order. With
 *    LOOM__FZ_VECTOR (OpenCL), a reduction over one axis of a body of float arithmetic only
 *    takes them 8 at a time in float8/double8 lanes (merged in lane order), which a CPU
 *    driver runs as SIMD code where it does not vectorize the scalar loop (PoCL).
 * topk takes one work-item per row, its heap kept in the row's place in the two outputs, as
 * the unfused kernel does. Semantics (wrapping integers, NaN propagation, ties, accumulation
 * in double where the device has fp64) are those of kernels/opencl/{elementwise,cast,reduce,
 * topk}.cl, so fused and unfused runs agree.
 *
 * The source text depends only on the body, the strides, the target, fp64 and the group
 * size, so it is the kernel's cache key. */
#ifndef LOOM_GPU_FUSED_CODEGEN_H
#define LOOM_GPU_FUSED_CODEGEN_H

#include "backends/backend.h"

typedef enum loom__fz_target {
  LOOM__FZ_OPENCL, /* OpenCL C 1.2 */
  LOOM__FZ_CUDA,   /* CUDA C++ for NVRTC: extern "C" __global__ loom_fused */
} loom__fz_target;

/* How the kernel's work is laid out (the launch follows from it). */
typedef enum loom__fz_shape {
  LOOM__FZ_ELEMENTWISE, /* one work-item per output element, grid-stride */
  LOOM__FZ_GROUP,       /* one work-group of `group` work-items per output, grid-stride */
  LOOM__FZ_ITEM,        /* one work-item per output (reductions), grid-stride */
  LOOM__FZ_ROWS,        /* topk: one work-item per row, grid-stride */
} loom__fz_shape;

/* Options of loom__fz_generate (bits). */
enum {
  LOOM__FZ_LOCKSTEP = 1u << 0, /* group reductions in rounds with a barrier between (below) */
  LOOM__FZ_VECTOR = 1u << 1,   /* OpenCL: reductions of float arithmetic in 8-lane vectors */
};

typedef struct loom__fz_kernel {
  char *source; /* owned, NUL-terminated */
  loom__fz_shape shape;
  int32_t group;     /* work-items per group for LOOM__FZ_GROUP (a power of 2), else 1 */
  int64_t n_units;   /* outputs, rows or elements the launch covers */
  int64_t n_reduced; /* elements reduced per output (1 without a reduction) */
  int32_t n_params, n_results;
} loom__fz_kernel;

/* Generates the kernel for `body` whose parameter k is read through in[k] (its type and
 * strides; offsets are kernel arguments). `group` > 1 asks for the group layout of
 * reductions with that many work-items (a power of 2), 1 or 0 for the item layout; it is
 * ignored for bodies without a reduction; flags are LOOM__FZ_* above. fp64: the device has doubles (f64
 * values, and float sums accumulated in double). Errors: UNSUPPORTED naming the body's op (or dtype) the
 * generator cannot express (f16/bf16/complex, iota, a view of a computed value, f64 without
 * fp64...), INVALID_ARGUMENT when in[] disagrees with the body's parameters, OUT_OF_MEMORY. */
loom_status loom__fz_generate(const loom_graph *body, const loom__dview *in, loom__fz_target target,
                              bool fp64, int32_t group, uint32_t flags, loom__fz_kernel *out);

/* Whether loom__fz_generate writes a kernel for `body` with dense operands on a device with
 * fp64 (LOOM_OK), or UNSUPPORTED naming what it cannot express; OUT_OF_MEMORY. */
loom_status loom__fz_supported(const loom_graph *body, loom__fz_target target);

/* Frees what loom__fz_generate made (accepts a zeroed kernel). */
void loom__fz_kernel_free(loom__fz_kernel *k);

/* Elements each output of the body's final reduction (reduce_*, argmax/argmin) folds; 1 for
 * other bodies. The launchers pick a work-group (block) per output from it. */
int64_t loom__fz_reduced_count(const loom_graph *body);

#endif
