/* An OpenCL device's peaks measured through two small kernels of the suite's own (suite.h,
 * suite_cl_peaks): an FMA loop (f32) and a triad, timed on the device by OpenCL's profiling
 * events. An OpenCL GPU does not say how many lanes its compute units have, so no table gives
 * its peak; these kernels measure one as the host's FMA loop and triad do for the CPU
 * (suite_peaks.c). */
#include <stdio.h>
#include <string.h>

#include "suite.h"

#if LOOM_HAVE_OPENCL
#include "loom/opencl.h"

/* Eight independent chains per work-item hide the FMA latency; the work-items fill the units. */
static const char *source =
    "__kernel void fma_loop(__global float *out, int iters) {\n"
    "  float x0 = get_global_id(0) * 1e-6f, x1 = x0 + 1, x2 = x0 + 2, x3 = x0 + 3, x4 = x0 + 4,\n"
    "        x5 = x0 + 5, x6 = x0 + 6, x7 = x0 + 7, m = 0.9999f, a = 1e-4f;\n"
    "  for (int i = 0; i < iters; i++) {\n"
    "    x0 = fma(x0, m, a); x1 = fma(x1, m, a); x2 = fma(x2, m, a); x3 = fma(x3, m, a);\n"
    "    x4 = fma(x4, m, a); x5 = fma(x5, m, a); x6 = fma(x6, m, a); x7 = fma(x7, m, a);\n"
    "  }\n"
    "  out[get_global_id(0)] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;\n"
    "}\n"
    "__kernel void triad(__global float *a, __global const float *b, __global const float *c, float s) {\n"
    "  size_t i = get_global_id(0);\n"
    "  a[i] = b[i] + s * c[i];\n"
    "}\n";

typedef struct cl_side {
  cl_context ctx;
  cl_command_queue q;
  cl_program prog;
  cl_kernel fma, triad;
  cl_mem a, b, c;
} cl_side;

static void side_close(cl_side *S) {
  if (S->a) clReleaseMemObject(S->a);
  if (S->b) clReleaseMemObject(S->b);
  if (S->c) clReleaseMemObject(S->c);
  if (S->fma) clReleaseKernel(S->fma);
  if (S->triad) clReleaseKernel(S->triad);
  if (S->prog) clReleaseProgram(S->prog);
  if (S->q) clReleaseCommandQueue(S->q);
  if (S->ctx) clReleaseContext(S->ctx);
}

/* The device's own context, a profiling queue, the program and three buffers of n floats. */
static cl_int side_open(cl_side *S, cl_platform_id platform, cl_device_id dev, size_t n) {
  cl_int err;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)platform, 0};
  cl_queue_properties qp[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0};
  S->ctx = clCreateContext(props, 1, &dev, NULL, NULL, &err);
  if (!err) S->q = clCreateCommandQueueWithProperties(S->ctx, dev, qp, &err);
  if (!err) S->prog = clCreateProgramWithSource(S->ctx, 1, &source, NULL, &err);
  if (!err) err = clBuildProgram(S->prog, 1, &dev, "", NULL, NULL);
  if (!err) S->fma = clCreateKernel(S->prog, "fma_loop", &err);
  if (!err) S->triad = clCreateKernel(S->prog, "triad", &err);
  for (int i = 0; i < 3 && !err; i++) {
    cl_mem *m = i == 0 ? &S->a : i == 1 ? &S->b : &S->c;
    *m = clCreateBuffer(S->ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    float one = 1.0f;
    if (!err) err = clEnqueueFillBuffer(S->q, *m, &one, sizeof one, 0, n * sizeof(float), 0, NULL, NULL);
  }
  return err ? err : clFinish(S->q);
}

/* Seconds the kernel ran on the device (its profiling event), or -1 on an error. */
static double device_seconds(cl_side *S, cl_kernel k, size_t global) {
  cl_event e;
  cl_ulong t0 = 0, t1 = 0;
  if (clEnqueueNDRangeKernel(S->q, k, 1, NULL, &global, NULL, 0, NULL, &e)) return -1;
  cl_int err = clWaitForEvents(1, &e);
  if (!err) err = clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
  if (!err) err = clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
  clReleaseEvent(e);
  return err || t1 <= t0 ? -1 : (double)(t1 - t0) * 1e-9;
}

/* Best GFLOP/s of the FMA loop over n work-items, its iterations doubled until a run takes 20 ms
 * (so a fast GPU is timed as long as a slow CPU device). */
static double fma_rate(cl_side *S, size_t n) {
  cl_int iters = 16;
  double best = 0, t = 0;
  clSetKernelArg(S->fma, 0, sizeof(cl_mem), &S->a);
  for (int trial = 0; trial < 24 && t >= 0; trial++) {
    clSetKernelArg(S->fma, 1, sizeof iters, &iters);
    t = device_seconds(S, S->fma, n);
    if (t > 0 && 16.0 * n * iters / t * 1e-9 > best) best = 16.0 * n * iters / t * 1e-9;
    if (t > 0 && t < 0.02 && iters < (1 << 24)) iters *= 2;
  }
  return t < 0 ? -1 : best;
}

/* Best GB/s of the triad over n floats, counted as STREAM counts it (12 bytes per element). */
static double triad_rate(cl_side *S, size_t n) {
  float s = 0.5f;
  double best = 0, t = 0;
  clSetKernelArg(S->triad, 0, sizeof(cl_mem), &S->a);
  clSetKernelArg(S->triad, 1, sizeof(cl_mem), &S->b);
  clSetKernelArg(S->triad, 2, sizeof(cl_mem), &S->c);
  clSetKernelArg(S->triad, 3, sizeof s, &s);
  for (int trial = 0; trial < 6 && t >= 0; trial++) { /* the first run pays first touches */
    t = device_seconds(S, S->triad, n);
    if (trial > 0 && t > 0 && 12.0 * n / t * 1e-9 > best) best = 12.0 * n / t * 1e-9;
  }
  return t < 0 ? -1 : best;
}

int suite_cl_peaks(loom_context *ctx, int32_t index, int64_t triad_floats, double *gflops, double *gbps,
                   char *why, size_t why_size) {
  *gflops = *gbps = 0;
  cl_platform_id platform;
  cl_device_id dev;
  if (loom_context_device_cl(ctx, index, &platform, &dev)) {
    snprintf(why, why_size, "not an OpenCL device");
    return 1;
  }
  cl_side S;
  memset(&S, 0, sizeof S);
  cl_int err = side_open(&S, platform, dev, (size_t)triad_floats);
  if (!err) {
    *gflops = fma_rate(&S, (size_t)1 << 16);
    *gbps = triad_rate(&S, (size_t)triad_floats);
    if (*gflops < 0 || *gbps < 0) err = CL_OUT_OF_RESOURCES;
  }
  side_close(&S);
  if (err) {
    *gflops = *gbps = 0;
    snprintf(why, why_size, "the OpenCL peak kernels failed (OpenCL error %d)", (int)err);
    return 1;
  }
  return 0;
}

#else

int suite_cl_peaks(loom_context *ctx, int32_t index, int64_t triad_floats, double *gflops, double *gbps,
                   char *why, size_t why_size) {
  (void)ctx, (void)index, (void)triad_floats;
  *gflops = *gbps = 0;
  snprintf(why, why_size, "this build has no OpenCL");
  return 1;
}

#endif
