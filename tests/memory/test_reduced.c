/* Chunking along a reduced axis where no parallel axis helps (IR.md, "Rewrites: chunk"): the
 * pieces' partial results are combined (topk by merging, argmax/argmin by comparing, dot over
 * k by summing). Each graph reads one long row, so the only axis to cut is the reduced one. */
#include <stdlib.h>

#include "mem_util.h"

static const int64_t limits[] = {6 * MIB, 8 * MIB, 16 * MIB, 24 * MIB};
enum { N_LIMITS = sizeof limits / sizeof limits[0], LONG = 1 << 20 };

static int64_t peak_as_written(const loom_graph *g) {
  loom_estimate e;
  if (loom_graph_estimate(g, NULL, &e)) return -1;
  int64_t peak = e.peak_bytes;
  loom_estimate_deinit(&e);
  return peak;
}

/* The k largest of exp(x) over a 4 MiB row: exp's 4 MiB result on top of x (8 MiB as written)
 * passes 6 MiB. Checked with ties allowed: values equal the true k largest, indices unique and valid
 * and each index's exp(x) equal to its value. */
static const char *topk_text =
    "graph topk_long(x: f32[1,1048576]) {\n"
    "  e    = exp x                               : f32[1,1048576]\n"
    "  v, i = topk e k=10 axis=1                  : f32[1,10]\n"
    "  return v, i\n"
    "}\n";

