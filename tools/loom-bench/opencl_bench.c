/* loom-bench opencl: the opencl backend against the libraries it calls, on each OpenCL device:
 *
 *   sgemm  C = A.B, f32, N x N x N (default 2048): a one-op graph through Loom's executor vs
 *          CLBlastSgemm called directly
 *   fft    a 2^K-point complex f32 FFT (default K = 20): through Loom vs clFFT called directly
 *          (an out-of-place plan baked once)
 *
 * Both sides are timed end to end from host memory to host memory (upload the inputs, compute,
 * read the result back), each the best of --reps runs after a warm-up run (which builds
 * programs and plans); the ratio is library time / Loom time (1.00: as fast as the library
 * called directly; the goal is at least 0.95). The two sides run alternately, so a busy machine
 * slows both. */
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

#if LOOM_HAVE_OPENCL && LOOM_HAVE_CLBLAST && LOOM_HAVE_CLFFT
#include <CL/cl.h>
#include <clFFT.h>
#include <clblast_c.h>

typedef struct options {
  int64_t n; /* sgemm size */
  int32_t fft_log2;
  int32_t reps;
  const char *devices; /* "ocl0,ocl1"; NULL: every OpenCL device */
  const char *json;
} options;

typedef struct result {
  const char *what;
  double loom_s, lib_s; /* best seconds */
  double flops;         /* per run, for the rates printed */
} result;

static void usage(FILE *out) {
  fputs(
      "usage: loom-bench opencl [--devices LIST] [--size N] [--fft-log2 K] [--reps N] [--json FILE]\n"
      "\n"
      "SGEMM N^3 and a 2^K-point complex FFT through Loom vs CLBlast and clFFT called directly,\n"
      "on each OpenCL device; prints ratios (library time / Loom time).\n"
      "\n"
      "  --devices LIST  OpenCL device ids, as ocl0,ocl1 (default: every OpenCL device)\n"
      "  --size N        the SGEMM's N (default 2048)\n"
      "  --fft-log2 K    the FFT's length is 2^K (default 20)\n"
      "  --reps N        timed runs per figure after one warm-up; the best is kept (default 5)\n"
      "  --json FILE     also write the figures as JSON\n",
      out);
}

static int parse_args(int argc, char **argv, options *o) {
  *o = (options){.n = 2048, .fft_log2 = 20, .reps = 5};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--help") == 0) {
      usage(stdout);
      exit(0);
    }
    if (!v) {
      fprintf(stderr, "loom-bench opencl: %s: unknown option or missing value\n", a);
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
    else {
      fprintf(stderr, "loom-bench opencl: unknown option '%s'\n", a);
      usage(stderr);
      return 2;
    }
    i++;
  }
  if (o->n < 1 || o->fft_log2 < 1 || o->fft_log2 > 28 || o->reps < 1) {
    fprintf(stderr, "loom-bench opencl: --size, --fft-log2 (1..28) and --reps must be positive\n");
    return 2;
  }
  return 0;
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
  cl_context ctx;
  cl_command_queue q;
  cl_mem a, b, c;
  clfftPlanHandle plan;
  bool have_plan;
} lib_side;

static int lib_open(lib_side *S, const loom__device *d, int64_t bytes_a, int64_t bytes_b, int64_t bytes_c) {
  cl_int err;
  cl_device_id dev = d->cl_device;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)d->cl_platform, 0};
  memset(S, 0, sizeof *S);
  S->ctx = clCreateContext(props, 1, &dev, NULL, NULL, &err);
  if (err) return 1;
  S->q = clCreateCommandQueueWithProperties(S->ctx, dev, NULL, &err);
  if (err) return 1;
  S->a = clCreateBuffer(S->ctx, CL_MEM_READ_WRITE, (size_t)bytes_a, NULL, &err);
  if (!err) S->b = clCreateBuffer(S->ctx, CL_MEM_READ_WRITE, (size_t)bytes_b, NULL, &err);
  if (!err) S->c = clCreateBuffer(S->ctx, CL_MEM_READ_WRITE, (size_t)bytes_c, NULL, &err);
  return err ? 1 : 0;
}

