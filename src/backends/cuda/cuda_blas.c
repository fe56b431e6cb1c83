/* dot on a CUDA device: NumPy matmul ([..,n,k] x [..,k,m] -> [..,n,m], batch dims broadcast, 1-D
 * operands as NumPy).
 *
 * f32, f64, c64, c128, f16 and bf16 go to cuBLAS whenever each matrix is dense row-major or
 * dense column-major (a transposed view) as it sits in memory: cuBLAS is column-major, so the
 * row-major product C = A.B is computed as C^T = B^T.A^T, each operand's layout becoming a
 * transpose flag and a leading dimension, with no copy. The batch goes as strided batched
 * calls (one per element of the outer batch dims when they do not walk as one stride; one per
 * matrix when an operand is broadcast along the batch, stride 0). f16 and bf16 go through
 * cublasGemmStridedBatchedEx computing in f32 and rounding once on store, as the cpu backend
 * does. cuBLAS's workspace is the op's scratch (IR.md: 1x the output), set before every call,
 * so cuBLAS allocates nothing of its own under a limit. Everything else (integers, bool,
 * strided layouts, sizes beyond cuBLAS's 32-bit ints, or no cuBLAS) runs the gemm kernel
 * (kernels/cuda/dot.cu), which reads the operands in place.
 */
#include <string.h>

#include "backends/cuda/cuda_libs.h"

/* ---- the problem ------------------------------------------------------------------------ */

static void operand_batch_strides(const loom__dview *v, int32_t mat_rank, int32_t nb, int64_t *bs) {
  int32_t own = v->type.rank - mat_rank;
  for (int32_t i = 0; i < nb; i++) {
    int32_t j = i - (nb - own);
    bs[i] = (j >= 0 && v->type.dims[j] != 1) ? v->strides[j] : 0;
  }
}

static loom_status dot_setup(const loom__cu_device *d, const loom__op_call *c, lm_gemm *p) {
  const loom__dview *va = &c->in[0], *vb = &c->in[1], *out = &c->out[0];
  int32_t ra = va->type.rank, rb = vb->type.rank;
  memset(p, 0, sizeof *p);
  if (ra < 1 || rb < 1)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: dot: operands must have at least one dimension",
                       d->id);
  p->n = ra >= 2 ? va->type.dims[ra - 2] : 1;
  p->k = va->type.dims[ra - 1];
  p->m = rb >= 2 ? vb->type.dims[rb - 1] : 1;
  int64_t kb = rb >= 2 ? vb->type.dims[rb - 2] : vb->type.dims[0];
  p->nb = out->type.rank - (ra >= 2) - (rb >= 2);
  if (kb != p->k || p->nb < 0 || p->nb > LM_RANK || va->type.dtype != out->type.dtype ||
      vb->type.dtype != out->type.dtype)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: dot: operand and result types do not agree", d->id);
  p->batch = 1;
  for (int32_t i = 0; i < p->nb; i++) {
    p->bdims[i] = out->type.dims[i];
    p->batch *= p->bdims[i];
  }
  p->a_rs = ra >= 2 ? va->strides[ra - 2] : 0;
  p->a_cs = va->strides[ra - 1];
  p->b_rs = rb >= 2 ? vb->strides[rb - 2] : vb->strides[0];
  p->b_cs = rb >= 2 ? vb->strides[rb - 1] : 0;
  operand_batch_strides(va, ra >= 2 ? 2 : 1, (int32_t)p->nb, p->a_bs);
  operand_batch_strides(vb, rb >= 2 ? 2 : 1, (int32_t)p->nb, p->b_bs);
  p->a_off = va->offset;
  p->b_off = vb->offset;
  p->c_off = out->offset;
  return LOOM_OK;
}

/* ---- cuBLAS ---------------------------------------------------------------------------------- */

/* How a row-major rows x cols matrix with strides (rs, cs) goes to cuBLAS without a copy: as
 * the column-major matrix its memory holds (its transpose, op N, when it is row-major dense;
 * itself, op T, when it is column-major dense) and the leading dimension. The stride of a
 * dimension of size 1 is free, so vectors fold too. */
