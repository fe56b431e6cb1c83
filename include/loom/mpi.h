/* Running a plan on the ranks of an MPI communicator (README, "Running under MPI").
 *
 * Include this header only in a program that has MPI (it includes <mpi.h>). The functions are
 * in libloom_mpi, a library of its own over libloom, so that libloom needs no MPI: link it
 * (CMake: find_package(Loom COMPONENTS mpi), Loom::loom_mpi, which brings MPI::MPI_C;
 * pkg-config: loom-mpi). It is built, and this header installed, only where Loom was built with
 * MPI (LOOM_MPI; CMake's status line says whether it is on).
 *
 * How the ranks share a run: the plan's graph is cut around its top-level loops (the chunk
 * rewrite's, docs/ir-loops.md), inside the plan's own stages. A loop-free stage runs on every
 * rank, the same way, from the same values (so its results are equal everywhere). A loop
 * stage's T pieces are split into one contiguous range per rank, [r*T/P, (r+1)*T/P) for rank r
 * of P; each rank runs its range on the stage's runner device, planned and run under the
 * runner's limit lowered to the rank's own memory limit for that device (its LOOM_MEM_LIMIT,
 * or the limit set on its context's memory node), so that a rank with less memory runs its
 * range in more, smaller stages. The ranks' partial results are gathered on rank 0 of the
 * communicator (MPI_Gatherv of bytes), combined there as the loop combines its pieces
 * (concatenation in place, sums, max/min, argmax/argmin and top-k merged), and broadcast
 * (MPI_Bcast), so every rank goes on with the same values. Results equal a single-process run
 * of the plan: bit for bit for concatenations, max/min, arg* and top-k, to rounding for sums.
 *
 * Failure: after every stage, and before each collective, the ranks agree on their status
 * (MPI_Allreduce), so a rank that fails (its limit too small for a piece of its range, found
 * when it plans the range, before any rank computes; an allocation refused while it runs)
 * makes every rank return an error instead of leaving the others waiting: the failing rank's
 * message names the rank, the stage and the pieces ("rank 1: stage 1 (loop pieces [167, 334)
 * of 334 on cpu0, limit 8.00 KiB): ..."); the others return the first failing rank's status
 * with "rank 1 failed: " and its message. Loom's duplicate of the communicator has
 * MPI_ERRORS_RETURN, so an MPI call that fails is returned as LOOM_ERR_INTERNAL naming the call
 * and MPI's message (where MPI itself can go on: a rank that dies takes the job with it).
 */
#ifndef LOOM_MPI_H
#define LOOM_MPI_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "loom/export.h"
#include "loom/plan.h"
#include "loom/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One rank's share of one loop stage of an MPI run. */
typedef struct loom_mpi_range {
  int32_t stage;                /* the MPI run's stage (loom_mpi_stats.n_stages counts them) */
  int32_t rank;                 /* in the communicator */
  int64_t first, last;          /* the loop's pieces it ran, [first, last); first == last: none */
  int64_t pieces;               /* the loop's pieces, all ranks together */
  char device[32];              /* the runner device it ran on */
  int64_t limit_bytes;          /* its limit there: the runner's, lowered to the rank's own */
  int64_t estimated_peak_bytes; /* of its range's plan (largest stage) */
  int64_t peak_bytes;           /* measured */
  int32_t n_stages;             /* stages of its range's plan (more than 1 under a lower limit) */
  int32_t recoveries;           /* re-plans after out of memory (loom_plan_run_options.recover) */
  double seconds;               /* running its range (planning included) */
} loom_mpi_range;

/* One rank's whole run. */
typedef struct loom_mpi_rank {
  int32_t rank;
  int64_t pieces;      /* loop pieces it ran, all loop stages together */
  int64_t peak_bytes;  /* its largest measured peak, loop-free stages included */
  int64_t limit_bytes; /* the limit under which that peak was measured */
  double seconds;      /* computing: its stages and ranges */
  double comm_seconds; /* in MPI calls (waiting for the others included) */
  int64_t bytes_sent;  /* partial results it sent to the root */
} loom_mpi_rank;

/* What an MPI run measured. On the root (rank 0) `ranks` and `ranges` hold every rank's
 * records (gathered at the end of a successful run); on the other ranks only their own. */
