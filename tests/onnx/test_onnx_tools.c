/* loom-run and loom-plan on an ONNX model: the tools read model.onnx where they read a .lir,
 * loom-run takes --in NAME=FILE.pb (ONNX's TensorProto files) and writes --out-dir NAME.npy,
 * equal to ONNX's expected output. The tools' paths come from LOOM_RUN and LOOM_PLAN
 * (tests/onnx.cmake); without them, or without the test data, the test is skipped. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "onnx_cases.h"

/* Runs a shell command; its exit status. */
static int run(const char *cmd) {
  int rc = system(cmd);
  return rc == -1 ? -1 : WEXITSTATUS(rc);
}

TEST(tools_read_onnx) {
  const char *run_tool = getenv("LOOM_RUN"), *plan_tool = getenv("LOOM_PLAN");
  const char *root = getenv("LOOM_ONNX_TESTDATA") ? getenv("LOOM_ONNX_TESTDATA") : ONNX_TESTDATA_DEFAULT;
  char model[4096], set[4096], cmd[16384], out_dir[512], npy[1024];
  snprintf(model, sizeof model, "%s/pytorch-converted/test_Conv2d/model.onnx", root);
  snprintf(set, sizeof set, "%s/pytorch-converted/test_Conv2d/test_data_set_0", root);
  if (!run_tool || !plan_tool || access(model, R_OK)) {
    loom_test_skip("needs LOOM_RUN, LOOM_PLAN and %s", model);
    return;
  }
  snprintf(cmd, sizeof cmd, "'%s' '%s' > /dev/null", plan_tool, model);
  ASSERT_EQ(run(cmd), 0);
  snprintf(out_dir, sizeof out_dir, "%s/onnx-tools-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
           (int)getpid());
  /* The model's input "0" is the graph's parameter _0 (a .lir name), its output "3" is _3. */
  snprintf(cmd, sizeof cmd, "'%s' '%s' --in _0='%s/input_0.pb' --out-dir '%s' > /dev/null", run_tool, model,
           set, out_dir);
  ASSERT_EQ(run(cmd), 0);
  loom_tensor got, want;
  snprintf(npy, sizeof npy, "%s/_3.npy", out_dir);
  snprintf(cmd, sizeof cmd, "%s/output_0.pb", set);
  ASSERT_OK(loom_tensor_load_npy(npy, &got));
  ASSERT_OK(loom_tensor_load_onnx_pb(cmd, &want, NULL));
  ASSERT_TRUE(loom_type_equal(&got.type, &want.type));
  int64_t n;
  loom_type_elements(&got.type, &n);
  for (int64_t i = 0; i < n; i++) {
    float a = ((float *)got.data)[i], b = ((float *)want.data)[i];
    ASSERT_TRUE(fabsf(a - b) <= 1e-7f + 1e-3f * fabsf(b));
  }
  loom_tensor_deinit(&got);
  loom_tensor_deinit(&want);
  unlink(npy);
  rmdir(out_dir);
}
