/* Every buffer call on PoCL devices, for each storage: OpenCL buffers, coarse-grained SVM and
 * fine-grained SVM. Device access is checked by running a kernel on the handle that
 * loom_buffer_acquire returns, and by reading device memory back through the HMM's queue. */
#include "hmm_test.h"

#if LOOM_HAVE_OPENCL
#include "loom/opencl.h"

static const char *inc_source =
    "kernel void inc(global uchar *p) { size_t i = get_global_id(0); p[i] = (uchar)(p[i] + 1); }";

/* Adds 1 to every byte of the handle's memory on its device (left running: release waits). */
static loom_status run_inc(loom_mem_manager *m, const loom_mem_handle *h) {
  cl_context ctx = NULL;
  cl_command_queue q = NULL;
  loom_status s = loom_mem_node_cl_queue(m, h->node, &ctx, &q);
  if (s != LOOM_OK) return s;
  cl_int err;
  cl_program prog = clCreateProgramWithSource(ctx, 1, &inc_source, NULL, &err);
  if (err == CL_SUCCESS) err = clBuildProgram(prog, 0, NULL, "", NULL, NULL);
  cl_kernel k = err == CL_SUCCESS ? clCreateKernel(prog, "inc", &err) : NULL;
  cl_mem mem = loom_mem_handle_cl_mem(h);
  if (err == CL_SUCCESS)
    err = h->storage == LOOM_MEM_STORAGE_CL_BUFFER ? clSetKernelArg(k, 0, sizeof(cl_mem), &mem)
                                                   : clSetKernelArgSVMPointer(k, 0, h->ptr);
  size_t global = (size_t)h->bytes;
  if (err == CL_SUCCESS) err = clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL);
  if (k) clReleaseKernel(k);
  if (prog) clReleaseProgram(prog);
  return err == CL_SUCCESS ? LOOM_OK
                           : loom__error(LOOM_ERR_INTERNAL, "inc kernel: OpenCL error %d", (int)err);
}

/* Reads a device handle's bytes through the HMM's queue. */
static loom_status device_read(loom_mem_manager *m, const loom_mem_handle *h, void *dst) {
  cl_command_queue vq = NULL;
  loom_status s = loom_mem_node_cl_queue(m, h->node, NULL, &vq);
  if (s != LOOM_OK) return s;
  cl_int err = h->storage == LOOM_MEM_STORAGE_CL_BUFFER
                   ? clEnqueueReadBuffer(vq, loom_mem_handle_cl_mem(h), CL_TRUE, 0, (size_t)h->bytes, dst, 0,
                                         NULL, NULL)
                   : clEnqueueSVMMemcpy(vq, CL_TRUE, dst, h->ptr, (size_t)h->bytes, 0, NULL, NULL);
  return err == CL_SUCCESS ? LOOM_OK
                           : loom__error(LOOM_ERR_INTERNAL, "device read: OpenCL error %d", (int)err);
}

static bool device_matches(loom_mem_manager *m, const loom_mem_handle *h, uint32_t seed, int add) {
  uint8_t *tmp = malloc((size_t)h->bytes);
  bool ok = tmp && device_read(m, h, tmp) == LOOM_OK;
  for (int64_t i = 0; ok && i < h->bytes; i++) ok = tmp[i] == (uint8_t)(hmm_pattern(seed, i) + add);
  free(tmp);
  return ok;
}

static bool host_matches(const void *p, int64_t n, uint32_t seed, int add) {
  const uint8_t *b = p;
  for (int64_t i = 0; i < n; i++)
    if (b[i] != (uint8_t)(hmm_pattern(seed, i) + add)) return false;
  return true;
}

static loom_mem_copy_state state_on(loom_buffer *b, int32_t node) {
  loom_buffer_node_info ni;
  loom_buffer_node_info_get(b, node, &ni);
  return ni.state;
}

static loom_mem_storage storage_on(loom_buffer *b, int32_t node) {
  loom_buffer_node_info ni;
  loom_buffer_node_info_get(b, node, &ni);
  return ni.storage;
}