typedef struct fold {
  cublasOperation_t op;
  int64_t ld;
} fold;

static bool fold_matrix(int64_t rows, int64_t cols, int64_t rs, int64_t cs, fold *f) {
  int64_t r = rows == 1 ? cols : rs, q = cols == 1 ? 1 : cs;
  if (q == 1 && r >= LOOM_MAX(cols, 1)) {
    *f = (fold){CUBLAS_OP_N, LOOM_MAX(r, 1)};
    return true;
  }
  r = rows == 1 ? 1 : rs;
  q = cols == 1 ? rows : cs;
  if (r == 1 && q >= LOOM_MAX(rows, 1)) {
    *f = (fold){CUBLAS_OP_T, LOOM_MAX(q, 1)};
    return true;
  }
  return false;
}

/* One strided batched product: `count` matrices at element offsets ao, bo, co, stepping by
 * sa, sb and n*m. */
typedef struct blas_call {
  loom_dtype dt;
  fold fa, fb;
  int64_t n, m, k, ao, bo, co, sa, sb, count;
} blas_call;

static cudaDataType data_type(loom_dtype dt) {
  return dt == LOOM_F16 ? CUDA_R_16F : CUDA_R_16BF;
}

static cublasStatus_t gemm(const loom__cublas_api *api, cublasHandle_t h, const blas_call *b, const void *A,
                           const void *B, void *C) {
  int64_t es = loom_dtype_size(b->dt);
  const char *pa = (const char *)A + b->ao * es, *pb = (const char *)B + b->bo * es;
  char *pc = (char *)C + b->co * es;
  int m = (int)b->m, n = (int)b->n, k = (int)b->k, lda = (int)b->fa.ld, ldb = (int)b->fb.ld,
      count = (int)b->count;
  long long sa = b->sa, sb = b->sb, sc = b->n * b->m;
  /* C^T (m x n) = op(B) (m x k) . op(A) (k x n), column-major. One matrix is a plain gemm, the
   * call a program would make. */
  if (count == 1) switch (b->dt) {
      case LOOM_F32: {
        const float one = 1, zero = 0;
        return api->cublasSgemm_v2(h, b->fb.op, b->fa.op, m, n, k, &one, (const float *)pb, ldb,
                                   (const float *)pa, lda, &zero, (float *)pc, m);
      }
      case LOOM_F64: {
        const double one = 1, zero = 0;
        return api->cublasDgemm_v2(h, b->fb.op, b->fa.op, m, n, k, &one, (const double *)pb, ldb,
                                   (const double *)pa, lda, &zero, (double *)pc, m);
      }
      case LOOM_C64: {
        const cuComplex one = {1, 0}, zero = {0, 0};
        return api->cublasCgemm_v2(h, b->fb.op, b->fa.op, m, n, k, &one, (const cuComplex *)pb, ldb,
                                   (const cuComplex *)pa, lda, &zero, (cuComplex *)pc, m);
      }
      case LOOM_C128: {
        const cuDoubleComplex one = {1, 0}, zero = {0, 0};
        return api->cublasZgemm_v2(h, b->fb.op, b->fa.op, m, n, k, &one, (const cuDoubleComplex *)pb, ldb,
                                   (const cuDoubleComplex *)pa, lda, &zero, (cuDoubleComplex *)pc, m);
      }
      default:
        break;
    }
  switch (b->dt) {
    case LOOM_F32: {
      const float one = 1, zero = 0;
      return api->cublasSgemmStridedBatched(h, b->fb.op, b->fa.op, m, n, k, &one, (const float *)pb, ldb, sb,
                                            (const float *)pa, lda, sa, &zero, (float *)pc, m, sc, count);
    }
    case LOOM_F64: {
      const double one = 1, zero = 0;
      return api->cublasDgemmStridedBatched(h, b->fb.op, b->fa.op, m, n, k, &one, (const double *)pb, ldb, sb,
                                            (const double *)pa, lda, sa, &zero, (double *)pc, m, sc, count);
    }
    case LOOM_C64: {
      const cuComplex one = {1, 0}, zero = {0, 0};
      return api->cublasCgemmStridedBatched(h, b->fb.op, b->fa.op, m, n, k, &one, (const cuComplex *)pb, ldb,
                                            sb, (const cuComplex *)pa, lda, sa, &zero, (cuComplex *)pc, m, sc,
                                            count);
    }
    case LOOM_C128: {
      const cuDoubleComplex one = {1, 0}, zero = {0, 0};
      return api->cublasZgemmStridedBatched(h, b->fb.op, b->fa.op, m, n, k, &one, (const cuDoubleComplex *)pb,
                                            ldb, sb, (const cuDoubleComplex *)pa, lda, sa, &zero,
                                            (cuDoubleComplex *)pc, m, sc, count);
    }
    default: { /* f16, bf16: f32 arithmetic, one rounding on store */
      const float one = 1, zero = 0;
      cudaDataType t = data_type(b->dt);
      return api->cublasGemmStridedBatchedEx(h, b->fb.op, b->fa.op, m, n, k, &one, pb, t, ldb, sb, pa, t, lda,
                                             sa, &zero, pc, t, m, sc, count, CUBLAS_COMPUTE_32F,
                                             CUBLAS_GEMM_DEFAULT);
    }
  }
}

