/* The part of loom-bench's GPU modes (opencl, cuda) that does not depend on the vendor:
 * options, Loom's side of each workload (a one-op graph run on the device), the alternating
 * warm-up-then-best-of loop, the device loop and the printed and JSON figures. A mode brings
 * only its library side (gpu_mode): how to open the vendor library on a device and time one
 * SGEMM and one FFT through it, end to end from host memory.
 *
 * Workloads:
 *   sgemm  C = A.B, f32, N x N x N: a one-op graph through Loom vs the vendor BLAS
 *   fft    a 2^K-point complex f32 FFT: through Loom vs the vendor FFT (a plan made once)
 * Both sides are timed end to end from host memory to host memory, each the best of --reps
 * runs after a warm-up run; the ratio is library time / Loom time (1.00: as fast as the library
 * called directly). The sides run alternately, so a busy machine slows both. */
#ifndef LOOM_BENCH_GPU_BENCH_H
#define LOOM_BENCH_GPU_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "loom/internal/json.h"
#include "loom/loom.h"

typedef struct gpu_options {
  int64_t n; /* sgemm size */
  int32_t fft_log2;
  int32_t reps;
  int64_t bw_bytes;    /* modes with bandwidth figures (gpu_mode.extra) */
  const char *devices; /* "ocl0,ocl1"; NULL: every device of the mode's kind */
  const char *json;
} gpu_options;

/* One workload of one device: best seconds of each side. */
typedef struct gpu_result {
  const char *what; /* "sgemm", "fft" */
  double loom_s, lib_s;
  double lib_device_s; /* the library's time with the data already on the device; 0: not measured */
  double flops;        /* per run */
} gpu_result;

/* An FFT's shape: `batch` transforms of `len` points along the last axis, c64 to c64 or (real)
 * f32 to the len/2 + 1 points of c64 r2c gives. */
typedef struct gpu_fft {
  int64_t batch, len;
  bool real;
} gpu_fft;

#define GPU_DTYPE_BIT(dtype) (1u << (dtype))

/* The library side of one workload on one device, as a mode opens it. */
typedef struct gpu_lib gpu_lib;

typedef struct gpu_mode {
  const char *name;         /* "opencl": the mode's name, in messages and as the JSON's key */
  const char *kind;         /* "OpenCL": in "no OpenCL device found" */
  const char *id_prefix;    /* "ocl": which of a device's ids (its own or an alias) the mode uses */
  uint32_t backend;         /* LOOM_BACKEND_OPENCL: the devices it measures */
  const char *lib_names[2]; /* the libraries of sgemm and fft, as printed ("CLBlast", "clFFT") */
  int64_t default_n, max_n;
  int32_t default_fft_log2, max_fft_log2;
  bool bandwidth;      /* accepts --bw-size (default 256MiB) for `extra` */
  const char *summary; /* what --help says the mode measures, before the options */
  /* Opens the library on the context's device `device` with three device buffers of these
   * sizes; 1 on failure (with a message on stderr or in loom_last_error). */
  int (*open)(gpu_lib **out, loom_context *ctx, int32_t device, int64_t bytes_a, int64_t bytes_b,
              int64_t bytes_c);
  void (*close)(gpu_lib *lib);
  /* One timed run each, end to end; keep the best in *best (and *best_device where the mode
   * measures device time). 1 on failure. The first call may set up plans and handles; a lib
   * serves one shape (the suite opens one per case). gemm: C = A.B, N x N x N, row-major, of
   * `dtype` (one of gemm_dtypes). fft: forward, out of place. */
  int (*gemm)(gpu_lib *lib, loom_dtype dtype, int64_t n, const void *a, const void *b, void *c, double *best,
              double *best_device);
  int (*fft)(gpu_lib *lib, const gpu_fft *shape, const void *x, void *y, double *best, double *best_device);
  uint32_t gemm_dtypes; /* GPU_DTYPE_BIT(LOOM_F32) | ...: the dtypes gemm takes */
  /* Optional: 1 (with a message) when the mode cannot measure the device (a library missing). */
  int (*check)(const char *id);
  /* Optional: more figures of one device after the workloads (cuda: bandwidth), printed and
   * written to j (NULL without --json). 1 on failure. */
  int (*extra)(const gpu_options *o, loom_context *ctx, int32_t device, const char *id, loom__json *j);
  /* Optional: printed after "no <kind> device found" (why, from the context's notes). */
  void (*why_none)(loom_context *ctx);
} gpu_mode;

/* The whole mode: parses argv (argv[0] is the mode's name), measures every wanted device and
 * prints (and writes) the figures. Returns the exit code: 0 done, 1 failed, 2 bad command
 * line. */
int gpu_bench_run(const gpu_mode *mode, int argc, char **argv);

/* The OpenCL and CUDA modes' library sides (CLBlast and clFFT, cuBLAS and cuFFT), for the suite
 * (suite_vendor.c); NULL where this build lacks them. */
const gpu_mode *bench_opencl_gpu_mode(void);
const gpu_mode *bench_cuda_gpu_mode(void);

/* Keeps t in *best when it is smaller. */
static inline void gpu_keep(double *best, double t) {
  if (t < *best) *best = t;
}

#endif