/* A copy between the two devices goes device to device, queued behind a kernel left running
 * on the sending device, and the sender's copy is reused only after the copy read it. */
static void peer_copy(loom_mem_manager *m, uint32_t flags) {
  const int32_t host = 0, ocl0 = hmm_node(m, "ocl0"), ocl1 = hmm_node(m, "ocl1");
  const int64_t n = 3 * 1000 * 1000 + 7;
  loom_buffer *b = NULL;
  ASSERT_OK(loom_buffer_allocate(m, n, LOOM_U8, ocl1, flags, &b));
  uint8_t *data = malloc((size_t)n);
  ASSERT_TRUE(data != NULL);
  hmm_fill(data, n, 6);
  ASSERT_OK(loom_buffer_write(b, 0, data, n));
  loom_mem_node_stats before0, after0, host_before, host_after;
  ASSERT_OK(loom_mem_stats(m, ocl0, &before0));
  ASSERT_OK(loom_mem_stats(m, host, &host_before));
  loom_mem_handle h;
  ASSERT_OK(loom_buffer_acquire(b, ocl1, LOOM_ACCESS_READ | LOOM_ACCESS_WRITE, &h));
  ASSERT_OK(run_inc(m, &h));
  ASSERT_OK(loom__buffer_release_queued(b, &h)); /* the kernel may still run */
  ASSERT_OK(loom_buffer_acquire(b, ocl0, LOOM_ACCESS_READ, &h));
  ASSERT_TRUE(device_matches(m, &h, 6, 1));
  ASSERT_OK(loom_buffer_release(b, &h));
  ASSERT_OK(loom_mem_stats(m, ocl0, &after0));
  ASSERT_OK(loom_mem_stats(m, host, &host_after));
  ASSERT_EQ(after0.peer_bytes_in - before0.peer_bytes_in, n);
  ASSERT_EQ(after0.bytes_in - before0.bytes_in, n);
  ASSERT_EQ(host_after.bytes_in, host_before.bytes_in);
  ASSERT_EQ(storage_on(b, host), LOOM_MEM_STORAGE_NONE);
  ASSERT_OK(loom_buffer_acquire(b, ocl1, LOOM_ACCESS_READ | LOOM_ACCESS_WRITE, &h));
  ASSERT_OK(run_inc(m, &h));
  ASSERT_OK(loom_buffer_release(b, &h));
  ASSERT_OK(loom_buffer_read(b, 0, data, n));
  ASSERT_TRUE(host_matches(data, n, 6, 2));
  free(data);
  loom_buffer_free(b);
}

