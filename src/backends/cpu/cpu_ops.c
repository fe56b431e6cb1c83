/* loom__cpu_run_op: checks what the runtime hands the cpu backend for one op and dispatches to
 * the kernel family of the op's class (cpu_kernels.h; the class to family map and the output
 * check are the backends' shared front-end's, backends/dispatch.h). The checks are cheap (per view, not
 * per element) and keep a kernel from reading or writing outside the views it was given. */
#include "backends/cpu/cpu_attention.h"
#include "backends/cpu/cpu_loops.h"
#include "backends/dispatch.h"

LOOM_HOT static loom_status check_view(const loom__op *op, const char *what, int32_t i, const loom__view *v) {
  const char *name = loom_op_name(op->kind);
  if (v->type.rank < 0 || v->type.rank > LOOM_MAX_RANK || (int)v->type.dtype < 0 ||
      v->type.dtype >= LOOM_DTYPE_COUNT)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: %s: %s %d has a bad type", name, what, (int)i + 1);
  for (int32_t d = 0; d < v->type.rank; d++)
    if (v->type.dims[d] < 0)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: %s: %s %d has a negative dimension", name, what,
                         (int)i + 1);
  if (!v->data && loom__cpu_elements(&v->type) > 0)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: %s: %s %d has no data", name, what, (int)i + 1);
  return LOOM_OK;
}

static loom_status check_inputs(const loom_graph *g, const loom__op *op, const loom__view *in) {
  const loom__op_info *info = loom__op_info_of(op->kind);
  if (op->n_inputs < info->min_inputs || (info->max_inputs >= 0 && op->n_inputs > info->max_inputs))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: %s: %d operands", info->name, (int)op->n_inputs);
  if (op->n_inputs > 0 && !in)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: %s: inputs are NULL", info->name);
  for (int32_t i = 0; i < op->n_inputs; i++) {
    loom_status s = check_view(op, "operand", i, &in[i]);
    if (s) return s;
    /* Shapes may be the runtime's broadcast of the value's; the dtype is the value's. */
    const loom_type *t = &g->values[op->inputs[i]].type;
    if (in[i].type.dtype != t->dtype)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: %s: operand %d is %s, the graph says %s",
                         info->name, (int)i + 1, loom_dtype_name(in[i].type.dtype),
                         loom_dtype_name(t->dtype));
  }
  return LOOM_OK;
}

LOOM_HOT static loom_status check_outputs(const loom_graph *g, const loom__op *op, const loom__view *out) {
  const loom__op_info *info = loom__op_info_of(op->kind);
  if (!out) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: %s: outputs are NULL", info->name);
  if (op->n_outputs != loom__op_result_count(op))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: %s: %d results, expected %d", info->name,
                       (int)op->n_outputs, (int)loom__op_result_count(op));
  for (int32_t r = 0; r < op->n_outputs; r++) {
    loom_status s = check_view(op, "output", r, &out[r]);
    if (s) return s;
    const loom_type *t = &g->values[op->outputs[r]].type;
    if (!loom_type_equal(&out[r].type, t)) {
      char a[LOOM_TYPE_STRING_MAX], b[LOOM_TYPE_STRING_MAX];
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: %s: output %d is %s, the graph says %s", info->name,
                         (int)r + 1, loom_type_format(&out[r].type, a, sizeof a),
                         loom_type_format(t, b, sizeof b));
    }
    s = loom__check_output_dense("cpu", info->name, r, &out[r].type, out[r].strides);
    if (s) return s;
  }
  return LOOM_OK;
}

/* ---- the families, by op class (dispatch.h) -------------------------------------------------- */

typedef loom_status (*cpu_family)(const loom_graph *g, const loom__op *op, const loom__view *in,
                                  const loom__view *out, void *scratch, int64_t scratch_bytes);

static loom_status run_elementwise(const loom_graph *g, const loom__op *op, const loom__view *in,
                                   const loom__view *out, void *scratch, int64_t scratch_bytes) {
  return loom__cpu_elementwise(g, op, in, out);
}

static loom_status run_layout(const loom_graph *g, const loom__op *op, const loom__view *in,
                              const loom__view *out, void *scratch, int64_t scratch_bytes) {
  return loom__cpu_layout(g, op, in, out);
}

/* A fused op's body runs in loom__cpu_fused (cpu_fused.c, docs/ir-fusion.md), an attention body
 * in loom__cpu_attention (cpu_attention.c); a body they have no
 * path for (complex values) answers UNSUPPORTED and the executor runs it op by op
 * (runtime/exec.c, run_fused_unfused). */
static loom_status run_fused(const loom_graph *g, const loom__op *op, const loom__view *in,
                             const loom__view *out, void *scratch, int64_t scratch_bytes) {
  (void)g;
  loom__attention att;
  if (loom__attention_body(op->fused, &att)) return loom__cpu_attention(&att, in, out);
  return loom__cpu_fused(op->fused, in, out, scratch, scratch_bytes);
}

/* topk shares the reductions' entry (cpu_reduce.c dispatches it to cpu_topk.c). */
static const cpu_family families[LOOM__FAMILY_COUNT] = {
    [LOOM__FAMILY_ELEMENTWISE] = run_elementwise, [LOOM__FAMILY_LAYOUT] = run_layout,
    [LOOM__FAMILY_REDUCE] = loom__cpu_reduce,     [LOOM__FAMILY_TOPK] = loom__cpu_reduce,
    [LOOM__FAMILY_DOT] = loom__cpu_dot,           [LOOM__FAMILY_CONV] = loom__cpu_conv,
    [LOOM__FAMILY_FOURIER] = loom__cpu_fourier,   [LOOM__FAMILY_FUSED] = run_fused,
    [LOOM__FAMILY_QUANT] = loom__cpu_quant,
};

LOOM_HOT loom_status loom__cpu_run_op(const loom_graph *g, const loom__op *op, const loom__view *inputs,
                                      const loom__view *outputs, void *scratch, int64_t scratch_bytes) {
  if (!g || !op) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: run_op: graph or op is NULL");
  const loom__op_info *info = loom__op_info_of(op->kind);
  if (!info) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: run_op: unknown op %d", (int)op->kind);
  if (scratch_bytes < 0 || (scratch_bytes > 0 && !scratch))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: %s: bad scratch (%lld bytes at %p)", info->name,
                       (long long)scratch_bytes, scratch);
  loom_status s = check_inputs(g, op, inputs);
  if (!s) s = check_outputs(g, op, outputs);
  if (s) return s;
  loom__family f = loom__family_of(info->cls);
  if (f == LOOM__FAMILY_COUNT || !families[f]) return loom__no_family("cpu", info->name);
  return families[f](g, op, inputs, outputs, scratch, scratch_bytes);
}
