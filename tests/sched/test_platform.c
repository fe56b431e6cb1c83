/* Models (fit, table, files), platform files (good and malformed), and plans turned into
 * problems, up to the kNN of the acceptance on the 1-CPU + 4-GPU example node. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "loom/sched.h"

TEST(sched_model_fit_recovers_a_line) {
  loom_sched_model m;
  memset(&m, 0, sizeof m);
  double sizes[] = {1e3, 1e4, 1e5, 1e6, 1e6};
  double secs[5];
  for (int i = 0; i < 5; i++) secs[i] = 2e-5 + sizes[i] * 3e-9;
  ASSERT_OK(loom_sched_model_fit(&m, LOOM_OP_CLASS_GEMM, sizes, secs, 5));
  ASSERT_NEAR(m.cls[LOOM_OP_CLASS_GEMM].latency, 2e-5, 1e-9);
  ASSERT_NEAR(m.cls[LOOM_OP_CLASS_GEMM].seconds_per_unit, 3e-9, 1e-14);
  ASSERT_EQ(m.cls[LOOM_OP_CLASS_GEMM].n_points, 4); /* the repeated size averaged */
  /* the table: exact at points, linear between, the last point's rate (over the latency) beyond */
  ASSERT_NEAR(loom_sched_model_time(&m, LOOM_OP_CLASS_GEMM, 1e5), 2e-5 + 3e-4, 1e-12);
  ASSERT_NEAR(loom_sched_model_time(&m, LOOM_OP_CLASS_GEMM, 5.5e5), 2e-5 + 5.5e5 * 3e-9, 1e-12);
  ASSERT_NEAR(loom_sched_model_time(&m, LOOM_OP_CLASS_GEMM, 2e6), 2e-5 + 2e6 * 3e-9, 1e-12);
  ASSERT_TRUE(isinf(loom_sched_model_time(&m, LOOM_OP_CLASS_FFT, 1e5)));
  double bad = -1;
  ASSERT_STATUS(loom_sched_model_fit(&m, LOOM_OP_CLASS_FFT, sizes, &bad, 1), LOOM_ERR_INVALID_ARGUMENT);
}

