/* The cpu backend's fft, ifft, rfft and irfft (cpu_fft.c) against a naive DFT in double
 * precision, with numpy.fft's conventions: several lengths, the first and last axis and a
 * middle one, f32 and f64, strided and broadcast inputs, irfft ignoring the imaginary parts
 * of DC and Nyquist, round trips, a transform big enough to plan threaded, batches of rows and
 * of columns big enough to share among threads, and transforms from several threads at once
 * (the plan cache's lock). */
#include <pthread.h>
#include <stdlib.h>

#include "backends/cpu/cpu_kernels.h"
#include "harness.h"
#include "loom/testing.h"

#define FFT_PI 3.14159265358979323846

/* Per thread: fft_thread draws inputs from several threads at once. */
static _Thread_local uint64_t fft_rng = 0xD1B54A32D192ED03ull;

static double fft_urand(void) { /* [-1, 1) */
  fft_rng ^= fft_rng << 13;
  fft_rng ^= fft_rng >> 7;
  fft_rng ^= fft_rng << 17;
  return (double)(fft_rng >> 11) / (double)(1ull << 52) - 1.0;
}

static bool fft_is_complex(loom_dtype dt) {
  return dt == LOOM_C64 || dt == LOOM_C128;
}
static bool fft_is_double(loom_dtype dt) {
  return dt == LOOM_F64 || dt == LOOM_C128;
}

static double fft_get(loom_dtype dt, const void *p, int64_t off, int part) {
  if (!fft_is_complex(dt)) {
    if (part) return 0;
    return fft_is_double(dt) ? ((const double *)p)[off] : ((const float *)p)[off];
  }
  return fft_is_double(dt) ? ((const double *)p)[2 * off + part] : ((const float *)p)[2 * off + part];
}

/* A view of dims (strides NULL: dense) over fresh random storage the caller frees. */
static loom__view fft_view(loom_dtype dt, int32_t rank, const int64_t *dims, const int64_t *strides,
                           void **storage) {
  loom__view v;
  memset(&v, 0, sizeof v);
  loom_type_make(dt, rank, dims, &v.type);
  if (strides)
    memcpy(v.strides, strides, sizeof(int64_t) * (size_t)rank);
  else
    loom__view_dense_strides(&v.type, v.strides);
  int64_t span = 1;
  for (int32_t i = 0; i < rank; i++)
    if (dims[i] > 0) span += (dims[i] - 1) * v.strides[i];
  int64_t reals = span * (fft_is_complex(dt) ? 2 : 1);
  *storage = malloc((size_t)(span * loom_dtype_size(dt)));
  for (int64_t i = 0; i < reals; i++) {
    if (fft_is_double(dt))
      ((double *)*storage)[i] = fft_urand();
    else
      ((float *)*storage)[i] = (float)fft_urand();
  }
  v.data = *storage;
  return v;
}

/* Runs op on view x along axis (n for irfft) into a fresh dense output the caller frees. */
static void *fft_run(loom_op kind, const loom__view *x, int64_t axis, int64_t n, int use_scratch,
                     loom__view *out) {
  loom_graph *g = NULL;
  void *result = NULL;
  memset(out, 0, sizeof *out);
  if (loom_graph_create("fft", &g)) {
    loom_test_fail(__FILE__, __LINE__, "loom_graph_create: %s", loom_last_error());
    return NULL;
  }
  loom_value r = loom_fourier(g, kind, loom_graph_param(g, "x", &x->type), axis, n);
  if (r.id < 0) {
    loom_test_fail(__FILE__, __LINE__, "loom_fourier: %s", loom_last_error());
    loom_graph_destroy(g);
    return NULL;
  }
  const loom__op *op = &g->ops[g->n_ops - 1];
  out->type = *loom_value_type(g, r);
  loom__view_dense_strides(&out->type, out->strides);
  int64_t bytes = 0, sbytes = use_scratch ? loom__op_scratch_bytes(g, op) : 0;
  loom_type_bytes(&out->type, &bytes);
  out->data = malloc((size_t)bytes + 16);
  memset(out->data, 0xAB, (size_t)bytes + 16);
  void *scratch = sbytes ? malloc((size_t)sbytes) : NULL;
  loom_status s = loom__cpu_fourier(g, op, x, out, scratch, sbytes);
  if (s) {
    loom_test_fail(__FILE__, __LINE__, "loom__cpu_fourier(%s): %s", loom_op_name(kind), loom_last_error());
    free(out->data);
  } else {
    result = out->data;
  }
  free(scratch);
  loom_graph_destroy(g);
  return result;
}

