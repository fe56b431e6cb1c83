/* Predicted run times (loom/predict.h) on hand-made models: figures worked out here, the same
 * time as the scheduler's own schedule of the plan's problem, the search for the smallest limit
 * within a factor, the defaults from a device's description, and the errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "loom/predict.h"

/* Elementwise and reduction kernels at `latency` seconds plus 1 ns an element; no other
 * class. */
static loom_sched_model cpu_model(double latency) {
  loom_sched_model m;
  memset(&m, 0, sizeof m);
  loom_sched_class_model c = {.known = true, .latency = latency, .seconds_per_unit = 1e-9};
  m.cls[LOOM_OP_CLASS_ELEMENTWISE] = c;
  m.cls[LOOM_OP_CLASS_REDUCTION] = c;
  return m;
}

/* Device cpu0 of `kind` on the host node, of model m. */
static loom_sched_platform *platform_of_kind(const loom_sched_model *m, const char *kind) {
  loom_sched_device d;
  memset(&d, 0, sizeof d);
  snprintf(d.id, sizeof d.id, "cpu0");
  snprintf(d.kind, sizeof d.kind, "%s", kind);
  d.memory = 1ll << 40;
  d.model = *m;
  const char *nodes[] = {"host"};
  loom_sched_platform *p = NULL;
  if (loom_sched_platform_create(nodes, 1, &d, 1, NULL, 0, &p)) return NULL;
  return p;
}

/* cpu0, a CPU on the host node, of model m. */
static loom_sched_platform *platform_of(const loom_sched_model *m) {
  return platform_of_kind(m, "cpu");
}

static loom_sched_platform *cpu_platform(double latency) {
  loom_sched_model m = cpu_model(latency);
  return platform_of(&m);
}

static loom_graph *parse(const char *text) {
  loom_graph *g = NULL;
  if (loom_graph_parse(text, strlen(text), "t.lir", &g)) return NULL;
  return g;
}

