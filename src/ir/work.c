/* The work model of an op (ir.h, loom__op_work): its size by class of work (loom/sched.h's
 * loom_op_class) and the kernels it takes. Beside the memory estimator, as it reads a graph
 * alone: the splitter weighs branches by it, the scheduler prices tasks by it
 * (loom_sched_op_work). */
#include <math.h>

#include "ir/ir.h"
#include "loom/sched.h"

static double elements(const loom_graph *g, loom_value v) {
  const loom_type *t = loom_value_type(g, v);
  int64_t n = 0;
  return t && !loom_type_elements(t, &n) ? (double)n : 0;
}

static void add(double *sizes, int32_t *kernels, loom_op_class c, double size) {
  if (size <= 0) return;
  sizes[c] += size;
  kernels[c] += 1;
}

loom_status loom__body_work(const loom_graph *body, double scale, double *sizes, int32_t *kernels) {
  double s[LOOM_OP_CLASS_COUNT] = {0};
  int32_t k[LOOM_OP_CLASS_COUNT] = {0};
  for (int32_t i = 0; i < loom_graph_op_count(body); i++) {
    loom_status st = loom__op_work(body, i, s, k);
    if (st) return st;
  }
  for (int c = 0; c < LOOM_OP_CLASS_COUNT; c++) {
    sizes[c] += s[c] * scale;
    kernels[c] += (int32_t)ceil(k[c] * scale);
  }
  return LOOM_OK;
}

/* Flops of dot a b: 2 x output elements x the contracted length. */
static double dot_flops(const loom_graph *g, int32_t index) {
  const loom_type *a = loom_value_type(g, loom_graph_op_input(g, index, 0));
  double k = a && a->rank > 0 ? (double)a->dims[a->rank - 1] : 1;
  return 2 * elements(g, loom_graph_op_output(g, index, 0)) * k;
}

/* Flops of conv: 2 x output elements x (input channels / groups x kernel elements). */
static double conv_flops(const loom_graph *g, int32_t index) {
  const loom_type *w = loom_value_type(g, loom_graph_op_input(g, index, 1));
  double per = 1;
  for (int32_t d = 1; w && d < w->rank; d++) per *= (double)w->dims[d];
  return 2 * elements(g, loom_graph_op_output(g, index, 0)) * per;
}

static double fft_flops(const loom_graph *g, int32_t index) {
  double in = elements(g, loom_graph_op_input(g, index, 0)),
         out = elements(g, loom_graph_op_output(g, index, 0));
  const loom_type *t = loom_value_type(g, loom_graph_op_input(g, index, 0));
  double n = in > out ? in : out, len = t && t->rank ? (double)t->dims[t->rank - 1] : 2;
  return 5 * n * log2(len > 2 ? len : 2);
}

static loom_status loop_work(const loom_graph *g, int32_t index, double *sizes, int32_t *kernels) {
  const loom_graph *body = NULL;
  int64_t n = 0, piece = 1;
  loom_status s = loom_graph_loop_get(g, index, &body, &n, &piece);
  return s ? s : loom__body_work(body, (double)n / (double)piece, sizes, kernels);
}

loom_status loom__op_work(const loom_graph *g, int32_t index, double *sizes, int32_t *kernels) {
  loom_op_info info;
  if (!sizes || !kernels) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "op work: NULL out");
  loom_status s = loom_graph_op_info_get(g, index, &info);
  if (s) return s;
  loom_value out = loom_graph_op_output(g, index, 0), in = loom_graph_op_input(g, index, 0);
  int64_t phys = 0;
  switch (info.kind) {
    case LOOM_OP_CONSTANT:
    case LOOM_OP_FILL:
    case LOOM_OP_RESHAPE:
    case LOOM_OP_TRANSPOSE:
    case LOOM_OP_BROADCAST:
    case LOOM_OP_SLICE:
      /* Views cost nothing; a reshape or transpose that copies does the work of a copy. */
      if (info.kind != LOOM_OP_CONSTANT && info.kind != LOOM_OP_FILL &&
          !loom_value_bytes(g, out, NULL, &phys) && phys)
        add(sizes, kernels, LOOM_OP_CLASS_COPY, (double)phys);
      return LOOM_OK;
    case LOOM_OP_CONCAT:
    case LOOM_OP_TILE:
      if (!loom_value_bytes(g, out, NULL, &phys)) add(sizes, kernels, LOOM_OP_CLASS_COPY, (double)phys);
      return LOOM_OK;
    case LOOM_OP_REDUCE_SUM:
    case LOOM_OP_REDUCE_MAX:
    case LOOM_OP_REDUCE_MIN:
    case LOOM_OP_REDUCE_MEAN:
    case LOOM_OP_REDUCE_PROD:
    case LOOM_OP_ARGMAX:
    case LOOM_OP_ARGMIN:
      add(sizes, kernels, LOOM_OP_CLASS_REDUCTION, elements(g, in));
      return LOOM_OK;
    case LOOM_OP_TOPK:
      add(sizes, kernels, LOOM_OP_CLASS_TOPK, elements(g, in));
      return LOOM_OK;
    case LOOM_OP_DOT:
      add(sizes, kernels, LOOM_OP_CLASS_GEMM, dot_flops(g, index));
      return LOOM_OK;
    case LOOM_OP_CONV:
      add(sizes, kernels, LOOM_OP_CLASS_CONV, conv_flops(g, index));
      return LOOM_OK;
    case LOOM_OP_FFT:
    case LOOM_OP_IFFT:
    case LOOM_OP_RFFT:
    case LOOM_OP_IRFFT:
      add(sizes, kernels, LOOM_OP_CLASS_FFT, fft_flops(g, index));
      return LOOM_OK;
    case LOOM_OP_LOOP:
      return loop_work(g, index, sizes, kernels);
    case LOOM_OP_FUSED: {
      const loom_graph *body = NULL;
      return (s = loom_graph_fused_get(g, index, &body)) ? s : loom__body_work(body, 1, sizes, kernels);
    }
    default:
      add(sizes, kernels, LOOM_OP_CLASS_ELEMENTWISE, elements(g, out));
      return LOOM_OK;
  }
}

bool loom__dot_is_gemm(const loom_graph *g, const loom__op *op) {
  if (op->kind != LOOM_OP_DOT || op->n_inputs < 2) return false;
  const loom_type *a = &g->values[op->inputs[0]].type, *b = &g->values[op->inputs[1]].type,
                  *r = &g->values[op->outputs[0]].type;
  return a->rank >= 2 && b->rank >= 2 && r->rank >= 1 && r->dims[r->rank - 1] > 1 &&
         (r->rank < 2 || r->dims[r->rank - 2] > 1);
}

bool loom__op_is_light(loom_op kind) {
  loom__op_class c = loom__op_info_of(kind)->cls;
  return c == LOOM_CLASS_SOURCE || kind == LOOM_OP_RESHAPE || kind == LOOM_OP_TRANSPOSE ||
         kind == LOOM_OP_BROADCAST || kind == LOOM_OP_SLICE;
}
