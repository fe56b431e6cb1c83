/* loom-bench: one function per mode; main.c picks the mode from the first argument. */
#ifndef LOOM_BENCH_H
#define LOOM_BENCH_H

/* Each returns the process's exit code: 0 done, 1 failed, 2 bad command line. argv[0] is the
 * mode's name. */
int loom_bench_attention(int argc, char **argv);
int loom_bench_gemm(int argc, char **argv);
int loom_bench_calls(int argc, char **argv);
int loom_bench_cpu(int argc, char **argv);
int loom_bench_dot(int argc, char **argv);
int loom_bench_fft(int argc, char **argv);
int loom_bench_fusion(int argc, char **argv);
int loom_bench_hmm(int argc, char **argv);
int loom_bench_knn(int argc, char **argv);
int loom_bench_kmv(int argc, char **argv);
int loom_bench_opencl(int argc, char **argv);
int loom_bench_overhead(int argc, char **argv);
int loom_bench_cuda(int argc, char **argv);
int loom_bench_suite(int argc, char **argv);
int loom_bench_compare(int argc, char **argv);
int loom_bench_calibrate(int argc, char **argv);
int loom_bench_share(int argc, char **argv);

/* ---- bench_cli.c: each mode's command line (getopt_long, loom/internal/cli.h) ---- */

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "loom/internal/cli.h"

typedef enum bench_opt_kind {
  BENCH_FLAG,   /* no value: *(bool *)target = true */
  BENCH_TEXT,   /* *(const char **)target = the value (not empty) */
  BENCH_I64,    /* *(int64_t *)target: a whole number in [lo, hi] */
  BENCH_I32,    /* *(int32_t *)target: likewise (hi at most INT32_MAX) */
  BENCH_BYTES,  /* *(int64_t *)target: a byte size (loom_bytes_parse) in [lo, hi] */
  BENCH_DOUBLE, /* *(double *)target: a finite number in [dlo, dhi] */
  BENCH_REPEAT, /* repeatable: ((const char **)target)[(*count)++] = the value, at most hi times */
} bench_opt_kind;

/* One option of a mode: "--NAME", read into *target. `want` ends the message of a bad value
 * ("--repeats '0': want a count from 1 to 1000"); NULL: the range is said. */
typedef struct bench_opt {
  const char *name;
  bench_opt_kind kind;
  void *target;
  int64_t lo, hi;
  const char *want;
  double dlo, dhi;
  int32_t *count; /* BENCH_REPEAT: how many are held */
} bench_opt;

/* Table entries (designated, so that fields left out are zero without a warning). */
#define BENCH_OPT_FLAG(n, t) \
  { .name = (n), .kind = BENCH_FLAG, .target = (t) }
#define BENCH_OPT_TEXT(n, t, w) \
  { .name = (n), .kind = BENCH_TEXT, .target = (t), .want = (w) }
#define BENCH_OPT_INT(n, k, t, l, h, w) \
  { .name = (n), .kind = (k), .target = (t), .lo = (l), .hi = (h), .want = (w) }
#define BENCH_OPT_BYTES(n, t, l, h) \
  { .name = (n), .kind = BENCH_BYTES, .target = (t), .lo = (l), .hi = (h) }
#define BENCH_OPT_DOUBLE(n, t, l, h, w) \
  { .name = (n), .kind = BENCH_DOUBLE, .target = (t), .dlo = (l), .dhi = (h), .want = (w) }
#define BENCH_OPT_REPEAT(n, t, max, c, w) \
  { .name = (n), .kind = BENCH_REPEAT, .target = (t), .hi = (max), .count = (c), .want = (w) }
#define BENCH_OPT_END \
  { .name = NULL }

