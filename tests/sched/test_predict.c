/* Predicted run times (loom/predict.h) on hand-made models: figures worked out here, the same
 * time as the scheduler's own schedule of the plan's problem, the search for the smallest limit
 * within a factor, the defaults from a device's description, and the errors. */
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "loom/predict.h"

/* cpu0 on the host node, elementwise and reduction kernels at `latency` seconds plus 1 ns an
 * element; no other class. */
static loom_sched_platform *cpu_platform(double latency) {
  loom_sched_device d;
  memset(&d, 0, sizeof d);
  snprintf(d.id, sizeof d.id, "cpu0");
  snprintf(d.kind, sizeof d.kind, "cpu");
  d.memory = 1ll << 40;
  loom_sched_class_model m = {.known = true, .latency = latency, .seconds_per_unit = 1e-9};
  d.model.cls[LOOM_OP_CLASS_ELEMENTWISE] = m;
  d.model.cls[LOOM_OP_CLASS_REDUCTION] = m;
  const char *nodes[] = {"host"};
  loom_sched_platform *p = NULL;
  if (loom_sched_platform_create(nodes, 1, &d, 1, NULL, 0, &p)) return NULL;
  return p;
}

static loom_graph *parse(const char *text) {
  loom_graph *g = NULL;
  if (loom_graph_parse(text, strlen(text), "t.lir", &g)) return NULL;
  return g;
}

/* 1000 elements in pieces of 300: three full pieces and one of 100, each one add kernel. */
static const char loop_text[] =
    "graph g(x: f32[1000], y: f32[1000]) {\n"
    "  z = loop n=1000 piece=300 {\n"
    "    in xs = x axis=0\n"
    "    in ys = y axis=0\n"
    "    s = add xs ys\n"
    "    out s concat axis=0\n"
    "  }\n"
    "  w = mul z z\n"
    "  return w\n"
    "}\n";

static loom_plan *one_stage(const loom_graph *g) {
  loom_runner r;
  memset(&r, 0, sizeof r);
  snprintf(r.device, sizeof r.device, "cpu0");
  r.limit = 1ll << 30;
  loom_plan *plan = NULL;
  if (loom_plan_split_by_memory(g, &r, 1, &plan)) return NULL;
  return plan;
}

TEST(predict_prices_each_piece_and_each_run_of_ops) {
  loom_sched_platform *pf = cpu_platform(1e-6);
  loom_graph *g = parse(loop_text);
  ASSERT_TRUE(pf && g);
  loom_plan *plan = one_stage(g);
  ASSERT_TRUE(plan != NULL);
  double t = 0, whole = 0;
  ASSERT_OK(loom_plan_predict(pf, plan, &t));
  /* 3 x (1 us + 300 ns) + (1 us + 100 ns) for the pieces, 1 us + 1000 ns for the mul */
  ASSERT_NEAR(t, 3 * 1.3e-6 + 1.1e-6 + 2e-6, 1e-15);
  ASSERT_OK(loom_graph_predict(pf, "cpu0", g, &whole));
  ASSERT_NEAR(whole, t, 1e-15);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
  loom_sched_platform_destroy(pf);
}

TEST(predict_equals_the_fixed_schedule_of_the_plans_problem) {
  loom_sched_platform *pf = cpu_platform(2e-6);
  loom_graph *g = parse(loop_text);
  ASSERT_TRUE(pf && g);
  loom_plan *plan = one_stage(g);
  ASSERT_TRUE(plan != NULL);
  loom_sched_problem *problem = NULL;
  ASSERT_OK(loom_sched_problem_from_plan(plan, pf, &problem));
  loom_sched_result r;
  memset(&r, 0, sizeof r);
  ASSERT_OK(loom_sched_schedule(problem, pf, LOOM_SCHED_FIXED, &r));
  double t = 0;
  ASSERT_OK(loom_plan_predict(pf, plan, &t));
  ASSERT_NEAR(t, r.makespan, 1e-12 * r.makespan);
  loom_sched_result_deinit(&r);
  loom_sched_problem_destroy(problem);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
  loom_sched_platform_destroy(pf);
}

