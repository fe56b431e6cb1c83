/* loom_run and its asynchronous form (issue 29): eight runs in flight on one context from four
 * threads, on cpu0, ocl0 and ocl1 (PoCL), each equal to the same run made alone; a run that
 * starts after another and reads its outputs, on host tensors and on resident buffers; and the
 * errors of the calls. Run under ThreadSanitizer in CI (`make check-tsan`, module splitter). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "split_util.h"

enum { THREADS = 4, PER_THREAD = 2, OUTS = 2 };

static const char *const async_lir =
    "graph t(x: f32[64,96], y: f32[96,64]) {\n"
    "  a = dot x y\n  b = tanh a\n  c = reduce_sum b axes=[1]\n  d = dot b a\n"
    "  return c, d\n}\n";

/* The devices of this machine among cpu0, ocl0, ocl1 ("cpu0" at least), for the context. */
static int32_t devices_here(char ids[3][8]) {
  int32_t n = 0;
  strcpy(ids[n++], "cpu0");
  const char *ocl[2] = {"ocl0", "ocl1"};
  for (int32_t i = 0; i < 2; i++) {
    loom_context_options co;
    loom_context_options_init(&co);
    co.devices = ocl[i];
    loom_context *ctx = NULL;
    int32_t k = -1;
    loom_device_info info;
    bool yes = !loom_context_create(&co, &ctx) && !loom_context_find_device(ctx, ocl[i], &k) &&
               !loom_context_device_info(ctx, k, &info) && strncmp(info.id, "ocl", 3) == 0;
    loom_context_destroy(ctx);
    if (yes) strcpy(ids[n++], ocl[i]);
  }
  return n;
}

typedef struct async_job {
  loom_context *ctx;
  const loom_plan *const *plans; /* one per device */
  int32_t n_plans;
  const loom_tensor *in;
  const loom_tensor *want;
  int32_t id;
  char failure[512];
} async_job;

static void job_fail(async_job *j, const char *what, loom_status s) {
  if (!j->failure[0])
    snprintf(j->failure, sizeof j->failure, "thread %d: %s: %s: %s", (int)j->id, what, loom_status_string(s),
             loom_last_error());
}

/* Submits PER_THREAD runs at once (each on the plan of another device), completes the first by
 * polling loom_run_test and the others by loom_run_wait, and compares every result. */
static void *async_worker(void *arg) {
  async_job *j = arg;
  loom_tensor out[PER_THREAD][OUTS];
  loom_run_stats stats[PER_THREAD];
  loom_run_handle *h[PER_THREAD] = {NULL};
  memset(out, 0, sizeof out);
  memset(stats, 0, sizeof stats);
  for (int32_t r = 0; r < PER_THREAD; r++) {
    const loom_plan *plan = j->plans[(j->id + r) % j->n_plans];
    loom_status s = loom_run_submit(j->ctx, plan, NULL, j->in, 2, out[r], OUTS, &stats[r], &h[r]);
    if (s) job_fail(j, "loom_run_submit", s);
  }
  for (int32_t r = 0; r < PER_THREAD; r++) {
    if (!h[r]) continue;
    loom_status s = LOOM_OK;
    if (r == 0) {
      bool done = false;
      while (!done && !s) s = loom_run_test(h[r], &done);
    } else {
      s = loom_run_wait(h[r]);
    }
    if (s) job_fail(j, "the run", s);
    for (int32_t k = 0; !s && k < OUTS; k++)
      if (su_worst(&j->want[k], &out[r][k], 1e-4, 1e-4) > 1) job_fail(j, "results differ from a lone run", s);
    for (int32_t st = 0; !s && st < stats[r].n_stages; st++)
      if (stats[r].stages[st].peak_bytes > stats[r].stages[st].limit_bytes)
        job_fail(j, "a stage passed its limit", s);
    for (int32_t k = 0; k < OUTS; k++) loom_tensor_deinit(&out[r][k]);
    loom_run_stats_deinit(&stats[r]);
  }
  return NULL;
}

/* A plan of the graph on one device, in stages of a small limit. */
static loom_status plan_on(const loom_graph *g, const char *device, loom_graph **prepared, loom_plan **plan) {
  loom_runner r = {"", 96 << 10};
  snprintf(r.device, sizeof r.device, "%s", device);
  loom_status s = loom_graph_optimize_for_runners(g, &r, 1, NULL, prepared, NULL, NULL, 0);
  return s ? s : loom_plan_split_by_memory(*prepared, &r, 1, plan);
}

