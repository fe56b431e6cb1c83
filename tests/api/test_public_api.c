/* The public calls Loom's tools use instead of internals (issue 12, point 6): graph
 * introspection, running a graph on a named device, byte formatting, seeded random inputs, the
 * all-or-nothing .npy writer; and loom/opencl.h's and loom/cuda.h's interop where the build
 * has them (on machines without a CUDA device, what they say of other devices and nodes). Only
 * public headers are included, as a user would. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "loom/loom.h"

#if LOOM_HAVE_OPENCL
#include "loom/opencl.h"
#endif
#if LOOM_HAVE_CUDA
#include "loom/cuda.h"
#endif

static const char *const two_ops_lir =
    "graph two(x: f32[4,3], y: f32[3,2]) {\n"
    "  d = dot x y\n"
    "  v, i = topk d k=1 axis=1\n"
    "  return v, i\n"
    "}\n";

static loom_graph *parse(const char *text) {
  loom_graph *g = NULL;
  return loom_graph_parse(text, strlen(text), "two.lir", &g) == LOOM_OK ? g : NULL;
}

TEST(graph_ops_are_listed_with_their_values) {
  loom_graph *g = parse(two_ops_lir);
  ASSERT_TRUE(g != NULL);
  ASSERT_EQ(loom_graph_op_count(g), 2);
  loom_op_info info;
  ASSERT_EQ(loom_graph_op_info_get(g, 0, &info), LOOM_OK);
  ASSERT_EQ(info.kind, LOOM_OP_DOT);
  ASSERT_EQ(info.n_inputs, 2);
  ASSERT_EQ(info.n_outputs, 1);
  ASSERT_EQ(info.line, 2);
  ASSERT_EQ(loom_graph_op_input(g, 0, 1).id, loom_graph_find(g, "y").id);
  char buf[16];
  ASSERT_STREQ(loom_value_label(g, loom_graph_op_output(g, 0, 0), buf, sizeof buf), "d");
  ASSERT_EQ(loom_graph_op_info_get(g, 1, &info), LOOM_OK);
  ASSERT_EQ(info.kind, LOOM_OP_TOPK);
  ASSERT_EQ(info.n_outputs, 2);
  ASSERT_STREQ(loom_value_label(g, loom_graph_op_output(g, 1, 1), buf, sizeof buf), "i");
  /* out of range: an error with a message, cleared outputs, no value */
  ASSERT_EQ(loom_graph_op_info_get(g, 2, &info), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "op 2 out of range");
  ASSERT_EQ(info.n_inputs, 0);
  ASSERT_EQ(loom_graph_op_info_get(NULL, 0, &info), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(loom_graph_op_output(g, 0, 1).id, -1);
  ASSERT_EQ(loom_graph_op_input(g, -1, 0).id, -1);
  ASSERT_STREQ(loom_value_label(g, LOOM_VALUE_NONE, buf, sizeof buf), "?");
  loom_graph_destroy(g);
}

TEST(unnamed_values_are_labelled_by_id) {
  loom_graph *g = NULL;
  ASSERT_EQ(loom_graph_create("b", &g), LOOM_OK);
  loom_type t;
  ASSERT_EQ(loom_type_make(LOOM_F32, 1, (int64_t[]){4}, &t), LOOM_OK);
  loom_value x = loom_graph_param(g, "x", &t);
  loom_value e = loom_unary(g, LOOM_OP_EXP, x);
  char buf[16];
  char want[16];
  snprintf(want, sizeof want, "v%d", (int)e.id);
  ASSERT_STREQ(loom_value_label(g, e, buf, sizeof buf), want);
  loom_graph_destroy(g);
}

TEST(bytes_are_formatted_as_messages_write_them) {
  char buf[32];
  ASSERT_STREQ(loom_bytes_format(512, buf, sizeof buf), "512 B");
  ASSERT_STREQ(loom_bytes_format((int64_t)3 << 29, buf, sizeof buf), "1.50 GiB");
  ASSERT_STREQ(loom_bytes_format(64 << 10, buf, 6), "64.00"); /* truncated to fit */
  ASSERT_TRUE(loom_bytes_format(1, NULL, 0) == NULL);
}

