/* fft ifft rfft irfft through clFFT (see opencl_fft.c for when): plans baked once per device
 * and problem and cached until the device closes; direct out-of-place transforms where the
 * data allow, else gathered into the scratch in clFFT's in-place row layout, transformed in
 * place and scattered; clFFT's temporary buffer from the rest of the scratch (a sub-buffer at
 * the device's alignment) or, without a limit, from the executor's meter. Built when CMake
 * finds clFFT; none/opencl_clfft_none.c stands in otherwise. */
#include <clFFT.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "backends/opencl/opencl_fft.h"

#define PLAN_CACHE_MAX 64

typedef struct fft_key {
  int64_t kind, dbl, n, batch, inplace;
} fft_key;

typedef struct fft_plan {
  fft_key key;
  clfftPlanHandle handle;
  size_t tmp_bytes;
} fft_plan;

struct loom__cl_fft_cache {
  fft_plan plans[PLAN_CACHE_MAX];
  int32_t count;
};

/* Every call into clFFT holds this lock. clFFT takes its own locks in an order that differs
 * between plan creation and clfftDestroyPlan (TSan reports the inversion when one thread bakes
 * a plan while another closes a device), so two threads inside clFFT at once could deadlock.
 * Plans are baked once per device and problem, so the lock costs little; it is taken after
 * any lock of Loom's and nothing is called under it that takes one. */
static pthread_mutex_t clfft_lock = PTHREAD_MUTEX_INITIALIZER;
/* Threads between clfft_enter and clfft_leave now, and the most there ever were: the test of
 * the lock (tests/opencl) runs FFTs and device teardowns from several threads and asks that
 * no two calls into clFFT ever overlapped. */
static atomic_int clfft_inside, clfft_most_inside;

static void clfft_enter(void) {
  pthread_mutex_lock(&clfft_lock);
  int now = atomic_fetch_add(&clfft_inside, 1) + 1;
  for (int most = atomic_load(&clfft_most_inside);
       now > most && !atomic_compare_exchange_weak(&clfft_most_inside, &most, now);)
    ;
}

static void clfft_leave(void) {
  atomic_fetch_sub(&clfft_inside, 1);
  pthread_mutex_unlock(&clfft_lock);
}

int32_t loom__cl_clfft_most_inside(void) {
  return atomic_load(&clfft_most_inside);
}

/* ---- process-wide setup --------------------------------------------------------------------- */

loom_status loom__cl_clfft_setup(void) {
  /* What clfftInitSetupData does: clFFT.h defines it `__inline` without `static`, so an
   * unoptimized C build has no definition to call. */
  clfftSetupData data;
  memset(&data, 0, sizeof data);
  data.major = clfftVersionMajor;
  data.minor = clfftVersionMinor;
  data.patch = clfftVersionPatch;
  clfft_enter();
  clfftStatus st = clfftSetup(&data);
  clfft_leave();
  if (st != CLFFT_SUCCESS)
    return loom__error(LOOM_ERR_UNAVAILABLE, "clFFT could not be set up (status %d)", (int)st);
  return LOOM_OK;
}

void loom__cl_clfft_teardown(void) {
  clfft_enter();
  clfftTeardown();
  clfft_leave();
}

void loom__cl_fft_release(loom__cl_device *d) {
  if (!d->fft) return;
  clfft_enter();
  for (int32_t i = 0; i < d->fft->count; i++) clfftDestroyPlan(&d->fft->plans[i].handle);
  clfft_leave();
  loom__free(d->fft);
  d->fft = NULL;
}

/* ---- clFFT ---------------------------------------------------------------------------------- */

static bool clfft_takes(int64_t n) {
  static const int64_t radices[] = {2, 3, 5, 7, 11, 13};
  if (n < 2 || n > ((int64_t)1 << 28)) return false;
  for (int32_t i = 0; i < LOOM_ARRAY_SIZE(radices); i++)
    while (n % radices[i] == 0) n /= radices[i];
  return n == 1;
}

