/* loom-bench cuda: the cuda backend against the libraries it calls, on each CUDA device
 * (issue 7, point 5):
 *
 *   sgemm  C = A.B, f32, N x N x N (default 8192): a one-op graph through Loom's executor vs
 *          cublasSgemm called directly
 *   fft    a 2^K-point complex f32 FFT (default K = 24): through Loom vs cuFFT called directly
 *          (an out-of-place plan made once)
 *
 * Both sides are timed end to end from host memory to host memory (copy the inputs in from
 * pageable memory, compute, copy the result back), each the best of --reps runs after a
 * warm-up run (cuBLAS's and cuFFT's set-up); the ratio is library time / Loom time (1.00: as
 * fast as the library called directly; the goal is at least 0.95). The sides run alternately,
 * so a busy machine slows both. The library's device time alone (inputs already on the device)
 * is printed beside, to show how much of each figure is the bus.
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
#include "core/core.h"
#include "core/json.h"
#include "loom/loom.h"
#include "runtime/context.h"
#include "runtime/exec.h"
#include "runtime/random.h"

#if LOOM_HAVE_CUDA
#include "backends/cuda/cuda_libs.h"

typedef struct options {
  int64_t n; /* sgemm size */
  int32_t fft_log2;
  int32_t reps;
  int64_t bw_bytes;
  const char *devices; /* "cuda0,cuda1"; NULL: every CUDA device */
  const char *json;
} options;

typedef struct result {
  const char *what;
  double loom_s, lib_s, lib_device_s; /* best seconds */
  double flops;
} result;

static void usage(FILE *out) {
  fputs(
      "usage: loom-bench cuda [--devices LIST] [--size N] [--fft-log2 K] [--bw-size BYTES] [--reps N]\n"
      "                       [--json FILE]\n"
      "\n"
      "SGEMM N^3 and a 2^K-point complex FFT through Loom vs cuBLAS and cuFFT called directly, end\n"
      "to end from host memory, and host <-> device bandwidth (explicit copies vs managed memory),\n"
      "on each CUDA device; prints ratios.\n"
      "\n"
      "  --devices LIST  CUDA device ids, as cuda0,cuda1 (default: every CUDA device)\n"
      "  --size N        the SGEMM's N (default 8192)\n"
      "  --fft-log2 K    the FFT's length is 2^K (default 24)\n"
      "  --bw-size BYTES bytes per transfer of the bandwidth figures (default 256MiB)\n"
      "  --reps N        timed runs per figure after one warm-up; the best is kept (default 5)\n"
      "  --json FILE     also write the figures as JSON\n",
      out);
}

static int parse_args(int argc, char **argv, options *o) {
  *o = (options){.n = 8192, .fft_log2 = 24, .reps = 5, .bw_bytes = (int64_t)256 << 20};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--help") == 0) {
      usage(stdout);
      exit(0);
    }
    if (!v) {
      fprintf(stderr, "loom-bench cuda: %s: unknown option or missing value\n", a);
      usage(stderr);
      return 2;
    }
    if (strcmp(a, "--devices") == 0)
      o->devices = v;
    else if (strcmp(a, "--json") == 0)
      o->json = v;
    else if (strcmp(a, "--size") == 0)
      o->n = atoll(v);
    else if (strcmp(a, "--fft-log2") == 0)
      o->fft_log2 = atoi(v);
    else if (strcmp(a, "--reps") == 0)
      o->reps = atoi(v);
    else if (strcmp(a, "--bw-size") == 0) {
      if (loom_bytes_parse(v, &o->bw_bytes)) {
        fprintf(stderr, "loom-bench cuda: --bw-size: %s\n", loom_last_error());
        return 2;
      }
    } else {
      fprintf(stderr, "loom-bench cuda: unknown option '%s'\n", a);
      usage(stderr);
      return 2;
    }
    i++;
  }
  if (o->n < 1 || o->n > 46340 || o->fft_log2 < 1 || o->fft_log2 > 30 || o->reps < 1 || o->bw_bytes < 1) {
    fprintf(
        stderr,
        "loom-bench cuda: --size (1..46340), --fft-log2 (1..30), --bw-size and --reps must be positive\n");
    return 2;
  }
  return 0;
}

static bool cuda_ok(cudaError_t err, const char *call) {
  if (err == cudaSuccess) return true;
  fprintf(stderr, "loom-bench cuda: %s: %s\n", call, cudaGetErrorName(err));
  return false;
}

