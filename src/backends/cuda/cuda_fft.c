/* fft ifft rfft irfft on a CUDA device, with numpy.fft's semantics (unnormalized forward, 1/n on
 * inverse; irfft reads n/2+1 bins and ignores the imaginary parts of the DC and Nyquist bins),
 * through cuFFT, with the direct DFT kernel (kernels/cuda/fft.cu) when cuFFT is absent or has
 * no room for its work area.
 *
 * The transform runs along one axis of data seen as [outer, len, inner]. A cuFFT plan has one
 * batch dimension with a distance, and strides of its own, so:
 * - in place as it is: an input whose outer dims, and inner dims, each walk as one stride, with
 *   outer or inner 1, goes straight from the input into the output (c2c and r2c: cuFFT leaves
 *   their input alone; c2r overwrites its input, which the graph may still read, so never);
 * - packed: otherwise the input is first copied densely into the scratch as [outer, len, inner]
 *   and transformed from there, one cuFFT call per outer index when inner > 1.
 * The copy never takes more than the op's scratch (IR.md: 2x the output: an irfft's n/2+1
 * complex bins are at most twice its n reals). cuFFT's work area takes the rest of the scratch
 * (plans are made with auto-allocation off), else, when the executor runs without a limit,
 * memory from its meter; when neither has room the DFT kernel runs instead. cuFFT's inverses
 * are unnormalized: the output is scaled by 1/n after them. Plans are made once per device and
 * layout and cached until the device closes (cuFFT keeps a little device memory per plan for
 * its twiddles, outside any limit).
 */
#include <string.h>

#include "backends/cuda/cuda_libs.h"

#define PLAN_CACHE 32
#define WORK_ALIGN 256

/* A cuFFT plan's problem. All int64, so memcmp compares it. */
typedef struct plan_key {
  int64_t type, n, istride, idist, ostride, odist, batch, len_in, len_out;
} plan_key;

typedef struct plan_entry {
  plan_key key;
  cufftHandle plan;
  size_t work;
  uint64_t used; /* the oldest goes first when the cache is full */
} plan_entry;

struct loom__cu_fft_cache {
  plan_entry items[PLAN_CACHE];
  int32_t count;
  uint64_t tick;
};

/* ---- the DFT kernel ------------------------------------------------------------------------- */

static loom_status run_dft(loom__cu_device *d, const loom__op_call *c, const loom__gpu_fft *p, const void *in,
                           int64_t in_off) {
  lm_dft m;
  loom__gpu_dft_setup(p, in_off, c->out[0].offset, &m);
  return loom__cu_check(d, loom__cu_dft(d->stream, (int)c->in[0].type.dtype, in, c->out[0].buffer, &m),
                        "the DFT kernel");
}

/* Copies the input densely to the start of the scratch: [outer, len_in, inner]. */
static loom_status pack(loom__cu_device *d, const loom__op_call *c, loom__gpu_fft *p) {
  const loom__dview *in = &c->in[0];
  int64_t bytes = p->in_es * p->outer * p->len_in * p->inner;
  if (bytes > c->scratch_bytes || !c->scratch)
    return loom__error(LOOM_ERR_INTERNAL, "%s: %s: the input does not fit the scratch", d->id,
                       loom_op_name(c->op->kind));
  loom_status s = loom__cu_copy_strided(d, p->in_es, in->type.rank, in->type.dims, c->scratch, 0, NULL,
                                        in->buffer, in->offset, in->strides);
  p->is_o = p->len_in * p->inner;
  p->is_a = p->inner;
  p->is_i = 1;
  p->merged = true;
  p->packed = true;
  return s;
}

/* ---- cuFFT ----------------------------------------------------------------------------------- */

static loom_status fft_error(const loom__cu_device *d, cufftResult r, const char *call) {
  loom_status s = r == CUFFT_ALLOC_FAILED                                  ? LOOM_ERR_OUT_OF_MEMORY
                  : r == CUFFT_NOT_SUPPORTED || r == CUFFT_NOT_IMPLEMENTED ? LOOM_ERR_UNSUPPORTED
                                                                           : LOOM_ERR_INTERNAL;
  return loom__error(s, "%s (%s): %s failed: %s (%d)", d->id, d->name, call, loom__cufft_result_name(r),
                     (int)r);
}

