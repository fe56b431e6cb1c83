/* The caller's memory as buffers (loom/opencl.h: loom_buffer_wrap_cl_mem and the ordering
 * between the caller's queue and the manager's), on PoCL with a context of the test's own;
 * and graph runs on buffers (loom_graph_run_buffers), chained, on cpu0. */
#include "hmm_test.h"

/* y = 2x + 1 on f32[4096]: run three times, each run's output the next one's input. */
TEST(hmm_run_buffers_chained_on_cpu0) {
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  loom_mem_manager *m = NULL;
  ASSERT_OK(loom_context_memory(ctx, &m));
  const char *text =
      "graph affine(x: f32[4096]) {\n  two = fill value=2 : f32[4096]\n  one = fill value=1 : f32[4096]\n"
      "  y = mul x two\n  z = add y one\n  return z\n}\n";
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_parse(text, strlen(text), "affine.lir", &g));
  int32_t host = hmm_node(m, "cpu0");
  float x[4096], want[4096];
  for (int i = 0; i < 4096; i++) want[i] = x[i] = (float)(i % 100) - 50.0f;
  loom_buffer *b = NULL;
  ASSERT_OK(loom_buffer_allocate(m, sizeof x, LOOM_F32, host, 0, &b));
  ASSERT_OK(loom_buffer_write(b, 0, x, sizeof x));
  for (int round = 0; round < 3; round++) {
    loom_buffer *out = NULL;
    loom_run_stats stats;
    ASSERT_OK(loom_graph_run_buffers(ctx, "cpu0", g, &b, 1, &out, 1, &stats));
    ASSERT_TRUE(out != NULL);
    loom_buffer_free(b);
    b = out;
    for (int i = 0; i < 4096; i++) want[i] = 2.0f * want[i] + 1.0f;
  }
  float got[4096];
  ASSERT_OK(loom_buffer_read(b, 0, got, sizeof got));
  for (int i = 0; i < 4096; i++) ASSERT_EQ(got[i], want[i]); /* small integers: exact */

  /* Counts and buffers are checked against the graph. */
  loom_buffer *outs[2] = {b, b}, *out = NULL;
  ASSERT_EQ(loom_graph_run_buffers(ctx, "cpu0", g, &b, 1, outs, 2, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(outs[0] == NULL && outs[1] == NULL);
  loom_buffer *small = NULL, *none = NULL;
  ASSERT_OK(loom_buffer_allocate(m, 16, LOOM_F32, host, 0, &small));
  ASSERT_EQ(loom_graph_run_buffers(ctx, "cpu0", g, &small, 1, &out, 1, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "input 1 (x): its buffer holds 16 bytes");
  ASSERT_EQ(loom_graph_run_buffers(ctx, "cpu0", g, &none, 1, &out, 1, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "NULL buffer");
  loom_buffer_free(small);
  loom_buffer_free(b);
  loom_graph_destroy(g);
  loom_context_destroy(ctx);
}

#if LOOM_HAVE_OPENCL
#include <pthread.h>
#include <time.h>

#include "loom/opencl.h"

/* The test's own OpenCL objects on the device of node `node`. */
typedef struct own_cl {
  cl_context context;
  cl_command_queue queue;
  cl_mem mem;
} own_cl;

static bool own_init(loom_context *ctx, loom_mem_manager *m, int32_t node, size_t bytes, own_cl *o) {
  memset(o, 0, sizeof *o);
  loom_mem_node_info info;
  cl_device_id device = NULL;
  if (loom_mem_node_info_get(m, node, &info) || loom_context_device_cl(ctx, info.device_index, NULL, &device))
    return false;
  cl_int err = CL_SUCCESS;
  o->context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
  if (err == CL_SUCCESS) o->queue = clCreateCommandQueueWithProperties(o->context, device, NULL, &err);
  if (err == CL_SUCCESS) o->mem = clCreateBuffer(o->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
  return err == CL_SUCCESS;
}

static void own_deinit(own_cl *o) {
  if (o->mem) clReleaseMemObject(o->mem);
  if (o->queue) clReleaseCommandQueue(o->queue);
  if (o->context) clReleaseContext(o->context);
}

static cl_uint ref_count(cl_mem mem) {
  cl_uint n = 0;
  clGetMemObjectInfo(mem, CL_MEM_REFERENCE_COUNT, sizeof n, &n, NULL);
  return n;
}

static loom_mem_storage storage_of(loom_buffer *b, int32_t node) {
  loom_buffer_node_info ni;
  loom_buffer_node_info_get(b, node, &ni);
  return ni.storage;
}

/* A manager over the test context's devices with no limits from the environment. */
static loom_mem_manager *make_manager(loom_context *ctx, int32_t *out_node) {
  loom_mem_manager_options o;
  hmm_test_options(&o, LOOM_MEM_MODE_AUTO, LOOM_MEM_POLICY_AGGRESSIVE);
  loom_mem_manager *m = NULL;
  if (loom_mem_manager_create(ctx, &o, &m)) return NULL;
  /* The first node Loom manages through OpenCL (not "ocl0" by name: where CUDA drives a GPU
   * that OpenCL shows too, that device's node is CUDA's). */
  *out_node = -1;
  for (int32_t i = 0; i < loom_mem_node_count(m) && *out_node < 0; i++) {
    loom_mem_node_info info;
    if (loom_mem_node_info_get(m, i, &info) == LOOM_OK && info.kind == LOOM_MEMORY_DEVICE &&
        (info.storages & LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_CL_BUFFER)))
      *out_node = i;
  }
  return m;
}

/* The caller's cl_mem is the buffer's copy on the node: read there with no copy, written by
 * Loom there, not counted, not released, and pinned for good. */
TEST(hmm_interop_wrap_cl_mem) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  int32_t node = -1;
  loom_mem_manager *m = make_manager(ctx, &node);
  ASSERT_TRUE(m != NULL);
  if (!hmm_need_opencl(m, 1)) {
    loom_mem_manager_destroy(m);
    loom_context_destroy(ctx);
    return;
  }
  const int64_t n = 1 << 20;
  own_cl o;
  ASSERT_TRUE(own_init(ctx, m, node, (size_t)n, &o));
  uint8_t *pattern = malloc((size_t)n), *back = malloc((size_t)n);
  ASSERT_TRUE(pattern && back);
  hmm_fill(pattern, n, 7);
  /* Left running on the test's queue: the manager's queue is told to wait for it. */
  ASSERT_EQ(clEnqueueWriteBuffer(o.queue, o.mem, CL_FALSE, 0, (size_t)n, pattern, 0, NULL, NULL), CL_SUCCESS);
  loom_buffer *b = NULL;
  ASSERT_OK(loom_buffer_wrap_cl_mem(m, node, o.mem, n - 16, LOOM_U8, &b));
  ASSERT_OK(loom_mem_node_cl_wait(m, node, o.queue));
  loom_buffer_node_info ni;
  ASSERT_OK(loom_buffer_node_info_get(b, node, &ni));
  ASSERT_EQ(ni.state, LOOM_MEM_OWNER);
  ASSERT_EQ(ni.storage, LOOM_MEM_STORAGE_CL_BUFFER);
  loom_mem_node_stats st;
  ASSERT_OK(loom_mem_stats(m, node, &st));
  ASSERT_EQ(st.live_bytes, 0); /* the caller's memory, not the node's */
  ASSERT_EQ(hmm_buffer_mismatch(b, n - 16, 7), -1);

  /* Acquired on the node, the handle is the caller's cl_mem itself. */
  loom_mem_handle h;
  ASSERT_OK(loom_buffer_acquire(b, node, LOOM_ACCESS_READ, &h));
  ASSERT_TRUE(loom_mem_handle_cl_mem(&h) == o.mem);
  ASSERT_OK(loom_buffer_release(b, &h));

  /* Written on the host, the caller's copy is stale until made valid there again; then the
   * caller reads Loom's data with its own queue. */
  ASSERT_OK(hmm_map_fill(b, n - 16, 9));
  ASSERT_OK(loom_buffer_node_info_get(b, node, &ni));
  ASSERT_EQ(ni.state, LOOM_MEM_INVALID);
  ASSERT_EQ(ni.storage, LOOM_MEM_STORAGE_CL_BUFFER); /* kept, not freed */
  ASSERT_OK(loom_buffer_prefetch(b, node));
  ASSERT_OK(loom_mem_node_cl_signal(m, node, o.queue));
  ASSERT_EQ(clEnqueueReadBuffer(o.queue, o.mem, CL_TRUE, 0, (size_t)(n - 16), back, 0, NULL, NULL),
            CL_SUCCESS);
  ASSERT_EQ(hmm_mismatch(back, n - 16, 9), -1);

  /* One pin is the wrap's own. */
  ASSERT_EQ(loom_buffer_unpin(b), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "the caller's memory");
  ASSERT_OK(loom_buffer_pin(b));
  ASSERT_OK(loom_buffer_unpin(b));

  cl_uint refs = ref_count(o.mem);
  loom_buffer_free(b);
  ASSERT_EQ(ref_count(o.mem), refs);
  ASSERT_OK(loom_mem_stats(m, node, &st));
  ASSERT_EQ(st.live_bytes, 0);
  ASSERT_TRUE(hmm_within_limits(m));
  /* The caller's memory is intact after Loom let go of it. */
  ASSERT_EQ(clEnqueueReadBuffer(o.queue, o.mem, CL_TRUE, 0, (size_t)(n - 16), back, 0, NULL, NULL),
            CL_SUCCESS);
  ASSERT_EQ(hmm_mismatch(back, n - 16, 9), -1);
  free(pattern);
  free(back);
  loom_mem_manager_destroy(m);
  own_deinit(&o);
  loom_context_destroy(ctx);
}

typedef struct release_later {
  cl_event gate;
} release_later;

/* Opens the gate a little later, from another thread: until then the caller's queue is held. */
static void *open_gate(void *arg) {
  release_later *r = arg;
  struct timespec ts = {0, 100 * 1000 * 1000};
  nanosleep(&ts, NULL);
  clSetUserEventStatus(r->gate, CL_COMPLETE);
  return NULL;
}

/* Loom's read waits for the caller's write, which waits for a gate the test opens later: had
 * the manager's queue not been told to wait, it would read the old contents. */
TEST(hmm_interop_wait_orders_after_the_callers_queue) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  int32_t node = -1;
  loom_mem_manager *m = make_manager(ctx, &node);
  ASSERT_TRUE(m != NULL);
  if (!hmm_need_opencl(m, 1)) {
    loom_mem_manager_destroy(m);
    loom_context_destroy(ctx);
    return;
  }
  const int64_t n = 1 << 16;
  own_cl o;
  ASSERT_TRUE(own_init(ctx, m, node, (size_t)n, &o));
  uint8_t *old = malloc((size_t)n), *pattern = malloc((size_t)n), *got = malloc((size_t)n);
  ASSERT_TRUE(old && pattern && got);
  hmm_fill(old, n, 1);
  hmm_fill(pattern, n, 2);
  ASSERT_EQ(clEnqueueWriteBuffer(o.queue, o.mem, CL_TRUE, 0, (size_t)n, old, 0, NULL, NULL), CL_SUCCESS);
  cl_int err = CL_SUCCESS;
  release_later r = {clCreateUserEvent(o.context, &err)};
  ASSERT_EQ(err, CL_SUCCESS);
  ASSERT_EQ(clEnqueueWriteBuffer(o.queue, o.mem, CL_FALSE, 0, (size_t)n, pattern, 1, &r.gate, NULL),
            CL_SUCCESS);
  loom_buffer *b = NULL;
  ASSERT_OK(loom_buffer_wrap_cl_mem(m, node, o.mem, n, LOOM_U8, &b));
  ASSERT_OK(loom_mem_node_cl_wait(m, node, o.queue));
  pthread_t opener;
  ASSERT_EQ(pthread_create(&opener, NULL, open_gate, &r), 0);
  loom_status s = loom_buffer_read(b, 0, got, n);
  pthread_join(opener, NULL);
  ASSERT_OK(s);
  ASSERT_EQ(hmm_mismatch(got, n, 2), -1);
  loom_buffer_free(b);
  clReleaseEvent(r.gate);
  free(old);
  free(pattern);
  free(got);
  loom_mem_manager_destroy(m);
  own_deinit(&o);
  loom_context_destroy(ctx);
}

/* The caller's read waits for Loom's queued write, which waits (through a second queue of the
 * caller's, held by a gate the test opens later) behind the gate: had the caller's queue not
 * been told to wait, it would read the old contents. */
TEST(hmm_interop_signal_orders_the_callers_queue_after) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  int32_t node = -1;
  loom_mem_manager *m = make_manager(ctx, &node);
  ASSERT_TRUE(m != NULL);
  if (!hmm_need_opencl(m, 1)) {
    loom_mem_manager_destroy(m);
    loom_context_destroy(ctx);
    return;
  }
  const int64_t n = 1 << 16;
  own_cl o;
  ASSERT_TRUE(own_init(ctx, m, node, (size_t)n, &o));
  uint8_t *old = malloc((size_t)n), *pattern = malloc((size_t)n), *got = malloc((size_t)n);
  ASSERT_TRUE(old && pattern && got);
  hmm_fill(old, n, 4);
  hmm_fill(pattern, n, 5);
  ASSERT_EQ(clEnqueueWriteBuffer(o.queue, o.mem, CL_TRUE, 0, (size_t)n, old, 0, NULL, NULL), CL_SUCCESS);
  cl_device_id device = NULL;
  ASSERT_EQ(clGetCommandQueueInfo(o.queue, CL_QUEUE_DEVICE, sizeof device, &device, NULL), CL_SUCCESS);
  cl_int err = CL_SUCCESS;
  cl_command_queue held = clCreateCommandQueueWithProperties(o.context, device, NULL, &err);
  ASSERT_EQ(err, CL_SUCCESS);
  release_later r = {clCreateUserEvent(o.context, &err)};
  ASSERT_EQ(err, CL_SUCCESS);
  ASSERT_EQ(clEnqueueBarrierWithWaitList(held, 1, &r.gate, NULL), CL_SUCCESS);
  loom_buffer *b = NULL;
  ASSERT_OK(loom_buffer_wrap_cl_mem(m, node, o.mem, n, LOOM_U8, &b));
  ASSERT_OK(loom_mem_node_cl_wait(m, node, held));
  /* Queued on the manager's queue, behind the gate; the host does not wait. */
  ASSERT_OK(loom__buffer_write_queued(b, 0, pattern, n));
  ASSERT_OK(loom_mem_node_cl_signal(m, node, o.queue));
  ASSERT_EQ(clEnqueueReadBuffer(o.queue, o.mem, CL_FALSE, 0, (size_t)n, got, 0, NULL, NULL), CL_SUCCESS);
  pthread_t opener;
  ASSERT_EQ(pthread_create(&opener, NULL, open_gate, &r), 0);
  ASSERT_EQ(clFinish(o.queue), CL_SUCCESS);
  pthread_join(opener, NULL);
  ASSERT_EQ(hmm_mismatch(got, n, 5), -1);
  loom_buffer_free(b);
  clReleaseEvent(r.gate);
  clReleaseCommandQueue(held);
  free(old);
  free(pattern);
  free(got);
  loom_mem_manager_destroy(m);
  own_deinit(&o);
  loom_context_destroy(ctx);
}

