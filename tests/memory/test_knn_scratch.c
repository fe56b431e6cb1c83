/* The kNN GEMM top-k under a limit (cpu_fused_gemm.c): its tiles and a column part's k best
 * come from the op's scratch, which the estimator counts (ir/fused_gemm_scratch.h), so a run
 * under a limit close to its estimate measures exactly the estimate and never passes the limit,
 * on two threads or more; and the kernel refuses a scratch smaller than the rule rather than
 * take memory of its own. Neighbours are checked against a float64 brute force. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "backends/cpu/cpu_kernels.h"
#include "ir/fused_gemm_scratch.h"
#include "mem_util.h"

enum { N = 1200, M = 6000, D = 128, K = 10 };

static loom_graph *knn_graph(void) {
  char text[1024];
  snprintf(text, sizeof text,
           "graph knn(x: f32[%d,%d], y: f32[%d,%d]) {\n"
           "  xe = reshape x shape=[%d,1,%d]\n  ye = reshape y shape=[1,%d,%d]\n"
           "  diff = sub xe ye\n  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n"
           "  val, idx = topk d2 k=%d axis=1 largest=false\n  return val, idx\n}\n",
           N, D, M, D, N, D, M, D, K);
  return MEM_PARSE(text);
}

/* The scratch of the first fused op holding GEMM tiles in g or its loops' bodies, or -1. */
static int64_t gemm_scratch(const loom_graph *g) {
  for (int32_t i = 0; i < g->n_ops; i++) {
    const loom__op *op = &g->ops[i];
    if (op->loop) {
      int64_t s = gemm_scratch(op->loop->body);
      if (s >= 0) return s;
    }
    if (op->fused && loom__fused_gemm_tile_bytes(op->fused) > 0) return loom__op_scratch_bytes(g, op);
  }
  return -1;
}

/* Row i's K nearest by brute force in float64 against the run's indices: each index's
 * distance within a relative 1e-4 of the i-th smallest. */
static void check_rows(const float *x, const float *y, const loom_tensor *out) {
  const int64_t *idx = out[1].data;
  double *dist = malloc(sizeof(double) * M);
  ASSERT_TRUE(dist != NULL);
  for (int64_t i = 0; i < N && !loom_test_failed(); i += 97) {
    for (int64_t j = 0; j < M; j++) {
      double s = 0;
      for (int64_t t = 0; t < D; t++)
        s += ((double)x[i * D + t] - y[j * D + t]) * ((double)x[i * D + t] - y[j * D + t]);
      dist[j] = s;
    }
    for (int64_t r = 0; r < K; r++) {
      int64_t got = idx[i * K + r];
      ASSERT_TRUE(got >= 0 && got < M);
      int64_t below = 0; /* points strictly nearer than the r-th answer */
      for (int64_t j = 0; j < M; j++) below += dist[j] < dist[got] * (1 - 1e-4);
      ASSERT_TRUE(below <= r);
    }
  }
  free(dist);
}

/* A run under 12 MiB gives the plan's estimate; the same graph under a limit of just that
 * estimate must measure exactly it. */
TEST(knn_gemm_tiles_counted_under_a_limit) {
  if (omp_get_max_threads() < 2) omp_set_num_threads(2);
  ASSERT_TRUE(omp_get_max_threads() >= 2);
  loom_graph *g = knn_graph();
  ASSERT_TRUE(g != NULL);
  loom_tensor *in = NULL, *out = NULL;
  ASSERT_OK(mem_inputs(g, 7, -1.0, 1.0, &in));
  loom_runner r;
  memset(&r, 0, sizeof r);
  snprintf(r.device, sizeof r.device, "cpu0");
  r.limit = 12 * MIB;
  loom_graph *opt = NULL;
  ASSERT_OK(loom_graph_optimize_for_runners(g, &r, 1, NULL, &opt, NULL, NULL, 0));
  int64_t scratch = gemm_scratch(opt);
  loom_graph_destroy(opt);
  ASSERT_TRUE(scratch > 0); /* the plan runs the GEMM top-k, and its scratch holds the tiles */
  mem_run_info info;
  ASSERT_TRUE(mem_run_under(g, r.limit, NULL, 0, in, &out, &info, __FILE__, __LINE__));
  ASSERT_EQ(info.peak, info.est_peak);
  mem_tensors_free(out, 2);
  int64_t tight = info.est_peak;
  ASSERT_TRUE(mem_run_under(g, tight, NULL, 0, in, &out, &info, __FILE__, __LINE__));
  ASSERT_EQ(info.peak, info.est_peak);
  ASSERT_TRUE(info.peak <= tight);
  check_rows(in[0].data, in[1].data, out);
  mem_tensors_free(out, 2);
  mem_tensors_free(in, 2);
  loom_graph_destroy(g);
}

/* The expanded body (fuse.c's gemm_dot form) run on its own: with the rule's scratch it runs,
 * with a byte less it says so and writes nothing. */
TEST(knn_gemm_kernel_lives_in_its_scratch) {
  if (omp_get_max_threads() < 2) omp_set_num_threads(2);
  const char *text =
      "graph b(x: f32[300,64], yt: f32[64,5000], sy: f32[5000]) {\n"
      "  d = dot x yt\n  c = add d sy\n  val, idx = topk c k=8 axis=1 largest=false\n  return val, idx\n}\n";
  loom_graph *body = MEM_PARSE(text);
  ASSERT_TRUE(body != NULL);
  int64_t tiles = loom__fused_gemm_tile_bytes(body);
  ASSERT_EQ(tiles, (int64_t)LOOM_GEMM_TOPK_TILES * 256 * 1024 * 4);
  int64_t need = 300 * 8 * 12 + tiles;
  loom_tensor *in = NULL;
  ASSERT_OK(mem_inputs(body, 3, 0.0, 1.0, &in));
  loom__view v[5];
  for (int32_t p = 0; p < 3; p++) {
    memset(&v[p], 0, sizeof v[p]);
    v[p].type = body->values[body->params[p]].type;
    loom__view_dense_strides(&v[p].type, v[p].strides);
    v[p].data = in[p].data;
  }
  float *val = malloc(sizeof(float) * 300 * 8);
  int64_t *idx = malloc(sizeof(int64_t) * 300 * 8);
  char *scratch = malloc((size_t)need);
  ASSERT_TRUE(val && idx && scratch);
  for (int32_t r = 0; r < 2; r++) {
    memset(&v[3 + r], 0, sizeof v[3 + r]);
    v[3 + r].type = body->values[body->outputs[r]].type;
    loom__view_dense_strides(&v[3 + r].type, v[3 + r].strides);
  }
  v[3].data = val, v[4].data = idx;
  ASSERT_EQ(loom__cpu_fused(body, v, v + 3, scratch, need - 1), LOOM_ERR_INTERNAL);
  ASSERT_OK(loom__cpu_fused(body, v, v + 3, scratch, need));
  const float *x = in[0].data, *yt = in[1].data, *sy = in[2].data;
  for (int64_t i = 0; i < 300; i += 37) /* the first neighbour is the least of the row */
    for (int64_t j = 0; j < 5000; j++) {
      float s = 0;
      for (int64_t t = 0; t < 64; t++) s += x[i * 64 + t] * yt[t * 5000 + j];
      ASSERT_TRUE(s + sy[j] >= val[i * 8] - 1e-3f * (1 + fabsf(val[i * 8])));
    }
  free(val), free(idx), free(scratch);
  mem_tensors_free(in, 3);
  loom_graph_destroy(body);
}
