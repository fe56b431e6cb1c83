/* The GEMM tiles of a fused kNN body, as the estimator counts them (fused_gemm_scratch.h). */
#include "ir/fused_gemm_scratch.h"

int64_t loom__fused_gemm_tile_bytes(const loom_graph *body) {
  const loom__op *fin = body ? loom__fused_final(body) : NULL;
  if (!fin || fin->kind != LOOM_OP_TOPK || fin->attrs.largest) return 0;
  const loom_type *s = &body->values[fin->inputs[0]].type;
  if (s->rank != 2) return 0;
  bool large = false;
  for (int32_t i = 0; i < body->n_ops && !large; i++) {
    const loom__op *op = &body->ops[i];
    if (op->kind != LOOM_OP_DOT) continue;
    const loom_type *a = &body->values[op->inputs[0]].type;
    large = a->rank == 2 && a->dims[1] > LOOM_FUSE_MAX_K;
  }
  if (!large) return 0;
  /* the area of the tiles, whatever their shape: a piece of few columns (a loop cut along y)
   * takes many rows a call; never more than the product itself, so a fused kNN never holds more
   * than its unfused ops */
  int64_t floats = LOOM_MIN((int64_t)LOOM_GEMM_TOPK_TILES * LOOM_GEMM_TOPK_ROWS * LOOM_GEMM_TOPK_COLS,
                            s->dims[0] * s->dims[1]);
  return floats * (int64_t)sizeof(float);
}
