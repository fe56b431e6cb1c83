/* What a library beside libloom plugs into loom_run. libloom_mpi makes a loom_mpi_comm (the
 * caller's communicator and the function that runs a plan on its ranks), so that loom_run can
 * take an MPI communicator while libloom itself links no MPI (StarPU keeps MPI in a library of
 * its own for the same reason: one program, one MPI). */
#ifndef LOOM_RUNTIME_RUN_HOOKS_H
#define LOOM_RUNTIME_RUN_HOOKS_H

#include "loom/runtime.h"

struct loom_mpi_comm {
  /* Runs `plan` collectively on the communicator's ranks as loom_run says; fills stats (may be
   * NULL) with the per-rank figures. */
  loom_status (*run)(const loom_mpi_comm *comm, loom_context *ctx, const loom_plan *plan,
                     const loom_run_options *opts, const loom_tensor *inputs, int32_t n_inputs,
                     loom_tensor *outputs, int32_t n_outputs, loom_run_stats *stats);
  void *impl; /* the MPI library's own (its duplicate of the communicator) */
};

#endif
