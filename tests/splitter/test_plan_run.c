/* Running plans (loom_plan_run) and listing them (loom_plan_print). */
#include <stdlib.h>

#include "loom/testing.h"
#include "split_util.h"

static const char *two_stage_lir =
    "graph two(x: f32[64,64], y: f32[64,64]) {\n"
    "  a = dot x y\n"
    "  b = exp a\n"
    "  c = add b x\n"
    "  d = dot c y\n"
    "  return d, x, c\n"
    "}\n";

static bool cut_at_2(const loom_graph *g, int32_t op, void *acc) {
  return op == 2;
}
static bool always_cut(const loom_graph *g, int32_t op, void *acc) {
  return true;
}

TEST(plan_run_matches_the_whole_graph) {
  loom_graph *g = su_parse(two_stage_lir);
  ASSERT_TRUE(g != NULL);
  loom_runner r[2] = {{"cpu0", 100 << 10}, {"cpu0", 90 << 10}};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split(g, cut_at_2, NULL, r, 2, &plan));
  ASSERT_EQ(loom_plan_stage_count(plan), 2);
  ASSERT_PLAN_OK(plan, true);
  loom_tensor *in = NULL, *whole = NULL, *split = NULL;
  ASSERT_OK(su_inputs(g, 2, &in));
  ASSERT_OK(su_run_graph(g, in, &whole));
  loom_plan_stats stats = {0};
  ASSERT_OK(su_run_plan(plan, in, &split, &stats));
  for (int32_t i = 0; i < 3; i++) ASSERT_EQ(su_worst(&whole[i], &split[i], 0, 0), 0);
  /* x is returned as is: a copy the caller owns, not the caller's input. */
  ASSERT_TRUE(split[1].data != in[0].data);
  ASSERT_EQ(stats.n_stages, 2);
  for (int32_t s = 0; s < 2; s++) {
    ASSERT_EQ(stats.stages[s].peak_bytes, stats.stages[s].estimated_peak_bytes);
    ASSERT_TRUE(stats.stages[s].peak_bytes <= r[s].limit);
    ASSERT_TRUE(stats.stages[s].seconds >= 0);
  }
  loom_plan_stats_deinit(&stats);
  loom_plan_stats_deinit(NULL);
  su_tensors_free(in, 2);
  su_tensors_free(whole, 3);
  su_tensors_free(split, 3);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

TEST(plan_run_refuses_devices_it_cannot_run) {
  loom_graph *g = su_parse(two_stage_lir);
  ASSERT_TRUE(g != NULL);
  /* No context has an ocl99: refused before anything runs (stages on OpenCL devices run:
   * tests/opencl). */
  loom_runner r[2] = {{"cpu0", 1 << 20}, {"ocl99", 1 << 20}};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split(g, cut_at_2, NULL, r, 2, &plan));
  loom_tensor *in = NULL, *out = NULL;
  ASSERT_OK(su_inputs(g, 2, &in));
  int64_t live = loom_testing_live_allocations();
  ASSERT_STATUS(su_run_plan(plan, in, &out, NULL), LOOM_ERR_NOT_FOUND);
  ASSERT_CONTAINS(loom_last_error(),
                  "stage 1 is placed on ocl99: device ocl99 is not in this context (it has: cpu0");
  ASSERT_TRUE(out[0].data == NULL);
  free(out);
  ASSERT_EQ(loom_testing_live_allocations(), live);
  su_tensors_free(in, 2);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

