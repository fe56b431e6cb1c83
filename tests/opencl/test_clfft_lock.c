/* Loom's calls into clFFT never overlap (issue 16, finding 8): clFFT takes its own locks in one
 * order when it bakes a plan and in the other when it destroys plans, so two threads inside it
 * at once, one planning on a new context while another closes its own, could deadlock. Threads
 * here do exactly that, each with a context of its own, and the count the clFFT layer keeps of
 * the threads inside it at once must never pass one. */
#if LOOM_HAVE_OPENCL
#include <pthread.h>
#include <string.h>

#include "backends/opencl/opencl_backend.h"
#include "gpu_util.h"
#include "loom/plan.h"

enum { LOCK_THREADS = 4, LOCK_ROUNDS = 3 };

typedef struct lock_job {
  const loom_graph *g;
  const loom_tensor *in;
  loom_status status;
  char error[256];
} lock_job;

static void *lock_worker(void *arg) {
  lock_job *j = arg;
  for (int32_t r = 0; r < LOCK_ROUNDS && !j->status; r++) {
    loom_context_options co;
    loom_context_options_init(&co);
    co.devices = "cpu0,ocl0";
    loom_context *ctx = NULL;
    loom_plan *plan = NULL;
    loom_runner runner = {"ocl0", 1 << 20};
    loom_tensor out;
    memset(&out, 0, sizeof out);
    loom_status s = loom_context_create(&co, &ctx);
    if (!s) s = loom_plan_split_by_memory(j->g, &runner, 1, &plan);
    if (!s) s = loom_plan_run(ctx, plan, j->in, 1, &out, 1, NULL);
    if (s) {
      j->status = s;
      snprintf(j->error, sizeof j->error, "%s", loom_last_error());
    } else if (!gt_close(j->in, &out, 1e-4, 1e-4, j->error, sizeof j->error)) {
      j->status = LOOM_ERR_INTERNAL; /* ifft(fft(z)) is not z: the message says where */
    }
    loom_tensor_deinit(&out);
    loom_plan_destroy(plan);
    loom_context_destroy(ctx); /* clFFT destroys this context's plans */
  }
  return NULL;
}

TEST(clfft_calls_never_overlap) {
  if (!gt_have_devices(LOOM_BACKEND_OPENCL)) return;
  loom_graph *g[LOCK_THREADS];
  loom_tensor in[LOCK_THREADS];
  lock_job jobs[LOCK_THREADS];
  pthread_t th[LOCK_THREADS];
  for (int32_t t = 0; t < LOCK_THREADS; t++) {
    int32_t n = 256 + 32 * t; /* a length per thread: each bakes its own plans */
    g[t] =
        gt_parse("graph f(z: c64[4,%d]) {\n  f = fft z axis=1\n  g = ifft f axis=1\n  return g\n}\n", (int)n);
    ASSERT_TRUE(g[t] != NULL);
    ASSERT_OK(gt_inputs(g[t], 11 + t, &in[t]));
    jobs[t] = (lock_job){g[t], &in[t], LOOM_OK, ""};
  }
  for (int32_t t = 0; t < LOCK_THREADS; t++)
    ASSERT_EQ(pthread_create(&th[t], NULL, lock_worker, &jobs[t]), 0);
  for (int32_t t = 0; t < LOCK_THREADS; t++) pthread_join(th[t], NULL);
  for (int32_t t = 0; t < LOCK_THREADS; t++) {
    if (jobs[t].status)
      loom_test_fail(__FILE__, __LINE__, "thread %d: %s: %s", (int)t, loom_status_string(jobs[t].status),
                     jobs[t].error);
    gt_tensors_free(&in[t], 1);
    loom_graph_destroy(g[t]);
  }
  int32_t most = loom__cl_clfft_most_inside();
  if (most == 0) {
    loom_test_skip("built without clFFT: the transforms ran Loom's own kernels");
    return;
  }
  ASSERT_EQ(most, 1);
}
#endif
