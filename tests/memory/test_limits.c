/* Issue 3's acceptance: graphs whose working sets pass the limits run under 4 to 24 MiB on
 * one cpu0 runner (loom_graph_optimize_for_runners, loom_plan_split_by_memory, loom_plan_run)
 * with every stage's measured peak at or under the limit and within 10% of its estimate, and
 * results that match a float64 reference computed here in plain C. */
#include <stdlib.h>

#include "mem_util.h"

static const int64_t limits[] = {4 * MIB, 8 * MIB, 16 * MIB, 24 * MIB};
enum { N_LIMITS = sizeof limits / sizeof limits[0] };

static bool has_rewrite(const mem_run_info *info, const char *name) {
  const char *p = info->rewrites;
  size_t n = strlen(name);
  while ((p = strstr(p, name)) != NULL) {
    if ((p == info->rewrites || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return true;
    p += n;
  }
  return false;
}

/* The estimated peak of g as written, with no rewrite: what the limits are below. */
static int64_t peak_as_written(const loom_graph *g) {
  loom_estimate e;
  if (loom_graph_estimate(g, NULL, &e)) return -1;
  int64_t peak = e.peak_bytes;
  loom_estimate_deinit(&e);
  return peak;
}

/* ---- 1. kNN of IR.md ---------------------------------------------------------------------- */

static const char *knn_text =
    "# kNN by brute force: for every row of x, the 10 nearest rows of y\n"
    "graph knn(x: f32[%d,3], y: f32[%d,3]) {\n"
    "  xe       = reshape x shape=[%d,1,3]\n"
    "  ye       = reshape y shape=[1,%d,3]\n"
    "  diff     = sub xe ye                       # f32[%d,%d,3] by broadcasting\n"
    "  sq       = mul diff diff\n"
    "  d2       = reduce_sum sq axes=[2]          : f32[%d,%d]\n"
    "  val, idx = topk d2 k=10 axis=1 largest=false\n"
    "  return val, idx\n"
    "}\n";

/* IR.md's size (20000 x 30000) at every limit; AddressSanitizer builds run 8000 x 12000. */
TEST(knn_ir_example_under_4_to_24_mib) {
  const int n = MEM_ASAN ? 8000 : 20000, m = MEM_ASAN ? 12000 : 30000, k = 10;
  char text[1024];
  snprintf(text, sizeof text, knn_text, n, m, n, m, n, m, n, m);
  loom_graph *g = MEM_PARSE(text);
  ASSERT_TRUE(g != NULL);
  ASSERT_TRUE(peak_as_written(g) > 24 * MIB);
  loom_tensor *in = NULL;
  ASSERT_OK(mem_inputs(g, 1, 0.0, 1.0, &in));
  const float *x = in[0].data, *y = in[1].data;
  double *best = malloc(sizeof(double) * (size_t)n * k);
  ASSERT_TRUE(best != NULL);
  mem_knn_best(x, y, n, m, 3, k, mem_d2, best);
  for (int l = 0; l < N_LIMITS; l++) {
    loom_tensor *out = NULL;
    mem_run_info info;
    MEM_RUN(g, limits[l], in, &out, &info);
    ASSERT_TRUE(has_rewrite(&info, "distance"));
    ASSERT_TRUE(has_rewrite(&info, "chunk"));
    bool ok = mem_check_knn(x, y, n, m, 3, k, mem_d2, best, &out[0], &out[1], __FILE__, __LINE__);
    mem_tensors_free(out, 2);
    if (!ok) return;
  }
  free(best);
  mem_tensors_free(in, 2);
  loom_graph_destroy(g);
}

/* ---- 2. kernel matrix-vector product -------------------------------------------------------- */

static const char *kernel_mv_text =
    "graph kernel_mv(x: f32[20000,4], z: f32[400,4], y: f32[20000]) {\n"
    "  xe   = reshape x shape=[20000,1,4]\n"
    "  ze   = reshape z shape=[1,400,4]\n"
    "  diff = sub xe ze                           # f32[20000,400,4] by broadcasting\n"
    "  sq   = mul diff diff\n"
    "  d2   = reduce_sum sq axes=[2]              : f32[20000,400]\n"
    "  half = constant 0.5 : f32[]\n"
    "  e    = mul d2 half\n"
    "  ne   = neg e\n"
    "  k    = exp ne                              : f32[20000,400]\n"
    "  kt   = transpose k perm=[1,0]              : f32[400,20000]\n"
    "  out  = dot kt y                            : f32[400]\n"
    "  return out\n"
    "}\n";

TEST(kernel_mv_under_4_to_24_mib) {
  enum { N = 20000, M = 400, D = 4 };
  loom_graph *g = MEM_PARSE(kernel_mv_text);
  ASSERT_TRUE(g != NULL);
  ASSERT_TRUE(peak_as_written(g) > 24 * MIB);
  loom_tensor *in = NULL;
  ASSERT_OK(mem_inputs(g, 2, -1.0, 1.0, &in));
  const float *x = in[0].data, *z = in[1].data, *y = in[2].data;
  double *want = calloc(M, sizeof *want), *mag = calloc(M, sizeof *mag);
  ASSERT_TRUE(want && mag);
#pragma omp parallel for
  for (int j = 0; j < M; j++) {
    double s = 0, a = 0;
    for (int i = 0; i < N; i++) {
      double kij = exp(-mem_d2(x, z, i, j, D) / 2);
      s += kij * y[i];
      a += kij * fabs((double)y[i]);
    }
    want[j] = s;
    mag[j] = a;
  }
  double scale = mem_max_abs(mag, M);
  for (int l = 0; l < N_LIMITS; l++) {
    loom_tensor *out = NULL;
    mem_run_info info;
    MEM_RUN(g, limits[l], in, &out, &info);
    ASSERT_EQ(out[0].type.rank, 1);
    ASSERT_EQ(out[0].type.dims[0], M);
    bool ok = mem_check_close("kernel_mv", out[0].data, want, M, scale, 1e-4, __FILE__, __LINE__);
    mem_tensors_free(out, 1);
    if (!ok) return;
  }
  free(want);
  free(mag);
  mem_tensors_free(in, 3);
  loom_graph_destroy(g);
}

/* ---- 3. a dot chain that fits 4 MiB only reordered ----------------------------------------- */

static const char *dot_chain_text =
    "graph chain(a: f32[700,700], b: f32[700,700], v: f32[700]) {\n"
    "  ab  = dot a b                              : f32[700,700]\n"
    "  out = dot ab v                             : f32[700]\n"
    "  return out\n"
    "}\n";

TEST(dot_chain_under_4_to_24_mib) {
  enum { N = 700 };
  loom_graph *g = MEM_PARSE(dot_chain_text);
  ASSERT_TRUE(g != NULL);
  /* As written, the 1.87 MiB product joins both 1.87 MiB inputs: more than 4 MiB. */
  ASSERT_TRUE(peak_as_written(g) > 4 * MIB);
  loom_tensor *in = NULL;
  ASSERT_OK(mem_inputs(g, 3, -1.0, 1.0, &in));
  const float *a = in[0].data, *b = in[1].data, *v = in[2].data;
  double *bv = calloc(N, sizeof *bv), *abv = calloc(N, sizeof *abv), *want = calloc(N, sizeof *want),
         *mag = calloc(N, sizeof *mag);
  ASSERT_TRUE(bv && abv && want && mag);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      bv[i] += (double)b[i * N + j] * v[j];
      abv[i] += fabs((double)b[i * N + j] * v[j]);
    }
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      want[i] += (double)a[i * N + j] * bv[j];
      mag[i] += fabs((double)a[i * N + j]) * abv[j];
    }
  double scale = mem_max_abs(mag, N);
  for (int l = 0; l < N_LIMITS; l++) {
    loom_tensor *out = NULL;
    mem_run_info info;
    MEM_RUN(g, limits[l], in, &out, &info);
    ASSERT_TRUE(has_rewrite(&info, "dot_chain"));
    ASSERT_EQ(info.n_stages, 1);
    bool ok = mem_check_close("dot chain", out[0].data, want, N, scale, 1e-4, __FILE__, __LINE__);
    mem_tensors_free(out, 1);
    if (!ok) return;
  }
  free(bv);
  free(abv);
  free(want);
  free(mag);
  mem_tensors_free(in, 3);
  loom_graph_destroy(g);
}

