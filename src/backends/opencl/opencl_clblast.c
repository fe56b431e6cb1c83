/* dot through CLBlast (see opencl_blas.c for when it is used): one GEMM per batch element on
 * the device's queue, with transposes folded into the call as flags and CLBlast's temporary
 * buffer taken from the op's scratch (or, without a limit, from the executor's meter), the
 * product cut into blocks where its temporaries would not fit the scratch. Built when CMake
 * finds CLBlast; none/opencl_clblast_none.c stands in otherwise. */
#include <pthread.h>

#include <clblast_c.h>
#include <stdatomic.h>
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

/* One thread in CLBlast at a time while it fills its caches: before 1.6.1 (Debian 12 ships
 * 1.5.3) two threads storing the same binary at once made the second fail (CLBlast issue #486,
 * fixed by its pull request #495: its binary cache is keyed by the device's name, which two
 * PoCL devices share), and two devices' first GEMMs at once, as a shared run's workers make
 * them, crashed there under TSan. A device's first GEMM in a precision stores everything its
 * later calls use (the routine's one program holds every GEMM kernel, direct and indirect, and
 * its databases); the temporary-size query stores only two databases, so it does not count.
 * After that first GEMM the device's calls only read the caches, under CLBlast's own lock,
 * and run without ours. Holding ours through every call would serialize the devices: on
 * PoCL's basic devices a call runs its kernels before it returns. */
static pthread_mutex_t clblast_lock = PTHREAD_MUTEX_INITIALIZER;

#define WARM_MAX 64
static struct {
  const loom__cl_device *device;
  loom_dtype dt;
} warm[WARM_MAX]; /* the (device, precision) pairs whose first call is done; under the lock */
static int32_t n_warm;

/* Before a CLBlast call on d for dt: takes the lock unless the pair is warm; returns whether
 * it is held. */
static bool clblast_enter(const loom__cl_device *d, loom_dtype dt) {
  pthread_mutex_lock(&clblast_lock);
  for (int32_t i = 0; i < n_warm; i++) {
    if (warm[i].device == d && warm[i].dt == dt) {
      pthread_mutex_unlock(&clblast_lock);
      return false;
    }
  }
  return true;
}

/* After it: a GEMM that succeeded under the lock (`warmed`) makes the pair warm (a full table
 * only keeps later pairs locked); the lock is let go where it was held. */
static void clblast_leave(const loom__cl_device *d, loom_dtype dt, bool held, bool warmed) {
  if (!held) return;
  if (warmed && n_warm < WARM_MAX) {
    warm[n_warm].device = d;
    warm[n_warm++].dt = dt;
  }
  pthread_mutex_unlock(&clblast_lock);
}

/* One CLBlast GEMM: C[n x m] (leading dimension ldc) = A . B, or += where `add`. */
typedef struct blas_call {
  loom_dtype dt;
  fold fa, fb;
  size_t n, m, k, ao, bo, co, ldc;
  bool add;
} blas_call;

static CLBlastStatusCode temp_size(cl_command_queue q, const blas_call *b, size_t *size) {
  CLBlastLayout L = CLBlastLayoutRowMajor;
  switch (b->dt) {
    case LOOM_F32:
      return CLBlastSGemmTempBufferSize(L, b->fa.trans, b->fb.trans, b->n, b->m, b->k, b->ao, b->fa.ld, b->bo,
                                        b->fb.ld, b->co, b->ldc, &q, size);
    case LOOM_F64:
      return CLBlastDGemmTempBufferSize(L, b->fa.trans, b->fb.trans, b->n, b->m, b->k, b->ao, b->fa.ld, b->bo,
                                        b->fb.ld, b->co, b->ldc, &q, size);
    case LOOM_C64:
      return CLBlastCGemmTempBufferSize(L, b->fa.trans, b->fb.trans, b->n, b->m, b->k, b->ao, b->fa.ld, b->bo,
                                        b->fb.ld, b->co, b->ldc, &q, size);
    default:
      return CLBlastZGemmTempBufferSize(L, b->fa.trans, b->fb.trans, b->n, b->m, b->k, b->ao, b->fa.ld, b->bo,
                                        b->fb.ld, b->co, b->ldc, &q, size);
  }
}

