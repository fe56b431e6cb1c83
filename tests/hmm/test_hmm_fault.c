/* Fault injection (libuv's test-loop-oom): the 1st, 2nd, ... host allocation of a piece of
 * work fails in turn (loom_testing_fail_allocation; device and bound host allocations ask the
 * same counter), once alone and once with every later one failing too. Each failing run
 * must return OUT_OF_MEMORY cleanly, keep every counter within its limit and consistent
 * with the buffers, lose no data of the buffers that existed before, and, once everything is
 * freed, leave loom_testing_live_allocations() where it started. */
#include "hmm_test.h"

enum { KEEP = 3 };

typedef struct fault_run {
  loom_mem_manager *m;
  int32_t host, ocl0, ocl1;
  loom_buffer *keep[KEEP]; /* made before the work; their data must survive */
  loom_buffer *made;       /* made by the work */
  loom_mem_handle h;
  loom_buffer *held; /* h is acquired on it */
} fault_run;

static const int64_t KEEP_BYTES = 3 * MiB;

static loom_status setup(loom_context *ctx, bool opencl, fault_run *r) {
  memset(r, 0, sizeof *r);
  loom_mem_manager_options o;
  hmm_test_options(&o, LOOM_MEM_MODE_MANUAL, LOOM_MEM_POLICY_ADAPTIVE);
  o.limits = opencl ? "ocl0:8MiB,ocl1:8MiB" : "host0:16MiB";
  loom_status s = loom_mem_manager_create(ctx, &o, &r->m);
  if (s != LOOM_OK) return s;
  r->host = 0;
  r->ocl0 = opencl ? hmm_node(r->m, "ocl0") : 0;
  r->ocl1 = opencl ? hmm_node(r->m, "ocl1") : 0;
  /* keep[0], keep[2] only on ocl0, keep[1] only on the host. */
  int32_t where[KEEP] = {r->ocl0, r->host, r->ocl0};
  for (int i = 0; i < KEEP && s == LOOM_OK; i++) {
    s = loom_buffer_allocate(r->m, KEEP_BYTES, LOOM_U8, where[i], 0, &r->keep[i]);
    uint8_t *data = malloc((size_t)KEEP_BYTES);
    hmm_fill(data, KEEP_BYTES, 300 + (uint32_t)i);
    if (s == LOOM_OK) s = loom_buffer_write(r->keep[i], 0, data, KEEP_BYTES);
    free(data);
  }
  return s;
}

static void teardown(fault_run *r) {
  if (r->held) loom_buffer_release(r->held, &r->h);
  loom_buffer_free(r->made);
  for (int i = 0; i < KEEP; i++) loom_buffer_free(r->keep[i]);
  loom_mem_manager_destroy(r->m);
  memset(r, 0, sizeof *r);
}

/* The work: allocation with eviction, copies between every pair of nodes, maps, a temporary
 * copy written back through host memory, a migration and a prefetch that evict. */
static loom_status work(fault_run *r, bool opencl) {
  loom_status s = loom_buffer_allocate(r->m, 3 * MiB, LOOM_F32, r->ocl0, 0, &r->made); /* evicts keep[0] */
  void *p = NULL;
  if (s == LOOM_OK) s = loom_buffer_map(r->made, LOOM_ACCESS_WRITE | LOOM_ACCESS_DISCARD, &p);
  if (s == LOOM_OK) {
    memset(p, 7, 3 * MiB);
    s = loom_buffer_unmap(r->made, p);
  }
  if (s == LOOM_OK) s = loom_buffer_acquire(r->made, r->ocl1, LOOM_ACCESS_READ, &r->h); /* temporary */
  if (s == LOOM_OK) {
    r->held = r->made;
    s = loom_buffer_release(r->made, &r->h);
    r->held = NULL;
  }
  if (s == LOOM_OK)
    s = loom_buffer_map(r->keep[2], LOOM_ACCESS_READ, &p); /* a host copy of a device buffer */
  if (s == LOOM_OK) s = loom_buffer_unmap(r->keep[2], p);
  if (s == LOOM_OK && opencl) {
    /* keep[0] was evicted to the host; a temporary RW copy on ocl1 of keep[2], written back. */
    loom_buffer *k = r->keep[2];
    s = loom_buffer_migrate(k, r->ocl0); /* only on ocl0 again */
    if (s == LOOM_OK) s = loom_buffer_acquire(k, r->ocl1, LOOM_ACCESS_READ | LOOM_ACCESS_WRITE, &r->h);
    if (s == LOOM_OK) {
      r->held = k;
      s = loom_buffer_release(k, &r->h); /* device -> device write-back, through a staging buffer */
      r->held = NULL;
    }
  }
  if (s == LOOM_OK) s = loom_buffer_migrate(r->keep[1], r->ocl1);
  if (s == LOOM_OK) s = loom_buffer_prefetch(r->keep[0], r->ocl0);
  if (s == LOOM_OK) s = loom_buffer_acquire(r->keep[0], r->ocl1, LOOM_ACCESS_READ, &r->h);
  if (s == LOOM_OK) r->held = r->keep[0];
  return s;
}

