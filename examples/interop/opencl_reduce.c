/* OpenCL interop: a program with its own OpenCL context, queue, buffer and kernel lets Loom
 * reduce its buffer where it is, then reads Loom's result with its own queue.
 *
 *   1. the program fills its cl_mem with its own kernel on its own queue (not waited for);
 *   2. loom_buffer_wrap_cl_mem makes that cl_mem a Loom buffer, no copy;
 *   3. loom_mem_node_cl_wait: Loom's work on the device waits for the program's queue;
 *   4. loom_graph_run_buffers runs a .lir graph (sum and max) on the buffer in place;
 *   5. loom_mem_node_cl_signal: the program's queue waits for Loom's work;
 *   6. the program reads the results from Loom's output buffers with its own queue.
 * Twice, refilling the buffer in between, and each result is checked against the sum and max
 * computed here. Only the public headers (loom/loom.h, loom/opencl.h) are used.
 * Exit status: 0 checked, 1 failed, 77 no OpenCL device Loom can use.
 * Built and run by ctest (tests/interop.cmake) on PoCL's devices. */
#include <loom/loom.h>
#include <loom/opencl.h>
#include <stdio.h>
#include <string.h>

#define N (1 << 20)
#define SKIP 77

#define CHECK(call)                                                                                      \
  do {                                                                                                   \
    loom_status s_ = (call);                                                                             \
    if (s_) {                                                                                            \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, loom_status_string(s_), loom_last_error()); \
      return 1;                                                                                          \
    }                                                                                                    \
  } while (0)

#define CL_CHECK(call)                                                          \
  do {                                                                          \
    cl_int e_ = (call);                                                         \
    if (e_ != CL_SUCCESS) {                                                     \
      fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, e_); \
      return 1;                                                                 \
    }                                                                           \
  } while (0)

/* Values whose sum is exact in f32 whatever the order (integers, partial sums under 2^24). */
static const char *fill_source =
    "__kernel void fill(__global float *x, uint period) {\n"
    "  size_t i = get_global_id(0);\n"
    "  x[i] = (float)(i % period);\n"
    "}\n";

static const char *graph_text =
    "graph reduce(x: f32[1048576]) {\n"
    "  s = reduce_sum x axes=[0]\n"
    "  m = reduce_max x axes=[0]\n"
    "  return s, m\n"
    "}\n";

/* The program's own OpenCL objects. */
typedef struct program {
  cl_device_id device;
  cl_context context;
  cl_command_queue queue;
  cl_program code;
  cl_kernel fill;
  cl_mem x;
} program;

/* The first OpenCL device whose memory Loom manages through OpenCL (a GPU that CUDA drives
 * too is managed through CUDA); its index in the Loom context. -1: none. */
static int32_t find_device(loom_context *ctx, cl_device_id *out_device) {
  loom_mem_manager *m;
  if (loom_context_memory(ctx, &m) != LOOM_OK) return -1;
  for (int32_t i = 0; i < loom_context_device_count(ctx); i++) {
    int32_t node;
    loom_mem_node_info info;
    if (loom_context_device_cl(ctx, i, NULL, out_device) == LOOM_OK &&
        loom_mem_device_node(m, i, &node) == LOOM_OK && loom_mem_node_info_get(m, node, &info) == LOOM_OK &&
        (info.storages & LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_CL_BUFFER)))
      return i;
  }
  return -1;
}

