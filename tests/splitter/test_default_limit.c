/* The default runner of a device (loom_runner_default, issue 32): what it can hold now, with
 * where the figure came from. */
#include <stdlib.h>
#include <string.h>

#include "loom/memory.h"
#include "split_util.h"

/* MemTotal from /proc/meminfo in bytes, or -1. */
static int64_t mem_total(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  long long kib = -1;
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "MemTotal: %lld kB", &kib) == 1) break;
  if (f) fclose(f);
  return kib < 0 ? -1 : (int64_t)kib * 1024;
}

TEST(default_runner_of_cpu0_is_its_free_memory) {
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  loom_runner r;
  const char *source = NULL;
  ASSERT_OK(loom_runner_default(ctx, "cpu0", &r, &source));
  ASSERT_TRUE(strcmp(r.device, "cpu0") == 0);
  ASSERT_TRUE(source != NULL && strstr(source, "7/8 of MemAvailable") != NULL);
  int64_t total = mem_total();
  ASSERT_TRUE(r.limit > 0 && (total < 0 || r.limit <= total / 8 * 7));
  /* A lower limit on the node is the default then. */
  loom_mem_manager *m = NULL;
  int32_t host = -1;
  ASSERT_OK(loom_context_memory(ctx, &m));
  ASSERT_OK(loom_mem_node_find(m, "cpu0", &host));
  ASSERT_OK(loom_mem_set_limit(m, host, 3 << 20));
  ASSERT_OK(loom_runner_default(ctx, "cpu0", &r, &source));
  ASSERT_EQ(r.limit, 3 << 20);
  ASSERT_TRUE(strstr(source, "the memory node's limit") != NULL);
  loom_context_destroy(ctx);
}

/* PoCL's device shares host memory: at most 7/8 of its own 1 GiB (POCL_MEMORY_LIMIT=1). */
TEST(default_runner_of_a_pocl_device_is_within_its_size) {
  setenv("POCL_DEVICES", "pthread", 0);
  setenv("POCL_MEMORY_LIMIT", "1", 0);
  loom_context_options co;
  loom_context_options_init(&co);
  co.devices = "cpu0,ocl0";
  loom_context *ctx = NULL;
  loom_status s = loom_context_create(&co, &ctx);
  if (s == LOOM_ERR_NOT_FOUND) {
    loom_test_skip("%s", loom_last_error());
    return;
  }
  ASSERT_OK(s);
  int32_t i = -1;
  loom_device_info info;
  ASSERT_OK(loom_context_find_device(ctx, "ocl0", &i));
  ASSERT_OK(loom_context_device_info(ctx, i, &info));
  loom_runner r;
  const char *source = NULL;
  ASSERT_OK(loom_runner_default(ctx, "ocl0", &r, &source));
  ASSERT_TRUE(r.limit > 0 && r.limit <= info.memory_bytes / 8 * 7 + 8);
  ASSERT_TRUE(source != NULL && strstr(source, "7/8 of") != NULL);
  loom_context_destroy(ctx);
}

TEST(default_runner_refuses_bad_arguments) {
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  loom_runner r;
  ASSERT_EQ(loom_runner_default(ctx, "cpu9", &r, NULL), LOOM_ERR_NOT_FOUND);
  ASSERT_EQ(loom_runner_default(NULL, "cpu0", &r, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(loom_runner_default(ctx, "cpu0", NULL, NULL), LOOM_ERR_INVALID_ARGUMENT);
  loom_context_destroy(ctx);
}
