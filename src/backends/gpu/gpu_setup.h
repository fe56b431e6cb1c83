/* The host-side set-up both GPU backends (opencl, cuda) do before they launch one of their own
 * kernels: the call's checks (dtypes, shapes, attributes) and the kernel arguments of
 * gpu_meta.h, filled from the call's views. A backend picks its kernel from what these give
 * and launches; nothing here names a vendor type or touches a device.
 *
 * File map (gpu_setup.c):
 *   nests        loom__nest_*: one iteration space walked by several operands, coalesced
 *   copies       loom__gpu_copy_setup, loom__gpu_zero_setup
 *   elementwise  loom__gpu_ew_setup: iota, select, unary, binary, compare, logic, cast
 *   reductions   loom__gpu_reduce_setup: reduce_*, argmax, argmin
 *   topk, conv   loom__gpu_topk_setup, loom__gpu_conv_setup
 *   dot          loom__gpu_dot_setup, loom__gpu_fold_matrix
 *   transforms   loom__gpu_fft_setup, loom__gpu_dft_setup
 *
 * Every function that checks returns INVALID_ARGUMENT or UNSUPPORTED with a message that
 * starts with the device's id (`id`) and names the op; LOOM_OK with nothing to launch is said
 * by the meta's count (total, n_out, n_rows) being 0.
 */
#ifndef LOOM_GPU_SETUP_H
#define LOOM_GPU_SETUP_H

#include "backends/backend.h"
#include "backends/gpu/gpu_meta.h"

/* ---- nests ------------------------------------------------------------------------------- */

#define LOOM__NEST_MAX_OPERANDS 4

/* dims[0..rank) walked by n operands, operand k at strides st[k] (in elements). */
typedef struct loom__nest {
  int32_t rank, n;
  int64_t dims[LM_COPY_RANK];
  int64_t st[LOOM__NEST_MAX_OPERANDS][LM_COPY_RANK];
} loom__nest;

/* A nest over dims[0..rank) with no operand yet; rank <= LM_COPY_RANK. */
void loom__nest_init(loom__nest *L, int32_t rank, const int64_t *dims);
/* Adds an operand (at most LOOM__NEST_MAX_OPERANDS); NULL strides: dense C order over dims. */
void loom__nest_add(loom__nest *L, const int64_t *strides);
/* Drops dimensions of size 1 and merges neighbours every operand walks as one; the rank
 * left is at least 1 (a single element: dims {1}, strides 0). */
void loom__nest_coalesce(loom__nest *L);

/* ---- copies ------------------------------------------------------------------------------ */

/* The copy kernel's arguments for dims[0..rank) elements from (src_off, src_strides) to
 * (dst_off, dst_strides), strides NULL meaning dense, each work-item walking `span` elements;
 * m->total is 0 when there is nothing to copy. */
void loom__gpu_copy_setup(int32_t rank, const int64_t *dims, int64_t dst_off, const int64_t *dst_strides,
                          int64_t src_off, const int64_t *src_strides, int64_t span, lm_copy *m);
/* The quantize/dequantize kernels' arguments (docs/ir-quant.md): f the f32 side, q the
 * quantized side (offsets and strides in q8 bytes or q4 nibbles), s the scale, over q's shape;
 * the channel axis from op's attributes (-1: per tensor). INVALID_ARGUMENT for a rank past
 * LM_RANK or an axis out of range. */
loom_status loom__gpu_quant_setup(const loom__op *op, const loom__dview *f, const loom__dview *q,
                                  const loom__dview *s, lm_quant *m);
/* The same for zeroing the destination alone (the src members stay 0). */
void loom__gpu_zero_setup(int32_t rank, const int64_t *dims, int64_t dst_off, const int64_t *dst_strides,
                          int64_t span, lm_copy *m);
/* True when the copy is one dense run (a plain buffer copy does it). */
bool loom__gpu_copy_is_run(const lm_copy *m);

/* ---- elementwise ------------------------------------------------------------------------- */

/* The kernel family an elementwise-class op runs on. */
typedef enum loom__gpu_ew_kernel {
  LOOM__GPU_IOTA,
  LOOM__GPU_SELECT,
  LOOM__GPU_CAST,
  LOOM__GPU_UNARY,
  LOOM__GPU_BINARY,
  LOOM__GPU_COMPARE /* compare and logic: bool output */
} loom__gpu_ew_kernel;

