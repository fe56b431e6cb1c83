/* NOT STABLE API: an internal header, for Loom's own tools; it may change in any release and
 * is not installed. The symbols are in the static library (hidden in the shared one).
 *
 * Why it exists: loom-info names the host CPU's micro-architecture and its FLOPs per cycle, and
 * loom-bench writes the same name into its reports, computes its table peaks from the same
 * FLOPs per cycle and refuses to compare reports of two different micro-architectures. One
 * decoder keeps the two tools from disagreeing.
 *
 * The FLOPs per cycle are table values: what the vector unit of that micro-architecture can
 * issue (lanes x FMA units x 2), not a measurement (loom-bench suite measures them). */
#ifndef LOOM_INTERNAL_CPU_H
#define LOOM_INTERNAL_CPU_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the CPU says it can execute: the widest vector extension the OS enables. */
typedef enum loom__cpu_isa {
  LOOM__ISA_SCALAR, /* not x86, or no SSE2 */
  LOOM__ISA_SSE2,
  LOOM__ISA_AVX,     /* 256-bit, no FMA */
  LOOM__ISA_AVX2,    /* 256-bit with FMA */
  LOOM__ISA_AVX512F, /* 512-bit with FMA */
} loom__cpu_isa;

typedef struct loom__cpu_uarch {
  char vendor[16];             /* CPUID's vendor: "AuthenticAMD", "GenuineIntel"; "" off x86 */
  int family, model, stepping; /* display family and model (the extended fields folded in) */
  /* "Zen 4", "Skylake-X", or "unknown (family F model M)" */
  char name[48];
  loom__cpu_isa isa;
  const char *isa_name; /* "AVX-512", "AVX2+FMA", "AVX", "SSE2", "scalar" */
  /* The FMA data path: its width in bits (the narrower of the table's and the ISA's) and the
   * number of such units per core. */
  int fma_bits, fma_units;
  int flops_per_cycle_f32, flops_per_cycle_f64; /* per core */
  bool from_table;  /* true: the micro-architecture is known; false: guessed from the ISA */
  char source[160]; /* why those FLOPs: "table: Zen 4, AVX-512 as two 256-bit halves, 2 FMA units" */
} loom__cpu_uarch;

/* Decodes a CPU from its CPUID fields: `vendor` as CPUID spells it, display family, model and
 * stepping, and the widest ISA the OS enables. Pure (no CPUID), so tests can feed it the
 * machines they are not running on. `out` is the caller's; every field is written. */
void loom__cpu_uarch_decode(const char *vendor, int family, int model, int stepping, loom__cpu_isa isa,
                            loom__cpu_uarch *out);

/* The host's CPU through CPUID (loom__cpu_uarch_decode of what CPUID says); off x86 the name is
 * "unknown (not x86)" and the ISA scalar. Thread-safe; never fails. */
void loom__cpu_uarch_host(loom__cpu_uarch *out);

#ifdef __cplusplus
}
#endif

#endif
