/* The cpu backend's conv (cpu_conv.c) against a naive cross-correlation in double precision:
 * 1-D, 2-D and 3-D with stride, padding, dilation and groups, the 1x1 in-place path, strided
 * operands, f64/f16/bf16, col tiles that split output rows, the heap fallback, and a
 * ResNet-sized layer that must run well under a second. */
#include <stdlib.h>

#include "backends/cpu/cpu_kernels.h"
#include "harness.h"
#include "loom/testing.h"

static uint64_t conv_rng = 0x2545F4914F6CDD1Dull;

static double conv_urand(void) { /* [-1, 1) */
  conv_rng ^= conv_rng << 13;
  conv_rng ^= conv_rng >> 7;
  conv_rng ^= conv_rng << 17;
  return (double)(conv_rng >> 11) / (double)(1ull << 52) - 1.0;
}

static double conv_get(loom_dtype dt, const void *p, int64_t off) {
  switch (dt) {
    case LOOM_F16:
      return loom_f16_to_f32(((const uint16_t *)p)[off]);
    case LOOM_BF16:
      return loom_bf16_to_f32(((const uint16_t *)p)[off]);
    case LOOM_F32:
      return ((const float *)p)[off];
    default:
      return ((const double *)p)[off];
  }
}

static void conv_set(loom_dtype dt, void *p, int64_t off, double v) {
  switch (dt) {
    case LOOM_F16:
      ((uint16_t *)p)[off] = loom_f32_to_f16((float)v);
      break;
    case LOOM_BF16:
      ((uint16_t *)p)[off] = loom_f32_to_bf16((float)v);
      break;
    case LOOM_F32:
      ((float *)p)[off] = (float)v;
      break;
    default:
      ((double *)p)[off] = v;
      break;
  }
}

/* A view of dims (strides NULL: dense) over fresh random storage the caller frees. */
static loom__view conv_view(loom_dtype dt, int32_t rank, const int64_t *dims, const int64_t *strides,
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
  *storage = malloc((size_t)(span * loom_dtype_size(dt)));
  for (int64_t i = 0; i < span; i++) conv_set(dt, *storage, i, conv_urand());
  v.data = *storage;
  return v;
}

typedef struct conv_attrs {
  const int64_t *stride, *padding, *dilation; /* NULL: defaults */
  int64_t groups;
} conv_attrs;

static int64_t conv_off(const loom__view *v, const int64_t *idx) {
  int64_t off = 0;
  for (int32_t i = 0; i < v->type.rank; i++) off += idx[i] * v->strides[i];
  return off;
}

/* Compares out (dense) with the naive cross-correlation, every `every`th element; tolerance
 * relative to sum |x||w|. */
static void conv_compare(const loom__view *x, const loom__view *w, const conv_attrs *a, const loom_type *ot,
                         const void *out, double tol, int64_t every) {
  int32_t ns = x->type.rank - 2;
  int64_t G = a->groups, Cg = w->type.dims[1], Og = ot->dims[1] / G, total = 1, K = 1;
  for (int32_t i = 0; i < ot->rank; i++) total *= ot->dims[i];
  for (int32_t i = 0; i < ns; i++) K *= w->type.dims[2 + i];
  for (int64_t e = 0; e < total; e += every) {
    int64_t oi[LOOM_MAX_RANK], rem = e;
    for (int32_t d = ot->rank - 1; d >= 0; d--) {
      oi[d] = rem % ot->dims[d];
      rem /= ot->dims[d];
    }
    int64_t g = oi[1] / Og;
    double sum = 0, mag = 0;
    for (int64_t c = 0; c < Cg; c++)
      for (int64_t kk = 0; kk < K; kk++) {
        int64_t xi[LOOM_MAX_RANK] = {oi[0], g * Cg + c}, wi[LOOM_MAX_RANK] = {oi[1], c};
        bool inside = true;
        for (int32_t d = ns - 1, r = (int32_t)kk; d >= 0; d--) {
          int64_t kd = r % w->type.dims[2 + d];
          r /= (int32_t)w->type.dims[2 + d];
          int64_t s = a->stride ? a->stride[d] : 1, p = a->padding ? a->padding[d] : 0;
          int64_t dl = a->dilation ? a->dilation[d] : 1;
          xi[2 + d] = oi[2 + d] * s - p + kd * dl;
          wi[2 + d] = kd;
          if (xi[2 + d] < 0 || xi[2 + d] >= x->type.dims[2 + d]) inside = false;
        }
        if (!inside) continue;
        double xv = conv_get(x->type.dtype, x->data, conv_off(x, xi));
        double wv = conv_get(w->type.dtype, w->data, conv_off(w, wi));
        sum += xv * wv;
        mag += fabs(xv * wv);
      }
    double got = conv_get(ot->dtype, out, e);
    if (!(fabs(got - sum) <= tol * mag + 1e-30)) {
      loom_test_fail(__FILE__, __LINE__, "element %lld: %.9g, expected %.9g", (long long)e, got, sum);
      return;
    }
  }
}

