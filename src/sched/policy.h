/* The placement policies as one table of functions, in the manner of StarPU's
 * struct starpu_sched_policy: the simulated scheduler (schedule.c) and the live shared runner
 * (runtime/share.c) describe a ready task's devices the same way and let the same function
 * choose, so a simulated schedule and a real one come from one rule. */
#ifndef LOOM_SCHED_POLICY_H
#define LOOM_SCHED_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "loom/sched.h"

/* One device a ready task may go to, as a policy sees it. Times are seconds on one clock. */
typedef struct loom__sched_option {
  bool eligible;   /* the device may run the task at all (memory, kind, models) */
  bool cpu0;       /* the device is cpu0, the host's own */
  bool host_cores; /* it computes on the host's cores though it is not cpu0 (loom_sched_device) */
  bool fixed;      /* the task's own device (its runner's): what FIXED takes */
  double free_at;  /* when the device can start it */
  /* When the task would be done there, the transfers it needs included; INFINITY where no
   * model or history says. */
  double finish;
} loom__sched_option;

typedef struct loom__sched_policy_ops {
  loom_sched_policy id;
  const char *name;
  /* The option chosen for a ready task among n (ties to the lowest index), or -1 when none is
   * eligible. */
  int32_t (*choose)(const loom__sched_option *options, int32_t n);
} loom__sched_policy_ops;

/* The table of `policy` (NULL for a value out of range). Thread safety: constant. */
const loom__sched_policy_ops *loom__sched_policy(loom_sched_policy policy);

#endif
