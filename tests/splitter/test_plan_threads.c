/* Four threads running plans on one shared context at once, on cpu0 and on ocl0 (PoCL), each
 * also moving a buffer of its own between the device's node and the host. Every run must finish
 * with the results a lone run gives, each stage within its runner's limit, its stages waiting
 * for room the others' hold (admission, issue 32); a move, outside any run, may fail cleanly with
 * OUT_OF_MEMORY where the runs' stages fill the device (at least one must finish). Built with
 * -DLOOM_TSAN=ON (`make check-tsan`) this is the race detector's test of the runtime, the
 * memory manager and the backends shared by concurrent runs. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "split_util.h"

/* clFFT 2.12's clfftDestroyPlan deletes through a pointer to the wrong class (ASan's
 * new-delete-type-mismatch inside libclFFT, as tests/opencl.cmake says); Loom is C and has no
 * new or delete of its own to check. */
const char *__asan_default_options(void);
__attribute__((visibility("default"))) const char *__asan_default_options(void) {
  return "new_delete_type_mismatch=0";
}

enum { THREADS = 4, RUNS = 3, MOVES = 4, MOVE_FLOATS = 4096 };

/* dot, elementwise, a reduction and an FFT (clFFT on ocl0), cut into stages by a small limit. */
static const char *const threads_lir =
    "graph t(x: f32[64,128], y: f32[128,64], z: c64[4,256]) {\n"
    "  a = dot x y\n  b = exp a\n  c = reduce_sum b axes=[1]\n  d = dot b a\n"
    "  f = fft z axis=1\n  g = ifft f axis=1\n  h = reduce_sum g axes=[1]\n"
    "  return c, d, h\n}\n";

typedef struct job {
  loom_context *ctx;
  const loom_plan *plan;
  const loom_tensor *in, *want;
  int32_t n_out, node, host;
  int32_t id;
  int32_t runs_ok, moves_ok; /* what finished; the rest ran out of memory, cleanly */
  char failure[512];
} job;

static void fail(job *j, const char *what, loom_status s) {
  if (!j->failure[0])
    snprintf(j->failure, sizeof j->failure, "thread %d: %s: %s: %s", (int)j->id, what, loom_status_string(s),
             loom_last_error());
}

/* Runs the plan once. A runner's limit is its device's, shared by every run on it (issue 16,
 * finding 7); a stage that does not fit beside the others' waits for them (issue 32), so every
 * run finishes. */
static void run_once(job *j) {
  loom_tensor out[3];
  memset(out, 0, sizeof out);
  loom_plan_stats stats = {0};
  loom_status s = loom_plan_run(j->ctx, j->plan, j->in, 3, out, j->n_out, &stats);
  if (s) {
    loom_plan_stats_deinit(&stats); /* filled on failure too */
    fail(j, "loom_plan_run", s);
    return;
  }
  j->runs_ok++;
  for (int32_t k = 0; k < j->n_out; k++)
    if (su_worst(&j->want[k], &out[k], 1e-4, 1e-4) > 1) fail(j, "results differ from a lone run", LOOM_OK);
  for (int32_t st = 0; st < stats.n_stages; st++)
    if (stats.stages[st].peak_bytes > stats.stages[st].limit_bytes)
      fail(j, "a stage passed its limit", LOOM_OK);
  for (int32_t k = 0; k < j->n_out; k++) loom_tensor_deinit(&out[k]);
  loom_plan_stats_deinit(&stats);
}

/* A buffer of the thread's own, written on the device's node, moved to the host and back. */
static void move_buffer(job *j, loom_mem_manager *m) {
  float *data = malloc(sizeof(float) * MOVE_FLOATS), *back = malloc(sizeof(float) * MOVE_FLOATS);
  loom_buffer *b = NULL;
  loom_status s = data && back ? LOOM_OK : LOOM_ERR_OUT_OF_MEMORY;
  for (int32_t i = 0; !s && i < MOVE_FLOATS; i++) data[i] = (float)(j->id * MOVE_FLOATS + i);
  if (!s) s = loom_buffer_allocate(m, sizeof(float) * MOVE_FLOATS, LOOM_F32, j->node, 0, &b);
  if (!s) s = loom_buffer_write(b, 0, data, sizeof(float) * MOVE_FLOATS);
  for (int32_t k = 0; !s && k < MOVES; k++) s = loom_buffer_migrate(b, k % 2 ? j->node : j->host);
  if (!s) s = loom_buffer_read(b, 0, back, sizeof(float) * MOVE_FLOATS);
  if (s == LOOM_ERR_OUT_OF_MEMORY) /* the node held by the other threads' stages */
    ;
  else if (s)
    fail(j, "moving a buffer", s);
  else if (memcmp(data, back, sizeof(float) * MOVE_FLOATS) != 0)
    fail(j, "a moved buffer changed", LOOM_OK);
  else
    j->moves_ok++;
  loom_buffer_free(b);
  free(data);
  free(back);
}

