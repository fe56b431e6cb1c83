/* fft ifft rfft irfft on the host through FFTW, with numpy.fft's semantics: unnormalized
 * forward, 1/n on inverse; irfft reads the first n/2+1 bins (zero-padded when there are fewer)
 * and ignores the imaginary parts of the DC and Nyquist bins.
 *
 * Every transform runs on dense C-order data of shape [outer, len, inner] (len along the
 * axis). A strided or broadcast input is first gathered densely: into the output itself for
 * fft/ifft (then transformed in place), into the scratch for rfft and irfft. A dense input is
 * read where it is. Then one of three ways, each splitting the work across the OpenMP threads
 * itself with one-thread plans (FFTW's own threads only where one transform is the whole job):
 * - rows (inner 1, enough rows to share): groups of rows, each group's transform one plan
 *   call from the input into the output and its 1/n applied while it is in cache; irfft copies
 *   each group into a buffer of its thread first (c2r destroys its input).
 * - columns (inner > 1): groups of up to 16 neighbouring columns, copied into a buffer of the
 *   thread as rows, transformed there as rows and copied back: a transform along a strided
 *   axis in place (a power-of-two stride in bytes) thrashes the cache, which is what made such
 *   transforms several times slower than SciPy's pocketfft, which copies the same way.
 * - whole (one row, or too few to share): one plan over everything with FFTW's threads, then
 *   the 1/n; irfft on a copy.
 * Thread buffers are about BLOCK_BYTES each, from the heap; the op's scratch (IR.md: 2x the
 * output) holds only the gathered copy of a strided rfft/irfft input or the whole way's irfft
 * copy, the heap a fallback for a caller that passes less.
 *
 * Plans are cached and measured (cpu_fft.h, cpu_fft_plan.c). */
#include <fftw3.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backends/cpu/cpu_fft.h"
#include "backends/cpu/cpu_kernels.h"

/* Output elements from which a transform runs on every OpenMP thread. */
#define FFT_PARALLEL_MIN (1 << 15)
/* A thread buffer's target size: a group of rows or columns that stays in L2. */
#define BLOCK_BYTES (256 << 10)
/* Most columns per group: two cache lines of c64. */
#define MAX_COLS 16

/* The problem as the op gives it. */
typedef struct fft_shape {
  loom__fft_kind kind;
  bool dbl;
  int64_t n, outer, inner;
  int64_t len_in, len_out, es_in, es_out; /* along the axis; element bytes */
} fft_shape;

/* A key for `count` transforms of sh, rows of len_in / len_out elements apart. */
static loom__fft_key rows_key(const fft_shape *sh, int64_t count) {
  loom__fft_key k;
  memset(&k, 0, sizeof k);
  k.kind = sh->kind;
  k.dbl = sh->dbl;
  k.n = sh->n;
  k.stride = 1;
  k.loop[0][0] = count;
  k.loop[0][1] = sh->len_in;
  k.loop[0][2] = sh->len_out;
  k.loop[1][0] = 1;
  k.nthreads = 1;
  return k;
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
 * even n) are ignored, as NumPy does; zero them so every FFTW algorithm agrees. `rows` rows of
 * sh->len_in bins, `dist` elements apart, the bins `step` apart. */
static void clear_dc_nyquist(char *buf, const fft_shape *sh, int64_t rows, int64_t dist, int64_t step) {
  int64_t es = sh->es_in / 2, half = sh->len_in;
  for (int64_t r = 0; r < rows; r++) {
    char *row = buf + r * dist * sh->es_in;
    memset(row + es, 0, (size_t)es);
    if (sh->n % 2 == 0 && half > 1) memset(row + (half - 1) * step * sh->es_in + es, 0, (size_t)es);
  }
}

/* Multiplies `count` reals by factor. */
static void scale(void *data, int64_t count, bool dbl, double factor, bool threads) {
  if (dbl) {
    double *d = data;
#pragma omp parallel for schedule(static) if (threads)
    for (int64_t i = 0; i < count; i++) d[i] *= factor;
  } else {
    float *f = data;
    float ff = (float)factor;
#pragma omp parallel for schedule(static) if (threads)
    for (int64_t i = 0; i < count; i++) f[i] *= ff;
  }
}

/* Reals in n elements of the output. */
static int64_t out_reals(const fft_shape *sh, int64_t n) {
  return n * (sh->kind == LOOM__FFT_C2R ? 1 : 2);
}