TEST(sched_model_file_round_trip) {
  char dir[] = "/tmp/loom-sched-XXXXXX";
  ASSERT_TRUE(mkdtemp(dir) != NULL);
  char *old = getenv("LOOM_CACHE_DIR") ? strdup(getenv("LOOM_CACHE_DIR")) : NULL;
  setenv("LOOM_CACHE_DIR", dir, 1);
  loom_sched_model m, back;
  memset(&m, 0, sizeof m);
  double sizes[] = {100, 1000}, secs[] = {1e-3, 4e-3};
  ASSERT_OK(loom_sched_model_fit(&m, LOOM_OP_CLASS_TOPK, sizes, secs, 2));
  ASSERT_OK(loom_sched_model_save(&m, "Tesla X/1", "550.1 (cuda 12)"));
  char path[1024];
  ASSERT_OK(loom_sched_model_path("Tesla X/1", "550.1 (cuda 12)", path, sizeof path));
  ASSERT_CONTAINS(path, "/models/Tesla_X_1@550.1__cuda_12_.json");
  ASSERT_OK(loom_sched_model_load("Tesla X/1", "550.1 (cuda 12)", &back));
  ASSERT_TRUE(back.cls[LOOM_OP_CLASS_TOPK].known);
  ASSERT_TRUE(!back.cls[LOOM_OP_CLASS_GEMM].known);
  ASSERT_NEAR(loom_sched_model_time(&back, LOOM_OP_CLASS_TOPK, 550), 2.5e-3, 1e-12);
  ASSERT_STATUS(loom_sched_model_load("Tesla X/1", "other driver", &back), LOOM_ERR_NOT_FOUND);
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

/* Parses `text` as platform "p.json" and checks the error names `field`. */
static void expect_error(const char *text, const char *field) {
  loom_sched_platform *p = (loom_sched_platform *)1;
  ASSERT_STATUS(loom_sched_platform_parse(text, strlen(text), "p.json", &p), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(p == NULL);
  ASSERT_CONTAINS(loom_last_error(), "p.json: ");
  ASSERT_CONTAINS(loom_last_error(), field);
}

#define CPU \
  "{\"id\": \"cpu0\", \"kind\": \"cpu\", \"memory\": \"1GiB\", \"models\": {\"gemm\": {\"rate\": 1e9}}}"

TEST(sched_platform_errors_name_file_and_field) {
  expect_error("{\"devices\": [" CPU ",]}", "not JSON");
  expect_error("{\"devices\": []}", "devices: must be an array of at least one device");
  expect_error("{\"devices\": [" CPU ", {\"id\": \"g\", \"kind\": \"cuda\", \"models\": {}}]}",
               "devices[1].memory: must be a byte count");
  expect_error(
      "{\"devices\": [{\"id\": \"c\", \"kind\": \"cpu\", \"memory\": 5, \"models\": {\"gemmm\": {}}}]}",
      "devices[0].models.gemmm: not an op class");
  expect_error(
      "{\"devices\": [{\"id\": \"c\", \"kind\": \"cpu\", \"memory\": 5, \"models\": {\"fft\": "
      "{\"latency\": -1, \"rate\": 1}}}]}",
      "devices[0].models.fft: \"latency\" must be a number >= 0");
  expect_error("{\"devices\": [{\"id\": \"c\", \"kind\": \"cpu\", \"memmory\": 5, \"models\": {}}]}",
               "devices[0].memmory: unknown member");
  expect_error("{\"devices\": [" CPU ", {\"id\": \"g\", \"kind\": \"cuda\", \"memory\": 5, \"models\": {}}]}",
               "devices[1].links: no link to \"host\"");
  expect_error("{\"devices\": [" CPU
               ", {\"id\": \"g\", \"kind\": \"cuda\", \"memory\": 5, \"models\": {}, "
               "\"links\": [{\"to\": \"gpu9\", \"bandwidth\": 1e9}]}]}",
               "devices[1].links[0]: \"to\" names no memory node");
  expect_error("{\"devices\": [" CPU
               ", {\"id\": \"g\", \"kind\": \"cuda\", \"memory\": 5, \"models\": {}, "
               "\"links\": [{\"to\": \"host\"}]}]}",
               "devices[1].links[0]: \"bandwidth\" must be a number > 0");
  expect_error("{\"devices\": [" CPU ", " CPU "]}", "cpu0 given twice");
  loom_sched_platform *p = NULL;
  ASSERT_STATUS(loom_sched_platform_load("/nonexistent/p.json", &p), LOOM_ERR_NOT_FOUND);
  ASSERT_CONTAINS(loom_last_error(), "/nonexistent/p.json");
}

static char *example(const char *rel) {
  const char *src = getenv("LOOM_SOURCE_DIR");
  static char buf[4][1024];
  static int next;
  char *b = buf[next++ % 4];
  snprintf(b, 1024, "%s/examples/%s", src ? src : ".", rel);
  return b;
}

TEST(sched_example_platforms_load) {
  loom_sched_platform *p = NULL;
  ASSERT_OK(loom_sched_platform_load(example("platforms/1cpu-4gpu.json"), &p));
  ASSERT_EQ(loom_sched_platform_device_count(p), 5);
  ASSERT_EQ(loom_sched_platform_find(p, "GPU3"), 4);
  const loom_sched_device *g = loom_sched_platform_device(p, 1);
  ASSERT_EQ(g->memory, 80ll << 30);
  /* gpu0's node to the host: 10 us + 25e9 B/s; gpu0 to gpu1 directly over NVLink */
  ASSERT_NEAR(loom_sched_platform_transfer_time(p, g->node, 0, 25000000), 1e-5 + 1e-3, 1e-12);
  ASSERT_NEAR(loom_sched_platform_transfer_time(p, g->node, loom_sched_platform_device(p, 2)->node, 2e8),
              5e-6 + 1e-3, 1e-12);
  loom_sched_platform_destroy(p);
  ASSERT_OK(loom_sched_platform_load(example("platforms/cpu-slow-opencl.json"), &p));
  ASSERT_EQ(loom_sched_platform_device_count(p), 2);
  loom_sched_platform_destroy(p);
}

/* p and q hold the same devices (ids, kinds, memory, models at every table point and beyond)
 * and move data alike between every two nodes. */
static void expect_same_platform(const loom_sched_platform *p, const loom_sched_platform *q) {
  int32_t n = loom_sched_platform_device_count(p);
  ASSERT_EQ(loom_sched_platform_device_count(q), n);
  for (int32_t i = 0; i < n; i++) {
    const loom_sched_device *a = loom_sched_platform_device(p, i), *b = loom_sched_platform_device(q, i);
    ASSERT_STREQ(a->id, b->id);
    ASSERT_STREQ(a->kind, b->kind);
    ASSERT_EQ(a->memory, b->memory);
    ASSERT_EQ(a->node, b->node);
    for (int c = 0; c < LOOM_OP_CLASS_COUNT; c++) {
      const loom_sched_class_model *ma = &a->model.cls[c], *mb = &b->model.cls[c];
      ASSERT_EQ(ma->known, mb->known);
      ASSERT_EQ(ma->n_points, mb->n_points);
      for (double size = 1; ma->known && size < 1e13; size *= 7.3)
        ASSERT_NEAR(loom_sched_model_time(&a->model, (loom_op_class)c, size),
                    loom_sched_model_time(&b->model, (loom_op_class)c, size), 0);
    }
  }
  for (int32_t i = 0; i < n; i++) {
    for (int32_t k = 0; k < n; k++) {
      int32_t from = loom_sched_platform_device(p, i)->node, to = loom_sched_platform_device(p, k)->node;
      ASSERT_NEAR(loom_sched_platform_transfer_time(p, from, to, 123456789),
                  loom_sched_platform_transfer_time(q, from, to, 123456789), 0);
      ASSERT_NEAR(loom_sched_platform_transfer_time(p, 0, to, 1000),
                  loom_sched_platform_transfer_time(q, 0, to, 1000), 0);
    }
  }
}

/* p written as a platform file and read back into *q; the comment, quotes and all, kept. */
static void rewrite(const loom_sched_platform *p, const char *comment, loom_sched_platform **q) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ASSERT_TRUE(f != NULL);
  ASSERT_OK(loom_sched_platform_write_json(p, comment, f));
  ASSERT_EQ(fclose(f), 0);
  if (comment) ASSERT_CONTAINS(text, "\"comment\": \"a \\\"quoted\\\" comment\"");
  ASSERT_OK(loom_sched_platform_parse(text, len, "written.json", q));
  free(text);
}

/* A platform written out reads back the same: the shipped ones (rates, NVLink between GPUs),
 * and one with measured tables, a GPU computing in host memory (an integrated one: its node is
 * written, as the reader would give it one of its own) and a CPU with a node of its own. */
TEST(sched_platform_written_reads_back) {
  const char *files[] = {"platforms/1cpu-4gpu.json", "platforms/cpu-slow-opencl.json",
                         "platforms/h200-node.json"};
  for (int f = 0; f < 3; f++) {
    loom_sched_platform *p = NULL;
    ASSERT_OK(loom_sched_platform_load(example(files[f]), &p));
    loom_sched_platform *q = NULL;
    rewrite(p, f == 0 ? "a \"quoted\" comment" : NULL, &q);
    ASSERT_TRUE(q != NULL);
    expect_same_platform(p, q);
    loom_sched_platform_destroy(q);
    loom_sched_platform_destroy(p);
  }
  const char *nodes[] = {"host", "numa1"};
  loom_sched_device devs[3] = {{.id = "cpu0", .kind = "cpu", .node = 0, .memory = 1 << 30},
                               {.id = "igpu", .kind = "opencl", .node = 0, .memory = 1 << 29},
                               {.id = "cpu1", .kind = "cpu", .node = 1, .memory = 3ll << 32}};
  double sizes[] = {1e3, 1e5, 1e7}, secs[] = {1e-5, 2e-4, 1e-2};
  for (int d = 0; d < 3; d++) {
    ASSERT_OK(loom_sched_model_fit(&devs[d].model, LOOM_OP_CLASS_GEMM, sizes, secs, 3));
    ASSERT_OK(
        loom_sched_model_fit(&devs[d].model, (loom_op_class)(LOOM_OP_CLASS_COPY - d), sizes + d, secs, 1));
  }
  loom_sched_link link = {.a = 1, .b = 0, .bandwidth = 3.3e10, .latency = 1.5e-6};
  loom_sched_platform *p = NULL;
  ASSERT_OK(loom_sched_platform_create(nodes, 2, devs, 3, &link, 1, &p));
  loom_sched_platform *q = NULL;
  rewrite(p, NULL, &q);
  ASSERT_TRUE(q != NULL);
  expect_same_platform(p, q);
  loom_sched_platform_destroy(q);
  loom_sched_platform_destroy(p);
  ASSERT_STATUS(loom_sched_platform_write_json(NULL, NULL, stdout), LOOM_ERR_INVALID_ARGUMENT);
}

/* A subset keeps the listed devices in the list's order, with every node and link (a GPU
 * left alone still reaches the host over its link); ids it lacks, empty or repeated are named. */
TEST(sched_platform_subset) {
  loom_sched_platform *p = NULL, *q = NULL;
  ASSERT_OK(loom_sched_platform_load(example("platforms/1cpu-4gpu.json"), &p));
  ASSERT_OK(loom_sched_platform_subset(p, "GPU2,cpu0", &q));
  ASSERT_EQ(loom_sched_platform_device_count(q), 2);
  ASSERT_STREQ(loom_sched_platform_device(q, 0)->id, "gpu2");
  ASSERT_STREQ(loom_sched_platform_device(q, 1)->id, "cpu0");
  const loom_sched_device *g = loom_sched_platform_device(q, 0);
  ASSERT_NEAR(loom_sched_platform_transfer_time(q, g->node, 0, 25000000),
              loom_sched_platform_transfer_time(p, g->node, 0, 25000000), 0);
  ASSERT_NEAR(loom_sched_model_time(&g->model, LOOM_OP_CLASS_GEMM, 1e9),
              loom_sched_model_time(&loom_sched_platform_device(p, 3)->model, LOOM_OP_CLASS_GEMM, 1e9), 0);
  loom_sched_platform_destroy(q);
  const char *bad[][2] = {{"cpu0,gpu7", "'gpu7' in 'cpu0,gpu7' is none of its devices"},
                          {"cpu0,,gpu1", "'' in 'cpu0,,gpu1' is none of its devices"},
                          {"gpu1,GPU1", "names GPU1 twice"}};
  for (int i = 0; i < 3; i++) {
    q = (loom_sched_platform *)1;
    ASSERT_STATUS(loom_sched_platform_subset(p, bad[i][0], &q), LOOM_ERR_INVALID_ARGUMENT);
    ASSERT_TRUE(q == NULL);
    ASSERT_CONTAINS(loom_last_error(), bad[i][1]);
  }
  ASSERT_STATUS(loom_sched_platform_subset(p, NULL, &q), LOOM_ERR_INVALID_ARGUMENT);
  loom_sched_platform_destroy(p);
}

/* What loom-run --simulate does: plan for the platform's devices (pieces sized for the
 * smallest), then schedule. */
static loom_status simulate(const char *lir, const char *platform, loom_sched_policy policy,
                            loom_sched_result *r, int32_t *out_tasks, int64_t *out_pieces) {
  loom_graph *g = NULL, *opt = NULL;
  loom_sched_platform *pf = NULL;
  loom_plan *plan = NULL;
  loom_sched_problem *pr = NULL;
  loom_status s = loom_graph_load(lir, &g);
  if (!s) s = loom_sched_platform_load(platform, &pf);
  loom_runner runners[16];
  int32_t n = pf ? loom_sched_platform_device_count(pf) : 0;
  int64_t smallest = INT64_MAX;
  for (int32_t i = 0; !s && i < n; i++) {
    const loom_sched_device *d = loom_sched_platform_device(pf, i);
    snprintf(runners[i].device, sizeof runners[i].device, "%s", d->id);
    runners[i].limit = d->memory;
    smallest = d->memory < smallest ? d->memory : smallest;
  }
  loom_runner sized[16];
  for (int32_t i = 0; i < n; i++) sized[i] = runners[i], sized[i].limit = smallest;
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  if (n == 1) o.fused_runs = loom_fused_body_runs_everywhere;
  if (!s) s = loom_graph_optimize_for_runners(g, sized, n, &o, &opt, NULL, NULL, 0);
  if (!s) s = loom_plan_split_by_memory(opt, runners, n, &plan);
  if (!s) s = loom_sched_problem_from_plan(plan, pf, &pr);
  if (!s) s = loom_sched_schedule(pr, pf, policy, r);
  *out_tasks = pr ? loom_sched_problem_task_count(pr) : 0;
  *out_pieces = 0;
  for (int32_t i = 0; opt && i < loom_graph_op_count(opt); i++) {
    int64_t len = 0, piece = 0;
    if (!loom_graph_loop_get(opt, i, NULL, &len, &piece)) *out_pieces += (len + piece - 1) / piece;
  }
  loom_sched_problem_destroy(pr);
  loom_plan_destroy(plan);
  loom_sched_platform_destroy(pf);
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
  return s;
}

TEST(sched_plan_pieces_become_tasks) {
  loom_sched_result r;
  int32_t tasks = 0;
  int64_t pieces = 0;
  ASSERT_OK(simulate(example("knn.lir"), example("platforms/cpu-slow-opencl.json"), LOOM_SCHED_DMDA, &r,
                     &tasks, &pieces));
  ASSERT_TRUE(pieces >= 2);
  ASSERT_TRUE(tasks >= pieces && tasks <= pieces + 8); /* the pieces plus the stages' other ops */
  ASSERT_EQ(r.task_count[0] + r.task_count[1], tasks);
  ASSERT_TRUE(r.task_count[0] > r.task_count[1]); /* the cpu is the faster one there */
  ASSERT_TRUE(r.task_count[1] > 0);
  loom_sched_result eager;
  ASSERT_OK(simulate(example("knn.lir"), example("platforms/cpu-slow-opencl.json"), LOOM_SCHED_EAGER, &eager,
                     &tasks, &pieces));
  ASSERT_TRUE(r.makespan <= eager.makespan);
  loom_sched_result_deinit(&eager);
  loom_sched_result_deinit(&r);
}

/* The acceptance: kNN at n = m = 1,000,000 on the 1-CPU + 4-GPU node, simulated
 * within 15% of the lower bound. */
TEST(sched_knn_1m_on_1cpu_4gpu_near_the_bound) {
  loom_sched_result r;
  int32_t tasks = 0;
  int64_t pieces = 0;
  ASSERT_OK(simulate(example("knn_1m.lir"), example("platforms/1cpu-4gpu.json"), LOOM_SCHED_DMDA, &r, &tasks,
                     &pieces));
  double bound = r.bound_work > r.bound_path ? r.bound_work : r.bound_path;
  printf(
      "    kNN 1e6 x 1e6 on 1cpu-4gpu: %d tasks (%lld pieces), makespan %.4g s, bound %.4g s, ratio %.4f\n",
      (int)tasks, (long long)pieces, r.makespan, bound, r.makespan / bound);
  ASSERT_TRUE(pieces >= 20);
  ASSERT_TRUE(r.makespan >= bound);
  ASSERT_TRUE(r.makespan <= 1.15 * bound);
  for (int d = 1; d < 5; d++) ASSERT_TRUE(r.task_count[d] > 0);
  loom_sched_result_deinit(&r);
}

TEST(sched_platform_from_context_reads_models) {
  char dir[] = "/tmp/loom-sched-XXXXXX";
  ASSERT_TRUE(mkdtemp(dir) != NULL);
  char *old = getenv("LOOM_CACHE_DIR") ? strdup(getenv("LOOM_CACHE_DIR")) : NULL;
  setenv("LOOM_CACHE_DIR", dir, 1);
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  loom_sched_platform *p = NULL;
  /* no models yet: the first device is named, with what to run */
  ASSERT_STATUS(loom_sched_platform_from_context(ctx, NULL, &p), LOOM_ERR_NOT_FOUND);
  ASSERT_CONTAINS(loom_last_error(), "cpu0");
  ASSERT_CONTAINS(loom_last_error(), "loom-bench calibrate");
  int32_t n = loom_context_device_count(ctx);
  loom_sched_model m;
  memset(&m, 0, sizeof m);
  double sizes[] = {1e6}, secs[] = {1e-3};
  ASSERT_OK(loom_sched_model_fit(&m, LOOM_OP_CLASS_GEMM, sizes, secs, 1));
  m.host_bandwidth = 1e10, m.host_latency = 1e-5;
  for (int32_t i = 0; i < n; i++) {
    loom_device_info d;
    ASSERT_OK(loom_context_device_info(ctx, i, &d));
    ASSERT_OK(loom_sched_model_save(&m, d.name, loom_sched_device_driver(&d)));
  }
  ASSERT_OK(loom_sched_platform_from_context(ctx, NULL, &p));
  ASSERT_EQ(loom_sched_platform_device_count(p), n);
  const loom_sched_device *cpu = loom_sched_platform_device(p, loom_sched_platform_find(p, "cpu0"));
  ASSERT_TRUE(cpu != NULL);
  ASSERT_EQ(cpu->node, 0);
  ASSERT_STREQ(cpu->kind, "cpu");
  for (int32_t i = 0; i < n; i++) { /* kinds by what drives the device, as platform files name them */
    const loom_sched_device *d = loom_sched_platform_device(p, i);
    if (strncmp(d->id, "ocl", 3) == 0) ASSERT_STREQ(d->kind, "opencl");
    if (strncmp(d->id, "cuda", 4) == 0) ASSERT_STREQ(d->kind, "cuda");
  }
  ASSERT_NEAR(loom_sched_model_time(&cpu->model, LOOM_OP_CLASS_GEMM, 2e6), 2e-3, 1e-12);
  loom_sched_platform_destroy(p);
  ASSERT_OK(loom_sched_platform_from_context(ctx, "cpu0", &p));
  ASSERT_EQ(loom_sched_platform_device_count(p), 1);
  loom_sched_platform_destroy(p);
  ASSERT_STATUS(loom_sched_platform_from_context(ctx, "cpu9", &p), LOOM_ERR_INVALID_ARGUMENT);
  loom_context_destroy(ctx);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ASSERT_EQ(system(cmd), 0);
  if (old)
    setenv("LOOM_CACHE_DIR", old, 1);
  else
    unsetenv("LOOM_CACHE_DIR");
  free(old);
}

/* Every allocation failure on the way from a platform file and a plan to a schedule is
 * reported as out of memory and frees what it took. */
TEST(sched_allocation_failures_free_everything) {
  loom_graph *g = NULL, *opt = NULL;
  loom_plan *plan = NULL;
  ASSERT_OK(loom_graph_load(example("knn.lir"), &g));
  loom_runner runners[2] = {{"cpu0", 256 << 20}, {"ocl0", 256 << 20}};
  ASSERT_OK(loom_graph_optimize_for_runners(g, runners, 2, NULL, &opt, NULL, NULL, 0));
  ASSERT_OK(loom_plan_split_by_memory(opt, runners, 2, &plan));
  loom_test_sweep sw;
  SWEEP_ALLOCATIONS(&sw, 0, 5000) {
    loom_sched_platform *pf = NULL;
    loom_sched_problem *pr = NULL;
    loom_sched_result r = {0};
    loom_test_sweep_arm(&sw);
    loom_status s = loom_sched_platform_load(example("platforms/cpu-slow-opencl.json"), &pf);
    if (!s) s = loom_sched_problem_from_plan(plan, pf, &pr);
    if (!s) s = loom_sched_schedule(pr, pf, LOOM_SCHED_DMDA, &r);
    if (loom_test_sweep_done(&sw, s)) ASSERT_TRUE(r.tasks == NULL && r.busy == NULL);
    loom_sched_result_deinit(&r);
    loom_sched_problem_destroy(pr);
    loom_sched_platform_destroy(pf);
  }
  ASSERT_TRUE(sw.failures > 20);
  loom_plan_destroy(plan);
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
}

/* The unrewritten kNN graph as one task: its work per class counted by hand. */
TEST(sched_graph_work_by_class) {
  loom_graph *g = NULL;
  loom_sched_platform *pf = NULL;
  loom_sched_problem *pr = NULL;
  ASSERT_OK(loom_graph_load(example("knn.lir"), &g));
  ASSERT_OK(loom_sched_platform_load(example("platforms/cpu-slow-opencl.json"), &pf));
  ASSERT_OK(loom_sched_problem_from_graph(g, pf, &pr));
  ASSERT_EQ(loom_sched_problem_task_count(pr), 1);
  const loom_sched_task *t = loom_sched_problem_task(pr, 0);
  double pairs = 20000.0 * 30000.0;
  ASSERT_NEAR(t->size[LOOM_OP_CLASS_ELEMENTWISE], 2 * pairs * 3, 0.5); /* sub, mul */
  ASSERT_EQ(t->kernels[LOOM_OP_CLASS_ELEMENTWISE], 2);
  ASSERT_NEAR(t->size[LOOM_OP_CLASS_REDUCTION], pairs * 3, 0.5); /* reduce_sum over d */
  ASSERT_NEAR(t->size[LOOM_OP_CLASS_TOPK], pairs, 0.5);
  ASSERT_NEAR(t->size[LOOM_OP_CLASS_GEMM], 0, 0); /* the reshapes are views */
  ASSERT_EQ(t->fixed_device, -1);
  /* it holds its inputs and every result: x, y, diff, sq, d2, val, idx (the reshapes are views) */
  ASSERT_EQ(t->memory, 240000ll + 360000 + 2 * 7200000000ll + 2400000000ll + 800000 + 1600000);
  loom_sched_result r;
  ASSERT_OK(loom_sched_schedule(pr, pf, LOOM_SCHED_EAGER, &r));
  /* 16.8 GB fit cpu0's 16 GiB, not ocl0's 2 */
  ASSERT_EQ(r.tasks[0].device, 0);
  loom_sched_result_deinit(&r);
  loom_sched_problem_destroy(pr);
  loom_sched_platform_destroy(pf);
  loom_graph_destroy(g);
}
