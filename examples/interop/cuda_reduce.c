/* CUDA interop: a program with its own stream and device memory lets Loom reduce its memory
 * where it is, then copies Loom's result out on its own stream; examples/interop/opencl_reduce.c
 * is the same for OpenCL.
 *
 *   1. the program fills its cudaMalloc'ed x on its own stream (an async copy, not waited for);
 *   2. loom_buffer_wrap_cuda_ptr makes that memory a Loom buffer, no copy;
 *   3. loom_mem_node_cuda_wait: Loom's work on the device waits for the program's stream;
 *   4. loom_graph_run_buffers runs a .lir graph (sum and max) on the buffer in place;
 *   5. loom_mem_node_cuda_signal: the program's stream waits for Loom's work;
 *   6. the program copies the results out of Loom's output buffers on its own stream.
 * Twice, refilling in between; each result is checked against the sum and max computed here.
 * Only the public headers (loom/loom.h, loom/cuda.h) are used.
 * Exit status: 0 checked, 1 failed, 77 no CUDA device Loom can use.
 * Built and run by ctest (tests/interop.cmake) in builds with the cuda backend. */
#include <loom/cuda.h>
#include <loom/loom.h>
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

#define CU_CHECK(call)                                                                            \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)

static const char *graph_text =
    "graph reduce(x: f32[1048576]) {\n"
    "  s = reduce_sum x axes=[0]\n"
    "  m = reduce_max x axes=[0]\n"
    "  return s, m\n"
    "}\n";

/* The program's own CUDA objects. */
typedef struct program {
  cudaStream_t stream;
  float *x;    /* device memory */
  float *host; /* pinned, so the copies are asynchronous */
} program;

/* The first CUDA device Loom has; its index in the Loom context. -1: none. */
static int32_t find_device(const loom_context *ctx, int *out_ordinal) {
  for (int32_t i = 0; i < loom_context_device_count(ctx); i++)
    if (loom_context_device_cuda_ordinal(ctx, i, out_ordinal) == LOOM_OK) return i;
  return -1;
}

/* The program's copy of a one-float output buffer, on its own stream. */
static int read_result(const program *p, loom_buffer *b, int32_t node, float *out) {
  loom_mem_handle h;
  CHECK(loom_buffer_acquire(b, node, LOOM_ACCESS_READ, &h));
  cudaError_t err =
      cudaMemcpyAsync(out, loom_mem_handle_cuda_ptr(&h), sizeof *out, cudaMemcpyDeviceToHost, p->stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(p->stream);
  CHECK(loom_buffer_release(b, &h));
  CU_CHECK(err);
  return 0;
}

/* One round: fill with i % period, reduce with Loom, read back, check. */
static int round_trip(program *p, loom_context *ctx, const char *device, loom_mem_manager *m, int32_t node,
                      loom_buffer *x, const loom_graph *g, int period) {
  /* The previous round's copy out of host may still run: the stream is in order, the host is
   * not, so wait before refilling the pinned buffer. */
  CU_CHECK(cudaStreamSynchronize(p->stream));
  for (int i = 0; i < N; i++) p->host[i] = (float)(i % period);
  CU_CHECK(cudaMemcpyAsync(p->x, p->host, N * sizeof(float), cudaMemcpyHostToDevice, p->stream));
  CHECK(loom_mem_node_cuda_wait(m, node, p->stream));
  loom_buffer *outs[2] = {NULL, NULL};
  loom_run_stats stats;
  CHECK(loom_graph_run_buffers(ctx, device, g, &x, 1, outs, 2, &stats));
  CHECK(loom_mem_node_cuda_signal(m, node, p->stream));
  float sum = 0, max = 0;
  int rc = read_result(p, outs[0], node, &sum) || read_result(p, outs[1], node, &max);
  loom_buffer_free(outs[0]);
  loom_buffer_free(outs[1]);
  if (rc) return rc;
  long long want_sum = 0;
  for (long long i = 0; i < N; i++) want_sum += i % period;
  float want_max = (float)(period - 1);
  printf("period %d: sum %.1f (expected %lld), max %.1f (expected %.1f), peak %lld B\n", period, sum,
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
  CHECK(loom_buffer_wrap_cuda_ptr(m, node, p->x, N * sizeof(float), LOOM_F32, &x));
  loom_mem_node_stats before, after;
  CHECK(loom_mem_stats(m, node, &before));
  int rc = round_trip(p, ctx, info.id, m, node, x, g, 13) || round_trip(p, ctx, info.id, m, node, x, g, 7);
  CHECK(loom_mem_stats(m, node, &after));
  loom_buffer_info binfo;
  CHECK(loom_buffer_get_info(x, &binfo));
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
  int ordinal = -1;
  int32_t index = find_device(ctx, &ordinal);
  if (index < 0) {
    printf("no CUDA device: skipped\n");
    loom_context_destroy(ctx);
    return SKIP;
  }
  program p = {0};
  CU_CHECK(cudaSetDevice(ordinal));
  CU_CHECK(cudaStreamCreateWithFlags(&p.stream, cudaStreamNonBlocking));
  CU_CHECK(cudaMalloc((void **)&p.x, N * sizeof(float)));
  CU_CHECK(cudaMallocHost((void **)&p.host, N * sizeof(float)));
  int rc = run(&p, ctx, index);
  loom_context_destroy(ctx);
  cudaStreamSynchronize(p.stream);
  cudaFreeHost(p.host);
  cudaFree(p.x);
  cudaStreamDestroy(p.stream);
  printf("%s\n", rc ? "FAILED" : "ok");
  return rc;
}