/* ---- Loom's side: a one-op graph through the executor on the device ------------------------ */

typedef struct loom_side {
  loom_graph *g;
  loom_tensor in[2], out[1];
  int32_t n_in;
} loom_side;

static int loom_prepare(loom_side *L, const char *text) {
  memset(L, 0, sizeof *L);
  if (loom_graph_parse(text, strlen(text), "bench.lir", &L->g)) return 1;
  L->n_in = loom_graph_param_count(L->g);
  for (int32_t p = 0; p < L->n_in; p++) {
    if (loom_tensor_init(&L->in[p], loom_value_type(L->g, loom_graph_param_at(L->g, p)))) return 1;
    loom__tensor_fill_random(&L->in[p], 1, (uint64_t)p);
  }
  return 0;
}

static void loom_release(loom_side *L) {
  for (int32_t p = 0; p < L->n_in; p++) loom_tensor_deinit(&L->in[p]);
  loom_tensor_deinit(&L->out[0]);
  loom_graph_destroy(L->g);
}

static int loom_time(loom_side *L, const loom__exec_device *dev, double *best) {
  loom__meter m = {0};
  loom__exec_options opts = {.device = dev};
  loom_tensor_deinit(&L->out[0]);
  double t = loom__now();
  if (loom__execute(L->g, &opts, L->in, L->out, &m)) return 1;
  t = loom__now() - t;
  if (t < *best) *best = t;
  return 0;
}

/* ---- the libraries' side --------------------------------------------------------------------- */

typedef struct lib_side {
  void *a, *b, *c;
  cublasHandle_t blas;
  cufftHandle plan;
  bool have_plan;
} lib_side;

static int lib_open(lib_side *S, int ordinal, int64_t bytes_a, int64_t bytes_b, int64_t bytes_c) {
  memset(S, 0, sizeof *S);
  if (!cuda_ok(cudaSetDevice(ordinal), "cudaSetDevice")) return 1;
  if (!cuda_ok(cudaMalloc(&S->a, (size_t)bytes_a), "cudaMalloc") ||
      !cuda_ok(cudaMalloc(&S->b, (size_t)bytes_b), "cudaMalloc") ||
      !cuda_ok(cudaMalloc(&S->c, (size_t)bytes_c), "cudaMalloc"))
    return 1;
  return 0;
}

static void lib_close(lib_side *S) {
  const loom__cublas_api *blas = loom__cublas();
  const loom__cufft_api *fft = loom__cufft();
  if (S->blas && blas) blas->cublasDestroy_v2(S->blas);
  if (S->have_plan && fft) fft->cufftDestroy(S->plan);
  cudaFree(S->a);
  cudaFree(S->b);
  cudaFree(S->c);
}

/* Copy A and B in, cublasSgemm (row-major C = A.B as column-major C^T = B^T.A^T), copy C out:
 * the same work as Loom's run; and the gemm alone. */