static void lib_close(lib_side *S) {
  if (S->have_plan) clfftDestroyPlan(&S->plan);
  if (S->a) clReleaseMemObject(S->a);
  if (S->b) clReleaseMemObject(S->b);
  if (S->c) clReleaseMemObject(S->c);
  if (S->q) clReleaseCommandQueue(S->q);
  if (S->ctx) clReleaseContext(S->ctx);
}

/* Upload A and B, CLBlastSgemm, read C: the same work as Loom's run. */
static int sgemm_time(lib_side *S, int64_t n, const float *a, const float *b, float *c, double *best) {
  size_t bytes = (size_t)(n * n) * sizeof(float), N = (size_t)n;
  double t = loom__now();
  cl_int err = clEnqueueWriteBuffer(S->q, S->a, CL_FALSE, 0, bytes, a, 0, NULL, NULL);
  err |= clEnqueueWriteBuffer(S->q, S->b, CL_FALSE, 0, bytes, b, 0, NULL, NULL);
  CLBlastStatusCode st = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, N, N, N,
                                      1.0f, S->a, 0, N, S->b, 0, N, 0.0f, S->c, 0, N, &S->q, NULL);
  err |= clEnqueueReadBuffer(S->q, S->c, CL_TRUE, 0, bytes, c, 0, NULL, NULL);
  t = loom__now() - t;
  if (err || st != CLBlastSuccess) return 1;
  if (t < *best) *best = t;
  return 0;
}

static int fft_time(lib_side *S, int64_t n, const void *x, void *y, double *best) {
  size_t bytes = (size_t)n * 8;
  cl_int err = 0;
  if (!S->have_plan) {
    size_t len = (size_t)n;
    if (clfftCreateDefaultPlan(&S->plan, S->ctx, CLFFT_1D, &len) ||
        clfftSetPlanPrecision(S->plan, CLFFT_SINGLE) ||
        clfftSetLayout(S->plan, CLFFT_COMPLEX_INTERLEAVED, CLFFT_COMPLEX_INTERLEAVED) ||
        clfftSetResultLocation(S->plan, CLFFT_OUTOFPLACE) || clfftBakePlan(S->plan, 1, &S->q, NULL, NULL))
      return 1;
    S->have_plan = true;
  }
  double t = loom__now();
  err |= clEnqueueWriteBuffer(S->q, S->a, CL_FALSE, 0, bytes, x, 0, NULL, NULL);
  clfftStatus st = clfftEnqueueTransform(S->plan, CLFFT_FORWARD, 1, &S->q, 0, NULL, NULL, &S->a, &S->c, NULL);
  err |= clEnqueueReadBuffer(S->q, S->c, CL_TRUE, 0, bytes, y, 0, NULL, NULL);
  t = loom__now() - t;
  if (err || st != CLFFT_SUCCESS) return 1;
  if (t < *best) *best = t;
  return 0;
}

/* ---- one device ------------------------------------------------------------------------------ */

static int bench_sgemm(const options *o, const loom__device *d, const loom__exec_device *dev, result *r) {
  char text[256];
  snprintf(text, sizeof text, "graph sgemm(a: f32[%lld,%lld], b: f32[%lld,%lld]) { c = dot a b\n return c }",
           (long long)o->n, (long long)o->n, (long long)o->n, (long long)o->n);
  loom_side L;
  lib_side S;
  int64_t bytes = o->n * o->n * 4;
  int rc = loom_prepare(&L, text) || lib_open(&S, d, bytes, bytes, bytes);
  float *c = rc ? NULL : malloc((size_t)bytes);
  rc |= !c;
  *r = (result){.what = "sgemm", .loom_s = 1e30, .lib_s = 1e30, .flops = 2.0 * (double)o->n * o->n * o->n};
  for (int32_t i = 0; !rc && i <= o->reps; i++) { /* run 0 warms up (programs, CLBlast's kernels) */
    double warm = 1e30;
    rc |= loom_time(&L, dev, i ? &r->loom_s : &warm);
    rc |= sgemm_time(&S, o->n, L.in[0].data, L.in[1].data, c, i ? &r->lib_s : &warm);
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
  int rc = loom_prepare(&L, text) || lib_open(&S, d, n * 8, 8, n * 8);
  void *y = rc ? NULL : malloc((size_t)n * 8);
  rc |= !y;
  *r = (result){.what = "fft", .loom_s = 1e30, .lib_s = 1e30, .flops = 5.0 * (double)n * o->fft_log2};
  for (int32_t i = 0; !rc && i <= o->reps; i++) {
    double warm = 1e30;
    rc |= loom_time(&L, dev, i ? &r->loom_s : &warm);
    rc |= fft_time(&S, n, L.in[0].data, y, i ? &r->lib_s : &warm);
  }
  free(y);
  lib_close(&S);
  loom_release(&L);
  return rc;
}

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
  printf("  %-5s %-6s %-12s Loom %9.3f ms (%6.1f GFLOPS)   %s %9.3f ms (%6.1f GFLOPS)   ratio %.2f\n", id,
         r->what, size, r->loom_s * 1e3, r->flops / r->loom_s * 1e-9,
         strcmp(r->what, "sgemm") == 0 ? "CLBlast" : "clFFT  ", r->lib_s * 1e3, r->flops / r->lib_s * 1e-9,
         r->lib_s / r->loom_s);
}