static void *worker(void *arg) {
  job *j = arg;
  loom_mem_manager *m = NULL;
  loom_status s = loom_context_memory(j->ctx, &m);
  if (s) {
    fail(j, "loom_context_memory", s);
    return NULL;
  }
  for (int32_t r = 0; r < RUNS && !j->failure[0]; r++) {
    run_once(j);
    move_buffer(j, m);
  }
  return NULL;
}

/* Plans the graph for `runners` and runs it from THREADS threads on one context. */
static void run_threads(const char *devices, const loom_runner *runners, int32_t n_runners) {
  loom_context_options co;
  loom_context_options_init(&co);
  co.devices = devices;
  loom_context *ctx = NULL;
  loom_status s = loom_context_create(&co, &ctx);
  if (s == LOOM_ERR_NOT_FOUND) {
    loom_test_skip("%s", loom_last_error());
    return;
  }
  ASSERT_OK(s);
  loom_graph *g = su_parse(threads_lir), *prepared = NULL;
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(loom_graph_optimize_for_runners(g, runners, n_runners, NULL, &prepared, NULL, NULL, 0));
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split_by_memory(prepared, runners, n_runners, &plan));
  ASSERT_TRUE(loom_plan_stage_count(plan) >= 2);
  loom_tensor *in = NULL, *want = NULL;
  ASSERT_OK(su_inputs(g, 7, &in));
  ASSERT_OK(su_run_graph(g, in, &want));
  loom_mem_manager *m = NULL;
  ASSERT_OK(loom_context_memory(ctx, &m));
  int32_t node = -1, host = -1;
  ASSERT_OK(loom_mem_node_find(m, runners[0].device, &node));
  ASSERT_OK(loom_mem_node_find(m, "cpu0", &host));
  job jobs[THREADS];
  pthread_t th[THREADS];
  for (int32_t t = 0; t < THREADS; t++) {
    jobs[t] = (job){ctx, plan, in, want, 3, node, host, t, 0, 0, ""};
    ASSERT_EQ(pthread_create(&th[t], NULL, worker, &jobs[t]), 0);
  }
  for (int32_t t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  int32_t runs_ok = 0, moves_ok = 0;
  for (int32_t t = 0; t < THREADS; t++) {
    if (jobs[t].failure[0]) loom_test_fail(__FILE__, __LINE__, "%s", jobs[t].failure);
    runs_ok += jobs[t].runs_ok;
    moves_ok += jobs[t].moves_ok;
  }
  printf("    %d of %d runs and %d of %d moves finished, the other moves out of memory\n", (int)runs_ok,
         THREADS * RUNS, (int)moves_ok, THREADS * RUNS);
  ASSERT_EQ(runs_ok, THREADS * RUNS);
  ASSERT_TRUE(moves_ok > 0);
  su_tensors_free(in, 3);
  su_tensors_free(want, 3);
  loom_plan_destroy(plan);
  loom_graph_destroy(prepared);
  loom_graph_destroy(g);
  loom_context_destroy(ctx);
}

TEST(plan_threads_share_a_context_on_cpu0) {
  loom_runner r[2] = {{"cpu0", 96 << 10}, {"cpu0", 128 << 10}};
  run_threads("cpu0", r, 2);
}

/* Whether ocl0 is an OpenCL device here, not a GPU that CUDA runs and OpenCL lists too (an
 * NVIDIA GPU with both drivers is cuda0, "also ocl0", its memory CUDA's). */
