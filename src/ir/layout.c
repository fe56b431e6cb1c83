/* Which values own storage and which are views of another value's storage, and the
 * temporaries each op needs. The estimator and the runtime both read these, so what is
 * estimated is exactly what is allocated. */
#include <string.h>

#include "ir/fused_gemm_scratch.h"
#include "ir/ir.h"
#include "ir/view.h"

LOOM_HOT void loom__view_dense_strides(const loom_type *type, int64_t *strides) {
  int64_t s = 1;
  for (int32_t i = type->rank - 1; i >= 0; i--) {
    strides[i] = s;
    int64_t d = type->dims[i] > 0 ? type->dims[i] : 1;
    /* q4 rows are padded to a whole byte: its strides count nibbles (docs/ir-quant.md) */
    s = loom__sat_mul_i64(s, (type->dtype == LOOM_Q4 && i == type->rank - 1) ? loom__q4_row_nibbles(d) : d);
  }
}

void loom__view_broadcast_to(const loom__view *in, const loom_type *shape, loom__view *out) {
  loom__view v;
  memset(&v, 0, sizeof v);
  v.type = *shape;
  v.type.dtype = in->type.dtype;
  v.data = in->data;
  int32_t shift = shape->rank - in->type.rank;
  for (int32_t i = 0; i < shape->rank; i++) {
    int32_t j = i - shift;
    bool stretched = j < 0 || (in->type.dims[j] == 1 && shape->dims[i] != 1);
    v.strides[i] = stretched ? 0 : in->strides[j];
  }
  *out = v;
}

bool loom__layout_contiguous(const loom__layout *l, const loom_type *type) {
  int64_t dense[LOOM_MAX_RANK];
  loom__view_dense_strides(type, dense);
  for (int32_t i = 0; i < type->rank; i++)
    if (type->dims[i] > 1 && l->strides[i] != dense[i]) return false;
  return true;
}

LOOM_HOT int64_t loom__op_scratch_bytes(const loom_graph *g, const loom__op *op) {
  int64_t factor;
  switch (loom__op_info_of(op->kind)->cls) {
    case LOOM_CLASS_DOT:
    case LOOM_CLASS_REDUCE:
    case LOOM_CLASS_ARGREDUCE:
    case LOOM_CLASS_TOPK:
      factor = 1;
      break;
    case LOOM_CLASS_CONV:
    case LOOM_CLASS_FOURIER:
      factor = 2;
      break;
    case LOOM_CLASS_LOOP:
      return loom__loop_scratch_bytes(g, op);
    case LOOM_CLASS_FUSED:
      /* The final op's accumulator, as for that op alone; the body's intermediates live in
       * the evaluator's blocks, not in tensor memory (docs/ir-fusion.md, "Memory"). */
      factor = loom__fused_final(op->fused) ? 1 : 0;
      break;
    default:
      return 0;
  }
  int64_t total = 0;
  for (int32_t r = 0; r < op->n_outputs; r++) {
    int64_t bytes = 0;
    /* Types were checked by the builder, so this cannot overflow. */
    loom_type_bytes(&g->values[op->outputs[r]].type, &bytes);
    total += bytes;
  }
  /* a fused kNN's GEMM tiles come on top of the rule (fused_gemm_scratch.h) */
  return factor * total + (op->fused ? loom__fused_gemm_tile_bytes(op->fused) : 0);
}

static void owned(loom__layout *l, int32_t id, const loom_type *type) {
  memset(l, 0, sizeof *l);
  l->base = id;
  l->owns = true;
  loom__view_dense_strides(type, l->strides);
}

/* A view op's layout from its input's layout. Returns false when the op must materialize. */
static bool view_layout(const loom_graph *g, const loom__op *op, const loom__layout *in, loom__layout *out) {
  const loom_type *it = &g->values[op->inputs[0]].type;
  const loom_type *ot = &g->values[op->outputs[0]].type;
  *out = *in;
  out->owns = false;
  switch (op->kind) {
    case LOOM_OP_RESHAPE:
      /* A view of a fill (all strides 0) stays one whatever its shape. */
      if (g->values[in->base].op >= 0 && g->ops[g->values[in->base].op].kind == LOOM_OP_FILL) {
        memset(out->strides, 0, sizeof out->strides);
        return true;
      }
      if (!loom__layout_contiguous(in, it)) return false;
      loom__view_dense_strides(ot, out->strides);
      return true;
    case LOOM_OP_TRANSPOSE:
      for (int32_t i = 0; i < ot->rank; i++) out->strides[i] = in->strides[op->attrs.perm.v[i]];
      return true;
    case LOOM_OP_BROADCAST: {
      int32_t shift = ot->rank - it->rank;
      for (int32_t i = 0; i < ot->rank; i++) {
        int32_t j = i - shift;
        out->strides[i] = (j < 0 || (it->dims[j] == 1 && ot->dims[i] != 1)) ? 0 : in->strides[j];
      }
      return true;
    }
    case LOOM_OP_SLICE:
      for (int32_t i = 0; i < it->rank; i++) {
        int64_t step = (op->attrs.set & LOOM_ATTR_STEP) ? op->attrs.step.v[i] : 1;
        out->offset += op->attrs.start.v[i] * in->strides[i];
        out->strides[i] = in->strides[i] * step;
      }
      return true;
    default:
      return false;
  }
}

loom_status loom__graph_layouts(const loom_graph *g, loom__layout *layouts) {
  for (int32_t p = 0; p < g->n_params; p++)
    owned(&layouts[g->params[p]], g->params[p], &g->values[g->params[p]].type);
  return loom__graph_layouts_given(g, layouts);
}

loom_status loom__graph_layouts_given(const loom_graph *g, loom__layout *layouts) {
  for (int32_t i = 0; i < g->n_ops; i++) {
    const loom__op *op = &g->ops[i];
    int32_t out = op->outputs[0];
    if (op->kind == LOOM_OP_FILL) { /* a broadcast scalar: its own base, no storage */
      memset(&layouts[out], 0, sizeof layouts[out]);
      layouts[out].base = out;
      continue;
    }
    if (loom__op_info_of(op->kind)->cls == LOOM_CLASS_LAYOUT &&
        view_layout(g, op, &layouts[op->inputs[0]], &layouts[out]))
      continue;
    for (int32_t r = 0; r < op->n_outputs; r++)
      owned(&layouts[op->outputs[r]], op->outputs[r], &g->values[op->outputs[r]].type);
  }
  return LOOM_OK;
}
