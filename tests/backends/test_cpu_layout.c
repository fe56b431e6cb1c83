/* The cpu backend's layout kernels (cpu_layout.c): reshape, transpose, broadcast, slice,
 * concat and tile materialized from strided inputs, on every element size, against index
 * loops over the logical input. */
#include <stdlib.h>

#include "harness.h"
#include "reference.h"

/* One dtype per element size: 1, 2, 4, 8 and 16 bytes. */
static const loom_dtype lay_dtypes[] = {LOOM_U8, LOOM_F16, LOOM_I32, LOOM_F64, LOOM_C128};
#define LAY_N_DTYPES 5

/* A strided view of logical type t over fresh storage: the storage is laid out with the
 * dimensions in `order` (a permutation; outermost first) and every stride doubled, so
 * nothing about the input is dense. Element values are their C-order logical index. */
static loom__view lay_input(const loom_type *t, const int32_t *order, void **storage) {
  int64_t strides[LOOM_MAX_RANK], span = 1;
  for (int32_t k = t->rank - 1; k >= 0; k--) {
    strides[order[k]] = 2 * span;
    span *= t->dims[order[k]] > 0 ? t->dims[order[k]] : 1;
  }
  size_t es = (size_t)loom_dtype_size(t->dtype);
  *storage = calloc((size_t)(2 * span + 1), es);
  loom__view v = ref_view(t, *storage, strides);
  int64_t n = ref_elements(t);
  for (int64_t e = 0; e < n; e++) {
    int64_t rem = e, off = 0;
    for (int32_t d = t->rank - 1; d >= 0; d--) {
      off += rem % t->dims[d] * strides[d];
      rem /= t->dims[d];
    }
    ref_set_c(t->dtype, *storage, off, (double)(e % 251), (double)(e % 7));
  }
  return v;
}

/* The C-order logical index of the input element at multi-index idx. */
static int64_t lay_index(const loom_type *t, const int64_t *idx) {
  int64_t e = 0;
  for (int32_t d = 0; d < t->rank; d++) e = e * t->dims[d] + idx[d];
  return e;
}

static void lay_unflatten(const loom_type *t, int64_t e, int64_t *idx) {
  for (int32_t d = t->rank - 1; d >= 0; d--) {
    idx[d] = e % t->dims[d];
    e /= t->dims[d];
  }
}

/* Output element o must hold the input element of logical index e. */
static bool lay_holds(loom_dtype dt, const void *out, int64_t o, int64_t e) {
  return ref_get(dt, out, o) == (double)(e % 251) &&
         ref_get_im(dt, out, o) == (loom_dtype_is_complex(dt) ? (double)(e % 7) : 0);
}

/* Runs the single-input layout op producing v (input: the graph's param 0 as `in`), then
 * checks every output element against want(out index) -> input logical index. */
typedef int64_t (*lay_map)(const loom_type *in, const loom_type *out, const int64_t *oidx, const void *ctx);

static void lay_check(loom_graph *g, loom_value v, const loom__view *in, lay_map map, const void *ctx) {
  loom_type to = ref_value_type(g, v);
  void *out = ref_alloc(&to);
  loom__view vo = ref_view(&to, out, NULL);
  loom_status s = ref_run(g, ref_op(g, v), in, &vo);
  if (s) {
    loom_test_fail(__FILE__, __LINE__, "%s: %s", loom_op_name(ref_op(g, v)->kind), loom_last_error());
    free(out);
    return;
  }
  int64_t n = ref_elements(&to);
  for (int64_t o = 0; o < n; o++) {
    int64_t idx[LOOM_MAX_RANK];
    lay_unflatten(&to, o, idx);
    int64_t e = map(&in[0].type, &to, idx, ctx);
    if (!lay_holds(to.dtype, out, o, e)) {
      loom_test_fail(__FILE__, __LINE__, "%s on %s: output %lld holds %g, expected input %lld",
                     loom_op_name(ref_op(g, v)->kind), loom_dtype_name(to.dtype), (long long)o,
                     ref_get(to.dtype, out, o), (long long)e);
      break;
    }
  }
  free(out);
}

/* ---- reshape, transpose, broadcast ---------------------------------------------------------- */

static int64_t map_reshape(const loom_type *in, const loom_type *out, const int64_t *oidx, const void *ctx) {
  (void)in, (void)ctx;
  return lay_index(out, oidx);
}

TEST(layout_reshape_strided_input) {
  int64_t d[3] = {3, 4, 5}, shape[2] = {6, 10};
  int32_t order[3] = {2, 0, 1};
  for (int k = 0; k < LAY_N_DTYPES && !loom_test_failed(); k++) {
    loom_type t = ref_type(lay_dtypes[k], 3, d);
    loom_value x;
    loom_graph *g = ref_graph(1, &t, &x);
    loom_value y = loom_reshape(g, x, 2, shape);
    void *storage;
    loom__view in = lay_input(&t, order, &storage);
    lay_check(g, y, &in, map_reshape, NULL);
    free(storage);
    loom_graph_destroy(g);
  }
}

