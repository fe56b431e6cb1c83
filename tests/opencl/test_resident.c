/* Resident runs (loom_plan_run_buffers) on OpenCL devices: buffers that stay on the device,
 * chained 100 times with no copies, equal to host-tensor runs on the device and close to the
 * cpu backend's; inputs on another node (host memory, the other device) brought in by the
 * memory manager; inputs in shared virtual memory; a plan over both devices. */
#if LOOM_HAVE_OPENCL
#include <math.h>

#include "gpu_util.h"
#include "loom/memory.h"
#include "loom/plan.h"

enum { N = 4096, CALLS = 100 };

/* One step of a time loop: x' = x * w + y, and the total of x'. */
#define STEP_LIR                                                \
  "graph step(x: f32[4096], y: f32[4096], w: f32[4096]) {\n"    \
  "  a = mul x w\n  b = add a y\n  t = reduce_sum b axes=[0]\n" \
  "  return b, t\n}\n"

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

static loom_mem_manager *memory(void) {
  loom_mem_manager *m = NULL;
  return loom_context_memory(gt_context(), &m) == LOOM_OK ? m : NULL;
}

/* Every node's bytes_in + bytes_out: what the memory manager has copied between nodes. */
static int64_t bytes_copied(void) {
  loom_mem_manager *m = memory();
  int64_t total = 0;
  for (int32_t i = 0; m && i < loom_mem_node_count(m); i++) {
    loom_mem_node_stats st;
    if (loom_mem_stats(m, i, &st) != LOOM_OK) return -1;
    total += st.bytes_in + st.bytes_out;
  }
  return total;
}

/* Allocations a node made that its pool did not serve. */
static int64_t fresh_allocations(int32_t node) {
  loom_mem_node_stats st;
  if (loom_mem_stats(memory(), node, &st) != LOOM_OK) return -1;
  return st.allocations - st.pool_hits;
}

/* A buffer on node holding the host tensor t. */
static loom_buffer *buffer_of(int32_t node, const loom_tensor *t, uint32_t flags) {
  int64_t bytes = 0;
  loom_buffer *b = NULL;
  if (loom_type_bytes(&t->type, &bytes) ||
      loom_buffer_allocate(memory(), bytes, t->type.dtype, node, flags, &b) ||
      loom_buffer_write(b, 0, t->data, bytes)) {
    loom_buffer_free(b);
    return NULL;
  }
  return b;
}

static loom_plan *plan_on(loom_graph *g, const char *device, loom_split_fn cut) {
  loom_runner r = {"", 1 << 20};
  snprintf(r.device, sizeof r.device, "%s", device);
  loom_plan *plan = NULL;
  return loom_plan_split(g, cut, NULL, &r, 1, &plan) == LOOM_OK ? plan : NULL;
}

/* `calls` host-tensor runs of the step plan from in, on whatever the plan says: the last x'
 * into out[0] and the last total into out[1]. */
static loom_status host_chain(const loom_plan *plan, const loom_tensor *in, int32_t calls, loom_tensor *out) {
  loom_tensor ins[3] = {in[0], in[1], in[2]};
  memset(out, 0, 2 * sizeof *out);
  for (int32_t k = 0; k < calls; k++) {
    loom_tensor o[2];
    loom_status s = loom_plan_run(gt_context(), plan, ins, 3, o, 2, NULL);
    if (s) return s;
    loom_tensor_deinit(&out[0]);
    loom_tensor_deinit(&out[1]);
    out[0] = o[0];
    out[1] = o[1];
    ins[0] = out[0];
  }
  return LOOM_OK;
}

/* Reads a buffer holding f32 values into a new host tensor of `type`. */
static loom_status read_tensor(loom_buffer *b, const loom_type *type, loom_tensor *out) {
  int64_t bytes = 0;
  loom_status s = loom_tensor_init(out, type);
  if (!s) s = loom_type_bytes(type, &bytes);
  return s ? s : loom_buffer_read(b, 0, out->data, bytes);
}