static cufftType plan_type(const loom__gpu_fft *p) {
  switch (p->kind) {
    case LOOM__FFT_R2C:
      return p->dbl ? CUFFT_D2Z : CUFFT_R2C;
    case LOOM__FFT_C2R:
      return p->dbl ? CUFFT_Z2D : CUFFT_C2R;
    default:
      return p->dbl ? CUFFT_Z2Z : CUFFT_C2C;
  }
}

/* The cached plan for key, made (with no work area of its own) on first use. */
static loom_status get_plan(loom__cu_device *d, const loom__cufft_api *api, const plan_key *key,
                            plan_entry **out) {
  if (!d->fft && !(d->fft = loom__calloc(1, sizeof *d->fft))) return loom__oom("cuFFT plans");
  struct loom__cu_fft_cache *cache = d->fft;
  for (int32_t i = 0; i < cache->count; i++)
    if (memcmp(&cache->items[i].key, key, sizeof *key) == 0) {
      cache->items[i].used = ++cache->tick;
      *out = &cache->items[i];
      return LOOM_OK;
    }
  int32_t slot = cache->count;
  if (slot == PLAN_CACHE) {
    slot = 0;
    for (int32_t i = 1; i < PLAN_CACHE; i++)
      if (cache->items[i].used < cache->items[slot].used) slot = i;
    api->cufftDestroy(cache->items[slot].plan);
    cache->count--;
    cache->items[slot] = cache->items[cache->count];
    slot = cache->count;
  }
  cufftHandle plan;
  cufftResult r = api->cufftCreate(&plan);
  if (r != CUFFT_SUCCESS) return fft_error(d, r, "cufftCreate");
  long long n[1] = {key->n}, inembed[1] = {key->len_in}, onembed[1] = {key->len_out};
  size_t work = 0;
  const char *call = "cufftSetAutoAllocation";
  r = api->cufftSetAutoAllocation(plan, 0);
  if (r == CUFFT_SUCCESS) {
    call = "cufftMakePlanMany64";
    r = api->cufftMakePlanMany64(plan, 1, n, inembed, key->istride, key->idist, onembed, key->ostride,
                                 key->odist, (cufftType)key->type, key->batch, &work);
  }
  if (r == CUFFT_SUCCESS) {
    call = "cufftSetStream";
    r = api->cufftSetStream(plan, d->stream);
  }
  if (r != CUFFT_SUCCESS) {
    api->cufftDestroy(plan);
    return fft_error(d, r, call);
  }
  plan_entry *e = &cache->items[slot];
  *e = (plan_entry){.key = *key, .plan = plan, .work = work, .used = ++cache->tick};
  cache->count++;
  *out = e;
  return LOOM_OK;
}

void loom__cu_fft_release(loom__cu_device *d) {
  /* Plans exist only where cuFFT was loaded. */
  for (int32_t i = 0; d->fft && i < d->fft->count; i++) loom__cufft()->cufftDestroy(d->fft->items[i].plan);
  loom__free(d->fft);
  d->fft = NULL;
}

static cufftResult exec(const loom__cufft_api *api, const loom__gpu_fft *p, cufftHandle plan, void *in,
                        void *out) {
  bool inverse = p->kind == LOOM__FFT_INVERSE;
  switch (p->kind) {
    case LOOM__FFT_R2C:
      return p->dbl ? api->cufftExecD2Z(plan, in, out) : api->cufftExecR2C(plan, in, out);
    case LOOM__FFT_C2R:
      return p->dbl ? api->cufftExecZ2D(plan, in, out) : api->cufftExecC2R(plan, in, out);
    default:
      return p->dbl ? api->cufftExecZ2Z(plan, in, out, inverse ? CUFFT_INVERSE : CUFFT_FORWARD)
                    : api->cufftExecC2C(plan, in, out, inverse ? CUFFT_INVERSE : CUFFT_FORWARD);
  }
}

/* Runs the transform through cuFFT when it can; *ran false (nothing enqueued but, perhaps, the
 * packing copy, which the DFT kernel then reads) otherwise. */
