/* What the runtime uses of the scheduler besides its public API (loom/sched.h) and the policies
 * (sched/policy.h): a task's time by a model, and the JSON file reader the scheduler's files
 * (platforms, models) and the runtime's stage history share. The scheduler's own structures stay
 * in sched_impl.h, which only src/sched includes (scripts/check-layers.sh). */
#ifndef LOOM_SCHED_SCHED_H
#define LOOM_SCHED_SCHED_H

#include "core/json_read.h"
#include "loom/sched.h"

/* Reads and parses the JSON file at `path` into *out (loom__jr_free). Errors: NOT_FOUND and IO
 * naming the path, INVALID_ARGUMENT (too large, or not JSON: the path, byte and why). */
loom_status loom__sched_read_json(const char *path, loom__jr_value *out);
/* Seconds of a task on a device from its model (INFINITY when a class is unknown there). */
double loom__sched_task_time(const loom_sched_task *task, const loom_sched_model *model);

#endif
