/* The cpu backend's dot (cpu_dot.c) against a naive matmul in double precision: NumPy's
 * 1-D rules, broadcast batches, operands BLAS takes as they are (dense, transposed) and
 * those it must pack (broadcast, stepped), zero sizes, integers (wrapping), f16/bf16 and
 * complex, with and without the op's scratch. */
#include <stdlib.h>

#include "backends/cpu/cpu_kernels.h"
#include "harness.h"
#include "loom/testing.h"
#include "reference.h"

/* ---- data ------------------------------------------------------------------------------- */

static uint64_t dot_rng = 0x9E3779B97F4A7C15ull;

static double dot_urand(void) { /* [-1, 1) */
  dot_rng ^= dot_rng << 13;
  dot_rng ^= dot_rng >> 7;
  dot_rng ^= dot_rng << 17;
  return (double)(dot_rng >> 11) / (double)(1ull << 52) - 1.0;
}

static int64_t dot_get_int(loom_dtype dt, const void *p, int64_t off) {
  switch (dt) {
    case LOOM_I8:
      return ((const int8_t *)p)[off];
    case LOOM_U8:
    case LOOM_BOOL:
      return ((const uint8_t *)p)[off];
    case LOOM_I16:
      return ((const int16_t *)p)[off];
    case LOOM_I32:
      return ((const int32_t *)p)[off];
    default:
      return ((const int64_t *)p)[off];
  }
}

/* Part 0 (real) or 1 (imaginary) of element `off`, as a double. */
static double dot_get(loom_dtype dt, const void *p, int64_t off, int part) {
  switch (dt) {
    case LOOM_F16:
      return part ? 0 : loom_f16_to_f32(((const uint16_t *)p)[off]);
    case LOOM_BF16:
      return part ? 0 : loom_bf16_to_f32(((const uint16_t *)p)[off]);
    case LOOM_F32:
      return part ? 0 : ((const float *)p)[off];
    case LOOM_F64:
      return part ? 0 : ((const double *)p)[off];
    case LOOM_C64:
      return ((const float *)p)[2 * off + part];
    case LOOM_C128:
      return ((const double *)p)[2 * off + part];
    default:
      return part ? 0 : (double)dot_get_int(dt, p, off);
  }
}

static void dot_set_random(loom_dtype dt, void *p, int64_t off) {
  double re = dot_urand(), im = dot_urand();
  switch (dt) {
    case LOOM_F16:
    case LOOM_BF16:
    case LOOM_F32:
    case LOOM_F64:
    case LOOM_C64:
    case LOOM_C128:
      ref_set_c(dt, p, off, re, im);
      break;
    case LOOM_I8:
      ((int8_t *)p)[off] = (int8_t)(re * 100);
      break;
    case LOOM_U8:
      ((uint8_t *)p)[off] = (uint8_t)((re + 1) * 100);
      break;
    case LOOM_I16:
      ((int16_t *)p)[off] = (int16_t)(re * 30000);
      break;
    /* Large enough that sums of products wrap. */
    case LOOM_I32:
      ((int32_t *)p)[off] = (int32_t)(re * 2e9);
      break;
    default:
      ((int64_t *)p)[off] = (int64_t)(re * 9e18);
      break;
  }
}

/* A view of dims with element strides (NULL: dense) over fresh random storage, which the
 * caller frees. Strides must be >= 0. */
static loom__view dot_view(loom_dtype dt, int32_t rank, const int64_t *dims, const int64_t *strides,
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
  for (int64_t i = 0; i < span; i++) dot_set_random(dt, *storage, i);
  v.data = *storage;
  return v;
}

/* ---- the reference ------------------------------------------------------------------------- */

/* Element offset of operand v for output index oi (batch dims right-aligned; row, col given;
 * a 1-D operand takes only the contracted index). */
static int64_t dot_operand_off(const loom__view *v, const int64_t *oi, int32_t nb, int64_t row, int64_t col,
                               bool is_a) {
  int32_t r = v->type.rank;
  if (r == 1) return (is_a ? col : row) * v->strides[0];
  int64_t off = row * v->strides[r - 2] + col * v->strides[r - 1];
  for (int32_t d = 0; d < r - 2; d++) {
    int64_t idx = oi[nb - (r - 2) + d];
    if (v->type.dims[d] != 1) off += idx * v->strides[d];
  }
  return off;
}

