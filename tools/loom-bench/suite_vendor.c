/* The suite's vendor sides (suite.h): the library that does a case's work, called directly in
 * this process, or the reason there is none. cpu0's are here (OpenBLAS, FFTW); the OpenCL and
 * CUDA devices' are the opencl and cuda modes' (gpu_bench.h: CLBlast, clFFT, cuBLAS, cuFFT). */
#include <cblas.h>
#include <fftw3.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "gpu_bench.h"
#include "suite.h"

/* ---- cpu0: OpenBLAS and FFTW ---------------------------------------------------------------------- */

typedef struct cpu_side {
  int64_t n;
  fftwf_plan plan; /* the FFT cases'; made once, outside the timing */
  size_t out_bytes;
  bool f64; /* gemm: dgemm rather than sgemm */
} cpu_side;

static void cpu_close(void *state) {
  cpu_side *s = state;
  if (s->plan) fftwf_destroy_plan(s->plan);
  free(s);
}

/* Each call writes into a new result, as Loom's run hands over a new tensor. */
static double cpu_gemm(void *state, const bench_op *op, char *why, size_t why_size) {
  cpu_side *s = state;
  int n = (int)s->n;
  double t = bench_now();
  void *c = malloc(s->out_bytes);
  if (!c) {
    snprintf(why, why_size, "OpenBLAS side: out of host memory");
    return -1;
  }
  if (s->f64)
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, op->in[0].data, n, op->in[1].data, n,
                0.0, c, n);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, op->in[0].data, n, op->in[1].data,
                n, 0.0f, c, n);
  t = bench_now() - t;
  free(c);
  return t;
}

/* c2c and r2c alike: new-array execute of the plan into a new result. */
static double cpu_fft(void *state, const bench_op *op, char *why, size_t why_size) {
  cpu_side *s = state;
  double t = bench_now();
  void *y = fftwf_malloc(s->out_bytes);
  if (!y) {
    snprintf(why, why_size, "FFTW side: out of host memory");
    return -1;
  }
  if (s->n < 0)
    fftwf_execute_dft_r2c(s->plan, op->in[0].data, y);
  else
    fftwf_execute_dft(s->plan, op->in[0].data, y);
  t = bench_now() - t;
  fftwf_free(y);
  return t;
}

/* FFTW_ESTIMATE, as Loom plans by default; the output given at planning is only a stand-in of
 * the same alignment (new-array execute). */
static int cpu_fft_open(const suite_case *c, const bench_op *op, cpu_side *s) {
  int64_t batch = 1, len = op->in[0].type.dims[op->in[0].type.rank - 1];
  if (c->kind == SUITE_FFT_BATCH) batch = op->in[0].type.dims[0];
  bool real = c->kind == SUITE_RFFT;
  s->out_bytes = (size_t)(batch * (real ? len / 2 + 1 : len)) * sizeof(fftwf_complex);
  void *probe = fftwf_malloc(s->out_bytes);
  if (!probe) return 1;
  int n = (int)len, dist_out = real ? n / 2 + 1 : n;
  fftwf_init_threads();
  fftwf_plan_with_nthreads(omp_get_max_threads());
  s->plan = real ? fftwf_plan_many_dft_r2c(1, &n, (int)batch, op->in[0].data, NULL, 1, n, probe, NULL, 1,
                                           dist_out, FFTW_ESTIMATE)
                 : fftwf_plan_many_dft(1, &n, (int)batch, op->in[0].data, NULL, 1, n, probe, NULL, 1, n,
                                       FFTW_FORWARD, FFTW_ESTIMATE);
  fftwf_free(probe);
  s->n = real ? -1 : len;
  return s->plan == NULL;
}