static bool inverse(const fft_shape *sh) {
  return sh->kind == LOOM__FFT_BACKWARD || sh->kind == LOOM__FFT_C2R;
}

static bool ranges_overlap(const void *a, int64_t abytes, const void *b, int64_t bbytes) {
  const char *pa = a, *pb = b;
  return pa < pb + bbytes && pb < pa + abytes;
}

/* ---- columns: groups of neighbouring columns transposed into a buffer ------------------- */

/* dst[c * len + j] = src[j * inner + c] for j < len, c < w: es-byte elements. */
static void cols_load(void *dst, const char *src, int64_t len, int64_t inner, int64_t w, int64_t es) {
#define LOAD(T)                                                     \
  do {                                                              \
    T *d = dst;                                                     \
    for (int64_t j = 0; j < len; j++) {                             \
      const T *s = (const T *)(const void *)(src + j * inner * es); \
      for (int64_t c = 0; c < w; c++) d[c * len + j] = s[c];        \
    }                                                               \
  } while (0)
  typedef struct {
    uint64_t a, b;
  } c16;
  if (es == 4)
    LOAD(uint32_t);
  else if (es == 8)
    LOAD(uint64_t);
  else
    LOAD(c16);
#undef LOAD
}

/* dst[j * inner + c] = src[c * len + j], the inverse of cols_load. */
static void cols_store(char *dst, const void *src, int64_t len, int64_t inner, int64_t w, int64_t es) {
#define STORE(T)                                             \
  do {                                                       \
    const T *s = src;                                        \
    for (int64_t j = 0; j < len; j++) {                      \
      T *d = (T *)(void *)(dst + j * inner * es);            \
      for (int64_t c = 0; c < w; c++) d[c] = s[c * len + j]; \
    }                                                        \
  } while (0)
  typedef struct {
    uint64_t a, b;
  } c16;
  if (es == 4)
    STORE(uint32_t);
  else if (es == 8)
    STORE(uint64_t);
  else
    STORE(c16);
#undef STORE
}

/* The plans of a way: one for a full group, one for the last, shorter one (or NULL). */
typedef struct fft_plans {
  loom__fft_key full, last;
  void *p_full, *p_last;
  bool own_full, own_last;
} fft_plans;

static void plans_release(fft_plans *p) {
  loom__fft_plan_release(&p->full, p->p_full, p->own_full);
  loom__fft_plan_release(&p->last, p->p_last, p->own_last);
}

static loom_status plans_get(fft_plans *p, void *in, void *out) {
  loom_status s = loom__fft_plan_get(&p->full, in, out, &p->p_full, &p->own_full);
  if (!s && p->last.loop[0][0] > 0) s = loom__fft_plan_get(&p->last, in, out, &p->p_last, &p->own_last);
  return s;
}

static loom_status run_columns(const fft_shape *sh, const char *src, char *dst) {
  /* whole cache lines of the input per row where the buffer allows: a group that ends inside
   * a line leaves the rest of it to be read again by the next group */
  int64_t fit = BLOCK_BYTES / (sh->n * LOOM_MAX(sh->es_in, sh->es_out)), line = 64 / sh->es_in;
  int64_t w = fit >= line ? LOOM_MIN(MAX_COLS, fit) / line * line : LOOM_MAX(1, fit);
  w = LOOM_MIN(w, sh->inner);
  int64_t groups = (sh->inner + w - 1) / w, tasks = sh->outer * groups, rem = sh->inner % w;
  size_t bin = (size_t)(w * sh->len_in * sh->es_in), bout = (size_t)(w * sh->len_out * sh->es_out);
  bool same = sh->kind == LOOM__FFT_FORWARD || sh->kind == LOOM__FFT_BACKWARD;
  fft_plans P = {.full = rows_key(sh, w), .last = rows_key(sh, rem)};
  P.full.inplace = P.last.inplace = same;
  /* the thread buffers come from the aligned allocator: 64-byte aligned, as the stand-ins */
  char *a = loom__aligned_alloc(bin), *b = same ? a : loom__aligned_alloc(bout);
  loom_status s = a && b ? plans_get(&P, a, b) : loom__oom("fft: a buffer of columns");
  if (b != a) loom__aligned_free(b);
  loom__aligned_free(a);
  bool failed = false;
  bool threads = sh->outer * sh->len_out * sh->inner > FFT_PARALLEL_MIN && tasks > 1;
#pragma omp parallel if (threads && !s) reduction(|| : failed)
  {
    char *x = loom__aligned_alloc(bin), *y = same ? x : loom__aligned_alloc(bout);
    failed = !x || !y;
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; t++) {
      int64_t o = t / groups, c0 = (t % groups) * w, cw = LOOM_MIN(w, sh->inner - c0);
      if (failed || s) continue;
      const char *in = src + (o * sh->len_in * sh->inner + c0) * sh->es_in;
      char *out = dst + (o * sh->len_out * sh->inner + c0) * sh->es_out;
      cols_load(x, in, sh->len_in, sh->inner, cw, sh->es_in);
      if (sh->kind == LOOM__FFT_C2R) clear_dc_nyquist(x, sh, cw, sh->len_in, 1);
      bool full = cw == w;
      loom__fft_execute(full ? &P.full : &P.last, full ? P.p_full : P.p_last, x, y);
      if (inverse(sh)) scale(y, out_reals(sh, cw * sh->len_out), sh->dbl, 1.0 / (double)sh->n, false);
      cols_store(out, y, sh->len_out, sh->inner, cw, sh->es_out);
    }
    if (y != x) loom__aligned_free(y);
    loom__aligned_free(x);
  }
  plans_release(&P);
  if (!s && failed) s = loom__oom("fft: a buffer of columns");
  return s;
}