TEST(eight_runs_in_flight_from_four_threads) {
  setenv("POCL_DEVICES", "pthread pthread", 0);
  setenv("POCL_MEMORY_LIMIT", "1", 0);
  char ids[3][8];
  int32_t n = devices_here(ids);
  char list[32] = "";
  for (int32_t i = 0; i < n; i++)
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? "," : "", ids[i]);
  printf("    devices: %s\n", list);
  loom_context_options co;
  loom_context_options_init(&co);
  co.devices = list;
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(&co, &ctx));
  loom_graph *g = su_parse(async_lir);
  ASSERT_TRUE(g != NULL);
  loom_graph *prepared[3] = {NULL};
  loom_plan *plans[3] = {NULL};
  for (int32_t i = 0; i < n; i++) {
    ASSERT_OK(plan_on(g, ids[i], &prepared[i], &plans[i]));
  }
  loom_tensor *in = NULL, *want = NULL;
  ASSERT_OK(su_inputs(g, 11, &in));
  ASSERT_OK(su_run_graph(g, in, &want));
  async_job jobs[THREADS];
  pthread_t th[THREADS];
  for (int32_t t = 0; t < THREADS; t++) {
    jobs[t] = (async_job){ctx, (const loom_plan *const *)plans, n, in, want, t, ""};
    ASSERT_EQ(pthread_create(&th[t], NULL, async_worker, &jobs[t]), 0);
  }
  for (int32_t t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  for (int32_t t = 0; t < THREADS; t++)
    if (jobs[t].failure[0]) loom_test_fail(__FILE__, __LINE__, "%s", jobs[t].failure);
  su_tensors_free(in, 2);
  su_tensors_free(want, OUTS);
  for (int32_t i = 0; i < n; i++) {
    loom_plan_destroy(plans[i]);
    loom_graph_destroy(prepared[i]);
  }
  loom_graph_destroy(g);
  loom_context_destroy(ctx);
}

/* The second graph reads the first's result: square then sum. */
static const char *const first_lir = "graph f(x: f32[128,32]) {\n  y = mul x x\n  return y\n}\n";
static const char *const second_lir =
    "graph s(y: f32[128,32]) {\n  z = reduce_sum y axes=[1]\n  return z\n}\n";

static void chained(const char *device, bool resident) {
  loom_context_options co;
  loom_context_options_init(&co);
  co.devices = strcmp(device, "cpu0") == 0 ? "cpu0" : device;
  loom_context *ctx = NULL;
  loom_status s = loom_context_create(&co, &ctx);
  if (s == LOOM_ERR_NOT_FOUND) {
    loom_test_skip("%s", loom_last_error());
    return;
  }
  ASSERT_OK(s);
  loom_graph *g1 = su_parse(first_lir), *g2 = su_parse(second_lir);
  ASSERT_TRUE(g1 && g2);
  loom_runner r = {"", 1 << 20};
  snprintf(r.device, sizeof r.device, "%s", device);
  loom_plan *p1 = NULL, *p2 = NULL;
  ASSERT_OK(loom_plan_split_by_memory(g1, &r, 1, &p1));
  ASSERT_OK(loom_plan_split_by_memory(g2, &r, 1, &p2));
  loom_tensor *in = NULL, *mid = NULL, *want = NULL;
  ASSERT_OK(su_inputs(g1, 5, &in));
  ASSERT_OK(su_run_graph(g1, in, &mid));
  ASSERT_OK(su_run_graph(g2, mid, &want));
  loom_run_handle *h1 = NULL, *h2 = NULL;
  loom_run_options o2;
  loom_run_options_init(&o2);
  o2.after = &h1;
  o2.n_after = 1;
  loom_tensor y, z;
  memset(&y, 0, sizeof y);
  memset(&z, 0, sizeof z);
  if (!resident) {
    ASSERT_OK(loom_run_submit(ctx, p1, NULL, in, 1, &y, 1, NULL, &h1));
    ASSERT_OK(loom_run_submit(ctx, p2, &o2, &y, 1, &z, 1, NULL, &h2));
    ASSERT_OK(loom_run_wait(h1)); /* completing the first before the second is allowed */
    ASSERT_OK(loom_run_wait(h2));
  } else {
    loom_mem_manager *m = NULL;
    int32_t node = -1;
    ASSERT_OK(loom_context_memory(ctx, &m));
    ASSERT_OK(loom_mem_node_find(m, device, &node));
    loom_buffer *x = NULL, *yb = NULL, *zb = NULL;
    int64_t bytes = 0;
    ASSERT_OK(loom_type_bytes(&in[0].type, &bytes));
    ASSERT_OK(loom_buffer_allocate(m, bytes, LOOM_F32, node, LOOM_MEM_DEVICE_LOCAL, &x));
    ASSERT_OK(loom_buffer_write(x, 0, in[0].data, bytes));
    loom_mem_node_stats before, after;
    ASSERT_OK(loom_mem_stats(m, node, &before));
    ASSERT_OK(loom_run_buffers_submit(ctx, p1, NULL, &x, 1, &yb, 1, NULL, &h1));
    ASSERT_OK(loom_run_buffers_submit(ctx, p2, &o2, &yb, 1, &zb, 1, NULL, &h2));
    ASSERT_OK(loom_run_wait(h2));
    ASSERT_OK(loom_run_wait(h1));
    ASSERT_OK(loom_mem_stats(m, node, &after));
    /* The first run's result stayed on the device for the second: nothing left the node. */
    ASSERT_EQ(after.bytes_out, before.bytes_out);
    ASSERT_OK(loom_tensor_init(&z, &want[0].type));
    int64_t zbytes = 0;
    ASSERT_OK(loom_type_bytes(&z.type, &zbytes));
    ASSERT_OK(loom_buffer_read(zb, 0, z.data, zbytes));
    loom_buffer_free(x);
    loom_buffer_free(yb);
    loom_buffer_free(zb);
  }
  ASSERT_TRUE(su_worst(&want[0], &z, 1e-5, 1e-5) <= 1);
  loom_tensor_deinit(&y);
  loom_tensor_deinit(&z);
  su_tensors_free(in, 1);
  su_tensors_free(mid, 1);
  su_tensors_free(want, 1);
  loom_plan_destroy(p1);
  loom_plan_destroy(p2);
  loom_graph_destroy(g1);
  loom_graph_destroy(g2);
  loom_context_destroy(ctx);
}

