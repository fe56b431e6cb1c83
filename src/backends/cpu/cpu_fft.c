/* fft ifft rfft irfft on the host through FFTW, with numpy.fft's semantics: unnormalized
 * forward, 1/n on inverse; irfft reads the first n/2+1 bins (zero-padded when there are fewer)
 * and ignores the imaginary parts of the DC and Nyquist bins.
 *
 * Every transform runs on dense C-order data of shape [outer, len, inner] (len along the
 * axis) through one guru64 plan: the transform's stride is `inner`, and `outer` and `inner`
 * are its two howmany loops, so any axis works without a transpose. A strided or broadcast
 * input is first gathered densely: into the output itself for fft/ifft (then transformed in
 * place), into the scratch for rfft and irfft (c2r destroys its input, so irfft always
 * copies). The scratch (IR.md: 2x the output) always holds that copy; the heap is only a
 * fallback for a caller that passes less.
 *
 * Plans: FFTW's planner is not thread-safe, so every fftw*_plan_* and fftw*_destroy_plan call
 * holds one process-wide mutex, and plans are cached under it by problem (kind, precision,
 * sizes, in-place or not, the arrays' SIMD alignment, thread count). The new-array execute
 * calls are thread-safe and run outside the lock. Plans use FFTW_ESTIMATE, which neither
 * takes seconds nor touches the arrays; LOOM_FFTW_MEASURE=1 switches to FFTW_MEASURE (for
 * benchmarks), planning on scratch arrays of the same alignment. The cache is bounded; past
 * it, plans are made, used and destroyed per call. Cached plans live until exit (reachable
 * from the cache, so LeakSanitizer does not count them).
 *
 * Threads: big transforms plan with FFTW's OpenMP threads (fftw3_omp), small ones with one.
 */
#include <fftw3.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_kernels.h"

#define FFT_CACHE_MAX 256
/* Output elements from which a transform plans with every OpenMP thread. */
#define FFT_THREADS_MIN (1 << 16)
#define FFT_PARALLEL_MIN (1 << 15)

typedef enum fft_kind { FFT_FORWARD, FFT_BACKWARD, FFT_R2C, FFT_C2R } fft_kind;

/* A plan's problem. All int64 so there is no padding and memcmp compares it. */
typedef struct fft_key {
  int64_t kind, dbl;       /* fft_kind; 1 for double precision */
  int64_t n, outer, inner; /* transform length and the two batch loops */
  int64_t inplace, align_in, align_out, nthreads;
} fft_key;

typedef struct fft_entry {
  fft_key key;
  void *plan; /* fftw_plan or fftwf_plan */
} fft_entry;

static pthread_mutex_t fft_lock = PTHREAD_MUTEX_INITIALIZER;
static fft_entry fft_cache[FFT_CACHE_MAX];
static int32_t fft_cache_count;
static bool fft_threads_ready;
static bool fft_measure; /* FFTW_MEASURE is 0: keep the choice in a flag of its own */

/* ---- planning (callers hold fft_lock) ----------------------------------------------------- */

static int64_t len_in(const fft_key *k) {
  return k->kind == FFT_C2R ? k->n / 2 + 1 : k->n;
}
static int64_t len_out(const fft_key *k) {
  return k->kind == FFT_R2C ? k->n / 2 + 1 : k->n;
}

/* Bytes of one element of the transform's input or output array. */
static int64_t elem_bytes(const fft_key *k, bool input) {
  bool real = input ? k->kind == FFT_R2C : k->kind == FFT_C2R;
  return (k->dbl ? 8 : 4) * (real ? 1 : 2);
}

static void *plan_guru(const fft_key *k, void *in, void *out, unsigned flags) {
  fftw_iodim64 dim = {k->n, k->inner, k->inner}, how[2];
  int hr = 0;
  if (k->outer > 1) how[hr++] = (fftw_iodim64){k->outer, len_in(k) * k->inner, len_out(k) * k->inner};
  if (k->inner > 1) how[hr++] = (fftw_iodim64){k->inner, 1, 1};
  /* fftwf_iodim64 has the same layout as fftw_iodim64. */
  const fftwf_iodim64 *fdim = (const fftwf_iodim64 *)&dim, *fhow = (const fftwf_iodim64 *)how;
  int sign = k->kind == FFT_FORWARD ? FFTW_FORWARD : FFTW_BACKWARD;
  switch (k->kind) {
    case FFT_FORWARD:
    case FFT_BACKWARD:
      if (k->dbl) return fftw_plan_guru64_dft(1, &dim, hr, how, in, out, sign, flags);
      return fftwf_plan_guru64_dft(1, fdim, hr, fhow, in, out, sign, flags);
    case FFT_R2C:
      if (k->dbl) return fftw_plan_guru64_dft_r2c(1, &dim, hr, how, in, out, flags);
      return fftwf_plan_guru64_dft_r2c(1, fdim, hr, fhow, in, out, flags);
    default:
      if (k->dbl) return fftw_plan_guru64_dft_c2r(1, &dim, hr, how, in, out, flags);
      return fftwf_plan_guru64_dft_c2r(1, fdim, hr, fhow, in, out, flags);
  }
}

