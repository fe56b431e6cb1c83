/* loom_plan_run_mpi from a program of its own, as a user's MPI code calls it (tests/mpi.cmake:
 * mpirun -np 2 and -np 3): public headers only, the shared library, the caller's communicators.
 *
 *   1. a kNN and a sum under a limit that cuts them into loops, run on MPI_COMM_WORLD, equal on
 *      every rank to loom_plan_run's result in one process (bit for bit: the ranks run the same
 *      pieces as one process does, and the topk merge and concatenation are exact; the sum to
 *      rounding), and the root's statistics: every rank's range, covering every piece once,
 *      each peak at or under its limit;
 *   2. the same on a communicator of the caller's (MPI_Comm_split, ranks in reverse order), so
 *      that Loom's root is another process;
 *   3. rank 1 with a memory limit too small for its range: every rank fails with OUT_OF_MEMORY,
 *      rank 1 naming itself and its pieces, the others naming rank 1; then, its limit restored,
 *      rank 1 alone passing a wrong input count fails every rank too; then the same run succeeds
 *      (a failed run leaves nothing behind);
 *   4. a plan of a stage per op on three runners of different limits: the loop's ranges run
 *      under the limit of the runner whose stage held it;
 *   and the run of 1. through loom_run with the communicator in its options (loom_mpi_comm).
 * Exit 0 when every rank passed, 1 otherwise (every rank agrees on it). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom.h"
#include "loom/mpi.h"

static const char *graph_text =
    "graph knn(x: f32[600,3], y: f32[900,3]) {\n"
    "  xe = reshape x shape=[600,1,3]\n"
    "  ye = reshape y shape=[1,900,3]\n"
    "  diff = sub xe ye\n"
    "  sq = mul diff diff\n"
    "  d2 = reduce_sum sq axes=[2]\n"
    "  val, idx = topk d2 k=5 axis=1 largest=false\n"
    "  e = exp x\n"
    "  total = reduce_sum e axes=[0]\n"
    "  return val, idx, total\n"
    "}\n";

static int rank, size, failures;

#define CHECK(cond, ...)                                             \
  do {                                                               \
    if (!(cond)) {                                                   \
      fprintf(stderr, "rank %d: %s:%d: ", rank, __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                  \
      fputc('\n', stderr);                                           \
      failures++;                                                    \
    }                                                                \
  } while (0)

static int64_t bytes_of(const loom_tensor *t) {
  int64_t b = 0;
  loom_type_bytes(&t->type, &b);
  return b;
}

/* Outputs of the MPI run against the single-process ones: val and idx bit for bit, total (a
 * float sum the ranks group differently) to a relative 1e-5. */
static void check_outputs(const loom_tensor *ref, const loom_tensor *got, const char *what) {
  for (int i = 0; i < 2; i++)
    CHECK(bytes_of(&ref[i]) == bytes_of(&got[i]) &&
              memcmp(ref[i].data, got[i].data, (size_t)bytes_of(&ref[i])) == 0,
          "%s: output %d differs from the single-process run's", what, i);
  const float *a = ref[2].data, *b = got[2].data;
  for (int j = 0; j < 3; j++) {
    float d = a[j] > b[j] ? a[j] - b[j] : b[j] - a[j];
    CHECK(d <= 1e-5f * (a[j] > 0 ? a[j] : -a[j]), "%s: total[%d] is %g, the single-process run's %g", what, j,
          (double)b[j], (double)a[j]);
  }
}

/* The root's statistics: each loop's ranges, rank by rank, cover its pieces in order; peaks
 * within limits. */
