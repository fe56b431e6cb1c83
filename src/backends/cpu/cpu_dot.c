/* dot on the host: NumPy matmul ([..,n,k] x [..,k,m] -> [..,n,m], batch dims broadcast, 1-D
 * operands as NumPy) through CBLAS for f32 f64 c64 c128, and f16/bf16 through sgemm.
 *
 * Each operand is seen as a batch of matrices with a row and a column stride. A matrix that is
 * dense row-major, or dense column-major (a transposed view), goes to BLAS as it is, with
 * CblasNoTrans or CblasTrans: transposes are folded into the call. Any other layout (broadcast
 * or stepped rows and columns, negative strides) is first packed into dense storage, once for
 * the whole batch (batch dims where the operand is broadcast stay broadcast), so a batch that
 * shares one operand copies it once.
 *
 * Threads: OpenBLAS threads one big gemm by itself, so large batches run their gemms one after
 * the other; calling BLAS inside an OpenMP region of ours would put two thread pools on the
 * same cores. Batches of tiny matrices, where a BLAS call costs more than its work, and
 * integer dtypes (no BLAS) run a plain loop threaded over output rows instead. Packing and
 * the f16/bf16 conversions, which sit next to BLAS calls, stay on the calling thread: an
 * OpenMP region there leaves libgomp's workers spinning on the cores OpenBLAS's pthread
 * workers need (see cpu_conv.c for the measurement).
 *
 * Memory: packed operands and the f32 result of f16/bf16 come from the op's scratch (IR.md:
 * 1x the output) while it lasts, then from loom__malloc.
 */
#include <complex.h>
#include <limits.h>
#include <string.h>

#include "backends/cpu/cpu_arena.h"
#include "backends/cpu/cpu_blas_host.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/shapes.h"

/* A batch of MACs below which one OpenMP region costs more than it saves. */
#define DOT_PARALLEL_MIN_MACS (1 << 15)
/* Matrices at most this many MACs, in a batch of two or more, skip BLAS (call overhead). */
#define DOT_SMALL_MACS 4096

/* ---- the problem ------------------------------------------------------------------------ */

/* One operand: a batch of rows x cols matrices. */
typedef struct dot_mat {
  char *data; /* element [0,0] of batch element 0 */
  loom_dtype dtype;
  int64_t rows, cols;
  int64_t rs, cs;            /* element strides of a row and a column step */
  int64_t bs[LOOM_MAX_RANK]; /* strides along the output's batch dims; 0 = broadcast */
} dot_mat;

typedef struct dot_problem {
  int32_t nb; /* batch dims of the output */
  int64_t bdims[LOOM_MAX_RANK];
  int64_t batch; /* their product */
  int64_t n, k, m;
  dot_mat a, b; /* n x k and k x m */
  char *c;      /* dense [batch, n, m] of dtype */
  loom_dtype dtype;
  bool accumulate; /* c += the product (a loop's sum over k pieces), not c = it */
} dot_problem;

static loom_status dot_setup(const loom__view *va, const loom__view *vb, const loom__view *out,
                             dot_problem *p) {
  int32_t ra = va->type.rank, rb = vb->type.rank;
  if (ra < 1 || rb < 1)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "dot: operands must have at least one dimension");
  memset(p, 0, sizeof *p);
  p->dtype = out->type.dtype;
  p->n = ra >= 2 ? va->type.dims[ra - 2] : 1;
  p->k = va->type.dims[ra - 1];
  p->m = rb >= 2 ? vb->type.dims[rb - 1] : 1;
  int64_t kb = rb >= 2 ? vb->type.dims[rb - 2] : vb->type.dims[0];
  p->nb = out->type.rank - (ra >= 2) - (rb >= 2);
  if (kb != p->k || p->nb < 0 || va->type.dtype != p->dtype || vb->type.dtype != p->dtype)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "dot: operand and result types do not agree");
  p->batch = 1;
  for (int32_t i = 0; i < p->nb; i++) {
    p->bdims[i] = out->type.dims[i];
    p->batch *= p->bdims[i];
  }
  p->a = (dot_mat){.data = va->data,
                   .dtype = p->dtype,
                   .rows = p->n,
                   .cols = p->k,
                   .rs = ra >= 2 ? va->strides[ra - 2] : 0,
                   .cs = va->strides[ra - 1]};
  loom__batch_strides(&va->type, va->strides, ra >= 2 ? 2 : 1, p->nb, p->a.bs);
  p->b = (dot_mat){.data = vb->data,
                   .dtype = p->dtype,
                   .rows = p->k,
                   .cols = p->m,
                   .rs = rb >= 2 ? vb->strides[rb - 2] : vb->strides[0],
                   .cs = rb >= 2 ? vb->strides[rb - 1] : 0};
  loom__batch_strides(&vb->type, vb->strides, rb >= 2 ? 2 : 1, p->nb, p->b.bs);
  p->c = out->data;
  return LOOM_OK;
}