static void check_after_failure(fault_run *r, loom_status s, int64_t nth, int sticky) {
  if (s != LOOM_OK && s != LOOM_ERR_OUT_OF_MEMORY) {
    loom_test_fail(__FILE__, __LINE__, "allocation %lld failing (sticky %d) gave %s: %s", (long long)nth,
                   sticky, loom_status_string(s), loom_last_error());
    return;
  }
  if (s != LOOM_OK) ASSERT_CONTAINS(loom_last_error(), "out of memory");
  ASSERT_TRUE(hmm_within_limits(r->m));
  loom_buffer *all[KEEP + 1] = {r->keep[0], r->keep[1], r->keep[2], r->made};
  ASSERT_TRUE(hmm_accounting_matches(r->m, all, KEEP + 1));
  for (int i = 0; i < KEEP; i++) {
    loom_buffer_info info;
    ASSERT_OK(loom_buffer_get_info(r->keep[i], &info));
    ASSERT_TRUE(info.valid_copies >= 1);
    if (hmm_buffer_mismatch(r->keep[i], KEEP_BYTES, 300 + (uint32_t)i) != -1) {
      loom_test_fail(__FILE__, __LINE__, "allocation %lld failing (sticky %d): buffer %d lost its data",
                     (long long)nth, sticky, i);
      return;
    }
  }
}

static void sweep(bool opencl) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  fault_run r;
  loom_mem_manager *probe = NULL;
  ASSERT_OK(loom_mem_manager_create(ctx, NULL, &probe));
  bool have = !opencl || hmm_need_opencl(probe, 2);
  loom_mem_manager_destroy(probe);
  if (have) {
    ASSERT_OK(setup(ctx, opencl, &r)); /* one round first, so lazily made state is in place */
    teardown(&r);
  }
  if (!have) {
    loom_context_destroy(ctx);
    return;
  }
  for (int sticky = 0; sticky <= 1 && !loom_test_failed(); sticky++) {
    /* The sweep ends when the work no longer reaches the failing allocation. A failure the HMM
     * absorbs (another eviction candidate, a retry) lets the work succeed: fine too. */
    loom_test_sweep sw;
    SWEEP_ALLOCATIONS(&sw, sticky, 500) {
      ASSERT_OK(setup(ctx, opencl, &r));
      loom_test_sweep_arm(&sw);
      loom_status s = loom_test_sweep_done(&sw, work(&r, opencl));
      if (getenv("HMM_FAULT_DEBUG"))
        printf("    nth %lld sticky %d: %s %s\n", (long long)sw.nth, sticky, loom_status_string(s),
               s ? loom_last_error() : "");
      check_after_failure(&r, s, sw.nth, sticky);
      teardown(&r);
    }
    /* The sweep reached the end of the work, after failing at every allocation before it. */
    ASSERT_TRUE(sw.nth > 3);
    ASSERT_TRUE(sw.failures > 0);
    printf("    sticky %d: %lld allocations failed in turn, %lld of them failed the work\n", sticky,
           (long long)sw.nth - 1, (long long)sw.failures);
  }
  loom_context_destroy(ctx);
}

TEST(hmm_fault_injection_host) {
  sweep(false);
}
TEST(hmm_fault_injection_opencl) {
  sweep(true);
}

/* Creating a manager and its first device allocation under the same sweep. */
TEST(hmm_fault_injection_create) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_test_sweep sw;
  SWEEP_ALLOCATIONS(&sw, 0, 200) {
    loom_mem_manager *m = NULL;
    loom_buffer *b = NULL;
    loom_mem_manager_options o;
    hmm_test_options(&o, LOOM_MEM_MODE_AUTO, LOOM_MEM_POLICY_ADAPTIVE);
    o.limits = "host0:64MiB";
    loom_test_sweep_arm(&sw);
    loom_status s = loom_mem_manager_create(ctx, &o, &m);
    int32_t node = m ? loom_mem_node_count(m) - 1 : 0;
    if (s == LOOM_OK) s = loom_buffer_allocate(m, 1024, LOOM_F32, node, 0, &b);
    if (s == LOOM_OK) s = hmm_map_fill(b, 1024, 1);
    loom_test_sweep_done(&sw, s);
    loom_buffer_free(b);
    loom_mem_manager_destroy(m);
  }
  ASSERT_TRUE(sw.nth > 2);
  loom_context_destroy(ctx);
}