static int cpu_open(const suite_case *c, const bench_op *op, bench_vendor *v, char *reason, size_t size) {
  bool gemm = c->kind == SUITE_GEMM && strcmp(c->dtype, "f16") != 0;
  bool fft = c->kind == SUITE_FFT || c->kind == SUITE_FFT_BATCH || c->kind == SUITE_RFFT;
  if (!gemm && !fft) return 1;
  cpu_side *s = calloc(1, sizeof *s);
  if (!s) return 1;
  *v = (bench_vendor){.state = s, .close = cpu_close};
  if (gemm) {
    s->n = op->in[0].type.dims[0];
    s->f64 = !strcmp(c->dtype, "f64");
    s->out_bytes = (size_t)(s->n * s->n) * (s->f64 ? sizeof(double) : sizeof(float));
    v->library = "OpenBLAS";
    v->run = cpu_gemm;
    return 0;
  }
  v->library = "FFTW";
  v->run = cpu_fft;
  if (cpu_fft_open(c, op, s)) {
    snprintf(reason, size, "FFTW could not plan the transform");
    cpu_close(s);
    return 1;
  }
  return 0;
}

void suite_cpu_runtime(char *out, size_t size) {
  snprintf(out, size, "%s; %s", openblas_get_config(), fftwf_version);
}

/* ---- OpenCL and CUDA devices: the opencl and cuda modes' library sides ----------------------------- */

typedef struct gpu_side {
  const gpu_mode *mode;
  gpu_lib *lib;
  loom_dtype dtype; /* gemm */
  int64_t n;
  bool fft;
  gpu_fft shape; /* fft */
  void *result;
} gpu_side;

static void gpu_close(void *state) {
  gpu_side *s = state;
  if (s->lib) s->mode->close(s->lib);
  free(s->result);
  free(s);
}

static double gpu_run(void *state, const bench_op *op, char *why, size_t why_size) {
  gpu_side *s = state;
  double best = 1e30, best_device = 1e30;
  int rc = s->fft ? s->mode->fft(s->lib, &s->shape, op->in[0].data, s->result, &best, &best_device)
                  : s->mode->gemm(s->lib, s->dtype, s->n, op->in[0].data, op->in[1].data, s->result, &best,
                                  &best_device);
  if (rc) {
    snprintf(why, why_size, "%s side failed: %s", s->mode->lib_names[s->fft], loom_last_error());
    return -1;
  }
  return best;
}

/* The side's shape from the op's first input; false where the mode's library lacks it. */
static bool gpu_shape(const gpu_mode *mode, const suite_case *c, const bench_op *op, gpu_side *s) {
  const loom_type *t = &op->in[0].type;
  s->dtype = t->dtype;
  s->n = t->dims[0];
  s->fft = c->kind == SUITE_FFT || c->kind == SUITE_FFT_BATCH || c->kind == SUITE_RFFT;
  s->shape =
      (gpu_fft){c->kind == SUITE_FFT_BATCH ? t->dims[0] : 1, t->dims[t->rank - 1], c->kind == SUITE_RFFT};
  return s->fft || (c->kind == SUITE_GEMM && (mode->gemm_dtypes & GPU_DTYPE_BIT(t->dtype)));
}

static int gpu_open(const gpu_mode *mode, const suite_case *c, const suite_device *d, loom_context *ctx,
                    int32_t index, const bench_op *op, bench_vendor *v, char *reason, size_t size) {
  if (!mode) {
    snprintf(reason, size, "this build has no library side for %s", d->id);
    return 1;
  }
  if (mode->check && mode->check(d->id)) {
    snprintf(reason, size, "%s or %s missing", mode->lib_names[0], mode->lib_names[1]);
    return 1;
  }
  gpu_side *s = calloc(1, sizeof *s);
  if (!s) return 1;
  s->mode = mode;
  if (!gpu_shape(mode, c, op, s)) {
    snprintf(reason, size, "%s has no %s GEMM", mode->lib_names[0], c->dtype);
    gpu_close(s);
    return 1;
  }
  int64_t in = 0, out_len = s->shape.real ? s->shape.len / 2 + 1 : s->shape.len;
  loom_type_bytes(&op->in[0].type, &in);
  int64_t out = s->fft ? out_len * s->shape.batch * 8 : in;
  s->result = malloc((size_t)out);
  if (!s->result || mode->open(&s->lib, ctx, index, in, s->fft ? 8 : in, out)) {
    snprintf(reason, size, "%s could not open: %s", mode->lib_names[s->fft], loom_last_error());
    gpu_close(s);
    return 1;
  }
  *v = (bench_vendor){.library = mode->lib_names[s->fft], .state = s, .run = gpu_run, .close = gpu_close};
  return 0;
}