/* ---- plain loops: integers, tiny batches, sizes beyond BLAS's int ----------------------- */

/* c[i,:] = sum_q a[i,q] * b[q,:], order i-q-j so b's rows stream. Integer products and sums
 * wrap: they are done in an unsigned type (no signed overflow) and truncated on store. */
#define DOT_LOOP(NAME, T, ACC, UPDATE)                                                                    \
  static void NAME(const dot_problem *p) {                                                                \
    int64_t rows = p->batch * p->n;                                                                       \
    int64_t macs = rows * p->k * p->m;                                                                    \
    _Pragma("omp parallel for schedule(static) if (macs > DOT_PARALLEL_MIN_MACS)") for (int64_t r = 0;    \
                                                                                        r < rows; r++) {  \
      int64_t bi = r / p->n, i = r % p->n;                                                                \
      const T *a = (const T *)p->a.data + loom__batch_offset(bi, p->nb, p->bdims, p->a.bs) + i * p->a.rs; \
      const T *b = (const T *)p->b.data + loom__batch_offset(bi, p->nb, p->bdims, p->b.bs);               \
      T *c = (T *)p->c + r * p->m;                                                                        \
      if (!p->accumulate)                                                                                 \
        for (int64_t j = 0; j < p->m; j++) c[j] = (T)0;                                                   \
      for (int64_t q = 0; q < p->k; q++) {                                                                \
        ACC av = (ACC)a[q * p->a.cs];                                                                     \
        const T *brow = b + q * p->b.rs;                                                                  \
        for (int64_t j = 0; j < p->m; j++) UPDATE(T, ACC, c[j], av, brow[j * p->b.cs]);                   \
      }                                                                                                   \
    }                                                                                                     \
  }

#define DOT_ADD(T, ACC, cj, av, bv) cj = (T)((ACC)(cj) + av * (ACC)(bv))
#define DOT_OR_AND(T, ACC, cj, av, bv) cj = (T)((cj) | (av & (ACC)(bv)))

DOT_LOOP(loop_f32, float, float, DOT_ADD)
DOT_LOOP(loop_f64, double, double, DOT_ADD)
DOT_LOOP(loop_c64, float complex, float complex, DOT_ADD)
DOT_LOOP(loop_c128, double complex, double complex, DOT_ADD)
DOT_LOOP(loop_i8, int8_t, uint32_t, DOT_ADD)
DOT_LOOP(loop_u8, uint8_t, uint32_t, DOT_ADD)
DOT_LOOP(loop_i16, int16_t, uint32_t, DOT_ADD)
DOT_LOOP(loop_i32, int32_t, uint32_t, DOT_ADD)
DOT_LOOP(loop_i64, int64_t, uint64_t, DOT_ADD)
DOT_LOOP(loop_bool, uint8_t, unsigned, DOT_OR_AND)

/* Runs the plain loop for p->dtype; false when it has none. */
static bool dot_loop(const dot_problem *p) {
  switch (p->dtype) {
    case LOOM_F32:
      loop_f32(p);
      return true;
    case LOOM_F64:
      loop_f64(p);
      return true;
    case LOOM_C64:
      loop_c64(p);
      return true;
    case LOOM_C128:
      loop_c128(p);
      return true;
    case LOOM_I8:
      loop_i8(p);
      return true;
    case LOOM_U8:
      loop_u8(p);
      return true;
    case LOOM_I16:
      loop_i16(p);
      return true;
    case LOOM_I32:
      loop_i32(p);
      return true;
    case LOOM_I64:
      loop_i64(p);
      return true;
    case LOOM_BOOL:
      loop_bool(p);
      return true;
    default:
      return false;
  }
}

