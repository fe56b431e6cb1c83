/* A graph with no parameters (issue 16, finding 1): its params array is empty, and every
 * step from parsing to running must handle that without passing a NULL array on (memcpy from
 * NULL with zero bytes is undefined behaviour, which UBSan reports). */
#include <stdlib.h>

#include "rw_util.h"

static const char *const no_params = "graph g() {\n  c = fill value=1 : f32[2]\n  return c\n}\n";

static void check_ones(const loom_tensor *t) {
  ASSERT_EQ(t->type.dtype, LOOM_F32);
  ASSERT_EQ(t->type.rank, 1);
  ASSERT_EQ(t->type.dims[0], 2);
  for (int64_t i = 0; i < 2; i++) ASSERT_NEAR(rw_get(t, i), 1.0, 0);
}

TEST(no_params_clone_print_and_estimate) {
  loom_graph *g = rw_parse(no_params), *c = NULL;
  ASSERT_TRUE(g);
  ASSERT_EQ(loom_graph_param_count(g), 0);
  ASSERT_OK(loom_graph_clone(g, &c));
  ASSERT_EQ(loom_graph_param_count(c), 0);
  char *text = NULL;
  ASSERT_OK(loom_graph_to_string(c, &text));
  loom_graph *back = rw_parse(text);
  ASSERT_TRUE(back);
  ASSERT_EQ(loom_graph_op_count(back), 1);
  loom_estimate e;
  ASSERT_OK(loom_graph_estimate(back, NULL, &e));
  ASSERT_EQ(e.n_steps, 1);
  ASSERT_EQ(e.peak_bytes, 0); /* fill is a view: it holds no storage */
  loom_estimate_deinit(&e);
  free(text);
  loom_graph_destroy(back);
  loom_graph_destroy(c);
  loom_graph_destroy(g);
}

/* Every rewrite, with and without a limit to chunk to, then a plan for two runners. */
TEST(no_params_optimize_plan_and_run) {
  loom_graph *g = rw_parse(no_params);
  ASSERT_TRUE(g);
  for (int64_t limit = 0; limit <= 1024; limit += 1024) {
    loom_optimize_options o;
    loom_optimize_options_init(&o);
    o.limit = limit;
    loom_graph *opt = NULL;
    loom_rewrite_report report = {0};
    ASSERT_OK(loom_graph_optimize(g, &o, &opt, &report));
    loom_rewrite_report_deinit(&report);
    loom_runner runners[2] = {{"cpu0", 1024}, {"cpu0", 4096}};
    loom_graph *prepared = NULL;
    ASSERT_OK(loom_graph_optimize_for_runners(opt, runners, 2, NULL, &prepared, NULL, NULL, 0));
    loom_plan *plan = NULL;
    ASSERT_OK(loom_plan_split_by_memory(prepared, runners, 2, &plan));
    ASSERT_TRUE(loom_plan_stage_count(plan) >= 1);
    loom_context *ctx = NULL;
    ASSERT_OK(loom_context_create(NULL, &ctx));
    loom_tensor out;
    ASSERT_OK(loom_plan_run(ctx, plan, NULL, 0, &out, 1, NULL));
    check_ones(&out);
    loom_tensor_deinit(&out);
    ASSERT_OK(loom_graph_run(ctx, prepared, NULL, 0, &out, 1, NULL));
    check_ones(&out);
    loom_tensor_deinit(&out);
    loom_context_destroy(ctx);
    loom_plan_destroy(plan);
    loom_graph_destroy(prepared);
    loom_graph_destroy(opt);
  }
  loom_graph_destroy(g);
}