/* Builds conv(x, w) with attrs a, runs loom__cpu_conv on the views and compares every
 * `every`th element (0: times the run without comparing). use_scratch: 1 the op's scratch,
 * 0 none (heap fallback). */
static void conv_check(const loom__view *x, const loom__view *w, const conv_attrs *a, double tol,
                       int use_scratch, int64_t every, double *out_seconds) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_create("conv", &g));
  loom_value px = loom_graph_param(g, "x", &x->type), pw = loom_graph_param(g, "w", &w->type);
  loom_value r = loom_conv(g, px, pw, a->stride, a->padding, a->dilation, a->groups);
  if (r.id < 0) {
    loom_test_fail(__FILE__, __LINE__, "loom_conv: %s", loom_last_error());
    loom_graph_destroy(g);
    return;
  }
  const loom__op *op = &g->ops[g->n_ops - 1];
  loom__view in[2] = {*x, *w}, out;
  memset(&out, 0, sizeof out);
  out.type = *loom_value_type(g, r);
  loom__view_dense_strides(&out.type, out.strides);
  int64_t bytes = 0, sbytes = use_scratch ? loom__op_scratch_bytes(g, op) : 0;
  loom_type_bytes(&out.type, &bytes);
  out.data = malloc((size_t)bytes + 1);
  memset(out.data, 0xAB, (size_t)bytes + 1);
  void *scratch = sbytes ? malloc((size_t)sbytes) : NULL;
  double t0 = loom__now();
  loom_status s = loom__cpu_conv(g, op, in, &out, scratch, sbytes);
  if (out_seconds) *out_seconds = loom__now() - t0;
  if (s)
    loom_test_fail(__FILE__, __LINE__, "loom__cpu_conv: %s", loom_last_error());
  else if (every > 0)
    conv_compare(x, w, a, &out.type, out.data, tol, every);
  free(scratch);
  free(out.data);
  loom_graph_destroy(g);
}

/* Dense x and w, checked with and without scratch. */
static void conv_dense(loom_dtype dt, int32_t rank, const int64_t *xd, const int64_t *wd, conv_attrs a,
                       double tol) {
  void *sx, *sw;
  loom__view x = conv_view(dt, rank, xd, NULL, &sx), w = conv_view(dt, rank, wd, NULL, &sw);
  if (a.groups == 0) a.groups = 1;
  conv_check(&x, &w, &a, tol, 1, 1, NULL);
  if (!loom_test_failed()) conv_check(&x, &w, &a, tol, 0, 1, NULL);
  free(sx);
  free(sw);
}

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define TOL_F32 1e-5
#define TOL_F64 1e-12

