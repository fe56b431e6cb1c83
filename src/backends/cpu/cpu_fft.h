/* The cpu backend's FFTW plans (cpu_fft_plan.c), shared by the transforms of cpu_fft.c.
 *
 * A plan is keyed by its whole problem (loom__fft_key), made once and cached for the life of
 * the process. Plans are measured (FFTW_MEASURE) unless LOOM_FFTW_MEASURE=0, which selects
 * FFTW_ESTIMATE (the tests' setting: measuring costs up to seconds per new shape). Measured
 * plans are remembered across processes as FFTW wisdom in Loom's cache folder (LOOM_CACHE_DIR,
 * else $XDG_CACHE_HOME/loom, else ~/.cache/loom; fftw/<cpu>.{f32,f64}.wisdom, the CPU named
 * because a plan measured on one machine kind is no choice for another), read at the first
 * plan and written back whenever a new plan was measured. */
#ifndef LOOM_CPU_FFT_H
#define LOOM_CPU_FFT_H

#include "backends/backend.h"

typedef enum loom__fft_kind {
  LOOM__FFT_FORWARD,
  LOOM__FFT_BACKWARD,
  LOOM__FFT_R2C,
  LOOM__FFT_C2R
} loom__fft_kind;

/* One transform problem, as FFTW's guru64 interface takes it: n points at element stride
 * `stride` (the same in the input and the output array), repeated over up to two loops
 * (count, input stride, output stride; a count of 1 is no loop). All int64 so that there is no
 * padding and memcmp compares keys. */
typedef struct loom__fft_key {
  int64_t kind, dbl; /* loom__fft_kind; 1 for double precision */
  int64_t n, stride;
  int64_t loop[2][3];
  int64_t inplace;             /* the input array is the output array */
  int64_t unaligned;           /* planned with FFTW_UNALIGNED: runs on any alignment */
  int64_t align_in, align_out; /* fftw_alignment_of the arrays (0 when unaligned) */
  int64_t nthreads;            /* FFTW's own threads */
} loom__fft_key;

/* Elements along the transformed axis in the input and the output (n/2+1 on the complex
 * side of r2c and c2r). */
int64_t loom__fft_len_in(const loom__fft_key *k);
int64_t loom__fft_len_out(const loom__fft_key *k);
/* Bytes of one element of the input (input true) or output array. */
int64_t loom__fft_elem_bytes(const loom__fft_key *k, bool input);

/* The cached plan for k, made on first use (a measured plan on stand-in arrays, so the caller's
 * data is never touched; an estimated one on `in`/`out`, which FFTW_ESTIMATE does not write).
 * It runs through loom__fft_execute on any arrays of the key's layout and alignment. The
 * cache owns it, except past the cache's size, where *out_owned is set and the caller hands
 * it to loom__fft_plan_release when done. INTERNAL when FFTW cannot plan k (or the stand-ins
 * cannot be allocated). Thread-safe (one process-wide lock). */
loom_status loom__fft_plan_get(const loom__fft_key *k, void *in, void *out, void **out_plan, bool *out_owned);
/* Destroys a plan loom__fft_plan_get returned with *out_owned set; nothing otherwise. */
void loom__fft_plan_release(const loom__fft_key *k, void *plan, bool owned);

/* Runs plan (of key k) on in -> out through FFTW's new-array execute: thread-safe, and may run
 * on several threads at once with different arrays. */
void loom__fft_execute(const loom__fft_key *k, void *plan, void *in, void *out);

#endif
