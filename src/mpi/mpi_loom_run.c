/* loom_mpi_comm: a communicator as loom_run takes it (options.mpi). libloom links no MPI, so it
 * cannot call loom_plan_run_mpi itself: the communicator this library makes carries the
 * function that does (runtime/run_hooks.h), and loom_run calls through it. */
#include <string.h>

#include "mpi/mpi_comm.h"
#include "runtime/run_hooks.h"

typedef struct mpi_comm_impl {
  MPI_Comm comm; /* the caller's; loom_plan_run_mpi works on a duplicate of it */
} mpi_comm_impl;

/* The ranges of `m` into out->ranges (loom_run_range_stats is loom_mpi_range field for field). */
static void take_ranges(const loom_mpi_stats *m, loom_run_stats *out) {
  _Static_assert(sizeof(loom_run_range_stats) == sizeof(loom_mpi_range),
                 "the per-range figures of runtime.h and mpi.h differ");
  if (m->n_ranges <= 0) return;
  out->ranges = LOOM_LIB->calloc((size_t)m->n_ranges, sizeof *out->ranges);
  if (!out->ranges) return;
  out->n_ranges = m->n_ranges;
  memcpy(out->ranges, m->ranges, sizeof *out->ranges * (size_t)m->n_ranges);
}

/* loom_plan_run_mpi's figures in loom_run's one statistics structure. The per-rank and
 * per-range arrays are allocated by libloom's allocator, which loom_run_stats_deinit frees. */
static void take_mpi_stats(const loom_mpi_stats *m, loom_run_stats *out) {
  out->seconds = m->seconds;
  out->rank = m->rank;
  out->n_ranks = m->n_ranks;
  out->n_stages = m->n_stages;
  out->n_loop_stages = m->n_loop_stages;
  take_ranges(m, out);
  if (m->n_ranks_stats <= 0) return;
  out->ranks = LOOM_LIB->calloc((size_t)m->n_ranks_stats, sizeof *out->ranks);
  if (!out->ranks) return;
  out->n_rank_stats = m->n_ranks_stats;
  for (int32_t i = 0; i < m->n_ranks_stats; i++) {
    const loom_mpi_rank *r = &m->ranks[i];
    out->ranks[i] = (loom_run_rank_stats){r->rank,    r->pieces,       r->peak_bytes, r->limit_bytes,
                                          r->seconds, r->comm_seconds, r->bytes_sent};
    if (r->peak_bytes > out->peak_bytes) out->peak_bytes = r->peak_bytes;
  }
}

static loom_status run_on_ranks(const loom_mpi_comm *c, loom_context *ctx, const loom_plan *plan,
                                const loom_run_options *opts, const loom_tensor *inputs, int32_t n_inputs,
                                loom_tensor *outputs, int32_t n_outputs, loom_run_stats *stats) {
  const mpi_comm_impl *impl = c->impl;
  loom_plan_run_options ro;
  loom_plan_run_options_init(&ro);
  ro.recover = opts->recover;
  ro.recover_tries = opts->recover_tries;
  ro.optimize = opts->optimize;
  ro.wait_seconds = opts->wait_seconds;
  loom_mpi_stats m;
  memset(&m, 0, sizeof m);
  loom_status s = loom_plan_run_mpi(ctx, plan, impl->comm, &ro, inputs, n_inputs, outputs, n_outputs, &m);
  if (stats) take_mpi_stats(&m, stats);
  loom_mpi_stats_deinit(&m);
  return s;
}

loom_status loom_mpi_comm_create(MPI_Comm comm, loom_mpi_comm **out_comm) {
  if (!out_comm) return LOOM_ERR_INVALID_ARGUMENT;
  *out_comm = NULL;
  loom_status s = loom__mpi_lib_check();
  if (s) return s;
  if (comm == MPI_COMM_NULL)
    return LOOM_LIB->error(LOOM_ERR_INVALID_ARGUMENT,
                           "loom_mpi_comm_create: the communicator is MPI_COMM_NULL");
  loom_mpi_comm *c = LOOM_LIB->calloc(1, sizeof *c);
  mpi_comm_impl *impl = LOOM_LIB->calloc(1, sizeof *impl);
  if (!c || !impl) {
    LOOM_LIB->free(c);
    LOOM_LIB->free(impl);
    return LOOM_LIB->oom("an MPI communicator for loom_run");
  }
  impl->comm = comm;
  c->run = run_on_ranks;
  c->impl = impl;
  *out_comm = c;
  return LOOM_OK;
}

void loom_mpi_comm_destroy(loom_mpi_comm *comm) {
  if (!comm) return;
  LOOM_LIB->free(comm->impl);
  LOOM_LIB->free(comm);
}