/* ---- 4. L1 kNN: no rewrite shrinks it, chunking must ---------------------------------------- */

static const char *l1_knn_text =
    "graph l1knn(x: f32[4000,3], y: f32[6000,3]) {\n"
    "  xe       = reshape x shape=[4000,1,3]\n"
    "  ye       = reshape y shape=[1,6000,3]\n"
    "  diff     = sub xe ye                       : f32[4000,6000,3]\n"
    "  ad       = abs diff\n"
    "  d1       = reduce_sum ad axes=[2]          : f32[4000,6000]\n"
    "  val, idx = topk d1 k=5 axis=1 largest=false\n"
    "  return val, idx\n"
    "}\n";

TEST(l1_knn_chunked_under_4_to_24_mib) {
  enum { N = 4000, M = 6000, K = 5 };
  loom_graph *g = MEM_PARSE(l1_knn_text);
  ASSERT_TRUE(g != NULL);
  ASSERT_TRUE(peak_as_written(g) > 24 * MIB);
  loom_tensor *in = NULL;
  ASSERT_OK(mem_inputs(g, 4, 0.0, 1.0, &in));
  const float *x = in[0].data, *y = in[1].data;
  double *best = malloc(sizeof(double) * N * K);
  ASSERT_TRUE(best != NULL);
  mem_knn_best(x, y, N, M, 3, K, mem_l1, best);
  for (int l = 0; l < N_LIMITS; l++) {
    loom_tensor *out = NULL;
    mem_run_info info;
    MEM_RUN(g, limits[l], in, &out, &info);
    ASSERT_TRUE(!has_rewrite(&info, "distance")); /* abs is not a square */
    ASSERT_TRUE(has_rewrite(&info, "chunk"));
    bool ok = mem_check_knn(x, y, N, M, 3, K, mem_l1, best, &out[0], &out[1], __FILE__, __LINE__);
    mem_tensors_free(out, 2);
    if (!ok) return;
  }
  free(best);
  mem_tensors_free(in, 2);
  loom_graph_destroy(g);
}

