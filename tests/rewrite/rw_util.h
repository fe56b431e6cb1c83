/* Helpers shared by the rewrite tests: parse, optimize with one rewrite, inspect, run both
 * graphs on the same random inputs and compare. */
#ifndef LOOM_TEST_RW_UTIL_H
#define LOOM_TEST_RW_UTIL_H

#include "harness.h"
#include "ir/ir.h"

/* Parses .lir text; NULL (message printed) when it does not parse. */
loom_graph *rw_parse(const char *text);

/* Optimizes g with only rewrite `only` enabled (NULL: every rewrite), no limit. */
loom_status rw_optimize_only(const loom_graph *g, const char *only, loom_graph **out,
                             loom_rewrite_report *report);

/* Ops of `kind` in g. */
int rw_count_ops(const loom_graph *g, loom_op kind);
/* The first report entry named `name`, NULL when none. */
const loom_rewrite_entry *rw_entry(const loom_rewrite_report *report, const char *name);
int rw_count_entries(const loom_rewrite_report *report, const char *name);
/* Estimated peak of g in its own order; -1 on error. */
int64_t rw_peak(const loom_graph *g);

/* Runs ref and got on the same seeded random inputs (floats uniform in [-1,1) scaled by
 * `scale`, integers in [0,100)) and sets *out_worst to the worst |got-ref| / (atol + rtol |ref|)
 * over every output element (integers and bools: 0 when equal, else 1e30). */
loom_status rw_compare(const loom_graph *ref, const loom_graph *got, uint64_t seed, double scale, double atol,
                       double rtol, double *out_worst);

/* Runs g on the given inputs into outputs (caller deinits). */
loom_status rw_run(const loom_graph *g, const loom_tensor *inputs, int32_t n_inputs, loom_tensor *outputs,
                   int32_t n_outputs);

/* Random float inputs for g's parameters (caller deinits each), as rw_compare makes them. */
loom_status rw_random_inputs(const loom_graph *g, uint64_t seed, double scale, loom_tensor *inputs);

/* Element i of a float tensor as double. */
double rw_get(const loom_tensor *t, int64_t i);

#endif
