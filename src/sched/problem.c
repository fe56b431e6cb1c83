/* Problems: the tasks and data a schedule places, built by hand or from a plan (each loop
 * piece a task, the ops of a stage between loops one task). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "sched/sched_impl.h"

loom_status loom_sched_problem_create(loom_sched_problem **out_problem) {
  if (!out_problem) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "problem: NULL out");
  *out_problem = loom__calloc(1, sizeof **out_problem);
  return *out_problem ? LOOM_OK : loom__oom("problem");
}

void loom_sched_problem_destroy(loom_sched_problem *p) {
  if (!p) return;
  loom__free(p->data);
  loom__free(p->tasks);
  loom__free(p->refs);
  loom__free(p);
}

loom_status loom_sched_problem_add_data(loom_sched_problem *p, const loom_sched_data *data, int32_t *out_id) {
  if (!p || !data) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "problem: NULL argument");
  if (data->bytes < 0 || data->producer < -1 || data->producer >= p->n_tasks || data->parent < -1 ||
      data->parent >= p->n_data || (data->producer < 0 && data->parent < 0 && data->node < 0))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "problem: data %d: bad bytes, producer, parent or node",
                       p->n_data);
  loom_status s = loom__grow((void **)&p->data, &p->cap_data, p->n_data + 1, sizeof *p->data);
  if (s) return s;
  p->data[p->n_data] = *data;
  if (out_id) *out_id = p->n_data;
  p->n_data++;
  return LOOM_OK;
}

loom_status loom_sched_problem_add_task(loom_sched_problem *p, const loom_sched_task *task,
                                        const int32_t *inputs, int32_t n_inputs, int32_t *out_id) {
  if (!p || !task || n_inputs < 0 || (n_inputs && !inputs))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "problem: bad task arguments");
  for (int32_t i = 0; i < n_inputs; i++) {
    if (inputs[i] < 0 || inputs[i] >= p->n_data)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "problem: task %s: input %d names no data", task->label,
                         i);
  }
  loom_status s = loom__grow((void **)&p->tasks, &p->cap_tasks, p->n_tasks + 1, sizeof *p->tasks);
  if (!s) s = loom__grow((void **)&p->refs, &p->cap_refs, p->n_refs + n_inputs, sizeof *p->refs);
  if (s) return s;
  loom_sched_task *t = &p->tasks[p->n_tasks];
  *t = *task;
  t->first_input = p->n_refs, t->n_inputs = n_inputs;
  if (n_inputs) memcpy(p->refs + p->n_refs, inputs, sizeof *inputs * (size_t)n_inputs);
  p->n_refs += n_inputs;
  if (out_id) *out_id = p->n_tasks;
  p->n_tasks++;
  return LOOM_OK;
}

int32_t loom_sched_problem_task_count(const loom_sched_problem *p) {
  return p ? p->n_tasks : 0;
}

const loom_sched_task *loom_sched_problem_task(const loom_sched_problem *p, int32_t i) {
  return p && i >= 0 && i < p->n_tasks ? &p->tasks[i] : NULL;
}

/* ---- the work of an op ------------------------------------------------------------------ */

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

loom_status loom__sched_body_work(const loom_graph *body, double scale, double *sizes, int32_t *kernels) {
  double s[LOOM_OP_CLASS_COUNT] = {0};
  int32_t k[LOOM_OP_CLASS_COUNT] = {0};
  for (int32_t i = 0; i < loom_graph_op_count(body); i++) {
    loom_status st = loom_sched_op_work(body, i, s, k);
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
  return s ? s : loom__sched_body_work(body, (double)n / (double)piece, sizes, kernels);
}

loom_status loom_sched_op_work(const loom_graph *g, int32_t index, double *sizes, int32_t *kernels) {
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
      return (s = loom_graph_fused_get(g, index, &body)) ? s : loom__sched_body_work(body, 1, sizes, kernels);
    }
    default:
      add(sizes, kernels, LOOM_OP_CLASS_ELEMENTWISE, elements(g, out));
      return LOOM_OK;
  }
}
