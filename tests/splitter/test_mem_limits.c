/* Runners and the memory manager's limits (LOOM_MEM_LIMIT): the runners tools take by default,
 * and runners lowered to their devices' limits. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "loom/plan.h"
#include "loom/testing.h"

#define MiB ((int64_t)1 << 20)

TEST(mem_limits_name_the_default_runners) {
  loom_runner *r = NULL;
  int32_t n = -1;
  /* Devices in the order first named, each with its last limit; host nodes make no runner. */
  ASSERT_OK(loom_runners_from_mem_limits(" ocl0:256MiB, host0:1GiB,CPU0:4GiB,ocl0:128MiB", &r, &n));
  ASSERT_EQ(n, 2);
  ASSERT_STREQ(r[0].device, "ocl0");
  ASSERT_EQ(r[0].limit, 128 * MiB);
  ASSERT_STREQ(r[1].device, "cpu0");
  ASSERT_EQ(r[1].limit, 4096 * MiB);
  free(r);
  /* Nothing that names a device: no runners, no array. */
  for (int i = 0; i < 3; i++) {
    const char *text = i == 0 ? "" : i == 1 ? "host0:1GiB" : "  ";
    r = (loom_runner *)&n;
    ASSERT_OK(loom_runners_from_mem_limits(text, &r, &n));
    ASSERT_TRUE(r == NULL);
    ASSERT_EQ(n, 0);
  }
  /* An empty entry is refused, as loom_runners_parse refuses it (issue 16). */
  ASSERT_STATUS(loom_runners_from_mem_limits(" , ", &r, &n), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "limits ' , ': an entry is empty at column 2");
}

TEST(mem_limits_come_from_the_environment) {
  loom_runner *r = NULL;
  int32_t n = -1;
  setenv("LOOM_MEM_LIMIT", "cpu0:8MiB", 1);
  loom_status s = loom_runners_from_mem_limits(NULL, &r, &n);
  unsetenv("LOOM_MEM_LIMIT");
  ASSERT_OK(s);
  ASSERT_EQ(n, 1);
  ASSERT_STREQ(r[0].device, "cpu0");
  ASSERT_EQ(r[0].limit, 8 * MiB);
  free(r);
  ASSERT_OK(loom_runners_from_mem_limits(NULL, &r, &n)); /* unset: none */
  ASSERT_EQ(n, 0);
  ASSERT_TRUE(r == NULL);
}

TEST(bad_mem_limits_are_named_with_the_column) {
  loom_runner *r = NULL;
  int32_t n = 0;
  setenv("LOOM_MEM_LIMIT", "cpu0:8QB", 1);
  loom_status s = loom_runners_from_mem_limits(NULL, &r, &n);
  unsetenv("LOOM_MEM_LIMIT");
  ASSERT_STATUS(s, LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(),
                  "LOOM_MEM_LIMIT 'cpu0:8QB': the size of cpu0 cannot be read at column 7");
  ASSERT_TRUE(r == NULL);
  ASSERT_STATUS(loom_runners_from_mem_limits("cpu0:1MiB,gpu0:1MiB", &r, &n), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(),
                  "limits 'cpu0:1MiB,gpu0:1MiB': 'gpu0' at column 11 is not a device or node id");
  ASSERT_STATUS(loom_runners_from_mem_limits("ocl0", &r, &n), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "has no ':'");
  ASSERT_STATUS(loom_runners_from_mem_limits("ocl0:0", &r, &n), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "limits 'ocl0:0': ocl0 is limited to 0 bytes, which no runner can use");
  ASSERT_STATUS(loom_runners_from_mem_limits("cpu0:1MiB", NULL, &n), LOOM_ERR_INVALID_ARGUMENT);
}

TEST(runners_are_lowered_to_their_devices_limits) {
  loom_runner r[4] = {{"cpu0", 64 * MiB}, {"ocl0", 2 * MiB}, {"OCL1", 16 * MiB}, {"cpu0", 4 * MiB}};
  int32_t lowered = -1;
  ASSERT_OK(loom_runners_fit_mem_limits(r, 4, "cpu0:8MiB,ocl1:4MiB,ocl0:4MiB,host0:1MiB", &lowered));
  ASSERT_EQ(lowered, 2);
  ASSERT_EQ(r[0].limit, 8 * MiB); /* lowered */
  ASSERT_EQ(r[1].limit, 2 * MiB); /* under its device's limit already */
  ASSERT_EQ(r[2].limit, 4 * MiB); /* ids match whatever their case */
  ASSERT_EQ(r[3].limit, 4 * MiB);
  /* A bad text changes nothing. */
  ASSERT_STATUS(loom_runners_fit_mem_limits(r, 4, "cpu0:1MiX", &lowered), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(lowered, 0);
  ASSERT_EQ(r[0].limit, 8 * MiB);
  ASSERT_OK(loom_runners_fit_mem_limits(NULL, 0, "", NULL));
  ASSERT_STATUS(loom_runners_fit_mem_limits(NULL, 1, "", NULL), LOOM_ERR_INVALID_ARGUMENT);
}

TEST(mem_limits_leak_nothing) {
  int64_t live = loom_testing_live_allocations();
  loom_runner *r = NULL;
  int32_t n = 0;
  ASSERT_STATUS(loom_runners_from_mem_limits("cpu0:1MiB,ocl0:x", &r, &n), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_OK(loom_runners_from_mem_limits("cpu0:1MiB,ocl0:2MiB", &r, &n));
  free(r);
  loom_runner one = {"cpu0", 64 * MiB};
  ASSERT_OK(loom_runners_fit_mem_limits(&one, 1, "cpu0:1MiB", NULL));
  ASSERT_EQ(loom_testing_live_allocations(), live);
  /* Every allocation failure is reported and frees what it took. */
  loom_test_sweep sw;
  SWEEP_ALLOCATIONS(&sw, 0, 1000) {
    r = NULL;
    if (SWEEP_RUN(&sw, loom_runners_from_mem_limits("cpu0:1MiB,ocl0:2MiB", &r, &n))) ASSERT_TRUE(r == NULL);
    free(r);
  }
}
