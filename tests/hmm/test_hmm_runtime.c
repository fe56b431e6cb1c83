/* The runtime's buffers through the context's memory manager (issue 5): graph and plan runs
 * allocate every value and temporary on the running device's memory node, with their exact
 * sizes, so the node's counters equal the meter's, its limit holds for the run, its trace
 * shows the run, and a host program's buffers on the node make room for a run by eviction. */
#include <dirent.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "hmm_test.h"
#include "ir/ir.h"
#include "loom/plan.h"

#define KiB ((int64_t)1 << 10)

/* 256 KiB in, two 256 KiB values, all three held while z is made: the meter's peak is
 * 768 KiB on cpu0, of which the memory manager allocates 512 KiB (x is read in place). */
static const char *chain_lir =
    "graph chain(x: f32[256,256]) {\n"
    "  y = exp x\n"
    "  z = add y x\n"
    "  return z\n"
    "}\n";

/* The same on a device, 2 MiB each: x is written in, so all 6 MiB are the device's. */
static const char *device_chain_lir =
    "graph chain(x: f32[512,1024]) {\n"
    "  y = exp x\n"
    "  z = add y x\n"
    "  return z\n"
    "}\n";

static loom_graph *parse(const char *text) {
  loom_graph *g = NULL;
  if (loom_graph_parse(text, strlen(text), "chain.lir", &g) != LOOM_OK) return NULL;
  return g;
}

/* A context (PoCL's two devices where there is PoCL) whose manager ignores the environment's
 * LOOM_MEM_LIMIT. */
static loom_context *runtime_context(loom_mem_manager **out_m, int32_t *out_host) {
  unsetenv("LOOM_MEM_LIMIT");
  loom_context *ctx = NULL;
  if (hmm_test_context(&ctx) != LOOM_OK) return NULL;
  if (loom_context_memory(ctx, out_m) != LOOM_OK || loom_mem_node_find(*out_m, "cpu0", out_host) != LOOM_OK) {
    loom_context_destroy(ctx);
    return NULL;
  }
  return ctx;
}

static loom_status input(const loom_graph *g, loom_tensor *x) {
  loom_status s = loom_tensor_init(x, loom_value_type(g, loom_graph_param_at(g, 0)));
  if (s != LOOM_OK) return s;
  float *p = x->data;
  int64_t n = 0;
  loom_type_elements(&x->type, &n);
  for (int64_t i = 0; i < n; i++) p[i] = (float)(i % 97) / 97.0f;
  return LOOM_OK;
}

/* z == exp(x) + x within float rounding. */
static bool chain_result_ok(const loom_tensor *x, const loom_tensor *z) {
  int64_t n = 0;
  loom_type_elements(&x->type, &n);
  const float *a = x->data, *b = z->data;
  for (int64_t i = 0; i < n; i++)
    if (fabsf(b[i] - (expf(a[i]) + a[i])) > 1e-5f * fabsf(b[i])) return false;
  return true;
}

TEST(graph_run_allocates_on_cpu0s_node) {
  loom_mem_manager *m = NULL;
  int32_t host = -1;
  loom_context *ctx = runtime_context(&m, &host);
  ASSERT_TRUE(ctx != NULL);
  loom_graph *g = parse(chain_lir);
  ASSERT_TRUE(g != NULL);
  loom_tensor x, z;
  ASSERT_OK(input(g, &x));
  loom_run_stats rs;
  ASSERT_OK(loom_graph_run(ctx, g, &x, 1, &z, 1, &rs));
  ASSERT_TRUE(chain_result_ok(&x, &z));
  loom_mem_node_stats st;
  ASSERT_OK(loom_mem_stats(m, host, &st));
  /* Exactly the meter's bytes, less the input read in place; nothing held or cached after. */
  ASSERT_EQ(rs.peak_bytes, 768 * KiB);
  ASSERT_EQ(st.peak_live, rs.peak_bytes - 256 * KiB);
  ASSERT_EQ(st.allocations, 2);
  ASSERT_EQ(st.live_bytes, 0);
  ASSERT_EQ(st.cached_bytes, 0);
  ASSERT_TRUE(hmm_within_limits(m));
  loom_tensor_deinit(&z);
  loom_tensor_deinit(&x);
  loom_graph_destroy(g);
  loom_context_destroy(ctx);
}

