/* ONNX's own conformance cases (Debian's libonnx-testdata) run through Loom: each case is a
 * folder with model.onnx and test_data_set_N/{input,output}_K.pb. */
#ifndef LOOM_TEST_ONNX_CASES_H
#define LOOM_TEST_ONNX_CASES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loom/loom.h"

/* Where Debian installs the cases; LOOM_ONNX_TESTDATA overrides it. */
#define ONNX_TESTDATA_DEFAULT "/usr/share/libonnx-testdata/data"

typedef enum onnx_outcome { ONNX_PASSED, ONNX_FAILED, ONNX_REFUSED } onnx_outcome;

/* A passing case run again as a plan under a limit of its graph's naive peak (its estimate
 * before any rewrite) divided by `divisor`: PASSED when the results are equal within the same
 * tolerances and every stage's measured peak is at most its limit and equal to its estimate,
 * REFUSED when the planner does not accept the limit (why says its reason), else FAILED. */
typedef struct onnx_limited {
  int32_t divisor; /* in: the limit is the naive peak / divisor */
  onnx_outcome outcome;
  int64_t limit;  /* the limit of the last data set's run */
  int32_t stages; /* its plan's stages */
  char why[1024];
} onnx_limited;

/* Runs the case in folder `dir` on `device` of ctx: reads the model (its input types from the
 * first data set's tensors), runs every data set and compares each output with the expected
 * one at ONNX's backend-test tolerances (rtol 1e-3, atol 1e-7; integers and bools exactly).
 * Writes why it failed or was refused into why. With `limited` (NULL: not asked), a case that
 * passes is run again under a limit as onnx_limited says. */
onnx_outcome onnx_case_run(loom_context *ctx, const char *device, const char *dir, onnx_limited *limited,
                           char *why, size_t why_size);

/* Whether a refusal's message names the node and its op type, or, for a refusal of the whole
 * model (its opset, an input's type), what in the model it is. */
bool onnx_refusal_named(const char *why);

#endif
