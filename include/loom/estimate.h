/* Memory estimates (shared/IR.md, "Memory model").
 *
 * The estimator models exactly what Loom's executor allocates: a value owns storage unless it
 * is a view (fill, broadcast, transpose, slice, reshape of contiguous data); storage is
 * allocated when the value is produced, counted at its requested byte size (the 64-byte
 * alignment padding is not counted, on either side), and freed right after its last reader;
 * inputs are held from the start until their last reader; outputs until the end; an op's
 * temporaries (dot 1x its output, conv 2x, fourier 2x, reductions, argmax/argmin and topk 1x)
 * are allocated for the duration of the op. No op writes in place over its input.
 */
#ifndef LOOM_ESTIMATE_H
#define LOOM_ESTIMATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "loom/export.h"
#include "loom/graph.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_estimate_step {
  int32_t op;              /* op index in the graph */
  int64_t output_logical;  /* bytes of its results as a naive program would hold them */
  int64_t output_physical; /* bytes of its results that own storage (0 for a view) */
  int64_t temporary;       /* its temporaries */
  int64_t live_before;     /* physical bytes held across this step, not counting its results */
  int64_t peak;            /* live_before + output_physical + temporary */
} loom_estimate_step;

typedef struct loom_estimate {
  int64_t input_bytes;     /* the graph's inputs (parameters) */
  int64_t logical_bytes;   /* sum of every op's logical output bytes */
  int64_t physical_bytes;  /* sum of every op's physical output bytes */
  int64_t temporary_bytes; /* sum of every op's temporaries */
  int64_t total_bytes;     /* physical_bytes + temporary_bytes: as if nothing were freed */
  int64_t peak_bytes;      /* the largest step peak (at least input_bytes held at start) */
  int32_t peak_step;       /* index into steps of the peak; -1 when the graph has no ops */
  int32_t n_steps;
  loom_estimate_step *steps; /* one per op, in schedule order */
} loom_estimate;

/* Estimates `graph` for `schedule` (n_ops op indices, a topological order; NULL: the graph's
 * own order) into *out, which the caller releases with loom_estimate_deinit.
 * Errors: INVALID_ARGUMENT (graph does not verify, schedule not a topological order),
 * OUT_OF_MEMORY. */
LOOM_API loom_status loom_graph_estimate(const loom_graph *graph, const int32_t *schedule,
                                         loom_estimate *out);
LOOM_API void loom_estimate_deinit(loom_estimate *estimate);

/* Logical and physical bytes of one value (physical 0 for a view). Either out may be NULL. */
LOOM_API loom_status loom_value_bytes(const loom_graph *graph, loom_value v, int64_t *out_logical,
                                      int64_t *out_physical);

#ifdef __cplusplus
}
#endif
#endif
