/* What the fused module's tests share: a type's element count and a dense view of a buffer,
 * the operands loom__cpu_fused takes. */
#ifndef LOOM_TEST_FUSED_UTIL_H
#define LOOM_TEST_FUSED_UTIL_H

#include <string.h>

#include "backends/cpu/cpu_kernels.h"

static inline int64_t elems(const loom_type *t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t->rank; d++) n *= t->dims[d];
  return n;
}

/* A dense (row-major) view of `data` as type t. */
static inline loom__view dense_view(const loom_type *t, void *data) {
  loom__view v;
  memset(&v, 0, sizeof v);
  v.type = *t;
  loom__view_dense_strides(t, v.strides);
  v.data = data;
  return v;
}

#endif