/* Truncates a wrapped sum to dt's width, sign-extending signed types. */
static int64_t dot_wrap(loom_dtype dt, uint64_t v) {
  switch (dt) {
    case LOOM_I8:
      return (int8_t)(uint8_t)v;
    case LOOM_U8:
      return (uint8_t)v;
    case LOOM_I16:
      return (int16_t)(uint16_t)v;
    case LOOM_I32:
      return (int32_t)(uint32_t)v;
    default:
      return (int64_t)v;
  }
}

/* Compares out (dense, type ot) with the naive product of a and b, added to base (dense, type
 * ot) where base is not NULL. Relative tolerance tol against sum |a||b| (+ |base|) for float
 * types; exact for integers (wrapping). */
static void dot_compare(const loom__view *a, const loom__view *b, const loom_type *ot, const void *out,
                        const void *base, double tol) {
  int32_t ra = a->type.rank, rb = b->type.rank;
  int32_t nb = ot->rank - (ra >= 2) - (rb >= 2);
  int64_t k = a->type.dims[ra - 1], total = 1;
  for (int32_t i = 0; i < ot->rank; i++) total *= ot->dims[i];
  loom_dtype dt = ot->dtype;
  for (int64_t e = 0; e < total; e++) {
    int64_t oi[LOOM_MAX_RANK], rem = e;
    for (int32_t d = ot->rank - 1; d >= 0; d--) {
      oi[d] = rem % ot->dims[d];
      rem /= ot->dims[d];
    }
    int64_t i = ra >= 2 ? oi[ot->rank - 1 - (rb >= 2)] : 0, j = rb >= 2 ? oi[ot->rank - 1] : 0;
    double re = base ? dot_get(dt, base, e, 0) : 0, im = base ? dot_get(dt, base, e, 1) : 0;
    double mag = hypot(re, im);
    uint64_t wrapped = base && loom_dtype_is_integer(dt) ? (uint64_t)dot_get_int(dt, base, e) : 0;
    for (int64_t q = 0; q < k; q++) {
      int64_t ao = dot_operand_off(a, oi, nb, i, q, true), bo = dot_operand_off(b, oi, nb, q, j, false);
      double ar = dot_get(dt, a->data, ao, 0), ai = dot_get(dt, a->data, ao, 1);
      double br = dot_get(dt, b->data, bo, 0), bi = dot_get(dt, b->data, bo, 1);
      re += ar * br - ai * bi;
      im += ar * bi + ai * br;
      mag += hypot(ar, ai) * hypot(br, bi);
      if (loom_dtype_is_integer(dt))
        wrapped += (uint64_t)dot_get_int(dt, a->data, ao) * (uint64_t)dot_get_int(dt, b->data, bo);
    }
    if (loom_dtype_is_integer(dt)) {
      if (dot_get_int(dt, out, e) != dot_wrap(dt, wrapped)) {
        loom_test_fail(__FILE__, __LINE__, "element %lld: %lld, expected %lld", (long long)e,
                       (long long)dot_get_int(dt, out, e), (long long)dot_wrap(dt, wrapped));
        return;
      }
      continue;
    }
    double gr = dot_get(dt, out, e, 0), gi = dot_get(dt, out, e, 1);
    if (!(fabs(gr - re) <= tol * mag + 1e-30 && fabs(gi - im) <= tol * mag + 1e-30)) {
      loom_test_fail(__FILE__, __LINE__, "element %lld: (%.9g, %.9g), expected (%.9g, %.9g)", (long long)e,
                     gr, gi, re, im);
      return;
    }
  }
}

/* Builds dot(a, b), runs loom__cpu_dot on the views and compares. scratch: 1 the op's
 * scratch, 0 none (the heap fallback). */
static void dot_check(const loom__view *a, const loom__view *b, double tol, int use_scratch) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_create("dot", &g));
  loom_value pa = loom_graph_param(g, "a", &a->type), pb = loom_graph_param(g, "b", &b->type);
  loom_value r = loom_dot(g, pa, pb);
  if (r.id < 0) {
    loom_test_fail(__FILE__, __LINE__, "loom_dot: %s", loom_last_error());
    loom_graph_destroy(g);
    return;
  }
  const loom__op *op = &g->ops[g->n_ops - 1];
  loom__view in[2] = {*a, *b}, out;
  memset(&out, 0, sizeof out);
  out.type = *loom_value_type(g, r);
  loom__view_dense_strides(&out.type, out.strides);
  int64_t bytes = 0, sbytes = use_scratch ? loom__op_scratch_bytes(g, op) : 0;
  loom_type_bytes(&out.type, &bytes);
  out.data = malloc((size_t)bytes + 1);
  memset(out.data, 0xAB, (size_t)bytes + 1);
  void *scratch = sbytes ? malloc((size_t)sbytes) : NULL;
  loom_status s = loom__cpu_dot(g, op, in, &out, scratch, sbytes);
  if (s)
    loom_test_fail(__FILE__, __LINE__, "loom__cpu_dot: %s", loom_last_error());
  else
    dot_compare(a, b, &out.type, out.data, NULL, tol);
  free(scratch);
  free(out.data);
  loom_graph_destroy(g);
}

