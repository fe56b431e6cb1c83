/* loom-bench suite and compare: every case of every device, as measured (suite.c), the vendor
 * sides (suite_vendor.c) and the reports (suite_report.c: Markdown, JSON, SVG). */
#ifndef LOOM_BENCH_SUITE_H
#define LOOM_BENCH_SUITE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "loom/loom.h"
#include "measure.h"

/* The most processes a suite run may spread its passes over (--processes). */
enum { SUITE_MAX_PROCESSES = 16 };

/* What a case computes; each kind has its own graph, size and rate (suite.c). */
typedef enum suite_kind {
  SUITE_GEMM,
  SUITE_FFT,       /* c2c 1-D */
  SUITE_FFT_BATCH, /* c2c, a batch along the last axis */
  SUITE_RFFT,      /* r2c 1-D */
  SUITE_REDUCE,    /* reduce_sum of a vector */
  SUITE_ADD,       /* elementwise add of two vectors */
  SUITE_TOPK,
  SUITE_CONV,
  SUITE_H2D,
  SUITE_D2H,
  SUITE_D2D,
  SUITE_LATENCY, /* one add of one element: the cost of an op beyond its work */
} suite_kind;

/* One measured case. Rates: GFLOP/s for compute cases, GB/s (bytes read plus written) for
 * memory ones, microseconds per op for latency; all from the median time. */
typedef struct suite_case {
  suite_kind kind;
  char name[24];          /* "gemm", "fft", "d2d" */
  char size[48];          /* "256x256x256", "2^14", "4 MiB -> ocl1" */
  char dtype[8];          /* "f32", "c64", "u8" */
  int64_t param;          /* the size the profile gives the case's graph (suite.c: case_graph) */
  double seconds;         /* Loom's median; 0: not measured (error says why) */
  bench_sample loom, lib; /* every timed run of each side (lib: none without a library) */
  /* With --processes: how many of Loom's runs (and of the paired side's, taken with them) each
   * process added, in order; n_proc 0 when the whole case ran in this process. */
  int32_t proc_n[SUITE_MAX_PROCESSES];
  int32_t n_proc;
  /* Without a library: a fixed small GEMM through the device's library, run alternately with
   * Loom's side as a witness of the machine's state (compare reads it pair by pair; it is no
   * peer of the case, so no ratio is made of it). witness[0] == 0: none. */
  char witness[48];
  bench_sample wit;
  double flops; /* per run; 0 for transfers */
  double bytes; /* read plus written per run */
  double rate;
  const char *unit;       /* "GFLOP/s", "GB/s", "us" */
  char library[40];       /* the vendor side's name; "" when there is none (reason says why) */
  double library_seconds; /* the library's median */
  double ratio;           /* library median / Loom median; 0 when no library */
  char reason[200];
  double fraction; /* of the device's peak; < 0 when there is no peak to compare with */
  char error[200]; /* why the case failed; "" when it ran */
} suite_case;

typedef struct suite_device {
  char id[16], vendor[96], name[128], driver[96], runtime[160], kind[12];
  int32_t compute_units, clock_mhz;
  /* The peaks the "of peak" column divides by: measured in this run where the device is the
   * host's (cpu0, and CPU OpenCL devices such as PoCL), else the spec or the best case. */
  double peak_gflops, peak_gflops_f64, peak_gbps; /* 0: unknown */
  char peak_gflops_source[200], peak_gbps_source[120];
  double spec_gflops; /* the table's f32 peak (clock x units x FLOPs per cycle); 0: unknown */
  /* An OpenCL device's FMA kernel (f32) and triad (suite_cl_peaks.c); 0 with why in cl_why */
  double cl_gflops, cl_gbps;
  char cl_why[120];
  char spec_source[200];
  suite_case *cases;
  int32_t n_cases, cap_cases;
} suite_device;

/* The run's circumstances (suite_meta.c). */
typedef struct suite_meta {
  char date[32]; /* UTC, ISO 8601 */
  char loom_version[16], commit[48], build_type[24], compiler[48];
  char cpu_model[128], uarch[48], isa[16], flops_source[160];
  int32_t flops_per_cycle_f32, flops_per_cycle_f64, host_cores, host_pus;
  int32_t omp_threads, openblas_threads, cores_used; /* cores_used: CPUs in the affinity mask */
  char environment[2048]; /* "NAME=value\n" of OMP_*, GOMP_*, KMP_*, OPENBLAS_*, POCL_*, LOOM_* */
  double load_before[3], load_after[3]; /* /proc/loadavg; -1 when unreadable */
} suite_meta;

