/* A graph run admitted on its device's node under a runner limit (run_admit.h). */
#include <string.h>

#include "hmm/hmm.h"
#include "loom/plan.h"
#include "runtime/run_admit.h"

/* The bytes g is admitted for: the caller's estimate, else g's estimated peak, at most the
 * limit (the meter stops the graph there anyway); the limit where g cannot be estimated. */
static int64_t admitted_bytes(const loom_graph *g, const loom__admit_spec *spec) {
  int64_t bytes = spec->estimate;
  if (bytes <= 0) {
    loom_estimate e;
    memset(&e, 0, sizeof e);
    if (loom_graph_estimate(g, NULL, &e) == LOOM_OK) bytes = e.peak_bytes;
    loom_estimate_deinit(&e);
  }
  return bytes > 0 ? LOOM_MIN(bytes, spec->limit) : spec->limit;
}

loom_status loom__execute_admitted(const loom_graph *g, const loom__exec_options *opts,
                                   const loom_tensor *ins, loom_tensor *outs, loom__meter *meter,
                                   const loom__admit_spec *spec) {
  int64_t meter_limit = meter->limit;
  loom_mem_manager *m = opts->device->memory;
  int32_t node = opts->device->node;
  loom__hmm_admission a = {.limit = {.bytes = spec->limit}, .wait_seconds = spec->wait_seconds};
  if (spec->limit > 0) a.bytes = admitted_bytes(g, spec);
  for (int32_t pass = 0;; pass++) {
    memset(meter, 0, sizeof *meter);
    meter->limit = meter_limit;
    loom_status s = spec->limit > 0 ? loom__hmm_admit(m, node, &a) : LOOM_OK;
    if (s) return s;
    s = loom__execute(g, opts, ins, outs, meter);
    loom__hmm_admit_end(m, node, &a);
    if (s != LOOM_ERR_OUT_OF_MEMORY || !a.crowded || a.whole || pass > 0) return s;
    a.whole = true;
  }
}