/* What cannot be wrapped or ordered is refused with a message, and changes nothing. */
TEST(hmm_interop_wrap_errors) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  int32_t node = -1;
  loom_mem_manager *m = make_manager(ctx, &node);
  ASSERT_TRUE(m != NULL);
  if (!hmm_need_opencl(m, 1)) {
    loom_mem_manager_destroy(m);
    loom_context_destroy(ctx);
    return;
  }
  own_cl o;
  ASSERT_TRUE(own_init(ctx, m, node, 4096, &o));
  loom_buffer *b = (loom_buffer *)&o; /* cleared on entry */
  ASSERT_EQ(loom_buffer_wrap_cl_mem(m, node, NULL, 16, LOOM_U8, &b), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(b == NULL);
  ASSERT_EQ(loom_buffer_wrap_cl_mem(m, node, o.mem, 8192, LOOM_U8, &b), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "8192 bytes asked of a cl_mem of 4096 bytes");
  ASSERT_EQ(loom_buffer_wrap_cl_mem(m, node, o.mem, 6, LOOM_F32, &b), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(loom_buffer_wrap_cl_mem(m, hmm_node(m, "host0"), o.mem, 16, LOOM_U8, &b),
            LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "not an OpenCL device's memory node");
  ASSERT_EQ(loom_mem_node_cl_wait(m, node, NULL), LOOM_ERR_INVALID_ARGUMENT);

  /* A manager that already allocated on the node has a context of its own there. */
  loom_mem_manager *used = make_manager(ctx, &node);
  ASSERT_TRUE(used != NULL);
  loom_buffer *own = NULL;
  ASSERT_OK(loom_buffer_allocate(used, 4096, LOOM_U8, node, LOOM_MEM_DEVICE_LOCAL, &own));
  ASSERT_EQ(loom_buffer_wrap_cl_mem(used, node, o.mem, 4096, LOOM_U8, &b), LOOM_ERR_UNSUPPORTED);
  ASSERT_CONTAINS(loom_last_error(), "already uses an OpenCL context of Loom's own");
  ASSERT_EQ(loom_mem_node_cl_signal(used, node, o.queue), LOOM_ERR_UNSUPPORTED);
  ASSERT_CONTAINS(loom_last_error(), "queue is of another OpenCL context than the node's");
  ASSERT_TRUE(b == NULL);
  loom_buffer_free(own);
  loom_mem_manager_destroy(used);

  /* The first manager adopted nothing from the refusals: the caller's context still goes. */
  ASSERT_OK(loom_buffer_wrap_cl_mem(m, node, o.mem, 4096, LOOM_U8, &b));
  loom_buffer_free(b);
  loom_mem_manager_destroy(m);
  own_deinit(&o);
  loom_context_destroy(ctx);
}

/* The caller's fine-grained SVM: written on the caller's queue, read by the HMM in place,
 * written by the host through the HMM straight into it. */
TEST(hmm_interop_wrap_cl_svm) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  int32_t node = -1;
  loom_mem_manager *m = make_manager(ctx, &node);
  ASSERT_TRUE(m != NULL);
  loom_mem_node_info info;
  if (!hmm_need_opencl(m, 1) || loom_mem_node_info_get(m, node, &info) ||
      !(info.storages & LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_SVM_FINE))) {
    if (!loom_test_failed()) loom_test_skip("no fine-grained SVM on the first OpenCL node");
    loom_mem_manager_destroy(m);
    loom_context_destroy(ctx);
    return;
  }
  const int64_t n = 1 << 16;
  own_cl o;
  ASSERT_TRUE(own_init(ctx, m, node, 16, &o));
  uint8_t *svm = clSVMAlloc(o.context, CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER, (size_t)n, 0);
  ASSERT_TRUE(svm != NULL);
  uint8_t *pattern = malloc((size_t)n);
  ASSERT_TRUE(pattern != NULL);
  hmm_fill(pattern, n, 3);
  ASSERT_EQ(clEnqueueSVMMemcpy(o.queue, CL_FALSE, svm, pattern, (size_t)n, 0, NULL, NULL), CL_SUCCESS);
  loom_buffer *b = NULL;
  ASSERT_EQ(loom_buffer_wrap_cl_svm(m, node, o.context, svm, true, n + 1, LOOM_I16, &b),
            LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_OK(loom_buffer_wrap_cl_svm(m, node, o.context, svm, true, n, LOOM_U8, &b));
  ASSERT_OK(loom_mem_node_cl_wait(m, node, o.queue));
  ASSERT_EQ(storage_of(b, node), LOOM_MEM_STORAGE_SVM_FINE);
  ASSERT_EQ(hmm_buffer_mismatch(b, n, 3), -1);
  ASSERT_OK(loom_buffer_write(b, 0, pattern + 1, n - 1));
  ASSERT_OK(loom_mem_node_cl_signal(m, node, o.queue));
  ASSERT_EQ(clFinish(o.queue), CL_SUCCESS);
  ASSERT_EQ(memcmp(svm, pattern + 1, (size_t)(n - 1)), 0); /* fine-grained: the host sees it */
  loom_buffer_free(b);
  clSVMFree(o.context, svm);
  free(pattern);
  loom_mem_manager_destroy(m);
  own_deinit(&o);
  loom_context_destroy(ctx);
}

