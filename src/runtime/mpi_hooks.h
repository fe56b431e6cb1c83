/* libloom's internals that libloom_mpi calls (src/mpi/, loom_plan_run_mpi).
 *
 * MPI support is a library of its own (libloom_mpi) so that libloom needs no MPI, yet it
 * cuts plans around their loops and combines partial results, which reaches past the public
 * API (loop ranges, rebuilds, the combine of partials), and it must share one copy of
 * libloom's state (this thread's last error, the fault-injection allocator). The shared
 * library hides every loom__ symbol, so libloom exports this one table instead of each
 * function: a single internal entry point, named loom__ (not API: no stability promise, for
 * the libloom_mpi built from the same tree only; `size` and `version` catch another one).
 * Struct layouts (loom_graph, loom__rebuild, loom__partial) are shared through the headers,
 * which is why the two libraries must come from the same build. */
#ifndef LOOM_RUNTIME_MPI_HOOKS_H
#define LOOM_RUNTIME_MPI_HOOKS_H

#include "core/core.h"
#include "ir/ir.h"
#include "ir/rebuild.h"
#include "loom/export.h"
#include "runtime/combine.h"

typedef struct loom__mpi_hooks {
  /* size, version and error come first in every version: libloom_mpi reads them to check that
   * the table is the one it was built for, and to say so when it is not. */
  size_t size;         /* sizeof(loom__mpi_hooks) where libloom was built */
  const char *version; /* libloom's version (PROJECT_VERSION) */
  loom_status (*error)(loom_status status, const char *fmt, ...) LOOM_PRINTF(2, 3);
  void (*error_prefix)(const char *fmt, ...) LOOM_PRINTF(1, 2);
  loom_status (*oom)(const char *what);
  void *(*calloc)(size_t count, size_t size);
  void (*free)(void *ptr);
  void *(*aligned_alloc)(size_t size);
  void (*aligned_free)(void *ptr);
  loom_status (*tensor_init_unzeroed)(loom_tensor *out, const loom_type *type);
  double (*now)(void);
  const char *(*value_label)(const loom_graph *g, int32_t id, char *buf, size_t size);
  loom_status (*rebuild_init)(loom__rebuild *rb, const loom_graph *src);
  loom_status (*rebuild_init_empty)(loom__rebuild *rb, const loom_graph *src, const char *name);
  loom_status (*rebuild_copy)(loom__rebuild *rb, int32_t op_index);
  loom_value (*rebuild_get)(const loom__rebuild *rb, int32_t src_value);
  void (*rebuild_set)(loom__rebuild *rb, int32_t src_value, loom_value v);
  void (*rebuild_deinit)(loom__rebuild *rb);
  loom_status (*graph_dce)(const loom_graph *g, loom_graph **out);
  loom_status (*loop_range_graph)(const loom_graph *g, int32_t op, int64_t first, int64_t last,
                                  loom_graph **out);
  loom_status (*loops_fit)(const loom_graph *g, int64_t limit, loom_graph **out, int64_t *out_peak);
  loom_status (*combine_partials)(const loom_graph *g, int32_t op, const loom__partial *parts,
                                  int32_t n_parts, loom_tensor *outs);
} loom__mpi_hooks;

/* The table (static storage, never NULL). Thread safety: constant. */
LOOM_API const loom__mpi_hooks *loom__mpi_hooks_get(void);

#endif