static void check_stats(const loom_mpi_stats *st, int n_ranks, const char *what) {
  CHECK(st->n_ranks == n_ranks && st->n_ranks_stats == n_ranks, "%s: stats for %d ranks, not %d", what,
        st->n_ranks, n_ranks);
  CHECK(st->n_loop_stages >= 1, "%s: no loop was shared", what);
  CHECK(st->n_ranges == st->n_loop_stages * n_ranks, "%s: %d ranges for %d loops", what, st->n_ranges,
        st->n_loop_stages);
  for (int32_t i = 0; i < st->n_ranges; i++) {
    const loom_mpi_range *r = &st->ranges[i];
    int64_t want_first = i % n_ranks ? st->ranges[i - 1].last : 0;
    CHECK(r->rank == i % n_ranks && r->first == want_first && r->last >= r->first,
          "%s: range %d is rank %d's [%lld, %lld)", what, (int)i, (int)r->rank, (long long)r->first,
          (long long)r->last);
    CHECK(i % n_ranks != n_ranks - 1 || r->last == r->pieces, "%s: the ranges end at %lld of %lld pieces",
          what, (long long)r->last, (long long)r->pieces);
    CHECK(r->peak_bytes <= r->limit_bytes, "%s: rank %d's range peaked at %lld bytes, over its limit %lld",
          what, (int)r->rank, (long long)r->peak_bytes, (long long)r->limit_bytes);
  }
  for (int32_t i = 0; i < st->n_ranks_stats; i++)
    CHECK(st->ranks[i].rank == i && st->ranks[i].peak_bytes <= st->ranks[i].limit_bytes,
          "%s: rank %d peaked at %lld bytes, limit %lld", what, (int)i, (long long)st->ranks[i].peak_bytes,
          (long long)st->ranks[i].limit_bytes);
}

static loom_status run(loom_context *ctx, const loom_plan *plan, MPI_Comm comm, const loom_tensor *in,
                       loom_tensor *out, loom_mpi_stats *st) {
  return loom_plan_run_mpi(ctx, plan, comm, NULL, in, 2, out, 3, st);
}

static void free_outputs(loom_tensor *out) {
  for (int i = 0; i < 3; i++) loom_tensor_deinit(&out[i]);
}

/* 3. rank 1's node limit too small for its range, then restored. */
static void check_failure(loom_context *ctx, const loom_plan *plan, const loom_tensor *in,
                          const loom_tensor *ref) {
  loom_mem_manager *m = NULL;
  int32_t node = -1;
  loom_mem_node_info info;
  CHECK(loom_context_memory(ctx, &m) == LOOM_OK && loom_mem_node_find(m, "cpu0", &node) == LOOM_OK &&
            loom_mem_node_info_get(m, node, &info) == LOOM_OK,
        "cpu0's memory node: %s", loom_last_error());
  if (rank == 1) CHECK(loom_mem_set_limit(m, node, 2048) == LOOM_OK, "limit: %s", loom_last_error());
  loom_tensor out[3];
  loom_mpi_stats st = {0};
  loom_status s = run(ctx, plan, MPI_COMM_WORLD, in, out, &st);
  const char *msg = loom_last_error();
  CHECK(s == LOOM_ERR_OUT_OF_MEMORY, "rank 1's limit too small: status %s (%s)", loom_status_string(s), msg);
  CHECK(out[0].data == NULL && out[2].data == NULL, "a failed run left outputs");
  if (rank == 1)
    CHECK(strncmp(msg, "rank 1: stage ", 14) == 0 && strstr(msg, "loop pieces ["), "rank 1's own message: %s",
          msg);
  else
    CHECK(strncmp(msg, "rank 1 failed: rank 1: stage ", 29) == 0, "rank %d's message: %s", rank, msg);
  loom_mpi_stats_deinit(&st);
  if (rank == 1)
    CHECK(loom_mem_set_limit(m, node, info.limit_bytes) == LOOM_OK, "limit: %s", loom_last_error());
  /* Rank 1 alone passes a wrong input count: every rank fails, none waits. */
  s = loom_plan_run_mpi(ctx, plan, MPI_COMM_WORLD, NULL, in, rank == 1 ? 1 : 2, out, 3, &st);
  msg = loom_last_error();
  CHECK(s == LOOM_ERR_INVALID_ARGUMENT, "rank 1's wrong arguments: status %s (%s)", loom_status_string(s),
        msg);
  CHECK(rank == 1 || strncmp(msg, "rank 1 failed: loom_plan_run_mpi: graph 'knn' takes 2 inputs", 60) == 0,
        "rank %d's message: %s", rank, msg);
  loom_mpi_stats_deinit(&st);
  s = run(ctx, plan, MPI_COMM_WORLD, in, out, &st);
  CHECK(s == LOOM_OK, "the run after a failed one: %s", loom_last_error());
  if (s == LOOM_OK) check_outputs(ref, out, "after a failed run");
  free_outputs(out);
  loom_mpi_stats_deinit(&st);
}

