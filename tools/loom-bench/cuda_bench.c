/* loom-bench cuda: the cuda backend against the libraries it calls, on each CUDA device
 * (issue 7, point 5): SGEMM (default 8192^3) through Loom vs cublasSgemm called directly, and
 * a 2^K-point complex f32 FFT (default K = 24) through Loom vs cuFFT called directly (an
 * out-of-place plan made once). The measuring and reporting are gpu_bench.c's; this file is
 * the libraries' side (cuBLAS and cuFFT as the cuda backend loads them:
 * loom/internal/cuda_libs.h), timed end to end from pageable host memory, with the library's
 * device time alone (inputs already on the device) beside, to show how much of each figure is
 * the bus. The goal is a ratio of at least 0.95.
 *
 * Then host <-> device bandwidth of one buffer of --bw-size bytes (default 256 MiB), each the
 * best of --reps, as a ratio to cudaMemcpy from pinned memory (the bus's best):
 *   pinned    cudaMemcpy to and from cudaMallocHost memory
 *   pageable  cudaMemcpy to and from malloc'd memory (the driver stages it)
 *   explicit  a device buffer of the memory manager, loom_buffer_write / loom_buffer_read
 *             (Loom's pinned staging pipeline)
 *   managed   a managed buffer of the memory manager: the host writes it through a map, then
 *             loom_buffer_prefetch moves it to the device (cudaMemPrefetchAsync); back:
 *             loom_buffer_migrate to the host, then the host reads it through a map
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "gpu_bench.h"

#if LOOM_HAVE_CUDA
#include "loom/cuda.h"
#include "loom/internal/cuda_libs.h"

static bool cuda_ok(cudaError_t err, const char *call) {
  if (err == cudaSuccess) return true;
  fprintf(stderr, "loom-bench cuda: %s: %s\n", call, cudaGetErrorName(err));
  return false;
}

/* ---- the libraries' side --------------------------------------------------------------------- */

struct gpu_lib {
  void *a, *b, *c;
  cublasHandle_t blas;
  cufftHandle plan;
  bool have_plan;
};

static void lib_close(gpu_lib *S) {
  const loom__cublas_api *blas = loom__cublas();
  const loom__cufft_api *fft = loom__cufft();
  if (S->blas && blas) blas->cublasDestroy_v2(S->blas);
  if (S->have_plan && fft) fft->cufftDestroy(S->plan);
  cudaFree(S->a);
  cudaFree(S->b);
  cudaFree(S->c);
  free(S);
}

static int lib_open(gpu_lib **out, loom_context *ctx, int32_t device, int64_t bytes_a, int64_t bytes_b,
                    int64_t bytes_c) {
  int ordinal;
  *out = NULL;
  if (loom_context_device_cuda_ordinal(ctx, device, &ordinal)) return 1;
  gpu_lib *S = calloc(1, sizeof *S);
  if (!S) return 1;
  if (!cuda_ok(cudaSetDevice(ordinal), "cudaSetDevice") ||
      !cuda_ok(cudaMalloc(&S->a, (size_t)bytes_a), "cudaMalloc") ||
      !cuda_ok(cudaMalloc(&S->b, (size_t)bytes_b), "cudaMalloc") ||
      !cuda_ok(cudaMalloc(&S->c, (size_t)bytes_c), "cudaMalloc")) {
    lib_close(S);
    return 1;
  }
  *out = S;
  return 0;
}

/* cuBLAS's GEMM of `dtype` on the device buffers: row-major C = A.B as column-major
 * C^T = B^T.A^T; f16 through cublasGemmStridedBatchedEx (a batch of one, f32 accumulation). */
