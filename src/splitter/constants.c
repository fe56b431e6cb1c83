/* Weights placed with their stage (constants.h). */
#include "splitter/constants.h"

int64_t loom__split_constants_read(loom__split_info *si, int32_t o, int32_t gen) {
  const loom_graph *g = si->g;
  if (!si->live_op[o]) return 0;
  int64_t bytes = 0;
  const loom__op *op = &g->ops[o];
  for (int32_t i = 0; i < op->n_inputs; i++) {
    /* a view of a constant (a transposed or reshaped weight) holds the constant's storage */
    int32_t base = si->layouts[op->inputs[i]].base, producer = g->values[base].op;
    if (producer < 0 || g->ops[producer].kind != LOOM_OP_CONSTANT || si->stamp[base] == gen) continue;
    si->stamp[base] = gen;
    bytes = loom__sat_add_i64(bytes, si->physical[base]);
  }
  return bytes;
}

int64_t loom__split_constant_bytes(loom__split_info *si, int32_t first, int32_t end) {
  int32_t gen = ++si->stamp_gen;
  int64_t bytes = 0;
  for (int32_t o = first; o < end; o++)
    bytes = loom__sat_add_i64(bytes, loom__split_constants_read(si, o, gen));
  return bytes;
}
