/* The MPI side of loom_plan_run_mpi (loom/mpi.h): status agreement and the collectives that
 * move tensors between ranks, each timed into the rank's MPI seconds. Shared by mpi_run.c (the
 * run) and mpi_comm.c (the collectives). */
#ifndef LOOM_MPI_COMM_H
#define LOOM_MPI_COMM_H

#include <mpi.h>

#include "loom/mpi.h"
#include "runtime/mpi_hooks.h"

/* libloom's internals: libloom_mpi is a library of its own, which reaches them through the
 * table libloom exports (runtime/mpi_hooks.h), never by their hidden symbols. */
#define LOOM_LIB (loom__mpi_hooks_get())

/* Whether the libloom loaded is the one this libloom_mpi was built with (the table's size and
 * version): INTERNAL naming both versions, else OK. Call first in every entry point that
 * reaches libloom's internals. */
loom_status loom__mpi_lib_check(void);

/* The communicator Loom works on (a duplicate of the caller's) and what it measured. */
typedef struct loom__mpi_comm {
  MPI_Comm comm;
  int rank, size;
  double seconds;     /* in MPI calls */
  int64_t bytes_sent; /* partial results sent to the root */
} loom__mpi_comm;

/* Duplicates `user` (collective) with MPI_ERRORS_RETURN on the duplicate, so that Loom's MPI
 * errors come back as statuses. Errors: INVALID_ARGUMENT (MPI not initialised or finalised,
 * MPI_COMM_NULL), INTERNAL (an MPI call failed, with MPI's message). */
loom_status loom__mpi_comm_init(loom__mpi_comm *c, MPI_Comm user);
/* Frees the duplicate (collective). Accepts a zeroed struct. */
void loom__mpi_comm_deinit(loom__mpi_comm *c);

/* Every rank's status after a step: collective. Returns LOOM_OK when every rank's `s` is OK;
 * else the status of the lowest failing rank, on every rank, with that rank's message: on the
 * failing rank its own (loom_last_error, left as it was), on the others "rank R failed: <its
 * message>". `where` names the step for an MPI error. */
loom_status loom__mpi_agree(loom__mpi_comm *c, loom_status s, const char *where);

/* Root (rank 0) gathers each rank's `bytes` bytes at `send` into one buffer: *out_recv
 * (loom__aligned_alloc'd, the caller frees it with loom__aligned_free; NULL off the root, or
 * when nothing is sent) holds rank r's bytes at (*out_displs)[r] (64-byte aligned), and
 * (*out_counts)[r] of them (both arrays loom__malloc'd, root only, NULL elsewhere).
 * Collective. Errors: OUT_OF_MEMORY on the root, INVALID_ARGUMENT (a rank's bytes over 2 GiB,
 * MPI counts being int), INTERNAL (MPI). The status is agreed between the ranks. */
loom_status loom__mpi_gather_bytes(loom__mpi_comm *c, const void *send, int64_t bytes, char **out_recv,
                                   int64_t **out_counts, int64_t **out_displs);

/* Broadcasts t's data (type known on every rank, data allocated on every rank) from root 0, in
 * pieces of at most 1 GiB. Collective. Errors: INTERNAL (MPI). Not agreed: an MPI error on a
 * broadcast is fatal to the job unless every rank sees it. */
loom_status loom__mpi_bcast_tensor(loom__mpi_comm *c, loom_tensor *t);

/* An MPI error code as a status with MPI's message, after `what`. */
loom_status loom__mpi_error(int code, const char *what);

#endif