#else

TEST(hmm_interop_wrap_cl_mem) {
  loom_test_skip("built without OpenCL");
}

#endif

#if LOOM_HAVE_CUDA
#include "loom/cuda.h"

/* Without a CUDA device in sight, the argument checks of loom/cuda.h's interop: a node that is
 * not a CUDA device's is refused with a message, and nothing is wrapped. (The calls on a CUDA
 * device are examples/interop/cuda_reduce.c, ctest interop.cuda.) */
TEST(hmm_interop_cuda_checks) {
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  loom_mem_manager *m = NULL;
  ASSERT_OK(loom_context_memory(ctx, &m));
  int32_t host = hmm_node(m, "host0");
  float x = 0;
  loom_buffer *b = (loom_buffer *)&x;
  ASSERT_EQ(loom_buffer_wrap_cuda_ptr(m, host, &x, sizeof x, LOOM_F32, &b), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "host0 is not a CUDA device's memory node");
  ASSERT_TRUE(b == NULL);
  ASSERT_EQ(loom_buffer_wrap_cuda_ptr(m, host, NULL, 4, LOOM_F32, &b), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(loom_mem_node_cuda_wait(m, host, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(loom_mem_node_cuda_signal(NULL, 0, NULL), LOOM_ERR_INVALID_ARGUMENT);
  loom_context_destroy(ctx);
}
#endif
