/* The collectives of loom_plan_run_mpi (see mpi_comm.h). Every call is timed into the rank's
 * MPI seconds: the time a rank waits there is the time the others take to catch up. */
#include "mpi/mpi_comm.h"

#include <limits.h>
#include <string.h>

/* Partial results travel in blocks of this many bytes, so that MPI's int counts reach
 * 64 * 2^31 bytes (128 GiB) per rank, and each rank's part lands 64-byte aligned. */
#define BLOCK 64
/* Broadcasts go in pieces of at most this many bytes (MPI counts are int). */
#define BCAST_PIECE ((int64_t)1 << 30)

loom_status loom__mpi_lib_check(void) {
  const loom__mpi_hooks *h = LOOM_LIB;
  /* size, version and error lead the table in every version, so they can be read whatever
   * libloom this is. */
  if (h->size != sizeof(loom__mpi_hooks) || strcmp(h->version, LOOM_VERSION_STRING) != 0)
    return h->error(LOOM_ERR_INTERNAL,
                    "libloom_mpi %s was built with another libloom than the one loaded (%s): install both "
                    "from one build",
                    LOOM_VERSION_STRING, h->version);
  return LOOM_OK;
}

loom_status loom__mpi_error(int code, const char *what) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "MPI error %d", code);
  return LOOM_LIB->error(LOOM_ERR_INTERNAL, "%s failed: %s", what, text);
}

loom_status loom__mpi_comm_init(loom__mpi_comm *c, MPI_Comm user) {
  memset(c, 0, sizeof *c);
  c->comm = MPI_COMM_NULL;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return LOOM_LIB->error(LOOM_ERR_INVALID_ARGUMENT,
                           "loom_plan_run_mpi: MPI is %s (call it between MPI_Init and MPI_Finalize)",
                           finalized ? "finalized" : "not initialized");
  if (user == MPI_COMM_NULL)
    return LOOM_LIB->error(LOOM_ERR_INVALID_ARGUMENT, "loom_plan_run_mpi: the communicator is MPI_COMM_NULL");
  double t0 = MPI_Wtime();
  int rc = MPI_Comm_dup(user, &c->comm);
  if (rc != MPI_SUCCESS) {
    c->comm = MPI_COMM_NULL;
    return loom__mpi_error(rc, "MPI_Comm_dup of the caller's communicator");
  }
  MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(c->comm, &c->rank);
  MPI_Comm_size(c->comm, &c->size);
  c->seconds += MPI_Wtime() - t0;
  return LOOM_OK;
}

void loom__mpi_comm_deinit(loom__mpi_comm *c) {
  if (c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
  c->comm = MPI_COMM_NULL;
}

loom_status loom__mpi_agree(loom__mpi_comm *c, loom_status s, const char *where) {
  double t0 = MPI_Wtime();
  int mine = s ? c->rank : c->size, first = c->size;
  int rc = MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, c->comm);
  if (rc != MPI_SUCCESS) {
    c->seconds += MPI_Wtime() - t0;
    return loom__mpi_error(rc, where);
  }
  if (first == c->size) {
    c->seconds += MPI_Wtime() - t0;
    return LOOM_OK;
  }
  /* The first failing rank's status and message, so every rank can say what went wrong. */
  struct {
    int status;
    char message[1000];
  } report = {0};
  if (c->rank == first) {
    report.status = (int)s;
    snprintf(report.message, sizeof report.message, "%s", loom_last_error());
  }
  rc = MPI_Bcast(&report, (int)sizeof report, MPI_BYTE, first, c->comm);
  c->seconds += MPI_Wtime() - t0;
  if (s) return s; /* a failing rank keeps its own status and message */
  if (rc != MPI_SUCCESS) return loom__mpi_error(rc, where);
  report.message[sizeof report.message - 1] = '\0';
  return LOOM_LIB->error((loom_status)report.status, "rank %d failed: %s", first, report.message);
}

