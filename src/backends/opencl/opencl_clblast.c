/* dot through CLBlast (see opencl_blas.c for when it is used): one GEMM per batch element on
 * the device's queue, with transposes folded into the call as flags and CLBlast's temporary
 * buffer taken from the op's scratch (or, without a limit, from the executor's meter). Built
 * when CMake finds CLBlast; none/opencl_clblast_none.c stands in otherwise. */
#include <pthread.h>

#include <clblast_c.h>
#include <string.h>

#include "backends/opencl/opencl_backend.h"
#include "backends/shapes.h"

/* Products of at least this many multiply-adds per batch element go to CLBlast. */
#define BLAS_MIN_MACS (1 << 18)

/* ---- CLBlast -------------------------------------------------------------------------------- */

/* How a matrix goes to CLBlast (row-major) without a copy (loom__gpu_fold_matrix): NoTrans or
 * Trans and the leading dimension. */
typedef struct fold {
  CLBlastTranspose trans;
  size_t ld;
} fold;

static bool fold_matrix(int64_t rows, int64_t cols, int64_t rs, int64_t cs, fold *f) {
  bool transposed;
  int64_t ld;
  if (!loom__gpu_fold_matrix(rows, cols, rs, cs, &transposed, &ld)) return false;
  *f = (fold){transposed ? CLBlastTransposeYes : CLBlastTransposeNo, (size_t)ld};
  return true;
}

/* One thread in CLBlast at a time: before 1.6.1 (Debian 12 ships 1.5.3) its caches of
 * databases and programs were not safe to fill from two threads (CLBlast issue #486, fixed by
 * its pull request #495), and two devices' first GEMMs at once, as a shared run's workers make
 * them, crashed in Database's copy under TSan. The calls only enqueue work (the first one for a
 * device builds its program), so holding the lock costs little. */
static pthread_mutex_t clblast_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct blas_call {
  loom_dtype dt;
  fold fa, fb;
  size_t n, m, k, ao, bo, co;
} blas_call;

static CLBlastStatusCode temp_size(cl_command_queue q, const blas_call *b, size_t *size) {
  CLBlastLayout L = CLBlastLayoutRowMajor;
  switch (b->dt) {
    case LOOM_F32:
      return CLBlastSGemmTempBufferSize(L, b->fa.trans, b->fb.trans, b->n, b->m, b->k, b->ao, b->fa.ld, b->bo,
                                        b->fb.ld, b->co, b->m, &q, size);
    case LOOM_F64:
      return CLBlastDGemmTempBufferSize(L, b->fa.trans, b->fb.trans, b->n, b->m, b->k, b->ao, b->fa.ld, b->bo,
                                        b->fb.ld, b->co, b->m, &q, size);
    case LOOM_C64:
      return CLBlastCGemmTempBufferSize(L, b->fa.trans, b->fb.trans, b->n, b->m, b->k, b->ao, b->fa.ld, b->bo,
                                        b->fb.ld, b->co, b->m, &q, size);
    default:
      return CLBlastZGemmTempBufferSize(L, b->fa.trans, b->fb.trans, b->n, b->m, b->k, b->ao, b->fa.ld, b->bo,
                                        b->fb.ld, b->co, b->m, &q, size);
  }
}

static CLBlastStatusCode gemm(cl_command_queue q, const blas_call *b, cl_mem A, cl_mem B, cl_mem Cm,
                              cl_mem tmp) {
  CLBlastLayout L = CLBlastLayoutRowMajor;
  cl_float2 one_c = {{1, 0}}, zero_c = {{0, 0}};
  cl_double2 one_z = {{1, 0}}, zero_z = {{0, 0}};
  switch (b->dt) {
    case LOOM_F32:
      return CLBlastSgemmWithTempBuffer(L, b->fa.trans, b->fb.trans, b->n, b->m, b->k, 1.0f, A, b->ao,
                                        b->fa.ld, B, b->bo, b->fb.ld, 0.0f, Cm, b->co, b->m, &q, NULL, tmp);
    case LOOM_F64:
      return CLBlastDgemmWithTempBuffer(L, b->fa.trans, b->fb.trans, b->n, b->m, b->k, 1.0, A, b->ao,
                                        b->fa.ld, B, b->bo, b->fb.ld, 0.0, Cm, b->co, b->m, &q, NULL, tmp);
    case LOOM_C64:
      return CLBlastCgemmWithTempBuffer(L, b->fa.trans, b->fb.trans, b->n, b->m, b->k, one_c, A, b->ao,
                                        b->fa.ld, B, b->bo, b->fb.ld, zero_c, Cm, b->co, b->m, &q, NULL, tmp);
    default:
      return CLBlastZgemmWithTempBuffer(L, b->fa.trans, b->fb.trans, b->n, b->m, b->k, one_z, A, b->ao,
                                        b->fa.ld, B, b->bo, b->fb.ld, zero_z, Cm, b->co, b->m, &q, NULL, tmp);
  }
}