TEST(resident_runs_chained_100_times_on_each_device_copy_nothing) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  if (nd == 0) return;
  loom_graph *g = gt_parse(STEP_LIR);
  ASSERT_TRUE(g != NULL);
  loom_tensor in[3];
  ASSERT_OK(gt_inputs(g, 21, in));
  /* w in [0.98, 1]: the chain neither blows up nor settles within CALLS calls. */
  for (int32_t i = 0; i < N; i++) ((float *)in[2].data)[i] = 0.98f + 0.01f * fabsf(((float *)in[2].data)[i]);
  loom_plan *cpu_plan = plan_on(g, "cpu0", never_cut);
  ASSERT_TRUE(cpu_plan != NULL);
  loom_tensor ref[2];
  ASSERT_OK(host_chain(cpu_plan, in, CALLS, ref));
  for (int32_t d = 0; d < nd; d++) {
    loom_plan *plan = plan_on(g, devs[d]->id, never_cut);
    ASSERT_TRUE(plan != NULL);
    loom_tensor host[2];
    ASSERT_OK(host_chain(plan, in, CALLS, host));
    /* Device-local buffers: what the kernels read in place. */
    loom_buffer *x = buffer_of(devs[d]->node, &in[0], LOOM_MEM_DEVICE_LOCAL);
    loom_buffer *y = buffer_of(devs[d]->node, &in[1], LOOM_MEM_DEVICE_LOCAL);
    loom_buffer *w = buffer_of(devs[d]->node, &in[2], LOOM_MEM_DEVICE_LOCAL), *out[2] = {NULL, NULL};
    ASSERT_TRUE(x && y && w);
    int64_t copied = bytes_copied(), fresh = -1;
    for (int32_t k = 0; k < CALLS; k++) {
      loom_buffer *args[3] = {x, y, w};
      ASSERT_OK(loom_plan_run_buffers(gt_context(), plan, args, 3, out, 2, NULL));
      loom_buffer_free(x);
      x = out[0];
      if (k < CALLS - 1) loom_buffer_free(out[1]);
      /* The pool serves every call once one call's buffers have come back to it. */
      if (k == 2) fresh = fresh_allocations(devs[d]->node);
    }
    ASSERT_EQ(bytes_copied(), copied); /* not one byte in or out, first call included */
    ASSERT_EQ(fresh_allocations(devs[d]->node), fresh);
    loom_buffer_info info;
    ASSERT_OK(loom_buffer_get_info(x, &info));
    ASSERT_EQ(info.node, devs[d]->node);
    loom_tensor got[2];
    ASSERT_OK(read_tensor(x, &host[0].type, &got[0]));
    ASSERT_OK(read_tensor(out[1], &host[1].type, &got[1]));
    char msg[512];
    for (int32_t i = 0; i < 2; i++) {
      /* The same kernels as the host runs on the device: the same bits. */
      ASSERT_TRUE(gt_close(&host[i], &got[i], 0, 0, msg, sizeof msg));
      ASSERT_TRUE(gt_close(&ref[i], &got[i], 1e-4, 1e-4, msg, sizeof msg));
    }
    gt_tensors_free(got, 2);
    gt_tensors_free(host, 2);
    loom_buffer_free(x);
    loom_buffer_free(out[1]);
    loom_buffer_free(y);
    loom_buffer_free(w);
    loom_plan_destroy(plan);
  }
  ASSERT_OK(loom_mem_trim(memory(), -1)); /* the pools the resident runs kept */
  gt_tensors_free(ref, 2);
  gt_tensors_free(in, 3);
  loom_plan_destroy(cpu_plan);
  loom_graph_destroy(g);
}

/* Inputs elsewhere: y in host memory, w on the other device (or in host memory with one
 * device), x in shared virtual memory on the device (allocated without LOOM_MEM_DEVICE_LOCAL,
 * which PoCL offers). The memory manager brings them in; after repeated use (its adaptive
 * migration) y and w have moved to the device and the calls copy nothing more. */