TEST(random_fill_is_seeded_and_checked) {
  loom_type t;
  ASSERT_EQ(loom_type_make(LOOM_F32, 1, (int64_t[]){64}, &t), LOOM_OK);
  loom_tensor a, b;
  ASSERT_EQ(loom_tensor_init(&a, &t), LOOM_OK);
  ASSERT_EQ(loom_tensor_init(&b, &t), LOOM_OK);
  ASSERT_EQ(loom_tensor_fill_random(&a, 7, 1), LOOM_OK);
  ASSERT_EQ(loom_tensor_fill_random(&b, 7, 1), LOOM_OK);
  ASSERT_TRUE(memcmp(a.data, b.data, 64 * sizeof(float)) == 0);
  for (int i = 0; i < 64; i++) ASSERT_TRUE(((float *)a.data)[i] >= 0 && ((float *)a.data)[i] < 1);
  ASSERT_EQ(loom_tensor_fill_random(&b, 7, 2), LOOM_OK); /* another stream, other values */
  ASSERT_TRUE(memcmp(a.data, b.data, 64 * sizeof(float)) != 0);
  loom_tensor_deinit(&b);
  ASSERT_EQ(loom_tensor_fill_random(NULL, 1, 0), LOOM_ERR_INVALID_ARGUMENT);
  b.type = t;
  b.data = NULL;
  ASSERT_EQ(loom_tensor_fill_random(&b, 1, 0), LOOM_ERR_INVALID_ARGUMENT);
  loom_tensor_deinit(&a);
}

/* Inputs for two_ops_lir. */
static void two_inputs(loom_graph *g, loom_tensor in[2]) {
  for (int32_t p = 0; p < 2; p++) {
    loom_tensor_init(&in[p], loom_value_type(g, loom_graph_param_at(g, p)));
    loom_tensor_fill_random(&in[p], 3, (uint64_t)p);
  }
}

