/* CUDA memory through the HMM (issue 7, point 2): a node per CUDA device offering device and
 * managed memory; copies in and out, small and through the pinned staging buffers; the pool;
 * managed memory mapped by the host, prefetched (cudaMemPrefetchAsync) and advised
 * (cudaMemAdvise); eviction to host memory under a limit; and the refusal to allocate more
 * managed memory than the device has free. */
#if LOOM_HAVE_CUDA
#include <stdlib.h>

#include "gpu_util.h"
#include "loom/memory.h"

/* A manager of its own (so limits set here touch no other test) and cuda0's node in it. */
static loom_mem_manager *manager(loom_mem_mode mode, int32_t *out_node) {
  loom_mem_manager_options o;
  loom_mem_manager_options_init(&o);
  o.mode = mode;
  o.limits = "";
  loom_mem_manager *m = NULL;
  *out_node = -1;
  if (loom_mem_manager_create(gt_context(), &o, &m) || loom_mem_node_find(m, "cuda0", out_node)) {
    loom_test_fail(__FILE__, __LINE__, "manager: %s", loom_last_error());
    loom_mem_manager_destroy(m);
    return NULL;
  }
  return m;
}

static void pattern(uint8_t *p, int64_t n, uint32_t seed) {
  for (int64_t i = 0; i < n; i++) p[i] = (uint8_t)((i * 131 + seed) >> 3);
}

TEST(the_node_offers_device_and_managed_memory) {
  if (!gt_have_devices(LOOM_BACKEND_CUDA)) return;
  int32_t node;
  loom_mem_manager *m = manager(LOOM_MEM_MODE_AUTO, &node);
  ASSERT_TRUE(m != NULL);
  loom_mem_node_info info;
  ASSERT_OK(loom_mem_node_info_get(m, node, &info));
  ASSERT_STREQ(info.id, "cuda0");
  ASSERT_EQ(info.kind, LOOM_MEMORY_DEVICE);
  ASSERT_TRUE(info.storages & LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_CUDA_DEVICE));
  ASSERT_TRUE(info.size_bytes > 0 && info.limit_bytes == info.size_bytes);
  loom_mem_manager_destroy(m);
}

/* Writes and reads back, below and above the staging threshold (4 MiB), at an offset. */
TEST(copies_round_trip) {
  if (!gt_have_devices(LOOM_BACKEND_CUDA)) return;
  int32_t node;
  loom_mem_manager *m = manager(LOOM_MEM_MODE_MANUAL, &node);
  ASSERT_TRUE(m != NULL);
  static const int64_t sizes[] = {1000, (int64_t)4 << 20, ((int64_t)37 << 20) + 13};
  for (int32_t k = 0; k < 3; k++) {
    int64_t n = sizes[k];
    uint8_t *src = malloc((size_t)n), *dst = malloc((size_t)n);
    ASSERT_TRUE(src && dst);
    pattern(src, n, (uint32_t)k);
    loom_buffer *b = NULL;
    ASSERT_OK(loom_buffer_allocate(m, n, LOOM_U8, node, 0, &b));
    loom_buffer_node_info bi;
    ASSERT_OK(loom_buffer_node_info_get(b, node, &bi));
    ASSERT_EQ(bi.storage, LOOM_MEM_STORAGE_CUDA_DEVICE);
    ASSERT_OK(loom_buffer_write(b, 0, src, n));
    memset(dst, 0, (size_t)n);
    ASSERT_OK(loom_buffer_read(b, 0, dst, n));
    ASSERT_TRUE(memcmp(src, dst, (size_t)n) == 0);
    /* A part, at an odd offset. */
    ASSERT_OK(loom_buffer_read(b, 7, dst, n - 7));
    ASSERT_TRUE(memcmp(src + 7, dst, (size_t)(n - 7)) == 0);
    /* The host's map makes a host copy: the device's contents arrive there. */
    void *p = NULL;
    ASSERT_OK(loom_buffer_map(b, LOOM_ACCESS_READ, &p));
    ASSERT_TRUE(memcmp(src, p, (size_t)n) == 0);
    ASSERT_OK(loom_buffer_unmap(b, p));
    loom_buffer_free(b);
    free(src);
    free(dst);
  }
  /* Freed device memory went to the pool, and the next allocation of that class reuses it. */
  loom_mem_node_stats st;
  ASSERT_OK(loom_mem_stats(m, node, &st));
  ASSERT_TRUE(st.cached_bytes > 0);
  loom_buffer *b = NULL;
  ASSERT_OK(loom_buffer_allocate(m, 1000, LOOM_U8, node, 0, &b));
  loom_mem_node_stats st2;
  ASSERT_OK(loom_mem_stats(m, node, &st2));
  ASSERT_EQ(st2.pool_hits, st.pool_hits + 1);
  loom_buffer_free(b);
  loom_mem_manager_destroy(m);
}

/* Managed memory: one allocation the host reaches directly, moved with cudaMemPrefetchAsync,
 * advised with cudaMemAdvise. */
