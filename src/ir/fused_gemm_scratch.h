/* The scratch of a fused body that holds a dot of more than LOOM_FUSE_MAX_K terms below a topk
 * of the smallest (fuse.c's gemm_dot: a kNN's expanded distances). The cpu evaluator runs such a
 * body as GEMM tiles through the host BLAS (backends/cpu/cpu_fused_gemm.c); the tiles are
 * tensor-sized temporaries, so they come from the op's scratch and are counted by the estimator
 * like any op's, on top of IR.md's 1x the results (which holds a second column part's k best).
 * This is the cost hook IR.md names for a kernel that needs more than the rule. */
#ifndef LOOM_IR_FUSED_GEMM_SCRATCH_H
#define LOOM_IR_FUSED_GEMM_SCRATCH_H

#include "ir/ir.h"

/* A full tile is GEMM_TOPK_ROWS rows of x by GEMM_TOPK_COLS columns of y^T; the scratch holds
 * GEMM_TOPK_TILES of them (the threads share them: with more threads each tile is shorter). */
#define LOOM_GEMM_TOPK_ROWS 256
#define LOOM_GEMM_TOPK_COLS 1024
#define LOOM_GEMM_TOPK_TILES 2

/* Bytes of GEMM tiles a fused body needs beyond IR.md's rule: for a body whose final op is a
 * topk of the smallest over a matrix [n, m] and that holds a dot contracting more than
 * LOOM_FUSE_MAX_K terms, the area of LOOM_GEMM_TOPK_TILES full tiles in f32 (the kernel shapes
 * it: fewer columns, more rows), never more than n x m floats (the product the unfused dot would
 * store); 0 for any other body. A superset of the bodies the cpu kernel takes, so whatever it
 * takes it finds counted. Reads only the body's types; never fails. */
int64_t loom__fused_gemm_tile_bytes(const loom_graph *body);

#endif