/* loom__cpu_dot_into with accumulate: out starts as random values (kept in base) and must end
 * as base + a . b, with the op's scratch. */
static void dot_check_acc(const loom__view *a, const loom__view *b, double tol) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_create("dot", &g));
  loom_value r = loom_dot(g, loom_graph_param(g, "a", &a->type), loom_graph_param(g, "b", &b->type));
  if (r.id < 0) {
    loom_test_fail(__FILE__, __LINE__, "loom_dot: %s", loom_last_error());
    loom_graph_destroy(g);
    return;
  }
  const loom__op *op = &g->ops[g->n_ops - 1];
  const loom_type *ot = loom_value_type(g, r);
  void *base_storage = NULL;
  loom__view in[2] = {*a, *b}, out = dot_view(ot->dtype, ot->rank, ot->dims, NULL, &base_storage);
  int64_t bytes = 0, sbytes = loom__op_scratch_bytes(g, op);
  loom_type_bytes(ot, &bytes);
  void *base = malloc((size_t)bytes + 1), *scratch = sbytes ? malloc((size_t)sbytes) : NULL;
  memcpy(base, out.data, (size_t)bytes);
  loom_status s = loom__cpu_dot_into(g, op, in, &out, true, scratch, sbytes);
  if (s)
    loom_test_fail(__FILE__, __LINE__, "loom__cpu_dot_into: %s", loom_last_error());
  else
    dot_compare(a, b, ot, out.data, base, tol);
  free(scratch);
  free(base);
  free(base_storage);
  loom_graph_destroy(g);
}

/* Dense operands of the given shapes, checked with and without scratch. */
static void dot_dense(loom_dtype dt, int32_t ra, const int64_t *da, int32_t rb, const int64_t *db,
                      double tol) {
  void *sa, *sb;
  loom__view a = dot_view(dt, ra, da, NULL, &sa), b = dot_view(dt, rb, db, NULL, &sb);
  dot_check(&a, &b, tol, 1);
  if (!loom_test_failed()) dot_check(&a, &b, tol, 0);
  free(sa);
  free(sb);
}

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define TOL_F32 1e-5
#define TOL_F64 1e-12

/* ---- tests ------------------------------------------------------------------------------- */

TEST(cpu_dot_vectors) {
  dot_dense(LOOM_F32, 1, DIMS(7), 1, DIMS(7), TOL_F32); /* [7].[7] -> [] */
  if (loom_test_failed()) return;
  dot_dense(LOOM_F32, 1, DIMS(5), 2, DIMS(5, 3), TOL_F32); /* [5].[5,3] -> [3] */
  if (loom_test_failed()) return;
  dot_dense(LOOM_F64, 2, DIMS(4, 5), 1, DIMS(5), TOL_F64); /* [4,5].[5] -> [4] */
  if (loom_test_failed()) return;
  dot_dense(LOOM_F32, 1, DIMS(300), 2, DIMS(300, 200), TOL_F32); /* gemv, B^T a */
  if (loom_test_failed()) return;
  dot_dense(LOOM_F64, 2, DIMS(200, 300), 1, DIMS(300), TOL_F64); /* gemv, A b */
  if (loom_test_failed()) return;
  dot_dense(LOOM_F32, 1, DIMS(3), 3, DIMS(2, 3, 4), TOL_F32); /* 1-D against a batch */
  if (loom_test_failed()) return;
  dot_dense(LOOM_F32, 3, DIMS(2, 4, 3), 1, DIMS(3), TOL_F32);
}

TEST(cpu_dot_matrices) {
  dot_dense(LOOM_F32, 2, DIMS(1, 1), 2, DIMS(1, 1), TOL_F32);
  if (loom_test_failed()) return;
  dot_dense(LOOM_F32, 2, DIMS(33, 47), 2, DIMS(47, 29), TOL_F32);
  if (loom_test_failed()) return;
  dot_dense(LOOM_F64, 2, DIMS(64, 65), 2, DIMS(65, 66), TOL_F64);
  if (loom_test_failed()) return;
  dot_dense(LOOM_F32, 2, DIMS(1, 40), 2, DIMS(40, 1), TOL_F32); /* n = m = 1 */
}

