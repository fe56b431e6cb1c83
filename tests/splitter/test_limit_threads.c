/* A runner limit is the device's, not the run's (issue 16): threads running plans limited to
 * 4 MiB on one device of one shared context hold at most 4 MiB there together, each run either
 * succeeding with the results it has alone or failing cleanly with OUT_OF_MEMORY. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "loom/memory.h"
#include "loom/testing.h"
#include "split_util.h"

enum { THREADS = 4, ROUNDS = 4 };
#define LIMIT ((int64_t)4 << 20)

/* One 512 KiB input and a few values alive at once: a stage peak near 2 MiB, so that two runs
 * fit under 4 MiB and four do not. */
static const char *lir =
    "graph share(x: f32[131072]) {\n"
    "  a = exp x\n"
    "  b = mul a x\n"
    "  c = add b a\n"
    "  d = sub c x\n"
    "  return d\n"
    "}\n";

typedef struct shared_run {
  loom_context *ctx;
  const loom_plan *plan;
  const loom_tensor *in;
  const loom_tensor *ref; /* the plan's result run alone */
  int ok, oom;
  char failure[512];
} shared_run;

typedef struct worker {
  shared_run *run;
  int ok, oom;
  char failure[512];
} worker;

static void *work(void *arg) {
  worker *w = arg;
  for (int32_t r = 0; r < ROUNDS && !w->failure[0]; r++) {
    loom_tensor out;
    loom_status s = loom_plan_run(w->run->ctx, w->run->plan, w->run->in, 1, &out, 1, NULL);
    if (s == LOOM_OK) {
      if (memcmp(out.data, w->run->ref->data, sizeof(float) * 131072) != 0)
        snprintf(w->failure, sizeof w->failure, "a run's result differs from the run alone");
      loom_tensor_deinit(&out);
      w->ok++;
    } else if (s == LOOM_ERR_OUT_OF_MEMORY && strstr(loom_last_error(), "out of memory on ")) {
      if (out.data) snprintf(w->failure, sizeof w->failure, "a failed run left an output");
      w->oom++;
    } else {
      snprintf(w->failure, sizeof w->failure, "run failed: %s: %s", loom_status_string(s), loom_last_error());
    }
  }
  return NULL;
}

/* Runs THREADS x ROUNDS plans under `device`:4MiB on one context; checks the device's node. */
static void runs_share_the_limit(const char *device) {
  int64_t live = loom_testing_live_allocations();
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  int32_t index = -1;
  if (strcmp(device, "cpu0") != 0 && loom_context_find_device(ctx, device, &index) != LOOM_OK) {
    loom_context_destroy(ctx); /* no such device here: nothing to test */
    return;
  }
  loom_mem_manager *m = NULL;
  int32_t node = -1;
  ASSERT_OK(loom_context_memory(ctx, &m));
  ASSERT_OK(loom_mem_node_find(m, device, &node));
  loom_mem_node_stats before;
  ASSERT_OK(loom_mem_stats(m, node, &before));
  loom_graph *g = su_parse(lir);
  ASSERT_TRUE(g != NULL);
  loom_runner runner = {"", LIMIT};
  snprintf(runner.device, sizeof runner.device, "%s", device);
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split_by_memory(g, &runner, 1, &plan));
  loom_tensor *in = NULL, ref;
  ASSERT_OK(su_inputs(g, 3, &in));
  ASSERT_OK(loom_plan_run(ctx, plan, in, 1, &ref, 1, NULL));
  shared_run run = {.ctx = ctx, .plan = plan, .in = in, .ref = &ref};
  worker w[THREADS];
  pthread_t t[THREADS];
  memset(w, 0, sizeof w);
  for (int32_t i = 0; i < THREADS; i++) {
    w[i].run = &run;
    ASSERT_TRUE(pthread_create(&t[i], NULL, work, &w[i]) == 0);
  }
  int ok = 0, oom = 0;
  for (int32_t i = 0; i < THREADS; i++) {
    pthread_join(t[i], NULL);
    if (w[i].failure[0])
      loom_test_fail(__FILE__, __LINE__, "%s, thread %d: %s", device, (int)i, w[i].failure);
    ok += w[i].ok;
    oom += w[i].oom;
  }
  ASSERT_EQ(ok + oom, THREADS * ROUNDS);
  ASSERT_TRUE(ok > 0);
  loom_mem_node_stats after;
  ASSERT_OK(loom_mem_stats(m, node, &after));
  if (after.peak_in_use > LIMIT)
    loom_test_fail(__FILE__, __LINE__, "%s held %lld bytes at its peak, over its 4 MiB runner limit", device,
                   (long long)after.peak_in_use);
  ASSERT_EQ(after.limit, before.limit); /* the runner limits are out of force again */
  /* A run alone still fits afterwards. */
  loom_tensor again;
  ASSERT_OK(loom_plan_run(ctx, plan, in, 1, &again, 1, NULL));
  loom_tensor_deinit(&again);
  loom_tensor_deinit(&ref);
  su_tensors_free(in, 1);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
  loom_context_destroy(ctx);
  ASSERT_EQ(loom_testing_live_allocations(), live);
}

TEST(runner_limits_hold_across_threads_on_cpu0) {
  runs_share_the_limit("cpu0");
}

TEST(runner_limits_hold_across_threads_on_ocl0) {
  runs_share_the_limit("ocl0");
}