TEST(resident_inputs_on_other_nodes_are_brought_in) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  if (nd == 0) return;
  loom_mem_manager *m = memory();
  int32_t host;
  ASSERT_OK(loom_mem_node_find(m, "cpu0", &host));
  loom_graph *g = gt_parse(STEP_LIR);
  ASSERT_TRUE(g != NULL);
  loom_tensor in[3];
  ASSERT_OK(gt_inputs(g, 22, in));
  loom_plan *cpu_plan = plan_on(g, "cpu0", never_cut), *plan = plan_on(g, devs[0]->id, never_cut);
  ASSERT_TRUE(cpu_plan && plan);
  loom_tensor ref[2];
  ASSERT_OK(host_chain(cpu_plan, in, 1, ref));
  loom_buffer *x = buffer_of(devs[0]->node, &in[0], 0);
  loom_buffer *y = buffer_of(host, &in[1], LOOM_MEM_DEVICE_LOCAL);
  loom_buffer *w = buffer_of(nd > 1 ? devs[1]->node : host, &in[2], LOOM_MEM_DEVICE_LOCAL);
  ASSERT_TRUE(x && y && w);
  int64_t before = 0, moved[6];
  for (int32_t k = 0; k < 6; k++) {
    loom_buffer *args[3] = {x, y, w}, *out[2];
    before = bytes_copied();
    ASSERT_OK(loom_plan_run_buffers(gt_context(), plan, args, 3, out, 2, NULL));
    moved[k] = bytes_copied() - before;
    loom_tensor got[2];
    ASSERT_OK(read_tensor(out[0], &ref[0].type, &got[0]));
    ASSERT_OK(read_tensor(out[1], &ref[1].type, &got[1]));
    char msg[512];
    for (int32_t i = 0; i < 2; i++) ASSERT_TRUE(gt_close(&ref[i], &got[i], 1e-4, 1e-4, msg, sizeof msg));
    gt_tensors_free(got, 2);
    loom_buffer_free(out[0]);
    loom_buffer_free(out[1]);
  }
  ASSERT_TRUE(moved[0] > 0); /* y and w came in */
  loom_buffer_info info;
  ASSERT_OK(loom_buffer_get_info(y, &info));
  ASSERT_TRUE(info.migrations >= 1);
  loom_buffer_node_info ni;
  ASSERT_OK(loom_buffer_node_info_get(y, devs[0]->node, &ni));
  ASSERT_TRUE(ni.state != LOOM_MEM_INVALID);
  /* Reading the outputs back counts too: what each call moves settles at that. */
  ASSERT_EQ(moved[5], moved[4]);
  ASSERT_TRUE(moved[5] < moved[0]);
  loom_buffer_free(x);
  loom_buffer_free(y);
  loom_buffer_free(w);
  ASSERT_OK(loom_mem_trim(m, -1));
  gt_tensors_free(ref, 2);
  gt_tensors_free(in, 3);
  loom_plan_destroy(cpu_plan);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* A graph with a fill (its scalar written into the device on each call, so the run waits for
 * the device before it returns) chained on the device: equal to the host-tensor runs. */