static bool cut_everywhere(const loom_graph *g, int32_t op, void *acc) {
  return true;
}

/* 4. A plan of many stages on three runners of different limits (loom_plan_split, a stage per
 * op, stage i on runner i % 3): the same results, and the loop's ranges run under the limit
 * of the runner whose stage held the loop (here runner 1: the loop is op 4 of the plan's graph,
 * after a transpose and three slices). */
static void check_three_runners(loom_context *ctx, const loom_graph *opt, const loom_tensor *in,
                                const loom_tensor *ref) {
  loom_runner runners[2] = {{"cpu0", 200 * 1024}, {"cpu0", 160 * 1024}};
  loom_plan *plan = NULL;
  CHECK(loom_plan_split(opt, cut_everywhere, NULL, runners, 2, &plan) == LOOM_OK, "split: %s",
        loom_last_error());
  if (!plan) return;
  int64_t want = 0;
  for (int32_t i = 0; i < loom_plan_stage_count(plan); i++) {
    loom_stage_info st;
    loom_op_info info;
    loom_plan_stage(plan, i, &st);
    for (int32_t k = 0; k < st.n_ops; k++)
      if (loom_graph_op_info_get(loom_plan_graph(plan), st.ops[k], &info) == LOOM_OK &&
          info.kind == LOOM_OP_LOOP)
        want = st.limit;
  }
  CHECK(want > 0, "no stage of the plan holds the loop");
  if (rank == 0) printf("three runners: the loop's stage has a limit of %lld bytes\n", (long long)want);
  loom_tensor out[3];
  loom_mpi_stats st = {0};
  loom_status s = run(ctx, plan, MPI_COMM_WORLD, in, out, &st);
  CHECK(s == LOOM_OK, "three runners: %s", loom_last_error());
  if (!s) check_outputs(ref, out, "three runners");
  for (int32_t i = 0; !s && rank == 0 && i < st.n_ranges; i++)
    CHECK(st.ranges[i].limit_bytes == want,
          "three runners: range %d ran under %lld bytes, its stage's runner has %lld", (int)i,
          (long long)st.ranges[i].limit_bytes, (long long)want);
  free_outputs(out);
  loom_mpi_stats_deinit(&st);
  loom_plan_destroy(plan);
}

