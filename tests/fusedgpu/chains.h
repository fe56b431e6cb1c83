/* Body graphs the fused-kernel tests share (tests/fusedgpu): random elementwise chains ending
 * in each final op, and the Gaussian kernel matrix-vector product, built with the public
 * builder as the fusion pass leaves them (docs/ir-fusion.md's body form). */
#ifndef LOOM_TEST_FUSEDGPU_CHAINS_H
#define LOOM_TEST_FUSEDGPU_CHAINS_H

#include <stdint.h>

#include "loom/graph.h"

/* splitmix64: the next value of the stream at *s. */
uint64_t fz_next(uint64_t *s);

/* The final op of a chain. */
enum {
  F_NONE,
  F_SUM,
  F_MAX,
  F_MIN,
  F_PROD,
  F_MEAN,
  F_ARGMAX,
  F_ARGMIN,
  F_TOPK_LARGEST,
  F_TOPK_SMALLEST,
  F_COUNT
};
extern const char *const final_names[F_COUNT];

/* The chains' space: [CA, CB]. */
#define CA 5
#define CB 300

/* A chain of n_ops elementwise steps over x [CA,CB], y [1,CB], z [CA,1], w [CB] of dtype dt
 * (and constants, and casts through other dtypes), ending in `final` (F_*). The same seed
 * gives the same chain. NULL after failing the test with the builder's message. */
loom_graph *build_chain(uint64_t seed, loom_dtype dt, int n_ops, int final);

/* a_i = sum_j exp(-0.5 (sx_i + sy_j - 2 x_i . y_j)) b_j over n points in 3-D (x, y f32[n,3];
 * sx, sy, b f32[n]). NULL when it does not build. */
loom_graph *kmv_body(int64_t n);

#endif
