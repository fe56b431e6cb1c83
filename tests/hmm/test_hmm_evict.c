/* Eviction under a limit: LOOM_MEM_LIMIT=ocl0:8MiB with 3 MiB buffers, and PoCL's own
 * 1 GiB (POCL_MEMORY_LIMIT=1, which PoCL reports but never enforces: the HMM does). Data is
 * checked after it comes back, and no counter ever passes a limit. */
#include "hmm_test.h"

/* Five 3 MiB buffers with distinct data on ocl0 limited to 8 MiB. */
static void evict_round(loom_mem_mode mode, uint32_t flags) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_mem_manager *m = NULL;
  loom_mem_manager_options o;
  hmm_test_options(&o, mode, LOOM_MEM_POLICY_AGGRESSIVE);
  o.limits = NULL; /* read LOOM_MEM_LIMIT */
  o.trace = true;
  setenv("LOOM_MEM_LIMIT", "ocl0:8MiB", 1);
  loom_status s = loom_mem_manager_create(ctx, &o, &m);
  unsetenv("LOOM_MEM_LIMIT");
  ASSERT_OK(s);
  enum { N = 5 };
  loom_buffer *b[N] = {NULL};
  if (!hmm_need_opencl(m, 1)) goto done;
  int32_t ocl0 = hmm_node(m, "ocl0");
  loom_mem_node_info info;
  ASSERT_OK(loom_mem_node_info_get(m, ocl0, &info));
  ASSERT_EQ(info.limit_bytes, 8 * MiB);
  const int64_t n = 3 * MiB;
  uint8_t *data = malloc((size_t)n);
  for (int i = 0; i < N; i++) {
    ASSERT_OK(loom_buffer_allocate(m, n, LOOM_U8, ocl0, flags, &b[i]));
    hmm_fill(data, n, 100 + (uint32_t)i);
    ASSERT_OK(loom_buffer_write(b[i], 0, data, n)); /* into the device copy */
    ASSERT_TRUE(hmm_within_limits(m));
    ASSERT_TRUE(hmm_accounting_matches(m, b, N));
  }
  free(data);
  loom_mem_node_stats st;
  ASSERT_OK(loom_mem_stats(m, ocl0, &st));
  ASSERT_EQ(st.evictions, 3); /* two fit at a time */
  ASSERT_TRUE(st.in_use <= 8 * MiB && st.peak_in_use <= 8 * MiB);
  /* The least recently used went to host memory: b0, b1, b2. */
  for (int i = 0; i < N; i++) {
    loom_buffer_node_info ni;
    ASSERT_OK(loom_buffer_node_info_get(b[i], i < 3 ? 0 : ocl0, &ni));
    ASSERT_EQ(ni.state, LOOM_MEM_OWNER);
  }
  /* Touch them all on ocl0 in order: each brings its data back and pushes out the oldest. */
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < N; i++) {
      loom_mem_handle h;
      ASSERT_OK(loom_buffer_acquire(b[i], ocl0, LOOM_ACCESS_READ, &h));
      ASSERT_TRUE(!h.temporary);
      ASSERT_OK(loom_buffer_release(b[i], &h));
      ASSERT_TRUE(hmm_within_limits(m));
      ASSERT_TRUE(hmm_accounting_matches(m, b, N));
    }
  }
  /* A pinned buffer stays; an acquired one stays while in use. */
  ASSERT_OK(loom_buffer_pin(b[3]));
  loom_mem_handle held;
  ASSERT_OK(loom_buffer_acquire(b[4], ocl0, LOOM_ACCESS_READ, &held));
  loom_mem_handle h;
  ASSERT_STATUS(loom_buffer_acquire(b[0], ocl0, LOOM_ACCESS_READ, &h), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_CONTAINS(loom_last_error(), "ocl0");
  ASSERT_OK(loom_buffer_release(b[4], &held));
  ASSERT_OK(loom_buffer_acquire(b[0], ocl0, LOOM_ACCESS_READ, &h)); /* b4 can go now */
  ASSERT_OK(loom_buffer_release(b[0], &h));
  ASSERT_OK(loom_buffer_unpin(b[3]));
  ASSERT_OK(loom_mem_stats(m, ocl0, &st));
  ASSERT_TRUE(st.evictions > 3);
  ASSERT_EQ(st.failed_allocations, 1);
  ASSERT_TRUE(st.peak_in_use <= 8 * MiB);
  /* Read everything back: intact. */
  for (int i = 0; i < N; i++) ASSERT_EQ(hmm_buffer_mismatch(b[i], n, 100 + (uint32_t)i), -1);
  loom_buffer_info bi;
  ASSERT_OK(loom_buffer_get_info(b[0], &bi));
  ASSERT_TRUE(bi.evictions >= 1);
  /* Lowering the limit evicts down to it. */
  ASSERT_OK(loom_mem_set_limit(m, ocl0, 3 * MiB));
  ASSERT_OK(loom_mem_stats(m, ocl0, &st));
  ASSERT_TRUE(st.in_use <= 3 * MiB);
  for (int i = 0; i < N; i++) ASSERT_EQ(hmm_buffer_mismatch(b[i], n, 100 + (uint32_t)i), -1);
  /* The trace shows it all. */
  char path[256];
  snprintf(path, sizeof path, "%s/hmm_evict_trace_%d.json",
           getenv("LOOM_BINARY_DIR") ? getenv("LOOM_BINARY_DIR") : "/tmp", (int)mode);
  ASSERT_OK(loom_mem_trace_write(m, path));
  char *text = hmm_read_file(path);
  remove(path);
  ASSERT_TRUE(text != NULL);
  bool valid = hmm_json_valid(text);
  bool has = strstr(text, "\"evict\"") && strstr(text, "\"migrate\"") && strstr(text, "\"alloc\"");
  free(text);
  ASSERT_TRUE(valid && has);
done:
  for (int i = 0; i < N; i++) loom_buffer_free(b[i]);
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
}

