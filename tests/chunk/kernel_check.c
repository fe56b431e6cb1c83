/* The chunk module's kernel checks (kernel_check.h). */
#include "kernel_check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "runtime/exec.h"

enum { MAX_IO = 8 };

/* The kernel's graph, parsed from the source tree (`name` under tests/chunk/data, or a path
 * from the tree's root ending in .lir); NULL (test failed) when it cannot be. */
loom_graph *kernel_load(const char *name) {
  const char *src = getenv("LOOM_SOURCE_DIR");
  char path[1024];
  if (strstr(name, ".lir"))
    snprintf(path, sizeof path, "%s/%s", src ? src : ".", name);
  else
    snprintf(path, sizeof path, "%s/tests/chunk/data/%s.lir", src ? src : ".", name);
  FILE *f = fopen(path, "rb");
  if (!f) {
    printf("    cannot open %s\n", path);
    return NULL;
  }
  static char text[1 << 16];
  size_t n = fread(text, 1, sizeof text, f);
  fclose(f);
  loom_graph *g = NULL;
  if (loom_graph_parse(text, n, path, &g)) printf("    %s\n", loom_last_error());
  return g;
}

int64_t kernel_estimated_peak(const loom_graph *g) {
  loom_estimate e;
  if (loom_graph_estimate(g, NULL, &e)) return -1;
  int64_t peak = e.peak_bytes;
  loom_estimate_deinit(&e);
  return peak;
}

static uint64_t mix(uint64_t *s) {
  *s += 0x9E3779B97F4A7C15ull;
  uint64_t z = *s;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform f32 inputs in [-1, 1) (every kernel here takes f32 only). */
static loom_status random_inputs(const loom_graph *g, loom_tensor *in) {
  uint64_t s = 34;
  for (int32_t p = 0; p < g->n_params; p++) {
    const loom_type *t = &g->values[g->params[p]].type;
    loom_status st = loom_tensor_init(&in[p], t);
    if (st) return st;
    int64_t n = 0;
    loom_type_elements(t, &n);
    for (int64_t i = 0; i < n; i++)
      ((float *)in[p].data)[i] = (float)((double)(mix(&s) >> 11) * 0x1p-52 - 1.0);
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

int64_t kernel_whole_need(const loom_graph *g) {
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.fused_runs = loom_fused_body_runs_everywhere;
  static const char *const no_chunk[] = {"chunk"};
  o.disabled = no_chunk;
  o.n_disabled = 1;
  loom_graph *whole = NULL;
  if (loom_graph_optimize(g, &o, &whole, NULL)) return -1;
  int64_t need = kernel_estimated_peak(whole);
  loom_graph_destroy(whole);
  return need;
}

void kernel_check_at(loom_graph *g, const char *label, int64_t need, int64_t limit,
                     const loom_optimize_options *o, const char *cut) {
  loom_graph *c = NULL;
  ASSERT_TRUE(g);
  ASSERT_TRUE(need > 0);
  loom_runner runner = {.device = "cpu0", .limit = limit};
  loom_rewrite_report report = {0};
  char note[512];
  ASSERT_OK(loom_graph_optimize_for_runners(g, &runner, 1, o, &c, &report, note, sizeof note));
  if (note[0]) printf("    %s\n", note);
  ASSERT_TRUE(note[0] == '\0'); /* one graph under the limit, not stages */
  bool chunked = false;
  for (int32_t i = 0; i < report.count; i++)
    if (strcmp(report.entries[i].name, "chunk") == 0) {
      printf("    %s (%lld of %lld bytes): %s\n", label, (long long)limit, (long long)need,
             report.entries[i].detail);
      chunked |= strstr(report.entries[i].detail, cut) != NULL;
    }
  ASSERT_TRUE(chunked);
  int64_t estimate = kernel_estimated_peak(c);
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

bool kernel_have_ocl0(void) {
  loom_context *ctx = NULL;
  const loom__exec_device *dev = NULL;
  bool ok =
      loom_context_create(NULL, &ctx) == LOOM_OK && loom__context_exec_device(ctx, "ocl0", &dev) == LOOM_OK;
  loom_context_destroy(ctx);
  if (!ok) loom_test_skip("no ocl0 (OpenCL) device");
  return ok;
}