static loom_status blas_error(const loom__cl_device *d, CLBlastStatusCode code, const char *what) {
  const char *name = loom__cl_error_name((cl_int)code);
  loom_status s = code == CLBlastTempBufferAllocFailure || code == CLBlastInsufficientMemoryTemp
                      ? LOOM_ERR_OUT_OF_MEMORY
                      : LOOM_ERR_INTERNAL;
  return loom__error(s, "%s (%s): CLBlast %s failed with status %d%s%s%s", d->id, d->name, what, (int)code,
                     name ? " (" : "", name ? name : "", name ? ")" : "");
}

/* Runs the whole batch through CLBlast. *ran is false (and nothing enqueued) when CLBlast is
 * not the way: the caller then runs the kernel. */
loom_status loom__cl_clblast_dot(loom__cl_device *d, const loom__op_call *c, const lm_gemm *p, bool *ran) {
  *ran = false;
  loom_dtype dt = c->out[0].type.dtype;
  int32_t path = loom__cl_testing_blas_path();
  bool float_type = dt == LOOM_F32 || dt == LOOM_F64 || dt == LOOM_C64 || dt == LOOM_C128;
  if (!float_type || path == 1 || (path == 0 && p->n * p->m * p->k < BLAS_MIN_MACS)) return LOOM_OK;
  blas_call b = {.dt = dt, .n = (size_t)p->n, .m = (size_t)p->m, .k = (size_t)p->k};
  if (!fold_matrix(p->n, p->k, p->a_rs, p->a_cs, &b.fa) || !fold_matrix(p->k, p->m, p->b_rs, p->b_cs, &b.fb))
    return LOOM_OK;
  /* The largest temporary any batch element needs. */
  size_t need = 0;
  for (int64_t bi = 0; bi < p->batch; bi++) {
    b.ao = (size_t)(p->a_off + loom__batch_offset(bi, (int32_t)p->nb, p->bdims, p->a_bs));
    b.bo = (size_t)(p->b_off + loom__batch_offset(bi, (int32_t)p->nb, p->bdims, p->b_bs));
    b.co = (size_t)(p->c_off + bi * p->n * p->m);
    size_t size = 0;
    pthread_mutex_lock(&clblast_lock);
    CLBlastStatusCode st = temp_size(d->queue, &b, &size);
    pthread_mutex_unlock(&clblast_lock);
    if (st != CLBlastSuccess) return blas_error(d, st, "temporary buffer size");
    need = LOOM_MAX(need, size);
  }
  cl_mem tmp = NULL;
  void *extra = NULL;
  if (need > 0 && (int64_t)need <= c->scratch_bytes)
    tmp = (cl_mem)c->scratch;
  else if (need > 0 && c->temp_take) {
    if (c->temp_take(c->temp_ctx, (int64_t)need, &extra)) return LOOM_OK; /* no room: the kernel */
    tmp = (cl_mem)extra;
  } else if (need > 0) {
    return LOOM_OK;
  }
  loom_status s = LOOM_OK;
  for (int64_t bi = 0; !s && bi < p->batch; bi++) {
    b.ao = (size_t)(p->a_off + loom__batch_offset(bi, (int32_t)p->nb, p->bdims, p->a_bs));
    b.bo = (size_t)(p->b_off + loom__batch_offset(bi, (int32_t)p->nb, p->bdims, p->b_bs));
    b.co = (size_t)(p->c_off + bi * p->n * p->m);
    pthread_mutex_lock(&clblast_lock);
    CLBlastStatusCode st =
        gemm(d->queue, &b, (cl_mem)c->in[0].buffer, (cl_mem)c->in[1].buffer, (cl_mem)c->out[0].buffer, tmp);
    pthread_mutex_unlock(&clblast_lock);
    if (st != CLBlastSuccess) s = blas_error(d, st, "gemm");
  }
  if (extra) c->temp_give(c->temp_ctx, extra, (int64_t)need);
  *ran = s == LOOM_OK;
  return s;
}

void loom__cl_clblast_release(void) {
  pthread_mutex_lock(&clblast_lock);
  CLBlastClearCache();
  pthread_mutex_unlock(&clblast_lock);
}
