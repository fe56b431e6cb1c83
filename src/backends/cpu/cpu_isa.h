/* Which x86-64 level the cpu backend's own vector kernels run at (cpu_fused.c's ISA_VARIANTS):
 * the best the CPU has, or lower where the environment asks for it:
 *
 *   LOOM_CPU_ISA=native    (or unset) the CPU's best: 4 with AVX-512, 3 with AVX2 + FMA, else 1
 *   LOOM_CPU_ISA=avx2      at most 3 (x86-64-v3, AVX2 + FMA: what a Zen 3 runs)
 *   LOOM_CPU_ISA=portable  1 (x86-64 baseline, SSE2)
 *
 * so one machine can test the code paths of the others. Libraries below Loom pick their own
 * (OpenBLAS: OPENBLAS_CORETYPE; glibc's libm: GLIBC_TUNABLES=glibc.cpu.hwcaps); the ctest
 * mode `isa_avx2` sets those too. */
#ifndef LOOM_BACKENDS_CPU_ISA_H
#define LOOM_BACKENDS_CPU_ISA_H

#include "loom/status.h"

/* 4 (x86-64-v4, AVX-512), 3 (x86-64-v3, AVX2 + FMA) or 1 (baseline); read once, then cached.
 * 1 on other architectures. An unknown LOOM_CPU_ISA leaves the CPU's best (and
 * loom__cpu_isa_check says why). Thread-safe. */
int loom__cpu_isa_level(void);

/* LOOM_OK, or INVALID_ARGUMENT naming LOOM_CPU_ISA and the values it takes when it holds
 * anything else. Cheap after the first call. */
loom_status loom__cpu_isa_check(void);

#endif