static loom_status clfft_error(const loom__cl_device *d, clfftStatus st, const char *call) {
  const char *name = loom__cl_error_name((cl_int)st);
  return loom__error(st == CLFFT_OUT_OF_HOST_MEMORY || st == CL_MEM_OBJECT_ALLOCATION_FAILURE
                         ? LOOM_ERR_OUT_OF_MEMORY
                         : LOOM_ERR_INTERNAL,
                     "%s (%s): clFFT %s failed with status %d%s%s%s", d->id, d->name, call, (int)st,
                     name ? " (" : "", name ? name : "", name ? ")" : "");
}

/* One plan serves both directions of a complex transform (the direction is the enqueue's). */
static int64_t plan_kind(loom__fft_kind kind) {
  return kind == LOOM__FFT_INVERSE ? LOOM__FFT_FORWARD : kind;
}

/* The plan for key, baked on first use; the caller holds clfft_lock. */
static loom_status get_plan_locked(loom__cl_device *d, const fft_key *key, fft_plan **out) {
  *out = NULL;
  if (!d->fft && !(d->fft = loom__calloc(1, sizeof *d->fft))) return loom__oom("clFFT plans");
  struct loom__cl_fft_cache *cache = d->fft;
  for (int32_t i = 0; i < cache->count; i++)
    if (memcmp(&cache->plans[i].key, key, sizeof *key) == 0) {
      *out = &cache->plans[i];
      return LOOM_OK;
    }
  if (cache->count == PLAN_CACHE_MAX) { /* the oldest goes */
    clfftDestroyPlan(&cache->plans[0].handle);
    memmove(&cache->plans[0], &cache->plans[1], sizeof cache->plans[0] * (PLAN_CACHE_MAX - 1));
    cache->count--;
  }
  size_t len = (size_t)key->n, one = 1;
  size_t half = len / 2 + 1;
  clfftPlanHandle h;
  clfftStatus st = clfftCreateDefaultPlan(&h, d->context, CLFFT_1D, &len);
  if (st != CLFFT_SUCCESS) return clfft_error(d, st, "clfftCreateDefaultPlan");
  size_t dist_in = len, dist_out = len;
  clfftLayout lin = CLFFT_COMPLEX_INTERLEAVED, lout = CLFFT_COMPLEX_INTERLEAVED;
  if (key->kind == LOOM__FFT_R2C) {
    lin = CLFFT_REAL;
    lout = CLFFT_HERMITIAN_INTERLEAVED;
    dist_in = key->inplace ? 2 * half : len;
    dist_out = half;
  } else if (key->kind == LOOM__FFT_C2R) {
    lin = CLFFT_HERMITIAN_INTERLEAVED;
    lout = CLFFT_REAL;
    dist_in = half;
    dist_out = key->inplace ? 2 * half : len;
  }
  st = clfftSetPlanPrecision(h, key->dbl ? CLFFT_DOUBLE : CLFFT_SINGLE);
  if (!st) st = clfftSetLayout(h, lin, lout);
  if (!st) st = clfftSetResultLocation(h, key->inplace ? CLFFT_INPLACE : CLFFT_OUTOFPLACE);
  if (!st) st = clfftSetPlanBatchSize(h, (size_t)key->batch);
  if (!st) st = clfftSetPlanDistance(h, dist_in, dist_out);
  if (!st) st = clfftSetPlanInStride(h, CLFFT_1D, &one);
  if (!st) st = clfftSetPlanOutStride(h, CLFFT_1D, &one);
  if (!st) st = clfftSetPlanScale(h, CLFFT_FORWARD, 1.0f);
  /* clFFT keeps the scale as a float: double plans are scaled afterwards (scale_output). */
  if (!st) st = clfftSetPlanScale(h, CLFFT_BACKWARD, key->dbl ? 1.0f : 1.0f / (float)len);
  if (!st) st = clfftBakePlan(h, 1, &d->queue, NULL, NULL);
  size_t tmp = 0;
  if (!st) st = clfftGetTmpBufSize(h, &tmp);
  if (st != CLFFT_SUCCESS) {
    clfftDestroyPlan(&h);
    return clfft_error(d, st, "planning");
  }
  fft_plan *p = &cache->plans[cache->count++];
  p->key = *key;
  p->handle = h;
  p->tmp_bytes = tmp;
  *out = p;
  return LOOM_OK;
}