TEST(run_after_another_reads_its_outputs_on_cpu0) {
  chained("cpu0", false);
}

TEST(run_after_another_on_resident_buffers_of_ocl0) {
  setenv("POCL_DEVICES", "pthread pthread", 0);
  setenv("POCL_MEMORY_LIMIT", "1", 0);
  chained("ocl0", true);
}

TEST(run_after_a_failed_run_fails_naming_it) {
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  loom_graph *g1 = su_parse(first_lir), *g2 = su_parse(second_lir);
  ASSERT_TRUE(g1 && g2);
  loom_runner r = {"cpu0", 1 << 20};
  loom_plan *p1 = NULL, *p2 = NULL;
  ASSERT_OK(loom_plan_split_by_memory(g1, &r, 1, &p1));
  ASSERT_OK(loom_plan_split_by_memory(g2, &r, 1, &p2));
  /* The first run is given an input of the wrong type: it fails, and so does the second. */
  loom_tensor bad, y, z;
  memset(&y, 0, sizeof y);
  memset(&z, 0, sizeof z);
  loom_type t = {LOOM_F32, 2, {3, 3}};
  ASSERT_OK(loom_tensor_init(&bad, &t));
  loom_run_handle *h1 = NULL, *h2 = NULL;
  loom_run_options o2;
  loom_run_options_init(&o2);
  o2.after = &h1;
  o2.n_after = 1;
  ASSERT_OK(loom_run_submit(ctx, p1, NULL, &bad, 1, &y, 1, NULL, &h1));
  ASSERT_OK(loom_run_submit(ctx, p2, &o2, &y, 1, &z, 1, NULL, &h2));
  ASSERT_STATUS(loom_run_wait(h2), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "(options.after[0]) failed");
  ASSERT_STATUS(loom_run_wait(h1), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(y.data == NULL && z.data == NULL);
  /* The synchronous call takes no `after`, and checks its options. */
  ASSERT_STATUS(loom_run(ctx, p2, &o2, &y, 1, &z, 1, NULL), LOOM_ERR_INVALID_ARGUMENT);
  loom_run_options o;
  loom_run_options_init(&o);
  o.recover = true;
  o.recover_tries = 9;
  ASSERT_STATUS(loom_run(ctx, p1, &o, &bad, 1, &y, 1, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "recover_tries is 9");
  ASSERT_STATUS(loom_run_wait(NULL), LOOM_ERR_INVALID_ARGUMENT);
  loom_tensor_deinit(&bad);
  loom_plan_destroy(p1);
  loom_plan_destroy(p2);
  loom_graph_destroy(g1);
  loom_graph_destroy(g2);
  loom_context_destroy(ctx);
}
