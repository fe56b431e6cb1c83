/* The halo cut (src/ir/chunk_halo.c, docs/limits.md "Halos"): time-stepped stencils whose
 * steps are unrolled (tests/chunk/data/halo_*.lir, written by examples/limits/gen.py at sizes
 * where a piece's halo leaves room) are planned for cpu0 under a fraction of their naive need,
 * run under it, and checked as kernel_check.h says: the results equal the whole graph's within
 * f32 tolerance, the measured peak equals the estimate, and both stay under the limit. The
 * limits benchmark's own small stencils (examples/limits/NAME.small.lir) are too small for it:
 * 100 steps of jacobi-1d on 1000 elements need a window of 200 more than a piece, past an
 * eighth of their need (docs/limits.md). */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "kernel_check.h"
#include "loom/loom.h"

static void check_halo(const char *name, int64_t fraction) {
  loom_graph *g = kernel_load(name);
  char label[160];
  snprintf(label, sizeof label, "%s at 1/%lld", name, (long long)fraction);
  int64_t need = g ? kernel_estimated_peak(g) : -1;
  kernel_check_at(g, label, need, need / fraction, NULL, "halo cut");
}

/* 10 steps of the 3-point average on 4000 elements: 12 pieces of 334, the last 326. */
TEST(chunk_halo_jacobi1d_at_an_eighth) {
  check_halo("halo_jacobi1d", 8);
}

/* The 5-point average on 200 x 200: the border kept by concats along both axes. */
TEST(chunk_halo_jacobi2d_at_an_eighth) {
  check_halo("halo_jacobi2d", 8);
}

/* As loom-plan and loom-run plan it (fused bodies allowed): the pieces are sized on the body
 * fused step by step, which holds far less than its ops one by one, so they are longer than
 * the 1-row pieces above, and the fused run still equals the whole run with the measured peak
 * at its estimate. */
TEST(chunk_halo_jacobi2d_sized_on_the_fused_body) {
  loom_graph *g = kernel_load("halo_jacobi2d");
  int64_t need = g ? kernel_estimated_peak(g) : -1;
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.fused_runs = loom_fused_body_runs_everywhere;
  kernel_check_at(g, "halo_jacobi2d at 1/8, fused", need, need / 8, &o, "sized on its body fused");
}

/* A 3-D grid: faces kept by concats along each of the three axes. */
TEST(chunk_halo_heat3d_at_a_third) {
  check_halo("halo_heat3d", 3);
}

/* Three grids stepped together, three results, and a source row (a fill) concatenated on
 * top of ey at each step: ey and ex are results that hz's update reads a row wider, copied out
 * of their windows so the loop writes them piece by piece (held whole, they kept this at 1/2). */
TEST(chunk_halo_fdtd2d_at_an_eighth) {
  check_halo("halo_fdtd2d", 8);
}

/* Plans `name` at num/den of its need, where the pieces do not divide the axis: the loop's last
 * piece is shorter, its body retyped with shorter windows (loom__loop_body_for), and it still
 * equals the whole run. */
static void check_uneven(const char *name, int64_t num, int64_t den) {
  loom_graph *g = kernel_load(name);
  ASSERT_TRUE(g);
  int64_t need = kernel_estimated_peak(g), limit = need * num / den;
  loom_runner runner = {.device = "cpu0", .limit = limit};
  loom_graph *c = NULL;
  char note[512], label[160];
  ASSERT_OK(loom_graph_optimize_for_runners(g, &runner, 1, NULL, &c, NULL, note, sizeof note));
  const loom__loop *l = NULL;
  for (int32_t o = 0; o < c->n_ops; o++)
    if (c->ops[o].loop) l = c->ops[o].loop;
  ASSERT_TRUE(l);
  printf("    %lld elements in pieces of %lld\n", (long long)l->n, (long long)l->piece);
  ASSERT_TRUE(l->n % l->piece != 0);
  ASSERT_TRUE(l->n / l->piece >= 2);
  loom_graph_destroy(c);
  snprintf(label, sizeof label, "%s at %lld/%lld", name, (long long)num, (long long)den);
  kernel_check_at(g, label, need, limit, NULL, "halo cut");
}