static bool ocl0_runs_on_opencl(void) {
  loom_context_options co;
  loom_context_options_init(&co);
  co.devices = "ocl0";
  loom_context *ctx = NULL;
  int32_t i = -1;
  loom_device_info info;
  bool yes = !loom_context_create(&co, &ctx) && !loom_context_find_device(ctx, "ocl0", &i) &&
             !loom_context_device_info(ctx, i, &info) && strncmp(info.id, "ocl", 3) == 0;
  loom_context_destroy(ctx);
  return yes;
}

TEST(plan_threads_share_a_context_on_ocl0) {
  setenv("POCL_DEVICES", "pthread pthread", 0);
  setenv("POCL_MEMORY_LIMIT", "1", 0);
  if (!ocl0_runs_on_opencl()) {
    loom_test_skip("ocl0 is no OpenCL device here (absent, or a GPU that CUDA runs)");
    return;
  }
  loom_runner r[2] = {{"ocl0", 96 << 10}, {"cpu0", 128 << 10}};
  run_threads("cpu0,ocl0", r, 2);
}

/* Threads that each make their own context, run an FFT there (clFFT bakes a plan) and destroy
 * it (clFFT deletes its plans) while the others are still planning: clFFT takes its locks in
 * opposite orders in the two, which ThreadSanitizer reported as a lock-order inversion until
 * Loom serialized its calls into clFFT (issue 16, finding 8). */
typedef struct own_job {
  const loom_graph *g;
  const loom_tensor *in, *want;
  int32_t id;
  char failure[512];
} own_job;

static void *own_context_worker(void *arg) {
  own_job *j = arg;
  for (int32_t r = 0; r < RUNS && !j->failure[0]; r++) {
    loom_context_options co;
    loom_context_options_init(&co);
    co.devices = "cpu0,ocl0";
    loom_context *ctx = NULL;
    loom_runner runner = {"ocl0", 1 << 20};
    loom_plan *plan = NULL;
    loom_tensor out;
    memset(&out, 0, sizeof out);
    loom_status s = loom_context_create(&co, &ctx);
    if (!s) s = loom_plan_split_by_memory(j->g, &runner, 1, &plan);
    if (!s) s = loom_plan_run(ctx, plan, j->in, 1, &out, 1, NULL);
    if (s && !j->failure[0])
      snprintf(j->failure, sizeof j->failure, "thread %d: %s: %s", (int)j->id, loom_status_string(s),
               loom_last_error());
    else if (!s && su_worst(j->want, &out, 1e-4, 1e-4) > 1 && !j->failure[0])
      snprintf(j->failure, sizeof j->failure, "thread %d: results differ from a lone run", (int)j->id);
    loom_tensor_deinit(&out);
    loom_plan_destroy(plan);
    loom_context_destroy(ctx);
  }
  return NULL;
}

TEST(plan_threads_each_with_a_context_of_their_own_on_ocl0) {
  setenv("POCL_DEVICES", "pthread pthread", 0);
  setenv("POCL_MEMORY_LIMIT", "1", 0);
  loom_context_options co;
  loom_context_options_init(&co);
  co.devices = "cpu0,ocl0";
  loom_context *probe = NULL;
  loom_status s = loom_context_create(&co, &probe);
  loom_context_destroy(probe);
  if (s == LOOM_ERR_NOT_FOUND) {
    loom_test_skip("%s", loom_last_error());
    return;
  }
  ASSERT_OK(s);
  loom_graph *g =
      su_parse("graph f(z: c64[8,512]) {\n  f = fft z axis=1\n  g = ifft f axis=1\n  return g\n}\n");
  ASSERT_TRUE(g != NULL);
  loom_tensor *in = NULL, *want = NULL;
  ASSERT_OK(su_inputs(g, 3, &in));
  ASSERT_OK(su_run_graph(g, in, &want));
  own_job jobs[THREADS];
  pthread_t th[THREADS];
  for (int32_t t = 0; t < THREADS; t++) {
    jobs[t] = (own_job){g, in, want, t, ""};
    ASSERT_EQ(pthread_create(&th[t], NULL, own_context_worker, &jobs[t]), 0);
  }
  for (int32_t t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  for (int32_t t = 0; t < THREADS; t++)
    if (jobs[t].failure[0]) loom_test_fail(__FILE__, __LINE__, "%s", jobs[t].failure);
  su_tensors_free(in, 1);
  su_tensors_free(want, 1);
  loom_graph_destroy(g);
}