/* FFTW_MEASURE overwrites the arrays while planning: plan on stand-ins of the same sizes and
 * alignments instead. NULL when they cannot be allocated. */
static void *plan_measured(const fft_key *k, unsigned flags) {
  int64_t bin = k->outer * len_in(k) * k->inner * elem_bytes(k, true);
  int64_t bout = k->outer * len_out(k) * k->inner * elem_bytes(k, false);
  char *a = fftw_malloc((size_t)(LOOM_MAX(bin, bout) + 64));
  char *b = k->inplace ? NULL : fftw_malloc((size_t)(bout + 64));
  void *plan = NULL;
  if (a && (k->inplace || b))
    plan = plan_guru(k, a + k->align_in, k->inplace ? a + k->align_in : b + k->align_out, flags);
  fftw_free(a);
  fftw_free(b);
  return plan;
}

static void plan_destroy(const fft_key *k, void *plan) {
  if (k->dbl)
    fftw_destroy_plan(plan);
  else
    fftwf_destroy_plan(plan);
}

static void *plan_create(const fft_key *k, void *in, void *out) {
  if (!fft_threads_ready) {
    const char *m = getenv("LOOM_FFTW_MEASURE");
    fft_measure = m && m[0] == '1';
    fftw_init_threads();
    fftwf_init_threads();
    fft_threads_ready = true;
  }
  if (k->dbl)
    fftw_plan_with_nthreads((int)k->nthreads);
  else
    fftwf_plan_with_nthreads((int)k->nthreads);
  if (fft_measure) return plan_measured(k, FFTW_MEASURE);
  return plan_guru(k, in, out, FFTW_ESTIMATE);
}

/* The cached plan for k, or a new one; *out_owned is true when the caller must destroy it
 * (cache full). */
static loom_status plan_get(const fft_key *k, void *in, void *out, void **out_plan, bool *out_owned) {
  *out_plan = NULL;
  *out_owned = false;
  pthread_mutex_lock(&fft_lock);
  for (int32_t i = 0; i < fft_cache_count; i++)
    if (memcmp(&fft_cache[i].key, k, sizeof *k) == 0) {
      *out_plan = fft_cache[i].plan;
      pthread_mutex_unlock(&fft_lock);
      return LOOM_OK;
    }
  void *plan = plan_create(k, in, out);
  if (plan && fft_cache_count < FFT_CACHE_MAX)
    fft_cache[fft_cache_count++] = (fft_entry){*k, plan};
  else if (plan)
    *out_owned = true;
  pthread_mutex_unlock(&fft_lock);
  if (!plan)
    return loom__error(LOOM_ERR_INTERNAL, "fft: FFTW could not plan a length-%lld transform",
                       (long long)k->n);
  *out_plan = plan;
  return LOOM_OK;
}

static void plan_release(const fft_key *k, void *plan, bool owned) {
  if (!owned) return;
  pthread_mutex_lock(&fft_lock);
  plan_destroy(k, plan);
  pthread_mutex_unlock(&fft_lock);
}

static void plan_execute(const fft_key *k, void *plan, void *in, void *out) {
  switch (k->kind) {
    case FFT_FORWARD:
    case FFT_BACKWARD:
      if (k->dbl)
        fftw_execute_dft(plan, in, out);
      else
        fftwf_execute_dft(plan, in, out);
      break;
    case FFT_R2C:
      if (k->dbl)
        fftw_execute_dft_r2c(plan, in, out);
      else
        fftwf_execute_dft_r2c(plan, in, out);
      break;
    default:
      if (k->dbl)
        fftw_execute_dft_c2r(plan, in, out);
      else
        fftwf_execute_dft_c2r(plan, in, out);
      break;
  }
}

/* ---- data movement ------------------------------------------------------------------------ */

/* True when v is dense C order (a view with every element stored once, in order). */
static bool view_dense(const loom__view *v) {
  int64_t expect = 1;
  for (int32_t i = v->type.rank - 1; i >= 0; i--) {
    if (v->type.dims[i] != 1 && v->strides[i] != expect) return false;
    expect *= v->type.dims[i];
  }
  return true;
}

