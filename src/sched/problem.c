/* Problems: the tasks and data a schedule places, built by hand or from a plan (each loop
 * piece a task, the ops of a stage between loops one task). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "ir/ir.h"
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

/* The model itself is the IR's (ir/work.c), beside the memory estimator, so that the splitter
 * can weigh a graph's branches without reaching up into the scheduler. */
loom_status loom__sched_body_work(const loom_graph *body, double scale, double *sizes, int32_t *kernels) {
  return loom__body_work(body, scale, sizes, kernels);
}

loom_status loom_sched_op_work(const loom_graph *g, int32_t index, double *sizes, int32_t *kernels) {
  return loom__op_work(g, index, sizes, kernels);
}