static void check_runs(loom_context *ctx, const loom_plan *plan, const loom_graph *opt,
                       const loom_tensor *in) {
  loom_tensor ref[3], out[3];
  loom_mpi_stats st = {0};
  loom_status s = loom_plan_run(ctx, plan, in, 2, ref, 3, NULL);
  CHECK(s == LOOM_OK, "single-process run: %s", loom_last_error());
  if (s) return;
  /* 1. MPI_COMM_WORLD */
  s = run(ctx, plan, MPI_COMM_WORLD, in, out, &st);
  CHECK(s == LOOM_OK, "MPI run: %s", loom_last_error());
  if (!s) check_outputs(ref, out, "MPI_COMM_WORLD");
  if (!s && rank == 0) {
    check_stats(&st, size, "MPI_COMM_WORLD");
    loom_mpi_stats_print(&st, stdout);
  }
  free_outputs(out);
  loom_mpi_stats_deinit(&st);
  /* 1b. the same through loom_run, the communicator in its options (loom_mpi_comm_create) */
  loom_mpi_comm *comm = NULL;
  CHECK(loom_mpi_comm_create(MPI_COMM_WORLD, &comm) == LOOM_OK, "loom_mpi_comm_create: %s",
        loom_last_error());
  loom_run_options ro;
  loom_run_options_init(&ro);
  ro.mpi = comm;
  loom_run_stats rs = {0};
  s = comm ? loom_run(ctx, plan, &ro, in, 2, out, 3, &rs) : LOOM_ERR_INTERNAL;
  CHECK(s == LOOM_OK, "loom_run over MPI: %s", loom_last_error());
  if (!s) check_outputs(ref, out, "loom_run over MPI_COMM_WORLD");
  CHECK(rs.rank == rank && rs.n_ranks == size, "loom_run's stats: rank %d of %d, not %d of %d", (int)rs.rank,
        (int)rs.n_ranks, rank, size);
  CHECK(rs.n_rank_stats == (rank == 0 ? size : 1), "loom_run's stats: %d ranks' figures on rank %d",
        (int)rs.n_rank_stats, rank);
  for (int32_t i = 0; i < rs.n_rank_stats; i++)
    CHECK(rs.ranks[i].peak_bytes <= rs.ranks[i].limit_bytes, "loom_run: rank %d's peak over its limit",
          (int)rs.ranks[i].rank);
  free_outputs(out);
  loom_run_stats_deinit(&rs);
  ro.devices = "cpu0"; /* a shared run is no MPI run: refused before any communication */
  CHECK(loom_run(ctx, plan, &ro, in, 2, out, 3, NULL) == LOOM_ERR_INVALID_ARGUMENT,
        "loom_run with both devices and MPI was not refused");
  loom_mpi_comm_destroy(comm);
  /* 2. the caller's communicator, its rank 0 the world's last rank */
  MPI_Comm reversed;
  MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &reversed);
  s = run(ctx, plan, reversed, in, out, &st);
  CHECK(s == LOOM_OK, "MPI run on a split communicator: %s", loom_last_error());
  if (!s) check_outputs(ref, out, "reversed communicator");
  if (!s && rank == size - 1) check_stats(&st, size, "reversed communicator");
  CHECK(st.rank == size - 1 - rank, "rank %d in the reversed communicator, not %d", (int)st.rank,
        size - 1 - rank);
  free_outputs(out);
  loom_mpi_stats_deinit(&st);
  MPI_Comm_free(&reversed);
  /* 3. */
  if (size > 1) check_failure(ctx, plan, in, ref);
  check_three_runners(ctx, opt, in, ref);
  free_outputs(ref);
}

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  loom_context *ctx = NULL;
  loom_graph *g = NULL, *opt = NULL;
  loom_plan *plan = NULL;
  loom_runner runner = {"cpu0", 96 * 1024};
  loom_tensor in[2];
  memset(in, 0, sizeof in);
  CHECK(loom_context_create(NULL, &ctx) == LOOM_OK, "context: %s", loom_last_error());
  CHECK(loom_graph_parse(graph_text, strlen(graph_text), "knn.lir", &g) == LOOM_OK, "parse: %s",
        loom_last_error());
  if (!failures)
    CHECK(loom_graph_optimize_for_runners(g, &runner, 1, NULL, &opt, NULL, NULL, 0) == LOOM_OK &&
              loom_plan_split_by_memory(opt, &runner, 1, &plan) == LOOM_OK,
          "plan: %s", loom_last_error());
  for (int p = 0; !failures && p < 2; p++) {
    const loom_type *t = loom_value_type(g, loom_graph_param_at(g, p));
    CHECK(
        loom_tensor_init(&in[p], t) == LOOM_OK && loom_tensor_fill_random(&in[p], 7, (uint64_t)p) == LOOM_OK,
        "input %d: %s", p, loom_last_error());
  }
  /* Every rank goes on only if every rank could make its plan: the runs are collective. */
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (!all) check_runs(ctx, plan, opt, in);
  for (int p = 0; p < 2; p++) loom_tensor_deinit(&in[p]);
  loom_plan_destroy(plan);
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
  loom_context_destroy(ctx);
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    printf("%s: %d failure%s on %d ranks\n", all ? "FAILED" : "passed", all, all == 1 ? "" : "s", size);
  MPI_Finalize();
  return all ? 1 : 0;
}
