/* The cpu backend's x86-64 level (cpu_isa.h): the CPU's best, lowered by LOOM_CPU_ISA, so that
 * ctest's *.isa_avx2 entries really run the AVX2 kernels on a machine with AVX-512. */
#include <stdlib.h>

#include "backends/cpu/cpu_isa.h"
#include "harness.h"

TEST(cpu_isa_level_follows_the_setting) {
  const char *want = getenv("LOOM_CPU_ISA");
  int level = loom__cpu_isa_level();
  ASSERT_OK(loom__cpu_isa_check());
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  int best = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                     __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2")
                 ? 4
             : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 3
                                                                               : 1;
#else
  int best = 1;
#endif
  if (!want || !*want || strcmp(want, "native") == 0)
    ASSERT_EQ(level, best);
  else if (strcmp(want, "avx2") == 0)
    ASSERT_EQ(level, best < 3 ? best : 3);
  else if (strcmp(want, "portable") == 0)
    ASSERT_EQ(level, 1);
  printf("LOOM_CPU_ISA=%s: level %d of this CPU's %d\n", want ? want : "", level, best);
}