TEST(node_limit_holds_for_a_run) {
  loom_mem_manager *m = NULL;
  int32_t host = -1;
  loom_context *ctx = runtime_context(&m, &host);
  ASSERT_TRUE(ctx != NULL);
  loom_graph *g = parse(chain_lir);
  ASSERT_TRUE(g != NULL);
  loom_tensor x, z;
  ASSERT_OK(input(g, &x));
  loom_mem_node_info info;
  ASSERT_OK(loom_mem_node_info_get(m, host, &info));
  /* y fits, z does not: OUT_OF_MEMORY naming the node, and nothing left behind. */
  ASSERT_OK(loom_mem_set_limit(m, host, 384 * KiB));
  ASSERT_STATUS(loom_graph_run(ctx, g, &x, 1, &z, 1, NULL), LOOM_ERR_OUT_OF_MEMORY);
  char want[64];
  snprintf(want, sizeof want, "out of memory on %s", info.id);
  ASSERT_CONTAINS(loom_last_error(), want);
  ASSERT_CONTAINS(loom_last_error(), "value 'z'");
  ASSERT_TRUE(z.data == NULL);
  loom_mem_node_stats st;
  ASSERT_OK(loom_mem_stats(m, host, &st));
  ASSERT_EQ(st.live_bytes, 0);
  ASSERT_EQ(st.failed_allocations, 1);
  ASSERT_TRUE(st.peak_in_use <= 384 * KiB);
  /* A plan for the runner LOOM_MEM_LIMIT=cpu0:800KiB would make runs under that node limit:
   * the meter's 768 KiB and the node's 512 KiB, its pool included, stay under it. */
  loom_runner *r = NULL;
  int32_t nr = 0;
  ASSERT_OK(loom_runners_from_mem_limits("cpu0:800KiB", &r, &nr));
  ASSERT_EQ(nr, 1);
  ASSERT_OK(loom_mem_set_limit(m, host, r[0].limit));
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split_by_memory(g, r, nr, &plan));
  loom_plan_stats ps = {0};
  ASSERT_OK(loom_plan_run(ctx, plan, &x, 1, &z, 1, &ps));
  ASSERT_TRUE(chain_result_ok(&x, &z));
  for (int32_t i = 0; i < ps.n_stages; i++) ASSERT_TRUE(ps.stages[i].peak_bytes <= r[0].limit);
  ASSERT_OK(loom_mem_stats(m, host, &st));
  ASSERT_TRUE(st.peak_in_use <= r[0].limit);
  ASSERT_EQ(st.live_bytes, 0);
  ASSERT_EQ(st.cached_bytes, 0);
  ASSERT_TRUE(hmm_within_limits(m));
  loom_plan_stats_deinit(&ps);
  loom_plan_destroy(plan);
  free(r);
  loom_tensor_deinit(&z);
  loom_tensor_deinit(&x);
  loom_graph_destroy(g);
  loom_context_destroy(ctx);
}

/* Whether dir holds a file whose name ends in ".tmp". */
static bool temp_left_in(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return false;
  bool found = false;
  for (struct dirent *e; !found && (e = readdir(d));) {
    size_t n = strlen(e->d_name);
    found = n > 4 && strcmp(e->d_name + n - 4, ".tmp") == 0;
  }
  closedir(d);
  return found;
}

TEST(trace_shows_a_run) {
  loom_mem_manager *m = NULL;
  int32_t host = -1;
  loom_context *ctx = runtime_context(&m, &host);
  ASSERT_TRUE(ctx != NULL);
  loom_graph *g = parse(chain_lir);
  ASSERT_TRUE(g != NULL);
  loom_tensor x, z;
  ASSERT_OK(input(g, &x));
  ASSERT_OK(loom_mem_trace_enable(m, true));
  ASSERT_OK(loom_graph_run(ctx, g, &x, 1, &z, 1, NULL));
  char dir[] = "/tmp/loom-trace-XXXXXX";
  ASSERT_TRUE(mkdtemp(dir) != NULL);
  char path[128];
  snprintf(path, sizeof path, "%s/run.json", dir);
  ASSERT_OK(loom_mem_trace_write(m, path));
  char *text = hmm_read_file(path);
  ASSERT_TRUE(text != NULL);
  ASSERT_TRUE(hmm_json_valid(text));
  ASSERT_CONTAINS(text, "\"name\":\"alloc\"");
  ASSERT_CONTAINS(text, "\"name\":\"free\"");
  ASSERT_CONTAINS(text, "\"name\":\"run\"");
  free(text);
  ASSERT_TRUE(!temp_left_in(dir));
  /* A file that cannot be made: IO naming it, and nothing left beside it. */
  char bad[160];
  snprintf(bad, sizeof bad, "%s/no/such/dir/run.json", dir);
  ASSERT_STATUS(loom_mem_trace_write(m, bad), LOOM_ERR_IO);
  ASSERT_CONTAINS(loom_last_error(), bad);
  ASSERT_TRUE(!temp_left_in(dir));
  unlink(path);
  rmdir(dir);
  loom_tensor_deinit(&z);
  loom_tensor_deinit(&x);
  loom_graph_destroy(g);
  loom_context_destroy(ctx);
}