typedef struct loom_mpi_stats {
  int32_t rank, n_ranks;  /* this process's rank and the communicator's size */
  int32_t n_stages;       /* stages of the MPI run: the plan's, cut again around loops */
  int32_t n_loop_stages;  /* of which loop stages, shared between the ranks */
  double seconds;         /* the whole call, on this rank */
  int32_t n_ranks_stats;  /* entries of ranks: n_ranks on the root, 1 elsewhere */
  loom_mpi_rank *ranks;   /* owned; by rank */
  int32_t n_ranges;       /* entries of ranges */
  loom_mpi_range *ranges; /* owned; by stage, then rank */
} loom_mpi_stats;

/* Frees what `stats` owns and zeroes it. Accepts NULL and a zeroed struct. */
LOOM_API void loom_mpi_stats_deinit(loom_mpi_stats *stats);

/* Runs `plan` on every rank of `comm`, sharing its loops' pieces between the ranks (see the
 * top of this header). Collective: every rank of comm calls it, with the same plan (made from
 * the same graph with the same runners, so that its stages and loops are the same), the same
 * options and equal inputs (in parameter order, types equal to the parameters'), in the same
 * order with respect to other collective calls on comm. Loom communicates on a duplicate of
 * comm (MPI_Comm_dup), so the caller's messages never mix with Loom's. MPI must be initialised
 * and not finalised; Loom calls MPI from the calling thread only, while its own threads (the
 * cpu backend's OpenMP threads) compute, so MPI_Init_thread with MPI_THREAD_FUNNELED is the
 * level the MPI standard asks for (MPI_THREAD_SERIALIZED or MULTIPLE where other threads of the
 * program call MPI too).
 *
 * outputs: on success, on every rank, outputs[0..n_outputs) are the graph's results, allocated
 * by Loom and released by the caller with loom_tensor_deinit; on failure none is left
 * allocated. `opts` (NULL: the defaults) as loom_plan_run_with_options; recovery applies to
 * each rank's own stages and ranges. `stats` (may be NULL, else zero-initialised) receives the
 * figures above; release it with loom_mpi_stats_deinit whatever the status. ctx is each rank's
 * own (its devices, its memory manager).
 *
 * Thread safety: as loom_plan_run; MPI calls are made from the calling thread only.
 * Errors (every rank fails together, each failing rank with its own status and message, the
 * others with the first failing rank's): INVALID_ARGUMENT (MPI not initialised, or comm
 * MPI_COMM_NULL: returned at once, before any communication; NULL ctx, plan or arrays; counts
 * or input types that do not match the graph's; ranks whose plans differ in their ops, loops,
 * stages or runners); OUT_OF_MEMORY (a stage or range that cannot fit its rank's limit);
 * UNSUPPORTED (a loop stage that returns a value besides the loop's results, with fewer pieces
 * than ranks); LOOM_ERR_INTERNAL for an MPI call that failed; and as
 * loom_plan_run_with_options. */
LOOM_API loom_status loom_plan_run_mpi(loom_context *ctx, const loom_plan *plan, MPI_Comm comm,
                                       const loom_plan_run_options *opts, const loom_tensor *inputs,
                                       int32_t n_inputs, loom_tensor *outputs, int32_t n_outputs,
                                       loom_mpi_stats *stats);

/* Makes the communicator loom_run takes (loom_run_options.mpi) from an MPI communicator of the
 * caller's: a run with it is loom_plan_run_mpi on `comm` (collective, as said above), its
 * figures in loom_run_stats (rank, n_ranks, n_stages, n_loop_stages and the per-rank array). It
 * keeps `comm` (not a duplicate: each run duplicates it), which must outlive it. The caller owns
 * *out_comm and frees it with loom_mpi_comm_destroy. Not collective. Errors: INVALID_ARGUMENT
 * (MPI_COMM_NULL, NULL out_comm), INTERNAL (a libloom of another build), OUT_OF_MEMORY. */
LOOM_API loom_status loom_mpi_comm_create(MPI_Comm comm, loom_mpi_comm **out_comm);
/* Frees what loom_mpi_comm_create made. Accepts NULL. */
LOOM_API void loom_mpi_comm_destroy(loom_mpi_comm *comm);

/* Prints the report of a run, as loom-run --mpi does: one line per rank (pieces, time, peak
 * against its limit, time in MPI), then one per loop stage and rank (its pieces, device,
 * limit, estimated and measured peak, time). Needs the root's stats (elsewhere it prints the
 * rank's own). Errors: INVALID_ARGUMENT (NULL stats or stream), IO (a write failed). */
LOOM_API loom_status loom_mpi_stats_print(const loom_mpi_stats *stats, FILE *stream);

#ifdef __cplusplus
}
#endif
#endif