/* ---- 5. softmax attention with a 16 MiB score matrix ----------------------------------------- */

static const char *attention_text =
    "graph attention(q: f32[2048,64], k: f32[2048,64], v: f32[2048,64]) {\n"
    "  kt  = transpose k perm=[1,0]\n"
    "  s   = dot q kt                             : f32[2048,2048]\n"
    "  m   = reduce_max s axes=[1] keepdims=true  : f32[2048,1]\n"
    "  sh  = sub s m\n"
    "  e   = exp sh\n"
    "  z   = reduce_sum e axes=[1] keepdims=true  : f32[2048,1]\n"
    "  p   = div e z\n"
    "  out = dot p v                              : f32[2048,64]\n"
    "  return out\n"
    "}\n";

TEST(softmax_attention_under_4_to_24_mib) {
  enum { N = 2048, D = 64 };
  loom_graph *g = MEM_PARSE(attention_text);
  ASSERT_TRUE(g != NULL);
  ASSERT_TRUE(peak_as_written(g) > 24 * MIB);
  loom_tensor *in = NULL;
  ASSERT_OK(mem_inputs(g, 5, -1.0, 1.0, &in));
  const float *q = in[0].data, *k = in[1].data, *v = in[2].data;
  double *want = calloc((size_t)N * D, sizeof *want);
  ASSERT_TRUE(want != NULL);
#pragma omp parallel
  {
    double *row = malloc(sizeof(double) * N);
#pragma omp for schedule(dynamic, 16)
    for (int i = 0; i < N; i++) {
      double mx = -INFINITY, sum = 0;
      for (int j = 0; j < N; j++) {
        double s = 0;
        for (int c = 0; c < D; c++) s += (double)q[i * D + c] * k[j * D + c];
        row[j] = s;
        mx = fmax(mx, s);
      }
      for (int j = 0; j < N; j++) {
        row[j] = exp(row[j] - mx);
        sum += row[j];
      }
      for (int j = 0; j < N; j++)
        for (int c = 0; c < D; c++) want[(size_t)i * D + c] += row[j] / sum * v[j * D + c];
    }
    free(row);
  }
  /* Each output is a convex combination of v's entries, all within [-1, 1). */
  double scale = 1.0;
  for (int l = 0; l < N_LIMITS; l++) {
    loom_tensor *out = NULL;
    mem_run_info info;
    MEM_RUN(g, limits[l], in, &out, &info);
    ASSERT_TRUE(has_rewrite(&info, "chunk"));
    bool ok =
        mem_check_close("attention", out[0].data, want, (int64_t)N * D, scale, 1e-4, __FILE__, __LINE__);
    mem_tensors_free(out, 1);
    if (!ok) return;
  }
  free(want);
  mem_tensors_free(in, 3);
  loom_graph_destroy(g);
}