/* ---- the reasons where no library does the work ------------------------------------------------------ */

static const char *no_library(const suite_case *c, bool cpu) {
  switch (c->kind) {
    case SUITE_GEMM:
      return cpu && !strcmp(c->dtype, "f16") ? "OpenBLAS has no f16 GEMM (its sbgemm is bf16)" : NULL;
    case SUITE_REDUCE:
      return "no BLAS routine sums a vector (asum sums absolute values); see the fraction of peak bandwidth";
    case SUITE_ADD:
      return "no BLAS routine adds two vectors into a third (axpy overwrites y); see the fraction of peak "
             "bandwidth";
    case SUITE_TOPK:
      return "no vendor library among Loom's dependencies has top-k";
    case SUITE_CONV:
      return "no convolution library among Loom's dependencies (oneDNN, cuDNN, MIOpen are not used)";
    case SUITE_LATENCY:
      return "no library counterpart: the figure is Loom's own cost per op";
    default:
      return NULL;
  }
}

int suite_vendor_open(const suite_case *c, const suite_device *d, const loom_device_info *info,
                      loom_context *ctx, int32_t index, const bench_op *op, bench_vendor *v, char *reason,
                      size_t reason_size) {
  bool cpu = info->backends == LOOM_BACKEND_CPU;
  const char *none = no_library(c, cpu);
  if (none) {
    snprintf(reason, reason_size, "%s", none);
    return 1;
  }
  if (cpu) return cpu_open(c, op, v, reason, reason_size);
  const gpu_mode *mode = info->backends & LOOM_BACKEND_CUDA ? bench_cuda_gpu_mode() : bench_opencl_gpu_mode();
  return gpu_open(mode, c, d, ctx, index, op, v, reason, reason_size);
}

/* ---- the witness of a case without a library ------------------------------------------------------------
 */

/* Why a witness: PoCL on 2 cores runs every kernel about 1.8x slower in blocks of runs, at times
 * for a whole run, and a case without a library had nothing beside it to show that the machine,
 * not Loom, moved (compare flagged a topk 0.68x between two idle runs). A small GEMM through the
 * device's own library, run alternately with Loom's side, moves with the machine. */
typedef struct witness_side {
  bench_op op;
  bench_vendor lib;
} witness_side;

static void witness_close(void *state) {
  witness_side *w = state;
  if (w->lib.close) w->lib.close(w->lib.state);
  bench_op_close(&w->op);
  free(w);
}

static double witness_run(void *state, const bench_op *unused, char *why, size_t why_size) {
  (void)unused;
  witness_side *w = state;
  return w->lib.run(w->lib.state, &w->op, why, why_size);
}

int suite_witness_open(const suite_device *d, const loom_device_info *info, loom_context *ctx, int32_t index,
                       bench_vendor *v, char *name, size_t name_size) {
  witness_side *w = calloc(1, sizeof *w);
  if (!w) {
    snprintf(name, name_size, "out of memory");
    return 1;
  }
  if (bench_op_open(&w->op, "graph w(a: f32[64,64], b: f32[64,64]) { c = dot a b\n return c }", 7)) {
    snprintf(name, name_size, "%s", loom_last_error());
    free(w);
    return 1;
  }
  suite_case gemm = {.kind = SUITE_GEMM, .name = "gemm", .dtype = "f32"};
  if (suite_vendor_open(&gemm, d, info, ctx, index, &w->op, &w->lib, name, name_size)) {
    bench_op_close(&w->op);
    free(w);
    return 1;
  }
  snprintf(name, name_size, "%s SGEMM 64^3", w->lib.library);
  *v = (bench_vendor){.library = w->lib.library, .state = w, .run = witness_run, .close = witness_close};
  return 0;
}