static CLBlastStatusCode gemm(cl_command_queue q, const blas_call *b, cl_mem A, cl_mem B, cl_mem Cm,
                              cl_mem tmp) {
  CLBlastLayout L = CLBlastLayoutRowMajor;
  cl_float2 one_c = {{1, 0}}, beta_c = {{b->add ? 1.0f : 0.0f, 0}};
  cl_double2 one_z = {{1, 0}}, beta_z = {{b->add ? 1.0 : 0.0, 0}};
  switch (b->dt) {
    case LOOM_F32:
      return CLBlastSgemmWithTempBuffer(L, b->fa.trans, b->fb.trans, b->n, b->m, b->k, 1.0f, A, b->ao,
                                        b->fa.ld, B, b->bo, b->fb.ld, b->add ? 1.0f : 0.0f, Cm, b->co, b->ldc,
                                        &q, NULL, tmp);
    case LOOM_F64:
      return CLBlastDgemmWithTempBuffer(L, b->fa.trans, b->fb.trans, b->n, b->m, b->k, 1.0, A, b->ao,
                                        b->fa.ld, B, b->bo, b->fb.ld, b->add ? 1.0 : 0.0, Cm, b->co, b->ldc,
                                        &q, NULL, tmp);
    case LOOM_C64:
      return CLBlastCgemmWithTempBuffer(L, b->fa.trans, b->fb.trans, b->n, b->m, b->k, one_c, A, b->ao,
                                        b->fa.ld, B, b->bo, b->fb.ld, beta_c, Cm, b->co, b->ldc, &q, NULL,
                                        tmp);
    default:
      return CLBlastZgemmWithTempBuffer(L, b->fa.trans, b->fb.trans, b->n, b->m, b->k, one_z, A, b->ao,
                                        b->fa.ld, B, b->bo, b->fb.ld, beta_z, Cm, b->co, b->ldc, &q, NULL,
                                        tmp);
  }
}

/* CLBlast's own codes (from -1000 down); above them its codes are OpenCL's. */
static const char *clblast_code_name(CLBlastStatusCode code) {
  switch (code) {
#define NAME(c)    \
  case CLBlast##c: \
    return #c
    NAME(NotImplemented);
    NAME(InvalidMatrixA);
    NAME(InvalidMatrixB);
    NAME(InvalidMatrixC);
    NAME(InvalidDimension);
    NAME(InvalidLeadDimA);
    NAME(InvalidLeadDimB);
    NAME(InvalidLeadDimC);
    NAME(InsufficientMemoryA);
    NAME(InsufficientMemoryB);
    NAME(InsufficientMemoryC);
    NAME(InsufficientMemoryTemp);
    NAME(InvalidLocalMemUsage);
    NAME(NoHalfPrecision);
    NAME(NoDoublePrecision);
    NAME(DatabaseError);
    NAME(UnknownError);
    NAME(UnexpectedError);
#undef NAME
    default:
      return code > -1000 ? loom__cl_error_name((cl_int)code) : NULL;
  }
}

static loom_status blas_error(const loom__cl_device *d, CLBlastStatusCode code, const char *what) {
  const char *name = clblast_code_name(code);
  loom_status s = code == CLBlastTempBufferAllocFailure || code == CLBlastInsufficientMemoryTemp
                      ? LOOM_ERR_OUT_OF_MEMORY
                      : LOOM_ERR_INTERNAL;
  return loom__error(s, "%s (%s): CLBlast %s failed with status %d%s%s%s", d->id, d->name, what, (int)code,
                     name ? " (" : "", name ? name : "", name ? ")" : "");
}

/* ---- blocks ------------------------------------------------------------------------------- */

/* Under a limit CLBlast's temporaries must fit the op's scratch (1x the output, IR.md), and
 * its indirect GEMM wants more from about 1024^3 on (padded copies of A and B: 2x the output
 * for a square product). Rather than leave such a product to the plain kernel (fifteen times
 * slower on PoCL), the product is cut into blocks of C's rows and columns, and of k (each
 * block after the first of k adding to C), halved until every block's temporaries fit. */
#define BLOCK_MIN 64
#define BLOCK_CALLS_MAX 4096

static _Atomic int64_t blocked_dots; /* loom__opencl_testing_blocked_dots */

int64_t loom__opencl_testing_blocked_dots(void) {
  return blocked_dots;
}

typedef struct blocking {
  size_t bn, bm, bk; /* block sizes; the last block of each dim may be smaller */
} blocking;

static size_t blocks_of(size_t len, size_t block) {
  return (len + block - 1) / block;
}

