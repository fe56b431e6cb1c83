/* loom-bench's measurement layer: how one case is measured, shared by the modes that compare
 * Loom with a vendor library (opencl, cuda, suite) and written for the scheduler's performance
 * models (issue 15: `loom-bench calibrate` is to call these same functions, so calibrate and
 * suite never disagree on what a case costs).
 *
 * A case is a one-op graph (bench_op) run on one device: one warm-up run, then the best of
 * `reps` timed runs, end to end from host memory to a new host result. Where a vendor library
 * does the same work (bench_vendor), its side runs alternately with Loom's, so a busy machine
 * slows both alike; the ratio is vendor time / Loom time (1.00: as fast as the library called
 * directly). */
#ifndef LOOM_BENCH_MEASURE_H
#define LOOM_BENCH_MEASURE_H

#include <stdbool.h>
#include <stdint.h>

#include "loom/loom.h"

enum { BENCH_OP_MAX_IN = 3 };

/* A one-op graph and its random inputs (owned; bench_op_close frees them). */
typedef struct bench_op {
  loom_graph *g;
  loom_tensor in[BENCH_OP_MAX_IN];
  int32_t n_in, n_out;
} bench_op;

/* Parses `text` (.lir, at most BENCH_OP_MAX_IN parameters) and fills each parameter with
 * random values of stream p and seed `seed`. 1 on failure, the message in loom_last_error;
 * *op is then closed. */
int bench_op_open(bench_op *op, const char *text, uint64_t seed);
void bench_op_close(bench_op *op);

/* One run of op on device `id` of ctx into new results (freed here): its seconds, or -1 on
 * failure (loom_last_error says why). */
double bench_op_run(loom_context *ctx, const char *id, const bench_op *op);

/* The vendor's side of one case: one call of `run` does the op's work once, end to end from
 * the op's host inputs into host memory, and returns its seconds (or -1 with a message in
 * `why`). `state` is the side's own (a plan, a handle, device buffers); close frees it. */
typedef struct bench_vendor {
  const char *library; /* "OpenBLAS", "FFTW", "CLBlast", "memcpy" */
  void *state;
  double (*run)(void *state, const bench_op *op, char *why, size_t why_size);
  void (*close)(void *state);
} bench_vendor;

/* Best seconds of each side; vendor_s is 0 where there was no vendor side. */
typedef struct bench_times {
  double loom_s, vendor_s;
} bench_times;

/* ---- samples: a case repeated until its spread is known (loom-bench suite) ---- */

enum { BENCH_MAX_SAMPLES = 64 };

/* The timed runs of one side of a case, and their summary (bench_sample_summarize). The
 * dispersion figure is the median absolute deviation from the median (MAD): robust to the
 * few runs a busy machine stretches, which a standard deviation is not. */
typedef struct bench_sample {
  int32_t n;
  double s[BENCH_MAX_SAMPLES]; /* seconds, in the order run */
  double min, median, mad;     /* seconds; 0 while n is 0 */
} bench_sample;

/* When to stop repeating: after at least min_samples timed runs, once every side's relative
 * dispersion (MAD / median) is at most `target` and its fastest run within 10 x `target` of
 * its median (a faster mode not yet sampled enough: measure.c), or when the timed runs of the case have taken
 * budget_s seconds, or at max_samples (at most BENCH_MAX_SAMPLES). loom_runs > 1 makes each of
 * Loom's samples that many runs in a row (LOOM_BENCH_SLOW_CASE, for tests only: suite.c). */
typedef struct bench_stop {
  int32_t min_samples, max_samples;
  double target, budget_s;
  int32_t loom_runs;
} bench_stop;

/* Appends t (ignored when full) and summarizes again. */
void bench_sample_add(bench_sample *s, double t);
/* Sorts a copy of the samples into min, median and MAD. */
void bench_sample_summarize(bench_sample *s);
/* MAD / median; 0 with no sample. */
double bench_sample_dispersion(const bench_sample *s);

/* bench_measure with samples: warm-up runs of each side, alternately, for 10 ms (at least one
 * each), then timed runs of each side, alternately, appended to *loom and *vendor (NULL: no
 * vendor side; v and vendor go together; set n = 0 before a case's first call) until `stop`
 * says the spread is known: its least number of runs and its budget count this call's runs,
 * its maximum all of them, so a case may be measured in several calls spread over a run. 1 on
 * a failed run, with the message in why. */
int bench_measure_samples(loom_context *ctx, const char *id, const bench_op *op, const bench_vendor *v,
                          const bench_stop *stop, bench_sample *loom, bench_sample *vendor, char *why,
                          size_t why_size);

/* Loom's side of op on `id` and, when v is not NULL, v's side, alternately: one warm-up run of
 * each, then `reps` timed runs each; the best of each kept in *t. 1 on a failed run, with the
 * message in why. */
int bench_measure(loom_context *ctx, const char *id, const bench_op *op, const bench_vendor *v, int32_t reps,
                  bench_times *t, char *why, size_t why_size);

/* Transfers through the memory manager of `bytes` from the caller's host buffer src (its
 * contents the data) and back into dst, beside a plain memcpy src -> dst of the same bytes run
 * next to each transfer: one warm-up, then the best of `reps`. 1 on failure, or when the bytes
 * read back differ from src, with the message in why. */
typedef struct bench_transfer {
  double h2d_s, d2h_s, memcpy_s;
  bench_sample h2d, d2h, memcpy; /* every timed run (peer transfers: h2d) */
} bench_transfer;

/* loom_buffer_write then loom_buffer_read of a device-local buffer on `node`. */
int bench_measure_host_transfers(loom_mem_manager *m, int32_t node, const void *src, void *dst, int64_t bytes,
                                 int32_t reps, bench_transfer *t, char *why, size_t why_size);
/* The same until `stop` says the spread of every transfer is known (stop->loom_runs unused). */
int bench_measure_host_transfers_until(loom_mem_manager *m, int32_t node, const void *src, void *dst,
                                       int64_t bytes, const bench_stop *stop, bench_transfer *t, char *why,
                                       size_t why_size);
/* A buffer on node a acquired for reading on node b (migration off: a copy made and dropped
 * each time): its best seconds in t->h2d_s (d2h_s unused). */
int bench_measure_peer_transfer(loom_mem_manager *m, int32_t a, int32_t b, const void *src, void *dst,
                                int64_t bytes, int32_t reps, bench_transfer *t, char *why, size_t why_size);
int bench_measure_peer_transfer_until(loom_mem_manager *m, int32_t a, int32_t b, const void *src, void *dst,
                                      int64_t bytes, const bench_stop *stop, bench_transfer *t, char *why,
                                      size_t why_size);

/* Keeps t in *best when it is smaller (or *best is not set yet: <= 0). */
static inline void bench_keep(double *best, double t) {
  if (*best <= 0 || t < *best) *best = t;
}

/* The device's f32 peak in GFLOP/s from what it says and a table: for CPUs (cpu0 and CPU
 * OpenCL devices such as PoCL run on the host) clock x cores x the f32 FLOPs per cycle of the
 * host's micro-architecture (loom/internal/cpu.h); for CUDA devices clock x multiprocessors x
 * the FP32 lanes of the compute capability x 2; 0 for others (an OpenCL GPU does not say).
 * `source` receives how it was computed ("" when 0). */
double bench_spec_peak_gflops(const loom_device_info *info, char *source, size_t size);

#endif
