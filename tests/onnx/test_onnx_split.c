/* Issue 31's third point at a test's size: an encoder whose weights no one runner can hold,
 * split by memory over three runners of different sizes. tests/onnx/encoder.py (python3-onnx,
 * no PyTorch) writes the model (2 layers, hidden 64: 400,016 bytes of initializers), its input
 * and NumPy's output. The plan must use all three runners, each stage's measured peak must be
 * at most its runner's limit and equal to its estimate, and the result must equal the whole
 * run on cpu0 and NumPy's. LOOM_ONNX_ENCODER names the script (tests/onnx.cmake); without it,
 * python3-onnx, or PoCL's two devices ocl0 and ocl1, the test is skipped. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* Runs the script into dir; the bytes of initializers it reports, or -1. */
static long long write_encoder(const char *script, const char *dir) {
  char cmd[8192], line[512];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s' && /usr/bin/python3 '%s' '%s' 2 64 16 4", dir, script, dir);
  FILE *p = popen(cmd, "r");
  long long bytes = -1;
  while (p && fgets(line, sizeof line, p)) {
    const char *at = strrchr(line, ':');
    if (at && strstr(line, "bytes of initializers")) bytes = atoll(at + 1);
  }
  if (p && pclose(p) != 0) bytes = -1;
  return bytes;
}

static float max_diff(const loom_tensor *a, const loom_tensor *b) {
  int64_t n = 0;
  loom_type_elements(&a->type, &n);
  float d = 0;
  for (int64_t i = 0; i < n; i++)
    d = fmaxf(d, fabsf(((const float *)a->data)[i] - ((const float *)b->data)[i]));
  return d;
}

/* Plans g over the three runners (the rewrites first, as loom-run does). */
static void plan_over(const loom_graph *g, const loom_runner *r, loom_graph **out_og, loom_plan **out_plan) {
  char note[512];
  ASSERT_OK(loom_graph_optimize_for_runners(g, r, 3, NULL, out_og, NULL, note, sizeof note));
  ASSERT_OK(loom_plan_split_by_memory(*out_og, r, 3, out_plan));
  loom_plan_print(*out_plan, stdout);
}

/* Whether every one of the three runners got a stage. */
static bool all_runners_used(const loom_plan *plan) {
  bool used[3] = {false, false, false};
  for (int32_t i = 0; i < loom_plan_stage_count(plan); i++) {
    loom_stage_info info;
    if (loom_plan_stage(plan, i, &info) == LOOM_OK && info.runner >= 0 && info.runner < 3)
      used[info.runner] = true;
  }
  return used[0] && used[1] && used[2];
}

/* Whether every value a stage passes on carries its ONNX name (the reader names each node's
 * outputs): `layers_N_...` or the output `y`, so the plan says which layers went where. */
static bool stage_outputs_named(const loom_plan *plan) {
  const loom_graph *g = loom_plan_graph(plan);
  for (int32_t i = 0; i < loom_plan_stage_count(plan); i++) {
    loom_stage_info info;
    if (loom_plan_stage(plan, i, &info)) return false;
    for (int32_t k = 0; k < info.n_outputs; k++) {
      const char *name = loom_value_name(g, (loom_value){info.outputs[k]});
      if (!name || (strncmp(name, "layers_", 7) && strcmp(name, "y"))) return false;
    }
  }
  return true;
}

TEST(encoder_split_over_runners) {
  const char *script = getenv("LOOM_ONNX_ENCODER");
  char dir[512], path[1024];
  snprintf(dir, sizeof dir, "%s/onnx-encoder-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
           (int)getpid());
  if (!script || system("/usr/bin/python3 -c 'import onnx' 2> /dev/null") != 0) {
    loom_test_skip("needs LOOM_ONNX_ENCODER and /usr/bin/python3 with python3-onnx");
    return;
  }
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  int32_t index;
  if (loom_context_find_device(ctx, "ocl0", &index) || loom_context_find_device(ctx, "ocl1", &index)) {
    loom_context_destroy(ctx);
    loom_test_skip("needs two OpenCL devices (POCL_DEVICES='pthread pthread')");
    return;
  }
  long long weights = write_encoder(script, dir);
  ASSERT_TRUE(weights > 0);
  loom_runner r[3] = {{"cpu0", 192 << 10}, {"ocl0", 160 << 10}, {"ocl1", 128 << 10}};
  for (int i = 0; i < 3; i++) ASSERT_TRUE(r[i].limit < weights); /* larger than any one runner */
  loom_graph *g = NULL, *og = NULL;
  loom_tensor x, ref, whole, split;
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  ASSERT_OK(loom_graph_from_onnx(path, NULL, &g));
  snprintf(path, sizeof path, "%s/x.npy", dir);
  ASSERT_OK(loom_tensor_load_npy(path, &x));
  snprintf(path, sizeof path, "%s/ref.npy", dir);
  ASSERT_OK(loom_tensor_load_npy(path, &ref));
  ASSERT_OK(loom_graph_run_on_device(ctx, "cpu0", g, &x, 1, &whole, 1, NULL));
  loom_plan *plan = NULL;
  plan_over(g, r, &og, &plan);
  ASSERT_TRUE(plan != NULL);
  ASSERT_TRUE(all_runners_used(plan));
  ASSERT_TRUE(stage_outputs_named(plan));
  loom_run_stats st;
  memset(&st, 0, sizeof st);
  ASSERT_OK(loom_run(ctx, plan, NULL, &x, 1, &split, 1, &st));
  for (int32_t i = 0; i < st.n_stages; i++) {
    const loom_stage_stats *s = &st.stages[i];
    printf("stage %d: limit %lld, estimated %lld, measured %lld\n", (int)i, (long long)s->limit_bytes,
           (long long)s->estimated_peak_bytes, (long long)s->peak_bytes);
    ASSERT_TRUE(s->peak_bytes <= s->limit_bytes);
    ASSERT_EQ(s->peak_bytes, s->estimated_peak_bytes);
  }
  printf("split vs whole %g, vs NumPy %g\n", max_diff(&split, &whole), max_diff(&split, &ref));
  ASSERT_TRUE(max_diff(&split, &whole) <= 1e-5f);
  ASSERT_TRUE(max_diff(&split, &ref) <= 1e-4f);
  loom_run_stats_deinit(&st);
  loom_plan_destroy(plan);
  loom_graph_destroy(og);
  loom_graph_destroy(g);
  loom_tensor_deinit(&x);
  loom_tensor_deinit(&ref);
  loom_tensor_deinit(&whole);
  loom_tensor_deinit(&split);
  loom_context_destroy(ctx);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ASSERT_EQ(system(cmd), 0);
}