static int sgemm_time(lib_side *S, int64_t n, const float *a, const float *b, float *c, double *best,
                      double *best_device) {
  const loom__cublas_api *api = loom__cublas();
  size_t bytes = (size_t)(n * n) * sizeof(float);
  int N = (int)n;
  const float one = 1, zero = 0;
  if (!S->blas && api->cublasCreate_v2(&S->blas) != CUBLAS_STATUS_SUCCESS) return 1;
  double t = loom__now();
  bool ok = cuda_ok(cudaMemcpy(S->a, a, bytes, cudaMemcpyHostToDevice), "cudaMemcpy") &&
            cuda_ok(cudaMemcpy(S->b, b, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  double d = loom__now();
  ok = ok && api->cublasSgemm_v2(S->blas, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, S->b, N, S->a, N, &zero,
                                 S->c, N) == CUBLAS_STATUS_SUCCESS;
  ok = ok && cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  d = loom__now() - d;
  ok = ok && cuda_ok(cudaMemcpy(c, S->c, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  t = loom__now() - t;
  if (!ok) return 1;
  if (t < *best) *best = t;
  if (d < *best_device) *best_device = d;
  return 0;
}

static int fft_time(lib_side *S, int64_t n, const void *x, void *y, double *best, double *best_device) {
  const loom__cufft_api *api = loom__cufft();
  size_t bytes = (size_t)n * 8;
  if (!S->have_plan) {
    long long len = n;
    size_t work = 0;
    if (api->cufftCreate(&S->plan) != CUFFT_SUCCESS) return 1;
    S->have_plan = true;
    if (api->cufftMakePlanMany64(S->plan, 1, &len, NULL, 1, len, NULL, 1, len, CUFFT_C2C, 1, &work) !=
        CUFFT_SUCCESS)
      return 1;
  }
  double t = loom__now();
  bool ok = cuda_ok(cudaMemcpy(S->a, x, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  double d = loom__now();
  ok = ok && api->cufftExecC2C(S->plan, S->a, S->c, CUFFT_FORWARD) == CUFFT_SUCCESS;
  ok = ok && cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  d = loom__now() - d;
  ok = ok && cuda_ok(cudaMemcpy(y, S->c, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  t = loom__now() - t;
  if (!ok) return 1;
  if (t < *best) *best = t;
  if (d < *best_device) *best_device = d;
  return 0;
}

/* ---- one device: the workloads ----------------------------------------------------------------- */

static int bench_sgemm(const options *o, const loom__device *d, const loom__exec_device *dev, result *r) {
  char text[256];
  snprintf(text, sizeof text, "graph sgemm(a: f32[%lld,%lld], b: f32[%lld,%lld]) { c = dot a b\n return c }",
           (long long)o->n, (long long)o->n, (long long)o->n, (long long)o->n);
  loom_side L;
  lib_side S;
  int64_t bytes = o->n * o->n * 4;
  int rc = loom_prepare(&L, text) || lib_open(&S, d->cuda_ordinal, bytes, bytes, bytes);
  float *c = rc ? NULL : malloc((size_t)bytes);
  rc |= !c;
  *r = (result){.what = "sgemm",
                .loom_s = 1e30,
                .lib_s = 1e30,
                .lib_device_s = 1e30,
                .flops = 2.0 * (double)o->n * o->n * o->n};
  for (int32_t i = 0; !rc && i <= o->reps; i++) { /* run 0 warms up (cuBLAS's set-up) */
    double warm = 1e30, warm_d = 1e30;
    rc |= loom_time(&L, dev, i ? &r->loom_s : &warm);
    rc |= sgemm_time(&S, o->n, L.in[0].data, L.in[1].data, c, i ? &r->lib_s : &warm,
                     i ? &r->lib_device_s : &warm_d);
  }
  free(c);
  lib_close(&S);
  loom_release(&L);
  return rc;
}

static int bench_fft(const options *o, const loom__device *d, const loom__exec_device *dev, result *r) {
  int64_t n = (int64_t)1 << o->fft_log2;
  char text[256];
  snprintf(text, sizeof text, "graph fft(x: c64[%lld]) { f = fft x axis=0\n return f }", (long long)n);
  loom_side L;
  lib_side S;
  int rc = loom_prepare(&L, text) || lib_open(&S, d->cuda_ordinal, n * 8, 8, n * 8);
  void *y = rc ? NULL : malloc((size_t)n * 8);
  rc |= !y;
  *r = (result){.what = "fft",
                .loom_s = 1e30,
                .lib_s = 1e30,
                .lib_device_s = 1e30,
                .flops = 5.0 * (double)n * o->fft_log2};
  for (int32_t i = 0; !rc && i <= o->reps; i++) {
    double warm = 1e30, warm_d = 1e30;
    rc |= loom_time(&L, dev, i ? &r->loom_s : &warm);
    rc |= fft_time(&S, n, L.in[0].data, y, i ? &r->lib_s : &warm, i ? &r->lib_device_s : &warm_d);
  }
  free(y);
  lib_close(&S);
  loom_release(&L);
  return rc;
}

/* ---- one device: bandwidth ----------------------------------------------------------------------- */

typedef struct bw_result {
  const char *path;
  double h2d, d2h; /* best seconds */
} bw_result;

static void keep(double *best, double t) {
  if (t < *best) *best = t;
}

/* cudaMemcpy from and to host memory (pinned or not). */
static int bw_memcpy(const options *o, int ordinal, bool pinned, bw_result *r) {
  size_t n = (size_t)o->bw_bytes;
  void *dev = NULL, *host = NULL;
  int rc = !cuda_ok(cudaSetDevice(ordinal), "cudaSetDevice") || !cuda_ok(cudaMalloc(&dev, n), "cudaMalloc");
  if (!rc) rc = pinned ? !cuda_ok(cudaMallocHost(&host, n), "cudaMallocHost") : !(host = malloc(n));
  if (!rc) memset(host, 1, n);
  *r = (bw_result){pinned ? "pinned" : "pageable", 1e30, 1e30};
  for (int32_t i = 0; !rc && i <= o->reps; i++) {
    double t = loom__now();
    rc |= !cuda_ok(cudaMemcpy(dev, host, n, cudaMemcpyHostToDevice), "cudaMemcpy");
    if (i) keep(&r->h2d, loom__now() - t);
    t = loom__now();
    rc |= !cuda_ok(cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost), "cudaMemcpy");
    if (i) keep(&r->d2h, loom__now() - t);
  }
  if (pinned)
    cudaFreeHost(host);
  else
    free(host);
  cudaFree(dev);
  return rc;
}

/* Through the memory manager: a device buffer with explicit copies, or a managed buffer. */
static int bw_hmm(const options *o, loom_context *ctx, const char *id, bool managed, bw_result *r) {
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
    double t = loom__now();
    if (!managed) {
      rc |= loom_buffer_write(b, 0, buf, o->bw_bytes) != LOOM_OK;
    } else {
      void *p = NULL;
      rc |= loom_buffer_map(b, LOOM_ACCESS_WRITE | LOOM_ACCESS_DISCARD, &p) != LOOM_OK;
      if (!rc) memcpy(p, buf, (size_t)o->bw_bytes);
      rc |= (p && loom_buffer_unmap(b, p) != LOOM_OK) || loom_buffer_prefetch(b, node) != LOOM_OK;
    }
    if (i) keep(&r->h2d, loom__now() - t);
    t = loom__now();
    if (!managed) {
      rc |= loom_buffer_read(b, 0, buf, o->bw_bytes) != LOOM_OK;
    } else {
      void *p = NULL;
      rc |= loom_buffer_migrate(b, host) != LOOM_OK || loom_buffer_map(b, LOOM_ACCESS_READ, &p) != LOOM_OK;
      if (!rc) memcpy(buf, p, (size_t)o->bw_bytes);
      rc |= p && loom_buffer_unmap(b, p) != LOOM_OK;
    }
    if (i) keep(&r->d2h, loom__now() - t);
  }
  if (rc) fprintf(stderr, "loom-bench cuda: %s %s: %s\n", id, r->path, loom_last_error());
  loom_buffer_free(b);
  loom_mem_trim(m, node);
  free(buf);
  return rc;
}

/* ---- reporting ----------------------------------------------------------------------------------- */

static bool wanted(const options *o, const char *id) {
  if (!o->devices) return true;
  size_t n = strlen(id);
  for (const char *p = o->devices; p && *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && strncmp(p, id, n) == 0) return true;
    p = end ? end + 1 : NULL;
  }
  return false;
}

static void print_result(const char *id, const result *r, const options *o) {
  char size[64];
  if (strcmp(r->what, "sgemm") == 0)
    snprintf(size, sizeof size, "%lld^3", (long long)o->n);
  else
    snprintf(size, sizeof size, "2^%d points", (int)o->fft_log2);
  printf(
      "  %-6s %-6s %-12s Loom %9.3f ms   %s %9.3f ms   ratio %.2f   (%s on the device alone: %.3f ms, %.1f "
      "GFLOPS)\n",
      id, r->what, size, r->loom_s * 1e3, strcmp(r->what, "sgemm") == 0 ? "cuBLAS" : "cuFFT ", r->lib_s * 1e3,
      r->lib_s / r->loom_s, strcmp(r->what, "sgemm") == 0 ? "cuBLAS" : "cuFFT", r->lib_device_s * 1e3,
      r->flops / r->lib_device_s * 1e-9);
}

static void print_bw(const char *id, const bw_result *r, const bw_result *pinned, int64_t bytes) {
  printf("  %-6s %-9s host->device %7.2f GB/s (%.2f)   device->host %7.2f GB/s (%.2f)\n", id, r->path,
         (double)bytes / r->h2d * 1e-9, pinned->h2d / r->h2d, (double)bytes / r->d2h * 1e-9,
         pinned->d2h / r->d2h);
}

static void json_result(loom__json *j, const char *id, const loom__device *d, const result *r) {
  loom__json_begin_object(j);
  loom__json_kv_string(j, "device", id);
  loom__json_kv_string(j, "name", d->name ? d->name : "");
  loom__json_kv_string(j, "workload", r->what);
  loom__json_kv_double(j, "loom_seconds", r->loom_s);
  loom__json_kv_double(j, "library_seconds", r->lib_s);
  loom__json_kv_double(j, "library_device_seconds", r->lib_device_s);
  loom__json_kv_double(j, "ratio", r->lib_s / r->loom_s);
  loom__json_end_object(j);
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

/* Every figure of one device; rc 1 on a failed run. */
static int bench_device(const options *o, loom_context *ctx, const loom__device *d,
                        const loom__exec_device *dev, loom__json *j) {
  const char *id = d->id;
  printf("%s: %s\n", id, d->name ? d->name : "");
  result r[2];
  if (!loom__cublas() || !loom__cufft()) {
    fprintf(stderr, "loom-bench cuda: %s: cuBLAS or cuFFT is missing (%s): nothing to compare with\n", id,
            loom__cuda_libs_why());
    return 1;
  }
  if (bench_sgemm(o, d, dev, &r[0]) || bench_fft(o, d, dev, &r[1])) {
    fprintf(stderr, "loom-bench cuda: %s: a run failed: %s\n", id, loom_last_error());
    return 1;
  }
  for (int32_t k = 0; k < 2; k++) {
    print_result(id, &r[k], o);
    if (j) json_result(j, id, d, &r[k]);
  }
  bw_result bw[4];
  if (bw_memcpy(o, d->cuda_ordinal, true, &bw[0]) || bw_memcpy(o, d->cuda_ordinal, false, &bw[1]) ||
      bw_hmm(o, ctx, id, false, &bw[2]) || bw_hmm(o, ctx, id, true, &bw[3]))
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
static void print_no_device(loom_context *ctx, const options *o) {
  printf("no CUDA device%s", o->devices ? " matches --devices" : " found");
  for (int32_t i = 0; i < loom_context_note_count(ctx); i++) {
    const char *note = loom_context_note(ctx, i);
    if (note && strncmp(note, "cuda", 4) == 0 && !strstr(note, "compute backend built")) printf("; %s", note);
  }
  printf("\n");
}

int loom_bench_cuda(int argc, char **argv) {
  options o;
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc;
  loom_context *ctx = NULL;
  if (loom_context_create(NULL, &ctx)) {
    fprintf(stderr, "loom-bench cuda: %s\n", loom_last_error());
    return 1;
  }
  FILE *jf = o.json ? fopen(o.json, "w") : NULL;
  if (o.json && !jf) {
    fprintf(stderr, "loom-bench cuda: cannot write %s\n", o.json);
    loom_context_destroy(ctx);
    return 1;
  }
  loom__json j;
  if (jf) {
    loom__json_init(&j, jf, true);
    loom__json_begin_object(&j);
    loom__json_key(&j, "cuda");
    loom__json_begin_array(&j);
  }
  printf("loom-bench cuda: best of %d runs, end to end (host -> device -> host); ratio = library / Loom\n",
         (int)o.reps);
  int32_t measured = 0;
  for (int32_t i = 0; !rc && i < ctx->devices.dev_count; i++) {
    const loom__device *d = &ctx->devices.dev[i];
    if (!(d->backends & LOOM_BACKEND_CUDA) || d->cuda_ordinal < 0 || !wanted(&o, d->id)) continue;
    const loom__exec_device *dev;
    if (loom__context_exec_device(ctx, d->id, &dev)) {
      fprintf(stderr, "loom-bench cuda: %s: %s\n", d->id, loom_last_error());
      rc = 1;
      break;
    }
    rc = bench_device(&o, ctx, d, dev, jf ? &j : NULL);
    measured++;
  }
  if (!rc && measured == 0) print_no_device(ctx, &o);
  if (jf) {
    loom__json_end_array(&j);
    loom__json_end_object(&j);
    if (loom__json_finish(&j) || fclose(jf)) rc = 1;
  }
  loom_context_destroy(ctx);
  return rc;
}

#else

int loom_bench_cuda(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr,
          "loom-bench cuda: this build has no cuda backend (LOOM_CUDA=OFF or no CUDA toolkit found)\n");
  return 1;
}

#endif
