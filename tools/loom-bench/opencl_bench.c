/* loom-bench opencl: the opencl backend against the libraries it calls, on each OpenCL device:
 * SGEMM (default 2048^3) through Loom vs CLBlastSgemm called directly, and a 2^K-point complex
 * f32 FFT (default K = 20) through Loom vs clFFT called directly (an out-of-place plan baked
 * once). The measuring and reporting are gpu_bench.c's; this file is the libraries' side, in
 * an OpenCL context of its own on the device (loom/opencl.h gives the device). The goal is a
 * ratio of at least 0.95. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "gpu_bench.h"

#if LOOM_HAVE_OPENCL && LOOM_HAVE_CLBLAST && LOOM_HAVE_CLFFT
#include <clFFT.h>
#include <clblast_c.h>

#include "loom/opencl.h"

struct gpu_lib {
  cl_context ctx;
  cl_command_queue q;
  cl_mem a, b, c;
  clfftPlanHandle plan;
  bool have_plan;
};

static void lib_close(gpu_lib *S) {
  if (S->have_plan) clfftDestroyPlan(&S->plan);
  if (S->a) clReleaseMemObject(S->a);
  if (S->b) clReleaseMemObject(S->b);
  if (S->c) clReleaseMemObject(S->c);
  if (S->q) clReleaseCommandQueue(S->q);
  if (S->ctx) clReleaseContext(S->ctx);
  free(S);
}

static int lib_open(gpu_lib **out, loom_context *ctx, int32_t device, int64_t bytes_a, int64_t bytes_b,
                    int64_t bytes_c) {
  cl_platform_id platform;
  cl_device_id dev;
  *out = NULL;
  if (loom_context_device_cl(ctx, device, &platform, &dev)) return 1;
  gpu_lib *S = calloc(1, sizeof *S);
  if (!S) return 1;
  cl_int err;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)platform, 0};
  S->ctx = clCreateContext(props, 1, &dev, NULL, NULL, &err);
  if (!err) S->q = clCreateCommandQueueWithProperties(S->ctx, dev, NULL, &err);
  if (!err) S->a = clCreateBuffer(S->ctx, CL_MEM_READ_WRITE, (size_t)bytes_a, NULL, &err);
  if (!err) S->b = clCreateBuffer(S->ctx, CL_MEM_READ_WRITE, (size_t)bytes_b, NULL, &err);
  if (!err) S->c = clCreateBuffer(S->ctx, CL_MEM_READ_WRITE, (size_t)bytes_c, NULL, &err);
  if (err) {
    fprintf(stderr, "loom-bench opencl: the library side's context and buffers: OpenCL error %d\n", (int)err);
    lib_close(S);
    return 1;
  }
  *out = S;
  return 0;
}

/* CLBlast's GEMM of `dtype` on the device buffers (row-major C = A.B). */
static CLBlastStatusCode clblast_gemm(gpu_lib *S, loom_dtype dtype, size_t n) {
  const CLBlastLayout L = CLBlastLayoutRowMajor;
  const CLBlastTranspose T = CLBlastTransposeNo;
  if (dtype == LOOM_F64)
    return CLBlastDgemm(L, T, T, n, n, n, 1.0, S->a, 0, n, S->b, 0, n, 0.0, S->c, 0, n, &S->q, NULL);
  if (dtype == LOOM_F16) /* 0x3c00 is 1.0 in IEEE half */
    return CLBlastHgemm(L, T, T, n, n, n, 0x3c00, S->a, 0, n, S->b, 0, n, 0, S->c, 0, n, &S->q, NULL);
  return CLBlastSgemm(L, T, T, n, n, n, 1.0f, S->a, 0, n, S->b, 0, n, 0.0f, S->c, 0, n, &S->q, NULL);
}