/* A stage on ocl0 limited to 8 MiB needs 6 MiB: a host program's unpinned 3 MiB buffer there
 * is evicted to host memory (data kept), the run's buffers never are, and no counter passes
 * the limit. */
TEST(run_on_opencl_evicts_a_host_programs_buffer) {
  loom_mem_manager *m = NULL;
  int32_t host = -1;
  loom_context *ctx = runtime_context(&m, &host);
  ASSERT_TRUE(ctx != NULL);
  if (!hmm_need_opencl(m, 1)) {
    loom_context_destroy(ctx);
    return;
  }
  int32_t ocl0 = hmm_node(m, "ocl0");
  ASSERT_OK(loom_mem_set_limit(m, ocl0, 8 * MiB));
  loom_buffer *mine = NULL;
  ASSERT_OK(loom_buffer_allocate(m, 3 * MiB, LOOM_U8, ocl0, 0, &mine));
  uint8_t *data = malloc((size_t)(3 * MiB));
  ASSERT_TRUE(data != NULL);
  hmm_fill(data, 3 * MiB, 7);
  ASSERT_OK(loom_buffer_write(mine, 0, data, 3 * MiB));
  free(data);

  loom_graph *g = parse(device_chain_lir);
  ASSERT_TRUE(g != NULL);
  loom_tensor x, z;
  ASSERT_OK(input(g, &x));
  loom_runner r = {"ocl0", 8 * MiB};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split_by_memory(g, &r, 1, &plan));
  loom_plan_stats ps = {0};
  ASSERT_OK(loom_plan_run(ctx, plan, &x, 1, &z, 1, &ps));
  ASSERT_TRUE(chain_result_ok(&x, &z));
  ASSERT_EQ(ps.peak_bytes, 6 * MiB);

  loom_mem_node_stats st;
  ASSERT_OK(loom_mem_stats(m, ocl0, &st));
  ASSERT_EQ(st.evictions, 1);
  ASSERT_TRUE(st.peak_in_use <= 8 * MiB);
  ASSERT_TRUE(st.bytes_in >= 2 * MiB + 3 * MiB); /* x written in, and the host program's write */
  ASSERT_TRUE(st.bytes_out >= 2 * MiB);          /* z read out */
  ASSERT_EQ(st.live_bytes, 0);                   /* the host program's buffer left */
  ASSERT_TRUE(hmm_within_limits(m));
  loom_buffer_node_info ni;
  ASSERT_OK(loom_buffer_node_info_get(mine, host, &ni));
  ASSERT_EQ(ni.state, LOOM_MEM_OWNER);
  ASSERT_EQ(hmm_buffer_mismatch(mine, 3 * MiB, 7), -1);
  loom_buffer_free(mine);
  loom_plan_stats_deinit(&ps);
  loom_plan_destroy(plan);
  loom_tensor_deinit(&z);
  loom_tensor_deinit(&x);
  loom_graph_destroy(g);
  loom_context_destroy(ctx);
}

/* ---- a loop's pieces reuse their buffers ---------------------------------------------------- */

/* kNN of n rows against 4096, chunked under a limit into a loop whose pieces each hold two
 * buffers of (piece rows) x 4096 floats, most of the limit. */
static const char *knn_lir =
    "graph knn(x: f32[%d,3], y: f32[4096,3]) {\n"
    "  xe       = reshape x shape=[%d,1,3]\n"
    "  ye       = reshape y shape=[1,4096,3]\n"
    "  diff     = sub xe ye\n"
    "  sq       = mul diff diff\n"
    "  d2       = reduce_sum sq axes=[2]\n"
    "  val, idx = topk d2 k=4 axis=1 largest=false\n"
    "  return val, idx\n"
    "}\n";

/* Whether val and idx hold, per row of x, the 4 smallest squared distances to the rows of y
 * (computed here in double) and indices of rows at those distances. */
static bool knn_ok(const float *x, const float *y, int32_t n, const loom_tensor *val,
                   const loom_tensor *idx) {
  const float *v = val->data;
  const int64_t *ix = idx->data;
  for (int32_t i = 0; i < n; i++) {
    double best[4] = {INFINITY, INFINITY, INFINITY, INFINITY};
    for (int32_t j = 0; j < 4096; j++) {
      double d = 0;
      for (int32_t c = 0; c < 3; c++)
        d += ((double)x[3 * i + c] - y[3 * j + c]) * ((double)x[3 * i + c] - y[3 * j + c]);
      for (int32_t s = 0; s < 4; s++)
        if (d < best[s]) {
          memmove(best + s + 1, best + s, sizeof(double) * (size_t)(3 - s));
          best[s] = d;
          break;
        }
    }
    for (int32_t s = 0; s < 4; s++) {
      int64_t j = ix[4 * i + s];
      if (j < 0 || j >= 4096 || fabs(v[4 * i + s] - best[s]) > 1e-4) return false;
      double d = 0;
      for (int32_t c = 0; c < 3; c++)
        d += ((double)x[3 * i + c] - y[3 * j + c]) * ((double)x[3 * i + c] - y[3 * j + c]);
      if (fabs(d - best[s]) > 1e-4) return false;
    }
  }
  return true;
}

