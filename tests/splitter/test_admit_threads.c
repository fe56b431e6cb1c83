/* Admission (issue 32): four threads run plans of 4 MiB ocl0 runners on one context whose ocl0
 * node is limited to 6 MiB, 8 runs each. A stage that does not fit beside the others' waits
 * for them instead of failing: all 32 runs finish, each with the results the plan gives run
 * alone, and the node's own counters show it never held more than 6 MiB. A stage that could
 * never fit fails at once, and one with a deadline waits no longer. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loom/memory.h"
#include "split_util.h"

enum { THREADS = 4, RUNS = 8 };

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#define RUNNER ((int64_t)4 << 20)
#define NODE_LIMIT ((int64_t)6 << 20)

/* Elementwise work on 2 x 512 KiB inputs and a dot: stages of 1 to 3 MiB under 4 MiB, so that
 * two stages of different runs fit the node at once and three do not. */
static const char *const lir =
    "graph adm(x: f32[131072], w: f32[256,256]) {\n"
    "  a = exp x\n  b = mul a x\n  c = add b a\n  d = sub c x\n  e = mul d a\n"
    "  f = dot w w\n  g = exp f\n  h = dot g w\n"
    "  return e, h\n}\n";

typedef struct job {
  loom_context *ctx;
  const loom_plan *plan;
  const loom_tensor *in, *want;
  int32_t id, ok;
  char failure[512];
} job;

static void *worker(void *arg) {
  job *j = arg;
  for (int32_t r = 0; r < RUNS && !j->failure[0]; r++) {
    loom_tensor out[2];
    memset(out, 0, sizeof out);
    loom_status s = loom_plan_run(j->ctx, j->plan, j->in, 2, out, 2, NULL);
    if (s) {
      snprintf(j->failure, sizeof j->failure, "thread %d, run %d: %s: %s", (int)j->id, (int)r,
               loom_status_string(s), loom_last_error());
      break;
    }
    /* The same plan on the same device: the same kernels in the same order. */
    for (int32_t k = 0; k < 2; k++)
      if (su_worst(&j->want[k], &out[k], 1e-6, 1e-6) > 1)
        snprintf(j->failure, sizeof j->failure, "thread %d, run %d: result %d differs from a lone run",
                 (int)j->id, (int)r, (int)k);
    for (int32_t k = 0; k < 2; k++) loom_tensor_deinit(&out[k]);
    j->ok++;
  }
  return NULL;
}

/* A context with cpu0 and ocl0 (PoCL) whose ocl0 node is limited to NODE_LIMIT; NULL (the test
 * skipped) without an OpenCL device. */
static loom_context *ocl_context(loom_mem_manager **m, int32_t *node) {
  setenv("POCL_DEVICES", "pthread", 0);
  setenv("POCL_MEMORY_LIMIT", "1", 0);
  loom_context_options co;
  loom_context_options_init(&co);
  co.devices = "cpu0,ocl0";
  loom_context *ctx = NULL;
  loom_status s = loom_context_create(&co, &ctx);
  if (s == LOOM_ERR_NOT_FOUND) {
    loom_test_skip("%s", loom_last_error());
    return NULL;
  }
  int32_t i = -1;
  loom_device_info info;
  if (!s && (loom_context_find_device(ctx, "ocl0", &i) || loom_context_device_info(ctx, i, &info) ||
             strncmp(info.id, "ocl", 3) != 0)) {
    loom_context_destroy(ctx);
    loom_test_skip("ocl0 is no OpenCL device here (absent, or a GPU that CUDA runs)");
    return NULL;
  }
  if (!s) s = loom_context_memory(ctx, m);
  if (!s) s = loom_mem_node_find(*m, "ocl0", node);
  if (!s) s = loom_mem_set_limit(*m, *node, NODE_LIMIT);
  if (s) {
    loom_test_fail(__FILE__, __LINE__, "%s: %s", loom_status_string(s), loom_last_error());
    loom_context_destroy(ctx);
    return NULL;
  }
  return ctx;
}

