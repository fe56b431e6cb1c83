/* The host's peaks measured in the suite's own run (suite.h, suite_host_peaks): an FMA loop in
 * f32 and f64 on the widest vector unit the CPU enables, on every OpenMP thread the suite uses,
 * and a STREAM-style triad for the memory. A table peak (clock x cores x FLOPs per cycle) is
 * only what the core could issue at its nominal clock; machines of this kind have changed under
 * the project between sessions (Zen 3, Skylake-X, Zen 4, Zen 5), and a VM's clock, turbo and
 * hidden ISA all move the real figure, so the "of peak" columns divide by what was measured. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "suite.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

/* Independent accumulators: FMA latency (4 cycles) x units (2) needs 8 in flight; 12 leaves
 * room and fits the 16 registers of AVX2 with the two constants. */
#define FMA_STEP(acc, m, a, op) \
  acc[0] = op(acc[0], m, a);    \
  acc[1] = op(acc[1], m, a);    \
  acc[2] = op(acc[2], m, a);    \
  acc[3] = op(acc[3], m, a);    \
  acc[4] = op(acc[4], m, a);    \
  acc[5] = op(acc[5], m, a);    \
  acc[6] = op(acc[6], m, a);    \
  acc[7] = op(acc[7], m, a);    \
  acc[8] = op(acc[8], m, a);    \
  acc[9] = op(acc[9], m, a);    \
  acc[10] = op(acc[10], m, a);  \
  acc[11] = op(acc[11], m, a)
enum { N_ACC = 12 };

/* Each kernel runs `iters` steps of N_ACC fused multiply-adds x <- x * m + a on one thread and
 * returns a sum of the accumulators, so the compiler cannot drop the work. m < 1 and a > 0 keep
 * every value near a / (1 - m): no overflow, no denormals. */
#if HAVE_X86
__attribute__((target("avx512f"))) static double fma_avx512_f32(int64_t iters) {
  __m512 acc[N_ACC], m = _mm512_set1_ps(0.9999f), a = _mm512_set1_ps(1e-4f);
  for (int i = 0; i < N_ACC; i++) acc[i] = _mm512_set1_ps(1.0f + (float)i);
  for (int64_t i = 0; i < iters; i++) {
    FMA_STEP(acc, m, a, _mm512_fmadd_ps);
  }
  for (int i = 1; i < N_ACC; i++) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  return _mm512_reduce_add_ps(acc[0]);
}

__attribute__((target("avx512f"))) static double fma_avx512_f64(int64_t iters) {
  __m512d acc[N_ACC], m = _mm512_set1_pd(0.9999), a = _mm512_set1_pd(1e-4);
  for (int i = 0; i < N_ACC; i++) acc[i] = _mm512_set1_pd(1.0 + i);
  for (int64_t i = 0; i < iters; i++) {
    FMA_STEP(acc, m, a, _mm512_fmadd_pd);
  }
  for (int i = 1; i < N_ACC; i++) acc[0] = _mm512_add_pd(acc[0], acc[i]);
  return _mm512_reduce_add_pd(acc[0]);
}

__attribute__((target("avx2,fma"))) static double fma_avx2_f32(int64_t iters) {
  __m256 acc[N_ACC], m = _mm256_set1_ps(0.9999f), a = _mm256_set1_ps(1e-4f);
  for (int i = 0; i < N_ACC; i++) acc[i] = _mm256_set1_ps(1.0f + (float)i);
  for (int64_t i = 0; i < iters; i++) {
    FMA_STEP(acc, m, a, _mm256_fmadd_ps);
  }
  float out[8];
  for (int i = 1; i < N_ACC; i++) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  _mm256_storeu_ps(out, acc[0]);
  return out[0] + out[7];
}

__attribute__((target("avx2,fma"))) static double fma_avx2_f64(int64_t iters) {
  __m256d acc[N_ACC], m = _mm256_set1_pd(0.9999), a = _mm256_set1_pd(1e-4);
  for (int i = 0; i < N_ACC; i++) acc[i] = _mm256_set1_pd(1.0 + i);
  for (int64_t i = 0; i < iters; i++) {
    FMA_STEP(acc, m, a, _mm256_fmadd_pd);
  }
  double out[4];
  for (int i = 1; i < N_ACC; i++) acc[0] = _mm256_add_pd(acc[0], acc[i]);
  _mm256_storeu_pd(out, acc[0]);
  return out[0] + out[3];
}
#endif

/* Without FMA (SSE2, or not x86): a multiply and an add, which such cores issue side by side;
 * each counts as the two FLOPs of an FMA. The compiler vectorizes it to its baseline ISA. */