/* Gathers src into dense dst of the same shape except dims[axis] = len: elements past src's
 * length along axis are zero. es is the element size in bytes. */
static void gather(char *dst, const loom__view *src, int32_t axis, int64_t len, int64_t es) {
  int32_t rank = src->type.rank, last = rank - 1;
  int64_t dims[LOOM_MAX_RANK];
  memcpy(dims, src->type.dims, sizeof dims);
  int64_t have = dims[axis];
  dims[axis] = len;
  int64_t rows = 1;
  for (int32_t i = 0; i < last; i++) rows *= dims[i];
  int64_t cols = dims[last], copy = LOOM_MIN(cols, axis == last ? have : cols);
  const char *base = src->data;
#pragma omp parallel for schedule(static) if (rows * cols > FFT_PARALLEL_MIN)
  for (int64_t r = 0; r < rows; r++) {
    char *d = dst + r * cols * es;
    int64_t off = 0, rem = r;
    bool zero = false;
    for (int32_t i = last - 1; i >= 0; i--) {
      int64_t idx = rem % dims[i];
      rem /= dims[i];
      if (i == axis && idx >= have) zero = true;
      off += idx * src->strides[i];
    }
    int64_t n = zero ? 0 : copy;
    if (n > 0 && src->strides[last] == 1) {
      memcpy(d, base + off * es, (size_t)(n * es));
    } else {
      for (int64_t j = 0; j < n; j++)
        memcpy(d + j * es, base + (off + j * src->strides[last]) * es, (size_t)es);
    }
    memset(d + n * es, 0, (size_t)((cols - n) * es));
  }
}

/* irfft: c2r assumes a Hermitian input, so the imaginary parts of DC (and of Nyquist for
 * even n) are ignored, as NumPy does; zero them so every FFTW algorithm agrees. */
static void clear_dc_nyquist(char *buf, const fft_key *k) {
  int64_t es = elem_bytes(k, true) / 2, half = len_in(k);
  int64_t count = k->outer * k->inner;
  for (int64_t b = 0; b < count; b++) {
    int64_t o = b / k->inner, i = b % k->inner;
    char *row = buf + ((o * half) * k->inner + i) * 2 * es;
    memset(row + es, 0, (size_t)es);
    if (k->n % 2 == 0 && half > 1) memset(row + (half - 1) * k->inner * 2 * es + es, 0, (size_t)es);
  }
}

static void scale(void *data, int64_t count, bool dbl, double factor) {
  if (dbl) {
    double *d = data;
#pragma omp parallel for schedule(static) if (count > FFT_PARALLEL_MIN)
    for (int64_t i = 0; i < count; i++) d[i] *= factor;
  } else {
    float *f = data;
    float ff = (float)factor;
#pragma omp parallel for schedule(static) if (count > FFT_PARALLEL_MIN)
    for (int64_t i = 0; i < count; i++) f[i] *= ff;
  }
}

static bool ranges_overlap(const void *a, int64_t abytes, const void *b, int64_t bbytes) {
  const char *pa = a, *pb = b;
  return pa < pb + bbytes && pb < pa + abytes;
}

/* ---- the op ------------------------------------------------------------------------------- */

static loom_status fft_check(const loom__op *op, const loom__view *in, const loom__view *out,
                             int32_t *out_axis, fft_key *k) {
  const char *name = loom_op_name(op->kind);
  loom_dtype di = in->type.dtype, dout = out->type.dtype;
  memset(k, 0, sizeof *k);
  *out_axis = 0;
  k->kind = op->kind == LOOM_OP_FFT    ? FFT_FORWARD
            : op->kind == LOOM_OP_IFFT ? FFT_BACKWARD
            : op->kind == LOOM_OP_RFFT ? FFT_R2C
                                       : FFT_C2R;
  bool ok;
  switch (k->kind) {
    case FFT_FORWARD:
    case FFT_BACKWARD:
      ok = (di == LOOM_C64 || di == LOOM_C128) && dout == di;
      break;
    case FFT_R2C:
      ok = (di == LOOM_F32 && dout == LOOM_C64) || (di == LOOM_F64 && dout == LOOM_C128);
      break;
    default:
      ok = (di == LOOM_C64 && dout == LOOM_F32) || (di == LOOM_C128 && dout == LOOM_F64);
      break;
  }
  if (!ok)
    return loom__error(LOOM_ERR_UNSUPPORTED, "%s: dtype %s is not supported on cpu", name,
                       loom_dtype_name(di));
  int32_t rank = in->type.rank;
  int64_t axis = op->attrs.axis < 0 ? op->attrs.axis + rank : op->attrs.axis;
  if (rank < 1 || axis < 0 || axis >= rank || out->type.rank != rank)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s: axis %lld is out of range for rank %d", name,
                       (long long)op->attrs.axis, (int)rank);
  *out_axis = (int32_t)axis;
  k->dbl = di == LOOM_C128 || di == LOOM_F64;
  k->n = k->kind == FFT_C2R ? out->type.dims[axis] : in->type.dims[axis];
  if (k->kind == FFT_C2R && (op->attrs.set & LOOM_ATTR_N) && op->attrs.n != k->n)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "irfft: n=%lld but the result has length %lld",
                       (long long)op->attrs.n, (long long)k->n);
  k->outer = k->inner = 1;
  for (int32_t i = 0; i < axis; i++) k->outer *= out->type.dims[i];
  for (int32_t i = (int32_t)axis + 1; i < rank; i++) k->inner *= out->type.dims[i];
  int64_t total = k->outer * len_out(k) * k->inner;
  k->nthreads = total >= FFT_THREADS_MIN ? omp_get_max_threads() : 1;
  return LOOM_OK;
}

