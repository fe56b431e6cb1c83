/* Helpers of the tests that run graphs on GPU devices (tests/opencl, tests/cuda and the
 * conformance suite), for either kind of device: one context for the whole process (programs,
 * BLAS and FFT plans are built once), the devices of a kind it found (opened for running),
 * graphs from .lir text, random inputs, runs through the executor, and comparisons against the
 * cpu backend. A test that needs a device starts with `if (!gt_have_devices(kind)) return;`,
 * which marks it skipped with the reason when the machine has no usable device of that kind
 * (no GPU, no driver), so the executable exits 77 there. */
#ifndef LOOM_TEST_GPU_UTIL_H
#define LOOM_TEST_GPU_UTIL_H

#include "harness.h"
#include "runtime/exec.h"

#define GT_MAX_DEVICES 8

/* The process's context (created on first use, destroyed at exit). */
loom_context *gt_context(void);
/* The devices of one kind (LOOM_BACKEND_OPENCL: ocl0, ocl1, ...; LOOM_BACKEND_CUDA: cuda0,
 * ...), opened; 0 after marking the test skipped with the reason. */
int32_t gt_devices(uint32_t kind, const loom__exec_device **devs);
bool gt_have_devices(uint32_t kind);
/* How many devices of the kind there are, without marking anything; and, when there is none,
 * why (a sentence naming the kind). */
int32_t gt_device_count(uint32_t kind);
const char *gt_no_device(uint32_t kind);

/* Parses .lir text (printf-style); NULL and a failed test when it does not parse. */
loom_graph *gt_parse(const char *fmt, ...) LOOM_PRINTF(1, 2);

/* Inputs for every parameter: floats uniform in [-2, 2) (rounded to the dtype), signed
 * integers in [-50, 50), unsigned in [0, 100), bool 0/1, complex parts as floats, q8/q4
 * uniform bytes of their packed storage. */
loom_status gt_inputs(const loom_graph *g, uint64_t seed, loom_tensor *out);
void gt_tensors_free(loom_tensor *t, int32_t n);

/* Runs g on dev (NULL: cpu0) with a meter limited to `limit` (0: none). */
loom_status gt_run(const loom_graph *g, const loom__exec_device *dev, const loom_tensor *in, loom_tensor *out,
                   int64_t limit, loom__meter *meter);

/* Compares b (a device's) with a (the cpu backend's): integers and bool exactly, floats within
 * atol + rtol |a| per element (NaN matches NaN, infinities their sign), complex per part, f16 and
 * bf16 after widening. On a mismatch describes the first one in msg and returns false. */
bool gt_close(const loom_tensor *a, const loom_tensor *b, double rtol, double atol, char *msg, size_t size);

/* The default tolerance for a dtype: f32/c64 1e-5, f64/c128 1e-12, f16 2e-3, bf16 1.6e-2
 * (relative, the same absolute), integers exact. `scale` multiplies it (reductions, dot). */
void gt_tolerance(loom_dtype dtype, double scale, double *rtol, double *atol);

/* Runs g on cpu0 and on each of the nd devices and compares every output (gt_close with the
 * tolerance of each output's dtype times `scale`). When the cpu backend refuses the graph with
 * UNSUPPORTED, each device must too. Returns false after reporting a failure (loom_test_fail)
 * naming `what`, the device and the output. */
bool gt_check(const loom__exec_device *const *devs, int32_t nd, const char *what, const loom_graph *g,
              uint64_t seed, double scale, const char *file, int line);

/* A chain of ops with library paths (dot: CLBlast, cuBLAS; fft: clFFT, cuFFT) and kernels
 * between them, f32 and c64, five outputs (one a view), three parameters. */
extern const char *const gt_chain_lir;

/* A test body: on every device of the kind, the chain under a limit of exactly cpu0's peak fits
 * with the same peak and the same allocations as on cpu0 (the libraries work inside the ops'
 * scratch); a byte less is OUT_OF_MEMORY naming the limit, with nothing left allocated. */
void gt_test_peaks_equal_cpu0(uint32_t kind);

/* Every dtype ops compute in, in loom_dtype order: all but the quantized q8 and q4, which only
 * dequantize reads (docs/ir-quant.md; tests/quant runs them). */
#define GT_N_DTYPES 12
extern const loom_dtype gt_all_dtypes[GT_N_DTYPES];

#endif
