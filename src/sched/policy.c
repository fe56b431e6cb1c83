/* The placement policies (policy.h): fixed, eager and dmda, each a rule over a ready task's
 * options. dmda is StarPU's deque_modeling_policy_data_aware: the earliest expected finish,
 * transfers included; where some eligible device's finish is unknown (no model, no history) it
 * cannot compare them and places as eager does: the first device free. */
#include <math.h>

#include "sched/policy.h"

static int32_t choose_fixed(const loom__sched_option *o, int32_t n) {
  for (int32_t i = 0; i < n; i++)
    if (o[i].fixed && o[i].eligible) return i;
  return -1;
}

static int32_t choose_eager(const loom__sched_option *o, int32_t n) {
  int32_t best = -1;
  for (int32_t i = 0; i < n; i++)
    if (o[i].eligible && (best < 0 || o[i].free_at < o[best].free_at)) best = i;
  return best;
}

/* dmda gives a device on the host's cores nothing where cpu0 is one of the devices: beside
 * cpu0, which keeps those cores busy, it adds no compute, only takes cores from cpu0 (on 2 cores
 * cpu0 with PoCL's two devices ran kNN in twice cpu0's own time), which no model prices. */
static bool dmda_passes_over(const loom__sched_option *o, int32_t n, int32_t i) {
  if (!o[i].host_cores) return false;
  for (int32_t k = 0; k < n; k++)
    if (o[k].cpu0) return true;
  return false;
}

static int32_t choose_dmda(const loom__sched_option *o, int32_t n) {
  int32_t best = -1, first_free = -1;
  bool unknown = false;
  for (int32_t i = 0; i < n; i++) {
    if (!o[i].eligible || dmda_passes_over(o, n, i)) continue;
    if (first_free < 0 || o[i].free_at < o[first_free].free_at) first_free = i;
    if (o[i].finish == INFINITY)
      unknown = true;
    else if (best < 0 || o[i].finish < o[best].finish)
      best = i;
  }
  /* where some device's finish is unknown dmda cannot compare them: the first free, as eager */
  return unknown ? first_free : best;
}

static const loom__sched_policy_ops policies[] = {
    [LOOM_SCHED_FIXED] = {LOOM_SCHED_FIXED, "fixed", choose_fixed},
    [LOOM_SCHED_EAGER] = {LOOM_SCHED_EAGER, "eager", choose_eager},
    [LOOM_SCHED_DMDA] = {LOOM_SCHED_DMDA, "dmda", choose_dmda},
};

const loom__sched_policy_ops *loom__sched_policy(loom_sched_policy policy) {
  if ((int)policy < 0 || (size_t)policy >= sizeof policies / sizeof policies[0]) return NULL;
  return &policies[policy];
}