static int64_t map_transpose(const loom_type *in, const loom_type *out, const int64_t *oidx,
                             const void *ctx) {
  const int64_t *perm = ctx;
  int64_t idx[LOOM_MAX_RANK];
  for (int32_t k = 0; k < out->rank; k++) idx[perm[k]] = oidx[k];
  return lay_index(in, idx);
}

TEST(layout_transpose_every_size) {
  int64_t d[4] = {2, 3, 4, 5}, perm[4] = {3, 1, 0, 2};
  int32_t order[4] = {1, 3, 0, 2};
  for (int k = 0; k < LAY_N_DTYPES && !loom_test_failed(); k++) {
    loom_type t = ref_type(lay_dtypes[k], 4, d);
    loom_value x;
    loom_graph *g = ref_graph(1, &t, &x);
    loom_value y = loom_transpose(g, x, 4, perm);
    void *storage;
    loom__view in = lay_input(&t, order, &storage);
    lay_check(g, y, &in, map_transpose, perm);
    /* And from a dense input. */
    int32_t dense[4] = {0, 1, 2, 3};
    free(storage);
    in = lay_input(&t, dense, &storage);
    in.strides[0] /= 2, in.strides[1] /= 2, in.strides[2] /= 2, in.strides[3] /= 2;
    for (int64_t e = 0; e < 120; e++) ref_set_c(t.dtype, storage, e, (double)(e % 251), (double)(e % 7));
    lay_check(g, y, &in, map_transpose, perm);
    free(storage);
    loom_graph_destroy(g);
  }
}

/* A transpose large enough to be copied on several threads. */
TEST(layout_transpose_large) {
  int64_t d[2] = {700, 300}, perm[2] = {1, 0};
  int32_t order[2] = {0, 1};
  loom_type t = ref_type(LOOM_F32, 2, d);
  loom_value x;
  loom_graph *g = ref_graph(1, &t, &x);
  loom_value y = loom_transpose(g, x, 2, perm);
  void *storage;
  loom__view in = lay_input(&t, order, &storage);
  lay_check(g, y, &in, map_transpose, perm);
  free(storage);
  loom_graph_destroy(g);
}

static int64_t map_broadcast(const loom_type *in, const loom_type *out, const int64_t *oidx,
                             const void *ctx) {
  (void)ctx;
  int64_t idx[LOOM_MAX_RANK];
  int32_t lead = out->rank - in->rank;
  for (int32_t d = 0; d < in->rank; d++) idx[d] = in->dims[d] == 1 ? 0 : oidx[d + lead];
  return lay_index(in, idx);
}

TEST(layout_broadcast) {
  int64_t d[2] = {3, 1}, shape[4] = {2, 1, 3, 4};
  int32_t order[2] = {1, 0};
  for (int k = 0; k < LAY_N_DTYPES && !loom_test_failed(); k++) {
    loom_type t = ref_type(lay_dtypes[k], 2, d);
    loom_value x;
    loom_graph *g = ref_graph(1, &t, &x);
    loom_value y = loom_broadcast(g, x, 4, shape);
    void *storage;
    loom__view in = lay_input(&t, order, &storage);
    lay_check(g, y, &in, map_broadcast, NULL);
    free(storage);
    loom_graph_destroy(g);
  }
}

/* ---- slice, tile ----------------------------------------------------------------------------- */

typedef struct lay_slice {
  int64_t start[LOOM_MAX_RANK], step[LOOM_MAX_RANK];
} lay_slice;

static int64_t map_slice(const loom_type *in, const loom_type *out, const int64_t *oidx, const void *ctx) {
  const lay_slice *s = ctx;
  int64_t idx[LOOM_MAX_RANK];
  for (int32_t d = 0; d < out->rank; d++) idx[d] = s->start[d] + oidx[d] * s->step[d];
  return lay_index(in, idx);
}

TEST(layout_slice_steps_and_empty) {
  int64_t d[3] = {5, 7, 6};
  int32_t order[3] = {2, 1, 0};
  lay_slice cases[3] = {{{1, 0, 2}, {2, 3, 1}}, {{0, 6, 5}, {1, 1, 4}}, {{4, 0, 0}, {1, 2, 1}}};
  int64_t stops[3][3] = {{5, 7, 6}, {5, 7, 6}, {4, 7, 6}}; /* the last is empty */
  for (int k = 0; k < LAY_N_DTYPES && !loom_test_failed(); k++)
    for (int c = 0; c < 3 && !loom_test_failed(); c++) {
      loom_type t = ref_type(lay_dtypes[k], 3, d);
      loom_value x;
      loom_graph *g = ref_graph(1, &t, &x);
      loom_value y = loom_slice(g, x, 3, cases[c].start, stops[c], cases[c].step);
      ASSERT_TRUE(y.id >= 0);
      void *storage;
      loom__view in = lay_input(&t, order, &storage);
      lay_check(g, y, &in, map_slice, &cases[c]);
      free(storage);
      loom_graph_destroy(g);
    }
}

