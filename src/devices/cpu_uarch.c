/* The host CPU's micro-architecture from CPUID (loom/internal/cpu.h): a table of family and
 * model ranges, each with the width and number of its FMA units, so the FLOPs per cycle follow
 * from what the core can issue rather than from the ISA alone (Zen 4 runs AVX-512 on 256-bit
 * units; an Ice Lake laptop has one 512-bit FMA unit, an Ice Lake Xeon two). */
#include <stdio.h>
#include <string.h>

#include "loom/internal/cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

typedef struct uarch_row {
  const char *vendor;
  int family, model_lo, model_hi;
  int stepping_lo, stepping_hi; /* both 0: any stepping */
  const char *name;
  int bits, units;  /* the FMA data path */
  const char *note; /* what the FLOPs rest on, where it is not plain */
} uarch_row;

#define INTEL "GenuineIntel"
#define AMD "AuthenticAMD"

/* Models from Intel's and AMD's documentation (Intel SDM vol. 4 table 2-1, AMD's revision
 * guides). Rows are tried in order; the first match wins. */
static const uarch_row rows[] = {
    {INTEL, 6, 0x2A, 0x2A, 0, 0, "Sandy Bridge", 256, 1, "a multiply and an add port, no FMA"},
    {INTEL, 6, 0x2D, 0x2D, 0, 0, "Sandy Bridge-E", 256, 1, "a multiply and an add port, no FMA"},
    {INTEL, 6, 0x3A, 0x3A, 0, 0, "Ivy Bridge", 256, 1, "a multiply and an add port, no FMA"},
    {INTEL, 6, 0x3E, 0x3E, 0, 0, "Ivy Bridge-E", 256, 1, "a multiply and an add port, no FMA"},
    {INTEL, 6, 0x3C, 0x3C, 0, 0, "Haswell", 256, 2, NULL},
    {INTEL, 6, 0x3F, 0x3F, 0, 0, "Haswell-E", 256, 2, NULL},
    {INTEL, 6, 0x45, 0x46, 0, 0, "Haswell", 256, 2, NULL},
    {INTEL, 6, 0x3D, 0x3D, 0, 0, "Broadwell", 256, 2, NULL},
    {INTEL, 6, 0x47, 0x47, 0, 0, "Broadwell", 256, 2, NULL},
    {INTEL, 6, 0x4F, 0x4F, 0, 0, "Broadwell-E", 256, 2, NULL},
    {INTEL, 6, 0x56, 0x56, 0, 0, "Broadwell-DE", 256, 2, NULL},
    {INTEL, 6, 0x4E, 0x4E, 0, 0, "Skylake", 256, 2, NULL},
    {INTEL, 6, 0x5E, 0x5E, 0, 0, "Skylake", 256, 2, NULL},
    {INTEL, 6, 0x8E, 0x8E, 0, 0, "Kaby Lake", 256, 2, NULL},
    {INTEL, 6, 0x9E, 0x9E, 0, 0, "Coffee Lake", 256, 2, NULL},
    {INTEL, 6, 0xA5, 0xA6, 0, 0, "Comet Lake", 256, 2, NULL},
    {INTEL, 6, 0x55, 0x55, 0, 4, "Skylake-X", 512, 2,
     "2 FMA units assumed (Xeon Gold 6/Platinum; Silver, Bronze and Gold 5 have one)"},
    {INTEL, 6, 0x55, 0x55, 5, 7, "Cascade Lake", 512, 2,
     "2 FMA units assumed (Xeon Gold 6/Platinum; Silver, Bronze and Gold 5 have one)"},
    {INTEL, 6, 0x55, 0x55, 10, 11, "Cooper Lake", 512, 2, NULL},
    {INTEL, 6, 0x66, 0x66, 0, 0, "Cannon Lake", 512, 1, NULL},
    {INTEL, 6, 0x6A, 0x6A, 0, 0, "Ice Lake-SP", 512, 2, NULL},
    {INTEL, 6, 0x6C, 0x6C, 0, 0, "Ice Lake-D", 512, 2, NULL},
    {INTEL, 6, 0x7D, 0x7E, 0, 0, "Ice Lake", 512, 1, "client parts: one 512-bit FMA unit"},
    {INTEL, 6, 0x8C, 0x8D, 0, 0, "Tiger Lake", 512, 1, "client parts: one 512-bit FMA unit"},
    {INTEL, 6, 0xA7, 0xA7, 0, 0, "Rocket Lake", 512, 1, "client parts: one 512-bit FMA unit"},
    {INTEL, 6, 0x8F, 0x8F, 0, 0, "Sapphire Rapids", 512, 2, NULL},
    {INTEL, 6, 0xCF, 0xCF, 0, 0, "Emerald Rapids", 512, 2, NULL},
    {INTEL, 6, 0xAD, 0xAE, 0, 0, "Granite Rapids", 512, 2, NULL},
    {INTEL, 6, 0x97, 0x97, 0, 0, "Alder Lake", 256, 2, "P-cores; AVX-512 is off on hybrid parts"},
    {INTEL, 6, 0x9A, 0x9A, 0, 0, "Alder Lake", 256, 2, "P-cores; AVX-512 is off on hybrid parts"},
    {INTEL, 6, 0xB7, 0xB7, 0, 0, "Raptor Lake", 256, 2, "P-cores; AVX-512 is off on hybrid parts"},
    {INTEL, 6, 0xBA, 0xBA, 0, 0, "Raptor Lake", 256, 2, "P-cores; AVX-512 is off on hybrid parts"},
    {INTEL, 6, 0xBF, 0xBF, 0, 0, "Raptor Lake", 256, 2, "P-cores; AVX-512 is off on hybrid parts"},
    {INTEL, 6, 0xAA, 0xAC, 0, 0, "Meteor Lake", 256, 2, "P-cores; AVX-512 is off on hybrid parts"},
    {INTEL, 6, 0xBD, 0xBD, 0, 0, "Lunar Lake", 256, 2, "P-cores; AVX-512 is off on hybrid parts"},
    {INTEL, 6, 0xC5, 0xC6, 0, 0, "Arrow Lake", 256, 2, "P-cores; AVX-512 is off on hybrid parts"},
    {AMD, 0x17, 0x08, 0x08, 0, 0, "Zen+", 128, 2, "256-bit vectors as two 128-bit halves"},
    {AMD, 0x17, 0x18, 0x18, 0, 0, "Zen+", 128, 2, "256-bit vectors as two 128-bit halves"},
    {AMD, 0x17, 0x00, 0x2F, 0, 0, "Zen", 128, 2, "256-bit vectors as two 128-bit halves"},
    {AMD, 0x17, 0x30, 0xFF, 0, 0, "Zen 2", 256, 2, NULL},
    {AMD, 0x19, 0x00, 0x0F, 0, 0, "Zen 3", 256, 2, NULL},
    {AMD, 0x19, 0x20, 0x5F, 0, 0, "Zen 3", 256, 2, NULL},
    {AMD, 0x19, 0x10, 0x1F, 0, 0, "Zen 4", 256, 2, "AVX-512 as two 256-bit halves"},
    {AMD, 0x19, 0x60, 0x7F, 0, 0, "Zen 4", 256, 2, "AVX-512 as two 256-bit halves"},
    {AMD, 0x19, 0xA0, 0xAF, 0, 0, "Zen 4", 256, 2, "AVX-512 as two 256-bit halves"},
    {AMD, 0x1A, 0x20, 0x2F, 0, 0, "Zen 5", 256, 2, "mobile parts: AVX-512 on a 256-bit data path"},
    {AMD, 0x1A, 0x00, 0xFF, 0, 0, "Zen 5", 512, 2, NULL},
};