static int cmp_desc(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

TEST(topk_over_a_long_row_merges_pieces) {
  enum { K = 10 };
  loom_graph *g = MEM_PARSE(topk_text);
  ASSERT_TRUE(g != NULL);
  ASSERT_TRUE(peak_as_written(g) > 6 * MIB);
  loom_tensor *in = NULL;
  ASSERT_OK(mem_inputs(g, 31, -4.0, 4.0, &in));
  const float *x = in[0].data;
  double *all = malloc(sizeof(double) * LONG);
  ASSERT_TRUE(all != NULL);
  for (int i = 0; i < LONG; i++) all[i] = exp((double)x[i]);
  qsort(all, LONG, sizeof *all, cmp_desc);
  for (int l = 0; l < N_LIMITS; l++) {
    loom_tensor *out = NULL;
    mem_run_info info;
    MEM_RUN(g, limits[l], in, &out, &info);
    if (l == 0) ASSERT_TRUE(strstr(info.rewrites, "chunk") != NULL);
    const float *v = out[0].data;
    const int64_t *ix = out[1].data;
    for (int j = 0; j < K; j++) {
      ASSERT_TRUE(ix[j] >= 0 && ix[j] < LONG);
      for (int q = 0; q < j; q++) ASSERT_TRUE(ix[q] != ix[j]);
      ASSERT_NEAR(v[j], all[j], 1e-6 * all[j]);
      ASSERT_NEAR(exp((double)x[ix[j]]), all[j], 1e-6 * all[j]);
    }
    mem_tensors_free(out, 2);
  }
  free(all);
  mem_tensors_free(in, 1);
  loom_graph_destroy(g);
}

/* argmax, then argmin, of exp(x) over a 4 MiB row (8 MiB as written). */
static const char *arg_text =
    "graph arg_long(x: f32[1,1048576]) {\n"
    "  e = exp x                                  : f32[1,1048576]\n"
    "  a = %s e axis=1                            : i64[1]\n"
    "  return a\n"
    "}\n";

TEST(argmax_argmin_over_a_long_row) {
  for (int which = 0; which < 2; which++) {
    char text[512];
    snprintf(text, sizeof text, arg_text, which ? "argmin" : "argmax");
    loom_graph *g = MEM_PARSE(text);
    ASSERT_TRUE(g != NULL);
    ASSERT_TRUE(peak_as_written(g) > 6 * MIB);
    loom_tensor *in = NULL;
    ASSERT_OK(mem_inputs(g, 32, -4.0, 4.0, &in));
    const float *x = in[0].data;
    double best = which ? INFINITY : -INFINITY;
    for (int i = 0; i < LONG; i++)
      best = which ? fmin(best, exp((double)x[i])) : fmax(best, exp((double)x[i]));
    for (int l = 0; l < N_LIMITS; l++) {
      loom_tensor *out = NULL;
      mem_run_info info;
      MEM_RUN(g, limits[l], in, &out, &info);
      if (l == 0) ASSERT_TRUE(strstr(info.rewrites, "chunk") != NULL);
      int64_t at = ((const int64_t *)out[0].data)[0];
      ASSERT_TRUE(at >= 0 && at < LONG);
      /* Ties (of exp's rounding) may pick another index of an equal value. */
      ASSERT_NEAR(exp((double)x[at]), best, 1e-6 * best);
      mem_tensors_free(out, 1);
    }
    mem_tensors_free(in, 1);
    loom_graph_destroy(g);
  }
}

/* dot over k: exp(a) [1,524288] (2 MiB) times b [524288,2] (4 MiB). Inputs 6 MiB, exp's
 * result 2 MiB more: 8 MiB as written. The output has one row and two columns, neither of
 * which shrinks exp's result, so under 7 MiB the product must be summed over pieces of k. */
static const char *dot_k_text =
    "graph dot_k(a: f32[1,524288], b: f32[524288,2]) {\n"
    "  e   = exp a                                : f32[1,524288]\n"
    "  out = dot e b                              : f32[1,2]\n"
    "  return out\n"
    "}\n";

TEST(dot_summed_over_pieces_of_k) {
  enum { K = 524288 };
  static const int64_t dot_limits[] = {7 * MIB, 8 * MIB, 16 * MIB, 24 * MIB};
  loom_graph *g = MEM_PARSE(dot_k_text);
  ASSERT_TRUE(g != NULL);
  ASSERT_TRUE(peak_as_written(g) > 7 * MIB);
  loom_tensor *in = NULL;
  ASSERT_OK(mem_inputs(g, 33, -1.0, 1.0, &in));
  const float *a = in[0].data, *b = in[1].data;
  double want[2] = {0, 0}, mag[2] = {0, 0};
  for (int i = 0; i < K; i++)
    for (int c = 0; c < 2; c++) {
      double t = exp((double)a[i]) * b[i * 2 + c];
      want[c] += t;
      mag[c] += fabs(t);
    }
  double scale = fmax(mag[0], mag[1]);
  for (int l = 0; l < N_LIMITS; l++) {
    loom_tensor *out = NULL;
    mem_run_info info;
    MEM_RUN(g, dot_limits[l], in, &out, &info);
    if (l == 0) ASSERT_TRUE(strstr(info.rewrites, "chunk") != NULL);
    bool ok = mem_check_close("dot over k", out[0].data, want, 2, scale, 1e-4, __FILE__, __LINE__);
    mem_tensors_free(out, 1);
    if (!ok) return;
  }
  mem_tensors_free(in, 2);
  loom_graph_destroy(g);
}

/* Two reductions read the same 4 MiB intermediate: the sum and the maximum of exp(x) over a
 * 4 MiB row. Both combine over pieces; under 6 MiB exp's result must never be whole (computed
 * once per piece and read by both, or recomputed for each reduction). */
static const char *two_sinks_text =
    "graph two_sinks(x: f32[1,1048576]) {\n"
    "  e = exp x                                  : f32[1,1048576]\n"
    "  s = reduce_sum e axes=[1]                  : f32[1]\n"
    "  m = reduce_max e axes=[1]                  : f32[1]\n"
    "  return s, m\n"
    "}\n";

TEST(two_reductions_of_one_long_row) {
  loom_graph *g = MEM_PARSE(two_sinks_text);
  ASSERT_TRUE(g != NULL);
  ASSERT_TRUE(peak_as_written(g) > 6 * MIB);
  loom_tensor *in = NULL;
  ASSERT_OK(mem_inputs(g, 34, -4.0, 4.0, &in));
  const float *x = in[0].data;
  double sum = 0, mag = 0, mx = -INFINITY;
  for (int i = 0; i < LONG; i++) {
    double t = exp((double)x[i]);
    sum += t;
    mag += fabs(t);
    mx = fmax(mx, t);
  }
  for (int l = 0; l < N_LIMITS; l++) {
    loom_tensor *out = NULL;
    mem_run_info info;
    MEM_RUN(g, limits[l], in, &out, &info);
    bool ok = mem_check_close("sum of exp", out[0].data, &sum, 1, mag, 1e-4, __FILE__, __LINE__) &&
              mem_check_close("max of exp", out[1].data, &mx, 1, mx, 1e-6, __FILE__, __LINE__);
    mem_tensors_free(out, 2);
    if (!ok) return;
  }
  mem_tensors_free(in, 1);
  loom_graph_destroy(g);
}
