/* loom-bench: measures devices. `loom-bench MODE [options]`; each mode prints ratios against a
 * reference measured in the same run (shared/DESIGN.md: never absolute timings in tests). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "bench.h"

typedef struct mode {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *what;
} mode;

int loom_bench_blas(int argc, char **argv); /* bench_blas.c */
int loom_bench_onnx(int argc, char **argv); /* bench_onnx.c */
int loom_bench_limits(int argc, char **argv);

static const mode modes[] = {
    {"attention", loom_bench_attention,
     "softmax attention with an n x n score matrix under a limit, fused and unfused, vs unconstrained"},
    {"blas", loom_bench_blas,
     "Loom's libblas.so.3 vs OpenBLAS called directly: forwarded calls, level 3, JSON"},
    {"calls", loom_bench_calls,
     "a small plan called 10,000 times in a row: per-call time of host-tensor and resident (buffer) runs "
     "on cpu0 and OpenCL devices, beside NumPy"},
    {"cpu", loom_bench_cpu,
     "SGEMM (first call in a process and later) and a batched FFT through Loom vs OpenBLAS and FFTW on cpu0"},
    {"calibrate", loom_bench_calibrate,
     "the scheduler's performance models: each op class at 5-8 sizes from a few KiB up per device, a line "
     "fitted, written "
     "to the cache folder (loom-info --models prints them)"},
    {"compare", loom_bench_compare,
     "two suite reports (--json) of one machine side by side: B/A per case, flagged only beyond both runs' "
     "noise"},
    {"cuda", loom_bench_cuda,
     "SGEMM 8192^3 and a 2^24-point FFT through Loom vs cuBLAS and cuFFT, and host <-> device "
     "bandwidth (explicit copies vs managed memory), per CUDA device"},
    {"fft", loom_bench_fft,
     "batched c64 FFTs (rows, columns) through Loom vs FFTW's measured plan and SciPy"},
    {"fusion", loom_bench_fusion,
     "elementwise chains and bodies planned with and without the fuse rewrite, beside NumPy"},
    {"dot", loom_bench_dot,
     "a dot under limits of 0.8, 1/2, 1/4, 1/16 of its naive peak vs unconstrained: time ratios, measured "
     "peaks"},
    {"gemm", loom_bench_gemm,
     "SGEMM 4096^3 and DGEMM 2048^3: one Loom call vs OpenBLAS called directly and NumPy, alternating"},
    {"hmm", loom_bench_hmm, "host <-> device bandwidth: explicit copies, SVM access, plain memcpy"},
    {"kmv", loom_bench_kmv,
     "Gaussian kernel matrix-vector product, fused vs unfused under a limit: times, peaks, share of the "
     "device's dot rate"},
    {"knn", loom_bench_knn, "kNN rewritten unchunked vs chunked under limits: time ratios, measured peaks"},
    {"limits", loom_bench_limits,
     "the kernels of examples/limits/ whole and at 1/8 of their need: ratios, predicted times, peaks"},
    {"onnx", loom_bench_onnx,
     "an ONNX model whole on cpu0 vs PyTorch running its nodes (else onnxruntime): ratio"},
    {"overhead", loom_bench_overhead,
     "the executor's cost per op, per run and per loop piece on cpu0 and OpenCL devices, beside NumPy"},
    {"opencl", loom_bench_opencl,
     "SGEMM 2048^3 and a 2^20-point FFT through Loom vs CLBlast and clFFT, per OpenCL device"},
    {"share", loom_bench_share,
     "kNN on several devices at once (the shared runner) vs each device alone: best-of-R times and the "
     "ratios of issue 15's acceptance"},
    {"suite", loom_bench_suite,
     "every case on every device (GEMM, FFT, reduce, add, topk, conv, transfers, latency), repeated until "
     "its spread is known, vs the vendor library and the peaks measured in the run; Markdown, --json, --plot "
     "SVG"},
};

double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bool bench_id_listed(const char *list, const char *id) {
  if (!list) return true;
  size_t n = strlen(id);
  for (const char *p = list; p && *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && strncmp(p, id, n) == 0) return true;
    p = end ? end + 1 : NULL;
  }
  return false;
}

static void usage(FILE *out) {
  fputs(
      "usage: loom-bench MODE [options]   (loom-bench MODE --help for a mode's options)\n"
      "       loom-bench --help | --version\n\nmodes:\n",
      out);
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
    fprintf(out, "  %-10s %s\n", modes[i].name, modes[i].what);
  fputs(
      "\nEnvironment: LOOM_DEVICES picks devices (cpu0,ocl1); LOOM_LOG=warn|info|debug, how much the\n"
      "library says on stderr (default warn).\n"
      "Exit status: 0 done, 1 a measurement failed, 2 a wrong command line.\n",
      out);
}

int main(int argc, char **argv) {
  /* A benchmark's lines are its results: each reaches a pipe or a log file when printed, so a
   * run stopped by a time limit still leaves what it measured. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  static const struct option options[] = {
      {"help", no_argument, NULL, 'h'}, {"version", no_argument, NULL, 'V'}, {NULL, 0, NULL, 0}};
  loom__cli cli = {.prog = "loom-bench",
                   .synopsis = "loom-bench MODE [options]",
                   .options = options,
                   .short_options = "hV"};
  if (argc >= 2 && argv[1][0] == '-') { /* options before any mode: only these two */
    int key = loom__cli_next(&cli, 2, argv);
    if (key == 'h') usage(stdout);
    if (key == 'V') loom__cli_print_version(stdout, "loom-bench");
    if (key == 'h' || key == 'V') return 0;
    return key == LOOM__CLI_ERROR ? 2 : loom__cli_usage_error(&cli, "unexpected argument '%s'", argv[1]);
  }
  if (argc < 2) {
    usage(stderr);
    return loom__cli_usage_error(&cli, "no mode given");
  }
  const char *names[sizeof modes / sizeof modes[0]];
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
    if (strcmp(argv[1], modes[i].name) == 0) return modes[i].run(argc - 1, argv + 1);
    names[i] = modes[i].name;
  }
  char hint[128];
  loom__did_you_mean(argv[1], names, (int)(sizeof modes / sizeof modes[0]), hint, sizeof hint);
  return loom__cli_usage_error(&cli, "unknown mode '%s'%s", argv[1], hint);
}
