/* loom-bench blas --simulate: hpcc's DGEMM (host operands) predicted on a platform file for
 * Loom, OpenBLAS on the host and NVBLAS, without the platform's devices. Loom's prediction is
 * the planner's and scheduler's own (as loom-run --simulate makes it); the other two are
 * models of what those libraries do, said in bench_blas.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_blas.h"
#include "loom/loom.h"

/* NVBLAS's defaults (nvblas.conf): square tiles of 2048, no share of the work on the CPU. */
#define NVBLAS_TILE 2048

/* dgemm of n as a graph: alpha * A B + beta * C, n x n doubles. */
static loom_graph *dgemm_graph(int64_t n) {
  loom_graph *g;
  if (loom_graph_create("dgemm", &g) != LOOM_OK) return NULL;
  int64_t dims[2] = {n, n};
  loom_type t, s;
  loom_type_make(LOOM_F64, 2, dims, &t);
  loom_type_make(LOOM_F64, 0, NULL, &s);
  double alpha = 1.5, beta = 0.5;
  loom_value a = loom_graph_param(g, "a", &t), b = loom_graph_param(g, "b", &t),
             c = loom_graph_param(g, "c", &t);
  loom_value r = loom_binary(g, LOOM_OP_MUL, loom_constant(g, &s, &alpha), loom_dot(g, a, b));
  r = loom_binary(g, LOOM_OP_ADD, r, loom_binary(g, LOOM_OP_MUL, loom_constant(g, &s, &beta), c));
  loom_graph_return(g, &r, 1);
  if (loom_graph_verify(g) == LOOM_OK) return g;
  loom_graph_destroy(g);
  return NULL;
}

/* The makespan of g on `pf` (every device, dmda), planned as loom-run --simulate plans it:
 * pieces sized for the smallest device, cut for sharing where there are several. */
static double loom_predict(const loom_graph *g, const loom_sched_platform *pf) {
  int32_t n = loom_sched_platform_device_count(pf);
  loom_runner *runners = calloc((size_t)n, sizeof *runners);
  if (!runners) return -1;
  int64_t smallest = INT64_MAX;
  for (int32_t i = 0; i < n; i++) {
    const loom_sched_device *d = loom_sched_platform_device(pf, i);
    snprintf(runners[i].device, sizeof runners[i].device, "%s", d->id);
    smallest = d->memory < smallest ? d->memory : smallest;
  }
  for (int32_t i = 0; i < n; i++) runners[i].limit = smallest;
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  if (n == 1) o.fused_runs = loom_fused_body_runs_everywhere;
  loom_graph *opt = NULL;
  loom_plan *plan = NULL;
  loom_sched_problem *problem = NULL;
  loom_sched_result result = {0};
  double t = -1;
  if (loom_graph_optimize_for_runners(g, runners, n, &o, &opt, NULL, NULL, 0) == LOOM_OK &&
      (n > 1 ? loom_share_cut(opt, &runners[0], n, &plan)
             : loom_plan_split_by_memory(opt, runners, 1, &plan)) == LOOM_OK &&
      loom_sched_problem_from_plan(plan, pf, &problem) == LOOM_OK &&
      loom_sched_schedule(problem, pf, LOOM_SCHED_DMDA, &result) == LOOM_OK)
    t = result.makespan;
  loom_sched_result_deinit(&result);
  loom_sched_problem_destroy(problem);
  loom_plan_destroy(plan);
  loom_graph_destroy(opt);
  free(runners);
  return t;
}

/* cublasXt's tiles: C in tiles of T x T; each moves its T x n panel of A, n x T of B, and
 * itself in and out, all through the one host link. `overlapped`: transfers hidden behind the
 * GPU's work (pinned memory, its streams); else one after the other (pageable memory, as hpcc's
 * malloc'ed operands are). */
static double nvblas_predict(const loom_sched_platform *pf, const loom_sched_device *gpu, int64_t n,
                             bool overlapped) {
  int64_t tiles = (n + NVBLAS_TILE - 1) / NVBLAS_TILE, t = n < NVBLAS_TILE ? n : NVBLAS_TILE;
  double compute = 0, move = 0;
  for (int64_t i = 0; i < tiles * tiles; i++) {
    compute += loom_sched_model_time(&gpu->model, LOOM_OP_CLASS_GEMM, 2.0 * t * t * n);
    move += loom_sched_platform_transfer_time(pf, 0, gpu->node, 8 * (2 * t * n + t * t)) +
            loom_sched_platform_transfer_time(pf, gpu->node, 0, 8 * t * t);
  }
  return overlapped ? fmax(compute, move) : compute + move;
}

static int sim_fail(const char *what, int64_t n) {
  return bench_fail("blas", 1, "--simulate: %s (dgemm n=%lld): %s", what, (long long)n, loom_last_error());
}

int bench_blas_simulate(const char *platform, const int64_t *sizes, int32_t n_sizes, FILE *json) {
  loom_sched_platform *pf = NULL, *host = NULL;
  if (loom_sched_platform_load(platform, &pf) != LOOM_OK)
    return bench_fail("blas", 1, "--simulate: %s", loom_last_error());
  const loom_sched_device *gpu = NULL;
  for (int32_t i = 0; i < loom_sched_platform_device_count(pf) && !gpu; i++)
    if (strcmp(loom_sched_platform_device(pf, i)->kind, "cuda") == 0) gpu = loom_sched_platform_device(pf, i);
  if (loom_sched_platform_subset(pf, "cpu0", &host) != LOOM_OK) {
    loom_sched_platform_destroy(pf);
    return bench_fail("blas", 1, "--simulate: %s: %s", platform, loom_last_error());
  }
  printf("dgemm with host operands on %s, predicted (seconds; no kernel run):\n", platform);
  printf("  %-7s %10s %10s %12s %12s %9s %9s\n", "n", "OpenBLAS", "Loom", "NVBLAS", "NVBLAS-ovl", "Loom/OB",
         "Loom/NV");
  int rc = 0;
  for (int32_t k = 0; k < n_sizes && !rc; k++) {
    int64_t n = sizes[k];
    loom_graph *g = dgemm_graph(n);
    if (!g) {
      rc = sim_fail("the graph", n);
      break;
    }
    double ob = loom_predict(g, host), lo = loom_predict(g, pf);
    double nv = gpu ? nvblas_predict(pf, gpu, n, false) : NAN,
           nvo = gpu ? nvblas_predict(pf, gpu, n, true) : NAN;
    loom_graph_destroy(g);
    if (ob < 0 || lo < 0) {
      rc = sim_fail(ob < 0 ? "planning for cpu0" : "planning for every device", n);
      break;
    }
    /* Ratios are speedups: the other's time over Loom's. */
    printf("  %-7lld %10.4f %10.4f %12.4f %12.4f %9.2f %9.2f\n", (long long)n, ob, lo, nv, nvo, ob / lo,
           nv / lo);
    if (json)
      fprintf(json,
              "%s\n  {\"n\": %lld, \"openblas_s\": %.6g, \"loom_s\": %.6g, \"nvblas_s\": %.6g, "
              "\"nvblas_overlapped_s\": %.6g}",
              k ? "," : "", (long long)n, ob, lo, gpu ? nv : -1, gpu ? nvo : -1);
  }
  loom_sched_platform_destroy(host);
  loom_sched_platform_destroy(pf);
  return rc;
}
