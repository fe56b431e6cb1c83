/* The cpu backend's x86-64 level (cpu_isa.h). */
#include "backends/cpu/cpu_isa.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static atomic_int cached; /* 0: not read yet; else the level, negated where the setting is bad */

/* The CPU's best level, by the same features GCC's x86-64-v3/v4 targets assume. */
static int cpu_best(void) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("x86-64-v4") ? 4 : __builtin_cpu_supports("x86-64-v3") ? 3 : 1;
#elif defined(__x86_64__) && defined(__GNUC__) /* clang 14 knows no level names here */
  __builtin_cpu_init();
  bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
            __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
            __builtin_cpu_supports("popcnt");
  bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("avx512vl");
  return v4 ? 4 : v3 ? 3 : 1;
#else
  return 1;
#endif
}

static int read_level(void) {
  int best = cpu_best();
  const char *want = getenv("LOOM_CPU_ISA");
  if (!want || !*want || strcmp(want, "native") == 0) return best;
  if (strcmp(want, "avx2") == 0) return best < 3 ? best : 3;
  if (strcmp(want, "portable") == 0) return 1;
  return -best;
}

static int level(void) {
  int l = atomic_load_explicit(&cached, memory_order_relaxed);
  if (l == 0) {
    l = read_level();
    atomic_store_explicit(&cached, l, memory_order_relaxed);
  }
  return l;
}

int loom__cpu_isa_level(void) {
  int l = level();
  return l < 0 ? -l : l;
}

loom_status loom__cpu_isa_check(void) {
  if (level() > 0) return LOOM_OK;
  return loom__error(LOOM_ERR_INVALID_ARGUMENT, "LOOM_CPU_ISA=%s: expected native, avx2 or portable",
                     getenv("LOOM_CPU_ISA"));
}