static int program_init(program *p) {
  cl_int err = CL_SUCCESS;
  p->context = clCreateContext(NULL, 1, &p->device, NULL, NULL, &err);
  CL_CHECK(err);
  p->queue = clCreateCommandQueueWithProperties(p->context, p->device, NULL, &err);
  CL_CHECK(err);
  p->code = clCreateProgramWithSource(p->context, 1, &fill_source, NULL, &err);
  CL_CHECK(err);
  CL_CHECK(clBuildProgram(p->code, 1, &p->device, "", NULL, NULL));
  p->fill = clCreateKernel(p->code, "fill", &err);
  CL_CHECK(err);
  p->x = clCreateBuffer(p->context, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
  CL_CHECK(err);
  return 0;
}

static void program_deinit(program *p) {
  if (p->x) clReleaseMemObject(p->x);
  if (p->fill) clReleaseKernel(p->fill);
  if (p->code) clReleaseProgram(p->code);
  if (p->queue) clReleaseCommandQueue(p->queue);
  if (p->context) clReleaseContext(p->context);
}

/* The program's read of a Loom output buffer, on its own queue (blocking: the host needs it). */
static int read_result(const program *p, loom_buffer *b, int32_t node, float *out) {
  loom_mem_handle h;
  CHECK(loom_buffer_acquire(b, node, LOOM_ACCESS_READ, &h));
  cl_mem mem = loom_mem_handle_cl_mem(&h);
  cl_int err =
      mem ? clEnqueueReadBuffer(p->queue, mem, CL_TRUE, (size_t)h.offset, sizeof *out, out, 0, NULL, NULL)
          : clEnqueueSVMMemcpy(p->queue, CL_TRUE, out, h.ptr, sizeof *out, 0, NULL, NULL);
  CHECK(loom_buffer_release(b, &h));
  CL_CHECK(err);
  return 0;
}

/* One round: fill with `period`, reduce with Loom, read back, check. */
static int round_trip(program *p, loom_context *ctx, const char *device, loom_mem_manager *m, int32_t node,
                      loom_buffer *x, const loom_graph *g, cl_uint period) {
  size_t global = N;
  CL_CHECK(clSetKernelArg(p->fill, 0, sizeof p->x, &p->x));
  CL_CHECK(clSetKernelArg(p->fill, 1, sizeof period, &period));
  CL_CHECK(clEnqueueNDRangeKernel(p->queue, p->fill, 1, NULL, &global, NULL, 0, NULL, NULL));
  CHECK(loom_mem_node_cl_wait(m, node, p->queue));
  loom_buffer *outs[2] = {NULL, NULL};
  loom_run_stats stats;
  CHECK(loom_graph_run_buffers(ctx, device, g, &x, 1, outs, 2, &stats));
  CHECK(loom_mem_node_cl_signal(m, node, p->queue));
  float sum = 0, max = 0;
  int rc = read_result(p, outs[0], node, &sum) || read_result(p, outs[1], node, &max);
  loom_buffer_free(outs[0]);
  loom_buffer_free(outs[1]);
  if (rc) return rc;
  long long want_sum = 0;
  for (long long i = 0; i < N; i++) want_sum += i % period;
  float want_max = (float)(period - 1);
  printf("period %u: sum %.1f (expected %lld), max %.1f (expected %.1f), peak %lld B\n", period, sum,
         want_sum, max, want_max, (long long)stats.peak_bytes);
  return sum == (float)want_sum && max == want_max ? 0 : 1;
}

static int run(program *p, loom_context *ctx, int32_t index) {
  loom_device_info info;
  CHECK(loom_context_device_info(ctx, index, &info));
  loom_mem_manager *m;
  int32_t node;
  CHECK(loom_context_memory(ctx, &m));
  CHECK(loom_mem_device_node(m, index, &node));
  loom_graph *g;
  CHECK(loom_graph_parse(graph_text, strlen(graph_text), "reduce.lir", &g));
  loom_buffer *x;
  CHECK(loom_buffer_wrap_cl_mem(m, node, p->x, N * sizeof(float), LOOM_F32, &x));
  loom_mem_node_stats before, after;
  CHECK(loom_mem_stats(m, node, &before));
  int rc = round_trip(p, ctx, info.id, m, node, x, g, 13) || round_trip(p, ctx, info.id, m, node, x, g, 7);
  CHECK(loom_mem_stats(m, node, &after));
  loom_buffer_info binfo;
  CHECK(loom_buffer_get_info(x, &binfo));
  /* In place: nothing was copied onto the device, and the buffer was never copied anywhere. */
  printf("%s: %lld bytes copied in, the wrapped buffer copied %lld times\n", info.id,
         (long long)(after.bytes_in - before.bytes_in), (long long)binfo.copies);
  if (after.bytes_in != before.bytes_in || binfo.copies != 0) rc = 1;
  loom_buffer_free(x);
  loom_graph_destroy(g);
  return rc;
}

int main(void) {
  loom_context *ctx;
  CHECK(loom_context_create(NULL, &ctx));
  program p = {0};
  int32_t index = find_device(ctx, &p.device);
  if (index < 0) {
    printf("no OpenCL device: skipped\n");
    loom_context_destroy(ctx);
    return SKIP;
  }
  int rc = program_init(&p);
  if (!rc) rc = run(&p, ctx, index);
  /* Loom's objects go before the program's context, which the memory manager holds a
   * reference to (it released it at loom_context_destroy). */
  loom_context_destroy(ctx);
  program_deinit(&p);
  printf("%s\n", rc ? "FAILED" : "ok");
  return rc;
}