TEST(managed_memory_is_reached_prefetched_and_advised) {
  if (!gt_have_devices(LOOM_BACKEND_CUDA)) return;
  int32_t node;
  loom_mem_manager *m = manager(LOOM_MEM_MODE_MANAGED, &node);
  ASSERT_TRUE(m != NULL);
  loom_mem_node_info info;
  ASSERT_OK(loom_mem_node_info_get(m, node, &info));
  if (!(info.storages & LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_CUDA_MANAGED))) {
    loom_test_skip("cuda0 has no managed memory");
    loom_mem_manager_destroy(m);
    return;
  }
  int64_t n = (int64_t)24 << 20;
  uint8_t *src = malloc((size_t)n);
  ASSERT_TRUE(src != NULL);
  pattern(src, n, 9);
  loom_buffer *b = NULL;
  ASSERT_OK(loom_buffer_allocate(m, n, LOOM_U8, node, 0, &b));
  ASSERT_TRUE(loom_buffer_is_managed(b));
  ASSERT_OK(loom_buffer_advise(b, LOOM_MEM_ADVISE_PREFERRED_LOCATION, node));
  ASSERT_OK(loom_buffer_advise(b, LOOM_MEM_ADVISE_ACCESSED_BY, 0));
  ASSERT_OK(loom_buffer_write(b, 0, src, n));
  /* The host maps the device's own copy: no host copy is made. */
  void *p = NULL;
  ASSERT_OK(loom_buffer_map(b, LOOM_ACCESS_READ | LOOM_ACCESS_WRITE, &p));
  ASSERT_TRUE(memcmp(src, p, (size_t)n) == 0);
  ((uint8_t *)p)[5] ^= 0xff;
  ASSERT_OK(loom_buffer_unmap(b, p));
  loom_buffer_node_info host;
  ASSERT_OK(loom_buffer_node_info_get(b, 0, &host));
  ASSERT_EQ(host.storage, LOOM_MEM_STORAGE_NONE);
  /* Prefetched back to the device, then read: the host's write is there. */
  ASSERT_OK(loom_buffer_prefetch(b, node));
  uint8_t got = 0;
  ASSERT_OK(loom_buffer_read(b, 5, &got, 1));
  ASSERT_EQ(got, (uint8_t)(src[5] ^ 0xff));
  ASSERT_OK(loom_buffer_advise(b, LOOM_MEM_ADVISE_READ_MOSTLY, 0));
  ASSERT_OK(loom_buffer_advise(b, LOOM_MEM_ADVISE_UNSET_PREFERRED_LOCATION, 0));
  loom_buffer_free(b);
  free(src);
  loom_mem_manager_destroy(m);
}

/* More managed memory than the device has free is refused, not oversubscribed. */
TEST(managed_memory_never_exceeds_the_free_memory) {
  if (!gt_have_devices(LOOM_BACKEND_CUDA)) return;
  int32_t node;
  loom_mem_manager *m = manager(LOOM_MEM_MODE_MANAGED, &node);
  ASSERT_TRUE(m != NULL);
  loom_mem_node_info info;
  ASSERT_OK(loom_mem_node_info_get(m, node, &info));
  if (!(info.storages & LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_CUDA_MANAGED))) {
    loom_test_skip("cuda0 has no managed memory");
    loom_mem_manager_destroy(m);
    return;
  }
  /* The whole card is more than what is free (the driver holds some): refused by the free
   * memory check, before cudaMallocManaged. */
  loom_buffer *b = NULL;
  ASSERT_STATUS(loom_buffer_allocate(m, info.size_bytes, LOOM_U8, node, 0, &b), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_CONTAINS(loom_last_error(), "never oversubscribes managed memory");
  ASSERT_TRUE(b == NULL);
  loom_mem_manager_destroy(m);
}

/* Under a limit, device buffers are evicted to host memory and come back intact. */
TEST(eviction_under_a_limit_keeps_the_data) {
  if (!gt_have_devices(LOOM_BACKEND_CUDA)) return;
  int32_t node;
  loom_mem_manager *m = manager(LOOM_MEM_MODE_MANUAL, &node);
  ASSERT_TRUE(m != NULL);
  int64_t n = (int64_t)6 << 20;
  ASSERT_OK(loom_mem_set_limit(m, node, 2 * n + ((int64_t)1 << 20)));
  loom_buffer *b[4] = {NULL};
  uint8_t *src = malloc((size_t)n), *dst = malloc((size_t)n);
  ASSERT_TRUE(src && dst);
  for (int32_t i = 0; i < 4; i++) {
    pattern(src, n, (uint32_t)i);
    ASSERT_OK(loom_buffer_allocate(m, n, LOOM_U8, node, LOOM_MEM_EXACT_SIZE, &b[i]));
    ASSERT_OK(loom_buffer_write(b[i], 0, src, n));
  }
  loom_mem_node_stats st;
  ASSERT_OK(loom_mem_stats(m, node, &st));
  ASSERT_TRUE(st.evictions >= 2);
  ASSERT_TRUE(st.peak_in_use <= st.limit);
  for (int32_t i = 0; i < 4; i++) {
    pattern(src, n, (uint32_t)i);
    ASSERT_OK(loom_buffer_read(b[i], 0, dst, n));
    ASSERT_TRUE(memcmp(src, dst, (size_t)n) == 0);
    loom_buffer_free(b[i]);
  }
  free(src);
  free(dst);
  loom_mem_manager_destroy(m);
}
#endif