/* ---- rows: groups of rows on the threads ------------------------------------------------- */

/* Rows per group: about BLOCK_BYTES of output, at least one. */
static int64_t rows_group(const fft_shape *sh) {
  int64_t per_row = sh->n * LOOM_MAX(sh->es_in, sh->es_out);
  return LOOM_MIN(sh->outer, LOOM_MAX(1, BLOCK_BYTES / per_row));
}

/* Keys of the rows way: in place when src is dst; aligned as src and dst are when every
 * group starts on the same alignment, else unaligned. irfft reads each group from a buffer. */
static void rows_keys(const fft_shape *sh, fft_plans *P, int64_t r, const char *src, const char *dst) {
  bool copy = sh->kind == LOOM__FFT_C2R;
  int64_t in_row = sh->len_in * sh->es_in, out_row = sh->len_out * sh->es_out;
  P->full = rows_key(sh, r);
  P->last = rows_key(sh, sh->outer % r);
  bool unaligned = (!copy && (r * in_row) % 64 != 0) || (r * out_row) % 64 != 0;
  int64_t ai = copy ? 0 : sh->dbl ? fftw_alignment_of((double *)src) : fftwf_alignment_of((float *)src);
  int64_t ao = sh->dbl ? fftw_alignment_of((double *)dst) : fftwf_alignment_of((float *)dst);
  for (loom__fft_key *k = &P->full; k; k = k == &P->full ? &P->last : NULL) {
    k->inplace = !copy && src == dst;
    k->unaligned = unaligned;
    k->align_in = unaligned ? 0 : ai;
    k->align_out = unaligned ? 0 : ao;
  }
}

static loom_status run_rows(const fft_shape *sh, char *src, char *dst) {
  int64_t r = rows_group(sh), tasks = (sh->outer + r - 1) / r;
  bool copy = sh->kind == LOOM__FFT_C2R;
  size_t bin = copy ? (size_t)(r * sh->len_in * sh->es_in) : 0;
  fft_plans P;
  memset(&P, 0, sizeof P);
  rows_keys(sh, &P, r, src, dst);
  char *a = copy ? loom__aligned_alloc(bin) : NULL;
  loom_status s = !copy || a ? plans_get(&P, copy ? a : src, dst) : loom__oom("fft: a buffer of rows");
  loom__aligned_free(a);
  bool failed = false;
  bool threads = sh->outer * sh->len_out > FFT_PARALLEL_MIN && tasks > 1;
#pragma omp parallel if (threads && !s) reduction(|| : failed)
  {
    char *x = copy ? loom__aligned_alloc(bin) : NULL;
    failed = copy && !x;
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; t++) {
      int64_t r0 = t * r, rn = LOOM_MIN(r, sh->outer - r0);
      if (failed || s) continue;
      char *in = src + r0 * sh->len_in * sh->es_in, *out = dst + r0 * sh->len_out * sh->es_out;
      if (copy) {
        memcpy(x, in, (size_t)(rn * sh->len_in * sh->es_in));
        clear_dc_nyquist(x, sh, rn, sh->len_in, 1);
        in = x;
      }
      bool full = rn == r;
      loom__fft_execute(full ? &P.full : &P.last, full ? P.p_full : P.p_last, in, out);
      if (inverse(sh)) scale(out, out_reals(sh, rn * sh->len_out), sh->dbl, 1.0 / (double)sh->n, false);
    }
    loom__aligned_free(x);
  }
  plans_release(&P);
  if (!s && failed) s = loom__oom("fft: a buffer of rows");
  return s;
}

