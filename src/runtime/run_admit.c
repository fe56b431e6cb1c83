/* A graph run admitted on its device's node under a runner limit (run_admit.h). */
#include <string.h>

#include "hmm/hmm.h"
#include "loom/plan.h"
#include "runtime/run_admit.h"

/* The bytes of g's parameters: on a device whose buffers are host memory (cpu0) the executor
 * reads its host inputs where they are, so the meter counts them (as the estimate does) but the
 * node does not hold them. */
static int64_t params_bytes(const loom_graph *g) {
  int64_t sum = 0;
  for (int32_t p = 0; p < loom_graph_param_count(g); p++) {
    int64_t bytes = 0;
    if (loom_value_bytes(g, loom_graph_param_at(g, p), NULL, &bytes) == LOOM_OK) sum += bytes;
  }
  return sum;
}

/* The bytes g is admitted for on its node: the caller's estimate, else g's estimated peak, less
 * the inputs read in place where the device's memory is the host's (never below 0: an estimate
 * short of what g takes only means g may run once more admitted for its whole limit), at most
 * the limit (the meter stops the graph there anyway); the limit where g cannot be estimated. */
static int64_t admitted_bytes(const loom_graph *g, const loom__exec_options *opts,
                              const loom__admit_spec *spec) {
  int64_t bytes = spec->estimate;
  if (bytes <= 0) {
    loom_estimate e;
    memset(&e, 0, sizeof e);
    if (loom_graph_estimate(g, NULL, &e) == LOOM_OK) bytes = e.peak_bytes;
    loom_estimate_deinit(&e);
  }
  if (bytes <= 0) return spec->limit;
  if (opts->device->backend->host_memory) bytes = LOOM_MAX(bytes - params_bytes(g), 0);
  return LOOM_MIN(bytes, spec->limit);
}

loom_status loom__execute_admitted(const loom_graph *g, const loom__exec_options *opts,
                                   const loom_tensor *ins, loom_tensor *outs, loom__meter *meter,
                                   const loom__admit_spec *spec) {
  int64_t meter_limit = meter->limit;
  loom_mem_manager *m = opts->device->memory;
  int32_t node = opts->device->node;
  loom__hmm_admission a = {.limit = {.bytes = spec->limit}, .wait_seconds = spec->wait_seconds};
  if (spec->limit > 0) a.bytes = admitted_bytes(g, opts, spec);
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
