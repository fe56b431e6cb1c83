/* The scheduler's internals, shared between src/sched's files only (the runtime's part of them
 * is sched/sched.h). */
#ifndef LOOM_SCHED_IMPL_H
#define LOOM_SCHED_IMPL_H

#include "core/json.h"
#include "core/json_read.h"
#include "loom/sched.h"
#include "sched/sched.h"

struct loom_sched_platform {
  int32_t n_nodes;
  char (*node_names)[LOOM_SCHED_NAME_MAX];
  int32_t n_devices;
  loom_sched_device *devices;
  int32_t n_links;
  loom_sched_link *links;
};

struct loom_sched_problem {
  int32_t n_data, cap_data;
  loom_sched_data *data;
  int32_t n_tasks, cap_tasks;
  loom_sched_task *tasks;
  int32_t n_refs, cap_refs; /* the tasks' input lists, back to back */
  int32_t *refs;
};

/* Reads the model object `obj` ({"gemm": {...}, ...}) into *out (cleared first); messages
 * name `where` ("p.json: devices[0].models") and the field. Errors: INVALID_ARGUMENT. */
loom_status loom__sched_model_read(const loom__jr_value *obj, const char *where, loom_sched_model *out);
/* Seconds of one kernel of `size` units by the class model m (its table where it has points,
 * else its line); 0 for size <= 0. The caller checks m->known. */
double loom__sched_class_time(const loom_sched_class_model *m, double size);
/* Writes `model` as the members of the object being written (one per known class). */
void loom__sched_model_write(const loom_sched_model *model, loom__json *j);
/* The index of the link between nodes a and b, or -1. */
int32_t loom__sched_link_find(const loom_sched_platform *p, int32_t a, int32_t b);
/* The whole file at `path` into a new string (free()), at most LOOM__JR_FILE_MAX bytes. Errors:
 * NOT_FOUND, IO naming it; INVALID_ARGUMENT for a larger file (/dev/zero, a runaway pipe). */
loom_status loom__sched_read_text(const char *path, char **out, size_t *out_len);
/* Adds the work of every op of `body`, times `scale` (a piece's share), to sizes and kernels. */
loom_status loom__sched_body_work(const loom_graph *body, double scale, double *sizes, int32_t *kernels);

#endif
