/* Shape arithmetic every compute backend (cpu, opencl, cuda) does the same way while it sets
 * up an op: the loops of a reduction, the batch of a dot, the outputs of topk. Plain functions
 * of types and strides, so host views (loom__view) and device views (loom__dview) use them
 * alike. */
#ifndef LOOM_BACKEND_SHAPES_H
#define LOOM_BACKEND_SHAPES_H

#include "ir/ir.h"

/* Sorts n (dims[i], strides[i]) pairs by decreasing |stride| (stably), so a loop nest over
 * them has the smallest stride innermost. */
void loom__sort_by_stride(int32_t n, int64_t *dims, int64_t *strides);

/* The element offset of batch element idx (C order over dims[0..nb)) in an operand with batch
 * strides `strides`. */
int64_t loom__batch_offset(int64_t idx, int32_t nb, const int64_t *dims, const int64_t *strides);

/* A dot operand's batch strides along the output's nb batch dims (right-aligned, as NumPy; 0
 * where the operand has no such dim or broadcasts it): the operand is of type t with element
 * strides `strides` and mat_rank (1 or 2) matrix dims. */
void loom__batch_strides(const loom_type *t, const int64_t *strides, int32_t mat_rank, int32_t nb,
                         int64_t *bs);

/* True when topk's outputs fit its input: both of the input's shape with k on `axis`, values
 * of the input's dtype and i64 indices, 0 <= k <= the axis's length. */
bool loom__topk_outputs_fit(const loom__op *op, const loom_type *in, const loom_type *values,
                            const loom_type *indices, int32_t axis);

#endif