TEST(cpu_dot_batched_broadcast) {
  /* Small matrices (the threaded loop) and larger ones (BLAS per batch element). */
  dot_dense(LOOM_F32, 4, DIMS(2, 1, 4, 5), 3, DIMS(3, 5, 6), TOL_F32);
  if (loom_test_failed()) return;
  dot_dense(LOOM_F32, 4, DIMS(3, 1, 40, 30), 3, DIMS(2, 30, 20), TOL_F32);
  if (loom_test_failed()) return;
  dot_dense(LOOM_F64, 2, DIMS(40, 30), 3, DIMS(3, 30, 20), TOL_F64);
  if (loom_test_failed()) return;
  dot_dense(LOOM_C64, 3, DIMS(1, 20, 30), 3, DIMS(4, 30, 20), TOL_F32);
}

/* Operands as views: swapped strides (transposes BLAS takes as they are), stepped and
 * broadcast matrices (packed), batch dims broadcast by stride 0 inside a view. */
TEST(cpu_dot_strided_operands) {
  void *sa, *sb;
  for (int sizes = 0; sizes < 2 && !loom_test_failed(); sizes++) {
    int64_t n = sizes ? 37 : 3, k = sizes ? 41 : 4, m = sizes ? 23 : 5;
    /* a^T and b^T: storage [k,n] and [m,k] seen as [n,k] and [k,m]. */
    loom__view a = dot_view(LOOM_F32, 2, DIMS(n, k), DIMS(1, n), &sa);
    loom__view b = dot_view(LOOM_F32, 2, DIMS(k, m), DIMS(1, k), &sb);
    dot_check(&a, &b, TOL_F32, 1);
    free(sa);
    free(sb);
    if (loom_test_failed()) return;
    /* stepped rows and columns (a slice with step 2), and a row broadcast down the rows */
    a = dot_view(LOOM_F64, 2, DIMS(n, k), DIMS(4 * k, 2), &sa);
    b = dot_view(LOOM_F64, 2, DIMS(k, m), DIMS(0, 1), &sb);
    dot_check(&a, &b, TOL_F64, 1);
    if (!loom_test_failed()) dot_check(&a, &b, TOL_F64, 0);
    free(sa);
    free(sb);
    if (loom_test_failed()) return;
    /* a batch of transposes against one broadcast matrix: [2,n,k]^T-ish x [3?] */
    a = dot_view(LOOM_F32, 3, DIMS(2, n, k), DIMS(n * k, 1, n), &sa);
    b = dot_view(LOOM_F32, 3, DIMS(2, k, m), DIMS(0, m, 1), &sb);
    dot_check(&a, &b, TOL_F32, 1);
    free(sa);
    free(sb);
    if (loom_test_failed()) return;
    /* vectors with steps and a broadcast vector */
    a = dot_view(LOOM_F32, 2, DIMS(n, k), DIMS(1, n), &sa);
    b = dot_view(LOOM_F32, 1, DIMS(k), DIMS(3), &sb);
    dot_check(&a, &b, TOL_F32, 1);
    free(sa);
    free(sb);
    if (loom_test_failed()) return;
    a = dot_view(LOOM_C128, 1, DIMS(k), DIMS(0), &sa);
    b = dot_view(LOOM_C128, 2, DIMS(k, m), DIMS(1, k), &sb);
    dot_check(&a, &b, TOL_F64, 1);
    free(sa);
    free(sb);
    if (loom_test_failed()) return;
  }
}

/* The same through the graph: a transpose view feeding dot. */
TEST(cpu_dot_transpose_in_graph) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_create("t", &g));
  loom_type ta, tb;
  ASSERT_OK(loom_type_make(LOOM_F32, 2, DIMS(30, 20), &ta));
  ASSERT_OK(loom_type_make(LOOM_F32, 2, DIMS(30, 10), &tb));
  loom_value a = loom_graph_param(g, "a", &ta), b = loom_graph_param(g, "b", &tb);
  loom_value at = loom_transpose(g, a, 2, DIMS(1, 0));
  loom_value r = loom_dot(g, at, b);
  ASSERT_TRUE(r.id >= 0);
  const loom_type *rt = loom_value_type(g, r);
  ASSERT_EQ(rt->rank, 2);
  ASSERT_EQ(rt->dims[0], 20);
  ASSERT_EQ(rt->dims[1], 10);
  loom_graph_destroy(g);
  void *sa, *sb;
  loom__view va = dot_view(LOOM_F32, 2, DIMS(20, 30), DIMS(1, 20), &sa); /* a^T over a's storage */
  loom__view vb = dot_view(LOOM_F32, 2, DIMS(30, 10), NULL, &sb);
  dot_check(&va, &vb, TOL_F32, 1);
  free(sa);
  free(sb);
}