/* A sum of squares: each piece of a limited plan pays the kernels' latency again, so the time
 * grows as the limit shrinks, and the search finds where it crosses twice the whole time. */
TEST(smallest_limit_is_within_the_factor_and_below_the_need) {
  loom_sched_platform *pf = cpu_platform(2e-5);
  loom_graph *g = parse(
      "graph g(x: f32[262144]) {\n"
      "  e = exp x\n"
      "  s = reduce_sum e axes=[0]\n"
      "  return s\n"
      "}\n");
  ASSERT_TRUE(pf && g);
  loom_limit_search r;
  ASSERT_OK(loom_graph_smallest_limit(pf, "cpu0", g, 2, NULL, &r));
  ASSERT_TRUE(r.whole_bytes >= 262144 * 4);
  ASSERT_TRUE(r.limit < r.whole_bytes);
  ASSERT_TRUE(r.seconds > 0 && r.seconds <= 2 * r.whole_seconds);
  ASSERT_TRUE(r.steps >= 2);
  double below = 0;
  /* 5% less is over the factor, or cannot be planned (the search's floor aside) */
  if (r.limit > 65536 &&
      loom_graph_predict_at(pf, "cpu0", g, (int64_t)((double)r.limit * 0.95), NULL, &below) == LOOM_OK)
    ASSERT_TRUE(below > 2 * r.whole_seconds);
  loom_graph_destroy(g);
  loom_sched_platform_destroy(pf);
}

TEST(default_model_from_the_devices_description) {
  loom_device_info info;
  memset(&info, 0, sizeof info);
  info.id = "cpu0";
  info.kind = LOOM_DEVICE_CPU;
  info.clock_mhz = 2000;
  info.compute_units = 4;
  info.memory_bytes = 1ll << 30;
  loom_sched_model m;
  ASSERT_OK(loom_sched_model_default(&info, &m));
  /* 60% of 2 GHz x 4 units x 32 flops a cycle */
  ASSERT_NEAR(1 / m.cls[LOOM_OP_CLASS_GEMM].seconds_per_unit, 0.6 * 2e9 * 4 * 32, 1);
  for (int c = 0; c < LOOM_OP_CLASS_COUNT; c++) ASSERT_TRUE(m.cls[c].known && m.cls[c].latency > 0);
  loom_sched_platform *pf = NULL;
  ASSERT_OK(loom_sched_platform_default(&info, &pf));
  ASSERT_EQ(loom_sched_platform_device_count(pf), 1);
  ASSERT_EQ(loom_sched_platform_find(pf, "cpu0"), 0);
  loom_sched_platform_destroy(pf);
}

TEST(predict_errors_name_what_is_wrong) {
  loom_sched_platform *pf = cpu_platform(1e-6);
  loom_graph *dot = parse(
      "graph g(a: f32[4,4], b: f32[4,4]) {\n"
      "  c = dot a b\n"
      "  return c\n"
      "}\n");
  ASSERT_TRUE(pf && dot);
  double t = 1;
  ASSERT_EQ(loom_plan_predict(NULL, NULL, &t), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(t == 0);
  /* the model knows no gemm */
  ASSERT_EQ(loom_graph_predict(pf, "cpu0", dot, &t), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(strstr(loom_last_error(), "cpu0") != NULL);
  ASSERT_EQ(loom_graph_predict(pf, "gpu7", dot, &t), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(strstr(loom_last_error(), "gpu7") != NULL);
  loom_limit_search r;
  ASSERT_EQ(loom_graph_smallest_limit(pf, "cpu0", dot, 0.5, NULL, &r), LOOM_ERR_INVALID_ARGUMENT);
  loom_graph_destroy(dot);
  loom_sched_platform_destroy(pf);
}