static loom_status blas_error(const loom__cu_device *d, const loom__cublas_api *api, cublasStatus_t st,
                              const char *call) {
  loom_status s = st == CUBLAS_STATUS_ALLOC_FAILED      ? LOOM_ERR_OUT_OF_MEMORY
                  : st == CUBLAS_STATUS_NOT_SUPPORTED   ? LOOM_ERR_UNSUPPORTED
                  : st == CUBLAS_STATUS_NOT_INITIALIZED ? LOOM_ERR_UNAVAILABLE
                                                        : LOOM_ERR_INTERNAL;
  return loom__error(s, "%s (%s): %s failed: %s (%d)", d->id, d->name, call, api->cublasGetStatusName(st),
                     (int)st);
}

/* The device's handle, made on first use; its stream is the device's. */
static loom_status blas_handle(loom__cu_device *d, const loom__cublas_api *api, cublasHandle_t *out) {
  if (!d->blas) {
    cublasHandle_t h = NULL;
    cublasStatus_t st = api->cublasCreate_v2(&h);
    if (st != CUBLAS_STATUS_SUCCESS) return blas_error(d, api, st, "cublasCreate");
    /* cublasSetStream also resets the workspace, so it is set once, here. */
    if ((st = api->cublasSetStream_v2(h, d->stream)) != CUBLAS_STATUS_SUCCESS) {
      api->cublasDestroy_v2(h);
      return blas_error(d, api, st, "cublasSetStream");
    }
    d->blas = h;
  }
  *out = d->blas;
  return LOOM_OK;
}

void loom__cu_blas_release(loom__cu_device *d) {
  if (d->blas) loom__cublas()->cublasDestroy_v2((cublasHandle_t)d->blas); /* made only when loaded */
  d->blas = NULL;
}

static bool fits_int(int64_t v) {
  return v >= 0 && v <= INT32_MAX;
}

/* The batch element bi's offset in an operand with batch strides bs over dims [0, nb). */
static int64_t batch_offset(const lm_gemm *p, int32_t nb, int64_t bi, const int64_t *bs) {
  int64_t off = 0;
  for (int32_t i = nb - 1; i >= 0; i--) {
    off += (bi % p->bdims[i]) * bs[i];
    bi /= p->bdims[i];
  }
  return off;
}

/* Runs the whole batch through cuBLAS when it is the way; *ran false (nothing enqueued)
 * otherwise. */