TEST(plan_run_stage_over_its_limit) {
  loom_graph *g = su_parse(two_stage_lir);
  ASSERT_TRUE(g != NULL);
  /* loom_plan_split does not fit stages to limits; the run then stops at the meter. */
  loom_runner r = {"cpu0", 40 << 10};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split(g, cut_at_2, NULL, &r, 1, &plan));
  loom_tensor *in = NULL, *out = NULL;
  ASSERT_OK(su_inputs(g, 2, &in));
  loom_plan_stats stats = {0};
  ASSERT_STATUS(su_run_plan(plan, in, &out, &stats), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_CONTAINS(loom_last_error(), "stage 0 (cpu0, limit 40960 bytes): ");
  for (int32_t i = 0; i < 3; i++) ASSERT_TRUE(out[i].data == NULL);
  ASSERT_TRUE(stats.stages[0].peak_bytes <= r.limit);
  loom_plan_stats_deinit(&stats);
  free(out);
  su_tensors_free(in, 2);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

TEST(plan_run_bad_arguments) {
  loom_graph *g = su_parse(two_stage_lir);
  ASSERT_TRUE(g != NULL);
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split(g, cut_at_2, NULL, NULL, 0, &plan));
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  loom_tensor *in = NULL, out[3];
  ASSERT_OK(su_inputs(g, 2, &in));
  ASSERT_STATUS(loom_plan_run(NULL, plan, in, 2, out, 3, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_plan_run(ctx, plan, in, 1, out, 3, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_plan_run(ctx, plan, in, 2, out, 2, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "returns 3 values, the caller has room for 2");
  loom_tensor swapped[2] = {in[0], in[1]};
  swapped[1].type.dims[0] = 32;
  ASSERT_STATUS(loom_plan_run(ctx, plan, swapped, 2, out, 3, NULL), LOOM_ERR_INVALID_ARGUMENT);
  su_tensors_free(in, 2);
  loom_context_destroy(ctx);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* Every allocation failure in a run is reported and frees what it took. */
TEST(plan_run_allocation_failures) {
  loom_graph *g = su_parse(two_stage_lir);
  ASSERT_TRUE(g != NULL);
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split(g, cut_at_2, NULL, NULL, 0, &plan));
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  loom_tensor *in = NULL, out[3];
  ASSERT_OK(su_inputs(g, 2, &in));
  loom_test_sweep sw;
  SWEEP_ALLOCATIONS(&sw, 0, 100000) {
    loom_plan_stats stats = {0};
    loom_status s = SWEEP_RUN(&sw, loom_plan_run(ctx, plan, in, 2, out, 3, &stats));
    loom_plan_stats_deinit(&stats);
    if (s)
      for (int32_t i = 0; i < 3; i++) ASSERT_TRUE(out[i].data == NULL);
    for (int32_t i = 0; i < 3; i++) loom_tensor_deinit(&out[i]);
  }
  su_tensors_free(in, 2);
  loom_context_destroy(ctx);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

TEST(plan_print_lists_the_stages) {
  loom_graph *g = su_parse(two_stage_lir);
  ASSERT_TRUE(g != NULL);
  loom_runner r[2] = {{"cpu0", 1 << 20}, {"cpu0", 512 << 10}};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split(g, cut_at_2, NULL, r, 2, &plan));
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ASSERT_TRUE(f != NULL);
  ASSERT_OK(loom_plan_print(plan, f));
  fclose(f);
  ASSERT_CONTAINS(text, "plan for graph 'two': 2 stages on 2 runners\n");
  ASSERT_CONTAINS(text, "stage 0: runner 0 (cpu0, limit 1.00 MiB), estimated peak ");
  ASSERT_CONTAINS(text, ", 2 ops (0..1)\n  inputs:  x, y\n  outputs: b\n");
  ASSERT_CONTAINS(text, "stage 1: runner 1 (cpu0, limit 512.00 KiB), estimated peak ");
  ASSERT_CONTAINS(text, ", 2 ops (2..3)\n  inputs:  b, x, y\n  outputs: c, d\n");
  free(text);
  ASSERT_STATUS(loom_plan_print(NULL, stdout), LOOM_ERR_INVALID_ARGUMENT);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* A graph with no ops has no stages; a returned view of an input is made by its stage. */
TEST(plan_run_inputs_returned_and_views) {
  loom_graph *g = su_parse("graph p(x: f32[3,4]) {\n  return x, x\n}\n");
  ASSERT_TRUE(g != NULL);
  loom_runner r = {"cpu0", 1024};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split_by_memory(g, &r, 1, &plan));
  ASSERT_EQ(loom_plan_stage_count(plan), 0);
  loom_tensor *in = NULL, *out = NULL;
  ASSERT_OK(su_inputs(g, 4, &in));
  ASSERT_OK(su_run_plan(plan, in, &out, NULL));
  ASSERT_EQ(su_worst(&in[0], &out[0], 0, 0), 0);
  ASSERT_EQ(su_worst(&in[0], &out[1], 0, 0), 0);
  ASSERT_TRUE(out[0].data != out[1].data && out[0].data != in[0].data);
  su_tensors_free(out, 2);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);

  g = su_parse("graph t(x: f32[3,4]) {\n  t = transpose x perm=[1,0]\n  e = exp x\n  return t, e\n}\n");
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(loom_plan_split(g, always_cut, NULL, &r, 1, &plan));
  ASSERT_EQ(loom_plan_stage_count(plan), 2);
  ASSERT_PLAN_OK(plan, true);
  loom_tensor *whole = NULL;
  ASSERT_OK(su_run_graph(g, in, &whole));
  ASSERT_OK(su_run_plan(plan, in, &out, NULL));
  for (int32_t i = 0; i < 2; i++) ASSERT_EQ(su_worst(&whole[i], &out[i], 0, 0), 0);
  su_tensors_free(whole, 2);
  su_tensors_free(out, 2);
  su_tensors_free(in, 1);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}
