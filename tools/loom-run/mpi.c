/* loom-run --mpi: the run shared between the ranks of MPI_COMM_WORLD (loom/mpi.h), as in
 *   mpirun -np 4 loom-run --mpi FILE.lir --limit 64MiB --random 1 --out-dir out
 *
 * Every rank reads the same graph and inputs and makes the same plan from the same runners
 * (--runners or --limit as given: under --mpi they are not lowered to the rank's LOOM_MEM_LIMIT,
 * nor taken from it, since every rank must plan alike; a rank's LOOM_MEM_LIMIT lowers the limit
 * its own share of each loop runs under instead). Only rank 0 writes outputs, --stats-json and
 * --trace, and prints the summary, with each rank's pieces, time and peak against its limit.
 *
 * A build without MPI (LOOM_MPI off) compiles only the part that refuses --mpi. */
#include <stdlib.h>
#include <string.h>

#include "loom_run.h"

#if LOOM_HAVE_MPI
#include <mpi.h>

#include "loom/internal/json.h"
#include "loom/mpi.h"

int run_mpi_flag(run_options *opts, const char *value) {
  if (value) return run_fail(EXIT_USAGE, "--mpi takes no value");
  opts->mpi = true;
  return 0;
}

int run_mpi_begin(run_options *opts, int *argc, char ***argv) {
  /* FUNNELED: the cpu backend's OpenMP threads run beside the main thread, which alone calls
   * MPI. */
  int provided = 0;
  int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  if (rc != MPI_SUCCESS) return run_fail(EXIT_RUN, "--mpi: MPI_Init_thread failed (error %d)", rc);
  opts->mpi_started = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &opts->mpi_rank);
  if (opts->mpi_rank != 0) { /* rank 0 writes for all */
    opts->out_dir = NULL;
    opts->out_st = NULL;
    opts->stats_json = NULL;
    opts->trace = NULL;
  }
  return 0;
}

int run_mpi_agree(const run_options *opts, int rc, const char *step) {
  int worst = 0, first = 0, mine = rc ? opts->mpi_rank : INT32_MAX;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rc || !worst) return rc;
  return run_fail(worst, "rank %d failed %s (its message is above)", first, step);
}

void run_mpi_end(const run_options *opts) {
  if (opts->mpi_started) MPI_Finalize();
}

int run_mpi_prepare(loom_mpi_comm **out_comm) {
  if (loom_mpi_comm_create(MPI_COMM_WORLD, out_comm)) return run_fail_loom("--mpi");
  return 0;
}

void run_mpi_comm_destroy(loom_mpi_comm *comm) {
  loom_mpi_comm_destroy(comm);
}

static const char *seconds_text(double s, char *buf, size_t size) {
  if (s < 1.0)
    snprintf(buf, size, "%.3f ms", s * 1e3);
  else
    snprintf(buf, size, "%.3f s", s);
  return buf;
}

static void print_rank(const loom_run_rank_stats *k) {
  char peak[32], lim[32], t[32], c[32], sent[32];
  printf("  rank %-3d pieces %-8lld time %10s  peak %10s  limit %10s  %s  mpi %10s  sent %s\n", (int)k->rank,
         (long long)k->pieces, seconds_text(k->seconds, t, sizeof t),
         loom_bytes_format(k->peak_bytes, peak, sizeof peak),
         k->limit_bytes > 0 ? loom_bytes_format(k->limit_bytes, lim, sizeof lim) : "none",
         k->limit_bytes <= 0 || k->peak_bytes <= k->limit_bytes ? "(within)" : "(OVER)",
         seconds_text(k->comm_seconds, c, sizeof c), loom_bytes_format(k->bytes_sent, sent, sizeof sent));
}

static void print_range(const loom_run_range_stats *g) {
  char lim[32], est[32], peak[32], t[32];
  printf(
      "  stage %-3d rank %-3d pieces [%lld, %lld) of %lld  %-6s limit %10s  estimated peak %10s  measured "
      "peak %10s  %d stage%s  %s\n",
      (int)g->stage, (int)g->rank, (long long)g->first, (long long)g->last, (long long)g->pieces, g->device,
      g->limit_bytes > 0 ? loom_bytes_format(g->limit_bytes, lim, sizeof lim) : "none",
      loom_bytes_format(g->estimated_peak_bytes, est, sizeof est),
      loom_bytes_format(g->peak_bytes, peak, sizeof peak), (int)g->n_stages, g->n_stages == 1 ? "" : "s",
      seconds_text(g->seconds, t, sizeof t));
  if (g->recoveries > 0)
    printf("            (%d re-plan%s after out of memory: --recover)\n", (int)g->recoveries,
           g->recoveries == 1 ? "" : "s");
}

