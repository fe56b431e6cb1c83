/* Helpers of the opencl tests: one context for the whole process (programs, CLBlast and
 * clFFT are built once), the OpenCL devices it found, graphs from .lir text, inputs, runs on a
 * device through the executor, and comparisons against the cpu backend. */
#ifndef LOOM_TEST_CL_UTIL_H
#define LOOM_TEST_CL_UTIL_H

#include "harness.h"
#include "runtime/exec.h"

#define CU_MAX_DEVICES 8

/* The process's context and its OpenCL devices (opened for running). When there is none,
 * cu_devices returns 0 after marking the test skipped with the reason. */
loom_context *cu_context(void);
int32_t cu_devices(const loom__exec_device **devs);

/* Parses .lir text (printf-style); NULL and a failed test when it does not parse. */
loom_graph *cu_parse(const char *fmt, ...) LOOM_PRINTF(1, 2);

/* Inputs for every parameter: floats uniform in [-2, 2) (rounded to the dtype), signed
 * integers in [-50, 50), unsigned in [0, 100), bool 0/1, complex parts as floats. */
loom_status cu_inputs(const loom_graph *g, uint64_t seed, loom_tensor *out);
void cu_tensors_free(loom_tensor *t, int32_t n);

/* Runs g on dev (NULL: cpu0) with a meter limited to `limit` (0: none). */
loom_status cu_run(const loom_graph *g, const loom__exec_device *dev, const loom_tensor *in, loom_tensor *out,
                   int64_t limit, loom__meter *meter);

/* Compares b (a device's) with a (the cpu backend's): integers and bool exactly, floats within
 * atol + rtol |a| per element (NaN matches NaN, infinities their sign), complex per part, f16 and
 * bf16 after widening. On a mismatch describes the first one in msg and returns false. */
bool cu_close(const loom_tensor *a, const loom_tensor *b, double rtol, double atol, char *msg, size_t size);

/* The default tolerance for a dtype: f32/c64 1e-5, f64/c128 1e-12, f16 2e-3, bf16 1.6e-2
 * (relative, the same absolute), integers exact. `scale` multiplies it (reductions, dot). */
void cu_tolerance(loom_dtype dtype, double scale, double *rtol, double *atol);

/* Runs g on cpu0 and on every OpenCL device and compares every output (cu_close with the
 * tolerance of each output's dtype times `scale`). When the cpu backend refuses the graph with
 * UNSUPPORTED, each device must too. Returns false after reporting a failure (loom_test_fail)
 * naming `what`, the device and the output. */
bool cu_check(const char *what, const loom_graph *g, uint64_t seed, double scale, const char *file, int line);
#define CHECK_GRAPH(what, g, seed, scale)                                    \
  do {                                                                       \
    if (!cu_check((what), (g), (seed), (scale), __FILE__, __LINE__)) return; \
  } while (0)

/* Parses the text, checks it as CHECK_GRAPH, destroys the graph. */
bool cu_check_text(const char *text, double scale, const char *file, int line);
#define CHECK_LIR(scale, ...)                                       \
  do {                                                              \
    char text_[4096];                                               \
    snprintf(text_, sizeof text_, __VA_ARGS__);                     \
    if (!cu_check_text(text_, (scale), __FILE__, __LINE__)) return; \
  } while (0)

/* Every dtype, in loom_dtype order, and its .lir spelling. */
extern const loom_dtype cu_all_dtypes[LOOM_DTYPE_COUNT];

#endif