/* 6 pieces of 667, the last 665. */
TEST(chunk_halo_last_piece_shorter) {
  check_uneven("halo_jacobi1d", 1, 5);
}

/* 6 pieces of 34, the last 30: the source row (a fill, one row that broadcasts) retypes too. */
TEST(chunk_halo_last_piece_shorter_fdtd2d) {
  check_uneven("halo_fdtd2d", 2, 5);
}

/* A graph that is not a stencil is left to the other cuts: a reduction is not in the chain. */
TEST(chunk_halo_leaves_other_graphs) {
  static const char text[] =
      "graph r(a: f32[4096]) {\n"
      "  s = slice a start=[1] stop=[4096]\n"
      "  t = reduce_sum s axes=[0]\n"
      "  return t\n"
      "}\n";
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_parse(text, sizeof text - 1, "r.lir", &g));
  loom_runner runner = {.device = "cpu0", .limit = 2048};
  loom_graph *c = NULL;
  loom_rewrite_report report = {0};
  char note[512];
  ASSERT_OK(loom_graph_optimize_for_runners(g, &runner, 1, NULL, &c, &report, note, sizeof note));
  for (int32_t i = 0; i < report.count; i++)
    ASSERT_TRUE(strstr(report.entries[i].detail, "halo cut") == NULL);
  loom_rewrite_report_deinit(&report);
  loom_graph_destroy(c);
  loom_graph_destroy(g);
}

/* The largest |got - want| over 1e-4 of want's largest magnitude (the steps are the same ops
 * on the same rows, so the pieces agree to rounding). */
static double staged_error(const loom_tensor *want, const loom_tensor *got) {
  int64_t n = 0;
  loom_type_elements(&want->type, &n);
  const float *a = want->data, *b = got->data;
  double big = 0, worst = 0;
  for (int64_t i = 0; i < n; i++) big = fmax(big, fabs(a[i]));
  for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - b[i]) / (1e-4 * big + 1e-30));
  return worst;
}

/* Plans `name` at 1/fraction of the need loom-bench limits divides, as loom-plan does (fused
 * bodies allowed), where no one halo loop fits: the steps in groups, each a loop over the whole
 * grid, the grids between groups passed between stages in host memory. Each stage's measured
 * peak equals its estimate and stays within the limit, and the results equal the whole run's. */