/* Block (i, j, l) of product `whole` (batch element offsets in it) under blocking bl. */
static blas_call block_call(const blas_call *whole, const lm_gemm *p, const blocking *bl, size_t i, size_t j,
                            size_t l) {
  blas_call b = *whole;
  size_t r0 = i * bl->bn, c0 = j * bl->bm, k0 = l * bl->bk;
  b.n = LOOM_MIN(bl->bn, whole->n - r0);
  b.m = LOOM_MIN(bl->bm, whole->m - c0);
  b.k = LOOM_MIN(bl->bk, whole->k - k0);
  b.ao = whole->ao + (size_t)((int64_t)r0 * p->a_rs + (int64_t)k0 * p->a_cs);
  b.bo = whole->bo + (size_t)((int64_t)k0 * p->b_rs + (int64_t)c0 * p->b_cs);
  b.co = whole->co + r0 * whole->ldc + c0;
  b.add = l > 0;
  return b;
}

/* The largest temporary any block of `whole` needs under bl, into *need. */
static CLBlastStatusCode blocks_need(cl_command_queue q, const blas_call *whole, const lm_gemm *p,
                                     const blocking *bl, size_t *need) {
  *need = 0;
  for (size_t i = 0; i < blocks_of(whole->n, bl->bn); i++) {
    for (size_t j = 0; j < blocks_of(whole->m, bl->bm); j++) {
      for (size_t l = 0; l < blocks_of(whole->k, bl->bk); l++) {
        blas_call b = block_call(whole, p, bl, i, j, l);
        size_t size = 0;
        CLBlastStatusCode st = temp_size(q, &b, &size);
        if (st != CLBlastSuccess) return st;
        *need = LOOM_MAX(*need, size);
      }
    }
  }
  return CLBlastSuccess;
}

/* Halves the largest block dim above BLOCK_MIN; false when none is left or the calls would
 * be too many. */
static bool halve(const blas_call *whole, blocking *bl) {
  size_t *dims[3] = {&bl->bn, &bl->bm, &bl->bk}, *largest = NULL;
  for (int d = 0; d < 3; d++) {
    if (*dims[d] > BLOCK_MIN && (!largest || *dims[d] > *largest)) largest = dims[d];
  }
  if (!largest) return false;
  *largest = (*largest + 1) / 2;
  return blocks_of(whole->n, bl->bn) * blocks_of(whole->m, bl->bm) * blocks_of(whole->k, bl->bk) <=
         BLOCK_CALLS_MAX;
}

/* Before a product's first block: a device's first GEMM in a precision, under the lock, is a
 * 1 x 1 x 1 product into C's first element (which the product then overwrites, its first
 * block not adding): it fills CLBlast's caches and runs next to nothing, so the product's own
 * kernels, which on PoCL run inside the call, run unlocked beside the other devices'. */
static CLBlastStatusCode warm_up(loom__cl_device *d, const blas_call *first, cl_mem A, cl_mem B, cl_mem C) {
  if (!clblast_enter(d, first->dt)) return CLBlastSuccess;
  blas_call one = *first;
  one.n = one.m = one.k = 1;
  one.add = false;
  CLBlastStatusCode st = gemm(d->queue, &one, A, B, C, NULL);
  clblast_leave(d, first->dt, true, st == CLBlastSuccess);
  return st;
}

/* The batch's element bi as one call. */
static blas_call element_call(const blas_call *whole, const lm_gemm *p, int64_t bi) {
  blas_call b = *whole;
  b.ao = (size_t)(p->a_off + loom__batch_offset(bi, (int32_t)p->nb, p->bdims, p->a_bs));
  b.bo = (size_t)(p->b_off + loom__batch_offset(bi, (int32_t)p->nb, p->bdims, p->b_bs));
  b.co = (size_t)(p->c_off + bi * p->n * p->m);
  return b;
}

/* The blocking of the whole batch (whole blocks first) whose temporaries fit `room` bytes, and
 * the largest temporary it needs; false when none does. */
static bool fit_blocks(loom__cl_device *d, const blas_call *whole, const lm_gemm *p, size_t room,
                       blocking *bl, size_t *need, CLBlastStatusCode *st) {
  *bl = (blocking){whole->n, whole->m, whole->k};
  for (;;) {
    *need = 0;
    for (int64_t bi = 0; bi < p->batch; bi++) {
      blas_call e = element_call(whole, p, bi);
      size_t size = 0;
      if ((*st = blocks_need(d->queue, &e, p, bl, &size)) != CLBlastSuccess) return false;
      *need = LOOM_MAX(*need, size);
    }
    if (*need <= room) return true;
    if (!halve(whole, bl)) return false;
  }
}