static int64_t map_tile(const loom_type *in, const loom_type *out, const int64_t *oidx, const void *ctx) {
  (void)out, (void)ctx;
  int64_t idx[LOOM_MAX_RANK];
  for (int32_t d = 0; d < in->rank; d++) idx[d] = oidx[d] % in->dims[d];
  return lay_index(in, idx);
}

TEST(layout_tile) {
  int64_t d[3] = {2, 3, 2}, reps[2][3] = {{3, 1, 2}, {2, 4}}, n_reps[2] = {3, 2};
  int32_t order[3] = {1, 2, 0};
  for (int k = 0; k < LAY_N_DTYPES && !loom_test_failed(); k++)
    for (int c = 0; c < 2; c++) {
      loom_type t = ref_type(lay_dtypes[k], 3, d);
      loom_value x;
      loom_graph *g = ref_graph(1, &t, &x);
      loom_value y = loom_tile(g, x, (int32_t)n_reps[c], reps[c]);
      ASSERT_TRUE(y.id >= 0);
      void *storage;
      loom__view in = lay_input(&t, order, &storage);
      lay_check(g, y, &in, map_tile, NULL);
      free(storage);
      loom_graph_destroy(g);
    }
  /* A zero rep gives an empty output. */
  loom_type t = ref_type(LOOM_F32, 3, d);
  loom_value x;
  loom_graph *g = ref_graph(1, &t, &x);
  int64_t zero[3] = {1, 0, 1};
  loom_value y = loom_tile(g, x, 3, zero);
  void *storage;
  loom__view in = lay_input(&t, order, &storage);
  lay_check(g, y, &in, map_tile, NULL);
  free(storage);
  loom_graph_destroy(g);
}

/* ---- concat ----------------------------------------------------------------------------------- */

TEST(layout_concat_strided_and_empty) {
  for (int k = 0; k < LAY_N_DTYPES && !loom_test_failed(); k++) {
    loom_dtype dt = lay_dtypes[k];
    int64_t d0[3] = {2, 3, 4}, d1[3] = {2, 0, 4}, d2[3] = {2, 5, 4};
    loom_type ts[3] = {ref_type(dt, 3, d0), ref_type(dt, 3, d1), ref_type(dt, 3, d2)};
    loom_value p[3];
    loom_graph *g = ref_graph(3, ts, p);
    loom_value y = loom_concat(g, p, 3, -2);
    ASSERT_TRUE(y.id >= 0);
    int32_t o0[3] = {2, 0, 1}, o1[3] = {0, 1, 2}, o2[3] = {1, 0, 2};
    void *s0, *s1, *s2;
    loom__view in[3] = {lay_input(&ts[0], o0, &s0), lay_input(&ts[1], o1, &s1), lay_input(&ts[2], o2, &s2)};
    loom_type to = ref_value_type(g, y);
    void *out = ref_alloc(&to);
    loom__view vo = ref_view(&to, out, NULL);
    ASSERT_OK(ref_run(g, ref_op(g, y), in, &vo));
    for (int64_t i = 0; i < 2; i++)
      for (int64_t j = 0; j < 8; j++)
        for (int64_t c = 0; c < 4; c++) {
          const loom_type *src = j < 3 ? &ts[0] : &ts[2];
          int64_t idx[3] = {i, j < 3 ? j : j - 3, c};
          ASSERT_TRUE(lay_holds(dt, out, (i * 8 + j) * 4 + c, lay_index(src, idx)));
        }
    free(out), free(s0), free(s1), free(s2);
    loom_graph_destroy(g);
  }
}

TEST(layout_checks) {
  int64_t d[2] = {3, 4}, shape[2] = {4, 3};
  loom_type t = ref_type(LOOM_F32, 2, d);
  loom_value x;
  loom_graph *g = ref_graph(1, &t, &x);
  loom_value y = loom_reshape(g, x, 2, shape);
  float in[12] = {0}, out[12];
  loom_type small = ref_type(LOOM_F32, 1, d);
  loom_type ot = ref_value_type(g, y);
  loom__view vi = ref_view(&small, in, NULL), vo = ref_view(&ot, out, NULL);
  ASSERT_STATUS(ref_run(g, ref_op(g, y), &vi, &vo), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "reshape");
  loom_graph_destroy(g);
}