static loom_status run_cublas(loom__cu_device *d, const loom__op_call *c, const lm_gemm *p, bool *ran) {
  *ran = false;
  loom_dtype dt = c->out[0].type.dtype;
  const loom__cublas_api *api = loom__cublas();
  bool takes = dt == LOOM_F32 || dt == LOOM_F64 || dt == LOOM_C64 || dt == LOOM_C128 || dt == LOOM_F16 ||
               dt == LOOM_BF16;
  blas_call b = {.dt = dt, .n = p->n, .m = p->m, .k = p->k};
  if (!api || !takes || loom__cu_testing_blas_path() == 1 || !fits_int(p->n) || !fits_int(p->m) ||
      !fits_int(p->k) || !fold_matrix(p->n, p->k, p->a_rs, p->a_cs, &b.fa) ||
      !fold_matrix(p->k, p->m, p->b_rs, p->b_cs, &b.fb) || !fits_int(b.fa.ld) || !fits_int(b.fb.ld))
    return LOOM_OK;
  cublasHandle_t h = NULL;
  loom_status s = blas_handle(d, api, &h);
  if (s) return s;
  cublasStatus_t st = api->cublasSetWorkspace_v2(h, c->scratch_bytes > 0 ? c->scratch : NULL,
                                                 c->scratch_bytes > 0 ? (size_t)c->scratch_bytes : 0);
  if (st != CUBLAS_STATUS_SUCCESS) return blas_error(d, api, st, "cublasSetWorkspace");
  /* The innermost batch dim goes as one strided batched call when neither operand is broadcast
   * along it; the dims outside it (or every matrix, when one is) are a loop of calls. */
  int32_t nb = (int32_t)p->nb;
  bool inner = nb > 0 && p->a_bs[nb - 1] != 0 && p->b_bs[nb - 1] != 0 && fits_int(p->bdims[nb - 1]);
  b.count = inner ? p->bdims[nb - 1] : 1;
  b.sa = inner ? p->a_bs[nb - 1] : 0;
  b.sb = inner ? p->b_bs[nb - 1] : 0;
  int32_t outer_rank = inner ? nb - 1 : nb;
  int64_t calls = p->batch / b.count;
  for (int64_t i = 0; i < calls; i++) {
    b.ao = p->a_off + batch_offset(p, outer_rank, i, p->a_bs);
    b.bo = p->b_off + batch_offset(p, outer_rank, i, p->b_bs);
    b.co = p->c_off + i * b.count * p->n * p->m;
    st = gemm(api, h, &b, c->in[0].buffer, c->in[1].buffer, c->out[0].buffer);
    if (st != CUBLAS_STATUS_SUCCESS) return blas_error(d, api, st, "cublas gemm (strided batched)");
  }
  *ran = true;
  return LOOM_OK;
}

/* ---- dot ---------------------------------------------------------------------------------- */

loom_status loom__cu_dot(void *dev, const loom__op_call *c) {
  loom__cu_device *d = dev;
  lm_gemm p;
  loom_status s = dot_setup(d, c, &p);
  if (s) return s;
  loom_dtype dt = c->out[0].type.dtype; /* the gemm kernel takes every dtype */
  if (p.batch == 0 || p.n == 0 || p.m == 0) return LOOM_OK;
  int64_t es = loom_dtype_size(dt);
  if (p.k == 0)
    return loom__cu_check(d,
                          cudaMemsetAsync((char *)c->out[0].buffer + p.c_off * es, 0,
                                          (size_t)(p.batch * p.n * p.m * es), d->stream),
                          "cudaMemsetAsync");
  bool ran = false;
  s = run_cublas(d, c, &p, &ran);
  if (s || ran) return s;
  /* The kernel's grid: 16-row tiles on grid dim y, which stops at 65535. */
  if ((p.n + 15) / 16 > 65535)
    return loom__error(LOOM_ERR_UNSUPPORTED,
                       "%s: dot on %s: %lld rows are more than the gemm kernel takes (%d)", d->id,
                       loom_dtype_name(dt), (long long)p.n, 65535 * 16);
  return loom__cu_check(
      d, loom__cu_gemm(d->stream, (int)dt, c->in[0].buffer, c->in[1].buffer, c->out[0].buffer, &p),
      "the gemm kernel");
}