TEST(run_on_device_matches_the_cpu_run_and_names_bad_devices) {
  loom_graph *g = parse(two_ops_lir);
  loom_context *ctx = NULL;
  ASSERT_TRUE(g && loom_context_create(&(loom_context_options){"cpu0"}, &ctx) == LOOM_OK);
  loom_tensor in[2], a[2], b[2];
  two_inputs(g, in);
  loom_run_stats st;
  ASSERT_EQ(loom_graph_run(ctx, g, in, 2, a, 2, NULL), LOOM_OK);
  ASSERT_EQ(loom_graph_run_on_device(ctx, "cpu0", g, in, 2, b, 2, &st), LOOM_OK);
  ASSERT_TRUE(st.peak_bytes > 0 && st.seconds >= 0);
  for (int k = 0; k < 2; k++) {
    ASSERT_TRUE(memcmp(a[k].data, b[k].data, 4 * (size_t)loom_dtype_size(a[k].type.dtype)) == 0);
    loom_tensor_deinit(&a[k]);
    loom_tensor_deinit(&b[k]);
  }
  ASSERT_EQ(loom_graph_run_on_device(ctx, "ocl9", g, in, 2, b, 2, NULL), LOOM_ERR_NOT_FOUND);
  ASSERT_CONTAINS(loom_last_error(), "ocl9");
  ASSERT_TRUE(b[0].data == NULL);
  ASSERT_EQ(loom_graph_run_on_device(ctx, NULL, g, in, 2, b, 2, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "loom_graph_run_on_device");
  for (int p = 0; p < 2; p++) loom_tensor_deinit(&in[p]);
  loom_context_destroy(ctx);
  loom_graph_destroy(g);
}

static bool file_exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

TEST(npy_files_are_written_all_or_nothing) {
  char dir[] = "/tmp/loom-api-XXXXXX";
  ASSERT_TRUE(mkdtemp(dir) != NULL);
  char p0[64], p1[64], bad[80];
  snprintf(p0, sizeof p0, "%s/a.npy", dir);
  snprintf(p1, sizeof p1, "%s/b.npy", dir);
  snprintf(bad, sizeof bad, "%s/missing/c.npy", dir);
  loom_type t;
  ASSERT_EQ(loom_type_make(LOOM_F64, 1, (int64_t[]){5}, &t), LOOM_OK);
  loom_tensor ts[2];
  for (int i = 0; i < 2; i++) {
    ASSERT_EQ(loom_tensor_init(&ts[i], &t), LOOM_OK);
    ASSERT_EQ(loom_tensor_fill_random(&ts[i], 1, (uint64_t)i), LOOM_OK);
  }
  const char *both[2] = {p0, p1};
  ASSERT_EQ(loom_tensors_save_npy(both, ts, 2), LOOM_OK);
  loom_tensor back;
  ASSERT_EQ(loom_tensor_load_npy(p1, &back), LOOM_OK);
  ASSERT_TRUE(memcmp(back.data, ts[1].data, 5 * sizeof(double)) == 0);
  loom_tensor_deinit(&back);
  unlink(p0);
  unlink(p1);
  /* the second path cannot be written: the first file is not left behind */
  const char *one_bad[2] = {p0, bad};
  ASSERT_EQ(loom_tensors_save_npy(one_bad, ts, 2), LOOM_ERR_IO);
  ASSERT_CONTAINS(loom_last_error(), "missing");
  ASSERT_TRUE(!file_exists(p0));
  ASSERT_EQ(loom_tensors_save_npy(NULL, ts, 1), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(loom_tensors_save_npy(NULL, NULL, 0), LOOM_OK);
  ASSERT_STREQ(loom_dtype_npy_descr(LOOM_F32), "<f4");
  ASSERT_TRUE(loom_dtype_npy_descr(LOOM_BF16) == NULL);
  for (int i = 0; i < 2; i++) loom_tensor_deinit(&ts[i]);
  ASSERT_EQ(rmdir(dir), 0); /* empty: no temporary file left either */
}

#if LOOM_HAVE_OPENCL
TEST(opencl_interop_names_the_device_and_the_managers_queue) {
  loom_context *ctx = NULL;
  ASSERT_EQ(loom_context_create(&(loom_context_options){"cpu0,opencl"}, &ctx), LOOM_OK);
  int32_t ocl = -1;
  if (loom_context_find_device(ctx, "ocl0", &ocl) != LOOM_OK) {
    loom_context_destroy(ctx);
    loom_test_skip("no OpenCL device");
    return;
  }
  loom_device_info info;
  ASSERT_EQ(loom_context_device_info(ctx, ocl, &info), LOOM_OK);
  if (strncmp(info.id, "ocl", 3) != 0) {
    /* A GPU both drivers list is one device run by CUDA, its memory node CUDA memory. */
    loom_test_skip("ocl0 is %s here, whose memory is CUDA's", info.id);
    loom_context_destroy(ctx);
    return;
  }
  cl_platform_id platform;
  cl_device_id device;
  ASSERT_EQ(loom_context_device_cl(ctx, ocl, &platform, &device), LOOM_OK);
  ASSERT_TRUE(platform != NULL && device != NULL);
  int32_t cpu = -1;
  ASSERT_EQ(loom_context_find_device(ctx, "cpu0", &cpu), LOOM_OK);
  ASSERT_EQ(loom_context_device_cl(ctx, cpu, &platform, &device), LOOM_ERR_NOT_FOUND);
  ASSERT_TRUE(platform == NULL && device == NULL);

  loom_mem_manager *m = NULL;
  int32_t node = -1, host = -1;
  ASSERT_EQ(loom_context_memory(ctx, &m), LOOM_OK);
  ASSERT_EQ(loom_mem_node_find(m, "ocl0", &node), LOOM_OK);
  ASSERT_EQ(loom_mem_node_find(m, "host0", &host), LOOM_OK);
  cl_context clctx;
  cl_command_queue q;
  ASSERT_EQ(loom_mem_node_cl_queue(m, node, &clctx, &q), LOOM_OK);
  ASSERT_TRUE(clctx != NULL && q != NULL);
  ASSERT_EQ(loom_mem_node_cl_queue(m, host, &clctx, &q), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "host0 is not an OpenCL device's node");

  /* a buffer's cl_mem is read through the manager's queue */
  loom_buffer *b = NULL;
  ASSERT_EQ(loom_buffer_allocate(m, 256, LOOM_U8, node, LOOM_MEM_DEVICE_LOCAL, &b), LOOM_OK);
  uint8_t src[256], dst[256];
  for (int i = 0; i < 256; i++) src[i] = (uint8_t)(i * 7);
  ASSERT_EQ(loom_buffer_write(b, 0, src, 256), LOOM_OK);
  loom_mem_handle h;
  ASSERT_EQ(loom_buffer_acquire(b, node, LOOM_ACCESS_READ, &h), LOOM_OK);
  ASSERT_EQ(h.storage, LOOM_MEM_STORAGE_CL_BUFFER);
  ASSERT_TRUE(loom_mem_handle_cl_mem(&h) != NULL);
  ASSERT_EQ(loom_mem_node_cl_queue(m, node, NULL, &q), LOOM_OK);
  ASSERT_EQ(clEnqueueReadBuffer(q, loom_mem_handle_cl_mem(&h), CL_TRUE, 0, 256, dst, 0, NULL, NULL),
            CL_SUCCESS);
  ASSERT_EQ(loom_buffer_release(b, &h), LOOM_OK);
  ASSERT_TRUE(memcmp(src, dst, 256) == 0);
  ASSERT_TRUE(loom_mem_handle_cl_mem(NULL) == NULL);
  loom_buffer_free(b);

  /* and a graph runs there with the cpu's results */
  loom_graph *g = parse(two_ops_lir);
  ASSERT_TRUE(g != NULL);
  loom_tensor in[2], a[2], c[2];
  two_inputs(g, in);
  ASSERT_EQ(loom_graph_run(ctx, g, in, 2, a, 2, NULL), LOOM_OK);
  ASSERT_EQ(loom_graph_run_on_device(ctx, "ocl0", g, in, 2, c, 2, NULL), LOOM_OK);
  for (int i = 0; i < 4; i++) ASSERT_NEAR(((float *)a[0].data)[i], ((float *)c[0].data)[i], 1e-5);
  ASSERT_TRUE(memcmp(a[1].data, c[1].data, 4 * sizeof(int64_t)) == 0);
  for (int k = 0; k < 2; k++) {
    loom_tensor_deinit(&a[k]);
    loom_tensor_deinit(&c[k]);
    loom_tensor_deinit(&in[k]);
  }
  loom_graph_destroy(g);
  loom_context_destroy(ctx);
}
#endif

#if LOOM_HAVE_CUDA
TEST(cuda_interop_refuses_what_is_not_cuda) {
  loom_context *ctx = NULL;
  ASSERT_EQ(loom_context_create(&(loom_context_options){"cpu0"}, &ctx), LOOM_OK);
  int32_t cpu = -1;
  int ordinal = 5;
  ASSERT_EQ(loom_context_find_device(ctx, "cpu0", &cpu), LOOM_OK);
  ASSERT_EQ(loom_context_device_cuda_ordinal(ctx, cpu, &ordinal), LOOM_ERR_NOT_FOUND);
  ASSERT_EQ(ordinal, -1);
  ASSERT_CONTAINS(loom_last_error(), "cpu0 is not a CUDA device");
  ASSERT_EQ(loom_context_device_cuda_ordinal(ctx, 99, &ordinal), LOOM_ERR_INVALID_ARGUMENT);

  loom_mem_manager *m = NULL;
  int32_t host = -1;
  ASSERT_EQ(loom_context_memory(ctx, &m), LOOM_OK);
  ASSERT_EQ(loom_mem_node_find(m, "host0", &host), LOOM_OK);
  cudaStream_t stream = (cudaStream_t)1;
  ASSERT_EQ(loom_mem_node_cuda_stream(m, host, &stream), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(stream == NULL);
  ASSERT_CONTAINS(loom_last_error(), "host0 is not a CUDA device's node");

  /* a host copy's handle has no CUDA pointer */
  loom_buffer *b = NULL;
  ASSERT_EQ(loom_buffer_allocate(m, 64, LOOM_U8, host, 0, &b), LOOM_OK);
  loom_mem_handle h;
  ASSERT_EQ(loom_buffer_acquire(b, host, LOOM_ACCESS_WRITE | LOOM_ACCESS_DISCARD, &h), LOOM_OK);
  ASSERT_TRUE(h.ptr != NULL && loom_mem_handle_cuda_ptr(&h) == NULL);
  ASSERT_EQ(loom_buffer_release(b, &h), LOOM_OK);
  ASSERT_TRUE(loom_mem_handle_cuda_ptr(NULL) == NULL);
  loom_buffer_free(b);
  loom_context_destroy(ctx);
}
#endif