int loom_bench_opencl(int argc, char **argv) {
  options o;
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc;
  loom_context *ctx = NULL;
  if (loom_context_create(NULL, &ctx)) {
    fprintf(stderr, "loom-bench opencl: %s\n", loom_last_error());
    return 1;
  }
  FILE *jf = o.json ? fopen(o.json, "w") : NULL;
  if (o.json && !jf) {
    fprintf(stderr, "loom-bench opencl: cannot write %s\n", o.json);
    loom_context_destroy(ctx);
    return 1;
  }
  loom__json j;
  if (jf) {
    loom__json_init(&j, jf, true);
    loom__json_begin_object(&j);
    loom__json_key(&j, "opencl");
    loom__json_begin_array(&j);
  }
  printf("loom-bench opencl: best of %d runs, end to end (host -> device -> host); ratio = library / Loom\n",
         (int)o.reps);
  int32_t measured = 0;
  for (int32_t i = 0; !rc && i < ctx->devices.dev_count; i++) {
    const loom__device *d = &ctx->devices.dev[i];
    if (!(d->backends & LOOM_BACKEND_OPENCL) || d->cl_index < 0) continue;
    char id[16];
    snprintf(id, sizeof id, "ocl%d", (int)d->cl_index);
    if (!wanted(&o, id)) continue;
    const loom__exec_device *dev;
    if (loom__context_exec_device(ctx, id, &dev)) {
      fprintf(stderr, "loom-bench opencl: %s: %s\n", id, loom_last_error());
      rc = 1;
      break;
    }
    printf("%s: %s\n", id, d->name ? d->name : "");
    result r[2];
    if (bench_sgemm(&o, d, dev, &r[0]) || bench_fft(&o, d, dev, &r[1])) {
      fprintf(stderr, "loom-bench opencl: %s: a run failed: %s\n", id, loom_last_error());
      rc = 1;
      break;
    }
    for (int32_t k = 0; k < 2; k++) {
      print_result(id, &r[k], &o);
      if (!jf) continue;
      loom__json_begin_object(&j);
      loom__json_kv_string(&j, "device", id);
      loom__json_kv_string(&j, "name", d->name ? d->name : "");
      loom__json_kv_string(&j, "workload", r[k].what);
      loom__json_kv_double(&j, "loom_seconds", r[k].loom_s);
      loom__json_kv_double(&j, "library_seconds", r[k].lib_s);
      loom__json_kv_double(&j, "ratio", r[k].lib_s / r[k].loom_s);
      loom__json_end_object(&j);
    }
    measured++;
  }
  if (!rc && measured == 0) printf("no OpenCL device%s\n", o.devices ? " matches --devices" : " found");
  if (jf) {
    loom__json_end_array(&j);
    loom__json_end_object(&j);
    if (loom__json_finish(&j) || fclose(jf)) rc = 1;
  }
  loom_context_destroy(ctx);
  return rc;
}

#else

int loom_bench_opencl(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "loom-bench opencl: this build has no OpenCL backend with CLBlast and clFFT\n");
  return 1;
}

#endif
