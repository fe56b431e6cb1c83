/* loom-bench suite and compare: every case of every device, as measured (suite.c), the vendor
 * sides (suite_vendor.c) and the reports (suite_report.c: Markdown, JSON, SVG). */
#ifndef LOOM_BENCH_SUITE_H
#define LOOM_BENCH_SUITE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "loom/loom.h"
#include "measure.h"

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
 * memory ones, microseconds per op for latency. */
typedef struct suite_case {
  suite_kind kind;
  char name[24];  /* "gemm", "fft", "d2d" */
  char size[48];  /* "256x256x256", "2^14", "4 MiB -> ocl1" */
  char dtype[8];  /* "f32", "c64", "u8" */
  double seconds; /* Loom's best; 0: not measured (error says why) */
  double flops;   /* per run; 0 for transfers */
  double bytes;   /* read plus written per run */
  double rate;
  const char *unit; /* "GFLOP/s", "GB/s", "us" */
  char library[40]; /* the vendor side's name; "" when there is none (reason says why) */
  double library_seconds;
  double ratio; /* library seconds / Loom seconds; 0 when no library */
  char reason[200];
  double fraction; /* of the device's peak; < 0 when there is no peak to compare with */
  char error[200]; /* why the case failed; "" when it ran */
} suite_case;

typedef struct suite_device {
  char id[16], vendor[96], name[128], driver[96], runtime[160], kind[12];
  int32_t compute_units, clock_mhz;
  double peak_gflops, peak_gbps; /* f32 compute and memory peaks; 0: unknown */
  char peak_gflops_source[120], peak_gbps_source[120];
  suite_case *cases;
  int32_t n_cases, cap_cases;
} suite_device;

typedef struct suite_report {
  char loom_version[16];
  char profile[8]; /* "full", "quick", "tiny" */
  int32_t reps;
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

/* ---- suite_vendor.c ---- */

/* The vendor side of case c (its graph op) on device `index` of ctx: 0 with *v set, or 1 with
 * the reason there is none (or why it could not open) in reason. */
int suite_vendor_open(const suite_case *c, const suite_device *d, const loom_device_info *info,
                      loom_context *ctx, int32_t index, const bench_op *op, bench_vendor *v, char *reason,
                      size_t reason_size);
/* "OpenBLAS 0.3.26 ...; FFTW 3.3.10": the versions of cpu0's libraries. */
void suite_cpu_runtime(char *out, size_t size);

/* ---- suite_report.c ---- */

void suite_print_markdown(const suite_report *r, FILE *out);
/* 1 when the file cannot be written (a message on stderr). */
int suite_write_json(const suite_report *r, const char *path);
int suite_write_svg(const suite_report *r, const char *path);

#endif