TEST(resident_runs_of_a_graph_with_a_fill) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  if (nd == 0) return;
  loom_graph *g = gt_parse(
      "graph half(x: f32[4096], y: f32[4096], w: f32[4096]) {\n"
      "  h = fill value=0.5 : f32[4096]\n  a = mul x h\n  c = mul a w\n  b = add c y\n"
      "  t = reduce_max b axes=[0]\n  return b, t\n}\n");
  ASSERT_TRUE(g != NULL);
  loom_tensor in[3], host[2];
  ASSERT_OK(gt_inputs(g, 24, in));
  loom_plan *plan = plan_on(g, devs[0]->id, never_cut);
  ASSERT_TRUE(plan != NULL);
  ASSERT_OK(host_chain(plan, in, 10, host));
  loom_buffer *x = buffer_of(devs[0]->node, &in[0], LOOM_MEM_DEVICE_LOCAL);
  loom_buffer *y = buffer_of(devs[0]->node, &in[1], LOOM_MEM_DEVICE_LOCAL);
  loom_buffer *w = buffer_of(devs[0]->node, &in[2], LOOM_MEM_DEVICE_LOCAL), *out[2] = {NULL, NULL};
  ASSERT_TRUE(x && y && w);
  for (int32_t k = 0; k < 10; k++) {
    loom_buffer *args[3] = {x, y, w};
    loom_buffer_free(out[1]);
    ASSERT_OK(loom_plan_run_buffers(gt_context(), plan, args, 3, out, 2, NULL));
    loom_buffer_free(x);
    x = out[0];
  }
  char msg[512];
  loom_tensor got[2];
  ASSERT_OK(read_tensor(x, &host[0].type, &got[0]));
  ASSERT_OK(read_tensor(out[1], &host[1].type, &got[1]));
  for (int32_t i = 0; i < 2; i++) ASSERT_TRUE(gt_close(&host[i], &got[i], 0, 0, msg, sizeof msg));
  gt_tensors_free(got, 2);
  loom_buffer_free(x);
  loom_buffer_free(out[1]);
  loom_buffer_free(y);
  loom_buffer_free(w);
  ASSERT_OK(loom_mem_trim(memory(), -1));
  gt_tensors_free(host, 2);
  gt_tensors_free(in, 3);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* Two stages, ocl0 then ocl1 (ocl0 twice with one device): the outputs are on the last
 * stage's device (t) and on the first's (b, returned and read by the second), equal to the
 * host-tensor run. */
TEST(resident_plan_over_two_devices) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  if (nd == 0) return;
  loom_graph *g = gt_parse(STEP_LIR);
  ASSERT_TRUE(g != NULL);
  loom_runner r[2] = {{"", 1 << 20}, {"", 1 << 20}};
  snprintf(r[0].device, sizeof r[0].device, "%s", devs[0]->id);
  snprintf(r[1].device, sizeof r[1].device, "%s", devs[nd > 1 ? 1 : 0]->id);
  loom_plan *plan = NULL;
  ASSERT_OK(loom_plan_split(g, cut_at_2, NULL, r, 2, &plan));
  ASSERT_EQ(loom_plan_stage_count(plan), 2);
  loom_tensor in[3], host[2];
  ASSERT_OK(gt_inputs(g, 23, in));
  ASSERT_OK(host_chain(plan, in, 1, host));
  loom_buffer *args[3], *out[2];
  for (int32_t p = 0; p < 3; p++)
    ASSERT_TRUE((args[p] = buffer_of(devs[0]->node, &in[p], LOOM_MEM_DEVICE_LOCAL)));
  loom_plan_stats stats = {0};
  ASSERT_OK(loom_plan_run_buffers(gt_context(), plan, args, 3, out, 2, &stats));
  for (int32_t s = 0; s < 2; s++) ASSERT_TRUE(stats.stages[s].peak_bytes <= stats.stages[s].limit_bytes);
  loom_plan_stats_deinit(&stats);
  loom_buffer_info info;
  ASSERT_OK(loom_buffer_get_info(out[0], &info));
  ASSERT_EQ(info.node, devs[0]->node);
  ASSERT_OK(loom_buffer_get_info(out[1], &info));
  ASSERT_EQ(info.node, devs[nd > 1 ? 1 : 0]->node);
  char msg[512];
  for (int32_t i = 0; i < 2; i++) {
    loom_tensor got;
    ASSERT_OK(read_tensor(out[i], &host[i].type, &got));
    ASSERT_TRUE(gt_close(&host[i], &got, 0, 0, msg, sizeof msg));
    gt_tensors_free(&got, 1);
    loom_buffer_free(out[i]);
  }
  for (int32_t p = 0; p < 3; p++) loom_buffer_free(args[p]);
  ASSERT_OK(loom_mem_trim(memory(), -1));
  gt_tensors_free(host, 2);
  gt_tensors_free(in, 3);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}
#endif