/* Runs the whole batch through CLBlast. *ran is false (and nothing enqueued) when CLBlast is
 * not the way: the caller then runs the kernel. */
loom_status loom__cl_clblast_dot(loom__cl_device *d, const loom__op_call *c, const lm_gemm *p, bool *ran) {
  *ran = false;
  loom_dtype dt = c->out[0].type.dtype;
  int32_t path = loom__cl_testing_blas_path();
  bool float_type = dt == LOOM_F32 || dt == LOOM_F64 || dt == LOOM_C64 || dt == LOOM_C128;
  if (!float_type || path == 1 || (path == 0 && p->n * p->m * p->k < BLAS_MIN_MACS)) return LOOM_OK;
  blas_call whole = {.dt = dt, .n = (size_t)p->n, .m = (size_t)p->m, .k = (size_t)p->k, .ldc = (size_t)p->m};
  if (!fold_matrix(p->n, p->k, p->a_rs, p->a_cs, &whole.fa) ||
      !fold_matrix(p->k, p->m, p->b_rs, p->b_cs, &whole.fb))
    return LOOM_OK;
  /* The whole product in one call per batch element where its temporaries fit the scratch,
   * or, without a limit, what the executor's meter can lend; else in blocks within the
   * scratch. */
  blocking bl;
  size_t need = 0;
  CLBlastStatusCode st = CLBlastSuccess;
  bool held = clblast_enter(d, dt);
  bool fits = fit_blocks(d, &whole, p, SIZE_MAX, &bl, &need, &st);
  clblast_leave(d, dt, held, false);
  if (!fits) return blas_error(d, st, "temporary buffer size");
  cl_mem tmp = NULL;
  void *extra = NULL;
  if (need > 0 && (int64_t)need <= c->scratch_bytes) {
    tmp = (cl_mem)c->scratch;
  } else if (need > 0 && c->temp_take && c->temp_take(c->temp_ctx, (int64_t)need, &extra) == LOOM_OK) {
    tmp = (cl_mem)extra;
  } else if (need > 0) {
    held = clblast_enter(d, dt);
    fits = fit_blocks(d, &whole, p, (size_t)LOOM_MAX(c->scratch_bytes, 0), &bl, &need, &st);
    clblast_leave(d, dt, held, false);
    if (!fits && st != CLBlastSuccess) return blas_error(d, st, "temporary buffer size");
    if (!fits) return LOOM_OK; /* no blocking fits the scratch: the kernel */
    tmp = need > 0 ? (cl_mem)c->scratch : NULL;
    blocked_dots++;
  }
  cl_mem A = (cl_mem)c->in[0].buffer, B = (cl_mem)c->in[1].buffer, C = (cl_mem)c->out[0].buffer;
  blas_call first = element_call(&whole, p, 0);
  first = block_call(&first, p, &bl, 0, 0, 0);
  st = warm_up(d, &first, A, B, C);
  loom_status s = st == CLBlastSuccess ? LOOM_OK : blas_error(d, st, "gemm");
  for (int64_t bi = 0; !s && bi < p->batch; bi++) {
    blas_call e = element_call(&whole, p, bi);
    for (size_t i = 0; !s && i < blocks_of(e.n, bl.bn); i++) {
      for (size_t j = 0; !s && j < blocks_of(e.m, bl.bm); j++) {
        for (size_t l = 0; !s && l < blocks_of(e.k, bl.bk); l++) {
          blas_call b = block_call(&e, p, &bl, i, j, l);
          st = gemm(d->queue, &b, A, B, C, tmp);
          if (st != CLBlastSuccess) s = blas_error(d, st, "gemm");
        }
      }
    }
  }
  if (extra) c->temp_give(c->temp_ctx, extra, (int64_t)need);
  *ran = s == LOOM_OK;
  return s;
}

void loom__cl_clblast_release(void) {
  pthread_mutex_lock(&clblast_lock);
  CLBlastClearCache();
  n_warm = 0; /* the caches are empty again (and device pointers may be reused) */
  pthread_mutex_unlock(&clblast_lock);
}
