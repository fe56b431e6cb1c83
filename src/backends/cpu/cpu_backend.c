/* The cpu backend as the executor sees it (backend.h): buffers are host memory from the
 * HMM's host node, and ops run at once through loom__cpu_run_op, so there is nothing to
 * synchronize. */
#include <string.h>

#include "backends/backend.h"

void loom__dview_to_host(const loom__dview *in, loom__view *out) {
  /* Every field is set (no padding), so no memset of the whole view: it ran per operand. */
  out->type = in->type;
  memcpy(out->strides, in->strides, sizeof out->strides);
  out->data = in->buffer ? (char *)in->buffer + in->offset * loom_dtype_size(in->type.dtype) : NULL;
}

static loom_status cpu_run(void *dev, const loom__op_call *c) {
  (void)dev;
  loom__view in_views[8], out_views[2];
  int32_t n_in = c->op->n_inputs, n_out = c->op->n_outputs;
  /* Kernels read only the views of the op's operands and results; the ones left over are
   * zeroed alone (zeroing all ten views cost as much as a small op's kernel). */
  if (n_in == 0) memset(in_views, 0, sizeof in_views[0]);
  if (n_out < 2) memset(&out_views[1], 0, sizeof out_views[1]);
  loom__view *ins = n_in <= 8 ? in_views : loom__malloc(sizeof(loom__view) * (size_t)n_in);
  if (!ins) return loom__oom("operand views");
  for (int32_t i = 0; i < n_in; i++) loom__dview_to_host(&c->in[i], &ins[i]);
  for (int32_t r = 0; r < n_out && r < 2; r++) loom__dview_to_host(&c->out[r], &out_views[r]);
  loom_status s = loom__cpu_run_op(c->g, c->op, ins, out_views, c->scratch, c->scratch_bytes);
  if (ins != in_views) loom__free(ins);
  return s;
}

static loom_status cpu_synchronize(void *dev) {
  (void)dev;
  return LOOM_OK;
}

const loom__backend loom__cpu_backend = {
    .name = "cpu",
    .host_memory = true,
    .run_op = cpu_run,
    .synchronize = cpu_synchronize,
};