TEST(cpu_dot_zero_sizes) {
  dot_dense(LOOM_F32, 2, DIMS(3, 0), 2, DIMS(0, 4), TOL_F32); /* k = 0: zeros */
  if (loom_test_failed()) return;
  dot_dense(LOOM_C64, 3, DIMS(2, 3, 0), 1, DIMS(0), TOL_F32);
  if (loom_test_failed()) return;
  dot_dense(LOOM_I32, 2, DIMS(3, 0), 2, DIMS(0, 4), 0);
  if (loom_test_failed()) return;
  dot_dense(LOOM_F32, 2, DIMS(0, 5), 2, DIMS(5, 4), TOL_F32); /* n = 0 */
  if (loom_test_failed()) return;
  dot_dense(LOOM_F64, 2, DIMS(3, 5), 2, DIMS(5, 0), TOL_F64); /* m = 0 */
  if (loom_test_failed()) return;
  dot_dense(LOOM_F32, 3, DIMS(0, 3, 5), 2, DIMS(5, 4), TOL_F32); /* empty batch */
}

TEST(cpu_dot_integers) {
  static const loom_dtype types[] = {LOOM_I8, LOOM_U8, LOOM_I16, LOOM_I32, LOOM_I64};
  for (int t = 0; t < LOOM_ARRAY_SIZE(types) && !loom_test_failed(); t++) {
    dot_dense(types[t], 2, DIMS(7, 9), 2, DIMS(9, 5), 0);
    if (!loom_test_failed()) dot_dense(types[t], 3, DIMS(2, 1, 9), 1, DIMS(9), 0);
    if (!loom_test_failed()) dot_dense(types[t], 3, DIMS(3, 40, 50), 2, DIMS(50, 30), 0);
  }
  if (loom_test_failed()) return;
  void *sa, *sb; /* strided integer operands */
  loom__view a = dot_view(LOOM_I32, 2, DIMS(6, 8), DIMS(1, 6), &sa);
  loom__view b = dot_view(LOOM_I32, 2, DIMS(8, 4), DIMS(0, 2), &sb);
  dot_check(&a, &b, 0, 1);
  free(sa);
  free(sb);
}

TEST(cpu_dot_half) {
  /* Inputs are exact in f16; the sum is in f32, rounded once to f16 (2^-11) or bf16 (2^-8). */
  dot_dense(LOOM_F16, 2, DIMS(6, 7), 2, DIMS(7, 5), 1e-3);
  if (loom_test_failed()) return;
  dot_dense(LOOM_F16, 3, DIMS(4, 30, 20), 2, DIMS(20, 10), 1e-3);
  if (loom_test_failed()) return;
  dot_dense(LOOM_BF16, 2, DIMS(16, 70), 1, DIMS(70), 8e-3);
  if (loom_test_failed()) return;
  void *sa, *sb;
  loom__view a = dot_view(LOOM_F16, 2, DIMS(9, 11), DIMS(1, 9), &sa);
  loom__view b = dot_view(LOOM_F16, 2, DIMS(11, 3), DIMS(6, 2), &sb);
  dot_check(&a, &b, 1e-3, 1);
  if (!loom_test_failed()) dot_check(&a, &b, 1e-3, 0);
  free(sa);
  free(sb);
}

TEST(cpu_dot_complex) {
  dot_dense(LOOM_C64, 2, DIMS(6, 7), 2, DIMS(7, 5), TOL_F32);
  if (loom_test_failed()) return;
  dot_dense(LOOM_C64, 2, DIMS(50, 40), 2, DIMS(40, 30), TOL_F32);
  if (loom_test_failed()) return;
  dot_dense(LOOM_C128, 2, DIMS(50, 40), 1, DIMS(40), TOL_F64);
  if (loom_test_failed()) return;
  dot_dense(LOOM_C128, 1, DIMS(40), 2, DIMS(40, 30), TOL_F64);
  if (loom_test_failed()) return;
  void *sa, *sb;
  loom__view a = dot_view(LOOM_C64, 2, DIMS(30, 20), DIMS(1, 30), &sa);
  loom__view b = dot_view(LOOM_C64, 2, DIMS(20, 25), DIMS(1, 20), &sb);
  dot_check(&a, &b, TOL_F32, 1);
  free(sa);
  free(sb);
}

