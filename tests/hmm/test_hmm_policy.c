/* The migration policies, counted: a buffer written on cpu0 then read 5 times by ocl1.
 *
 *   none:       0 migrations; every read goes through a temporary copy (5 copies)
 *   adaptive:   0 after the 1st read (a temporary copy), 1 from the 2nd on (threshold 2)
 *   aggressive: 1 from the 1st read on, none after while ocl1's copy stays valid
 *
 * for ocl1 copies that are OpenCL buffers, coarse- and fine-grained SVM; then the same for a
 * buffer that lives in ocl1's SVM (a move is clEnqueueSVMMigrateMem there), and for the host
 * reading ocl1's SVM with and without clEnqueueSVMMigrateMem (the fallback copies). */
#include "hmm_test.h"

static const int64_t expect_none[5] = {0, 0, 0, 0, 0};
static const int64_t expect_adaptive[5] = {0, 1, 1, 1, 1};
static const int64_t expect_aggressive[5] = {1, 1, 1, 1, 1};

static const int64_t *expected(loom_mem_policy p) {
  return p == LOOM_MEM_POLICY_NONE       ? expect_none
         : p == LOOM_MEM_POLICY_ADAPTIVE ? expect_adaptive
                                         : expect_aggressive;
}

static const struct {
  uint32_t flags;
  loom_mem_storage storage;
} kinds[] = {
    {LOOM_MEM_DEVICE_LOCAL, LOOM_MEM_STORAGE_CL_BUFFER},
    {LOOM_MEM_SVM_COARSE, LOOM_MEM_STORAGE_SVM_COARSE},
    {LOOM_MEM_SVM_FINE, LOOM_MEM_STORAGE_SVM_FINE},
};

static int64_t migrations(loom_buffer *b) {
  loom_buffer_info info;
  return loom_buffer_get_info(b, &info) == LOOM_OK ? info.migrations : -1;
}

/* Reads through a handle: a host pointer directly, device memory with loom_buffer_read's
 * guarantee that every valid copy holds the same bytes. */
static bool handle_ok(loom_buffer *b, const loom_mem_handle *h, int64_t n, uint32_t seed) {
  if (h->storage == LOOM_MEM_STORAGE_HOST) return hmm_mismatch(h->ptr, n, seed) == -1;
  return hmm_buffer_mismatch(b, n, seed) == -1;
}

static void host_buffer_read_by_ocl1(loom_mem_policy policy) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  for (int32_t k = 0; k < LOOM_ARRAY_SIZE(kinds); k++) {
    loom_mem_manager *m = NULL;
    loom_mem_manager_options o;
    hmm_test_options(&o, LOOM_MEM_MODE_MANUAL, policy);
    ASSERT_OK(loom_mem_manager_create(ctx, &o, &m));
    if (!hmm_need_opencl(m, 2)) {
      loom_mem_manager_destroy(m);
      break;
    }
    int32_t cpu = hmm_node(m, "cpu0"), ocl1 = hmm_node(m, "ocl1");
    const int64_t n = 64 * 1024;
    loom_buffer *b = NULL;
    ASSERT_OK(loom_buffer_allocate(m, n, LOOM_F32, cpu, kinds[k].flags, &b));
    loom_mem_handle h;
    ASSERT_OK(loom_buffer_acquire(b, cpu, LOOM_ACCESS_WRITE | LOOM_ACCESS_DISCARD, &h)); /* written on cpu0 */
    hmm_fill(h.ptr, n, 11);
    ASSERT_OK(loom_buffer_release(b, &h));
    ASSERT_EQ(migrations(b), 0);
    const int64_t *want = expected(policy);
    for (int32_t i = 0; i < 5; i++) {
      ASSERT_OK(loom_buffer_acquire(b, ocl1, LOOM_ACCESS_READ, &h));
      ASSERT_EQ(h.node, ocl1);
      ASSERT_EQ(h.storage, kinds[k].storage);
      ASSERT_EQ(h.temporary,
                policy == LOOM_MEM_POLICY_NONE || (policy == LOOM_MEM_POLICY_ADAPTIVE && i == 0));
      ASSERT_TRUE(handle_ok(b, &h, n, 11));
      ASSERT_OK(loom_buffer_release(b, &h));
      if (migrations(b) != want[i]) {
        loom_test_fail(__FILE__, __LINE__,
                       "policy %d, storage %d: %lld migrations after read %d, expected %lld", (int)policy,
                       (int)kinds[k].storage, (long long)migrations(b), (int)i + 1, (long long)want[i]);
        break;
      }
    }
    loom_buffer_info info;
    ASSERT_OK(loom_buffer_get_info(b, &info));
    int64_t copies = policy == LOOM_MEM_POLICY_NONE ? 5 : policy == LOOM_MEM_POLICY_ADAPTIVE ? 2 : 1;
    ASSERT_EQ(info.copies, copies);
    ASSERT_EQ(info.bytes_moved, copies * n);
    loom_buffer_node_info ni;
    ASSERT_OK(loom_buffer_node_info_get(b, ocl1, &ni));
    ASSERT_EQ(ni.accesses, 5);
    /* After a move the host copy is gone (the buffer moved, it was not read-mostly). */
    ASSERT_EQ(ni.state, policy == LOOM_MEM_POLICY_NONE ? LOOM_MEM_INVALID : LOOM_MEM_OWNER);
    loom_mem_node_stats st;
    ASSERT_OK(loom_mem_stats(m, ocl1, &st));
    ASSERT_EQ(st.migrations_in, want[4]);
    ASSERT_EQ(st.bytes_in, copies * n);
    ASSERT_EQ(hmm_buffer_mismatch(b, n, 11), -1);
    loom_buffer_free(b);
    loom_mem_manager_destroy(m);
  }
  loom_context_destroy(ctx);
}

