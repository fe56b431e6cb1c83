/* Helpers of the cuda tests, as tests/opencl/cl_util.h does it for OpenCL: one context for the
 * whole process, the CUDA devices it found (opened for running), graphs from .lir text, random
 * inputs, runs through the executor, and comparisons against the cpu backend. Every test that
 * needs a device starts with `if (!ct_have_devices()) return;`, which marks it skipped with the
 * reason when the machine has no usable CUDA device (no GPU, no driver), so the executable exits
 * 77 there. */
#ifndef LOOM_TEST_CUDA_UTIL_H
#define LOOM_TEST_CUDA_UTIL_H

#include "harness.h"
#include "runtime/exec.h"

#define CT_MAX_DEVICES 8

/* The process's context. */
loom_context *ct_context(void);
/* The CUDA devices (cuda0, cuda1, ...), opened; 0 after marking the test skipped. */
int32_t ct_devices(const loom__exec_device **devs);
bool ct_have_devices(void);

/* Inputs for every parameter: floats uniform in [-2, 2) (rounded to the dtype), signed
 * integers in [-50, 50), unsigned in [0, 100), bool 0/1, complex parts as floats. */
loom_status ct_inputs(const loom_graph *g, uint64_t seed, loom_tensor *out);
void ct_tensors_free(loom_tensor *t, int32_t n);

/* Runs g on dev (NULL: cpu0) with a meter limited to `limit` (0: none). */
loom_status ct_run(const loom_graph *g, const loom__exec_device *dev, const loom_tensor *in, loom_tensor *out,
                   int64_t limit, loom__meter *meter);

/* Compares b (the device's) with a (the cpu backend's): integers and bool exactly, floats within
 * atol + rtol |a| per element (NaN matches NaN, infinities their sign), complex per part, f16
 * and bf16 after widening. On a mismatch describes the first one in msg and returns false. */
bool ct_close(const loom_tensor *a, const loom_tensor *b, double rtol, double atol, char *msg, size_t size);
/* f32/c64 1e-5, f64/c128 1e-12, f16 2e-3, bf16 1.6e-2 (relative, the same absolute), integers
 * exact; times `scale` (sums, dot). */
void ct_tolerance(loom_dtype dtype, double scale, double *rtol, double *atol);

/* Runs g on cpu0 and on every CUDA device and compares every output. When the cpu backend
 * refuses the graph with UNSUPPORTED, each device must too. False after reporting a failure
 * naming `what`, the device and the output. */
bool ct_check(const char *what, const loom_graph *g, uint64_t seed, double scale, const char *file, int line);

/* Every dtype, in loom_dtype order. */
extern const loom_dtype ct_all_dtypes[LOOM_DTYPE_COUNT];

#endif
