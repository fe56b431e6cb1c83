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

static bool never_cut(const loom_graph *g, int32_t o, void *acc) {
  return false;
}

int run_mpi_execute(const run_options *opts, loom_context *ctx, const loom_plan *plan,
                    const loom_graph *optimized, const loom_plan_run_options *ro, const loom_tensor *inputs,
                    int32_t n_inputs, loom_tensor *outputs, int32_t n_outputs, void **out_stats,
                    loom_run_stats *summary) {
  /* Without runners there is no plan yet: the graph as one stage on cpu0, with no limit (the
   * loops it holds are shared all the same). */
  loom_plan *own = NULL;
  if (!plan && loom_plan_split(optimized, never_cut, NULL, NULL, 0, &own)) return run_fail_loom(NULL);
  loom_mpi_stats *stats = calloc(1, sizeof *stats);
  if (!stats) {
    loom_plan_destroy(own);
    return run_fail(EXIT_RUN, "out of memory");
  }
  *out_stats = stats;
  loom_status s = loom_plan_run_mpi(ctx, plan ? plan : own, MPI_COMM_WORLD, ro, inputs, n_inputs, outputs,
                                    n_outputs, stats);
  loom_plan_destroy(own);
  if (s) return run_fail_loom(NULL);
  summary->peak_bytes = 0;
  for (int32_t i = 0; i < stats->n_ranks_stats; i++)
    if (stats->ranks[i].rank == opts->mpi_rank) summary->peak_bytes = stats->ranks[i].peak_bytes;
  summary->seconds = stats->seconds;
  return 0;
}

void run_mpi_print(const void *stats) {
  if (stats) loom_mpi_stats_print(stats, stdout);
}

void run_mpi_write_json(const void *p, loom__json *j) {
  const loom_mpi_stats *stats = p;
  loom__json_key(j, "mpi");
  loom__json_begin_object(j);
  loom__json_kv_int64(j, "ranks", stats->n_ranks);
  loom__json_kv_int64(j, "stages", stats->n_stages);
  loom__json_kv_int64(j, "loop_stages", stats->n_loop_stages);
  loom__json_kv_double(j, "seconds", stats->seconds);
  loom__json_key(j, "by_rank");
  loom__json_begin_array(j);
  for (int32_t i = 0; i < stats->n_ranks_stats; i++) {
    const loom_mpi_rank *k = &stats->ranks[i];
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
    const loom_mpi_range *g = &stats->ranges[i];
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

void run_mpi_free(void *stats) {
  loom_mpi_stats_deinit(stats);
  free(stats);
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
int run_mpi_execute(const run_options *opts, loom_context *ctx, const loom_plan *plan,
                    const loom_graph *optimized, const loom_plan_run_options *ro, const loom_tensor *inputs,
                    int32_t n_inputs, loom_tensor *outputs, int32_t n_outputs, void **out_stats,
                    loom_run_stats *summary) {
  return EXIT_USAGE;
}
void run_mpi_print(const void *stats) {}
void run_mpi_write_json(const void *stats, struct loom__json *j) {}
void run_mpi_free(void *stats) {}

#endif