static loom_status get_plan(loom__cl_device *d, const fft_key *key, fft_plan **out) {
  clfft_enter();
  loom_status s = get_plan_locked(d, key, out);
  clfft_leave();
  return s;
}

/* clFFT's temporary buffer: [from, scratch_bytes) of the scratch as a sub-buffer, else
 * memory from the executor's meter. *ok false: no room (nothing taken). */
typedef struct fft_tmp {
  cl_mem mem;
  bool sub;
  void *extra;
  int64_t extra_bytes;
} fft_tmp;

static loom_status tmp_take(loom__cl_device *d, const loom__op_call *c, int64_t from, size_t need, fft_tmp *t,
                            bool *ok) {
  memset(t, 0, sizeof *t);
  *ok = true;
  if (need == 0) return LOOM_OK;
  from = (from + d->base_align - 1) / d->base_align * d->base_align;
  if (from == 0 && (int64_t)need <= c->scratch_bytes) {
    t->mem = (cl_mem)c->scratch;
    return LOOM_OK;
  }
  if (from + (int64_t)need <= c->scratch_bytes) {
    cl_buffer_region region = {(size_t)from, need};
    cl_int err = CL_SUCCESS;
    t->mem =
        clCreateSubBuffer((cl_mem)c->scratch, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
    if (err == CL_SUCCESS) {
      t->sub = true;
      return LOOM_OK;
    }
    t->mem = NULL;
  }
  if (c->temp_take && c->temp_take(c->temp_ctx, (int64_t)need, &t->extra) == LOOM_OK) {
    t->mem = (cl_mem)t->extra;
    t->extra_bytes = (int64_t)need;
    return LOOM_OK;
  }
  *ok = false;
  return LOOM_OK;
}

static void tmp_give(const loom__op_call *c, fft_tmp *t) {
  if (t->sub) clReleaseMemObject(t->mem);
  if (t->extra) c->temp_give(c->temp_ctx, t->extra, t->extra_bytes);
}

static loom_status enqueue(loom__cl_device *d, const loom__gpu_fft *p, const fft_plan *plan, cl_mem in,
                           cl_mem out, cl_mem tmp) {
  clfftDirection dir =
      p->kind == LOOM__FFT_INVERSE || p->kind == LOOM__FFT_C2R ? CLFFT_BACKWARD : CLFFT_FORWARD;
  clfft_enter();
  clfftStatus st =
      clfftEnqueueTransform(plan->handle, dir, 1, &d->queue, 0, NULL, NULL, &in, out ? &out : NULL, tmp);
  clfft_leave();
  return st == CLFFT_SUCCESS ? LOOM_OK : clfft_error(d, st, "clfftEnqueueTransform");
}

/* Double-precision inverses: the output times 1/n, in double. */
static loom_status scale_output(loom__cl_device *d, const loom__op_call *c, const loom__gpu_fft *p) {
  if (!p->dbl || (p->kind != LOOM__FFT_INVERSE && p->kind != LOOM__FFT_C2R)) return LOOM_OK;
  loom_dtype complex_dt = LOOM_C128;
  loom__cl_kernel *k;
  loom_status s = loom__cl_kernel_get(d, (int32_t)complex_dt,
                                      p->kind == LOOM__FFT_C2R ? "scale_real" : "scale_complex", &k);
  if (s == LOOM_ERR_UNSUPPORTED) return loom__gpu_unsupported(d->id, c->op, complex_dt);
  if (s) return s;
  cl_mem o = (cl_mem)c->out[0].buffer;
  cl_long off = c->out[0].offset, total = p->outer * p->len_out * p->inner;
  cl_double f = 1.0 / (double)p->n;
  loom__cl_arg args[] = {LOOM__CL_ARG(o), LOOM__CL_ARG(off), LOOM__CL_ARG(total), LOOM__CL_ARG(f)};
  return loom__cl_launch(d, k, args, 4, total, d->is_cpu ? 1 : 64);
}

/* Out-of-place from the input into the output. *ran false: not this way. */
static loom_status run_direct(loom__cl_device *d, const loom__op_call *c, const loom__gpu_fft *p, bool *ran) {
  *ran = false;
  bool dense_rows = p->merged && p->is_a == 1 && (p->outer == 1 || p->is_o == p->len_in);
  if (p->kind == LOOM__FFT_C2R || p->inner != 1 || !dense_rows || c->in[0].offset != 0 ||
      c->out[0].offset != 0)
    return LOOM_OK;
  fft_key key = {plan_kind(p->kind), p->dbl, p->n, p->outer, 0};
  fft_plan *plan;
  loom_status s = get_plan(d, &key, &plan);
  if (s) return s;
  fft_tmp t;
  bool ok;
  if ((s = tmp_take(d, c, 0, plan->tmp_bytes, &t, &ok)) || !ok) return s;
  s = enqueue(d, p, plan, (cl_mem)c->in[0].buffer, (cl_mem)c->out[0].buffer, t.mem);
  if (!s) s = scale_output(d, c, p);
  tmp_give(c, &t);
  *ran = s == LOOM_OK;
  return s;
}

/* Gathered into the scratch, transformed in place, scattered into the output. */
static loom_status run_packed(loom__cl_device *d, const loom__op_call *c, const loom__gpu_fft *p, bool *ran) {
  *ran = false;
  int64_t half = p->n / 2 + 1, batch = p->outer * p->inner;
  /* Row distances in the input's and the output's elements, and the rows' bytes. */
  int64_t din = p->len_in, dout = p->len_out, row_bytes = p->len_in * p->in_es;
  if (p->kind == LOOM__FFT_R2C) din = 2 * half, row_bytes = 2 * half * p->in_es;
  if (p->kind == LOOM__FFT_C2R) dout = 2 * half;
  int64_t a_bytes = batch * row_bytes;
  if (a_bytes > c->scratch_bytes || !c->scratch) return LOOM_OK;
  fft_key key = {plan_kind(p->kind), p->dbl, p->n, batch, 1};
  fft_plan *plan;
  loom_status s = get_plan(d, &key, &plan);
  if (s) return s;
  fft_tmp t;
  bool ok;
  if ((s = tmp_take(d, c, a_bytes, plan->tmp_bytes, &t, &ok)) || !ok) return s;
  cl_mem a = (cl_mem)c->scratch;
  /* Input element (.., j, ..) goes to row (outer index, inner index), column j. */
  const loom__dview *in = &c->in[0];
  int64_t dst[LOOM_MAX_RANK], inner_step = din, outer_step = p->inner * din;
  for (int32_t k = in->type.rank - 1; k > p->axis; k--) {
    dst[k] = inner_step;
    inner_step *= in->type.dims[k];
  }
  dst[p->axis] = 1;
  for (int32_t k = p->axis - 1; k >= 0; k--) {
    dst[k] = outer_step;
    outer_step *= in->type.dims[k];
  }
  s = loom__cl_copy(d, p->in_es, in->type.rank, in->type.dims, a, 0, dst, (cl_mem)in->buffer, in->offset,
                    in->strides);
  if (!s && p->kind == LOOM__FFT_C2R) { /* numpy reads only the real parts of the DC and Nyquist bins */
    int64_t rows[1] = {batch}, step[1] = {2 * half};
    s = loom__cl_zero(d, p->in_es / 2, 1, rows, a, 1, step);
    if (!s && p->n % 2 == 0) s = loom__cl_zero(d, p->in_es / 2, 1, rows, a, 2 * (p->n / 2) + 1, step);
  }
  if (!s) s = enqueue(d, p, plan, a, NULL, t.mem);
  if (!s) {
    int64_t odims[3] = {p->outer, p->len_out, p->inner};
    int64_t osrc[3] = {p->inner * dout, 1, dout};
    s = loom__cl_copy(d, p->out_es, 3, odims, (cl_mem)c->out[0].buffer, c->out[0].offset, NULL, a, 0, osrc);
  }
  if (!s) s = scale_output(d, c, p);
  tmp_give(c, &t);
  *ran = s == LOOM_OK;
  return s;
}

loom_status loom__cl_clfft_run(loom__cl_device *d, const loom__op_call *c, const loom__gpu_fft *p,
                               bool *ran) {
  *ran = false;
  if (!clfft_takes(p->n)) return LOOM_OK;
  loom_status s = run_direct(d, c, p, ran);
  if (!s && !*ran) s = run_packed(d, c, p, ran);
  return s;
}