TEST(hmm_evict_loom_mem_limit_buffers) {
  evict_round(LOOM_MEM_MODE_MANUAL, 0);
}
TEST(hmm_evict_loom_mem_limit_svm_coarse) {
  evict_round(LOOM_MEM_MODE_MANAGED, LOOM_MEM_SVM_COARSE);
}
TEST(hmm_evict_loom_mem_limit_svm_fine) {
  evict_round(LOOM_MEM_MODE_AUTO, 0);
}

/* A copy that is valid elsewhere too is dropped without a copy back. */
TEST(hmm_evict_shared_copy_is_dropped) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_mem_manager *m = NULL;
  loom_mem_manager_options o;
  hmm_test_options(&o, LOOM_MEM_MODE_MANUAL, LOOM_MEM_POLICY_NONE);
  ASSERT_OK(loom_mem_manager_create(ctx, &o, &m));
  if (!hmm_need_opencl(m, 1)) goto done;
  int32_t ocl0 = hmm_node(m, "ocl0");
  ASSERT_OK(loom_mem_set_limit(m, ocl0, 2 * MiB));
  loom_buffer *a = NULL, *b = NULL;
  ASSERT_OK(loom_buffer_allocate(m, 2 * MiB, LOOM_U8, 0, 0, &a));
  ASSERT_OK(hmm_map_fill(a, 2 * MiB, 1));
  ASSERT_OK(loom_buffer_prefetch(a, ocl0)); /* a replica on ocl0 */
  loom_mem_node_stats host_before;
  ASSERT_OK(loom_mem_stats(m, 0, &host_before));
  ASSERT_OK(loom_buffer_allocate(m, 2 * MiB, LOOM_U8, ocl0, 0, &b));
  loom_mem_node_stats host_after, dev;
  ASSERT_OK(loom_mem_stats(m, 0, &host_after));
  ASSERT_OK(loom_mem_stats(m, ocl0, &dev));
  ASSERT_EQ(dev.evictions, 1);
  ASSERT_EQ(host_after.bytes_in, host_before.bytes_in); /* nothing copied back */
  ASSERT_EQ(hmm_buffer_mismatch(a, 2 * MiB, 1), -1);
  loom_buffer_free(a);
  loom_buffer_free(b);
done:
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
}

/* PoCL's reported 1 GiB is the default limit of ocl0: six 200 MiB buffers (224 MiB size
 * class) do not fit at once, and PoCL itself would have allocated them all. */
TEST(hmm_evict_pocl_memory_limit) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_mem_manager *m = NULL;
  loom_mem_manager_options o;
  hmm_test_options(&o, LOOM_MEM_MODE_MANUAL, LOOM_MEM_POLICY_AGGRESSIVE);
  o.pool_max_bytes = -1;
  ASSERT_OK(loom_mem_manager_create(ctx, &o, &m));
  enum { N = 6 };
  loom_buffer *b[N] = {NULL};
  if (!hmm_need_opencl(m, 1)) goto done;
  int32_t ocl0 = hmm_node(m, "ocl0");
  loom_mem_node_info info;
  ASSERT_OK(loom_mem_node_info_get(m, ocl0, &info));
  ASSERT_EQ(info.limit_bytes, 1024 * MiB);
  const int64_t n = 200 * MiB;
  for (int i = 0; i < N; i++) {
    ASSERT_OK(loom_buffer_allocate(m, n, LOOM_U8, ocl0, 0, &b[i]));
    /* Distinct data, written where the buffer is (the device copy). */
    void *p = NULL;
    ASSERT_OK(loom_buffer_map(b[i], LOOM_ACCESS_WRITE | LOOM_ACCESS_DISCARD, &p));
    hmm_fill64(p, n, 200 + (uint32_t)i);
    ASSERT_OK(loom_buffer_unmap(b[i], p));
    loom_mem_handle h;
    ASSERT_OK(loom_buffer_acquire(b[i], ocl0, LOOM_ACCESS_READ, &h)); /* back onto ocl0 */
    ASSERT_OK(loom_buffer_release(b[i], &h));
    ASSERT_TRUE(hmm_within_limits(m));
  }
  loom_mem_node_stats st;
  ASSERT_OK(loom_mem_stats(m, ocl0, &st));
  ASSERT_TRUE(st.evictions >= 2);
  ASSERT_TRUE(st.peak_in_use <= 1024 * MiB);
  ASSERT_TRUE(st.live_bytes <= 4 * 224 * MiB);
  for (int i = 0; i < N; i++) ASSERT_EQ(hmm_buffer_mismatch64(b[i], n, 200 + (uint32_t)i), -1);