/* ---- 6. log-sum-exp over a row longer than the limit allows ---------------------------------- */

static const char *lse_text =
    "graph lse(x: f32[1,1048576]) {\n"
    "  m = reduce_max x axes=[1] keepdims=true    : f32[1,1]\n"
    "  d = sub x m\n"
    "  e = exp d                                  : f32[1,1048576]\n"
    "  s = reduce_sum e axes=[1] keepdims=true    : f32[1,1]\n"
    "  l = log s\n"
    "  r = add m l\n"
    "  return r\n"
    "}\n";

/* The 4 MiB input with a 4 MiB exp temporary on top passes 6 and 8 MiB: the sum must be
 * taken in pieces along the reduced axis. (4 MiB cannot hold the input and anything else.) */
TEST(log_sum_exp_long_row_under_6_to_24_mib) {
  enum { N = 1 << 20 };
  static const int64_t lse_limits[] = {6 * MIB, 8 * MIB, 16 * MIB, 24 * MIB};
  loom_graph *g = MEM_PARSE(lse_text);
  ASSERT_TRUE(g != NULL);
  ASSERT_TRUE(peak_as_written(g) > 8 * MIB);
  loom_tensor *in = NULL;
  ASSERT_OK(mem_inputs(g, 6, -4.0, 4.0, &in));
  const float *x = in[0].data;
  double mx = -INFINITY, sum = 0;
  for (int i = 0; i < N; i++) mx = fmax(mx, x[i]);
  for (int i = 0; i < N; i++) sum += exp(x[i] - mx);
  double want = mx + log(sum);
  for (int l = 0; l < 4; l++) {
    loom_tensor *out = NULL;
    mem_run_info info;
    MEM_RUN(g, lse_limits[l], in, &out, &info);
    if (lse_limits[l] <= 8 * MIB) ASSERT_TRUE(has_rewrite(&info, "chunk"));
    ASSERT_EQ(out[0].type.rank, 2);
    bool ok = mem_check_close("log-sum-exp", out[0].data, &want, 1, fabs(want), 1e-4, __FILE__, __LINE__);
    mem_tensors_free(out, 1);
    if (!ok) return;
  }
  mem_tensors_free(in, 1);
  loom_graph_destroy(g);
}

/* ---- 7. a broadcast consumed by a reduction is never materialized ---------------------------- */

static const char *bsum_text =
    "graph bsum(x: f32[1048576]) {\n"
    "  b = broadcast x shape=[1024,1048576]       : f32[1024,1048576]\n"
    "  r = reduce_sum b axes=[0]                  : f32[1048576]\n"
    "  return r\n"
    "}\n";