static void check_groups(const char *name, int64_t fraction) {
  loom_graph *g = kernel_load(name), *c = NULL;
  ASSERT_TRUE(g);
  int64_t limit = kernel_whole_need(g) / fraction;
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.fused_runs = loom_fused_body_runs_everywhere;
  loom_runner runner = {.device = "cpu0", .limit = limit};
  loom_rewrite_report report = {0};
  char note[512];
  ASSERT_OK(loom_graph_optimize_for_runners(g, &runner, 1, &o, &c, &report, note, sizeof note));
  bool grouped = false;
  for (int32_t i = 0; i < report.count; i++)
    if (strstr(report.entries[i].detail, "groups of steps")) {
      printf("    %s at 1/%lld (%lld bytes): %s\n", name, (long long)fraction, (long long)limit,
             report.entries[i].detail);
      grouped = true;
    }
  ASSERT_TRUE(grouped);
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split_by_memory(c, &runner, 1, &plan));
  enum { MAX_IO = 4 };
  ASSERT_TRUE(g->n_params <= MAX_IO && g->n_outputs <= MAX_IO);
  loom_tensor in[MAX_IO], out[MAX_IO], want[MAX_IO];
  uint64_t seed = 7;
  for (int32_t p = 0; p < g->n_params; p++) {
    ASSERT_OK(loom_tensor_init(&in[p], &g->values[g->params[p]].type));
    int64_t n = 0;
    loom_type_elements(&in[p].type, &n);
    for (int64_t i = 0; i < n; i++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      ((float *)in[p].data)[i] = (float)((double)(seed >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
    }
  }
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  loom_run_stats stats = {0};
  ASSERT_OK(loom_run(ctx, plan, NULL, in, g->n_params, out, g->n_outputs, &stats));
  ASSERT_OK(loom_graph_run(ctx, g, in, g->n_params, want, g->n_outputs, NULL));
  printf("    %d stages, peaks", (int)stats.n_stages);
  for (int32_t i = 0; i < stats.n_stages; i++) printf(" %lld", (long long)stats.stages[i].peak_bytes);
  printf("\n");
  ASSERT_TRUE(stats.n_stages >= 2);
  for (int32_t i = 0; i < stats.n_stages; i++) {
    ASSERT_EQ(stats.stages[i].peak_bytes, stats.stages[i].estimated_peak_bytes);
    ASSERT_TRUE(stats.stages[i].peak_bytes <= limit);
  }
  for (int32_t k = 0; k < g->n_outputs; k++) {
    ASSERT_TRUE(loom_type_equal(&want[k].type, &out[k].type));
    ASSERT_TRUE(staged_error(&want[k], &out[k]) <= 1);
    loom_tensor_deinit(&want[k]);
    loom_tensor_deinit(&out[k]);
  }
  for (int32_t p = 0; p < g->n_params; p++) loom_tensor_deinit(&in[p]);
  loom_run_stats_deinit(&stats);
  loom_context_destroy(ctx);
  loom_plan_destroy(plan);
  loom_rewrite_report_deinit(&report);
  loom_graph_destroy(c);
  loom_graph_destroy(g);
}

/* heat-3d at 1/8: one grid (256,000 bytes) is more than the limit, so no loop over all 5 steps
 * fits; groups of steps do, each its own stage. */
TEST(chunk_halo_heat3d_at_an_eighth_in_groups) {
  check_groups("halo_heat3d", 8);
}

/* fdtd-2d at 1/16: three grids cross between groups (ey, ex, hz), so groups end only where all
 * three are whole, found in the steps' order (the schedule rewrite interleaves the steps). */
TEST(chunk_halo_fdtd2d_at_a_sixteenth_in_groups) {
  check_groups("halo_fdtd2d", 16);
}

/* A stencil no halo cut fits is refused with the cut's reason: the benchmark's small jacobi-1d
 * at 1/8 (1000 elements, 100 steps: a window of 200 more than a piece, and its ends, kept from
 * the input at every step, cross every step, so no groups). */
TEST(chunk_halo_refusal_says_why) {
  loom_graph *g = kernel_load("examples/limits/jacobi1d.small.lir"), *c = NULL;
  ASSERT_TRUE(g);
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.fused_runs = loom_fused_body_runs_everywhere;
  loom_runner runner = {.device = "cpu0", .limit = kernel_whole_need(g) / 8};
  char note[512];
  ASSERT_OK(loom_graph_optimize_for_runners(g, &runner, 1, &o, &c, NULL, note, sizeof note));
  loom_plan *plan = NULL;
  ASSERT_STATUS(loom_plan_split_by_memory(c, &runner, 1, &plan), LOOM_ERR_OUT_OF_MEMORY);
  printf("    %s\n", loom_last_error());
  ASSERT_CONTAINS(loom_last_error(), "is a time-stepped stencil whose halo cut fits no piece under");
  ASSERT_CONTAINS(loom_last_error(), "in pieces of 1 row it needs");
  ASSERT_CONTAINS(loom_last_error(), "no place between its steps has only whole grids crossing it");
  loom_graph_destroy(c);
  loom_graph_destroy(g);
}