/* Root: each rank's byte count, and where its bytes go (BLOCK aligned). */
static loom_status plan_gather(loom__mpi_comm *c, int64_t bytes, int64_t **out_counts, int64_t **out_displs,
                               int **counts, int **displs, int64_t *total) {
  loom_status s = LOOM_OK;
  int64_t *all = NULL;
  if (c->rank == 0) {
    all = LOOM_LIB->calloc((size_t)c->size * 2, sizeof *all);
    *counts = LOOM_LIB->calloc((size_t)c->size * 2, sizeof **counts);
    if (!all || !*counts) s = LOOM_LIB->oom("the partial results' sizes");
  }
  s = loom__mpi_agree(c, s, "gathering the partial results' sizes");
  if (s) {
    LOOM_LIB->free(all);
    return s;
  }
  double t0 = MPI_Wtime();
  int rc = MPI_Gather(&bytes, 1, MPI_INT64_T, all, 1, MPI_INT64_T, 0, c->comm);
  c->seconds += MPI_Wtime() - t0;
  if (rc != MPI_SUCCESS) s = loom__mpi_error(rc, "MPI_Gather of the partial results' sizes");
  *total = 0;
  if (c->rank == 0) *displs = *counts + c->size;
  for (int r = 0; !s && c->rank == 0 && r < c->size; r++) {
    int64_t blocks = (all[r] + BLOCK - 1) / BLOCK;
    if (blocks > INT_MAX || *total / BLOCK > INT_MAX - blocks)
      s = LOOM_LIB->error(
          LOOM_ERR_INVALID_ARGUMENT,
          "rank %d's partial results are %lld bytes: more than MPI can gather at once (%lld GiB in all)", r,
          (long long)all[r], (long long)(((int64_t)INT_MAX * BLOCK) >> 30));
    else {
      all[c->size + r] = *total;
      (*counts)[r] = (int)blocks;
      (*displs)[r] = (int)(*total / BLOCK);
      *total += blocks * BLOCK;
    }
  }
  if (c->rank == 0) {
    *out_counts = all;
    *out_displs = all + c->size;
  }
  return s;
}

loom_status loom__mpi_gather_bytes(loom__mpi_comm *c, const void *send, int64_t bytes, char **out_recv,
                                   int64_t **out_counts, int64_t **out_displs) {
  *out_recv = NULL;
  *out_counts = *out_displs = NULL;
  int *counts = NULL, *displs = NULL;
  int64_t total = 0, blocks = (bytes + BLOCK - 1) / BLOCK;
  loom_status s = plan_gather(c, bytes, out_counts, out_displs, &counts, &displs, &total);
  /* The last block of each rank's bytes is padded: MPI sends whole blocks. */
  char *padded = NULL;
  if (!s && bytes % BLOCK) {
    padded = LOOM_LIB->aligned_alloc((size_t)(blocks * BLOCK));
    if (!padded)
      s = LOOM_LIB->oom("the partial results to send");
    else {
      memcpy(padded, send, (size_t)bytes);
      memset(padded + bytes, 0, (size_t)(blocks * BLOCK - bytes));
    }
  }
  if (!s && c->rank == 0 && total > 0 && !(*out_recv = LOOM_LIB->aligned_alloc((size_t)total)))
    s = LOOM_LIB->oom("the partial results gathered from the ranks");
  s = loom__mpi_agree(c, s, "gathering the partial results");
  MPI_Datatype block = MPI_DATATYPE_NULL;
  int rc = s ? MPI_SUCCESS : MPI_Type_contiguous(BLOCK, MPI_BYTE, &block);
  if (!s && rc == MPI_SUCCESS) rc = MPI_Type_commit(&block);
  double t0 = MPI_Wtime();
  if (!s && rc == MPI_SUCCESS)
    rc =
        MPI_Gatherv(padded ? padded : send, (int)blocks, block, *out_recv, counts, displs, block, 0, c->comm);
  c->seconds += MPI_Wtime() - t0;
  if (block != MPI_DATATYPE_NULL) MPI_Type_free(&block);
  if (!s && rc != MPI_SUCCESS) s = loom__mpi_error(rc, "MPI_Gatherv of the partial results");
  if (!s) c->bytes_sent += bytes;
  LOOM_LIB->aligned_free(padded);
  LOOM_LIB->free(counts); /* and displs */
  if (s) {
    LOOM_LIB->aligned_free(*out_recv);
    LOOM_LIB->free(*out_counts); /* and *out_displs */
    *out_recv = NULL;
    *out_counts = *out_displs = NULL;
  }
  return s;
}

loom_status loom__mpi_bcast_tensor(loom__mpi_comm *c, loom_tensor *t) {
  int64_t bytes = 0;
  loom_status s = loom_type_bytes(&t->type, &bytes);
  double t0 = MPI_Wtime();
  for (int64_t at = 0; !s && at < bytes; at += BCAST_PIECE) {
    int n = (int)LOOM_MIN(BCAST_PIECE, bytes - at);
    int rc = MPI_Bcast((char *)t->data + at, n, MPI_BYTE, 0, c->comm);
    if (rc != MPI_SUCCESS) s = loom__mpi_error(rc, "MPI_Bcast of a combined result");
  }
  c->seconds += MPI_Wtime() - t0;
  return s;
}