TEST(cpu_conv_1d) {
  conv_dense(LOOM_F32, 3, DIMS(2, 3, 10), DIMS(4, 3, 3), (conv_attrs){0}, TOL_F32);
  if (loom_test_failed()) return;
  conv_dense(LOOM_F32, 3, DIMS(2, 4, 11), DIMS(6, 2, 3), (conv_attrs){DIMS(2), DIMS(1), DIMS(2), 2}, TOL_F32);
  if (loom_test_failed()) return;
  conv_dense(LOOM_F64, 3, DIMS(1, 2, 7), DIMS(3, 2, 7), (conv_attrs){NULL, DIMS(3), NULL, 1}, TOL_F64);
}

TEST(cpu_conv_2d) {
  conv_dense(LOOM_F32, 4, DIMS(2, 3, 9, 8), DIMS(4, 3, 3, 2),
             (conv_attrs){DIMS(2, 1), DIMS(1, 0), DIMS(1, 2), 1}, TOL_F32);
  if (loom_test_failed()) return;
  /* depthwise: groups = channels */
  conv_dense(LOOM_F32, 4, DIMS(1, 6, 7, 7), DIMS(6, 1, 3, 3), (conv_attrs){NULL, DIMS(1, 1), NULL, 6},
             TOL_F32);
  if (loom_test_failed()) return;
  conv_dense(LOOM_F64, 4, DIMS(3, 4, 12, 5), DIMS(6, 2, 5, 3),
             (conv_attrs){DIMS(3, 2), DIMS(2, 1), DIMS(2, 1), 2}, TOL_F64);
  if (loom_test_failed()) return;
  /* 1x1 kernels read x in place (also per group) */
  conv_dense(LOOM_F32, 4, DIMS(2, 8, 5, 5), DIMS(4, 8, 1, 1), (conv_attrs){0}, TOL_F32);
  if (loom_test_failed()) return;
  conv_dense(LOOM_F64, 4, DIMS(2, 8, 5, 6), DIMS(6, 4, 1, 1), (conv_attrs){NULL, NULL, NULL, 2}, TOL_F64);
  if (loom_test_failed()) return;
  /* 1x1 with a stride goes through im2col */
  conv_dense(LOOM_F32, 4, DIMS(1, 3, 7, 7), DIMS(2, 3, 1, 1), (conv_attrs){DIMS(2, 3), NULL, NULL, 1},
             TOL_F32);
}

TEST(cpu_conv_3d) {
  conv_dense(LOOM_F32, 5, DIMS(1, 2, 5, 6, 7), DIMS(3, 2, 2, 3, 2),
             (conv_attrs){DIMS(1, 2, 1), DIMS(1, 1, 0), DIMS(2, 1, 1), 1}, TOL_F32);
  if (loom_test_failed()) return;
  conv_dense(LOOM_F64, 5, DIMS(2, 4, 4, 4, 4), DIMS(4, 2, 3, 3, 3),
             (conv_attrs){NULL, DIMS(1, 1, 1), NULL, 2}, TOL_F64);
}

TEST(cpu_conv_half) {
  /* Inputs exact in f16; f32 sums rounded once on store. */
  conv_dense(LOOM_F16, 4, DIMS(2, 3, 9, 8), DIMS(4, 3, 3, 3), (conv_attrs){DIMS(1, 2), DIMS(1, 1), NULL, 1},
             1e-3);
  if (loom_test_failed()) return;
  conv_dense(LOOM_BF16, 3, DIMS(2, 4, 20), DIMS(4, 2, 5), (conv_attrs){NULL, DIMS(2), DIMS(2), 2}, 8e-3);
}

