/* The micro-architecture table (loom/internal/cpu.h, issue 33): the machines these tests run on
 * change between sessions (Zen 3, Skylake-X, Zen 4, Zen 5 so far), so each is decoded from its
 * CPUID fields here rather than from the host, and the host is only checked to decode to
 * something consistent. */
#include "harness.h"
#include "loom/internal/cpu.h"

static loom__cpu_uarch decode(const char *vendor, int family, int model, int stepping, loom__cpu_isa isa) {
  loom__cpu_uarch u;
  loom__cpu_uarch_decode(vendor, family, model, stepping, isa, &u);
  return u;
}

TEST(zen_generations) {
  loom__cpu_uarch u = decode("AuthenticAMD", 0x17, 0x31, 0, LOOM__ISA_AVX2);
  ASSERT_STREQ(u.name, "Zen 2");
  ASSERT_EQ(u.flops_per_cycle_f32, 32);
  ASSERT_EQ(u.flops_per_cycle_f64, 16);
  u = decode("AuthenticAMD", 0x19, 0x01, 1, LOOM__ISA_AVX2);
  ASSERT_STREQ(u.name, "Zen 3");
  ASSERT_EQ(u.flops_per_cycle_f32, 32);
  /* Zen 4 has AVX-512 but runs it as two 256-bit halves: no more FLOPs than AVX2 */
  u = decode("AuthenticAMD", 0x19, 0x11, 1, LOOM__ISA_AVX512F);
  ASSERT_STREQ(u.name, "Zen 4");
  ASSERT_STREQ(u.isa_name, "AVX-512");
  ASSERT_EQ(u.fma_bits, 256);
  ASSERT_EQ(u.flops_per_cycle_f32, 32);
  ASSERT_TRUE(u.from_table);
  ASSERT_CONTAINS(u.source, "table: Zen 4");
  /* a server or desktop Zen 5: full 512-bit data path; the mobile one: 256 bits */
  u = decode("AuthenticAMD", 0x1A, 0x02, 0, LOOM__ISA_AVX512F);
  ASSERT_STREQ(u.name, "Zen 5");
  ASSERT_EQ(u.flops_per_cycle_f32, 64);
  ASSERT_EQ(u.flops_per_cycle_f64, 32);
  u = decode("AuthenticAMD", 0x1A, 0x24, 0, LOOM__ISA_AVX512F);
  ASSERT_EQ(u.flops_per_cycle_f32, 32);
}

TEST(intel_servers) {
  loom__cpu_uarch u = decode("GenuineIntel", 6, 0x55, 4, LOOM__ISA_AVX512F);
  ASSERT_STREQ(u.name, "Skylake-X");
  ASSERT_EQ(u.flops_per_cycle_f32, 64);
  u = decode("GenuineIntel", 6, 0x55, 7, LOOM__ISA_AVX512F);
  ASSERT_STREQ(u.name, "Cascade Lake");
  u = decode("GenuineIntel", 6, 0x6A, 6, LOOM__ISA_AVX512F);
  ASSERT_STREQ(u.name, "Ice Lake-SP");
  ASSERT_EQ(u.flops_per_cycle_f64, 32);
  u = decode("GenuineIntel", 6, 0x7E, 5, LOOM__ISA_AVX512F);
  ASSERT_STREQ(u.name, "Ice Lake");
  ASSERT_EQ(u.flops_per_cycle_f32, 32); /* one 512-bit unit on client parts */
  u = decode("GenuineIntel", 6, 0x8F, 8, LOOM__ISA_AVX512F);
  ASSERT_STREQ(u.name, "Sapphire Rapids");
  ASSERT_EQ(u.flops_per_cycle_f32, 64);
}

TEST(hidden_avx512_caps_the_width) {
  /* a hypervisor that hides AVX-512 of a Skylake-X leaves two 256-bit FMA ports */
  loom__cpu_uarch u = decode("GenuineIntel", 6, 0x55, 4, LOOM__ISA_AVX2);
  ASSERT_STREQ(u.name, "Skylake-X");
  ASSERT_EQ(u.fma_bits, 256);
  ASSERT_EQ(u.flops_per_cycle_f32, 32);
}

TEST(unknown_names_family_and_model) {
  loom__cpu_uarch u = decode("GenuineIntel", 6, 0x01, 0, LOOM__ISA_AVX2);
  ASSERT_STREQ(u.name, "unknown (family 6 model 1)");
  ASSERT_TRUE(!u.from_table);
  ASSERT_CONTAINS(u.source, "guessed from the ISA: AVX2+FMA");
  ASSERT_EQ(u.flops_per_cycle_f32, 32);
  u = decode("HygonGenuine", 0x18, 0x00, 0, LOOM__ISA_SSE2);
  ASSERT_STREQ(u.name, "unknown (family 24 model 0)");
  ASSERT_EQ(u.flops_per_cycle_f32, 8);
}

TEST(host_decodes) {
  loom__cpu_uarch u;
  loom__cpu_uarch_host(&u);
  ASSERT_TRUE(u.name[0] != '\0');
  ASSERT_TRUE(u.flops_per_cycle_f32 >= 2 && u.flops_per_cycle_f32 == 2 * u.flops_per_cycle_f64);
  ASSERT_TRUE(u.source[0] != '\0');
}