/* Without scratch, an operand that must be packed takes heap memory: when that allocation
 * fails the kernel returns OUT_OF_MEMORY and leaves nothing allocated. */
TEST(cpu_dot_out_of_memory) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_create("oom", &g));
  loom_type ta, tb;
  ASSERT_OK(loom_type_make(LOOM_F32, 2, DIMS(64, 64), &ta));
  ASSERT_OK(loom_type_make(LOOM_F32, 2, DIMS(64, 64), &tb));
  loom_value r = loom_dot(g, loom_graph_param(g, "a", &ta), loom_graph_param(g, "b", &tb));
  ASSERT_TRUE(r.id >= 0);
  const loom__op *op = &g->ops[g->n_ops - 1];
  void *sa, *sb;
  loom__view in[2];
  in[0] = dot_view(LOOM_F32, 2, DIMS(64, 64), DIMS(0, 1), &sa); /* needs packing */
  in[1] = dot_view(LOOM_F32, 2, DIMS(64, 64), NULL, &sb);
  loom__view out = {.type = *loom_value_type(g, r)};
  loom__view_dense_strides(&out.type, out.strides);
  out.data = malloc(64 * 64 * 4);
  loom_test_sweep sw;
  SWEEP_ALLOCATIONS(&sw, 1, 100) {
    SWEEP_RUN(&sw, loom__cpu_dot(g, op, in, &out, NULL, 0));
  }
  free(sa);
  free(sb);
  free(out.data);
  loom_graph_destroy(g);
  ASSERT_TRUE(sw.failures > 0);
}

/* A loop summing partial dots over k adds each piece's product into the sum (exec.c,
 * dot_into_sum): every path of the kernel (gemm, both gemv, the plain loop of a small batch,
 * integers, f16 through f32, complex, packed operands, k = 0) adds to what out holds. */
TEST(cpu_dot_accumulates) {
  static const struct {
    loom_dtype dt;
    int32_t ra, rb;
    int64_t da[3], db[3];
    double tol;
  } cases[] = {
      {LOOM_F64, 2, 2, {64, 65}, {65, 66}, TOL_F64},  /* gemm */
      {LOOM_F32, 2, 2, {33, 47}, {47, 29}, TOL_F32},  /* gemm */
      {LOOM_F64, 2, 1, {200, 300}, {300}, TOL_F64},   /* gemv, A b */
      {LOOM_F32, 1, 2, {300}, {300, 200}, TOL_F32},   /* gemv, B^T a */
      {LOOM_F32, 3, 2, {4, 5, 6}, {6, 3}, TOL_F32},   /* a small batch: the plain loop */
      {LOOM_C128, 2, 2, {20, 30}, {30, 10}, TOL_F64}, /* complex gemm */
      {LOOM_C64, 2, 1, {20, 30}, {30}, TOL_F32},      /* complex gemv */
      {LOOM_I32, 2, 2, {7, 9}, {9, 5}, 0},            /* integers, wrapping */
      {LOOM_F16, 2, 2, {6, 7}, {7, 5}, 2e-3},         /* f16: the sum rounded once more */
      {LOOM_F32, 2, 2, {3, 0}, {0, 4}, TOL_F32},      /* k = 0: out is left as it is */
  };
  for (int32_t c = 0; c < LOOM_ARRAY_SIZE(cases) && !loom_test_failed(); c++) {
    void *sa, *sb;
    loom__view a = dot_view(cases[c].dt, cases[c].ra, cases[c].da, NULL, &sa);
    loom__view b = dot_view(cases[c].dt, cases[c].rb, cases[c].db, NULL, &sb);
    dot_check_acc(&a, &b, cases[c].tol);
    free(sa);
    free(sb);
  }
  if (loom_test_failed()) return;
  void *sa, *sb; /* operands packed first (stepped rows, a transposed view) */
  loom__view a = dot_view(LOOM_F64, 2, DIMS(30, 20), DIMS(1, 60), &sa);
  loom__view b = dot_view(LOOM_F64, 2, DIMS(20, 25), DIMS(50, 2), &sb);
  dot_check_acc(&a, &b, TOL_F64);
  free(sa);
  free(sb);
}
