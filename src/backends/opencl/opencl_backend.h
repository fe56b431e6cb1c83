/* The opencl compute backend's insides, shared by its files:
 *   opencl_backend.c  the backend table: device state, memory, queue, op dispatch
 *   opencl_program.c  embedded kernel sources, per-device builds, the on-disk program cache
 *   opencl_kernels.c  elementwise, cast, iota, layout, select, reductions, topk, conv
 *   opencl_blas.c     dot: CLBlast, or the gemm kernel
 *   opencl_fft.c      fft ifft rfft irfft: clFFT with plans cached, or the direct DFT kernel
 *
 * Memory: the HMM's (loom/memory.h). The executor allocates device buffers on the device's
 * memory node (plain cl_mem objects: LOOM_MEM_DEVICE_LOCAL) and keeps each acquired while it
 * uses it; the backend runs in the HMM's cl_context and on its in-order queue for the node
 * (taken, retained, at open), so its kernels reach those buffers and run after the HMM's
 * copies into them.
 *
 * Asynchrony: one in-order queue per device, shared with the HMM; run_op only enqueues
 * (kernels, CLBlast and clFFT calls all go on that queue), and the waits are the HMM's
 * blocking copies (inputs and constants in, outputs out) and synchronize (clFinish) at the end
 * of a stage.
 */
#ifndef LOOM_OPENCL_BACKEND_H
#define LOOM_OPENCL_BACKEND_H

#include <CL/cl.h>
#include <pthread.h>

#include "backends/backend.h"
#include "backends/gpu/gpu_meta.h"
#include "backends/gpu/gpu_setup.h"
#include "backends/opencl/opencl_status.h"

/* Programs: one per dtype (its elementwise, cast, reduction, topk, dot, conv and DFT
 * kernels), built on first use, and the dtype-free layout program. */
enum { LOOM__CL_PROG_LAYOUT = LOOM_DTYPE_COUNT, LOOM__CL_PROG_COUNT };

typedef struct loom__cl_kernel {
  char name[40];
  cl_kernel kernel;
  size_t max_wg; /* CL_KERNEL_WORK_GROUP_SIZE */
} loom__cl_kernel;

typedef struct loom__cl_program {
  cl_program program; /* NULL until built */
  loom__cl_kernel *kernels;
  int32_t n_kernels, cap_kernels;
} loom__cl_program;

struct loom__cl_fft_cache;
struct loom__cl_fused_cache;

typedef struct loom__cl_device {
  char id[16];
  char *name;      /* the device's name, for messages */
  char *cache_key; /* device, versions and platform: part of the program cache's key */
  cl_platform_id platform;
  cl_device_id device;
  cl_context context;     /* the HMM's for this device's node; retained */
  cl_command_queue queue; /* the HMM's in-order queue for the node; retained */
  bool fp64;
  bool is_cpu;    /* CL_DEVICE_TYPE_CPU: work-items walk spans, small launches use small groups */
  int64_t span;   /* elements per work-item of the flat kernels */
  bool libraries; /* loom__cl_libraries_acquire succeeded for it */
  size_t max_wg;
  int64_t base_align; /* bytes: where a sub-buffer may start */
  int32_t compute_units;
  pthread_mutex_t lock; /* held by run_op: kernel arguments and program caches */
  loom__cl_program programs[LOOM__CL_PROG_COUNT];
  struct loom__cl_fft_cache *fft;
  struct loom__cl_fused_cache *fused; /* opencl_fused.c: fused ops' kernels by source text */
} loom__cl_device;

/* ---- programs and kernels (opencl_program.c) ---------------------------------------------- */

/* The kernel `name` of program `prog` (a loom_dtype, or LOOM__CL_PROG_LAYOUT), building the
 * program on first use (from the on-disk cache when it holds it). Errors: UNSUPPORTED when
 * the program has no such kernel (the op does not take that dtype: the message is the caller's
 * to give, so nothing is set), INTERNAL with the build log when the program does not build,
 * OUT_OF_MEMORY. */
loom_status loom__cl_kernel_get(loom__cl_device *d, int32_t prog, const char *name, loom__cl_kernel **out);
/* Builds program text from `parts` with `options` for d, through the on-disk cache; `label`
 * names it in messages. Exposed for tests (a source that fails to build). */
loom_status loom__cl_program_build(loom__cl_device *d, const char *label, const char *const *parts,
                                   int32_t n_parts, const char *options, cl_program *out);
void loom__cl_programs_release(loom__cl_device *d);
/* The embedded text of kernels/opencl/<name> (cmake/embed.cmake), or NULL. */
const char *loom__cl_source_text(const char *name);

/* ---- launching (opencl_kernels.c) ------------------------------------------------------- */

typedef struct loom__cl_arg {
  size_t size;
  const void *value; /* NULL: local memory of `size` bytes */
} loom__cl_arg;
#define LOOM__CL_ARG(x) ((loom__cl_arg){sizeof(x), &(x)})
#define LOOM__CL_LOCAL(bytes) ((loom__cl_arg){(bytes), NULL})

/* Sets the kernel's arguments and enqueues it over `items` work-items in groups of `local`
 * (rounded down to what the kernel allows), as a grid-stride loop: the global size is capped
 * and the kernels loop over the rest. Nothing is enqueued for items <= 0. */
