/* What the share tests (test_shared_run.c, test_branches.c) have in common: a fixture (a
 * context, a graph, integer-valued inputs and the reference outputs of a whole run on cpu0),
 * two outputs compared bit for bit with the reference, released with the run's stats, and
 * whether PoCL's two devices are there. Include after harness.h. */
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

/* The fixture of a test: inputs made integer-valued (so dots and sums are exact on every
 * device and results compare bit for bit), the reference from cpu0. */
typedef struct share_fixture {
  loom_context *ctx;
  loom_graph *g;
  loom_tensor in[3], ref[2]; /* the graph's parameters (at most 3) and its two outputs */
  int32_t n_in;
  bool opencl; /* ocl0 and ocl1 are there */
} share_fixture;

static inline void share_fixture_deinit(share_fixture *f) {
  for (int i = 0; i < 3; i++) loom_tensor_deinit(&f->in[i]);
  for (int i = 0; i < 2; i++) loom_tensor_deinit(&f->ref[i]);
  loom_graph_destroy(f->g);
  loom_context_destroy(f->ctx);
  memset(f, 0, sizeof *f);
}

/* Parses `lir` (called `name` in messages), fills parameter p with seeded values in [0, 1)
 * (seed, stream p) and hands each to integer(tensor, p, element count) to make integers of
 * them, then runs the graph whole on cpu0 for the reference. False (the test failed) when a
 * step fails. */
static inline bool share_fixture_init(share_fixture *f, const char *lir, const char *name, uint64_t seed,
                                      void (*integer)(float *v, int32_t p, int64_t n)) {
  memset(f, 0, sizeof *f);
  if (loom_context_create(NULL, &f->ctx) || loom_graph_parse(lir, strlen(lir), name, &f->g)) {
    loom_test_fail(__FILE__, __LINE__, "set-up: %s", loom_last_error());
    return false;
  }
  f->n_in = loom_graph_param_count(f->g);
  for (int32_t p = 0; p < f->n_in && p < 3; p++) {
    loom_tensor_init(&f->in[p], loom_value_type(f->g, loom_graph_param_at(f->g, p)));
    loom_tensor_fill_random(&f->in[p], seed, (uint64_t)p);
    integer(f->in[p].data, p, f->in[p].type.dims[0] * f->in[p].type.dims[1]);
  }
  if (loom_graph_run(f->ctx, f->g, f->in, f->n_in, f->ref, 2, NULL)) {
    loom_test_fail(__FILE__, __LINE__, "the reference run: %s", loom_last_error());
    return false;
  }
  f->opencl = share_test_two_opencl(f->ctx);
  return true;
}

/* share_fixture_init for a test that needs ocl0 and ocl1: false (the test skipped, or failed,
 * and the fixture released) without them. */
static inline bool share_fixture_init_opencl(share_fixture *f, const char *lir, const char *name,
                                             uint64_t seed, void (*integer)(float *v, int32_t p, int64_t n)) {
  if (!share_fixture_init(f, lir, name, seed, integer)) {
    share_fixture_deinit(f);
    return false;
  }
  if (!f->opencl) {
    share_fixture_deinit(f);
    loom_test_skip("no ocl0 and ocl1 (PoCL with POCL_DEVICES=\"pthread pthread\")");
    return false;
  }
  return true;
}

#endif