/* ---- whole: one plan, FFTW's threads ------------------------------------------------------- */

/* `copied`: src is the op's own copy of the input (which c2r may destroy). */
static loom_status run_whole(const fft_shape *sh, char *src, char *dst, bool copied, void *scratch,
                             int64_t scratch_bytes) {
  int64_t in_bytes = sh->outer * sh->len_in * sh->inner * sh->es_in;
  int64_t total = sh->outer * sh->len_out * sh->inner;
  void *heap = NULL;
  if (sh->kind == LOOM__FFT_C2R && !copied) { /* c2r destroys its input */
    void *copy = scratch;
    if (!scratch || scratch_bytes < in_bytes) copy = heap = loom__aligned_alloc((size_t)in_bytes);
    if (!copy) return loom__oom("fft: copy of the input");
    memcpy(copy, src, (size_t)in_bytes);
    src = copy;
  }
  if (sh->kind == LOOM__FFT_C2R) clear_dc_nyquist(src, sh, sh->outer * sh->inner, sh->len_in, sh->inner);
  loom__fft_key k;
  memset(&k, 0, sizeof k);
  k.kind = sh->kind;
  k.dbl = sh->dbl;
  k.n = sh->n;
  k.stride = sh->inner;
  int64_t loops[2][3] = {{sh->outer, sh->len_in * sh->inner, sh->len_out * sh->inner}, {sh->inner, 1, 1}};
  memcpy(k.loop, loops, sizeof loops);
  k.inplace = src == dst;
  k.align_in = sh->dbl ? fftw_alignment_of((double *)src) : fftwf_alignment_of((float *)src);
  k.align_out = sh->dbl ? fftw_alignment_of((double *)dst) : fftwf_alignment_of((float *)dst);
  k.nthreads = total > 2 * FFT_PARALLEL_MIN ? omp_get_max_threads() : 1;
  void *plan;
  bool owned;
  loom_status s = loom__fft_plan_get(&k, src, dst, &plan, &owned);
  if (!s) {
    loom__fft_execute(&k, plan, src, dst);
    loom__fft_plan_release(&k, plan, owned);
    if (inverse(sh)) scale(dst, out_reals(sh, total), sh->dbl, 1.0 / (double)sh->n, total > FFT_PARALLEL_MIN);
  }
  loom__aligned_free(heap);
  return s;
}

/* The output is written whole: where it is large, ask the kernel for huge pages before its
 * first touch. On the machines measured a 4 KiB page's first write costs several microseconds
 * (a virtual machine's fault), so a new 32 MiB result took 30 ms to fault in against 11 ms in
 * 2 MiB pages: more than the transform itself. NumPy does the same for its arrays, which is
 * where SciPy's FFTs write. Pages already touched are left as they are; a refusal is harmless. */