/* The naive transform of the line of x through base offset `off` (stride `st`, `len` long)
 * at output bin j, as numpy.fft defines each op. */
static void fft_naive(loom_op kind, const loom__view *x, int64_t off, int64_t st, int64_t len, int64_t n,
                      int64_t j, double *re, double *im, double *mag) {
  loom_dtype dt = x->type.dtype;
  double sr = 0, si = 0, m = 0;
  if (kind == LOOM_OP_IRFFT) { /* Hermitian extension of the first n/2+1 bins */
    for (int64_t k = 0; k < n; k++) {
      int64_t src = k <= n / 2 ? k : n - k;
      double xr = src < len ? fft_get(dt, x->data, off + src * st, 0) : 0;
      double xi = src < len ? fft_get(dt, x->data, off + src * st, 1) : 0;
      if (k > n / 2) xi = -xi;
      if (k == 0 || (n % 2 == 0 && k == n / 2)) xi = 0;
      double ang = 2 * FFT_PI * (double)((j * k) % n) / (double)n;
      sr += xr * cos(ang) - xi * sin(ang);
      m += hypot(xr, xi);
    }
    *re = sr / (double)n;
    *im = 0;
    *mag = m / (double)n;
    return;
  }
  double sign = kind == LOOM_OP_IFFT ? 1 : -1;
  for (int64_t k = 0; k < len; k++) {
    double xr = fft_get(dt, x->data, off + k * st, 0), xi = fft_get(dt, x->data, off + k * st, 1);
    double ang = sign * 2 * FFT_PI * (double)((j * k) % len) / (double)len;
    sr += xr * cos(ang) - xi * sin(ang);
    si += xr * sin(ang) + xi * cos(ang);
    m += hypot(xr, xi);
  }
  double scale = kind == LOOM_OP_IFFT ? 1.0 / (double)len : 1.0;
  *re = sr * scale;
  *im = si * scale;
  *mag = m * scale;
}

/* Compares every output element with fft_naive. */
static void fft_compare(loom_op kind, const loom__view *x, int32_t axis, int64_t n, const loom__view *out,
                        double tol) {
  const loom_type *ot = &out->type;
  int64_t total = 1;
  for (int32_t i = 0; i < ot->rank; i++) total *= ot->dims[i];
  for (int64_t e = 0; e < total; e++) {
    int64_t oi[LOOM_MAX_RANK], rem = e, off = 0;
    for (int32_t d = ot->rank - 1; d >= 0; d--) {
      oi[d] = rem % ot->dims[d];
      rem /= ot->dims[d];
      if (d != axis) off += oi[d] * x->strides[d];
    }
    double re, im, mag;
    fft_naive(kind, x, off, x->strides[axis], x->type.dims[axis], n, oi[axis], &re, &im, &mag);
    double gr = fft_get(ot->dtype, out->data, e, 0), gi = fft_get(ot->dtype, out->data, e, 1);
    if (!(fabs(gr - re) <= tol * mag + 1e-30 && fabs(gi - im) <= tol * mag + 1e-30)) {
      loom_test_fail(__FILE__, __LINE__, "%s element %lld: (%.9g, %.9g), expected (%.9g, %.9g)",
                     loom_op_name(kind), (long long)e, gr, gi, re, im);
      return;
    }
  }
}

static void fft_check(loom_op kind, const loom__view *x, int32_t axis, int64_t n, int use_scratch) {
  loom__view out;
  void *data = fft_run(kind, x, axis, n, use_scratch, &out);
  if (!data) return;
  double tol = fft_is_double(x->type.dtype) ? 1e-12 : 2e-6;
  fft_compare(kind, x, axis < 0 ? axis + x->type.rank : axis, n, &out, tol);
  free(data);
}

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})

static const int64_t fft_lengths[] = {1, 2, 5, 8, 12, 17};

