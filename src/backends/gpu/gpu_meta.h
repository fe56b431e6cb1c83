/* The structs both GPU backends pass to their kernels by value: shapes, strides and offsets
 * in elements. This one header is read by every side: the host includes it (gpu_setup.c fills
 * the structs), the opencl build embeds it into every program before the kernels
 * (cmake/embed.cmake), and the cuda kernels include it (kernels/cuda/common.cuh through
 * cuda_kernels.h), so the layouts cannot drift apart. Every member is a 64-bit integer, so
 * there is no padding on any side.
 */
#ifndef LOOM_GPU_META_H
#define LOOM_GPU_META_H

#ifdef __OPENCL_VERSION__
typedef long lm_long;
#else
#include <stdint.h>
typedef int64_t lm_long;
#endif

/* Most dimensions of an elementwise or reduction nest (the IR's LOOM_MAX_RANK). */
#define LM_RANK 8
/* Most dimensions of a copy: tile views its output as (rep, dim) pairs. */
#define LM_COPY_RANK 16

/* Op codes: the `op` argument of the unary, binary and compare kernels and the `kind`
 * argument of the reductions (one kernel per family and dtype keeps the kernel count low:
 * drivers compile each kernel of a program, PoCL all of them when the binary is read). */
enum {
  LM_NEG,
  LM_ABS,
  LM_SIGN,
  LM_EXP,
  LM_LOG,
  LM_SQRT,
  LM_RSQRT,
  LM_SIN,
  LM_COS,
  LM_TANH,
  LM_SIGMOID,
  LM_RELU,
  LM_FLOOR,
  LM_CEIL,
  LM_NOT,
  LM_SQUARE,
  LM_ADD,
  LM_SUB,
  LM_MUL,
  LM_DIV,
  LM_POW,
  LM_MAXIMUM,
  LM_MINIMUM,
  LM_EQ,
  LM_NE,
  LM_LT,
  LM_LE,
  LM_GT,
  LM_GE,
  LM_AND,
  LM_OR,
  LM_SUM,
  LM_PROD,
  LM_MEAN,
  LM_MAX,
  LM_MIN,
  LM_ARGMAX,
  LM_ARGMIN
};

/* Elementwise ops with up to three inputs: the output is dense over dims (C order, coalesced);
 * input j is read at off[j] + sum(index[d] * st[j][d]). */
typedef struct lm_ew {
  lm_long rank, total, out_off, span; /* each work-item walks `span` consecutive elements */
  lm_long dims[LM_RANK];
  lm_long st[3][LM_RANK];
  lm_long off[3];
} lm_ew;

/* quantize and dequantize (docs/ir-quant.md) over `rows` rows of `len` elements (dims, the last
 * `len`): the f32 side through element strides fst (f_off), the quantized side through qst
 * (q_off; q8 bytes or q4 nibbles of rows padded to even, low nibble first); the scale (s_off,
 * stride s_st) has one entry per index of `axis` (-1: one in all). */
typedef struct lm_quant {
  lm_long rank, rows, len, axis, q4, channels;
  lm_long f_off, q_off, s_off, s_st;
  lm_long dims[LM_RANK];
  lm_long fst[LM_RANK];
  lm_long qst[LM_RANK];
} lm_quant;

/* A strided copy: dst[dst_off + idx . dst] = src[src_off + idx . src] over dims. */
typedef struct lm_copy {
  lm_long rank, total, dst_off, src_off, span;
  lm_long dims[LM_COPY_RANK];
  lm_long dst[LM_COPY_RANK];
  lm_long src[LM_COPY_RANK];
} lm_copy;

/* A reduction: output o (dense, n_out of them) reduces the input over the reduced dims; kst
 * are the input's strides over the kept dims (the output's order), rst over the reduced
 * dims (innermost with the smallest stride). */
typedef struct lm_reduce {
  lm_long kr, rr, n_out, n_red, in_off, out_off;
  lm_long kdims[LM_RANK], kst[LM_RANK];
  lm_long rdims[LM_RANK], rst[LM_RANK];
} lm_reduce;

/* topk: each row (the dims other than the axis, strides rst) keeps its k best of n
 * elements (axis stride `stride`); outputs at v_off/i_off + (r / inner) * k * inner + r %
 * inner, step inner. */
typedef struct lm_topk {
  lm_long rr, n_rows, n, stride, k, inner, largest, in_off, v_off, i_off;
  lm_long rdims[LM_RANK], rst[LM_RANK];
} lm_topk;

/* A batch of matrix products c[b] = a[b] . b[b]: a is n x k (row stride a_rs, column stride
 * a_cs), b is k x m; the batch index decomposes over bdims, each operand with its own batch
 * strides (0 where it is broadcast); c is dense [batch, n, m]. */
typedef struct lm_gemm {
  lm_long n, m, k, batch, nb, a_rs, a_cs, b_rs, b_cs, a_off, b_off, c_off;
  lm_long bdims[LM_RANK], a_bs[LM_RANK], b_bs[LM_RANK];
} lm_gemm;

/* conv, spatial dims normalized to three (leading dims of size 1). */
typedef struct lm_conv {
  lm_long N, C, O, G, Cg, Og, total, x_off, w_off, o_off;
  lm_long xs_n, xs_c, ws_o, ws_c;
  lm_long in[3], k[3], out[3], stride[3], pad[3], dil[3], xs[3], ws[3];
} lm_conv;

/* A direct DFT along one axis: the input seen as [outer, len_in, inner] through strides
 * (is_o, is_a, is_i), the output dense [outer, len_out, inner]. kind: 0 forward, 1 inverse
 * (scaled by 1/n), 2 real to complex, 3 complex to real (scaled). */
typedef struct lm_dft {
  lm_long kind, n, len_in, len_out, outer, inner, total;
  lm_long is_o, is_a, is_i, in_off, out_off;
} lm_dft;

#endif