TEST(hmm_policy_none_counts) {
  host_buffer_read_by_ocl1(LOOM_MEM_POLICY_NONE);
}
TEST(hmm_policy_adaptive_counts) {
  host_buffer_read_by_ocl1(LOOM_MEM_POLICY_ADAPTIVE);
}
TEST(hmm_policy_aggressive_counts) {
  host_buffer_read_by_ocl1(LOOM_MEM_POLICY_AGGRESSIVE);
}

/* read_mostly: the move keeps the host copy valid (a replica). */
TEST(hmm_policy_read_mostly_replicates) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_mem_manager *m = NULL;
  loom_mem_manager_options o;
  hmm_test_options(&o, LOOM_MEM_MODE_MANUAL, LOOM_MEM_POLICY_AGGRESSIVE);
  o.advice = LOOM_MEM_ADVISE_READ_MOSTLY;
  ASSERT_OK(loom_mem_manager_create(ctx, &o, &m));
  if (hmm_need_opencl(m, 1)) {
    int32_t ocl0 = hmm_node(m, "ocl0");
    loom_buffer *b = NULL;
    ASSERT_OK(loom_buffer_allocate(m, 4096, LOOM_U8, 0, 0, &b));
    ASSERT_OK(hmm_map_fill(b, 4096, 5));
    loom_mem_handle h;
    ASSERT_OK(loom_buffer_acquire(b, ocl0, LOOM_ACCESS_READ, &h));
    ASSERT_OK(loom_buffer_release(b, &h));
    loom_buffer_info info;
    ASSERT_OK(loom_buffer_get_info(b, &info));
    ASSERT_EQ(info.migrations, 1);
    ASSERT_EQ(info.valid_copies, 2);
    ASSERT_TRUE(info.read_mostly);
    /* A write on the host invalidates the replica. */
    ASSERT_OK(hmm_map_fill(b, 4096, 6));
    ASSERT_OK(loom_buffer_get_info(b, &info));
    ASSERT_EQ(info.valid_copies, 1);
    loom_buffer_free(b);
  }
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
}

