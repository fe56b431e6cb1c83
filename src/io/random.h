/* Seeded pseudo-random tensor contents for tools and tests (loom-run --random): the same
 * seed gives the same bytes on every machine and every build. */
#ifndef LOOM_RANDOM_H
#define LOOM_RANDOM_H

#include "core/core.h"
#include "loom/tensor.h"

/* Fills t (already allocated) with values drawn from xoshiro256** seeded through
 * splitmix64 from (seed, stream); loom-run uses the parameter's index as the stream, so an
 * input's values do not depend on which other inputs were given. Elements are drawn in C
 * order, one 64-bit draw each (two for complex types, real part first):
 * - floats: uniform in [0,1), on a grid the dtype represents exactly (2^-53 for f64, 2^-24
 *   for f32, 2^-11 for f16, 2^-8 for bf16), so rounding never gives 1;
 * - complex: real and imaginary parts each as the float of their size;
 * - integers (signed and unsigned): uniform in [0,100);
 * - bool: 0 or 1 with equal odds. */
void loom__tensor_fill_random(loom_tensor *t, uint64_t seed, uint64_t stream);

#endif