/* The whole round of calls for one storage kind. */
static void every_call(uint32_t flags, loom_mem_storage expect) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_mem_manager *m = NULL;
  loom_mem_manager_options o;
  hmm_test_options(&o, LOOM_MEM_MODE_MANUAL, LOOM_MEM_POLICY_NONE);
  ASSERT_OK(loom_mem_manager_create(ctx, &o, &m));
  if (!hmm_need_opencl(m, 2)) goto done;
  const int32_t host = 0, ocl0 = hmm_node(m, "ocl0"), ocl1 = hmm_node(m, "ocl1");
  const int64_t n = 1000 * 1000 + 24;
  bool svm = expect != LOOM_MEM_STORAGE_CL_BUFFER;
  loom_buffer *b = NULL;
  ASSERT_OK(loom_buffer_allocate(m, n, LOOM_U8, ocl0, flags, &b));
  ASSERT_EQ(storage_on(b, ocl0), expect);
  ASSERT_EQ(loom_buffer_is_managed(b), svm);

  /* write / read: into and out of the device copy, nothing moves */
  uint8_t *data = malloc((size_t)n);
  hmm_fill(data, n, 1);
  ASSERT_OK(loom_buffer_write(b, 0, data, n));
  free(data);
  ASSERT_EQ(state_on(b, ocl0), LOOM_MEM_OWNER);
  ASSERT_EQ(state_on(b, host), LOOM_MEM_INVALID);
  ASSERT_EQ(hmm_buffer_mismatch(b, n, 1), -1);
  ASSERT_EQ(storage_on(b, host), LOOM_MEM_STORAGE_NONE);

  /* acquire on the device, run a kernel on the handle */
  loom_mem_handle h;
  ASSERT_OK(loom_buffer_acquire(b, ocl0, LOOM_ACCESS_READ | LOOM_ACCESS_WRITE, &h));
  ASSERT_EQ(h.storage, expect);
  ASSERT_EQ(h.node, ocl0);
  ASSERT_TRUE(!h.temporary);
  ASSERT_TRUE(svm ? h.ptr != NULL && loom_mem_handle_cl_mem(&h) == NULL : loom_mem_handle_cl_mem(&h) != NULL);
  ASSERT_OK(run_inc(m, &h));
  ASSERT_OK(loom_buffer_release(b, &h));

  /* conflicting accesses are refused */
  ASSERT_OK(loom_buffer_acquire(b, ocl0, LOOM_ACCESS_WRITE, &h));
  void *p = NULL;
  ASSERT_STATUS(loom_buffer_map(b, LOOM_ACCESS_READ, &p), svm ? LOOM_OK : LOOM_ERR_UNAVAILABLE);
  if (svm) ASSERT_OK(loom_buffer_unmap(b, p)); /* SVM: the host reaches the device's copy itself */
  ASSERT_STATUS(loom_buffer_acquire(b, ocl1, LOOM_ACCESS_READ, &(loom_mem_handle){0}), LOOM_ERR_UNAVAILABLE);
  ASSERT_OK(loom_buffer_release(b, &h));

  /* map for reading: a host copy for a buffer, the SVM itself for SVM */
  ASSERT_OK(loom_buffer_map(b, LOOM_ACCESS_READ, &p));
  ASSERT_TRUE(host_matches(p, n, 1, 1));
  ASSERT_OK(loom_buffer_unmap(b, p));
  ASSERT_EQ(state_on(b, host), svm ? LOOM_MEM_INVALID : LOOM_MEM_SHARED);
  ASSERT_EQ(state_on(b, ocl0), svm ? LOOM_MEM_OWNER : LOOM_MEM_SHARED);

  /* map for writing invalidates the other copies */
  ASSERT_OK(hmm_map_fill(b, n, 2));
  ASSERT_EQ(state_on(b, host), svm ? LOOM_MEM_INVALID : LOOM_MEM_OWNER);
  ASSERT_EQ(state_on(b, ocl0), svm ? LOOM_MEM_OWNER : LOOM_MEM_INVALID);
  if (!svm) ASSERT_EQ(storage_on(b, ocl0), LOOM_MEM_STORAGE_NONE);

  /* policy none: ocl1 reads through a temporary copy */
  ASSERT_OK(loom_buffer_acquire(b, ocl1, LOOM_ACCESS_READ, &h));
  ASSERT_TRUE(h.temporary);
  ASSERT_EQ(h.node, ocl1);
  ASSERT_EQ(h.storage, expect);
  ASSERT_TRUE(device_matches(m, &h, 2, 0));
  ASSERT_OK(loom_buffer_release(b, &h));
  ASSERT_EQ(storage_on(b, ocl1), LOOM_MEM_STORAGE_NONE);

  /* a temporary copy that is written goes back where the data lives */
  ASSERT_OK(loom_buffer_acquire(b, ocl1, LOOM_ACCESS_READ | LOOM_ACCESS_WRITE, &h));
  ASSERT_TRUE(h.temporary);
  ASSERT_OK(run_inc(m, &h));
  ASSERT_OK(loom_buffer_release(b, &h));
  ASSERT_EQ(storage_on(b, ocl1), LOOM_MEM_STORAGE_NONE);
  ASSERT_EQ(state_on(b, svm ? ocl0 : host), LOOM_MEM_OWNER);
  ASSERT_OK(loom_buffer_map(b, LOOM_ACCESS_READ, &p));
  ASSERT_TRUE(host_matches(p, n, 2, 1));
  ASSERT_OK(loom_buffer_unmap(b, p));
  ASSERT_OK(hmm_map_fill(b, n, 3));

  /* migrate: one valid copy, on the target */
  loom_buffer_info info;
  ASSERT_OK(loom_buffer_migrate(b, ocl1));
  ASSERT_EQ(state_on(b, ocl1), LOOM_MEM_OWNER);
  ASSERT_EQ(storage_on(b, ocl0), LOOM_MEM_STORAGE_NONE);
  ASSERT_EQ(storage_on(b, host), LOOM_MEM_STORAGE_NONE);
  ASSERT_OK(loom_buffer_get_info(b, &info));
  ASSERT_EQ(info.migrations, 1);
  ASSERT_EQ(info.valid_copies, 1);
  ASSERT_EQ(hmm_buffer_mismatch(b, n, 3), -1);

  /* device to device: ocl1 -> ocl0, without the host (one platform, one context) */
  ASSERT_OK(loom_buffer_acquire(b, ocl0, LOOM_ACCESS_READ, &h));
  ASSERT_TRUE(device_matches(m, &h, 3, 0));
  ASSERT_OK(loom_buffer_release(b, &h));
  peer_copy(m, flags);

  /* migrate to the host: SVM pages move (OpenCL 2.1+), a buffer is copied */
  loom_mem_node_info ninfo;
  ASSERT_OK(loom_mem_node_info_get(m, ocl1, &ninfo));
  ASSERT_OK(loom_buffer_migrate(b, host));
  loom_buffer_node_info ni;
  ASSERT_OK(loom_buffer_node_info_get(b, ocl1, &ni));
  if (svm && ninfo.svm_migrate) {
    ASSERT_EQ(ni.state, LOOM_MEM_OWNER);
    ASSERT_TRUE(ni.svm_on_host);
  } else {
    ASSERT_EQ(state_on(b, host), LOOM_MEM_OWNER);
    ASSERT_EQ(ni.storage, LOOM_MEM_STORAGE_NONE);
  }
  ASSERT_OK(loom_buffer_get_info(b, &info));
  ASSERT_EQ(info.migrations, 2);

  /* prefetch (asynchronous from host memory), then use it on the device */
  ASSERT_OK(loom_buffer_prefetch(b, ocl0));
  ASSERT_OK(loom_buffer_get_info(b, &info));
  ASSERT_TRUE(info.prefetches >= (svm && ninfo.svm_migrate ? 0 : 1));
  ASSERT_OK(loom_buffer_acquire(b, ocl0, LOOM_ACCESS_READ, &h));
  ASSERT_TRUE(!h.temporary);
  ASSERT_TRUE(device_matches(m, &h, 3, 0));
  ASSERT_OK(loom_buffer_release(b, &h));

  /* advice: accessed_by keeps ocl1's accesses from moving the buffer even when aggressive */
  ASSERT_OK(hmm_map_fill(b, n, 4)); /* one valid copy, not on ocl1 */
  ASSERT_EQ(state_on(b, ocl1), LOOM_MEM_INVALID);
  ASSERT_OK(loom_mem_set_migration_policy(m, LOOM_MEM_POLICY_AGGRESSIVE));
  ASSERT_OK(loom_buffer_advise(b, LOOM_MEM_ADVISE_ACCESSED_BY, ocl1));
  int64_t before = info.migrations;
  ASSERT_OK(loom_buffer_acquire(b, ocl1, LOOM_ACCESS_READ, &h));
  ASSERT_TRUE(h.temporary);
  ASSERT_OK(loom_buffer_release(b, &h));
  ASSERT_OK(loom_buffer_get_info(b, &info));
  ASSERT_EQ(info.migrations, before);
  ASSERT_OK(loom_buffer_advise(b, LOOM_MEM_ADVISE_UNSET_ACCESSED_BY, ocl1));

  /* a prefetch left running when the buffer is freed */
  ASSERT_OK(hmm_map_fill(b, n, 5));
  ASSERT_OK(loom_buffer_prefetch(b, ocl1));
  loom_buffer_free(b);
  ASSERT_OK(loom_mem_trim(m, -1));
  for (int32_t i = 0; i < loom_mem_node_count(m); i++) {
    loom_mem_node_stats st;
    ASSERT_OK(loom_mem_stats(m, i, &st));
    ASSERT_EQ(st.in_use, 0);
    ASSERT_EQ(st.allocations, st.frees);
  }
