/* loom-bench: one function per mode; main.c picks the mode from the first argument. */
#ifndef LOOM_BENCH_H
#define LOOM_BENCH_H

/* Each returns the process's exit code: 0 done, 1 failed, 2 bad command line. argv[0] is the
 * mode's name. */
int loom_bench_attention(int argc, char **argv);
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