/* The predicted seconds of the graph `text` on cpu0 of a platform of model m, into *t. */
static loom_status predict_text(const loom_sched_model *m, const char *text, double *t) {
  loom_sched_platform *pf = platform_of(m);
  loom_graph *g = parse(text);
  loom_status s = pf && g ? loom_graph_predict(pf, "cpu0", g, t) : LOOM_ERR_INVALID_ARGUMENT;
  loom_graph_destroy(g);
  loom_sched_platform_destroy(pf);
  return s;
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
 * grows as the limit shrinks, and the search finds where it crosses twice the whole time less
 * the search's margin (2 / 1.6 = 1.25 times). */
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
  double budget = 2 / LOOM_LIMIT_SEARCH_MARGIN * r.whole_seconds;
  ASSERT_TRUE(r.seconds > 0 && r.seconds <= budget);
  ASSERT_TRUE(r.steps >= 2);
  double below = 0;
  /* 5% less is over the budget, or cannot be planned (the search's floor aside) */
  if (r.limit > 65536 &&
      loom_graph_predict_at(pf, "cpu0", g, (int64_t)((double)r.limit * 0.95), NULL, &below) == LOOM_OK)
    ASSERT_TRUE(below > budget);
  /* a factor within the margin asks for the whole time (here the plan at the whole need, in
   * pieces, is over it), and the error says so */
  loom_limit_search one;
  ASSERT_EQ(loom_graph_smallest_limit(pf, "cpu0", g, 1.1, NULL, &one), LOOM_ERR_UNSUPPORTED);
  ASSERT_CONTAINS(loom_last_error(), "within 1.1x of its whole time (1x with the search's margin");
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
  /* bounds: 2 GHz x 4 units x at least an AVX2 FMA's 32 flops a cycle, 32 bytes a cycle a
   * core (an add moves 12 bytes an element) */
  ASSERT_TRUE(1 / m.cls[LOOM_OP_CLASS_GEMM].seconds_per_unit >= 2e9 * 4 * 32 * 0.999);
  ASSERT_NEAR(1 / m.cls[LOOM_OP_CLASS_ELEMENTWISE].seconds_per_unit, 2e9 * 4 * 32 / 12, 1);
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

/* Below a table's first point a kernel costs its call (the latency) plus its size on the line
 * from there to the first point, not the first point's time: a limit's small pieces would
 * otherwise each cost as much as the smallest size calibrated. */
TEST(model_table_below_its_first_point_is_the_call_plus_a_line) {
  loom_sched_model m;
  memset(&m, 0, sizeof m);
  double sizes[] = {1000, 2000}, secs[] = {1e-3, 1.5e-3};
  ASSERT_OK(loom_sched_model_fit(&m, LOOM_OP_CLASS_GEMM, sizes, secs, 2));
  m.cls[LOOM_OP_CLASS_GEMM].latency = 1e-4;
  ASSERT_NEAR(loom_sched_model_time(&m, LOOM_OP_CLASS_GEMM, 500), 1e-4 + 0.5 * 9e-4, 1e-15);
  ASSERT_NEAR(loom_sched_model_time(&m, LOOM_OP_CLASS_GEMM, 1), 1e-4 + 9e-7, 1e-15);
  ASSERT_NEAR(loom_sched_model_time(&m, LOOM_OP_CLASS_GEMM, 1000), 1e-3, 1e-15);
  ASSERT_NEAR(loom_sched_model_time(&m, LOOM_OP_CLASS_GEMM, 1500), 1.25e-3, 1e-15);
  /* beyond the last point: the call plus the size at the last point's rate over it */
  ASSERT_NEAR(loom_sched_model_time(&m, LOOM_OP_CLASS_GEMM, 4000), 1e-4 + 2 * 1.4e-3, 1e-15);
  /* a call dearer than the first point (a noisy fit's latency) is capped by it: flat */
  m.cls[LOOM_OP_CLASS_GEMM].latency = 5e-3;
  ASSERT_NEAR(loom_sched_model_time(&m, LOOM_OP_CLASS_GEMM, 10), 1e-3, 1e-15);
}

/* A model file keeps the loop's cost of a piece; a bad one is an error naming the field. */
TEST(model_file_keeps_the_cost_of_a_piece) {
  char dir[] = "/tmp/loom-predict-XXXXXX", path[1100];
  ASSERT_TRUE(mkdtemp(dir) != NULL);
  char *old = getenv("LOOM_CACHE_DIR") ? strdup(getenv("LOOM_CACHE_DIR")) : NULL;
  setenv("LOOM_CACHE_DIR", dir, 1);
  loom_sched_model m, back;
  memset(&m, 0, sizeof m);
  double sizes[] = {100}, secs[] = {1e-3};
  ASSERT_OK(loom_sched_model_fit(&m, LOOM_OP_CLASS_COPY, sizes, secs, 1));
  m.piece_seconds = 3.5e-7;
  m.gather_row_seconds = 6e-8;
  m.fused_element_seconds = 2e-10;
  m.fused_small_element_seconds = 4e-10;
  m.fault_page_seconds = 5e-6;
  m.select_ratio = 3.5;
  ASSERT_OK(loom_sched_model_save(&m, "dev", "1"));
  ASSERT_OK(loom_sched_model_load("dev", "1", &back));
  ASSERT_NEAR(back.select_ratio, 3.5, 1e-15);
  ASSERT_NEAR(back.fused_small_element_seconds, 4e-10, 1e-22);
  ASSERT_NEAR(back.piece_seconds, 3.5e-7, 1e-20);
  ASSERT_NEAR(back.gather_row_seconds, 6e-8, 1e-20);
  ASSERT_NEAR(back.fused_element_seconds, 2e-10, 1e-22);
  ASSERT_NEAR(back.fault_page_seconds, 5e-6, 1e-20);
  ASSERT_TRUE(!back.thin_gemm.known && !back.stream.known);
  double thin_sizes[] = {2e5, 2e8}, thin_secs[] = {1e-5, 2e-3};
  loom_sched_model fit;
  memset(&fit, 0, sizeof fit);
  ASSERT_OK(loom_sched_model_fit(&fit, LOOM_OP_CLASS_GEMM, thin_sizes, thin_secs, 2));
  m.thin_gemm = fit.cls[LOOM_OP_CLASS_GEMM];
  m.stream = fit.cls[LOOM_OP_CLASS_GEMM];
  m.stream.point_seconds[1] = 3e-3;
  ASSERT_OK(loom_sched_model_save(&m, "dev", "1"));
  ASSERT_OK(loom_sched_model_load("dev", "1", &back));
  ASSERT_TRUE(back.thin_gemm.known && back.thin_gemm.n_points == 2 && back.stream.n_points == 2);
  ASSERT_NEAR(back.thin_gemm.point_seconds[1], 2e-3, 1e-18);
  ASSERT_NEAR(back.stream.point_seconds[1], 3e-3, 1e-18);
  ASSERT_OK(loom_sched_model_path("dev", "1", path, sizeof path));
  FILE *bad_piece = fopen(path, "w");
  ASSERT_TRUE(bad_piece != NULL);
  fputs("{\"models\": {\"copy\": {\"rate\": 1e9}}, \"pieces\": {\"thick\": {\"rate\": 1}}}\n", bad_piece);
  fclose(bad_piece);
  ASSERT_EQ(loom_sched_model_load("dev", "1", &back), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "pieces.thick");
  FILE *f = fopen(path, "w");
  ASSERT_TRUE(f != NULL);
  fputs("{\"models\": {\"copy\": {\"rate\": 1e9}}, \"loop\": {\"piece_seconds\": -1}}\n", f);
  fclose(f);
  ASSERT_EQ(loom_sched_model_load("dev", "1", &back), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "piece_seconds");
  f = fopen(path, "w");
  ASSERT_TRUE(f != NULL);
  fputs("{\"models\": {\"copy\": {\"rate\": 1e9}}, \"ops\": {\"select_ratio\": 0}}\n", f);
  fclose(f);
  ASSERT_EQ(loom_sched_model_load("dev", "1", &back), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "select_ratio");
  f = fopen(path, "w");
  ASSERT_TRUE(f != NULL);
  fputs(
      "{\"models\": {\"copy\": {\"rate\": 1e9}}, \"fused\": {\"element_seconds\": 1e-10, "
      "\"small_element_seconds\": -1}}\n",
      f);
  fclose(f);
  ASSERT_EQ(loom_sched_model_load("dev", "1", &back), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "small_element_seconds");
  unlink(path);
  char models[1100];
  snprintf(models, sizeof models, "%s/models", dir);
  rmdir(models);
  rmdir(dir);
  if (old)
    setenv("LOOM_CACHE_DIR", old, 1);
  else
    unsetenv("LOOM_CACHE_DIR");
  free(old);
}

/* Each piece of a loop costs the runtime's cost of a piece on top of its kernels. */
TEST(predict_adds_the_cost_of_each_piece) {
  loom_sched_model m = cpu_model(1e-6);
  m.piece_seconds = 1e-3;
  loom_sched_platform *pf = cpu_platform(1e-6), *dear = platform_of(&m);
  loom_graph *g = parse(loop_text);
  ASSERT_TRUE(pf && dear && g);
  double cheap = 0, t = 0;
  ASSERT_OK(loom_graph_predict(pf, "cpu0", g, &cheap));
  ASSERT_OK(loom_graph_predict(dear, "cpu0", g, &t));
  ASSERT_NEAR(t - cheap, 4 * 1e-3, 1e-12); /* 4 pieces */
  loom_graph_destroy(g);
  loom_sched_platform_destroy(pf);
  loom_sched_platform_destroy(dear);
}

/* A matrix-vector product takes as long as reading its matrix, however fast its flops are
 * (the model's memory rate: REDUCTION's 1 ns an element is 0.25 ns a byte). */
TEST(predict_prices_a_matrix_vector_product_by_its_bytes) {
  loom_sched_model m = cpu_model(1e-6);
  m.cls[LOOM_OP_CLASS_GEMM] =
      (loom_sched_class_model){.known = true, .latency = 1e-6, .seconds_per_unit = 1e-15};
  const char *text =
      "graph g(a: f32[1024,1024], x: f32[1024]) {\n"
      "  y = dot a x\n"
      "  return y\n"
      "}\n";
  double t = 0;
  ASSERT_OK(predict_text(&m, text, &t));
  ASSERT_NEAR(t, (4194304.0 + 4096 + 4096) * 0.25e-9, 1e-12);
}

/* A piece sliced along an inner axis that an inner loop reads is copied dense (the executor's
 * gather): each of its 64 rows costs the model's row gathered, reads the cache lines around its
 * 100 elements (400 bytes: 8 lines of 64) and writes them, at the model's rates. */
TEST(predict_prices_the_gather_of_a_strided_slice) {
  loom_sched_model m = cpu_model(1e-6);
  m.gather_row_seconds = 5e-8;
  const char *text =
      "graph g(x: f32[64,1000]) {\n"
      "  y = loop n=1000 piece=100 {\n"
      "    in xs = x axis=1\n"
      "    z = loop n=64 piece=64 {\n"
      "      in r = xs axis=0\n"
      "      e = exp r\n"
      "      out e concat axis=0\n"
      "    }\n"
      "    out z concat axis=1\n"
      "  }\n"
      "  return y\n"
      "}\n";
  double t = 0;
  ASSERT_OK(predict_text(&m, text, &t));
  /* y, returned, is streamed out: each piece's result read and written once more */
  double kernel = 1e-6 + 6400 * 1e-9, gather = 64 * (5e-8 + (8 * 64 + 400) * 0.25e-9), out = 256000 * 0.5e-9;
  ASSERT_NEAR(t, 10 * (kernel + gather) + out, 1e-12);
}

/* A strided slice its kernels read where it lies (no reshape, no inner loop) is not copied:
 * each kernel reading it (two here, exp and neg) pays each row's miss and the lines around the
 * row beyond its 400 bytes (8 lines of 64 less 400 bytes), nothing written. */
TEST(predict_prices_a_strided_slice_read_in_place) {
  loom_sched_model m = cpu_model(1e-6);
  m.gather_row_seconds = 5e-8;
  const char *text =
      "graph g(x: f32[64,1000]) {\n"
      "  y, z = loop n=1000 piece=100 {\n"
      "    in xs = x axis=1\n"
      "    e = exp xs\n"
      "    n = neg xs\n"
      "    out e concat axis=1\n"
      "    out n concat axis=1\n"
      "  }\n"
      "  return y, z\n"
      "}\n";
  double t = 0;
  ASSERT_OK(predict_text(&m, text, &t));
  double kernels = 2 * (1e-6 + 6400 * 1e-9), reads = 2 * 64 * (5e-8 + (8 * 64 - 400) * 0.25e-9);
  double out = 2 * 256000 * 0.5e-9; /* y and z streamed out: read and written once more */
  ASSERT_NEAR(t, 10 * (kernels + reads) + out, 1e-12);
}

/* The rows of an operand of more than 32 MiB come from memory: each row an elementwise kernel
 * reads in place costs its 8 whole lines (around its 400 bytes) twice more at the read rate
 * beside the model's row, where those of an operand of 32 MiB or less (8192 x 1000) do not. */
static double strided_exp(const loom_sched_model *m, int64_t cols) {
  char text[512];
  snprintf(text, sizeof text,
           "graph g(x: f32[8192,%lld]) {\n  y = loop n=%lld piece=100 {\n    in xs = x axis=1\n"
           "    e = exp xs\n    out e concat axis=1\n  }\n  return y\n}\n",
           (long long)cols, (long long)cols);
  double t = -1;
  return predict_text(m, text, &t) ? -1 : t;
}

/* The same columns read by a product (x's column block times v's piece, summed): OpenBLAS's
 * gemv walks the rows itself, so 11 pieces from memory cost what 11 cached ones would. */
static double strided_dot(const loom_sched_model *m, int64_t cols) {
  char text[512];
  snprintf(text, sizeof text,
           "graph g(x: f32[8192,%lld], v: f32[%lld]) {\n  y = loop n=%lld piece=100 {\n"
           "    in xs = x axis=1\n    in vs = v axis=0\n    d = dot xs vs\n    out d sum\n  }\n"
           "  return y\n}\n",
           (long long)cols, (long long)cols, (long long)cols);
  loom_sched_model with_gemm = *m;
  with_gemm.cls[LOOM_OP_CLASS_GEMM] = (loom_sched_class_model){.known = true, .seconds_per_unit = 1e-15};
  double t = -1;
  return predict_text(&with_gemm, text, &t) ? -1 : t;
}

TEST(predict_prices_rows_from_memory) {
  loom_sched_model m = cpu_model(1e-6);
  m.gather_row_seconds = 5e-8;
  double cached = strided_exp(&m, 1000), memory = strided_exp(&m, 1100);
  ASSERT_TRUE(cached > 0 && memory > 0);
  /* y streamed out: its bytes read and written once more */
  double kernel = 1e-6 + 819200 * 1e-9, row = 5e-8 + (8 * 64 - 400) * 0.25e-9, out = 8192 * 4 * 0.5e-9;
  ASSERT_NEAR(cached, 10 * (kernel + 8192 * row) + 1000 * out, 1e-12);
  ASSERT_NEAR(memory, 11 * (kernel + 8192 * (row + 2 * 8 * 64 * 0.25e-9)) + 1100 * out, 1e-12);
  double dot_cached = strided_dot(&m, 1000), dot_memory = strided_dot(&m, 1100);
  ASSERT_TRUE(dot_cached > 0 && dot_memory > 0);
  ASSERT_NEAR(dot_memory / 11, dot_cached / 10, 1e-12);
}

/* A select with a broadcast operand (a row mask, as the halo cut's) costs the model's ratio of
 * an add an element: with the ratio 3, 1000 elements are priced as an add of 3000; without
 * the ratio as an add of 1000, less than reading its 8010 bytes of operands (0.25 ns a byte),
 * which it then costs. A select of operands alike costs what an add does, ratio or not. */
TEST(predict_prices_a_select_at_the_models_ratio) {
  loom_sched_model m = cpu_model(1e-6);
  const char *rows =
      "graph g(c: bool[10,1], x: f32[10,100], y: f32[10,100]) {\n"
      "  z = select c x y\n"
      "  return z\n"
      "}\n";
  const char *alike =
      "graph g(c: bool[1000], x: f32[1000], y: f32[1000]) {\n"
      "  z = select c x y\n"
      "  return z\n"
      "}\n";
  double plain = 0, t = 0, same = 0;
  ASSERT_OK(predict_text(&m, rows, &plain));
  ASSERT_NEAR(plain, 8010 * 0.25e-9, 1e-15);
  m.select_ratio = 3;
  ASSERT_OK(predict_text(&m, rows, &t));
  ASSERT_NEAR(t, 1e-6 + 3000 * 1e-9, 1e-15);
  ASSERT_OK(predict_text(&m, alike, &same));
  ASSERT_NEAR(same, 9000 * 0.25e-9, 1e-15);
}

/* A product is priced at the rate of the square GEMM of as many bytes: [1000,1000] x [1000,10]
 * (2e7 flops, 4.08e6 bytes: the square of n = 583) at the table's rate there, not at that of
 * the far smaller square of 2e7 flops. */
TEST(predict_prices_a_product_at_the_rate_of_its_bytes) {
  loom_sched_model m = cpu_model(0);
  m.cls[LOOM_OP_CLASS_REDUCTION].seconds_per_unit = 1e-15; /* memory nearly free: flops rule */
  m.cls[LOOM_OP_CLASS_ELEMENTWISE].seconds_per_unit = 1e-15;
  double sizes[] = {2e6, 2e8, 2e9}, secs[] = {1e-5, 1e-3, 4e-2}; /* 200, 200, 50 GFLOP/s */
  ASSERT_OK(loom_sched_model_fit(&m, LOOM_OP_CLASS_GEMM, sizes, secs, 3));
  m.cls[LOOM_OP_CLASS_GEMM].latency = 0;
  const char *text =
      "graph g(a: f32[1000,1000], b: f32[1000,10]) {\n"
      "  c = dot a b\n"
      "  return c\n"
      "}\n";
  double t = 0, n = sqrt(4.08e6 / 12), square = 2 * n * n * n;
  ASSERT_OK(predict_text(&m, text, &t));
  ASSERT_NEAR(t, loom_sched_model_time(&m, LOOM_OP_CLASS_GEMM, square) * 2e7 / square, 1e-12);
  ASSERT_TRUE(t > 1.5 * loom_sched_model_time(&m, LOOM_OP_CLASS_GEMM, 2e7)); /* slower than by flops */
}

/* A thin product ([16,1024] x [1024,32]: a result of 512 elements, k = 1024) is priced by the
 * model's thin products where they are slower than the square GEMM of as many bytes: the
 * table's time at the flops of as large a result at k = 2048 (2 x 512 x 2048), scaled by
 * 1024 / 2048. A square product past the thin table's largest result keeps the square rule. */
TEST(predict_prices_a_thin_product_by_the_thin_table) {
  loom_sched_model m = cpu_model(0);
  m.cls[LOOM_OP_CLASS_REDUCTION].seconds_per_unit = 1e-15; /* memory nearly free */
  m.cls[LOOM_OP_CLASS_ELEMENTWISE].seconds_per_unit = 1e-15;
  m.cls[LOOM_OP_CLASS_GEMM] = (loom_sched_class_model){.known = true, .seconds_per_unit = 1e-13};
  double sizes[] = {262144, 268435456}, secs[] = {1e-5, 1e-2};
  loom_sched_model thin;
  memset(&thin, 0, sizeof thin);
  ASSERT_OK(loom_sched_model_fit(&thin, LOOM_OP_CLASS_GEMM, sizes, secs, 2));
  m.thin_gemm = thin.cls[LOOM_OP_CLASS_GEMM];
  m.thin_gemm.latency = 0;
  double t = 0, at = 1e-5 + (1e-2 - 1e-5) * (2097152.0 - 262144) / (268435456.0 - 262144);
  ASSERT_OK(
      predict_text(&m, "graph g(a: f32[16,1024], b: f32[1024,32]) {\n  c = dot a b\n  return c\n}\n", &t));
  ASSERT_NEAR(t, at * 1024 / 2048, 1e-12);
  ASSERT_OK(
      predict_text(&m, "graph g(a: f32[512,512], b: f32[512,512]) {\n  c = dot a b\n  return c\n}\n", &t));
  ASSERT_NEAR(t, 2.0 * 512 * 512 * 512 * 1e-13, 1e-12);
}

/* A small read is priced by the model's streamed pieces where they are slower than its bytes
 * at the rate from beyond the cache: [4,1024] x [1024] reads 20,480 bytes, between the
 * table's 16,384 (10 us) and 4 MiB (100 us); its 16 bytes written at 0.25 ns. */
TEST(predict_prices_a_small_read_by_the_stream_table) {
  loom_sched_model m = cpu_model(1e-6);
  m.cls[LOOM_OP_CLASS_GEMM] = (loom_sched_class_model){.known = true, .seconds_per_unit = 1e-15};
  double sizes[] = {16384, 4194304}, secs[] = {1e-5, 1e-4};
  loom_sched_model stream;
  memset(&stream, 0, sizeof stream);
  ASSERT_OK(loom_sched_model_fit(&stream, LOOM_OP_CLASS_COPY, sizes, secs, 2));
  m.stream = stream.cls[LOOM_OP_CLASS_COPY];
  m.stream.latency = 0;
  double t = 0;
  ASSERT_OK(predict_text(&m, "graph g(a: f32[4,1024], x: f32[1024]) {\n  y = dot a x\n  return y\n}\n", &t));
  ASSERT_NEAR(t, 1e-5 + 9e-5 * 4096 / (4194304.0 - 16384) + 16 * 0.25e-9, 1e-12);
}

/* A fused chain of adds makes one pass over its operands and result, and its elementwise ops
 * cost the model's element in a fused body: 1 us + 4 x 1000 x 1 ns + (8000 + 4000) bytes at
 * 0.25 ns. */
TEST(predict_prices_a_fused_body_as_one_pass) {
  loom_sched_model m = cpu_model(1e-6);
  m.fused_element_seconds = 1e-9;
  const char *text =
      "graph g(a: f32[1000], b: f32[1000]) {\n"
      "  w = fused {\n"
      "    in x = a\n"
      "    in y = b\n"
      "    s1 = add x y\n"
      "    s2 = add s1 y\n"
      "    s3 = add s2 y\n"
      "    s4 = add s3 y\n"
      "    out s4\n"
      "  }\n"
      "  return w\n"
      "}\n";
  double t = 0;
  ASSERT_OK(predict_text(&m, text, &t));
  /* its blocks of 1000 (predict_prices_the_blocks_of_a_fused_body) */
  double blocks = 4000 * 1e-9 * 100 * (1.0 / 1000 - 1.0 / 1024);
  ASSERT_NEAR(t, 1e-6 + 4000 * 1e-9 + 12000 * 0.25e-9 + blocks, 1e-15);
}

/* The predicted time of a fused body of 4 adds of b to a (of shapes `sa` and `sb`) on cpu0 of
 * `kind` and model m; -1 where it fails. */
static double fused_adds(const loom_sched_model *m, const char *kind, const char *sa, const char *sb) {
  char text[512];
  snprintf(text, sizeof text,
           "graph g(a: f32%s, b: f32%s) {\n  w = fused {\n    in x = a\n    in y = b\n"
           "    s1 = add x y\n    s2 = add s1 y\n    s3 = add s2 y\n    s4 = add s3 y\n    out s4\n"
           "  }\n  return w\n}\n",
           sa, sb);
  loom_sched_platform *pf = platform_of_kind(m, kind);
  loom_graph *g = parse(text);
  double t = -1;
  if (!pf || !g || loom_graph_predict(pf, "cpu0", g, &t)) t = -1;
  loom_graph_destroy(g);
  loom_sched_platform_destroy(pf);
  return t;
}

/* A CPU runs a fused body in blocks of up to 1024 elements along its rows, a block of an op
 * costing 100 elements more. Its 16,000 element-ops over f32[400,10] plus a column [400,1]
 * run in rows of 10: 100 x (1/10 - 1/1024) of an element more each. Plus an operand alike, the
 * rows merge into one of 4000 (blocks of 1024 and one of 928): 100 x (4/4000 - 1/1024) more;
 * f32[2,2048] makes 4 full blocks: nothing more. A device that is not a CPU has no blocks. */
TEST(predict_prices_the_blocks_of_a_fused_body) {
  loom_sched_model m = cpu_model(1e-6);
  m.fused_element_seconds = 1e-9;
  double narrow = fused_adds(&m, "cpu", "[400,10]", "[400,1]");
  double gpu = fused_adds(&m, "cuda", "[400,10]", "[400,1]");
  double alike = fused_adds(&m, "cpu", "[400,10]", "[400,10]");
  double whole = fused_adds(&m, "cpu", "[2,2048]", "[2,2048]");
  ASSERT_TRUE(narrow > 0 && gpu > 0 && alike > 0 && whole > 0);
  double column = 1e-6 + 16000 * 1e-9 + (16000 + 1600 + 16000) * 0.25e-9;
  ASSERT_NEAR(narrow, column + 16000 * 1e-9 * 100 * (1.0 / 10 - 1.0 / 1024), 1e-15);
  ASSERT_NEAR(gpu, column, 1e-15);
  double pass = 1e-6 + 16000 * 1e-9 + 12 * 4000 * 0.25e-9;
  ASSERT_NEAR(alike, pass + 16000 * 1e-9 * 100 * (4.0 / 4000 - 1.0 / 1024), 1e-15);
  ASSERT_NEAR(whole, 1e-6 + 4 * 4096 * 1e-9 + 12 * 4096 * 0.25e-9, 1e-15);
}

/* A small fused body runs at about one thread's rate: with the small element at 3 ns, the
 * 4,000 element-ops of the fused adds over f32[1000] cost 2 ns more each than at the threads'
 * 1 ns; a body of 400,000 (f32[100000]) pays that only for its first 300,000. */
TEST(predict_prices_a_small_fused_body_at_one_threads_rate) {
  loom_sched_model m = cpu_model(1e-6);
  m.fused_element_seconds = 1e-9;
  double plain = fused_adds(&m, "cuda", "[1000]", "[1000]"),
         big = fused_adds(&m, "cuda", "[100000]", "[100000]");
  m.fused_small_element_seconds = 3e-9;
  double slow = fused_adds(&m, "cuda", "[1000]", "[1000]"),
         bigger = fused_adds(&m, "cuda", "[100000]", "[100000]");
  ASSERT_TRUE(plain > 0 && big > 0 && slow > 0 && bigger > 0);
  ASSERT_NEAR(slow - plain, 4000 * 2e-9, 1e-15);
  ASSERT_NEAR(bigger - big, 300000 * 2e-9, 1e-12);
}

/* A CPU's fused body over strided slices of a grid (its rows not dense across the grid) runs
 * row by row, not merged into blocks of 1024: the two shifted views of f32[12,12,12] over
 * [10,10,10] in rows of 10, 100 x (1/10 - 1/1024) of an element more each; the same body over
 * dense operands of [10,10,10] merges into blocks (1000 elements: 100 x (1/1000 - 1/1024)). */
TEST(predict_prices_a_fused_body_over_strided_slices_by_its_rows) {
  loom_sched_model m = cpu_model(1e-6);
  m.fused_element_seconds = 1e-9;
  const char *strided =
      "graph g(x: f32[12,12,12]) {\n"
      "  a = slice x start=[1,1,1] stop=[11,11,11]\n"
      "  b = slice x start=[0,1,1] stop=[10,11,11]\n"
      "  w = fused {\n    in p = a\n    in q = b\n    s = add p q\n    out s\n  }\n"
      "  return w\n"
      "}\n";
  const char *dense =
      "graph g(a: f32[10,10,10], b: f32[10,10,10]) {\n"
      "  w = fused {\n    in p = a\n    in q = b\n    s = add p q\n    out s\n  }\n"
      "  return w\n"
      "}\n";
  double ts = 0, td = 0;
  ASSERT_OK(predict_text(&m, strided, &ts));
  ASSERT_OK(predict_text(&m, dense, &td));
  double rows = 1000 * 1e-9 * 100 * (1.0 / 10 - 1.0 / 1024),
         blocks = 1000 * 1e-9 * 100 * (1.0 / 1000 - 1.0 / 1024);
  /* the strided operands read their grid once (6912 bytes) where the dense read 8000 */
  ASSERT_NEAR(ts, 1e-6 + 1000 * 1e-9 + (6912 + 4000) * 0.25e-9 + rows, 1e-15);
  ASSERT_NEAR(td, 1e-6 + 1000 * 1e-9 + (8000 + 4000) * 0.25e-9 + blocks, 1e-15);
}

/* A CPU copies a concat run by run, each at the model's cost of a row: along the innermost
 * axis of [100,10] + [100,10], 200 runs; along the outermost, 2. */
TEST(predict_prices_a_concat_by_its_runs) {
  loom_sched_model m = cpu_model(1e-6);
  m.cls[LOOM_OP_CLASS_COPY] =
      (loom_sched_class_model){.known = true, .latency = 1e-6, .seconds_per_unit = 1e-9};
  m.gather_row_seconds = 5e-8;
  double inner = 0, outer = 0;
  ASSERT_OK(predict_text(
      &m, "graph g(a: f32[100,10], b: f32[100,10]) {\n  c = concat a b axis=1\n  return c\n}\n", &inner));
  ASSERT_OK(predict_text(
      &m, "graph g(a: f32[100,10], b: f32[100,10]) {\n  c = concat a b axis=0\n  return c\n}\n", &outer));
  ASSERT_TRUE(inner > 0 && outer > 0);
  ASSERT_NEAR(inner - outer, (200 - 2) * 5e-8, 1e-15);
}

/* Three shifted slices of one array (a stencil's step) read its 4008 bytes once, not 12,000:
 * the fused pass reads 4008 and writes 4000 bytes beside its 2000 element-ops. */
TEST(predict_prices_slices_of_one_array_as_one_read) {
  loom_sched_model m = cpu_model(1e-6);
  m.fused_element_seconds = 1e-9;
  const char *text =
      "graph g(x: f32[1002]) {\n"
      "  a = slice x start=[0] stop=[1000]\n"
      "  b = slice x start=[1] stop=[1001]\n"
      "  c = slice x start=[2] stop=[1002]\n"
      "  w = fused {\n"
      "    in p = a\n"
      "    in q = b\n"
      "    in r = c\n"
      "    s1 = add p q\n"
      "    s2 = add s1 r\n"
      "    out s2\n"
      "  }\n"
      "  return w\n"
      "}\n";
  double t = 0;
  ASSERT_OK(predict_text(&m, text, &t));
  double blocks = 2000 * 1e-9 * 100 * (1.0 / 1000 - 1.0 / 1024);
  ASSERT_NEAR(t, 1e-6 + 2000 * 1e-9 + (4008 + 4000) * 0.25e-9 + blocks, 1e-15);
}

/* A result of 32 MiB or more is faulted in page by page: 16,384 pages of a 64 MiB sum. */
TEST(predict_prices_the_pages_of_a_large_new_result) {
  loom_sched_model m = cpu_model(1e-6);
  loom_sched_platform *pf = platform_of(&m);
  m.fault_page_seconds = 1e-6;
  loom_sched_platform *faults = platform_of(&m);
  loom_graph *g = parse(
      "graph g(a: f32[16777216], b: f32[16777216]) {\n"
      "  c = add a b\n"
      "  return c\n"
      "}\n");
  ASSERT_TRUE(pf && faults && g);
  double t = 0, tf = 0;
  ASSERT_OK(loom_graph_predict(pf, "cpu0", g, &t));
  ASSERT_OK(loom_graph_predict(faults, "cpu0", g, &tf));
  ASSERT_NEAR(tf - t, 16384 * 1e-6, 1e-12);
  loom_graph_destroy(g);
  loom_sched_platform_destroy(pf);
  loom_sched_platform_destroy(faults);
}
