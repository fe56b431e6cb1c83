/* Loom inside an MPI program: a kNN planned under a memory limit that cuts it into a loop of
 * pieces, run with loom_plan_run_mpi on MPI_COMM_WORLD (each rank a range of the pieces), and
 * compared with the same plan run in one process. Built against an installed Loom by
 * tests/install.cmake (find_package(Loom COMPONENTS mpi) and pkg-config's loom-mpi).
 *
 *   mpirun -np 2 ./loom_mpi_example      exit 0 when every rank's results equal the reference */
#include <loom/loom.h>
#include <loom/mpi.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static const char *text =
    "graph knn(x: f32[2000,3], y: f32[3000,3]) {\n"
    "  xe = reshape x shape=[2000,1,3]\n"
    "  ye = reshape y shape=[1,3000,3]\n"
    "  diff = sub xe ye\n"
    "  sq = mul diff diff\n"
    "  d2 = reduce_sum sq axes=[2]\n"
    "  val, idx = topk d2 k=5 axis=1 largest=false\n"
    "  return val, idx\n"
    "}\n";

/* On failure: the message on stderr, and every rank stops (a collective would wait forever). */
static void check(loom_status s, const char *what) {
  if (s == LOOM_OK) return;
  fprintf(stderr, "%s: %s: %s\n", what, loom_status_string(s), loom_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static int equal(const loom_tensor *a, const loom_tensor *b) {
  int64_t na = 0, nb = 0;
  loom_type_bytes(&a->type, &na);
  loom_type_bytes(&b->type, &nb);
  return na == nb && memcmp(a->data, b->data, (size_t)na) == 0;
}

int main(int argc, char **argv) {
  int provided = 0, rank = 0, same = 1, all = 0;
  /* Loom calls MPI from the calling thread only, while its OpenMP threads compute. */
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  loom_context *ctx;
  loom_graph *g, *opt;
  loom_plan *plan;
  loom_runner runner = {"cpu0", 64 * 1024};
  check(loom_context_create(NULL, &ctx), "loom_context_create");
  check(loom_graph_parse(text, strlen(text), "knn.lir", &g), "loom_graph_parse");
  check(loom_graph_optimize_for_runners(g, &runner, 1, NULL, &opt, NULL, NULL, 0), "optimize");
  check(loom_plan_split_by_memory(opt, &runner, 1, &plan), "loom_plan_split_by_memory");

  loom_tensor in[2], ref[2], out[2];
  for (int p = 0; p < 2; p++) {
    check(loom_tensor_init(&in[p], loom_value_type(g, loom_graph_param_at(g, p))), "loom_tensor_init");
    check(loom_tensor_fill_random(&in[p], 7, (uint64_t)p), "loom_tensor_fill_random");
  }
  check(loom_plan_run(ctx, plan, in, 2, ref, 2, NULL), "loom_plan_run");
  loom_mpi_stats stats = {0};
  check(loom_plan_run_mpi(ctx, plan, MPI_COMM_WORLD, NULL, in, 2, out, 2, &stats), "loom_plan_run_mpi");
  for (int i = 0; i < 2; i++) same &= equal(&ref[i], &out[i]);
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("kNN on %d ranks: %d loop stage(s) shared; results %s the single-process run's\n",
           (int)stats.n_ranks, (int)stats.n_loop_stages, all ? "equal" : "DIFFER from");
    for (int32_t i = 0; i < stats.n_ranges; i++)
      printf("  rank %d: pieces [%lld, %lld) of %lld\n", (int)stats.ranges[i].rank,
             (long long)stats.ranges[i].first, (long long)stats.ranges[i].last,
             (long long)stats.ranges[i].pieces);
  }

  loom_mpi_stats_deinit(&stats);
  for (int i = 0; i < 2; i++) {
    loom_tensor_deinit(&in[i]);
    loom_tensor_deinit(&ref[i]);
    loom_tensor_deinit(&out[i]);
  }
  loom_plan_destroy(plan);
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
  loom_context_destroy(ctx);
  MPI_Finalize();
  return all ? 0 : 1;
}
