/* The cpu backend's kernel families. loom__cpu_run_op (cpu_ops.c) checks and dispatches to
 * these; each gets views as backend.h describes (inputs strided, outputs dense) and the op's
 * scratch. Each returns UNSUPPORTED naming op and dtype for a combination it does not run. */
#ifndef LOOM_CPU_KERNELS_H
#define LOOM_CPU_KERNELS_H

#include "backends/backend.h"

/* constant iota fill, unary, binary, compare, logic, select, cast (cpu_elementwise.c) */
loom_status loom__cpu_elementwise(const loom_graph *g, const loom__op *op, const loom__view *in,
                                  const loom__view *out);
/* reshape transpose broadcast slice concat tile, materialized densely (cpu_layout.c) */
loom_status loom__cpu_layout(const loom_graph *g, const loom__op *op, const loom__view *in,
                             const loom__view *out);
/* Copies the iteration space dims (rank up to 2 LOOM_MAX_RANK) of esize-byte elements from
 * src to dst through element strides (NULL: dense), on OpenMP threads (cpu_layout.c). */
void loom__cpu_strided_copy(int64_t esize, int32_t rank, const int64_t *dims, void *dst,
                            const int64_t *dst_strides, const void *src, const int64_t *src_strides);
/* reduce_*, argmax, argmin, topk (cpu_reduce.c) */
loom_status loom__cpu_reduce(const loom_graph *g, const loom__op *op, const loom__view *in,
                             const loom__view *out, void *scratch, int64_t scratch_bytes);
/* dot through CBLAS (cpu_dot.c) */
loom_status loom__cpu_dot(const loom_graph *g, const loom__op *op, const loom__view *in,
                          const loom__view *out, void *scratch, int64_t scratch_bytes);
/* The same, out[0] += the product where `accumulate` (loom__op_call.accumulate): BLAS with
 * beta = 1, the plain loops from the values there. */
loom_status loom__cpu_dot_into(const loom_graph *g, const loom__op *op, const loom__view *in,
                               const loom__view *out, bool accumulate, void *scratch, int64_t scratch_bytes);
/* conv (cpu_conv.c) */
loom_status loom__cpu_conv(const loom_graph *g, const loom__op *op, const loom__view *in,
                           const loom__view *out, void *scratch, int64_t scratch_bytes);
/* fft ifft rfft irfft through FFTW (cpu_fft.c) */
loom_status loom__cpu_fourier(const loom_graph *g, const loom__op *op, const loom__view *in,
                              const loom__view *out, void *scratch, int64_t scratch_bytes);
/* quantize dequantize (cpu_quant.c, docs/ir-quant.md): q8/q4 views through byte/nibble
 * strides; scratch unused */
loom_status loom__cpu_quant(const loom_graph *g, const loom__op *op, const loom__view *in,
                            const loom__view *out, void *scratch, int64_t scratch_bytes);
/* A fused op's body (docs/ir-fusion.md) over its operands' views in[] (strided, broadcast) into dense
 * out[] (one per body output), evaluated in blocks of the space's last axis without
 * materializing the body's intermediates (cpu_fused.c). scratch may be NULL: the accumulators
 * are per thread. Errors: UNSUPPORTED naming the body op it does not run (complex values,
 * a dot that is not small, an op outside the body's form), so the caller runs the body
 * unfused; INVALID_ARGUMENT for argmax/argmin or reduce_max/min over an empty axis;
 * OUT_OF_MEMORY for the per-thread blocks. Thread safety: runs OpenMP threads itself; the
 * body is only read. */
loom_status loom__cpu_fused(const loom_graph *body, const loom__view *in, const loom__view *out,
                            void *scratch, int64_t scratch_bytes);
/* Whether loom__cpu_fused runs `body` with dense operands (LOOM_OK), or UNSUPPORTED naming what
 * it does not run (as loom__cpu_fused would say); OUT_OF_MEMORY. Reads no data. */
loom_status loom__cpu_fused_supported(const loom_graph *body);
/* Tests only: loom__cpu_ks_portable runs a fused kernel sum's portable loop where the AVX-512
 * one would run; loom__cpu_ks_taken says whether the last loom__cpu_fused ran its body as a
 * kernel sum in one pass (cpu_fused.c, find_kernel_sum), loom__cpu_ks_wide_taken whether in
 * the AVX-512 loop (a build that lost it once ran 1.21x slower with every test passing). */
extern bool loom__cpu_ks_portable, loom__cpu_ks_taken, loom__cpu_ks_wide_taken;

#endif