/* A buffer in ocl1's SVM written on the host: moving it to ocl1 is an SVM migration. */
static void svm_buffer_read_by_ocl1(loom_mem_policy policy) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  for (int32_t k = 1; k < LOOM_ARRAY_SIZE(kinds); k++) {
    loom_mem_manager *m = NULL;
    loom_mem_manager_options o;
    hmm_test_options(&o, LOOM_MEM_MODE_MANAGED, policy);
    ASSERT_OK(loom_mem_manager_create(ctx, &o, &m));
    if (!hmm_need_opencl(m, 2)) {
      loom_mem_manager_destroy(m);
      break;
    }
    int32_t ocl1 = hmm_node(m, "ocl1");
    loom_mem_node_info ninfo;
    ASSERT_OK(loom_mem_node_info_get(m, ocl1, &ninfo));
    ASSERT_TRUE(ninfo.svm_migrate); /* PoCL reports OpenCL 3.0 */
    const int64_t n = 64 * 1024;
    loom_buffer *b = NULL;
    ASSERT_OK(loom_buffer_allocate(m, n, LOOM_F32, ocl1, kinds[k].flags, &b));
    ASSERT_TRUE(loom_buffer_is_managed(b));
    ASSERT_OK(hmm_map_fill(b, n, 12)); /* the host writes the SVM directly */
    loom_buffer_node_info ni;
    ASSERT_OK(loom_buffer_node_info_get(b, 0, &ni));
    ASSERT_EQ(ni.storage, LOOM_MEM_STORAGE_NONE); /* no host copy was made */
    ASSERT_EQ(migrations(b), 0);
    const int64_t *want = expected(policy);
    for (int32_t i = 0; i < 5; i++) {
      loom_mem_handle h;
      ASSERT_OK(loom_buffer_acquire(b, ocl1, LOOM_ACCESS_READ, &h));
      ASSERT_TRUE(!h.temporary);
      ASSERT_EQ(h.storage, kinds[k].storage);
      ASSERT_OK(loom_buffer_release(b, &h));
      ASSERT_EQ(migrations(b), want[i]);
    }
    loom_buffer_info info;
    ASSERT_OK(loom_buffer_get_info(b, &info));
    ASSERT_EQ(info.copies, 0); /* SVM: nothing was copied */
    ASSERT_EQ(hmm_buffer_mismatch(b, n, 12), -1);
    loom_buffer_free(b);
    loom_mem_manager_destroy(m);
  }
  loom_context_destroy(ctx);
}

TEST(hmm_policy_svm_none_counts) {
  svm_buffer_read_by_ocl1(LOOM_MEM_POLICY_NONE);
}
TEST(hmm_policy_svm_adaptive_counts) {
  svm_buffer_read_by_ocl1(LOOM_MEM_POLICY_ADAPTIVE);
}
TEST(hmm_policy_svm_aggressive_counts) {
  svm_buffer_read_by_ocl1(LOOM_MEM_POLICY_AGGRESSIVE);
}

/* ocl1 writes its SVM; the host reads it 5 times. With clEnqueueSVMMigrateMem a move migrates
 * the pages and the host keeps reaching the SVM; without it a move is a real copy into host
 * memory, counted as a copy. */
static void host_reads_svm(loom_mem_policy policy, bool migrate_api) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_mem_manager *m = NULL;
  loom_mem_manager_options o;
  hmm_test_options(&o, LOOM_MEM_MODE_MANAGED, policy);
  ASSERT_OK(loom_mem_manager_create(ctx, &o, &m));
  if (!hmm_need_opencl(m, 2)) goto done;
  if (!migrate_api) loom__hmm_testing_disable_svm_migrate(m);
  int32_t ocl1 = hmm_node(m, "ocl1");
  const int64_t n = 64 * 1024;
  loom_buffer *b = NULL;
  ASSERT_OK(loom_buffer_allocate(m, n, LOOM_U8, ocl1, LOOM_MEM_SVM_COARSE, &b));
  uint8_t *data = malloc((size_t)n);
  hmm_fill(data, n, 13);
  ASSERT_OK(loom_buffer_write(b, 0, data, n));
  free(data);
  loom_mem_handle h;
  ASSERT_OK(loom_buffer_acquire(b, ocl1, LOOM_ACCESS_READ | LOOM_ACCESS_WRITE, &h)); /* ocl1 writes */
  ASSERT_OK(loom_buffer_release(b, &h));
  const int64_t *want = expected(policy);
  for (int32_t i = 0; i < 5; i++) {
    ASSERT_OK(loom_buffer_acquire(b, 0, LOOM_ACCESS_READ, &h));
    ASSERT_TRUE(hmm_mismatch(h.ptr, n, 13) == -1);
    bool fallback_moved = !migrate_api && want[i] > 0;
    ASSERT_EQ(h.storage, fallback_moved ? LOOM_MEM_STORAGE_HOST : LOOM_MEM_STORAGE_SVM_COARSE);
    ASSERT_OK(loom_buffer_release(b, &h));
    ASSERT_EQ(migrations(b), want[i]);
  }
  loom_buffer_info info;
  ASSERT_OK(loom_buffer_get_info(b, &info));
  ASSERT_EQ(info.copies, !migrate_api && policy != LOOM_MEM_POLICY_NONE ? 1 : 0);
  loom_buffer_free(b);