loom_status loom__cl_launch(loom__cl_device *d, const loom__cl_kernel *k, const loom__cl_arg *args,
                            int32_t n_args, int64_t items, size_t local);
/* A strided copy of `esize`-byte elements over dims (rank up to LM_COPY_RANK); NULL strides
 * are dense. */
loom_status loom__cl_copy(loom__cl_device *d, int64_t esize, int32_t rank, const int64_t *dims, cl_mem dst,
                          int64_t dst_off, const int64_t *dst_strides, cl_mem src, int64_t src_off,
                          const int64_t *src_strides);
/* Sets `esize`-byte elements (4 or 8) to zero over dims with dst_strides (NULL: dense). */
loom_status loom__cl_zero(loom__cl_device *d, int64_t esize, int32_t rank, const int64_t *dims, cl_mem dst,
                          int64_t dst_off, const int64_t *dst_strides);

/* The launchers of the families (backends/dispatch.h): dev is the backend's device. */
loom_status loom__cl_elementwise(void *dev, const loom__op_call *c);
loom_status loom__cl_layout(void *dev, const loom__op_call *c);
loom_status loom__cl_reduce(void *dev, const loom__op_call *c);
loom_status loom__cl_topk(void *dev, const loom__op_call *c);
loom_status loom__cl_conv(void *dev, const loom__op_call *c);
/* quantize dequantize (opencl_quant.c, docs/ir-quant.md) */
loom_status loom__cl_quant(void *dev, const loom__op_call *c);

/* ---- dot and the transforms (opencl_blas.c, opencl_fft.c) --------------------------------- */

loom_status loom__cl_dot(void *dev, const loom__op_call *c);
loom_status loom__cl_fourier(void *dev, const loom__op_call *c);

/* ---- fused ops (opencl_fused.c) --------------------------------------------------------- */

/* Runs a fused op (docs/ir-fusion.md) whose body is `body`: in[k] is body parameter k's view, out[r]
 * body output r's (dense); enqueues one generated kernel (backends/gpu/fused_codegen.h) on
 * the device's queue, built on first use through the program cache and kept by its source
 * text. The caller holds d->lock (run_op does). The scratch is not used: intermediates live
 * in registers and local memory. Errors: UNSUPPORTED naming the body op or dtype the
 * generator cannot express (the runtime then runs the body unfused), INTERNAL with the build
 * log, OpenCL errors naming the call. */
loom_status loom__cl_fused(loom__cl_device *d, const loom_graph *body, const loom__dview *in,
                           const loom__dview *out, void *scratch, int64_t scratch_bytes);
/* loom__cl_fused for a fused op as loom__dispatch calls a family's launcher. */
loom_status loom__cl_fused_op(void *dev, const loom__op_call *c);
/* Releases the device's fused kernels (cl_close). */
void loom__cl_fused_release(loom__cl_device *d);
/* How reductions are laid out, process-wide (tests and measurements): 0 by size and device
 * (CPU devices: 8-lane vectors where the body allows, else a work-item per output), 1 a
 * work-group per output, 2 a work-item per output, 3 vectors where the body allows (else 2). */
void loom__cl_fused_testing_layout(int32_t layout);

/* ---- the libraries (opencl_clblast.c, opencl_clfft.c; none/ when CMake did not find them) --- */

/* Runs the whole batch through CLBlast when it is the way; *ran false (nothing enqueued)
 * otherwise. */
loom_status loom__cl_clblast_dot(loom__cl_device *d, const loom__op_call *c, const lm_gemm *p, bool *ran);
/* Drops CLBlast's compiled programs (they hold contexts). */
void loom__cl_clblast_release(void);
loom_status loom__cl_clfft_setup(void);
void loom__cl_clfft_teardown(void);
/* The most threads that were ever inside clFFT at once (Loom serializes its calls into clFFT,
 * so 1 once any call was made, 0 before; a test of that lock). */
int32_t loom__cl_clfft_most_inside(void);
/* Destroys the device's clFFT plans. */
void loom__cl_fft_release(loom__cl_device *d);
/* Per-process setup of the libraries, counted per open device: the first open sets them up,
 * the last close tears them down (opencl_backend.c). */
loom_status loom__cl_libraries_acquire(void);
void loom__cl_libraries_release(void);

/* ---- testing (loom/testing.h style hooks, process-wide) ------------------------------------ */

/* Which way dot and the transforms go: 0 as chosen by size, 1 always Loom's own kernels,
 * 2 the library whenever it can run the problem; for dot, 3 Loom's tiled (GPU) kernel even on
 * a CPU device. */
void loom__opencl_testing_set_paths(int32_t blas, int32_t fft);
int32_t loom__cl_testing_blas_path(void);
int32_t loom__cl_testing_fft_path(void);
/* Makes an open device behave as if it had no fp64. */
void loom__opencl_testing_disable_fp64(void *dev);
/* How many products CLBlast has run in blocks (their temporaries would not fit the scratch
 * whole) since the process began; 0 without CLBlast. */
int64_t loom__opencl_testing_blocked_dots(void);
/* The device state behind an exec device of the opencl backend (tests). */
cl_command_queue loom__opencl_queue(void *dev);

#endif
