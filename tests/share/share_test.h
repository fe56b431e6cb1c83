/* What the share tests (test_shared_run.c, test_branches.c) have in common: two outputs
 * compared bit for bit with a reference, released with the run's stats, and whether PoCL's two
 * devices are there. */
#ifndef LOOM_SHARE_TEST_H
#define LOOM_SHARE_TEST_H

#include <stdbool.h>
#include <string.h>

#include "loom/loom.h"

static inline bool share_test_equal(const loom_tensor *a, const loom_tensor *b) {
  int64_t bytes = 0;
  loom_type_bytes(&a->type, &bytes);
  return loom_type_equal(&a->type, &b->type) && memcmp(a->data, b->data, (size_t)bytes) == 0;
}

/* Both of a run's two outputs equal the reference's. */
static inline bool share_test_outputs_equal(const loom_tensor *out, const loom_tensor *ref) {
  return share_test_equal(&out[0], &ref[0]) && share_test_equal(&out[1], &ref[1]);
}

/* Releases a run's two outputs and its stats (st may be NULL). */
static inline void share_test_release(loom_tensor *out, loom_share_stats *st) {
  loom_tensor_deinit(&out[0]);
  loom_tensor_deinit(&out[1]);
  loom_share_stats_deinit(st);
}

/* Whether ctx has ocl0 and ocl1 (PoCL with POCL_DEVICES="pthread pthread"). */
static inline bool share_test_two_opencl(loom_context *ctx) {
  int32_t i0 = -1, i1 = -1;
  return loom_context_find_device(ctx, "ocl0", &i0) == LOOM_OK &&
         loom_context_find_device(ctx, "ocl1", &i1) == LOOM_OK;
}

#endif