/* Strided views: x with its spatial dims transposed, w with a step on output channels. */
TEST(cpu_conv_strided_operands) {
  void *sx, *sw;
  /* storage [2,3,8,9] seen as x [2,3,9,8] */
  loom__view x = conv_view(LOOM_F32, 4, DIMS(2, 3, 9, 8), DIMS(216, 72, 1, 9), &sx);
  loom__view w = conv_view(LOOM_F32, 4, DIMS(4, 3, 3, 3), DIMS(2 * 27, 9, 3, 1), &sw);
  conv_attrs a = {NULL, DIMS(1, 1), NULL, 1};
  conv_check(&x, &w, &a, TOL_F32, 1, 1, NULL);
  if (!loom_test_failed()) conv_check(&x, &w, &a, TOL_F32, 0, 1, NULL);
  free(sx);
  free(sw);
  if (loom_test_failed()) return;
  /* a batch broadcast from one image (stride 0 on N) with a 1x1 kernel */
  x = conv_view(LOOM_F64, 4, DIMS(3, 4, 5, 5), DIMS(0, 25, 5, 1), &sx);
  w = conv_view(LOOM_F64, 4, DIMS(2, 4, 1, 1), NULL, &sw);
  a = (conv_attrs){NULL, NULL, NULL, 1};
  conv_check(&x, &w, &a, TOL_F64, 1, 1, NULL);
  free(sx);
  free(sw);
}

/* 1x64x56x56 by 64x64x3x3 with padding 1: col is tiled through the scratch (2x the
 * output). It takes about 10 ms on two idle cores; the bound only catches the absurd, with
 * room for sanitizers and a loaded machine. */
TEST(cpu_conv_resnet_layer) {
  void *sx, *sw;
  loom__view x = conv_view(LOOM_F32, 4, DIMS(1, 64, 56, 56), NULL, &sx);
  loom__view w = conv_view(LOOM_F32, 4, DIMS(64, 64, 3, 3), NULL, &sw);
  conv_attrs a = {NULL, DIMS(1, 1), NULL, 1};
  double best = 1e9;
  for (int rep = 0; rep < 3 && !loom_test_failed(); rep++) {
    double t; /* the reference checks a sample of the outputs, once */
    conv_check(&x, &w, &a, TOL_F32, 1, rep == 0 ? 11 : 0, &t);
    best = t < best ? t : best;
  }
  free(sx);
  free(sw);
  if (loom_test_failed()) return;
  printf("    1x64x56x56 * 64x64x3x3: %.1f ms\n", best * 1e3);
  ASSERT_TRUE(best < 1.0);
}

TEST(cpu_conv_empty) {
  conv_dense(LOOM_F32, 4, DIMS(0, 3, 5, 5), DIMS(2, 3, 3, 3), (conv_attrs){0}, TOL_F32);
  if (loom_test_failed()) return;
  conv_dense(LOOM_F32, 4, DIMS(1, 3, 5, 5), DIMS(0, 3, 3, 3), (conv_attrs){0}, TOL_F32);
  if (loom_test_failed()) return;
  conv_dense(LOOM_F32, 3, DIMS(2, 0, 5), DIMS(3, 0, 3), (conv_attrs){0}, TOL_F32); /* no channels */
}

/* Without scratch the col buffer comes from the heap: when that fails the kernel returns
 * OUT_OF_MEMORY and leaves nothing allocated. */
TEST(cpu_conv_out_of_memory) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_create("oom", &g));
  void *sx, *sw;
  loom__view in[2];
  in[0] = conv_view(LOOM_F32, 4, DIMS(1, 3, 8, 8), NULL, &sx);
  in[1] = conv_view(LOOM_F32, 4, DIMS(2, 3, 3, 3), NULL, &sw);
  loom_value r = loom_conv(g, loom_graph_param(g, "x", &in[0].type), loom_graph_param(g, "w", &in[1].type),
                           NULL, NULL, NULL, 1);
  loom__view out;
  memset(&out, 0, sizeof out);
  loom_test_sweep sweep = {0};
  if (r.id >= 0) {
    out.type = *loom_value_type(g, r);
    loom__view_dense_strides(&out.type, out.strides);
    out.data = malloc(2 * 6 * 6 * 4);
    SWEEP_ALLOCATIONS(&sweep, 1, 100) {
      SWEEP_RUN(&sweep, loom__cpu_conv(g, &g->ops[g->n_ops - 1], in, &out, NULL, 0));
    }
  }
  free(out.data);
  free(sx);
  free(sw);
  loom_graph_destroy(g);
  ASSERT_TRUE(r.id >= 0);
  ASSERT_TRUE(sweep.failures > 0);
}