/* The host's peaks measured in this run (suite_peaks.c). */
typedef struct suite_peaks {
  double gflops_f32, gflops_f64, triad_gbps;
  int threads;
  char fma_source[120], triad_source[120];
} suite_peaks;

typedef struct suite_report {
  char loom_version[16];
  char profile[8];   /* "full", "quick", "tiny" */
  int32_t reps;      /* the least number of timed runs of a case */
  bench_stop stop;   /* when a case stopped repeating */
  int32_t passes;    /* rounds over the op cases, each adding runs to each */
  int32_t processes; /* processes the passes ran in (1: this one) */
  suite_meta meta;
  suite_peaks peaks;
  double wall_seconds;
  suite_device *devices;
  int32_t n_devices;
} suite_report;

void suite_report_free(suite_report *r);

/* Calls fn once per op case of the suite's profile ("full", "quick", "tiny") as cpu0 runs it,
 * with the case's name, dtype, size label and .lir text (valid during the call); 1 for an
 * unknown profile. `loom-bench fusion --suite` times them with and without the fuse rewrite. */
typedef void (*suite_graph_fn)(const char *name, const char *dtype, const char *size, const char *text,
                               void *user);
int suite_each_graph(const char *profile, suite_graph_fn fn, void *user);

/* A new case of device d (its name and dtype set, the rest zero), or NULL without memory. */
suite_case *suite_add_case(suite_device *d, suite_kind kind, const char *name, const char *dtype);

/* ---- suite_process.c: passes in processes of their own (--processes) ---- */

/* Whether this process is one pass of a parent suite (the parent set LOOM_BENCH_SUITE_PROCESS):
 * then *pass is its pass and *path the JSON report it is to write. */
bool suite_process_child(int32_t *pass, const char **path);
/* Runs this loom-bench again (argv as the suite was given it) as the child of pass `pass`, waits for it and
 * adds the runs of its report to r's devices, each case's runs of this process counted in proc_n. 1, with
 * why, when the child failed or wrote no report. */
int suite_run_child(int argc, char **argv, int32_t pass, suite_report *r, char *why, size_t why_size);

/* The vendor side of case c (its graph op) on device `index` of ctx: 0 with *v set, or 1 with
 * the reason there is none (or why it could not open) in reason. */
int suite_vendor_open(const suite_case *c, const suite_device *d, const loom_device_info *info,
                      loom_context *ctx, int32_t index, const bench_op *op, bench_vendor *v, char *reason,
                      size_t reason_size);
/* The witness of a case without a library (suite_case.witness): a 64^3 f32 GEMM through the
 * device's library (OpenBLAS, CLBlast, cuBLAS), its own inputs owned by *v (v->close frees
 * them). 0 with *v set and its name in name, or 1 with why in name. */
int suite_witness_open(const suite_device *d, const loom_device_info *info, loom_context *ctx, int32_t index,
                       bench_vendor *v, char *name, size_t name_size);
/* "OpenBLAS 0.3.26 ...; FFTW 3.3.10": the versions of cpu0's libraries. */
void suite_cpu_runtime(char *out, size_t size);

/* ---- suite_meta.c ---- */

struct loom__json;
/* Date, build, machine, threads, environment and the load before the run. */
void suite_meta_begin(suite_meta *m, const loom_context *ctx);
/* The load after the run. */
void suite_meta_end(suite_meta *m);
/* The Markdown lines of the report's header. */
void suite_meta_print(const suite_meta *m, FILE *out);
/* The report's keys (docs/bench.md, "JSON") into the open object of j. */
void suite_meta_json(const suite_meta *m, struct loom__json *j);

/* ---- suite_peaks.c ---- */

/* FMA loops (f32, f64) on every OpenMP thread and a triad over 3 arrays of `triad_elements`
 * doubles: best of 5 each. A triad without the memory for it reads 0 GB/s. */
void suite_host_peaks(int64_t triad_elements, suite_peaks *p);

/* ---- suite_cl_peaks.c ---- */

/* The f32 GFLOP/s of an FMA kernel and the GB/s of a triad over 3 x triad_floats floats on the
 * context's OpenCL device `index`, timed by OpenCL's profiling events in a context of their
 * own. 0, or 1 with why (not an OpenCL device, no OpenCL in this build, a failed kernel). */
int suite_cl_peaks(loom_context *ctx, int32_t index, int64_t triad_floats, double *gflops, double *gbps,
                   char *why, size_t why_size);

/* ---- suite_report.c ---- */

void suite_print_markdown(const suite_report *r, FILE *out);
/* 1 when the file cannot be written (a message on stderr). */
int suite_write_json(const suite_report *r, const char *path);
int suite_write_svg(const suite_report *r, const char *path);

#endif