done:
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
}

TEST(hmm_opencl_buffer_every_call) {
  every_call(LOOM_MEM_DEVICE_LOCAL, LOOM_MEM_STORAGE_CL_BUFFER);
}
TEST(hmm_opencl_svm_coarse_every_call) {
  every_call(LOOM_MEM_SVM_COARSE, LOOM_MEM_STORAGE_SVM_COARSE);
}
TEST(hmm_opencl_svm_fine_every_call) {
  every_call(LOOM_MEM_SVM_FINE, LOOM_MEM_STORAGE_SVM_FINE);
}

/* loom__buffer_write_ahead and loom__buffer_join for one storage: the write goes on ocl0's
 * transfer queue behind the kernel queued before it (which reads and writes the buffer) and the
 * kernel queued after the join sees it: seed 2's bytes plus one, not plus two (the write ran
 * first) nor plus zero (the second kernel ran first). A pending write is waited for by a
 * read, and by a free; writing ahead into a buffer in use is refused, naming it. */
static void write_ahead_round(uint32_t flags) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_mem_manager *m = NULL;
  loom_mem_manager_options o;
  hmm_test_options(&o, LOOM_MEM_MODE_MANUAL, LOOM_MEM_POLICY_NONE);
  ASSERT_OK(loom_mem_manager_create(ctx, &o, &m));
  if (!hmm_need_opencl(m, 1)) goto done;
  const int32_t ocl0 = hmm_node(m, "ocl0");
  const int64_t n = 4 * 1000 * 1000;
  uint8_t *one = malloc((size_t)n), *two = malloc((size_t)n);
  ASSERT_TRUE(one && two);
  hmm_fill(one, n, 1);
  hmm_fill(two, n, 2);
  loom_buffer *b = NULL;
  ASSERT_OK(loom_buffer_allocate(m, n, LOOM_U8, ocl0, flags, &b));
  ASSERT_OK(loom__buffer_join(b)); /* nothing pending: nothing to do */
  ASSERT_OK(loom_buffer_write(b, 0, one, n));
  loom_mem_handle h;
  ASSERT_OK(loom_buffer_acquire(b, ocl0, LOOM_ACCESS_READ | LOOM_ACCESS_WRITE, &h));
  ASSERT_EQ(loom__buffer_write_ahead(b, 0, two, n), LOOM_ERR_UNAVAILABLE);
  ASSERT_CONTAINS(loom_last_error(), "loom__buffer_write_ahead: buffer");
  ASSERT_CONTAINS(loom_last_error(), "is in use on ocl0");
  ASSERT_OK(run_inc(m, &h));
  ASSERT_OK(loom__buffer_release_queued(b, &h));
  ASSERT_OK(loom__buffer_write_ahead(b, 0, two, n));
  ASSERT_EQ(state_on(b, ocl0), LOOM_MEM_OWNER);
  ASSERT_OK(loom__buffer_join(b));
  ASSERT_OK(loom_buffer_acquire(b, ocl0, LOOM_ACCESS_READ | LOOM_ACCESS_WRITE, &h));
  ASSERT_OK(run_inc(m, &h));
  ASSERT_TRUE(device_matches(m, &h, 2, 1));
  ASSERT_OK(loom_buffer_release(b, &h));
  /* left pending: a read waits for it; a free too */
  ASSERT_OK(loom__buffer_write_ahead(b, 0, one, n));
  ASSERT_EQ(hmm_buffer_mismatch(b, n, 1), -1);
  ASSERT_OK(loom__buffer_write_ahead(b, 0, two, n));
  loom_buffer_free(b);
  free(one);
  free(two);