done:
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
}

TEST(hmm_policy_host_reads_svm) {
  for (int p = LOOM_MEM_POLICY_NONE; p <= LOOM_MEM_POLICY_AGGRESSIVE && !loom_test_failed(); p++) {
    host_reads_svm((loom_mem_policy)p, true);
    host_reads_svm((loom_mem_policy)p, false);
  }
}

/* A higher threshold waits longer; prefetch hints follow the prefetch policy. */
TEST(hmm_policy_threshold_and_hints) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_mem_manager *m = NULL;
  loom_mem_manager_options o;
  hmm_test_options(&o, LOOM_MEM_MODE_MANUAL, LOOM_MEM_POLICY_ADAPTIVE);
  o.migration_threshold = 3;
  ASSERT_OK(loom_mem_manager_create(ctx, &o, &m));
  if (!hmm_need_opencl(m, 1)) goto done;
  int32_t ocl0 = hmm_node(m, "ocl0");
  loom_buffer *b[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3; i++) {
    ASSERT_OK(loom_buffer_allocate(m, 8192, LOOM_U8, 0, 0, &b[i]));
    ASSERT_OK(hmm_map_fill(b[i], 8192, 20 + (uint32_t)i));
  }
  for (int i = 0; i < 3; i++) {
    loom_mem_handle h;
    ASSERT_OK(loom_buffer_acquire(b[0], ocl0, LOOM_ACCESS_READ, &h));
    ASSERT_OK(loom_buffer_release(b[0], &h));
    ASSERT_EQ(migrations(b[0]), i < 2 ? 0 : 1);
  }
  int32_t done = -1;
  ASSERT_OK(loom_mem_prefetch_hint(m, ocl0, b + 1, 2, 2, &done)); /* adaptive: only the next stage */
  ASSERT_EQ(done, 0);
  ASSERT_OK(loom_mem_prefetch_hint(m, ocl0, b + 1, 1, 1, &done));
  ASSERT_EQ(done, 1);
  loom_buffer_info info;
  ASSERT_OK(loom_buffer_get_info(b[1], &info));
  ASSERT_EQ(info.prefetches, 1);
  ASSERT_EQ(info.valid_copies, 2);
  ASSERT_OK(loom_mem_set_prefetch_policy(m, LOOM_MEM_POLICY_NONE));
  ASSERT_OK(loom_mem_prefetch_hint(m, ocl0, b + 2, 1, 1, &done));
  ASSERT_EQ(done, 0);
  ASSERT_OK(loom_mem_set_prefetch_policy(m, LOOM_MEM_POLICY_AGGRESSIVE));
  /* Aggressive takes any distance, but never evicts for a hint. */
  ASSERT_OK(loom_mem_set_limit(m, ocl0, 16384 + 8192));
  ASSERT_OK(loom_mem_prefetch_hint(m, ocl0, b + 2, 1, 5, &done));
  ASSERT_EQ(done, 1);
  ASSERT_OK(loom_mem_set_limit(m, ocl0, 16384));
  loom_buffer *c = NULL;
  ASSERT_OK(loom_buffer_allocate(m, 8192, LOOM_U8, 0, 0, &c));
  ASSERT_OK(loom_mem_prefetch_hint(m, ocl0, &c, 1, 1, &done));
  ASSERT_EQ(done, 0);
  ASSERT_EQ(hmm_buffer_mismatch(b[2], 8192, 22), -1);
  for (int i = 0; i < 3; i++) loom_buffer_free(b[i]);
  loom_buffer_free(c);
done:
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
}
