/* The halo cut (src/ir/chunk_halo.c, docs/limits.md "Halos"): time-stepped stencils whose
 * steps are unrolled (tests/chunk/data/halo_*.lir, written by examples/limits/gen.py at sizes
 * where a piece's halo leaves room) are planned for cpu0 under a fraction of their naive need,
 * run under it, and checked as kernel_check.h says: the results equal the whole graph's within
 * f32 tolerance, the measured peak equals the estimate, and both stay under the limit. The
 * limits benchmark's own small stencils (examples/limits/NAME.small.lir) are too small for it:
 * 100 steps of jacobi-1d on 1000 elements need a window of 200 more than a piece, past an
 * eighth of their need (docs/limits.md). */
#include <string.h>

#include "harness.h"
#include "kernel_check.h"

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
 * top of ey at each step. */
TEST(chunk_halo_fdtd2d_at_a_half) {
  check_halo("halo_fdtd2d", 2);
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
  check_uneven("halo_fdtd2d", 10, 18);
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
