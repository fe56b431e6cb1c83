/* Resident runs (loom_plan_run_buffers) on cpu0: buffers of the context's memory manager in
 * and out, chained with no copies, against host-tensor runs and an independent reference;
 * the type checks of the input buffers; returned parameters and views; allocation failures.
 * The same on OpenCL devices: tests/opencl/test_resident.c. */
#include <math.h>
#include <stdlib.h>

#include "loom/memory.h"
#include "loom/testing.h"
#include "split_util.h"

enum { N = 1000, CALLS = 100 };

/* One step of a time loop: x' = x * w + y, and the total of x'. */
static const char *step_lir =
    "graph step(x: f32[1000], y: f32[1000], w: f32[1000]) {\n"
    "  a = mul x w\n"
    "  b = add a y\n"
    "  t = reduce_sum b axes=[0]\n"
    "  return b, t\n"
    "}\n";

static bool never_cut(const loom_graph *g, int32_t op, void *acc) {
  (void)g;
  (void)op;
  (void)acc;
  return false;
}

static bool cut_at_2(const loom_graph *g, int32_t op, void *acc) {
  (void)g;
  (void)acc;
  return op == 2;
}

static loom_context *cpu_context(void) {
  loom_context_options o;
  loom_context_options_init(&o);
  o.devices = "cpu0";
  loom_context *ctx = NULL;
  return loom_context_create(&o, &ctx) == LOOM_OK ? ctx : NULL;
}

/* Every node's bytes_in + bytes_out: what the memory manager has copied between nodes. */
static int64_t bytes_copied(loom_mem_manager *m) {
  int64_t total = 0;
  for (int32_t i = 0; i < loom_mem_node_count(m); i++) {
    loom_mem_node_stats st;
    if (loom_mem_stats(m, i, &st) != LOOM_OK) return -1;
    total += st.bytes_in + st.bytes_out;
  }
  return total;
}

/* Allocations a node made that the pool did not serve. */
static int64_t fresh_allocations(loom_mem_manager *m, int32_t node) {
  loom_mem_node_stats st;
  if (loom_mem_stats(m, node, &st) != LOOM_OK) return -1;
  return st.allocations - st.pool_hits;
}

/* A buffer on node holding the host tensor t (typed as t when `typed`). */
static loom_buffer *buffer_of(loom_mem_manager *m, int32_t node, const loom_tensor *t, uint32_t flags,
                              bool typed) {
  int64_t bytes = 0;
  loom_buffer *b = NULL;
  if (loom_type_bytes(&t->type, &bytes) || loom_buffer_allocate(m, bytes, t->type.dtype, node, flags, &b) ||
      loom_buffer_write(b, 0, t->data, bytes) || (typed && loom_buffer_set_type(b, &t->type))) {
    loom_buffer_free(b);
    return NULL;
  }
  return b;
}

/* The chain in double precision from the same inputs: x_k = x_{k-1} w + y, k = 1..calls. */
static void reference_chain(const loom_tensor *in, int32_t calls, double *x, double *total) {
  const float *x0 = in[0].data, *y = in[1].data, *w = in[2].data;
  *total = 0;
  for (int32_t i = 0; i < N; i++) {
    double v = x0[i];
    for (int32_t k = 0; k < calls; k++) v = v * w[i] + y[i];
    x[i] = v;
    *total += v;
  }
}