static const char *isa_name(loom__cpu_isa isa) {
  static const char *names[] = {"scalar", "SSE2", "AVX", "AVX2+FMA", "AVX-512"};
  return (unsigned)isa < sizeof names / sizeof names[0] ? names[isa] : "scalar";
}

static int isa_bits(loom__cpu_isa isa) {
  return isa == LOOM__ISA_AVX512F ? 512 : isa >= LOOM__ISA_AVX ? 256 : isa == LOOM__ISA_SSE2 ? 128 : 64;
}

static const uarch_row *find_row(const char *vendor, int family, int model, int stepping) {
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const uarch_row *r = &rows[i];
    bool any_stepping = r->stepping_lo == 0 && r->stepping_hi == 0;
    if (!strcmp(r->vendor, vendor) && r->family == family && model >= r->model_lo && model <= r->model_hi &&
        (any_stepping || (stepping >= r->stepping_lo && stepping <= r->stepping_hi)))
      return r;
  }
  return NULL;
}

void loom__cpu_uarch_decode(const char *vendor, int family, int model, int stepping, loom__cpu_isa isa,
                            loom__cpu_uarch *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->vendor, sizeof out->vendor, "%s", vendor ? vendor : "");
  out->family = family, out->model = model, out->stepping = stepping;
  out->isa = isa;
  out->isa_name = isa_name(isa);
  const uarch_row *r = find_row(out->vendor, family, model, stepping);
  /* Without FMA a multiply and an add issue side by side: one "unit" of 2 FLOPs per lane. */
  int bits = r ? r->bits : isa_bits(isa), units = r ? r->units : isa >= LOOM__ISA_AVX2 ? 2 : 1;
  /* A path the OS or the hypervisor does not enable cannot be used: a Skylake-X whose AVX-512
   * a VM hides runs 256-bit FMAs on the same two ports. */
  if (bits > isa_bits(isa)) bits = isa_bits(isa);
  out->fma_bits = bits, out->fma_units = units;
  out->flops_per_cycle_f32 = 2 * units * bits / 32;
  out->flops_per_cycle_f64 = 2 * units * bits / 64;
  out->from_table = r != NULL;
  if (r) {
    snprintf(out->name, sizeof out->name, "%s", r->name);
    snprintf(out->source, sizeof out->source, "table: %s, %s, %d FMA unit%s of %d bits%s%s", r->name,
             out->isa_name, units, units == 1 ? "" : "s", bits, r->note ? "; " : "", r->note ? r->note : "");
  } else {
    snprintf(out->name, sizeof out->name, "unknown (family %d model %d)", family, model);
    snprintf(out->source, sizeof out->source, "guessed from the ISA: %s, %d FMA unit%s of %d bits assumed",
             out->isa_name, units, units == 1 ? "" : "s", bits);
  }
}