/* Each op on lines along axis 0, the last axis, and the middle of [2, len, 3]. */
static void fft_all_axes(loom_op kind, loom_dtype dt, int64_t len, int64_t n) {
  void *s;
  loom__view x = fft_view(dt, 2, DIMS(len, 3), NULL, &s);
  fft_check(kind, &x, 0, n, 1);
  free(s);
  if (loom_test_failed()) return;
  x = fft_view(dt, 2, DIMS(3, len), NULL, &s);
  fft_check(kind, &x, 1, n, 1);
  if (!loom_test_failed()) fft_check(kind, &x, -1, n, 0);
  free(s);
  if (loom_test_failed()) return;
  x = fft_view(dt, 3, DIMS(2, len, 3), NULL, &s);
  fft_check(kind, &x, 1, n, 1);
  free(s);
  if (loom_test_failed()) return;
  x = fft_view(dt, 1, DIMS(len), NULL, &s);
  fft_check(kind, &x, 0, n, 0);
  free(s);
}

TEST(cpu_fft_c2c) {
  static const loom_dtype types[] = {LOOM_C64, LOOM_C128};
  for (int t = 0; t < 2; t++)
    for (int i = 0; i < LOOM_ARRAY_SIZE(fft_lengths); i++) {
      fft_all_axes(LOOM_OP_FFT, types[t], fft_lengths[i], 0);
      if (loom_test_failed()) return;
      fft_all_axes(LOOM_OP_IFFT, types[t], fft_lengths[i], 0);
      if (loom_test_failed()) return;
    }
}

TEST(cpu_fft_rfft) {
  static const loom_dtype types[] = {LOOM_F32, LOOM_F64};
  for (int t = 0; t < 2; t++)
    for (int i = 0; i < LOOM_ARRAY_SIZE(fft_lengths); i++) {
      fft_all_axes(LOOM_OP_RFFT, types[t], fft_lengths[i], 0);
      if (loom_test_failed()) return;
    }
}

/* irfft's input has n/2+1 bins; the random imaginary parts of DC and Nyquist are ignored. */
TEST(cpu_fft_irfft) {
  static const loom_dtype types[] = {LOOM_C64, LOOM_C128};
  for (int t = 0; t < 2; t++)
    for (int i = 0; i < LOOM_ARRAY_SIZE(fft_lengths); i++) {
      int64_t n = fft_lengths[i];
      fft_all_axes(LOOM_OP_IRFFT, types[t], n / 2 + 1, n);
      if (loom_test_failed()) return;
    }
}

/* Inputs as views: a transpose, a step, and a broadcast (stride 0), for every op. */
TEST(cpu_fft_strided_inputs) {
  static const loom_op ops[] = {LOOM_OP_FFT, LOOM_OP_IFFT, LOOM_OP_RFFT, LOOM_OP_IRFFT};
  for (int o = 0; o < 4 && !loom_test_failed(); o++) {
    loom_op kind = ops[o];
    loom_dtype dt = kind == LOOM_OP_RFFT ? LOOM_F32 : LOOM_C64;
    int64_t n = 12, len = kind == LOOM_OP_IRFFT ? n / 2 + 1 : n;
    void *s;
    loom__view x = fft_view(dt, 2, DIMS(len, 4), DIMS(1, len), &s); /* transposed storage */
    fft_check(kind, &x, 0, n, 1);
    free(s);
    if (loom_test_failed()) return;
    x = fft_view(dt, 2, DIMS(4, len), DIMS(1, 4), &s);
    fft_check(kind, &x, 1, n, 1);
    free(s);
    if (loom_test_failed()) return;
    x = fft_view(dt, 2, DIMS(3, len), DIMS(3 * len, 2), &s); /* stepped rows and columns */
    fft_check(kind, &x, 1, n, 1);
    if (!loom_test_failed()) fft_check(kind, &x, 1, n, 0);
    free(s);
    if (loom_test_failed()) return;
    x = fft_view(dt, 2, DIMS(5, len), DIMS(0, 1), &s); /* one line broadcast to 5 */
    fft_check(kind, &x, 1, n, 1);
    free(s);
  }
}