/* The kNN of n rows run as a plan for cpu0 under `limit`, its results and every peak checked:
 * *fresh is the node's allocations not served from its pool, *trips the loop's trip count. */
static void knn_fresh_allocations(loom_context *ctx, loom_mem_manager *m, int32_t host, int32_t n,
                                  int64_t limit, int64_t *fresh, int64_t *trips) {
  char text[1024];
  snprintf(text, sizeof text, knn_lir, n, n);
  loom_graph *g = parse(text), *opt = NULL;
  ASSERT_TRUE(g != NULL);
  loom_runner r = {"cpu0", limit};
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  char note[256];
  ASSERT_OK(loom_graph_optimize_for_runners(g, &r, 1, &o, &opt, NULL, note, sizeof note));
  *fresh = *trips = 0;
  for (int32_t i = 0; i < opt->n_ops; i++)
    if (opt->ops[i].loop) *trips = loom__loop_trips(opt->ops[i].loop);
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split_by_memory(opt, &r, 1, &plan));
  loom_tensor in[2], out[2];
  ASSERT_OK(loom_tensor_init(&in[0], loom_value_type(g, loom_graph_param_at(g, 0))));
  ASSERT_OK(loom_tensor_init(&in[1], loom_value_type(g, loom_graph_param_at(g, 1))));
  float *x = in[0].data, *y = in[1].data;
  for (int32_t i = 0; i < 3 * n; i++) x[i] = (float)((i * 37) % 101) / 101.0f;
  for (int32_t i = 0; i < 3 * 4096; i++) y[i] = (float)((i * 53) % 103) / 103.0f;
  loom_mem_node_stats before, after;
  ASSERT_OK(loom_mem_stats(m, host, &before));
  loom_plan_stats ps = {0};
  ASSERT_OK(loom_plan_run(ctx, plan, in, 2, out, 2, &ps));
  ASSERT_OK(loom_mem_stats(m, host, &after));
  ASSERT_TRUE(knn_ok(x, y, n, &out[0], &out[1]));
  ASSERT_TRUE(ps.peak_bytes <= limit);
  ASSERT_TRUE(after.peak_in_use <= limit);
  ASSERT_TRUE(hmm_within_limits(m));
  ASSERT_EQ(after.live_bytes, 0);
  ASSERT_EQ(after.cached_bytes, 0);
  loom_plan_stats_deinit(&ps);
  loom_plan_destroy(plan);
  for (int32_t i = 0; i < 2; i++) {
    loom_tensor_deinit(&in[i]);
    loom_tensor_deinit(&out[i]);
  }
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
  *fresh = (after.allocations - before.allocations) - (after.pool_hits - before.pool_hits);
}

/* Every piece after the first takes its buffers from the pool, so the allocations the node
 * makes do not grow with the trip count: four times the rows, about the same fresh allocations
 * (a few differ: the last, shorter piece's sizes), fewer than the pieces. Before, half the limit
 * capped the pool and each piece released one of its two large buffers, and every small one,
 * and allocated them again: 83 for 18 pieces, 366 for 71. */
TEST(loop_pieces_reuse_their_buffers) {
  loom_mem_manager *m = NULL;
  int32_t host = -1;
  loom_context *ctx = runtime_context(&m, &host);
  ASSERT_TRUE(ctx != NULL);
  const int64_t limit = 1 * MiB;
  int64_t trips1 = 0, trips4 = 0, fresh1 = 0, fresh4 = 0;
  knn_fresh_allocations(ctx, m, host, 512, limit, &fresh1, &trips1);
  if (loom_test_failed()) return;
  knn_fresh_allocations(ctx, m, host, 2048, limit, &fresh4, &trips4);
  if (loom_test_failed()) return;
  ASSERT_TRUE(trips1 >= 8);
  ASSERT_TRUE(trips4 >= 4 * trips1 - 1);
  if (fresh4 > fresh1 + 4 || fresh4 >= trips4)
    loom_test_fail(__FILE__, __LINE__, "%lld fresh allocations for %lld pieces, %lld for %lld",
                   (long long)fresh1, (long long)trips1, (long long)fresh4, (long long)trips4);
  loom_context_destroy(ctx);
}