TEST(resident_runs_chained_100_times_copy_nothing) {
  loom_graph *g = su_parse(step_lir);
  ASSERT_TRUE(g != NULL);
  loom_runner r = {"cpu0", 1 << 20};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split(g, never_cut, NULL, &r, 1, &plan));
  loom_context *ctx = cpu_context();
  ASSERT_TRUE(ctx != NULL);
  loom_mem_manager *m = NULL;
  int32_t node;
  ASSERT_OK(loom_context_memory(ctx, &m));
  ASSERT_OK(loom_mem_node_find(m, "cpu0", &node));
  loom_tensor *in = NULL;
  ASSERT_OK(su_inputs(g, 11, &in));
  /* w in [0.98, 1]: the chain neither blows up nor settles within CALLS calls. */
  for (int32_t i = 0; i < N; i++) ((float *)in[2].data)[i] = 0.98f + 0.02f * fabsf(((float *)in[2].data)[i]);

  /* Host runs: each call's b is the next call's x. */
  loom_tensor host[2];
  memset(host, 0, sizeof host);
  loom_tensor ins[3] = {in[0], in[1], in[2]};
  for (int32_t k = 0; k < CALLS; k++) {
    loom_tensor out[2];
    ASSERT_OK(loom_plan_run(ctx, plan, ins, 3, out, 2, NULL));
    loom_tensor_deinit(&host[0]);
    loom_tensor_deinit(&host[1]);
    host[0] = out[0];
    host[1] = out[1];
    ins[0] = host[0];
  }

  /* Resident runs from the same inputs: untyped x (checked by dtype and bytes), typed y, w. */
  loom_buffer *bx = buffer_of(m, node, &in[0], 0, false), *by = buffer_of(m, node, &in[1], 0, true);
  loom_buffer *bw = buffer_of(m, node, &in[2], 0, true), *out[2] = {NULL, NULL};
  ASSERT_TRUE(bx && by && bw);
  int64_t copied = -1, fresh = -1;
  loom_plan_stats stats = {0};
  for (int32_t k = 0; k < CALLS; k++) {
    loom_buffer *args[3] = {bx, by, bw};
    ASSERT_OK(loom_plan_run_buffers(ctx, plan, args, 3, out, 2, &stats));
    ASSERT_EQ(stats.n_stages, 1);
    ASSERT_TRUE(stats.stages[0].peak_bytes <= r.limit);
    loom_plan_stats_deinit(&stats);
    loom_buffer_free(bx);
    loom_buffer_free(out[1]);
    bx = out[0];
    if (k == 0) copied = bytes_copied(m);
    /* The pool serves every call once the caller's buffers of one call are back in it. */
    if (k == 2) fresh = fresh_allocations(m, node);
  }
  ASSERT_EQ(bytes_copied(m), copied);
  ASSERT_EQ(fresh_allocations(m, node), fresh);

  /* bx is the last call's x' (on cpu0's node, typed); one more call gives its total. */
  loom_type t;
  bool typed = false;
  loom_buffer_info info;
  ASSERT_OK(loom_buffer_get_type(bx, &t, &typed));
  ASSERT_TRUE(typed && loom_type_equal(&t, &host[0].type));
  ASSERT_OK(loom_buffer_get_info(bx, &info));
  ASSERT_EQ(info.node, node);
  ASSERT_EQ(info.dtype, LOOM_F32);
  float got[N], host_total = 0, got_total = 0;
  ASSERT_OK(loom_buffer_read(bx, 0, got, sizeof got));
  ASSERT_EQ(memcmp(got, host[0].data, sizeof got), 0); /* the same kernels: the same bits */

  /* Against the reference: the chain's x after CALLS steps, and the total of the last step. */
  double ref[N], ref_total;
  reference_chain(in, CALLS, ref, &ref_total);
  double worst = 0, mag = 0;
  for (int32_t i = 0; i < N; i++) {
    worst = fmax(worst, fabs(got[i] - ref[i]) / (1e-4 + 1e-4 * fabs(ref[i])));
    mag += fabs(ref[i]);
  }
  ASSERT_TRUE(worst <= 1);
  memcpy(&host_total, host[1].data, sizeof host_total);
  loom_buffer *last[2] = {NULL, NULL};
  loom_tensor in_last[3] = {host[0], in[1], in[2]}, out_last[2];
  ASSERT_OK(loom_plan_run(ctx, plan, in_last, 3, out_last, 2, NULL)); /* host: step CALLS + 1 */
  loom_buffer *args[3] = {bx, by, bw};
  ASSERT_OK(loom_plan_run_buffers(ctx, plan, args, 3, last, 2, NULL));
  ASSERT_OK(loom_buffer_read(last[1], 0, &got_total, sizeof got_total));
  ASSERT_EQ(memcmp(&got_total, out_last[1].data, sizeof got_total), 0);
  reference_chain(in, CALLS + 1, ref, &ref_total);
  ASSERT_TRUE(fabs(got_total - ref_total) <= 1e-4 * mag + 1e-3);
  loom_tensor_deinit(&out_last[0]);
  loom_tensor_deinit(&out_last[1]);
  loom_buffer_free(last[0]);
  loom_buffer_free(last[1]);

  loom_buffer_free(bx);
  loom_buffer_free(by);
  loom_buffer_free(bw);
  loom_tensor_deinit(&host[0]);
  loom_tensor_deinit(&host[1]);
  su_tensors_free(in, 3);
  loom_context_destroy(ctx);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

