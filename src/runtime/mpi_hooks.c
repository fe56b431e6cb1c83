/* The table of libloom internals that libloom_mpi calls (runtime/mpi_hooks.h). */
#include "runtime/mpi_hooks.h"

#include "ir/loop_range.h"
#include "ir/repiece.h"

#ifndef LOOM_VERSION_STRING
#error "LOOM_VERSION_STRING must be defined (CMakeLists.txt)"
#endif

static const loom__mpi_hooks hooks = {
    .size = sizeof(loom__mpi_hooks),
    .version = LOOM_VERSION_STRING,
    .error = loom__error,
    .error_prefix = loom__error_prefix,
    .oom = loom__oom,
    .calloc = loom__calloc,
    .free = loom__free,
    .aligned_alloc = loom__aligned_alloc,
    .aligned_free = loom__aligned_free,
    .tensor_init_unzeroed = loom__tensor_init_unzeroed,
    .now = loom__now,
    .value_label = loom__value_label,
    .rebuild_init = loom__rebuild_init,
    .rebuild_init_empty = loom__rebuild_init_empty,
    .rebuild_copy = loom__rebuild_copy,
    .rebuild_get = loom__rebuild_get,
    .rebuild_set = loom__rebuild_set,
    .rebuild_deinit = loom__rebuild_deinit,
    .graph_dce = loom__graph_dce,
    .loop_range_graph = loom__loop_range_graph,
    .loops_fit = loom__loops_fit,
    .combine_partials = loom__combine_partials,
};

const loom__mpi_hooks *loom__mpi_hooks_get(void) {
  return &hooks;
}
