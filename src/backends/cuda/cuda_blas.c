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
#include "backends/shapes.h"

/* ---- cuBLAS ---------------------------------------------------------------------------------- */

/* How a row-major matrix goes to cuBLAS without a copy (loom__gpu_fold_matrix): as the
 * column-major matrix its memory holds (its transpose, op N, when it is row-major dense;
 * itself, op T, when it is column-major dense) and the leading dimension. */
typedef struct fold {
  cublasOperation_t op;
  int64_t ld;
} fold;

static bool fold_matrix(int64_t rows, int64_t cols, int64_t rs, int64_t cs, fold *f) {
  bool transposed;
  if (!loom__gpu_fold_matrix(rows, cols, rs, cs, &transposed, &f->ld)) return false;
  f->op = transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  return true;
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
    b.ao = p->a_off + loom__batch_offset(i, outer_rank, p->bdims, p->a_bs);
    b.bo = p->b_off + loom__batch_offset(i, outer_rank, p->bdims, p->b_bs);
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
  loom_status s = loom__gpu_dot_setup(d->id, c, &p);
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