done:
  loom_mem_manager_destroy(m);
  loom_context_destroy(ctx);
}

TEST(hmm_opencl_write_ahead) {
  write_ahead_round(LOOM_MEM_DEVICE_LOCAL);
  write_ahead_round(LOOM_MEM_SVM_COARSE);
}

TEST(hmm_opencl_modes) {
  loom_context *ctx = NULL;
  ASSERT_OK(hmm_test_context(&ctx));
  loom_mem_manager_options o;
  static const struct {
    loom_mem_mode mode;
    uint32_t flags;
    loom_mem_storage expect;
  } cases[] = {
      {LOOM_MEM_MODE_AUTO, 0, LOOM_MEM_STORAGE_SVM_FINE}, /* PoCL shares host memory */
      {LOOM_MEM_MODE_MANUAL, 0, LOOM_MEM_STORAGE_CL_BUFFER},
      {LOOM_MEM_MODE_MANAGED, 0, LOOM_MEM_STORAGE_SVM_FINE},
      {LOOM_MEM_MODE_MANAGED, LOOM_MEM_DEVICE_LOCAL, LOOM_MEM_STORAGE_CL_BUFFER},
      {LOOM_MEM_MODE_MANUAL, LOOM_MEM_HOST_VISIBLE, LOOM_MEM_STORAGE_SVM_FINE},
  };
  for (int32_t i = 0; i < LOOM_ARRAY_SIZE(cases); i++) {
    loom_mem_manager *m = NULL;
    hmm_test_options(&o, cases[i].mode, LOOM_MEM_POLICY_ADAPTIVE);
    ASSERT_OK(loom_mem_manager_create(ctx, &o, &m));
    if (!hmm_need_opencl(m, 1)) {
      loom_mem_manager_destroy(m);
      break;
    }
    int32_t ocl0 = hmm_node(m, "ocl0");
    loom_mem_node_info info;
    ASSERT_OK(loom_mem_node_info_get(m, ocl0, &info));
    ASSERT_EQ(info.kind, LOOM_MEMORY_DEVICE);
    ASSERT_EQ(info.limit_bytes, 1024 * MiB); /* POCL_MEMORY_LIMIT=1 */
    ASSERT_EQ(info.max_alloc_bytes, 256 * MiB);
    ASSERT_TRUE(info.storages & LOOM_MEM_STORAGE_BIT(LOOM_MEM_STORAGE_SVM_COARSE));
    loom_buffer *b = NULL;
    ASSERT_OK(loom_buffer_allocate(m, 4096, LOOM_F32, ocl0, cases[i].flags, &b));
    ASSERT_EQ(storage_on(b, ocl0), cases[i].expect);
    ASSERT_EQ(loom_buffer_is_managed(b), cases[i].expect != LOOM_MEM_STORAGE_CL_BUFFER);
    loom_buffer_info bi;
    ASSERT_OK(loom_buffer_get_info(b, &bi));
    ASSERT_EQ(bi.mode, cases[i].mode);
    /* More than the device's largest allocation: out of memory, with the reason. */
    loom_buffer *big = NULL;
    ASSERT_STATUS(loom_buffer_allocate(m, 300 * MiB, LOOM_U8, ocl0, cases[i].flags, &big),
                  LOOM_ERR_OUT_OF_MEMORY);
    ASSERT_CONTAINS(loom_last_error(), "largest allocation");
    loom_buffer_free(b);
    loom_mem_manager_destroy(m);
  }
  loom_context_destroy(ctx);
}

#else

TEST(hmm_opencl_every_call) {
  loom_test_skip("built without OpenCL");
}

#endif