int64_t run_mpi_rank_peak(const loom_run_stats *st, int rank) {
  for (int32_t i = 0; i < st->n_rank_stats; i++)
    if (st->ranks[i].rank == rank) return st->ranks[i].peak_bytes;
  return 0;
}

void run_mpi_print(const loom_run_stats *st) {
  char t[32];
  printf("  mpi: %d rank%s, %d stage%s of which %d loop%s shared, %s on rank %d\n", (int)st->n_ranks,
         st->n_ranks == 1 ? "" : "s", (int)st->n_stages, st->n_stages == 1 ? "" : "s", (int)st->n_loop_stages,
         st->n_loop_stages == 1 ? "" : "s", seconds_text(st->seconds, t, sizeof t), (int)st->rank);
  for (int32_t i = 0; i < st->n_rank_stats; i++) print_rank(&st->ranks[i]);
  for (int32_t i = 0; i < st->n_ranges; i++) print_range(&st->ranges[i]);
}

void run_mpi_write_json(const loom_run_stats *stats, loom__json *j) {
  loom__json_key(j, "mpi");
  loom__json_begin_object(j);
  loom__json_kv_int64(j, "ranks", stats->n_ranks);
  loom__json_kv_int64(j, "stages", stats->n_stages);
  loom__json_kv_int64(j, "loop_stages", stats->n_loop_stages);
  loom__json_kv_double(j, "seconds", stats->seconds);
  loom__json_key(j, "by_rank");
  loom__json_begin_array(j);
  for (int32_t i = 0; i < stats->n_rank_stats; i++) {
    const loom_run_rank_stats *k = &stats->ranks[i];
    loom__json_begin_object(j);
    loom__json_kv_int64(j, "rank", k->rank);
    loom__json_kv_int64(j, "pieces", k->pieces);
    loom__json_kv_int64(j, "peak_bytes", k->peak_bytes);
    loom__json_kv_int64(j, "limit_bytes", k->limit_bytes);
    loom__json_kv_double(j, "seconds", k->seconds);
    loom__json_kv_double(j, "mpi_seconds", k->comm_seconds);
    loom__json_kv_int64(j, "bytes_sent", k->bytes_sent);
    loom__json_end_object(j);
  }
  loom__json_end_array(j);
  loom__json_key(j, "ranges");
  loom__json_begin_array(j);
  for (int32_t i = 0; i < stats->n_ranges; i++) {
    const loom_run_range_stats *g = &stats->ranges[i];
    loom__json_begin_object(j);
    loom__json_kv_int64(j, "stage", g->stage);
    loom__json_kv_int64(j, "rank", g->rank);
    loom__json_kv_int64(j, "first", g->first);
    loom__json_kv_int64(j, "last", g->last);
    loom__json_kv_int64(j, "pieces", g->pieces);
    loom__json_kv_string(j, "device", g->device);
    loom__json_kv_int64(j, "limit_bytes", g->limit_bytes);
    loom__json_kv_int64(j, "estimated_peak_bytes", g->estimated_peak_bytes);
    loom__json_kv_int64(j, "peak_bytes", g->peak_bytes);
    loom__json_kv_int64(j, "stages", g->n_stages);
    loom__json_kv_int64(j, "recoveries", g->recoveries);
    loom__json_kv_double(j, "seconds", g->seconds);
    loom__json_end_object(j);
  }
  loom__json_end_array(j);
  loom__json_end_object(j);
}

#else /* no MPI in this build: --mpi is refused, and nothing else is reached */

int run_mpi_flag(run_options *opts, const char *value) {
  return run_fail(EXIT_USAGE,
                  "--mpi: this loom-run was built without MPI (install libopenmpi-dev and openmpi-bin, and "
                  "configure with LOOM_MPI=AUTO or ON)");
}
int run_mpi_begin(run_options *opts, int *argc, char ***argv) {
  return EXIT_USAGE;
}
int run_mpi_agree(const run_options *opts, int rc, const char *step) {
  return rc;
}
void run_mpi_end(const run_options *opts) {}
int run_mpi_prepare(loom_mpi_comm **out_comm) {
  return EXIT_USAGE;
}
void run_mpi_comm_destroy(loom_mpi_comm *comm) {}
int64_t run_mpi_rank_peak(const loom_run_stats *st, int rank) {
  return 0;
}
void run_mpi_print(const loom_run_stats *st) {}
void run_mpi_write_json(const loom_run_stats *st, struct loom__json *j) {}
#endif