static void hint_huge_pages(void *data, int64_t bytes) {
#ifdef MADV_HUGEPAGE
  const uintptr_t page = 4096;
  if (bytes < ((int64_t)4 << 20)) return;
  uintptr_t a = ((uintptr_t)data + page - 1) & ~(page - 1), end = (uintptr_t)data + (uintptr_t)bytes;
  (void)madvise((void *)a, end - a, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

/* ---- the op ------------------------------------------------------------------------------- */

static loom_status fft_check(const loom__op *op, const loom__view *in, const loom__view *out,
                             int32_t *out_axis, fft_shape *sh) {
  const char *name = loom_op_name(op->kind);
  loom_dtype di = in->type.dtype, dout = out->type.dtype;
  memset(sh, 0, sizeof *sh);
  *out_axis = 0;
  sh->kind = op->kind == LOOM_OP_FFT    ? LOOM__FFT_FORWARD
             : op->kind == LOOM_OP_IFFT ? LOOM__FFT_BACKWARD
             : op->kind == LOOM_OP_RFFT ? LOOM__FFT_R2C
                                        : LOOM__FFT_C2R;
  bool ok;
  switch (sh->kind) {
    case LOOM__FFT_FORWARD:
    case LOOM__FFT_BACKWARD:
      ok = (di == LOOM_C64 || di == LOOM_C128) && dout == di;
      break;
    case LOOM__FFT_R2C:
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
  sh->dbl = di == LOOM_C128 || di == LOOM_F64;
  sh->n = sh->kind == LOOM__FFT_C2R ? out->type.dims[axis] : in->type.dims[axis];
  if (sh->kind == LOOM__FFT_C2R && (op->attrs.set & LOOM_ATTR_N) && op->attrs.n != sh->n)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "irfft: n=%lld but the result has length %lld",
                       (long long)op->attrs.n, (long long)sh->n);
  sh->outer = sh->inner = 1;
  for (int32_t i = 0; i < axis; i++) sh->outer *= out->type.dims[i];
  for (int32_t i = (int32_t)axis + 1; i < rank; i++) sh->inner *= out->type.dims[i];
  loom__fft_key k = {.kind = sh->kind, .dbl = sh->dbl, .n = sh->n};
  sh->len_in = loom__fft_len_in(&k);
  sh->len_out = loom__fft_len_out(&k);
  sh->es_in = loom__fft_elem_bytes(&k, true);
  sh->es_out = loom__fft_elem_bytes(&k, false);
  return LOOM_OK;
}

/* Where the transform reads from: the input itself when it is dense and either is the output
 * (c2c) or lies apart from it, else a dense copy (in the output for c2c, in the scratch or the
 * heap otherwise). */
static loom_status fft_source(const fft_shape *sh, const loom__view *in, const loom__view *out, int32_t axis,
                              void *scratch, int64_t scratch_bytes, char **out_src, void **out_heap) {
  int64_t in_bytes = sh->outer * sh->len_in * sh->inner * sh->es_in;
  int64_t out_bytes = sh->outer * sh->len_out * sh->inner * sh->es_out;
  bool c2c = sh->kind == LOOM__FFT_FORWARD || sh->kind == LOOM__FFT_BACKWARD;
  *out_heap = NULL;
  *out_src = NULL;
  bool same = in->data == out->data;
  if (view_dense(in) && ((same && c2c) || !ranges_overlap(in->data, in_bytes, out->data, out_bytes))) {
    *out_src = in->data;
    return LOOM_OK;
  }
  if (c2c) {
    gather(out->data, in, axis, sh->len_in, sh->es_in);
    *out_src = out->data;
    return LOOM_OK;
  }
  if (scratch && scratch_bytes >= in_bytes) {
    *out_src = scratch;
  } else {
    *out_heap = loom__aligned_alloc((size_t)in_bytes);
    if (!*out_heap) return loom__oom("fft: copy of the input");
    *out_src = *out_heap;
  }
  gather(*out_src, in, axis, sh->len_in, sh->es_in);
  return LOOM_OK;
}

loom_status loom__cpu_fourier(const loom_graph *g, const loom__op *op, const loom__view *in,
                              const loom__view *out, void *scratch, int64_t scratch_bytes) {
  (void)g;
  fft_shape sh;
  int32_t axis;
  loom_status s = fft_check(op, &in[0], &out[0], &axis, &sh);
  if (s) return s;
  int64_t total_out = sh.outer * sh.len_out * sh.inner;
  if (total_out == 0) return LOOM_OK;
  if (sh.n == 0) { /* rfft of an empty axis: one bin, the empty sum */
    memset(out[0].data, 0, (size_t)(total_out * sh.es_out));
    return LOOM_OK;
  }
  hint_huge_pages(out[0].data, total_out * sh.es_out);
  char *src;
  void *heap;
  s = fft_source(&sh, &in[0], &out[0], axis, scratch, scratch_bytes, &src, &heap);
  if (s) return s;
  int nt = omp_get_max_threads();
  if (sh.inner > 1)
    s = run_columns(&sh, src, out[0].data);
  else if (sh.outer >= 2 * nt || (sh.outer > 1 && total_out <= 2 * FFT_PARALLEL_MIN))
    s = run_rows(&sh, src, out[0].data);
  else
    s = run_whole(&sh, src, out[0].data, src != in[0].data, scratch, scratch_bytes);
  loom__aligned_free(heap);
  return s;
}
