/* loom-bench blas's parts (bench_blas.c, bench_blas_sim.c). */
#ifndef LOOM_BENCH_BLAS_H
#define LOOM_BENCH_BLAS_H

#include <stdint.h>
#include <stdio.h>

/* --simulate PLATFORM.json: the dgemm of each size (C = alpha A B + beta C, host operands) as
 * Loom would run it on the platform (its planner and scheduler, every device), against OpenBLAS
 * (the platform's cpu0 alone) and NVBLAS (a model of cublasXt's fixed tiles: each tile of C
 * moves its panels of A and B and itself over the host link, every tile on the GPU). Prints
 * the predicted seconds and ratios, and writes them to `json` (may be NULL) as the members of a
 * JSON array. No kernel runs. Returns 0, or 1 after a one-line message naming what failed. */
int bench_blas_simulate(const char *platform, const int64_t *sizes, int32_t n_sizes, FILE *json);

#endif