/* Where the transform reads from: the input itself when it is dense and apart from the output,
 * else a dense copy (in the output for c2c, in scratch or the heap otherwise). */
static loom_status fft_source(fft_key *k, const loom__view *in, const loom__view *out, int32_t axis,
                              void *scratch, int64_t scratch_bytes, void **out_src, void **out_heap) {
  int64_t es = elem_bytes(k, true);
  int64_t in_bytes = k->outer * len_in(k) * k->inner * es;
  int64_t out_bytes = k->outer * len_out(k) * k->inner * elem_bytes(k, false);
  *out_heap = NULL;
  *out_src = NULL;
  bool same = in->data == out->data;
  /* c2r destroys its input, and r2c in place needs a padded layout: those copy. */
  if (k->kind != FFT_C2R && !(same && k->kind == FFT_R2C) && view_dense(in) &&
      (same || !ranges_overlap(in->data, in_bytes, out->data, out_bytes))) {
    *out_src = in->data;
    k->inplace = same;
    return LOOM_OK;
  }
  if (k->kind == FFT_FORWARD || k->kind == FFT_BACKWARD) {
    gather(out->data, in, axis, len_in(k), es);
    *out_src = out->data;
    k->inplace = 1;
    return LOOM_OK;
  }
  k->inplace = 0;
  if (scratch && scratch_bytes >= in_bytes) {
    *out_src = scratch;
  } else {
    *out_heap = loom__aligned_alloc((size_t)in_bytes);
    if (!*out_heap) return loom__oom("fft: copy of the input");
    *out_src = *out_heap;
  }
  gather(*out_src, in, axis, len_in(k), es);
  if (k->kind == FFT_C2R) clear_dc_nyquist(*out_src, k);
  return LOOM_OK;
}

loom_status loom__cpu_fourier(const loom_graph *g, const loom__op *op, const loom__view *in,
                              const loom__view *out, void *scratch, int64_t scratch_bytes) {
  (void)g;
  fft_key k;
  int32_t axis;
  loom_status s = fft_check(op, &in[0], &out[0], &axis, &k);
  if (s) return s;
  int64_t total_out = k.outer * len_out(&k) * k.inner;
  if (total_out == 0) return LOOM_OK;
  if (k.n == 0) { /* rfft of an empty axis: one bin, the empty sum */
    memset(out[0].data, 0, (size_t)(total_out * elem_bytes(&k, false)));
    return LOOM_OK;
  }
  void *src, *heap, *plan;
  bool owned;
  s = fft_source(&k, &in[0], &out[0], axis, scratch, scratch_bytes, &src, &heap);
  if (s) return s;
  k.align_in = k.dbl ? fftw_alignment_of(src) : fftwf_alignment_of(src);
  k.align_out = k.dbl ? fftw_alignment_of(out[0].data) : fftwf_alignment_of(out[0].data);
  s = plan_get(&k, src, out[0].data, &plan, &owned);
  if (!s) {
    plan_execute(&k, plan, src, out[0].data);
    plan_release(&k, plan, owned);
    if (k.kind == FFT_BACKWARD || k.kind == FFT_C2R)
      scale(out[0].data, total_out * (k.kind == FFT_C2R ? 1 : 2), k.dbl, 1.0 / (double)k.n);
  }
  loom__aligned_free(heap);
  return s;
}