/* ifft(fft(x)) == x and irfft(rfft(x), n) == x, through the kernels. */
static void fft_round_trip(loom_op fwd, loom_op inv, loom_dtype dt, const int64_t *dims, int32_t rank,
                           int32_t axis, double tol) {
  void *s;
  loom__view x = fft_view(dt, rank, dims, NULL, &s), y, z;
  void *yd = fft_run(fwd, &x, axis, 0, 1, &y);
  void *zd = yd ? fft_run(inv, &y, axis, dims[axis], 1, &z) : NULL;
  if (zd) {
    int64_t total = 1;
    for (int32_t i = 0; i < rank; i++) total *= dims[i];
    for (int64_t e = 0; e < total; e++)
      for (int part = 0; part < (fft_is_complex(dt) ? 2 : 1); part++) {
        double want = fft_get(dt, x.data, e, part), got = fft_get(dt, zd, e, part);
        if (!(fabs(got - want) <= tol)) {
          loom_test_fail(__FILE__, __LINE__, "round trip element %lld: %.9g, expected %.9g", (long long)e,
                         got, want);
          e = total;
          break;
        }
      }
  }
  free(zd);
  free(yd);
  free(s);
}

TEST(cpu_fft_round_trip) {
  for (int i = 0; i < LOOM_ARRAY_SIZE(fft_lengths) && !loom_test_failed(); i++) {
    int64_t n = fft_lengths[i];
    fft_round_trip(LOOM_OP_FFT, LOOM_OP_IFFT, LOOM_C64, DIMS(3, n, 2), 3, 1, 1e-5);
    if (!loom_test_failed()) fft_round_trip(LOOM_OP_FFT, LOOM_OP_IFFT, LOOM_C128, DIMS(n, 4), 2, 0, 1e-13);
    if (!loom_test_failed()) fft_round_trip(LOOM_OP_RFFT, LOOM_OP_IRFFT, LOOM_F64, DIMS(2, n), 2, 1, 1e-13);
    if (!loom_test_failed()) fft_round_trip(LOOM_OP_RFFT, LOOM_OP_IRFFT, LOOM_F32, DIMS(n, 3), 2, 0, 1e-5);
  }
}

/* 2^17 points plan with FFTW's threads: a round trip, and a few bins against the DFT. */
TEST(cpu_fft_large) {
  int64_t n = 1 << 17;
  fft_round_trip(LOOM_OP_FFT, LOOM_OP_IFFT, LOOM_C64, DIMS(n), 1, 0, 1e-5);
  if (loom_test_failed()) return;
  fft_round_trip(LOOM_OP_RFFT, LOOM_OP_IRFFT, LOOM_F64, DIMS(2, n), 2, 1, 1e-12);
  if (loom_test_failed()) return;
  void *s;
  loom__view x = fft_view(LOOM_C128, 1, DIMS(n), NULL, &s), y;
  void *yd = fft_run(LOOM_OP_FFT, &x, 0, 0, 1, &y);
  static const int64_t bins[] = {0, 1, 777, 65536, 131071};
  for (int i = 0; yd && i < LOOM_ARRAY_SIZE(bins); i++) {
    double re, im, mag;
    fft_naive(LOOM_OP_FFT, &x, 0, 1, n, n, bins[i], &re, &im, &mag);
    ASSERT_NEAR(fft_get(LOOM_C128, yd, bins[i], 0), re, 1e-11 * mag);
    ASSERT_NEAR(fft_get(LOOM_C128, yd, bins[i], 1), im, 1e-11 * mag);
  }
  free(yd);
  free(s);
}

/* Every `step`-th output element against fft_naive: the batches below are too big to check
 * whole against an O(n^2) transform. */
static void fft_compare_some(loom_op kind, const loom__view *x, int32_t axis, int64_t n,
                             const loom__view *out, double tol, int64_t step) {
  const loom_type *ot = &out->type;
  int64_t total = 1;
  for (int32_t i = 0; i < ot->rank; i++) total *= ot->dims[i];
  for (int64_t e = 0; e < total; e += step) {
    int64_t oi[LOOM_MAX_RANK], rem = e, off = 0;
    for (int32_t d = ot->rank - 1; d >= 0; d--) {
      oi[d] = rem % ot->dims[d];
      rem /= ot->dims[d];
      if (d != axis) off += oi[d] * x->strides[d];
    }
    double re, im, mag;
    fft_naive(kind, x, off, x->strides[axis], x->type.dims[axis], n, oi[axis], &re, &im, &mag);
    double gr = fft_get(ot->dtype, out->data, e, 0), gi = fft_get(ot->dtype, out->data, e, 1);
    if (!(fabs(gr - re) <= tol * mag + 1e-30 && fabs(gi - im) <= tol * mag + 1e-30)) {
      loom_test_fail(__FILE__, __LINE__, "%s element %lld: (%.9g, %.9g), expected (%.9g, %.9g)",
                     loom_op_name(kind), (long long)e, gr, gi, re, im);
      return;
    }
  }
}