TEST(admission_four_threads_on_ocl0_under_a_6MiB_node_limit) {
  loom_mem_manager *m = NULL;
  int32_t node = -1;
  loom_context *ctx = ocl_context(&m, &node);
  if (!ctx) return;
  loom_graph *g = su_parse(lir);
  ASSERT_TRUE(g != NULL);
  loom_runner runner = {"ocl0", RUNNER};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split_by_memory(g, &runner, 1, &plan));
  loom_tensor *in = NULL, want[2];
  ASSERT_OK(su_inputs(g, 11, &in));
  ASSERT_OK(loom_plan_run(ctx, plan, in, 2, want, 2, NULL)); /* the lone run */
  job jobs[THREADS];
  pthread_t th[THREADS];
  for (int32_t t = 0; t < THREADS; t++) {
    jobs[t] = (job){ctx, plan, in, want, t, 0, ""};
    ASSERT_EQ(pthread_create(&th[t], NULL, worker, &jobs[t]), 0);
  }
  int32_t ok = 0;
  for (int32_t t = 0; t < THREADS; t++) {
    pthread_join(th[t], NULL);
    if (jobs[t].failure[0]) loom_test_fail(__FILE__, __LINE__, "%s", jobs[t].failure);
    ok += jobs[t].ok;
  }
  loom_mem_node_stats ms;
  ASSERT_OK(loom_mem_stats(m, node, &ms));
  printf(
      "    %d of %d runs finished (%d stages per run); ocl0 peak %lld bytes of its %lld limit; "
      "%lld stages waited for room, %.3f s in all\n",
      (int)ok, THREADS * RUNS, (int)loom_plan_stage_count(plan), (long long)ms.peak_in_use,
      (long long)NODE_LIMIT, (long long)ms.admission_waits, (double)ms.admission_wait_us / 1e6);
  ASSERT_EQ(ok, THREADS * RUNS);
  ASSERT_TRUE(ms.peak_in_use <= NODE_LIMIT);
  ASSERT_EQ(ms.limit, NODE_LIMIT); /* the runner limits are out of force again */
  loom_tensor_deinit(&want[0]);
  loom_tensor_deinit(&want[1]);
  su_tensors_free(in, 2);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
  loom_context_destroy(ctx);
}

/* A stage whose estimate passes the node's own limit could never fit: it fails at once, naming
 * the node, however long it may wait. */
TEST(admission_refuses_at_once_what_could_never_fit) {
  loom_mem_manager *m = NULL;
  int32_t node = -1;
  loom_context *ctx = ocl_context(&m, &node);
  if (!ctx) return;
  ASSERT_OK(loom_mem_set_limit(m, node, 1 << 20));
  loom_graph *g = su_parse(lir);
  ASSERT_TRUE(g != NULL);
  loom_runner runner = {"ocl0", RUNNER};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split_by_memory(g, &runner, 1, &plan));
  loom_tensor *in = NULL, out[2];
  ASSERT_OK(su_inputs(g, 11, &in));
  double t0 = now_s();
  loom_status s = loom_plan_run(ctx, plan, in, 2, out, 2, NULL);
  ASSERT_EQ(s, LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_TRUE(strstr(loom_last_error(), "out of memory on ocl0: a stage needs") != NULL);
  ASSERT_TRUE(now_s() - t0 < 5.0);
  su_tensors_free(in, 2);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
  loom_context_destroy(ctx);
}

/* A buffer the program holds in use fills the node and no run's stage holds it: a stage with a
 * deadline waits that long, then fails saying it waited; once the buffer is gone, the same run
 * goes through. (The order of arrival and the other refusals are tested on the admission itself,
 * tests/hmm/test_hmm_admit.c.) */
TEST(admission_waits_no_longer_than_its_deadline) {
  loom_mem_manager *m = NULL;
  int32_t node = -1;
  loom_context *ctx = ocl_context(&m, &node);
  if (!ctx) return;
  loom_graph *g = su_parse(lir);
  ASSERT_TRUE(g != NULL);
  loom_runner runner = {"ocl0", RUNNER};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split_by_memory(g, &runner, 1, &plan));
  loom_tensor *in = NULL, out[2];
  ASSERT_OK(su_inputs(g, 11, &in));
  loom_buffer *hog = NULL;
  loom_mem_handle h;
  ASSERT_OK(loom_buffer_allocate(m, 5 << 20, LOOM_U8, node, LOOM_MEM_DEVICE_LOCAL, &hog));
  ASSERT_OK(loom_buffer_acquire(hog, node, LOOM_ACCESS_WRITE, &h));
  loom_plan_run_options opts;
  loom_plan_run_options_init(&opts);
  opts.wait_seconds = 0.3;
  double t0 = now_s();
  loom_status s = loom_plan_run_with_options(ctx, plan, &opts, in, 2, out, 2, NULL);
  double took = now_s() - t0;
  ASSERT_EQ(s, LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_TRUE(strstr(loom_last_error(), "waited 0.3 s for room") != NULL);
  ASSERT_TRUE(took >= 0.29 && took < 10.0);
  ASSERT_OK(loom_buffer_release(hog, &h));
  loom_buffer_free(hog);
  ASSERT_OK(loom_plan_run_with_options(ctx, plan, &opts, in, 2, out, 2, NULL));
  loom_tensor_deinit(&out[0]);
  loom_tensor_deinit(&out[1]);
  su_tensors_free(in, 2);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
  loom_context_destroy(ctx);
}