static bool cublas_gemm(gpu_lib *S, loom_dtype dtype, int n) {
  const loom__cublas_api *api = loom__cublas();
  const cublasOperation_t N = CUBLAS_OP_N;
  const float one = 1, zero = 0;
  const double one_d = 1, zero_d = 0;
  long long nn = (long long)n * n;
  cublasStatus_t st =
      dtype == LOOM_F64
          ? api->cublasDgemm_v2(S->blas, N, N, n, n, n, &one_d, S->b, n, S->a, n, &zero_d, S->c, n)
      : dtype == LOOM_F16
          ? api->cublasGemmStridedBatchedEx(S->blas, N, N, n, n, n, &one, S->b, CUDA_R_16F, n, nn, S->a,
                                            CUDA_R_16F, n, nn, &zero, S->c, CUDA_R_16F, n, nn, 1,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
          : api->cublasSgemm_v2(S->blas, N, N, n, n, n, &one, S->b, n, S->a, n, &zero, S->c, n);
  return st == CUBLAS_STATUS_SUCCESS;
}

/* Copy A and B in, the GEMM, copy C out: the same work as Loom's run; and the GEMM alone. */
static int gemm_time(gpu_lib *S, loom_dtype dtype, int64_t n, const void *a, const void *b, void *c,
                     double *best, double *best_device) {
  const loom__cublas_api *api = loom__cublas();
  size_t bytes = (size_t)(n * n * loom_dtype_size(dtype));
  if (!S->blas && api->cublasCreate_v2(&S->blas) != CUBLAS_STATUS_SUCCESS) return 1;
  double t = bench_now();
  bool ok = cuda_ok(cudaMemcpy(S->a, a, bytes, cudaMemcpyHostToDevice), "cudaMemcpy") &&
            cuda_ok(cudaMemcpy(S->b, b, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  double d = bench_now();
  ok = ok && cublas_gemm(S, dtype, (int)n);
  ok = ok && cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  d = bench_now() - d;
  ok = ok && cuda_ok(cudaMemcpy(c, S->c, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  t = bench_now() - t;
  if (!ok) return 1;
  gpu_keep(best, t);
  gpu_keep(best_device, d);
  return 0;
}

/* A plan of the shape: a batch along the last axis, C2C or R2C. */
static bool fft_plan(gpu_lib *S, const gpu_fft *f) {
  const loom__cufft_api *api = loom__cufft();
  long long len = f->len, out_len = f->real ? f->len / 2 + 1 : f->len;
  size_t work = 0;
  if (api->cufftCreate(&S->plan) != CUFFT_SUCCESS) return false;
  S->have_plan = true;
  return api->cufftMakePlanMany64(S->plan, 1, &len, NULL, 1, len, NULL, 1, out_len,
                                  f->real ? CUFFT_R2C : CUFFT_C2C, f->batch, &work) == CUFFT_SUCCESS;
}

static int fft_time(gpu_lib *S, const gpu_fft *f, const void *x, void *y, double *best, double *best_device) {
  const loom__cufft_api *api = loom__cufft();
  size_t in = (size_t)(f->batch * f->len) * (f->real ? 4 : 8);
  size_t out = (size_t)(f->batch * (f->real ? f->len / 2 + 1 : f->len)) * 8;
  if (!S->have_plan && !fft_plan(S, f)) return 1;
  double t = bench_now();
  bool ok = cuda_ok(cudaMemcpy(S->a, x, in, cudaMemcpyHostToDevice), "cudaMemcpy");
  double d = bench_now();
  ok = ok && (f->real ? api->cufftExecR2C(S->plan, S->a, S->c)
                      : api->cufftExecC2C(S->plan, S->a, S->c, CUFFT_FORWARD)) == CUFFT_SUCCESS;
  ok = ok && cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  d = bench_now() - d;
  ok = ok && cuda_ok(cudaMemcpy(y, S->c, out, cudaMemcpyDeviceToHost), "cudaMemcpy");
  t = bench_now() - t;
  if (!ok) return 1;
  gpu_keep(best, t);
  gpu_keep(best_device, d);
  return 0;
}

/* ---- one device: bandwidth ----------------------------------------------------------------------- */

typedef struct bw_result {
  const char *path;
  double h2d, d2h; /* best seconds */
} bw_result;

/* cudaMemcpy from and to host memory (pinned or not). */
static int bw_memcpy(const gpu_options *o, int ordinal, bool pinned, bw_result *r) {
  size_t n = (size_t)o->bw_bytes;
  void *dev = NULL, *host = NULL;
  int rc = !cuda_ok(cudaSetDevice(ordinal), "cudaSetDevice") || !cuda_ok(cudaMalloc(&dev, n), "cudaMalloc");
  if (!rc) rc = pinned ? !cuda_ok(cudaMallocHost(&host, n), "cudaMallocHost") : !(host = malloc(n));
  if (!rc) memset(host, 1, n);
  *r = (bw_result){pinned ? "pinned" : "pageable", 1e30, 1e30};
  for (int32_t i = 0; !rc && i <= o->reps; i++) {
    double t = bench_now();
    rc |= !cuda_ok(cudaMemcpy(dev, host, n, cudaMemcpyHostToDevice), "cudaMemcpy");
    if (i) gpu_keep(&r->h2d, bench_now() - t);
    t = bench_now();
    rc |= !cuda_ok(cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost), "cudaMemcpy");
    if (i) gpu_keep(&r->d2h, bench_now() - t);
  }
  if (pinned)
    cudaFreeHost(host);
  else
    free(host);
  cudaFree(dev);
  return rc;
}

/* Through the memory manager: a device buffer with explicit copies, or a managed buffer. */
static int bw_hmm(const gpu_options *o, loom_context *ctx, const char *id, bool managed, bw_result *r) {
  *r = (bw_result){managed ? "managed" : "explicit", 1e30, 1e30};
  loom_mem_manager *m = NULL;
  int32_t node = -1, host = 0;
  uint8_t *buf = malloc((size_t)o->bw_bytes);
  if (!buf || loom_context_memory(ctx, &m) || loom_mem_node_find(m, id, &node)) {
    free(buf);
    return 1;
  }
  memset(buf, 1, (size_t)o->bw_bytes);
  loom_mem_node_info info;
  if (loom_mem_node_info_get(m, node, &info)) return free(buf), 1;
  if (managed && !(info.storages & LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_CUDA_MANAGED))) {
    free(buf);
    r->path = NULL; /* the device has none */
    return 0;
  }
  loom_buffer *b = NULL;
  uint32_t flags = managed ? LOOM_MEM_HOST_VISIBLE : LOOM_MEM_DEVICE_LOCAL;
  int rc = loom_buffer_allocate(m, o->bw_bytes, LOOM_U8, node, flags, &b) != LOOM_OK;
  for (int32_t i = 0; !rc && i <= o->reps; i++) {
    double t = bench_now();
    if (!managed) {
      rc |= loom_buffer_write(b, 0, buf, o->bw_bytes) != LOOM_OK;
    } else {
      void *p = NULL;
      rc |= loom_buffer_map(b, LOOM_ACCESS_WRITE | LOOM_ACCESS_DISCARD, &p) != LOOM_OK;
      if (!rc) memcpy(p, buf, (size_t)o->bw_bytes);
      rc |= (p && loom_buffer_unmap(b, p) != LOOM_OK) || loom_buffer_prefetch(b, node) != LOOM_OK;
    }
    if (i) gpu_keep(&r->h2d, bench_now() - t);
    t = bench_now();
    if (!managed) {
      rc |= loom_buffer_read(b, 0, buf, o->bw_bytes) != LOOM_OK;
    } else {
      void *p = NULL;
      rc |= loom_buffer_migrate(b, host) != LOOM_OK || loom_buffer_map(b, LOOM_ACCESS_READ, &p) != LOOM_OK;
      if (!rc) memcpy(buf, p, (size_t)o->bw_bytes);
      rc |= p && loom_buffer_unmap(b, p) != LOOM_OK;
    }
    if (i) gpu_keep(&r->d2h, bench_now() - t);
  }
  if (rc) fprintf(stderr, "loom-bench cuda: %s %s: %s\n", id, r->path, loom_last_error());
  loom_buffer_free(b);
  loom_mem_trim(m, node);
  free(buf);
  return rc;
}

/* ---- reporting ----------------------------------------------------------------------------------- */

static void print_bw(const char *id, const bw_result *r, const bw_result *pinned, int64_t bytes) {
  printf("  %-6s %-9s host->device %7.2f GB/s (%.2f)   device->host %7.2f GB/s (%.2f)\n", id, r->path,
         (double)bytes / r->h2d * 1e-9, pinned->h2d / r->h2d, (double)bytes / r->d2h * 1e-9,
         pinned->d2h / r->d2h);
}

static void json_bw(loom__json *j, const char *id, const bw_result *r, const bw_result *pinned,
                    int64_t bytes) {
  loom__json_begin_object(j);
  loom__json_kv_string(j, "device", id);
  loom__json_kv_string(j, "workload", "bandwidth");
  loom__json_kv_string(j, "path", r->path);
  loom__json_kv_double(j, "host_to_device_gbps", (double)bytes / r->h2d * 1e-9);
  loom__json_kv_double(j, "device_to_host_gbps", (double)bytes / r->d2h * 1e-9);
  loom__json_kv_double(j, "host_to_device_ratio", pinned->h2d / r->h2d);
  loom__json_kv_double(j, "device_to_host_ratio", pinned->d2h / r->d2h);
  loom__json_end_object(j);
}

/* The libraries are those the cuda backend loaded: without them there is nothing to compare. */
static int check_libs(const char *id) {
  if (loom__cublas() && loom__cufft()) return 0;
  fprintf(stderr, "loom-bench cuda: %s: cuBLAS or cuFFT is missing (%s): nothing to compare with\n", id,
          loom__cuda_libs_why());
  return 1;
}

/* The bandwidth figures of one device. */
static int bench_bandwidth(const gpu_options *o, loom_context *ctx, int32_t device, const char *id,
                           loom__json *j) {
  int ordinal;
  bw_result bw[4];
  if (loom_context_device_cuda_ordinal(ctx, device, &ordinal) || bw_memcpy(o, ordinal, true, &bw[0]) ||
      bw_memcpy(o, ordinal, false, &bw[1]) || bw_hmm(o, ctx, id, false, &bw[2]) ||
      bw_hmm(o, ctx, id, true, &bw[3]))
    return 1;
  for (int32_t k = 0; k < 4; k++) {
    if (!bw[k].path) {
      printf("  %-6s %-9s (the device has no managed memory)\n", id, "managed");
      continue;
    }
    print_bw(id, &bw[k], &bw[0], o->bw_bytes);
    if (j) json_bw(j, id, &bw[k], &bw[0], o->bw_bytes);
  }
  return 0;
}

/* Why there is no CUDA device, from the context's notes. */
static void why_none(loom_context *ctx) {
  for (int32_t i = 0; i < loom_context_note_count(ctx); i++) {
    const char *note = loom_context_note(ctx, i);
    if (note && strncmp(note, "cuda", 4) == 0 && !strstr(note, "compute backend built")) printf("; %s", note);
  }
}

static const gpu_mode cuda_mode = {
    .name = "cuda",
    .kind = "CUDA",
    .id_prefix = "cuda",
    .backend = LOOM_BACKEND_CUDA,
    .lib_names = {"cuBLAS", "cuFFT"},
    .default_n = 8192,
    .max_n = 46340, /* cuBLAS takes int dimensions; N^2 elements must fit too */
    .default_fft_log2 = 24,
    .max_fft_log2 = 30,
    .bandwidth = true,
    .summary =
        "SGEMM N^3 and a 2^K-point complex FFT through Loom vs cuBLAS and cuFFT called directly, end\n"
        "to end from host memory, and host <-> device bandwidth (explicit copies vs managed memory),\n"
        "on each CUDA device; prints ratios.",
    .open = lib_open,
    .close = lib_close,
    .gemm = gemm_time,
    .fft = fft_time,
    .gemm_dtypes = GPU_DTYPE_BIT(LOOM_F32) | GPU_DTYPE_BIT(LOOM_F64) | GPU_DTYPE_BIT(LOOM_F16),
    .check = check_libs,
    .extra = bench_bandwidth,
    .why_none = why_none,
};

int loom_bench_cuda(int argc, char **argv) {
  return gpu_bench_run(&cuda_mode, argc, argv);
}

const gpu_mode *bench_cuda_gpu_mode(void) {
  return &cuda_mode;
}

#else

int loom_bench_cuda(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr,
          "loom-bench cuda: this build has no cuda backend (LOOM_CUDA=OFF or no CUDA toolkit found)\n");
  return 1;
}

const gpu_mode *bench_cuda_gpu_mode(void) {
  return NULL;
}

#endif