TEST(resident_run_checks_the_input_buffers) {
  loom_graph *g = su_parse(step_lir);
  ASSERT_TRUE(g != NULL);
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split(g, never_cut, NULL, NULL, 0, &plan));
  loom_context *ctx = cpu_context(), *other = cpu_context();
  ASSERT_TRUE(ctx && other);
  loom_mem_manager *m = NULL, *mo = NULL;
  ASSERT_OK(loom_context_memory(ctx, &m));
  ASSERT_OK(loom_context_memory(other, &mo));
  loom_buffer *x = NULL, *y = NULL, *w = NULL, *bad = NULL, *out[2] = {NULL, NULL};
  ASSERT_OK(loom_buffer_allocate(m, 4 * N, LOOM_F32, 0, 0, &x));
  ASSERT_OK(loom_buffer_allocate(m, 4 * N, LOOM_F32, 0, 0, &y));
  ASSERT_OK(loom_buffer_allocate(m, 4 * N, LOOM_F32, 0, 0, &w));
  loom_buffer *args[3] = {x, y, w};

  ASSERT_STATUS(loom_plan_run_buffers(NULL, plan, args, 3, out, 2, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_plan_run_buffers(ctx, plan, NULL, 3, out, 2, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_plan_run_buffers(ctx, plan, args, 2, out, 2, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "graph 'step' takes 3 inputs, got 2");
  ASSERT_STATUS(loom_plan_run_buffers(ctx, plan, args, 3, out, 1, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "returns 2 values, the caller has room for 1");

  /* A typed buffer of another shape (the same bytes). */
  loom_type t;
  int64_t dims[2] = {10, 100};
  ASSERT_OK(loom_type_make(LOOM_F32, 2, dims, &t));
  ASSERT_OK(loom_buffer_set_type(y, &t));
  ASSERT_STATUS(loom_plan_run_buffers(ctx, plan, args, 3, out, 2, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STREQ(loom_last_error(), "input 2 (y): its buffer is f32[10,100], the graph takes f32[1000]");
  ASSERT_TRUE(out[0] == NULL && out[1] == NULL);
  /* Typed back as a vector it fits. */
  dims[0] = N;
  ASSERT_OK(loom_type_make(LOOM_F32, 1, dims, &t));
  ASSERT_OK(loom_buffer_set_type(y, &t));
  bool typed = false;
  loom_type got;
  ASSERT_OK(loom_buffer_get_type(x, &got, &typed));
  ASSERT_TRUE(!typed && loom_type_equal(&got, &t)); /* untyped: the vector of its dtype */

  /* An untyped buffer of another dtype, and one of other bytes. */
  ASSERT_OK(loom_buffer_allocate(m, 4 * N, LOOM_I32, 0, 0, &bad));
  args[2] = bad;
  ASSERT_STATUS(loom_plan_run_buffers(ctx, plan, args, 3, out, 2, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STREQ(
      loom_last_error(),
      "input 3 (w): its buffer (no type set) holds 4000 bytes of i32, the graph takes f32[1000] (4000 "
      "bytes)");
  loom_buffer_free(bad);
  ASSERT_OK(loom_buffer_allocate(m, 4 * (N - 1), LOOM_F32, 0, 0, &bad));
  args[2] = bad;
  ASSERT_STATUS(loom_plan_run_buffers(ctx, plan, args, 3, out, 2, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "input 3 (w): its buffer (no type set) holds 3996 bytes of f32");
  loom_buffer_free(bad);

  /* NULL, and a buffer of another context's manager. */
  args[2] = NULL;
  ASSERT_STATUS(loom_plan_run_buffers(ctx, plan, args, 3, out, 2, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STREQ(loom_last_error(), "input 3 (w): buffer is NULL");
  ASSERT_OK(loom_buffer_allocate(mo, 4 * N, LOOM_F32, 0, 0, &bad));
  args[2] = bad;
  ASSERT_STATUS(loom_plan_run_buffers(ctx, plan, args, 3, out, 2, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "input 3 (w): the buffer is not of the context's memory manager");
  loom_buffer_free(bad);

  /* loom_buffer_set_type's own checks. */
  dims[0] = N + 1;
  ASSERT_OK(loom_type_make(LOOM_F32, 1, dims, &t));
  ASSERT_STATUS(loom_buffer_set_type(w, &t), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "loom_buffer_set_type: f32[1001] takes 4004 bytes, buffer ");
  ASSERT_CONTAINS(loom_last_error(), " holds 4000");
  t.rank = -1;
  ASSERT_STATUS(loom_buffer_set_type(w, &t), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_buffer_set_type(NULL, &t), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_buffer_get_type(w, NULL, NULL), LOOM_ERR_INVALID_ARGUMENT);

  loom_buffer_free(x);
  loom_buffer_free(y);
  loom_buffer_free(w);
  loom_context_destroy(other);
  loom_context_destroy(ctx);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* Two stages, a parameter returned as is and a value returned twice: every output is a buffer
 * of its own, equal to the host run's. */
TEST(resident_run_of_two_stages_with_returned_inputs) {
  loom_graph *g = su_parse(
      "graph two(x: f32[64,64], y: f32[64,64]) {\n"
      "  a = dot x y\n"
      "  b = exp a\n"
      "  c = add b x\n"
      "  d = dot c y\n"
      "  return d, x, c, d\n"
      "}\n");
  ASSERT_TRUE(g != NULL);
  loom_runner r[2] = {{"cpu0", 100 << 10}, {"cpu0", 90 << 10}};
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split(g, cut_at_2, NULL, r, 2, &plan));
  ASSERT_EQ(loom_plan_stage_count(plan), 2);
  loom_context *ctx = cpu_context();
  ASSERT_TRUE(ctx != NULL);
  loom_mem_manager *m = NULL;
  int32_t node;
  ASSERT_OK(loom_context_memory(ctx, &m));
  ASSERT_OK(loom_mem_node_find(m, "cpu0", &node));
  loom_tensor *in = NULL, host[4];
  ASSERT_OK(su_inputs(g, 3, &in));
  ASSERT_OK(loom_plan_run(ctx, plan, in, 2, host, 4, NULL));
  loom_buffer *args[2] = {buffer_of(m, node, &in[0], 0, true), buffer_of(m, node, &in[1], 0, true)};
  ASSERT_TRUE(args[0] && args[1]);
  loom_buffer *out[4];
  loom_plan_stats stats = {0};
  ASSERT_OK(loom_plan_run_buffers(ctx, plan, args, 2, out, 4, &stats));
  for (int32_t s = 0; s < 2; s++) ASSERT_TRUE(stats.stages[s].peak_bytes <= r[s].limit);
  loom_plan_stats_deinit(&stats);
  for (int32_t i = 0; i < 4; i++) {
    loom_type t;
    bool typed;
    ASSERT_OK(loom_buffer_get_type(out[i], &t, &typed));
    ASSERT_TRUE(typed && loom_type_equal(&t, &host[i].type));
    float got[64 * 64];
    ASSERT_OK(loom_buffer_read(out[i], 0, got, sizeof got));
    ASSERT_EQ(memcmp(got, host[i].data, sizeof got), 0);
    for (int32_t j = 0; j < i; j++) ASSERT_TRUE(out[i] != out[j]);
  }
  ASSERT_TRUE(out[1] != args[0]); /* x returned: a copy the caller owns */
  for (int32_t i = 0; i < 4; i++) loom_buffer_free(out[i]);
  loom_buffer_free(args[0]);
  loom_buffer_free(args[1]);
  su_tensors_free(in, 2);
  for (int32_t i = 0; i < 4; i++) loom_tensor_deinit(&host[i]);
  loom_context_destroy(ctx);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* Every allocation failure in a resident run is reported, leaves no output and frees what the
 * run took (the pool the run keeps is trimmed between runs, so it does not count as a leak). */
TEST(resident_run_allocation_failures) {
  loom_graph *g = su_parse(step_lir);
  ASSERT_TRUE(g != NULL);
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split(g, cut_at_2, NULL, NULL, 0, &plan));
  loom_context *ctx = cpu_context();
  ASSERT_TRUE(ctx != NULL);
  loom_mem_manager *m = NULL;
  int32_t node;
  ASSERT_OK(loom_context_memory(ctx, &m));
  ASSERT_OK(loom_mem_node_find(m, "cpu0", &node));
  loom_tensor *in = NULL;
  ASSERT_OK(su_inputs(g, 5, &in));
  loom_buffer *args[3];
  for (int32_t p = 0; p < 3; p++) ASSERT_TRUE((args[p] = buffer_of(m, node, &in[p], 0, false)) != NULL);
  loom_test_sweep sw;
  SWEEP_ALLOCATIONS(&sw, 0, 100000) {
    loom_buffer *out[2] = {NULL, NULL};
    loom_plan_stats stats = {0};
    loom_status s = SWEEP_RUN(&sw, loom_plan_run_buffers(ctx, plan, args, 3, out, 2, &stats));
    loom_plan_stats_deinit(&stats);
    if (s) ASSERT_TRUE(out[0] == NULL && out[1] == NULL);
    loom_buffer_free(out[0]);
    loom_buffer_free(out[1]);
    loom_mem_trim(m, -1);
  }
  for (int32_t p = 0; p < 3; p++) loom_buffer_free(args[p]);
  su_tensors_free(in, 3);
  loom_context_destroy(ctx);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

static bool always_cut(const loom_graph *g, int32_t op, void *acc) {
  (void)g;
  (void)op;
  (void)acc;
  return true;
}

/* A plan of no stages (its input returned twice), and a returned view (a transpose): each
 * output a buffer of its own holding what the host run returns. */
TEST(resident_run_returns_inputs_and_views) {
  static const char *const texts[2] = {
      "graph p(x: f32[3,4]) {\n  return x, x\n}\n",
      "graph t(x: f32[3,4]) {\n  t = transpose x perm=[1,0]\n  e = exp x\n  return t, e\n}\n"};
  loom_context *ctx = cpu_context();
  ASSERT_TRUE(ctx != NULL);
  loom_mem_manager *m = NULL;
  int32_t node;
  ASSERT_OK(loom_context_memory(ctx, &m));
  ASSERT_OK(loom_mem_node_find(m, "cpu0", &node));
  for (int32_t k = 0; k < 2; k++) {
    loom_graph *g = su_parse(texts[k]);
    ASSERT_TRUE(g != NULL);
    loom_runner r = {"cpu0", 1024};
    loom_plan *plan = NULL;
    ASSERT_OK(loom_plan_split(g, always_cut, NULL, &r, 1, &plan));
    ASSERT_EQ(loom_plan_stage_count(plan), 2 * k);
    loom_tensor *in = NULL, host[2];
    ASSERT_OK(su_inputs(g, 4, &in));
    ASSERT_OK(loom_plan_run(ctx, plan, in, 1, host, 2, NULL));
    loom_buffer *x = buffer_of(m, node, &in[0], 0, true), *out[2];
    ASSERT_TRUE(x != NULL);
    ASSERT_OK(loom_plan_run_buffers(ctx, plan, &x, 1, out, 2, NULL));
    ASSERT_TRUE(out[0] != x && out[1] != x && out[0] != out[1]);
    for (int32_t i = 0; i < 2; i++) {
      loom_type t;
      bool typed;
      float got[12];
      ASSERT_OK(loom_buffer_get_type(out[i], &t, &typed));
      ASSERT_TRUE(typed && loom_type_equal(&t, &host[i].type));
      ASSERT_OK(loom_buffer_read(out[i], 0, got, sizeof got));
      ASSERT_EQ(memcmp(got, host[i].data, sizeof got), 0);
      loom_buffer_free(out[i]);
      loom_tensor_deinit(&host[i]);
    }
    loom_buffer_free(x);
    su_tensors_free(in, 1);
    loom_plan_destroy(plan);
    loom_graph_destroy(g);
  }
  loom_context_destroy(ctx);
}
