/* The limits benchmark's kernels that an eighth of their need once refused (issue 34: an input
 * held whole), at their test sizes (examples/limits/NAME.small.lir): each is planned for cpu0
 * at 1/8 of its need as `loom-bench limits` counts it (the graph's estimated peak rewritten
 * without chunking), run under that limit, and checked three ways: the results equal the whole
 * graph's within f32 tolerance (sums are reassociated across pieces), the measured peak equals
 * the estimate, and both stay under the limit. */
#include <stdlib.h>

#include "harness.h"
#include "ir/ir.h"
#include "runtime/exec.h"

enum { MAX_IO = 8 };

/* examples/limits/<name>.small.lir, parsed from the source tree; NULL (test failed) when it
 * cannot be. */
static loom_graph *load_kernel(const char *name) {
  const char *src = getenv("LOOM_SOURCE_DIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/examples/limits/%s.small.lir", src ? src : ".", name);
  loom_graph *g = NULL;
  if (loom_graph_load(path, &g)) printf("    %s\n", loom_last_error());
  return g;
}

static int64_t estimated_peak(const loom_graph *g) {
  loom_estimate e;
  if (loom_graph_estimate(g, NULL, &e)) return -1;
  int64_t peak = e.peak_bytes;
  loom_estimate_deinit(&e);
  return peak;
}

/* The need loom-bench limits divides: the peak of the graph rewritten without chunking. */
static int64_t whole_need(const loom_graph *g) {
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.fused_runs = loom_fused_body_runs_everywhere;
  static const char *const no_chunk[] = {"chunk"};
  o.disabled = no_chunk;
  o.n_disabled = 1;
  loom_graph *whole = NULL;
  if (loom_graph_optimize(g, &o, &whole, NULL)) return -1;
  int64_t need = estimated_peak(whole);
  loom_graph_destroy(whole);
  return need;
}

static uint64_t mix(uint64_t *s) {
  *s += 0x9E3779B97F4A7C15ull;
  uint64_t z = *s;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform f32 inputs in [0, 1) (every kernel here takes f32 only). */
static loom_status random_inputs(const loom_graph *g, loom_tensor *in) {
  uint64_t s = 34;
  for (int32_t p = 0; p < g->n_params; p++) {
    const loom_type *t = &g->values[g->params[p]].type;
    loom_status st = loom_tensor_init(&in[p], t);
    if (st) return st;
    int64_t n = 0;
    loom_type_elements(t, &n);
    for (int64_t i = 0; i < n; i++) ((float *)in[p].data)[i] = (float)((double)(mix(&s) >> 11) * 0x1p-53);
  }
  return LOOM_OK;
}

/* The worst |got - want| over (atol + 1e-4 |want|), atol 1e-4 of want's largest magnitude:
 * a reassociated f32 sum is off by a few ulps of its terms, not of its (maybe tiny) result. */
static double worst_error(const loom_tensor *want, const loom_tensor *got) {
  int64_t n = 0;
  loom_type_elements(&want->type, &n);
  const float *a = want->data, *b = got->data;
  double big = 0, worst = 0;
  for (int64_t i = 0; i < n; i++) big = fmax(big, fabs(a[i]));
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - b[i]) / (1e-4 * big + 1e-4 * fabs(a[i]));
    worst = isnan(e) ? INFINITY : fmax(worst, e);
  }
  return worst;
}

/* Plans `name` for cpu0 at 1/8 of its need, runs it under that limit, and compares it with
 * the whole graph; `cut` is a phrase the chunk report must hold. */
static void check_kernel(const char *name, const char *cut) {
  loom_graph *g = load_kernel(name), *c = NULL;
  ASSERT_TRUE(g);
  int64_t need = whole_need(g), limit = need / 8;
  ASSERT_TRUE(need > 0);
  loom_runner runner = {.device = "cpu0", .limit = limit};
  loom_rewrite_report report = {0};
  loom_optimize_options o; /* as the tools prepare a graph */
  loom_optimize_options_init(&o);
  o.fused_runs = loom_fused_body_runs_everywhere;
  char note[512];
  ASSERT_OK(loom_graph_optimize_for_runners(g, &runner, 1, &o, &c, &report, note, sizeof note));
  if (note[0]) printf("    %s\n", note);
  ASSERT_TRUE(note[0] == '\0'); /* one graph under the limit, not stages */
  bool chunked = false;
  for (int32_t i = 0; i < report.count; i++)
    if (strcmp(report.entries[i].name, "chunk") == 0) {
      printf("    %s at 1/8 (%lld of %lld bytes): %s\n", name, (long long)limit, (long long)need,
             report.entries[i].detail);
      chunked |= strstr(report.entries[i].detail, cut) != NULL;
    }
  ASSERT_TRUE(chunked);
  int64_t estimate = estimated_peak(c);
  ASSERT_TRUE(estimate > 0 && estimate <= limit);

  int32_t n_in = g->n_params, n_out = g->n_outputs;
  ASSERT_TRUE(n_in <= MAX_IO && n_out <= MAX_IO);
  loom_tensor in[MAX_IO], out[MAX_IO], want[MAX_IO];
  ASSERT_OK(random_inputs(g, in));
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  loom__exec_options eo = {0};
  loom__meter meter = {.limit = limit};
  ASSERT_OK(loom__context_exec_device(ctx, "cpu0", &eo.device));
  ASSERT_OK(loom__execute(c, &eo, in, out, &meter));
  ASSERT_OK(loom_graph_run(ctx, g, in, n_in, want, n_out, NULL));
  loom_context_destroy(ctx);
  ASSERT_EQ(meter.peak, estimate);
  for (int32_t k = 0; k < n_out; k++) {
    ASSERT_TRUE(loom_type_equal(&want[k].type, &out[k].type));
    double worst = worst_error(&want[k], &out[k]);
    if (!(worst <= 1)) printf("    output %d: worst error %.3g of the tolerance\n", (int)k, worst);
    ASSERT_TRUE(worst <= 1);
    loom_tensor_deinit(&want[k]);
    loom_tensor_deinit(&out[k]);
  }
  for (int32_t p = 0; p < n_in; p++) loom_tensor_deinit(&in[p]);
  loom_rewrite_report_deinit(&report);
  loom_graph_destroy(c);
  loom_graph_destroy(g);
}

/* Two rank-1 updates, then x = beta A'^T y + z and w = alpha A' x: one pass over blocks of A's
 * columns (x's block needs only those columns; w sums them). Refused before: the body's
 * reshape of v1 to [1, piece] could not be told from its axis of 1 at a piece of 1, the first
 * piece the search tries. */
TEST(stream_gemver_at_an_eighth) {
  check_kernel("gemver", "with 1 more sink");
}

/* Mean-centred covariance: the mean in a pass of its own over data's rows, then cen^T cen with
 * cen made twice (the transpose's in column blocks of data outside, the product's inside, an
 * inner loop streaming data's columns), so data and the [80,80] result are never held whole. */
TEST(stream_covariance_at_an_eighth) {
  check_kernel("covariance", "in a pass of its own over 'data'");
}

/* Correlation: three passes (the mean, the variance of the centred data with its centring made
 * in the pieces, the scaled product), each streaming data. */
TEST(stream_correlation_at_an_eighth) {
  check_kernel("correlation", "in a pass of its own over 'data'");
}