/* ---- packing ---------------------------------------------------------------------------- */

/* Copies `count` elements src[j * stride] (dtype `from`) to dense dst (dtype `to`, which is
 * `from` or f32 for f16/bf16). */
static void copy_row(void *dst, loom_dtype to, const char *src, loom_dtype from, int64_t count,
                     int64_t stride) {
  if (from == LOOM_F16 || from == LOOM_BF16) {
    const uint16_t *s = (const uint16_t *)src;
    float *d = dst;
    for (int64_t j = 0; j < count; j++)
      d[j] = from == LOOM_F16 ? loom_f16_to_f32(s[j * stride]) : loom_bf16_to_f32(s[j * stride]);
    return;
  }
  (void)to;
  int64_t es = loom_dtype_size(from);
  if (stride == 1) {
    memcpy(dst, src, (size_t)(count * es));
    return;
  }
  for (int64_t j = 0; j < count; j++) memcpy((char *)dst + j * es, src + j * stride * es, (size_t)es);
}

/* Packs operand x into dense row-major matrices of dtype `to`, one per batch element where x
 * is not broadcast. Rewrites x to describe the packed copy. */
static loom_status pack(dot_mat *x, const dot_problem *p, loom_dtype to, loom__cpu_arena *ar) {
  int64_t pdims[LOOM_MAX_RANK], psrc[LOOM_MAX_RANK], nbs[LOOM_MAX_RANK];
  int32_t np = 0;
  int64_t count = 1; /* packed matrices */
  int64_t mat = x->rows * x->cols;
  for (int32_t i = p->nb - 1; i >= 0; i--) {
    nbs[i] = 0;
    if (x->bs[i] != 0) {
      nbs[i] = count * mat;
      count *= p->bdims[i];
    }
  }
  for (int32_t i = 0; i < p->nb; i++)
    if (x->bs[i] != 0) {
      pdims[np] = p->bdims[i];
      psrc[np++] = x->bs[i];
    }
  int64_t es_to = loom_dtype_size(to), es_from = loom_dtype_size(x->dtype);
  char *buf = loom__cpu_arena_take(ar, count * mat * es_to, false);
  if (!buf) return loom__oom("dot: packing an operand");
  int64_t rows = count * x->rows;
  const dot_mat src = *x;
  for (int64_t r = 0; r < rows; r++) {
    int64_t pb = r / src.rows, i = r % src.rows;
    const char *s = src.data + (loom__batch_offset(pb, np, pdims, psrc) + i * src.rs) * es_from;
    copy_row(buf + r * src.cols * es_to, to, s, src.dtype, src.cols, src.cs);
  }
  x->data = buf;
  x->dtype = to;
  x->rs = x->cols;
  x->cs = 1;
  memcpy(x->bs, nbs, sizeof nbs);
  return LOOM_OK;
}

/* ---- BLAS --------------------------------------------------------------------------------- */

/* How a matrix goes to BLAS without a copy: row-major (NoTrans) or column-major (Trans) with
 * a leading dimension. The stride of a dimension of size 1 is free, so vectors fold too. */
typedef struct dot_fold {
  enum CBLAS_TRANSPOSE trans;
  int ld;
} dot_fold;

static bool fold(const dot_mat *x, dot_fold *f) {
  int64_t rs = x->rows == 1 ? x->cols : x->rs;
  int64_t cs = x->cols == 1 ? 1 : x->cs;
  if (cs == 1 && rs >= LOOM_MAX(x->cols, 1) && rs <= INT_MAX) {
    *f = (dot_fold){CblasNoTrans, (int)rs};
    return true;
  }
  rs = x->rows == 1 ? 1 : x->rs;
  cs = x->cols == 1 ? x->rows : x->cs;
  if (rs == 1 && cs >= LOOM_MAX(x->rows, 1) && cs <= INT_MAX) {
    *f = (dot_fold){CblasTrans, (int)cs};
    return true;
  }
  return false;
}

