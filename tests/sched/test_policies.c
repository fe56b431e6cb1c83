/* The policies on hand-made platforms: placements, transfers and bounds checked against
 * figures worked out here from the models. */
#include <math.h>
#include <stdlib.h>

#include "core/json_read.h"
#include "harness.h"
#include "loom/sched.h"

/* ASSERT_OK for the helpers that return the object they build (NULL after a failure). */
#define MUST(expr)                                                                   \
  do {                                                                               \
    if ((expr) != LOOM_OK) {                                                         \
      loom_test_fail(__FILE__, __LINE__, "%s failed: %s", #expr, loom_last_error()); \
      return NULL;                                                                   \
    }                                                                                \
  } while (0)

/* A device with one known class (elementwise) at `rate` units per second, no latency. */
static loom_sched_device device(const char *id, const char *kind, int32_t node, int64_t memory, double rate) {
  loom_sched_device d;
  memset(&d, 0, sizeof d);
  snprintf(d.id, sizeof d.id, "%s", id);
  snprintf(d.kind, sizeof d.kind, "%s", kind);
  d.node = node, d.memory = memory;
  d.model.cls[LOOM_OP_CLASS_ELEMENTWISE] =
      (loom_sched_class_model){.known = true, .seconds_per_unit = 1.0 / rate};
  return d;
}

/* host (node 0) with a slow cpu on it; a fast gpu on node 1, linked at 1 GB/s, 1 ms. */
static loom_sched_platform *fast_slow(int64_t gpu_memory) {
  const char *nodes[] = {"host", "gpu0"};
  loom_sched_device devs[] = {device("cpu0", "cpu", 0, 1ll << 40, 1e9),
                              device("gpu0", "cuda", 1, gpu_memory, 1e10)};
  loom_sched_link link = {.a = 0, .b = 1, .bandwidth = 1e9, .latency = 1e-3};
  loom_sched_platform *p = NULL;
  MUST(loom_sched_platform_create(nodes, 2, devs, 2, &link, 1, &p));
  return p;
}

/* n pieces of one loop, each `units` of elementwise work and `memory` bytes, reading one
 * shared input of `in_bytes` on the host; each writes `out_bytes`, a graph output. */
static loom_sched_problem *pieces(int32_t n, double units, int64_t memory, int64_t in_bytes,
                                  int64_t out_bytes) {
  loom_sched_problem *p = NULL;
  MUST(loom_sched_problem_create(&p));
  int32_t in = -1;
  loom_sched_data d = {.bytes = in_bytes, .producer = -1, .node = 0, .parent = -1};
  MUST(loom_sched_problem_add_data(p, &d, &in));
  for (int32_t i = 0; i < n; i++) {
    loom_sched_task t;
    memset(&t, 0, sizeof t);
    snprintf(t.label, sizeof t.label, "piece %d", i);
    t.size[LOOM_OP_CLASS_ELEMENTWISE] = units;
    t.kernels[LOOM_OP_CLASS_ELEMENTWISE] = 1;
    t.memory = memory, t.fixed_device = 1, t.loop = 0;
    int32_t id = -1;
    MUST(loom_sched_problem_add_task(p, &t, &in, 1, &id));
    loom_sched_data o = {.bytes = out_bytes, .producer = id, .node = -1, .parent = -1, .output = true};
    MUST(loom_sched_problem_add_data(p, &o, NULL));
  }
  return p;
}

TEST(sched_fast_device_takes_most_pieces) {
  loom_sched_platform *pf = fast_slow(1ll << 30);
  /* 1e7 units: 1 ms on gpu0, 10 ms on cpu0 */
  loom_sched_problem *pr = pieces(100, 1e7, 1 << 20, 1000, 0);
  loom_sched_result r;
  ASSERT_OK(loom_sched_schedule(pr, pf, LOOM_SCHED_DMDA, &r));
  ASSERT_EQ(r.task_count[0] + r.task_count[1], 100);
  ASSERT_TRUE(r.task_count[1] >= 85); /* the exact share is 10/11, about 91 */
  ASSERT_TRUE(r.task_count[0] >= 1);  /* and the slow one still helps */
  /* Spread freely, 100 pieces at 1 and 10 ms take 100 / (1/1 + 1/10) ms. */
  ASSERT_NEAR(r.bound_work, 0.1 / 1.1, 1e-4);
  ASSERT_NEAR(r.bound_path, 1e-3, 1e-12);
  ASSERT_TRUE(r.makespan >= r.bound_work);
  ASSERT_TRUE(r.makespan <= 1.15 * r.bound_work);
  ASSERT_NEAR(r.busy[0] + r.busy[1], r.task_count[0] * 1e-2 + r.task_count[1] * 1e-3, 1e-9);
  loom_sched_result_deinit(&r);
  loom_sched_problem_destroy(pr);
  loom_sched_platform_destroy(pf);
}

TEST(sched_device_too_small_never_gets_a_piece) {
  loom_sched_platform *pf = fast_slow(1 << 20); /* gpu0: 1 MiB */
  loom_sched_problem *pr = pieces(20, 1e7, 2 << 20, 1000, 0);
  for (int policy = LOOM_SCHED_EAGER; policy <= LOOM_SCHED_DMDA; policy++) {
    loom_sched_result r;
    ASSERT_OK(loom_sched_schedule(pr, pf, (loom_sched_policy)policy, &r));
    ASSERT_EQ(r.task_count[1], 0);
    ASSERT_EQ(r.task_count[0], 20);
    ASSERT_NEAR(r.makespan, 20 * 1e-2, 1e-9);
    loom_sched_result_deinit(&r);
  }
  /* fixed names gpu0 for every piece: an error naming the piece and the device */
  loom_sched_result r;
  ASSERT_STATUS(loom_sched_schedule(pr, pf, LOOM_SCHED_FIXED, &r), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "piece 0");
  ASSERT_CONTAINS(loom_last_error(), "gpu0");
  ASSERT_CONTAINS(loom_last_error(), "2.00 MiB");
  loom_sched_problem_destroy(pr);
  loom_sched_platform_destroy(pf);
}

TEST(sched_transfers_counted_and_timed) {
  /* cpu0 cannot run the class at all: the one task must go to gpu0, its 100 MB input over the
   * link first (1 ms + 0.1 s), 10 ms of work, then its 10 MB output home (1 ms + 10 ms). */
  const char *nodes[] = {"host", "gpu0"};
  loom_sched_device devs[] = {device("cpu0", "cpu", 0, 1ll << 40, 1e9),
                              device("gpu0", "cuda", 1, 1ll << 30, 1e10)};
  devs[0].model.cls[LOOM_OP_CLASS_ELEMENTWISE].known = false;
  loom_sched_link link = {.a = 0, .b = 1, .bandwidth = 1e9, .latency = 1e-3};
  loom_sched_platform *pf = NULL;
  ASSERT_OK(loom_sched_platform_create(nodes, 2, devs, 2, &link, 1, &pf));
  loom_sched_problem *pr = pieces(1, 1e8, 1 << 20, 100000000, 10000000);
  for (int policy = LOOM_SCHED_FIXED; policy <= LOOM_SCHED_DMDA; policy++) {
    loom_sched_result r;
    ASSERT_OK(loom_sched_schedule(pr, pf, (loom_sched_policy)policy, &r));
    ASSERT_EQ(r.tasks[0].device, 1);
    ASSERT_NEAR(r.tasks[0].start, 0.101, 1e-9);
    ASSERT_NEAR(r.tasks[0].finish, 0.111, 1e-9);
    ASSERT_EQ(r.link_bytes[0], 110000000);
    ASSERT_NEAR(r.makespan, 0.111 + 0.011, 1e-9);
    loom_sched_result_deinit(&r);
  }
  loom_sched_problem_destroy(pr);
  loom_sched_platform_destroy(pf);
}

TEST(sched_input_moved_once_per_device) {
  /* 50 pieces share one 10 MB input: each device that runs any of them fetches it once. */
  loom_sched_platform *pf = fast_slow(1ll << 30);
  loom_sched_problem *pr = pieces(50, 1e7, 1 << 20, 10000000, 0);
  loom_sched_result r;
  ASSERT_OK(loom_sched_schedule(pr, pf, LOOM_SCHED_DMDA, &r));
  ASSERT_TRUE(r.task_count[1] > 0);
  ASSERT_EQ(r.link_bytes[0], 10000000);
  loom_sched_result_deinit(&r);
  loom_sched_problem_destroy(pr);
  loom_sched_platform_destroy(pf);
}

/* A chain (each task reads the previous one's 50 MB result) then 40 pieces reading its end:
 * dmda keeps the chain where its data is; eager takes whichever device is free. */
static loom_sched_problem *chain_then_pieces(void) {
  loom_sched_problem *p = NULL;
  MUST(loom_sched_problem_create(&p));
  int32_t prev = -1;
  loom_sched_data d = {.bytes = 50000000, .producer = -1, .node = 0, .parent = -1};
  MUST(loom_sched_problem_add_data(p, &d, &prev));
  for (int32_t i = 0; i < 50; i++) {
    loom_sched_task t;
    memset(&t, 0, sizeof t);
    snprintf(t.label, sizeof t.label, "%s %d", i < 10 ? "chain" : "piece", i);
    t.size[LOOM_OP_CLASS_ELEMENTWISE] = i < 10 ? 2e7 : 5e7;
    t.kernels[LOOM_OP_CLASS_ELEMENTWISE] = 1;
    t.memory = 1 << 20, t.fixed_device = 0, t.loop = i < 10 ? -1 : 0;
    int32_t id = -1;
    MUST(loom_sched_problem_add_task(p, &t, &prev, 1, &id));
    loom_sched_data o = {
        .bytes = i < 10 ? 50000000 : 1000, .producer = id, .node = -1, .parent = -1, .output = i >= 10};
    int32_t out = -1;
    MUST(loom_sched_problem_add_data(p, &o, &out));
    if (i < 10) prev = out;
  }
  return p;
}

TEST(sched_dmda_never_worse_than_eager) {
  loom_sched_platform *pf = fast_slow(1ll << 30);
  loom_sched_problem *cases[] = {pieces(100, 1e7, 1 << 20, 1000, 0), pieces(7, 1e8, 1 << 20, 200000000, 1000),
                                 pieces(64, 1e6, 1 << 20, 1000, 5000000), chain_then_pieces()};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    loom_sched_result dmda, eager;
    ASSERT_OK(loom_sched_schedule(cases[i], pf, LOOM_SCHED_DMDA, &dmda));
    ASSERT_OK(loom_sched_schedule(cases[i], pf, LOOM_SCHED_EAGER, &eager));
    if (dmda.makespan > eager.makespan * (1 + 1e-12))
      loom_test_fail(__FILE__, __LINE__, "case %zu: dmda %g s > eager %g s", i, dmda.makespan,
                     eager.makespan);
    double bound = dmda.bound_work > dmda.bound_path ? dmda.bound_work : dmda.bound_path;
    ASSERT_TRUE(dmda.makespan >= bound * (1 - 1e-9));
    ASSERT_TRUE(eager.makespan >= bound * (1 - 1e-9));
    loom_sched_result_deinit(&dmda);
    loom_sched_result_deinit(&eager);
    loom_sched_problem_destroy(cases[i]);
  }
  loom_sched_platform_destroy(pf);
}