#define PLAIN_KERNEL(name, T)                                      \
  static double name(int64_t iters) {                              \
    T acc[N_ACC * 4], m = (T)0.9999, a = (T)1e-4;                  \
    for (int i = 0; i < N_ACC * 4; i++) acc[i] = (T)(1 + i);       \
    for (int64_t i = 0; i < iters; i++)                            \
      for (int k = 0; k < N_ACC * 4; k++) acc[k] = acc[k] * m + a; \
    T s = 0;                                                       \
    for (int i = 0; i < N_ACC * 4; i++) s += acc[i];               \
    return (double)s;                                              \
  }
PLAIN_KERNEL(plain_f32, float)
PLAIN_KERNEL(plain_f64, double)

typedef struct fma_kernel {
  double (*run)(int64_t iters);
  double flops_per_iter; /* per thread */
  const char *what;
} fma_kernel;

/* The widest kernel this CPU runs, for f32 (f64 false) or f64. */
static fma_kernel pick_kernel(bool f64) {
#if HAVE_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    return f64 ? (fma_kernel){fma_avx512_f64, N_ACC * 8 * 2.0, "AVX-512 FMA"}
               : (fma_kernel){fma_avx512_f32, N_ACC * 16 * 2.0, "AVX-512 FMA"};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return f64 ? (fma_kernel){fma_avx2_f64, N_ACC * 4 * 2.0, "AVX2 FMA"}
               : (fma_kernel){fma_avx2_f32, N_ACC * 8 * 2.0, "AVX2 FMA"};
#endif
  return f64 ? (fma_kernel){plain_f64, N_ACC * 4 * 2.0, "multiply and add"}
             : (fma_kernel){plain_f32, N_ACC * 4 * 2.0, "multiply and add"};
}

static volatile double fma_sink; /* keeps the kernels' results alive */

/* The calling thread's CPU time: the time it ran, not the time it waited for a core. */
static double thread_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Best GFLOP/s of `trials` runs of the kernel on every OpenMP thread at once: each thread's
 * FLOPs over its own CPU time, summed. CPU time rather than the clock on the wall, because on a
 * machine with more runnable threads than cores (this project's shared machines) a thread waits
 * for its turn, and the peak is what the cores do while they run. */
static double fma_gflops(const fma_kernel *k, int64_t iters, int32_t trials, int *threads) {
  double best = 0;
  for (int32_t t = 0; t < trials; t++) {
    double sum = 0, rate = 0;
    int n = 1;
#pragma omp parallel reduction(+ : sum, rate)
    {
      double t0 = thread_seconds();
      sum += k->run(iters);
      rate += k->flops_per_iter * (double)iters / (thread_seconds() - t0) * 1e-9;
#pragma omp single
      n = omp_get_num_threads();
    }
    fma_sink = sum;
    *threads = n;
    if (rate > best) best = rate;
  }
  return best;
}

/* Best GB/s of a[i] = b[i] + s * c[i] over n doubles, counted as STREAM does (24 bytes per
 * element: the write-allocate read of a is not counted). 0 without the memory. */
static double triad_gbps(int64_t n, int32_t trials) {
  double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b),
         *c = malloc((size_t)n * sizeof *c);
  double best = 0;
  if (a && b && c) {
    /* first touch on the threads that later use each page (NUMA placement) */
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) a[i] = 0, b[i] = 1, c[i] = 2;
    for (int32_t t = 0; t < trials; t++) {
      double s = 0.5 + t, rate = 0;
      /* each thread's share of the bytes over its own CPU time, summed (as fma_gflops) */
#pragma omp parallel reduction(+ : rate)
      {
        int nt = omp_get_num_threads(), me = omp_get_thread_num();
        int64_t lo = n * me / nt, hi = n * (me + 1) / nt;
        double t0 = thread_seconds();
        for (int64_t i = lo; i < hi; i++) a[i] = b[i] + s * c[i];
        rate += 24.0 * (double)(hi - lo) / (thread_seconds() - t0) * 1e-9;
      }
      if (rate > best) best = rate;
    }
    fma_sink = a[n / 2];
  }
  free(a);
  free(b);
  free(c);
  return best;
}

void suite_host_peaks(int64_t triad_elements, suite_peaks *p) {
  memset(p, 0, sizeof *p);
  /* about 10 ms a trial at 3 GHz: long enough for the clock to settle, short beside the suite */
  const int64_t iters = 2000000;
  fma_kernel k32 = pick_kernel(false), k64 = pick_kernel(true);
  int threads = 1;
  p->gflops_f32 = fma_gflops(&k32, iters, 5, &threads);
  p->gflops_f64 = fma_gflops(&k64, iters, 5, &threads);
  p->threads = threads;
  snprintf(p->fma_source, sizeof p->fma_source, "measured: %s loop, %d accumulators, %d thread%s, CPU time",
           k32.what, N_ACC, threads, threads == 1 ? "" : "s");
  p->triad_gbps = triad_gbps(triad_elements, 5);
  snprintf(p->triad_source, sizeof p->triad_source, "measured: triad of 3 x %lld MiB, %d thread%s, CPU time",
           (long long)(triad_elements * 8 >> 20), threads, threads == 1 ? "" : "s");
}