#if defined(__x86_64__) || defined(__i386__)
/* The widest ISA both the CPU and the OS (XSAVE state) enable: __builtin_cpu_supports checks
 * both. */
static loom__cpu_isa host_isa(void) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return LOOM__ISA_AVX512F;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return LOOM__ISA_AVX2;
  if (__builtin_cpu_supports("avx")) return LOOM__ISA_AVX;
  if (__builtin_cpu_supports("sse2")) return LOOM__ISA_SSE2;
  return LOOM__ISA_SCALAR;
}

void loom__cpu_uarch_host(loom__cpu_uarch *out) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  char vendor[13] = "";
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    memcpy(vendor, &b, 4);
    memcpy(vendor + 4, &d, 4);
    memcpy(vendor + 8, &c, 4);
  }
  int family = 0, model = 0, stepping = 0;
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    int base_family = (int)((a >> 8) & 0xF), base_model = (int)((a >> 4) & 0xF);
    stepping = (int)(a & 0xF);
    /* the extended fields count only where the manuals say (family 15, and Intel's family 6) */
    family = base_family == 0xF ? base_family + (int)((a >> 20) & 0xFF) : base_family;
    model = base_family == 0xF || base_family == 6 ? base_model + (int)(((a >> 16) & 0xF) << 4) : base_model;
  }
  loom__cpu_uarch_decode(vendor, family, model, stepping, host_isa(), out);
}
#else
void loom__cpu_uarch_host(loom__cpu_uarch *out) {
  loom__cpu_uarch_decode("", 0, 0, 0, LOOM__ISA_SCALAR, out);
  snprintf(out->name, sizeof out->name, "unknown (not x86)");
}
#endif