TEST(sched_policy_names) {
  loom_sched_policy p;
  ASSERT_TRUE(loom_sched_policy_parse("eager", &p));
  ASSERT_EQ(p, LOOM_SCHED_EAGER);
  ASSERT_TRUE(!loom_sched_policy_parse("heft", &p));
  ASSERT_STREQ(loom_sched_policy_name(LOOM_SCHED_DMDA), "dmda");
}

TEST(sched_dmda_counts_transfers_queued_on_one_link) {
  /* Two 500 kB inputs over one 1 GB/s link take 1 ms one after the other, not 0.5 ms: with
   * them gpu0 (0.1 ms of work) would finish at 1.1 ms, later than cpu0's 1 ms at home. */
  const char *nodes[] = {"host", "gpu0"};
  loom_sched_device devs[] = {device("cpu0", "cpu", 0, 1ll << 40, 1e9),
                              device("gpu0", "cuda", 1, 1ll << 30, 1e10)};
  loom_sched_link link = {.a = 0, .b = 1, .bandwidth = 1e9, .latency = 0};
  loom_sched_platform *pf = NULL;
  ASSERT_OK(loom_sched_platform_create(nodes, 2, devs, 2, &link, 1, &pf));
  loom_sched_problem *pr = NULL;
  ASSERT_OK(loom_sched_problem_create(&pr));
  int32_t in[2];
  loom_sched_data d = {.bytes = 500000, .producer = -1, .node = 0, .parent = -1};
  ASSERT_OK(loom_sched_problem_add_data(pr, &d, &in[0]));
  ASSERT_OK(loom_sched_problem_add_data(pr, &d, &in[1]));
  loom_sched_task t;
  memset(&t, 0, sizeof t);
  snprintf(t.label, sizeof t.label, "two inputs");
  t.size[LOOM_OP_CLASS_ELEMENTWISE] = 1e6;
  t.kernels[LOOM_OP_CLASS_ELEMENTWISE] = 1;
  t.fixed_device = 1, t.loop = -1;
  ASSERT_OK(loom_sched_problem_add_task(pr, &t, in, 2, NULL));
  loom_sched_result r;
  ASSERT_OK(loom_sched_schedule(pr, pf, LOOM_SCHED_DMDA, &r));
  ASSERT_EQ(r.tasks[0].device, 0);
  ASSERT_NEAR(r.makespan, 1e-3, 1e-12);
  loom_sched_result_deinit(&r);
  ASSERT_OK(loom_sched_schedule(pr, pf, LOOM_SCHED_FIXED, &r)); /* and on gpu0 it is as said */
  ASSERT_NEAR(r.tasks[0].start, 1e-3, 1e-12);
  ASSERT_NEAR(r.makespan, 1.1e-3, 1e-12);
  ASSERT_EQ(r.link_bytes[0], 1000000);
  loom_sched_result_deinit(&r);
  loom_sched_problem_destroy(pr);
  loom_sched_platform_destroy(pf);
}

