/* Helpers of the memory tests: seeded inputs, runs of a graph under one runner's limit with
 * the measured peaks checked against the limit and the estimates, and float64 comparisons. */
#ifndef LOOM_TEST_MEM_UTIL_H
#define LOOM_TEST_MEM_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "harness.h"

#define MIB ((int64_t)1 << 20)

/* True in an AddressSanitizer build: tests shrink their largest instances there only. */
#if defined(__SANITIZE_ADDRESS__)
#define MEM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MEM_ASAN 1
#endif
#endif
#ifndef MEM_ASAN
#define MEM_ASAN 0
#endif

/* Parses .lir text; NULL (and a failed test) when it does not parse. */
loom_graph *mem_parse(const char *text, const char *file, int line);
#define MEM_PARSE(text) mem_parse((text), __FILE__, __LINE__)

/* Loads examples/NAME from the source tree ($LOOM_SOURCE_DIR, else found from this file's
 * path); NULL (and a failed test) when it cannot. */
loom_graph *mem_load_example(const char *name, const char *file, int line);

/* Seeded inputs for every parameter of g: floats uniform in [lo, hi), c64 both parts so.
 * The caller releases them with mem_tensors_free. */
loom_status mem_inputs(const loom_graph *g, uint64_t seed, double lo, double hi, loom_tensor **out);
void mem_tensors_free(loom_tensor *t, int32_t n);

/* What one run under a limit did. */
typedef struct mem_run_info {
  int32_t n_stages;
  int64_t est_peak; /* the largest stage estimate */
  int64_t peak;     /* the largest measured stage peak */
  int32_t n_ops_in; /* ops of the graph as given */
  int32_t n_ops;    /* ops of the plan's graph */
  double seconds;
  char rewrites[256]; /* names of the rewrites applied, comma-separated */
  char note[256];     /* loom_graph_optimize_for_runners' note */
} mem_run_info;

/* Optimizes g for the one runner {"cpu0", limit} (rewrites in `disabled`, n_disabled of them,
 * turned off), cuts it with loom_plan_split_by_memory and runs the plan with stats. Checks
 * that every stage's measured peak is at or under its limit and within 10% of its estimate
 * (and every estimate at or under the limit). Outputs go to *out (release with
 * mem_tensors_free). Prints one line with the figures. Returns false after loom_test_fail
 * (the message names the graph, the limit and what broke). */
bool mem_run_under(const loom_graph *g, int64_t limit, const char *const *disabled, int32_t n_disabled,
                   const loom_tensor *in, loom_tensor **out, mem_run_info *info, const char *file, int line);
/* The same over several runners: each stage checked against its own runner's limit. */
bool mem_run_runners(const loom_graph *g, const loom_runner *runners, int32_t n_runners,
                     const char *const *disabled, int32_t n_disabled, const loom_tensor *in,
                     loom_tensor **out, mem_run_info *info, const char *file, int line);
#define MEM_RUN(g, limit, in, out, info)                                                        \
  do {                                                                                          \
    if (!mem_run_under((g), (limit), NULL, 0, (in), (out), (info), __FILE__, __LINE__)) return; \
  } while (0)

/* The largest |got - want| over n values, and where. */
double mem_max_abs_diff(const float *got, const double *want, int64_t n, int64_t *where);
/* The largest |x| over n doubles. */
double mem_max_abs(const double *x, int64_t n);

/* Checks f32 results against a float64 reference: |got - want| <= rtol * scale for every
 * element. Reports the worst element through loom_test_fail when it does not hold. */
bool mem_check_close(const char *what, const float *got, const double *want, int64_t n, double scale,
                     double rtol, const char *file, int line);
#define MEM_CHECK_CLOSE(what, got, want, n, scale, rtol)                                           \
  do {                                                                                             \
    if (!mem_check_close((what), (got), (want), (n), (scale), (rtol), __FILE__, __LINE__)) return; \
  } while (0)

/* k smallest (largest=false) of row i's m candidate distances, from a callback: the true
 * neighbour distances of a kNN, sorted ascending into best[n*k]. */
typedef double (*mem_dist_fn)(const float *x, const float *y, int64_t i, int64_t j, int64_t d);
double mem_d2(const float *x, const float *y, int64_t i, int64_t j, int64_t d);
double mem_l1(const float *x, const float *y, int64_t i, int64_t j, int64_t d);
void mem_knn_best(const float *x, const float *y, int64_t n, int64_t m, int64_t d, int64_t k,
                  mem_dist_fn dist, double *best);
/* Checks a kNN result (values f32[n,k], indices i64[n,k]): indices valid and unique per row,
 * each index's true distance and each returned value equal to the true j-th smallest distance
 * within 1e-3 relative + 1e-6 absolute. */
bool mem_check_knn(const float *x, const float *y, int64_t n, int64_t m, int64_t d, int64_t k,
                   mem_dist_fn dist, const double *best, const loom_tensor *val, const loom_tensor *idx,
                   const char *file, int line);

#endif