/* One op on a batch shaped `dims` along `axis`, checked every `step` elements. */
static void fft_batch(loom_op kind, loom_dtype dt, int32_t rank, const int64_t *dims, int32_t axis, int64_t n,
                      int64_t step) {
  void *s;
  loom__view x = fft_view(dt, rank, dims, NULL, &s), y;
  void *yd = fft_run(kind, &x, axis, n, 1, &y);
  if (yd) fft_compare_some(kind, &x, axis, n, &y, fft_is_double(dt) ? 1e-12 : 4e-6, step);
  free(yd);
  free(s);
}

/* The ways of cpu_fft.c big enough to share among threads: 150 rows of 512 in groups of 64
 * (the last one shorter), and columns of [4, 512, 40] in groups of 16 (the last of 8), each
 * op, a round trip through the column way in double precision too. */
TEST(cpu_fft_batched_rows_and_columns) {
  static const loom_op ops[] = {LOOM_OP_FFT, LOOM_OP_IFFT, LOOM_OP_RFFT, LOOM_OP_IRFFT};
  for (int o = 0; o < 4 && !loom_test_failed(); o++) {
    loom_op kind = ops[o];
    loom_dtype dt = kind == LOOM_OP_RFFT ? LOOM_F32 : LOOM_C64;
    int64_t n = 512, len = kind == LOOM_OP_IRFFT ? n / 2 + 1 : n;
    fft_batch(kind, dt, 2, DIMS(150, len), 1, kind == LOOM_OP_IRFFT ? n : 0, 7);
    if (!loom_test_failed()) fft_batch(kind, dt, 3, DIMS(4, len, 40), 1, kind == LOOM_OP_IRFFT ? n : 0, 5);
  }
  if (!loom_test_failed())
    fft_round_trip(LOOM_OP_FFT, LOOM_OP_IFFT, LOOM_C128, DIMS(4, 512, 40), 3, 1, 1e-12);
  if (!loom_test_failed()) fft_round_trip(LOOM_OP_RFFT, LOOM_OP_IRFFT, LOOM_F32, DIMS(600, 30), 2, 0, 1e-5);
}

/* Several threads transform new shapes at once: planning is serialized by the cache's lock,
 * execution is not. */
static void *fft_thread(void *arg) {
  int id = (int)(intptr_t)arg;
  for (int rep = 0; rep < 20; rep++) {
    int64_t n = 3 + (rep * 7 + id) % 29;
    void *s;
    loom__view x = fft_view(LOOM_C128, 2, DIMS(2, n), NULL, &s), y;
    void *yd = fft_run(LOOM_OP_FFT, &x, 1, 0, 1, &y);
    if (yd) fft_compare(LOOM_OP_FFT, &x, 1, 0, &y, 1e-12);
    free(yd);
    free(s);
  }
  return NULL;
}

TEST(cpu_fft_threads) {
  pthread_t t[4];
  for (int i = 0; i < 4; i++) ASSERT_EQ(pthread_create(&t[i], NULL, fft_thread, (void *)(intptr_t)i), 0);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
}

/* irfft always copies its input; without scratch the copy comes from the heap, and when that
 * fails the kernel returns OUT_OF_MEMORY and leaves nothing allocated. */
TEST(cpu_fft_out_of_memory) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_create("oom", &g));
  void *sx;
  loom__view x = fft_view(LOOM_C64, 2, DIMS(3, 5), NULL, &sx), out;
  memset(&out, 0, sizeof out);
  loom_value r = loom_fourier(g, LOOM_OP_IRFFT, loom_graph_param(g, "x", &x.type), 1, 8);
  loom_test_sweep sw = {0};
  if (r.id >= 0) {
    out.type = *loom_value_type(g, r);
    loom__view_dense_strides(&out.type, out.strides);
    out.data = malloc(3 * 8 * 4);
    SWEEP_ALLOCATIONS(&sw, 1, 100) {
      SWEEP_RUN(&sw, loom__cpu_fourier(g, &g->ops[g->n_ops - 1], &x, &out, NULL, 0));
    }
  }
  free(out.data);
  free(sx);
  loom_graph_destroy(g);
  ASSERT_TRUE(r.id >= 0);
  ASSERT_TRUE(sw.failures > 0);
}