/* Upload A and B, the GEMM, read C: the same work as Loom's run. */
static int gemm_time(gpu_lib *S, loom_dtype dtype, int64_t n, const void *a, const void *b, void *c,
                     double *best, double *best_device) {
  (void)best_device; /* OpenCL's side is timed end to end only */
  size_t bytes = (size_t)(n * n * loom_dtype_size(dtype));
  double t = bench_now();
  cl_int err = clEnqueueWriteBuffer(S->q, S->a, CL_FALSE, 0, bytes, a, 0, NULL, NULL);
  err |= clEnqueueWriteBuffer(S->q, S->b, CL_FALSE, 0, bytes, b, 0, NULL, NULL);
  CLBlastStatusCode st = clblast_gemm(S, dtype, (size_t)n);
  err |= clEnqueueReadBuffer(S->q, S->c, CL_TRUE, 0, bytes, c, 0, NULL, NULL);
  t = bench_now() - t;
  if (err || st != CLBlastSuccess) return 1;
  gpu_keep(best, t);
  return 0;
}

/* An out-of-place single-precision plan of the shape: a batch along the last axis, c2c or r2c. */
static int fft_plan(gpu_lib *S, const gpu_fft *f) {
  size_t len = (size_t)f->len, out_len = f->real ? len / 2 + 1 : len;
  if (clfftCreateDefaultPlan(&S->plan, S->ctx, CLFFT_1D, &len)) return 1;
  S->have_plan = true;
  return clfftSetPlanPrecision(S->plan, CLFFT_SINGLE) ||
         clfftSetLayout(S->plan, f->real ? CLFFT_REAL : CLFFT_COMPLEX_INTERLEAVED,
                        f->real ? CLFFT_HERMITIAN_INTERLEAVED : CLFFT_COMPLEX_INTERLEAVED) ||
         clfftSetResultLocation(S->plan, CLFFT_OUTOFPLACE) ||
         clfftSetPlanBatchSize(S->plan, (size_t)f->batch) || clfftSetPlanDistance(S->plan, len, out_len) ||
         clfftBakePlan(S->plan, 1, &S->q, NULL, NULL);
}

static int fft_time(gpu_lib *S, const gpu_fft *f, const void *x, void *y, double *best, double *best_device) {
  (void)best_device;
  size_t in = (size_t)(f->batch * f->len) * (f->real ? 4 : 8);
  size_t out = (size_t)(f->batch * (f->real ? f->len / 2 + 1 : f->len)) * 8;
  if (!S->have_plan && fft_plan(S, f)) return 1;
  double t = bench_now();
  cl_int err = clEnqueueWriteBuffer(S->q, S->a, CL_FALSE, 0, in, x, 0, NULL, NULL);
  clfftStatus st = clfftEnqueueTransform(S->plan, CLFFT_FORWARD, 1, &S->q, 0, NULL, NULL, &S->a, &S->c, NULL);
  err |= clEnqueueReadBuffer(S->q, S->c, CL_TRUE, 0, out, y, 0, NULL, NULL);
  t = bench_now() - t;
  if (err || st != CLFFT_SUCCESS) return 1;
  gpu_keep(best, t);
  return 0;
}

static const gpu_mode opencl_mode = {
    .name = "opencl",
    .kind = "OpenCL",
    .id_prefix = "ocl",
    .backend = LOOM_BACKEND_OPENCL,
    .lib_names = {"CLBlast", "clFFT"},
    .default_n = 2048,
    .max_n = 46340,
    .default_fft_log2 = 20,
    .max_fft_log2 = 28,
    .summary =
        "SGEMM N^3 and a 2^K-point complex FFT through Loom vs CLBlast and clFFT called directly,\n"
        "on each OpenCL device; prints ratios (library time / Loom time).",
    .open = lib_open,
    .close = lib_close,
    .gemm = gemm_time,
    .fft = fft_time,
    .gemm_dtypes = GPU_DTYPE_BIT(LOOM_F32) | GPU_DTYPE_BIT(LOOM_F64) | GPU_DTYPE_BIT(LOOM_F16),
};

int loom_bench_opencl(int argc, char **argv) {
  return gpu_bench_run(&opencl_mode, argc, argv);
}

const gpu_mode *bench_opencl_gpu_mode(void) {
  return &opencl_mode;
}

#else

int loom_bench_opencl(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "loom-bench opencl: this build has no OpenCL backend with CLBlast and clFFT\n");
  return 1;
}

const gpu_mode *bench_opencl_gpu_mode(void) {
  return NULL;
}

#endif