TEST(broadcast_reduced_never_materialized_under_16_mib) {
  enum { N = 1 << 20 };
  loom_graph *g = MEM_PARSE(bsum_text);
  ASSERT_TRUE(g != NULL);
  /* 4 GiB logical, no storage of its own. */
  int64_t logical = 0, physical = -1;
  ASSERT_OK(loom_value_bytes(g, loom_graph_find(g, "b"), &logical, &physical));
  ASSERT_EQ(logical, (int64_t)4 << 30);
  ASSERT_EQ(physical, 0);
  loom_estimate e;
  ASSERT_OK(loom_graph_estimate(g, NULL, &e));
  ASSERT_TRUE(e.logical_bytes >= (int64_t)4 << 30);
  ASSERT_TRUE(e.peak_bytes <= 16 * MIB);
  loom_estimate_deinit(&e);
  loom_tensor *in = NULL;
  ASSERT_OK(mem_inputs(g, 7, -1.0, 1.0, &in));
  const float *x = in[0].data;
  double *want = malloc(sizeof(double) * N);
  ASSERT_TRUE(want != NULL);
  for (int i = 0; i < N; i++) want[i] = 1024.0 * x[i];
  /* With every rewrite (the reduction may become a multiply), and with reduce_broadcast off so
   * that the reduction reads the broadcast view itself. */
  static const char *const no_rb[] = {"reduce_broadcast"};
  for (int pass = 0; pass < 2; pass++) {
    loom_tensor *out = NULL;
    mem_run_info info;
    if (!mem_run_under(g, 16 * MIB, no_rb, pass, in, &out, &info, __FILE__, __LINE__)) return;
    if (pass == 1) ASSERT_TRUE(!has_rewrite(&info, "reduce_broadcast"));
    ASSERT_TRUE(info.peak <= 16 * MIB);
    bool ok = mem_check_close("1024 x", out[0].data, want, N, 1024.0, 1e-4, __FILE__, __LINE__);
    mem_tensors_free(out, 1);
    if (!ok) return;
  }
  free(want);
  mem_tensors_free(in, 1);
  loom_graph_destroy(g);
}

/* ---- several runners with different limits --------------------------------------------------- */

/* Chunked to the largest limit, then cut by split_by_memory over three runners (4, 6 and 8
 * MiB, back to the first after the last): every stage's measured peak at or under its own
 * runner's limit, results as on one device. */
TEST(chunked_graphs_over_three_runners) {
  loom_runner r[3] = {{"cpu0", 4 * MIB}, {"cpu0", 6 * MIB}, {"cpu0", 8 * MIB}};
  /* kernel_mv */
  {
    loom_graph *g = MEM_PARSE(kernel_mv_text);
    ASSERT_TRUE(g != NULL);
    loom_tensor *in = NULL, *one = NULL, *out = NULL;
    ASSERT_OK(mem_inputs(g, 21, -1.0, 1.0, &in));
    MEM_RUN(g, 8 * MIB, in, &one, NULL);
    mem_run_info info;
    if (!mem_run_runners(g, r, 3, NULL, 0, in, &out, &info, __FILE__, __LINE__)) return;
    ASSERT_TRUE(memcmp(one[0].data, out[0].data, 400 * sizeof(float)) == 0);
    mem_tensors_free(one, 1);
    mem_tensors_free(out, 1);
    mem_tensors_free(in, 3);
    loom_graph_destroy(g);
  }
  /* attention */
  {
    loom_graph *g = MEM_PARSE(attention_text);
    ASSERT_TRUE(g != NULL);
    loom_tensor *in = NULL, *one = NULL, *out = NULL;
    ASSERT_OK(mem_inputs(g, 22, -1.0, 1.0, &in));
    MEM_RUN(g, 8 * MIB, in, &one, NULL);
    mem_run_info info;
    if (!mem_run_runners(g, r, 3, NULL, 0, in, &out, &info, __FILE__, __LINE__)) return;
    ASSERT_TRUE(memcmp(one[0].data, out[0].data, 2048 * 64 * sizeof(float)) == 0);
    mem_tensors_free(one, 1);
    mem_tensors_free(out, 1);
    mem_tensors_free(in, 3);
    loom_graph_destroy(g);
  }
}