/* y = op(A) x with A stored rows x cols (row-major, leading dimension lda). */
/* y = op(A) x (+ y where acc) with A stored rows x cols (row-major, leading dimension lda). */
static void blas_gemv(loom_dtype t, enum CBLAS_TRANSPOSE tr, int rows, int cols, const void *a, int lda,
                      const void *x, int incx, void *y, bool acc) {
  static const float one_c[2] = {1, 0}, zero_c[2] = {0, 0};
  static const double one_z[2] = {1, 0}, zero_z[2] = {0, 0};
  switch (t) {
    case LOOM_F32:
      loom__cpu_blas_get()->sgemv(CblasRowMajor, tr, rows, cols, 1.0f, a, lda, x, incx, acc ? 1.0f : 0.0f, y,
                                  1);
      break;
    case LOOM_F64:
      loom__cpu_blas_get()->dgemv(CblasRowMajor, tr, rows, cols, 1.0, a, lda, x, incx, acc ? 1.0 : 0.0, y, 1);
      break;
    case LOOM_C64:
      loom__cpu_blas_get()->cgemv(CblasRowMajor, tr, rows, cols, one_c, a, lda, x, incx, acc ? one_c : zero_c,
                                  y, 1);
      break;
    default:
      loom__cpu_blas_get()->zgemv(CblasRowMajor, tr, rows, cols, one_z, a, lda, x, incx, acc ? one_z : zero_z,
                                  y, 1);
      break;
  }
}

/* c = op(a) op(b), or with acc c += it: beta = 1 skips OpenBLAS's pass clearing c (beta = 0),
 * which cost a loop of partial dots about a sixth of its time. */
static void blas_gemm(loom_dtype t, dot_fold fa, dot_fold fb, int n, int m, int k, const void *a,
                      const void *b, void *c, bool acc) {
  static const float one_c[2] = {1, 0}, zero_c[2] = {0, 0};
  static const double one_z[2] = {1, 0}, zero_z[2] = {0, 0};
  switch (t) {
    case LOOM_F32:
      loom__cpu_blas_get()->sgemm(CblasRowMajor, fa.trans, fb.trans, n, m, k, 1.0f, a, fa.ld, b, fb.ld,
                                  acc ? 1.0f : 0.0f, c, m);
      break;
    case LOOM_F64:
      loom__cpu_blas_get()->dgemm(CblasRowMajor, fa.trans, fb.trans, n, m, k, 1.0, a, fa.ld, b, fb.ld,
                                  acc ? 1.0 : 0.0, c, m);
      break;
    case LOOM_C64:
      loom__cpu_blas_get()->cgemm(CblasRowMajor, fa.trans, fb.trans, n, m, k, one_c, a, fa.ld, b, fb.ld,
                                  acc ? one_c : zero_c, c, m);
      break;
    default:
      loom__cpu_blas_get()->zgemm(CblasRowMajor, fa.trans, fb.trans, n, m, k, one_z, a, fa.ld, b, fb.ld,
                                  acc ? one_z : zero_z, c, m);
      break;
  }
}

/* One batch element through BLAS: gemv when one side is a vector, else gemm. */
static void blas_one(const dot_problem *p, int64_t bi, dot_fold fa, dot_fold fb) {
  int64_t es = loom_dtype_size(p->dtype);
  const char *a = p->a.data + loom__batch_offset(bi, p->nb, p->bdims, p->a.bs) * es;
  const char *b = p->b.data + loom__batch_offset(bi, p->nb, p->bdims, p->b.bs) * es;
  char *c = p->c + bi * p->n * p->m * es;
  int n = (int)p->n, m = (int)p->m, k = (int)p->k;
  if (m == 1) { /* c[n] = op(A) b, b a column: its step is its row stride */
    int incb = p->k == 1 ? 1 : (int)p->b.rs;
    if (fa.trans == CblasNoTrans)
      blas_gemv(p->dtype, CblasNoTrans, n, k, a, fa.ld, b, incb, c, p->accumulate);
    else
      blas_gemv(p->dtype, CblasTrans, k, n, a, fa.ld, b, incb, c, p->accumulate);
  } else if (n == 1) { /* c[m] = op(B)^T a, a a row: its step is its column stride */
    int inca = p->k == 1 ? 1 : (int)p->a.cs;
    if (fb.trans == CblasNoTrans)
      blas_gemv(p->dtype, CblasTrans, k, m, b, fb.ld, a, inca, c, p->accumulate);
    else
      blas_gemv(p->dtype, CblasNoTrans, m, k, b, fb.ld, a, inca, c, p->accumulate);
  } else {
    blas_gemm(p->dtype, fa, fb, n, m, k, a, b, c, p->accumulate);
  }
}