static loom_status run_cufft(loom__cu_device *d, const loom__op_call *c, loom__gpu_fft *p, bool *ran) {
  *ran = false;
  const loom__cufft_api *api = loom__cufft();
  /* A length of 1 is a copy (and a size cuFFT may refuse): the DFT kernel does it. */
  if (!api || loom__cu_testing_fft_path() == 1 || p->n == 1) return LOOM_OK;
  const loom__dview *in = &c->in[0], *out = &c->out[0];
  /* In place as it is (see the top), or packed into the scratch first; a broadcast (stride 0)
   * is no layout cuFFT takes. */
  bool direct = p->merged && (p->inner == 1 || p->outer == 1) && p->kind != LOOM__FFT_C2R && p->is_a > 0 &&
                (p->outer == 1 || p->is_o > 0) && (p->inner == 1 || p->is_i > 0);
  const char *src = (const char *)in->buffer + in->offset * p->in_es;
  int64_t used = 0;
  if (!direct) {
    loom_status s = pack(d, c, p);
    if (s) return s;
    src = c->scratch;
    used = (p->in_es * p->outer * p->len_in * p->inner + WORK_ALIGN - 1) / WORK_ALIGN * WORK_ALIGN;
  }
  /* One batch dim: the outer rows (inner 1), the inner columns (outer 1), or, when both are
   * more than 1 (packed), the inner columns of one outer index per call. */
  bool rows = p->inner == 1;
  plan_key key = {.type = plan_type(p), .n = p->n, .len_in = p->len_in, .len_out = p->len_out};
  key.istride = p->is_a;
  key.idist = rows ? (p->outer > 1 ? p->is_o : p->len_in * p->is_a) : p->is_i;
  key.ostride = rows ? 1 : p->inner;
  key.odist = rows ? p->len_out : 1;
  key.batch = rows ? p->outer : p->inner;
  int64_t calls = rows ? 1 : p->outer;
  plan_entry *e = NULL;
  loom_status s = get_plan(d, api, &key, &e);
  if (s) return s;
  void *work = NULL, *taken = NULL;
  if (e->work > 0 && (int64_t)e->work <= c->scratch_bytes - used) {
    work = (char *)c->scratch + used;
  } else if (e->work > 0 && c->temp_take) {
    if (c->temp_take(c->temp_ctx, (int64_t)e->work, &taken)) return LOOM_OK; /* no room: the DFT kernel */
    work = taken;
  } else if (e->work > 0) {
    return LOOM_OK;
  }
  cufftResult r = api->cufftSetWorkArea(e->plan, work);
  char *dst = (char *)out->buffer + out->offset * p->out_es;
  for (int64_t i = 0; r == CUFFT_SUCCESS && i < calls; i++)
    r = exec(api, p, e->plan, (void *)(src + i * p->is_o * p->in_es),
             dst + i * p->len_out * p->inner * p->out_es);
  if (taken) c->temp_give(c->temp_ctx, taken, (int64_t)e->work);
  if (r != CUFFT_SUCCESS) return fft_error(d, r, "cufftExec");
  *ran = true;
  if (p->kind != LOOM__FFT_INVERSE && p->kind != LOOM__FFT_C2R) return LOOM_OK;
  /* numpy's 1/n on the inverses, over the output's reals. */
  int64_t reals = p->outer * p->len_out * p->inner * (p->kind == LOOM__FFT_INVERSE ? 2 : 1);
  return loom__cu_check(d, loom__cu_scale(d->stream, p->dbl, dst, reals, 1.0 / (double)p->n),
                        "the scale kernel");
}

loom_status loom__cu_fourier(void *dev, const loom__op_call *c) {
  loom__cu_device *d = dev;
  loom__gpu_fft p;
  loom_status s = loom__gpu_fft_setup(d->id, c, &p);
  if (s) return s;
  if (p.outer * p.len_out * p.inner == 0) return LOOM_OK;
  bool ran = false;
  s = run_cufft(d, c, &p, &ran);
  if (s || ran) return s;
  /* Outer or inner dims that do not walk as one stride: the DFT reads a dense copy. */
  if (!p.packed && !p.merged && (s = pack(d, c, &p))) return s;
  if (p.packed) return run_dft(d, c, &p, c->scratch, 0);
  return run_dft(d, c, &p, c->in[0].buffer, c->in[0].offset);
}
