/* The cpu backend as the executor sees it (backend.h): buffers are host memory from the
 * HMM's host node, and ops run at once through loom__cpu_run_op, so there is nothing to
 * synchronize. */
#include <string.h>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/cpu_kernels.h"

void loom__dview_to_host(const loom__dview *in, loom__view *out) {
  /* Every field is set (no padding), so no memset of the whole view: it ran per operand. */
  out->type = in->type;
  memcpy(out->strides, in->strides, sizeof out->strides);
  out->data = in->buffer ? (char *)in->buffer + loom__dtype_offset_bytes(in->type.dtype, in->offset) : NULL;
}

/* A misspelt LOOM_CPU_ISA is named, not ignored: checked once when the executor opens the
 * device, not on every op (it was a twelfth of a one-add op's instructions beyond f534f4f's). */
static loom_status cpu_open(const struct loom__device *device, struct loom_mem_manager *memory, int32_t node,
                            void **out_dev) {
  (void)device, (void)memory, (void)node;
  *out_dev = NULL;
  return loom__cpu_isa_check();
}

LOOM_HOT static loom_status cpu_run(void *dev, const loom__op_call *c) {
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
  loom_status s = c->accumulate && c->op->kind == LOOM_OP_DOT
                      ? loom__cpu_dot_into(c->g, c->op, ins, out_views, true, c->scratch, c->scratch_bytes)
                      : loom__cpu_run_op(c->g, c->op, ins, out_views, c->scratch, c->scratch_bytes);
  if (ins != in_views) loom__free(ins);
  return s;
}

static loom_status cpu_synchronize(void *dev) {
  (void)dev;
  return LOOM_OK;
}

static loom_status cpu_copy(void *dev, int64_t elem, int32_t rank, const int64_t *dims, void *dst,
                            int64_t dst_off, const int64_t *dst_strides, void *src, int64_t src_off,
                            const int64_t *src_strides) {
  (void)dev;
  if (rank < 0 || rank > 2 * LOOM_MAX_RANK ||
      (elem != 1 && elem != 2 && elem != 4 && elem != 8 && elem != 16))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: copy of rank %d, %lld-byte elements", (int)rank,
                       (long long)elem);
  for (int32_t d = 0; d < rank; d++)
    if (dims[d] == 0) return LOOM_OK;
  loom__cpu_strided_copy(elem, rank, dims, (char *)dst + dst_off * elem, dst_strides,
                         (const char *)src + src_off * elem, src_strides);
  return LOOM_OK;
}

/* Rows of the merge are short (2k candidates): threads only pay off over many of them. */
#define MERGE_PARALLEL_MIN 65536

static loom_status cpu_merge_index(void *dev, int64_t total, int64_t k, int64_t inner, void *pos,
                                   int64_t pos_off, void *acc, int64_t acc_off, void *piece,
                                   int64_t piece_off, int64_t lo) {
  (void)dev;
  if (total <= 0) return LOOM_OK;
  int64_t *p = (int64_t *)pos + pos_off;
  const int64_t *a = (const int64_t *)acc + acc_off, *b = (const int64_t *)piece + piece_off;
#pragma omp parallel for schedule(static) if (total > MERGE_PARALLEL_MIN)
  for (int64_t e = 0; e < total; e++) {
    int64_t row = e / (k * inner) * k * inner + e % inner, q = p[e];
    p[e] = q < k ? a[row + q * inner] : b[row + (q - k) * inner] + lo;
  }
  return LOOM_OK;
}

const loom__backend loom__cpu_backend = {
    .name = "cpu",
    .host_memory = true,
    .dot_accumulates = true,
    .open = cpu_open,
    .run_op = cpu_run,
    .synchronize = cpu_synchronize,
    .copy = cpu_copy,
    .merge_index = cpu_merge_index,
};