static bool fits_blas(const dot_problem *p) {
  return p->n <= INT_MAX && p->m <= INT_MAX && p->k <= INT_MAX;
}

/* The float and complex path: fold or pack both operands, then BLAS or the plain loop. */
static loom_status dot_float(dot_problem *p, loom__cpu_arena *ar) {
  dot_fold fa = {0}, fb = {0};
  bool small = p->batch >= 2 && p->n * p->k * p->m <= DOT_SMALL_MACS;
  if (small || !fits_blas(p)) {
    dot_loop(p); /* reads any strides: nothing to pack */
    return LOOM_OK;
  }
  loom_status s = LOOM_OK;
  if (!fold(&p->a, &fa)) s = pack(&p->a, p, p->dtype, ar);
  if (!s && !fold(&p->b, &fb)) s = pack(&p->b, p, p->dtype, ar);
  if (s) return s;
  fold(&p->a, &fa); /* packed operands fold as NoTrans */
  fold(&p->b, &fb);
  for (int64_t bi = 0; bi < p->batch; bi++) blas_one(p, bi, fa, fb);
  return LOOM_OK;
}

/* f16/bf16: both operands packed to f32, the product in f32, rounded on store. */
static loom_status dot_half(dot_problem *p, loom__cpu_arena *ar) {
  loom_dtype storage = p->dtype;
  char *out = p->c;
  bool acc = p->accumulate;
  int64_t total = p->batch * p->n * p->m;
  float *c32 = loom__cpu_arena_take(ar, total * (int64_t)sizeof(float), false);
  if (!c32) return loom__oom("dot: f32 result of an f16/bf16 product");
  loom_status s = pack(&p->a, p, LOOM_F32, ar);
  if (!s) s = pack(&p->b, p, LOOM_F32, ar);
  if (s) return s;
  p->dtype = LOOM_F32;
  p->c = (char *)c32;
  p->accumulate = false; /* the f32 product is fresh; the sum is taken on store, as an add would */
  s = dot_float(p, ar);
  if (s) return s;
  uint16_t *o = (uint16_t *)out;
  for (int64_t i = 0; i < total; i++) {
    float v = c32[i];
    if (acc) v += storage == LOOM_F16 ? loom_f16_to_f32(o[i]) : loom_bf16_to_f32(o[i]);
    o[i] = storage == LOOM_F16 ? loom_f32_to_f16(v) : loom_f32_to_bf16(v);
  }
  return LOOM_OK;
}

loom_status loom__cpu_dot(const loom_graph *g, const loom__op *op, const loom__view *in,
                          const loom__view *out, void *scratch, int64_t scratch_bytes) {
  return loom__cpu_dot_into(g, op, in, out, false, scratch, scratch_bytes);
}

loom_status loom__cpu_dot_into(const loom_graph *g, const loom__op *op, const loom__view *in,
                               const loom__view *out, bool accumulate, void *scratch, int64_t scratch_bytes) {
  (void)g;
  dot_problem p;
  loom_status s = dot_setup(&in[0], &in[1], &out[0], &p);
  if (s) return s;
  p.accumulate = accumulate;
  if (p.batch == 0 || p.n == 0 || p.m == 0 || (p.k == 0 && accumulate)) return LOOM_OK;
  if (p.k == 0) {
    memset(p.c, 0, (size_t)(p.batch * p.n * p.m * loom_dtype_size(p.dtype)));
    return LOOM_OK;
  }
  loom__cpu_arena ar = loom__cpu_arena_make(scratch, scratch_bytes);
  switch (p.dtype) {
    case LOOM_F32:
    case LOOM_F64:
    case LOOM_C64:
    case LOOM_C128:
      s = dot_float(&p, &ar);
      break;
    case LOOM_F16:
    case LOOM_BF16:
      s = dot_half(&p, &ar);
      break;
    default:
      if (!dot_loop(&p))
        s = loom__error(LOOM_ERR_UNSUPPORTED, "%s: dtype %s is not supported on cpu", loom_op_name(op->kind),
                        loom_dtype_name(p.dtype));
      break;
  }
  loom__cpu_arena_release(&ar);
  return s;
}
