/* loom_mpi_stats_print: the report of an MPI run (loom/mpi.h), as loom-run --mpi prints it. */
#include "mpi/mpi_comm.h"

static const char *seconds_text(double s, char *buf, size_t size) {
  if (s < 1.0)
    snprintf(buf, size, "%.3f ms", s * 1e3);
  else
    snprintf(buf, size, "%.3f s", s);
  return buf;
}

static void print_rank(const loom_mpi_rank *k, FILE *f) {
  char peak[32], lim[32], t[32], c[32], sent[32];
  fprintf(f, "  rank %-3d pieces %-8lld time %10s  peak %10s  limit %10s  %s  mpi %10s  sent %s\n",
          (int)k->rank, (long long)k->pieces, seconds_text(k->seconds, t, sizeof t),
          loom_bytes_format(k->peak_bytes, peak, sizeof peak),
          k->limit_bytes > 0 ? loom_bytes_format(k->limit_bytes, lim, sizeof lim) : "none",
          k->limit_bytes <= 0 || k->peak_bytes <= k->limit_bytes ? "(within)" : "(OVER)",
          seconds_text(k->comm_seconds, c, sizeof c), loom_bytes_format(k->bytes_sent, sent, sizeof sent));
}

static void print_range(const loom_mpi_range *g, FILE *f) {
  char lim[32], est[32], peak[32], t[32];
  fprintf(
      f,
      "  stage %-3d rank %-3d pieces [%lld, %lld) of %lld  %-6s limit %10s  estimated peak %10s  measured "
      "peak %10s  %d stage%s  %s\n",
      (int)g->stage, (int)g->rank, (long long)g->first, (long long)g->last, (long long)g->pieces, g->device,
      g->limit_bytes > 0 ? loom_bytes_format(g->limit_bytes, lim, sizeof lim) : "none",
      loom_bytes_format(g->estimated_peak_bytes, est, sizeof est),
      loom_bytes_format(g->peak_bytes, peak, sizeof peak), (int)g->n_stages, g->n_stages == 1 ? "" : "s",
      seconds_text(g->seconds, t, sizeof t));
  if (g->recoveries > 0)
    fprintf(f, "            (%d re-plan%s after out of memory: --recover)\n", (int)g->recoveries,
            g->recoveries == 1 ? "" : "s");
}

loom_status loom_mpi_stats_print(const loom_mpi_stats *stats, FILE *stream) {
  if (!stats || !stream)
    return LOOM_LIB->error(LOOM_ERR_INVALID_ARGUMENT, "loom_mpi_stats_print: NULL stats or stream");
  char t[32];
  fprintf(stream, "  mpi: %d rank%s, %d stage%s of which %d loop%s shared, %s on rank %d\n",
          (int)stats->n_ranks, stats->n_ranks == 1 ? "" : "s", (int)stats->n_stages,
          stats->n_stages == 1 ? "" : "s", (int)stats->n_loop_stages, stats->n_loop_stages == 1 ? "" : "s",
          seconds_text(stats->seconds, t, sizeof t), (int)stats->rank);
  for (int32_t i = 0; i < stats->n_ranks_stats; i++) print_rank(&stats->ranks[i], stream);
  for (int32_t i = 0; i < stats->n_ranges; i++) print_range(&stats->ranges[i], stream);
  if (ferror(stream)) return LOOM_LIB->error(LOOM_ERR_IO, "loom_mpi_stats_print: a write failed");
  return LOOM_OK;
}