done:
  for (int i = 0; i < N; i++) loom_buffer_free(b[i]);
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
}

/* preferred_location: a host node keeps its copy through moves, and evicted copies go there. */
TEST(hmm_evict_preferred_location) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_mem_manager *m = NULL;
  loom_mem_manager_options o;
  hmm_test_options(&o, LOOM_MEM_MODE_MANUAL, LOOM_MEM_POLICY_AGGRESSIVE);
  ASSERT_OK(loom_mem_manager_create(ctx, &o, &m));
  if (!hmm_need_opencl(m, 1)) goto done;
  int32_t ocl0 = hmm_node(m, "ocl0");
  loom_buffer *a = NULL, *b = NULL;
  ASSERT_OK(loom_buffer_allocate(m, MiB, LOOM_U8, 0, 0, &a));
  ASSERT_OK(hmm_map_fill(a, MiB, 9));
  ASSERT_OK(loom_buffer_advise(a, LOOM_MEM_ADVISE_PREFERRED_LOCATION, 0));
  loom_mem_handle h;
  ASSERT_OK(loom_buffer_acquire(a, ocl0, LOOM_ACCESS_READ, &h)); /* a move, but host0 keeps its copy */
  ASSERT_OK(loom_buffer_release(a, &h));
  loom_buffer_info info;
  ASSERT_OK(loom_buffer_get_info(a, &info));
  ASSERT_EQ(info.migrations, 1);
  ASSERT_EQ(info.valid_copies, 2);
  /* Written on ocl0, then evicted: it goes back to host0 (its preferred node). */
  ASSERT_OK(loom_buffer_acquire(a, ocl0, LOOM_ACCESS_WRITE, &h));
  ASSERT_OK(loom_buffer_release(a, &h));
  ASSERT_OK(loom_mem_set_limit(m, ocl0, MiB));
  ASSERT_OK(loom_buffer_allocate(m, MiB, LOOM_U8, ocl0, 0, &b));
  loom_buffer_node_info ni;
  ASSERT_OK(loom_buffer_node_info_get(a, 0, &ni));
  ASSERT_EQ(ni.state, LOOM_MEM_OWNER);
  ASSERT_OK(loom_buffer_get_info(a, &info));
  ASSERT_EQ(info.evictions, 1);
  ASSERT_OK(loom_buffer_advise(a, LOOM_MEM_ADVISE_UNSET_PREFERRED_LOCATION, 0));
  ASSERT_OK(loom_buffer_get_info(a, &info));
  ASSERT_EQ(info.preferred_node, -1);
  loom_buffer_free(a);
  loom_buffer_free(b);
done:
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
}

/* A temporary copy on another node is no reason to drop the only persistent copy: it goes
 * away at release (a bug the threads test once hit). */
TEST(hmm_evict_keeps_data_behind_temporary_copy) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_mem_manager *m = NULL;
  loom_mem_manager_options o;
  hmm_test_options(&o, LOOM_MEM_MODE_MANUAL, LOOM_MEM_POLICY_NONE);
  ASSERT_OK(loom_mem_manager_create(ctx, &o, &m));
  if (!hmm_need_opencl(m, 2)) goto done;
  int32_t ocl0 = hmm_node(m, "ocl0"), ocl1 = hmm_node(m, "ocl1");
  ASSERT_OK(loom_mem_set_limit(m, ocl0, MiB));
  loom_buffer *a = NULL, *b = NULL;
  ASSERT_OK(loom_buffer_allocate(m, MiB, LOOM_U8, ocl0, 0, &a));
  uint8_t *data = malloc(MiB);
  hmm_fill(data, MiB, 31);
  ASSERT_OK(loom_buffer_write(a, 0, data, MiB));
  free(data);
  loom_mem_handle h;
  ASSERT_OK(loom_buffer_acquire(a, ocl1, LOOM_ACCESS_READ, &h));
  ASSERT_TRUE(h.temporary);
  ASSERT_OK(loom_buffer_allocate(m, MiB, LOOM_U8, ocl0, 0, &b)); /* evicts a's ocl0 copy */
  loom_buffer_node_info ni;
  ASSERT_OK(loom_buffer_node_info_get(a, 0, &ni));
  ASSERT_TRUE(ni.state != LOOM_MEM_INVALID); /* written back to the host */
  ASSERT_OK(loom_buffer_release(a, &h));
  loom_buffer_info info;
  ASSERT_OK(loom_buffer_get_info(a, &info));
  ASSERT_EQ(info.valid_copies, 1);
  ASSERT_EQ(hmm_buffer_mismatch(a, MiB, 31), -1);
  loom_buffer_free(a);
  loom_buffer_free(b);
done:
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
}