typedef struct bench_cli {
  const char *mode;     /* "dot": messages read "loom-bench dot: ..." */
  const char *synopsis; /* the usage line after a mistake: "loom-bench dot [options]" */
  void (*usage)(FILE *f);
  const bench_opt *opts; /* ended by an entry whose name is NULL; --help and --version are added */
  int max_operands;      /* arguments that are not options the mode takes (compare: 2) */
  char **operands;       /* out: those arguments */
  int n_operands;
} bench_cli;

/* Reads argv (argv[0]: the mode) into the options' fields. Returns 0; -1 after printing
 * --help or --version on stdout (exit 0); or 2 after printing the mistake. */
int bench_args(bench_cli *b, int argc, char **argv);

/* "loom-bench MODE: message" on stderr; returns code. */
int bench_fail(const char *mode, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The same and the usage line: a wrong command line that is no one option's fault. Returns 2. */
int bench_usage_error(const bench_cli *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A comma-separated list of at most `max` whole numbers (bytes: byte sizes) in [lo, hi] into
 * out[0..*count). Returns 0, or 2 after "loom-bench MODE: FLAG 'ITEM': want WANT". */
int bench_list(const char *mode, const char *flag, const char *text, bool bytes, int64_t lo, int64_t hi,
               const char *want, int64_t *out, int32_t max, int32_t *count);

/* ---- bench_python.c ---- */

/* Runs `python -c script` (python: a program name looked up on PATH, or a path; no shell) and
 * reads the one number it prints: seconds. -1 when the program is missing, fails (NumPy
 * absent) or prints anything else. */
double bench_python(const char *python, const char *script);

/* A python child that runs `setup` (which defines a function run()) and then times one call
 * of run() per request: the calls alternate with the caller's own, so a busy machine slows
 * both alike. open: false when the program is missing or setup fails (NumPy absent). call:
 * the wall seconds of one run(), or -1; last_cpu then holds the CPU seconds the child's
 * threads spent in it (-1 after a failure). close accepts a closed child. */
typedef struct bench_py {
  int pid;
  FILE *to, *from;
  double last_cpu;
} bench_py;
bool bench_py_open(bench_py *p, const char *python, const char *setup);
double bench_py_call(bench_py *p);
void bench_py_close(bench_py *p);

/* ---- bench_run.c: modes that time whole graphs ---- */

#include "loom/loom.h"

enum { BENCH_MAX_DISABLED = 4 };

/* One configuration's run: the best time, the run meter's peak, the device node's peak (the
 * memory manager's stats; -1 when unknown) and the first run's result (owned). */
typedef struct bench_run {
  bool ok;
  char why[512]; /* the error when !ok */
  double best_seconds;
  int64_t meter_peak, node_peak;
  loom_tensor out;
} bench_run;

/* The peak of the memory node `device` allocates from, over the context's life (the memory
 * manager's stats); -1 when the device or its node is not found. */
int64_t bench_node_peak(loom_context *ctx, const char *device);

/* A whole-number flag value of at least lo, or -1 when it does not read as one. */
long long bench_whole(const char *v, long long lo);

/* Parses .lir text; NULL (and the error printed, prefixed by the mode) when it does not. */
loom_graph *bench_parse(const char *text, const char *mode);

/* Plans g for one runner on `device` under `limit` (0: the device's own memory, unchunked) with
 * the rewrites in disabled[0..n_disabled) off (at most BENCH_MAX_DISABLED), as loom-run plans
 * it, then runs it in a context of its own: one warm-up and `repeats` timed runs (with 0, the
 * one run is timed). The graph has one result. */
void bench_plan_run(const char *device, const loom_graph *g, const loom_tensor *in, int32_t n_in,
                    int64_t limit, const char *const *disabled, int32_t n_disabled, int32_t repeats,
                    bench_run *r);

/* Seconds on a monotonic clock (main.c). */
double bench_now(void);

/* Whether `id` is one of the comma-separated ids of `list` (--devices); true for a NULL list
 * (main.c). */
bool bench_id_listed(const char *list, const char *id);

#endif