TEST(sched_result_json_says_what_the_result_holds) {
  loom_sched_platform *pf = fast_slow(1ll << 30);
  loom_sched_problem *pr = pieces(10, 1e7, 1 << 20, 1000, 0);
  loom_sched_result r;
  ASSERT_OK(loom_sched_schedule(pr, pf, LOOM_SCHED_DMDA, &r));
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ASSERT_TRUE(f != NULL);
  ASSERT_OK(loom_sched_result_write_json(&r, pf, f));
  fclose(f);
  loom__jr_value doc;
  char why[200] = "";
  ASSERT_EQ(loom__jr_parse(text, len, &doc, why, sizeof why), 0);
  ASSERT_STREQ(loom__jr_string(&doc, "policy"), "dmda");
  ASSERT_NEAR(loom__jr_number(&doc, "makespan", -1), r.makespan, 1e-12 * r.makespan);
  const loom__jr_value *devs = loom__jr_get(&doc, "devices"), *tasks = loom__jr_get(&doc, "tasks");
  ASSERT_TRUE(devs && devs->n == 2 && tasks && tasks->n == 10);
  ASSERT_STREQ(loom__jr_string(&devs->items[1], "id"), "gpu0");
  ASSERT_EQ((long long)loom__jr_number(&devs->items[1], "tasks", -1), r.task_count[1]);
  ASSERT_STREQ(loom__jr_string(&tasks->items[9], "device"), r.tasks[9].device ? "gpu0" : "cpu0");
  loom__jr_free(&doc);
  free(text);
  loom_sched_result_deinit(&r);
  loom_sched_problem_destroy(pr);
  loom_sched_platform_destroy(pf);
}
