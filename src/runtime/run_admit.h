/* Graphs run on a device under a runner limit shared with the other runs of the context: each
 * waits for its turn and its room there first (hmm/hmm_admit.c). loom_plan_run's stages and
 * loom_plan_run_shared's loop ranges both run through it. */
#ifndef LOOM_RUNTIME_RUN_ADMIT_H
#define LOOM_RUNTIME_RUN_ADMIT_H

#include "runtime/exec.h"

/* How one graph is admitted to opts->device's memory node. */
typedef struct loom__admit_spec {
  /* The runner limit put in force on the node while g runs (0: none: g runs at once, admitted
   * for nothing, as a run with no limit always has). */
  int64_t limit;
  int64_t estimate;    /* the bytes it is admitted for; <= 0: g's estimated peak, else `limit` */
  double wait_seconds; /* as loom_plan_run_options.wait_seconds */
} loom__admit_spec;

/* Runs g as loom__execute does (meter->limit as the caller set it; the other counters are
 * reset), once admitted on the device's node for spec->estimate bytes (at most spec->limit)
 * beside the other runs' graphs there: it waits, in order of arrival, while their bytes leave
 * no room. Where g's allocations were refused while another run's graph shared the node (its
 * estimate short of what it took, the others' bytes in the way), g runs once more, admitted for
 * the whole limit. Errors: as loom__execute; OUT_OF_MEMORY from admission (loom__hmm_admit),
 * naming the node. */
loom_status loom__execute_admitted(const loom_graph *g, const loom__exec_options *opts,
                                   const loom_tensor *ins, loom_tensor *outs, loom__meter *meter,
                                   const loom__admit_spec *spec);

#endif