/* What to launch for an elementwise-class op. iota fills dense `total` elements of the
 * output from iota_off, element i holding (i / iota_inner) % iota_dim; the others read the
 * inputs through m (m.total elements). */
typedef struct loom__gpu_ew {
  loom__gpu_ew_kernel kernel;
  loom_dtype dtype; /* the inputs' (iota, select: the output's) */
  int32_t code;     /* the LM_* op code (unary, binary, compare), the target dtype (cast) */
  int64_t total;    /* output elements; 0: nothing to launch */
  int64_t iota_off, iota_dim, iota_inner;
  lm_ew m;
} loom__gpu_ew;

/* Checks an op of class source, unary, binary, compare, logic, select or cast and sets up its
 * launch; `span` is the elements each work-item walks. UNSUPPORTED for a dtype the kernels do
 * not take (the cpu backend's tables), INVALID_ARGUMENT when operands disagree, INTERNAL for
 * a source op other than iota (constants and parameters are the executor's). */
loom_status loom__gpu_ew_setup(const char *id, const loom__op_call *c, int64_t span, loom__gpu_ew *e);

/* ---- reductions, topk, conv ------------------------------------------------------------- */

/* Checks a reduce_* / argmax / argmin call and fills m (the input split into kept and
 * reduced dims, each coalesced) and *kind (LM_SUM .. LM_ARGMIN). m->n_out 0: nothing to
 * launch. */
loom_status loom__gpu_reduce_setup(const char *id, const loom__op_call *c, lm_reduce *m, int32_t *kind);

/* Checks a topk call (int and float dtypes) and fills m; m->k or m->n_rows 0: nothing to
 * launch. */
loom_status loom__gpu_topk_setup(const char *id, const loom__op_call *c, lm_topk *m);

/* Checks a conv call (float dtypes) and fills p, the spatial dims normalized to three;
 * p->total 0: nothing to launch. */
loom_status loom__gpu_conv_setup(const char *id, const loom__op_call *c, lm_conv *p);

/* ---- dot ---------------------------------------------------------------------------------- */

/* Checks a dot call (NumPy matmul: [..,n,k] x [..,k,m] -> [..,n,m], batch dims broadcast, 1-D
 * operands as NumPy) and fills p; nothing to launch when p->batch, p->n or p->m is 0. An
 * operand's offset for batch element bi is loom__batch_offset(bi, nb, p->bdims, its bs). */
loom_status loom__gpu_dot_setup(const char *id, const loom__op_call *c, lm_gemm *p);
/* How a row-major rows x cols matrix with element strides (rs, cs) goes to a BLAS without a
 * copy: dense row-major (*transposed false) or dense column-major (a transposed view,
 * *transposed true), with its leading dimension *ld. The stride of a dimension of size 1 is
 * free, so vectors fold too. False when it is neither. */
bool loom__gpu_fold_matrix(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool *transposed, int64_t *ld);

/* ---- transforms -------------------------------------------------------------------------- */

typedef enum loom__fft_kind {
  LOOM__FFT_FORWARD,
  LOOM__FFT_INVERSE,
  LOOM__FFT_R2C,
  LOOM__FFT_C2R
} loom__fft_kind;

/* One transform (fft ifft rfft irfft) along an axis of data seen as [outer, len, inner]. */
typedef struct loom__gpu_fft {
  loom__fft_kind kind;
  bool dbl; /* f64 / c128 */
  int32_t axis;
  int64_t n, len_in, len_out, outer, inner;
  bool merged;              /* the outer dims, and the inner dims, each walk as one stride: */
  int64_t is_o, is_a, is_i; /* the input's strides over [outer, len, inner] */
  bool packed;              /* (cuda) the input was copied densely to the start of the scratch */
  int64_t in_es, out_es;    /* element sizes */
} loom__gpu_fft;

/* Checks a transform call (f32/f64 in for rfft, c64/c128 otherwise, the output's dtype to
 * match) and describes it in p. */
loom_status loom__gpu_fft_setup(const char *id, const loom__op_call *c, loom__gpu_fft *p);
/* The DFT kernel's arguments for p reading its input at (in_off, p's input strides) and
 * writing the output densely from out_off. */
void loom__gpu_dft_setup(const loom__gpu_fft *p, int64_t in_off, int64_t out_off, lm_dft *m);

/* "<id>: <op>: unsupported dtype <dtype>" as UNSUPPORTED. */
loom_status loom__gpu_unsupported(const char *id, const loom__op *op, loom_dtype dtype);

#endif
