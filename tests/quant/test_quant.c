/* Quantized values run (docs/ir-quant.md): quantize, dequantize and a dot of dequantized
 * weights against NumPy's results (tests/data/quant, written by make_fixtures.py: bit-exact
 * for the quantized values, scales and dequantized weights, the dot within float32 rounding),
 * on cpu0, on every OpenCL device and on every CUDA device; and a dot of x f32[64,1024] with 4-bit weights
 * q4[1024,1024] under a 1 MiB limit: the chunk rewrite keeps dequantize inside the loop, so the
 * executor's meter holds the packed weight (1/8 of its f32 bytes) and one piece, never the f32
 * weight, and the result is the float64 product of x and the unquantized weights within the
 * quantization error (each weight off by at most half its scale). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_util.h"
#include "ir/ir.h"
#include "loom/io.h"
#include "loom/memory.h"
#include "loom/plan.h"

#define LL(x) ((long long)(x))

/* tests/data/quant: from LOOM_TEST_DATA under ctest, else next to this source file. */
static const char *fixture(const char *name) {
  static char buf[PATH_MAX];
  const char *data = getenv("LOOM_TEST_DATA");
  if (data) {
    snprintf(buf, sizeof buf, "%s/quant/%s.npy", data, name);
  } else {
    const char *file = __FILE__;
    const char *cut = strstr(file, "quant/test_quant.c");
    int n = cut ? (int)(cut - file) : 0;
    snprintf(buf, sizeof buf, "%.*sdata/quant/%s.npy", n, file, name);
  }
  return buf;
}

static bool load(const char *name, loom_tensor *out) {
  if (loom_tensor_load_npy(fixture(name), out) == LOOM_OK) return true;
  loom_test_fail(__FILE__, __LINE__, "fixture %s: %s", name, loom_last_error());
  return false;
}

/* The bytes of a and b equal (b's type may differ: a q4 tensor against its packed u8 file). */
static bool same_bytes(const char *what, const loom_tensor *a, const loom_tensor *b) {
  int64_t na = 0, nb = 0;
  loom_type_bytes(&a->type, &na);
  loom_type_bytes(&b->type, &nb);
  if (na != nb) {
    loom_test_fail(__FILE__, __LINE__, "%s: %lld bytes, NumPy's %lld", what, LL(na), LL(nb));
    return false;
  }
  for (int64_t i = 0; i < na; i++)
    if (((const uint8_t *)a->data)[i] != ((const uint8_t *)b->data)[i]) {
      loom_test_fail(__FILE__, __LINE__, "%s: byte %lld is 0x%02x, NumPy's 0x%02x", what, LL(i),
                     ((const uint8_t *)a->data)[i], ((const uint8_t *)b->data)[i]);
      return false;
    }
  return true;
}

static const struct {
  const char *name, *to;
  int axis; /* -1: per tensor */
} cases[] = {{"q8_t", "q8", -1}, {"q8_a0", "q8", 0}, {"q8_a1", "q8", 1},
             {"q4_t", "q4", -1}, {"q4_a0", "q4", 0}, {"q4_a1", "q4", 1}};

static loom_graph *case_graph(int k) {
  char axis[32] = "";
  if (cases[k].axis >= 0) snprintf(axis, sizeof axis, " axis=%d", cases[k].axis);
  return gt_parse(
      "graph c(x: f32[5,37], w: f32[37,21]) {\n q, s = quantize w to=%s%s\n"
      " d = dequantize q s%s\n y = dot x d\n return q, s, d, y\n}",
      cases[k].to, axis, axis);
}

/* Runs case k on dev (NULL: cpu0) and compares with NumPy's files. */
static void check_case(int k, const loom__exec_device *dev, const loom_tensor *in) {
  const char *where = dev ? dev->id : "cpu0";
  loom_graph *g = case_graph(k);
  if (!g) return;
  loom_tensor out[4], want[4];
  memset(out, 0, sizeof out);
  memset(want, 0, sizeof want);
  static const char *const parts[4] = {"q", "s", "d", "y"};
  loom_status s = gt_run(g, dev, in, out, 0, NULL);
  if (s) loom_test_fail(__FILE__, __LINE__, "%s on %s: %s", cases[k].name, where, loom_last_error());
  for (int p = 0; !s && p < 4; p++) {
    char name[32], what[64];
    snprintf(name, sizeof name, "%s_%s", cases[k].name, parts[p]);
    snprintf(what, sizeof what, "%s on %s", name, where);
    if (!load(name, &want[p])) break;
    if (p < 3) { /* quantized values, scales and dequantized weights: bit for bit */
      if (!same_bytes(what, &out[p], &want[p])) break;
      continue;
    }
    char msg[512];
    if (!gt_close(&want[p], &out[p], 1e-5, 1e-5, msg, sizeof msg))
      loom_test_fail(__FILE__, __LINE__, "%s: %s", what, msg);
  }
  for (int p = 0; p < 4; p++) loom_tensor_deinit(&want[p]);
  if (!s) gt_tensors_free(out, 4);
  loom_graph_destroy(g);
}

static bool load_xw(loom_tensor *in) {
  memset(in, 0, 2 * sizeof *in);
  return load("x", &in[0]) && load("w", &in[1]);
}

TEST(quantize_dequantize_dot_match_numpy_cpu0) {
  loom_tensor in[2];
  if (!load_xw(in)) return;
  for (int k = 0; k < LOOM_ARRAY_SIZE(cases) && !loom_test_failed(); k++) check_case(k, NULL, in);
  loom_tensor_deinit(&in[0]);
  loom_tensor_deinit(&in[1]);
}

TEST(quantize_dequantize_dot_match_numpy_opencl) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  if (nd == 0) return;
  loom_tensor in[2];
  if (!load_xw(in)) return;
  for (int32_t d = 0; d < nd; d++)
    for (int k = 0; k < LOOM_ARRAY_SIZE(cases) && !loom_test_failed(); k++) check_case(k, devs[d], in);
  loom_tensor_deinit(&in[0]);
  loom_tensor_deinit(&in[1]);
}

/* NumPy's packed q4 file read as a q4 parameter dequantizes to NumPy's weights: the storage
 * layout is the one documented (low nibble first, odd rows padded). */
TEST(dequantize_numpy_packed_values) {
  loom_tensor qf = {0}, sf = {0}, df = {0}, out = {0};
  if (!load("q4_a1_q", &qf) || !load("q4_a1_s", &sf) || !load("q4_a1_d", &df)) goto done;
  ASSERT_EQ(qf.type.dtype, LOOM_U8);
  ASSERT_EQ(qf.type.dims[1], 11); /* 21 values a row: 11 bytes */
  loom_graph *g = gt_parse("graph g(q: q4[37,21], s: f32[21]) {\n d = dequantize q s axis=1\n return d\n}");
  if (!g) goto done;
  loom_tensor in[2] = {qf, sf};
  in[0].type.dtype = LOOM_Q4;
  in[0].type.dims[1] = 21;
  if (gt_run(g, NULL, in, &out, 0, NULL))
    loom_test_fail(__FILE__, __LINE__, "dequantize: %s", loom_last_error());
  else
    same_bytes("dequantized NumPy values", &out, &df);
  loom_tensor_deinit(&out);
  loom_graph_destroy(g);
done:
  loom_tensor_deinit(&qf);
  loom_tensor_deinit(&sf);
  loom_tensor_deinit(&df);
}

/* ---- the 4-bit weight dot under a limit ------------------------------------------------- */

enum { N = 64, K = 1024, M = 1024 };
#define LIMIT (1024 * 1024)

static float uniform(uint64_t *state) { /* [-1, 1), the same on every machine */
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((double)(*state >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

/* x and the f32 weights, then the weights quantized by Loom (q4, per output column). */
static bool qdot_inputs(loom_tensor *x, loom_tensor *w, loom_tensor *qs) {
  int64_t xd[2] = {N, K}, wd[2] = {K, M};
  loom_type xt, wt;
  if (loom_type_make(LOOM_F32, 2, xd, &xt) || loom_type_make(LOOM_F32, 2, wd, &wt) ||
      loom_tensor_init(x, &xt) || loom_tensor_init(w, &wt))
    return false;
  uint64_t st = 42;
  for (int64_t i = 0; i < N * K; i++) ((float *)x->data)[i] = uniform(&st);
  for (int64_t i = 0; i < K * M; i++) ((float *)w->data)[i] = uniform(&st) * (1.0f + (float)(i % M) / M);
  loom_graph *q =
      gt_parse("graph q(w: f32[%d,%d]) {\n q, s = quantize w to=q4 axis=1\n return q, s\n}", K, M);
  bool ok = q && gt_run(q, NULL, w, qs, 0, NULL) == LOOM_OK;
  if (q && !ok) loom_test_fail(__FILE__, __LINE__, "quantize: %s", loom_last_error());
  loom_graph_destroy(q);
  return ok;
}

/* Whether g has a loop whose body (or a loop nested in it) dequantizes. */
static bool dequantizes_in_loop(const loom_graph *g, bool inside) {
  for (int32_t i = 0; i < g->n_ops; i++) {
    if (inside && g->ops[i].kind == LOOM_OP_DEQUANTIZE) return true;
    if (g->ops[i].loop && dequantizes_in_loop(g->ops[i].loop->body, true)) return true;
  }
  return false;
}

/* y against x . w in float64: the dequantized weight is off by at most half its column's
 * scale, so |y - x.w| <= sum_k |x_ik| s_j / 2, plus float32 rounding of the sum. */
static void check_qdot(const char *where, const loom_tensor *x, const loom_tensor *w, const float *scale,
                       const float *y) {
  const float *xv = x->data, *wv = w->data;
  double worst = 0;
  for (int64_t i = 0; i < N; i += 7) /* every 7th row: 10 rows of 1024, 10 M multiply-adds */
    for (int64_t j = 0; j < M; j++) {
      double ref = 0, absx = 0, absxw = 0;
      for (int64_t k = 0; k < K; k++) {
        ref += (double)xv[i * K + k] * wv[k * M + j];
        absx += fabs(xv[i * K + k]);
        absxw += fabs((double)xv[i * K + k] * wv[k * M + j]);
      }
      double bound = absx * scale[j] / 2 * (1 + 1e-6) + 1e-5 * absxw, err = fabs(y[i * M + j] - ref);
      if (err > bound) {
        loom_test_fail(__FILE__, __LINE__, "%s: y[%lld,%lld] = %.9g, x.w = %.9g: off by %g, more than %g",
                       where, LL(i), LL(j), y[i * M + j], ref, err, bound);
        return;
      }
      worst = fmax(worst, err / bound);
    }
  printf("  %s: the largest error is %.3f of the quantization bound\n", where, worst);
}

static void run_qdot(const loom__exec_device *dev) {
  const char *where = dev ? dev->id : "cpu0";
  loom_tensor x = {0}, w = {0}, qs[2], y = {0};
  memset(qs, 0, sizeof qs);
  loom_graph *g = NULL, *opt = NULL;
  loom_estimate e = {0};
  if (!qdot_inputs(&x, &w, qs)) goto done;
  g = gt_parse(
      "graph qdot(x: f32[%d,%d], q: q4[%d,%d], s: f32[%d]) {\n d = dequantize q s axis=1\n"
      " y = dot x d\n return y\n}",
      N, K, K, M, M);
  if (!g) goto done;
  int64_t f32_bytes = 0, q4_bytes = 0;
  ASSERT_OK(loom_type_bytes(&w.type, &f32_bytes));
  ASSERT_OK(loom_type_bytes(&qs[0].type, &q4_bytes));
  ASSERT_EQ(q4_bytes * 8, f32_bytes); /* the packed weight: 512 KiB for 4 MiB of f32 */

  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.limit = LIMIT;
  ASSERT_OK(loom_graph_optimize(g, &o, &opt, NULL));
  ASSERT_TRUE(dequantizes_in_loop(opt, false));
  ASSERT_OK(loom_graph_estimate(opt, NULL, &e));
  /* the weight is held packed; what else is held (a piece of dequantized columns, x's
   * slices, the dot's result and scratch) is far below the f32 weight */
  ASSERT_TRUE(e.input_bytes >= q4_bytes && e.input_bytes < q4_bytes + N * K * 4 + M * 4 + 1);
  ASSERT_TRUE(e.peak_bytes <= LIMIT && e.peak_bytes < f32_bytes / 4);

  loom_tensor in[3] = {x, qs[0], qs[1]};
  loom__meter m;
  loom_mem_node_stats before = {0}, after = {0};
  if (dev) ASSERT_OK(loom_mem_stats(dev->memory, dev->node, &before));
  loom_status s = gt_run(opt, dev, in, &y, LIMIT, &m);
  if (s) {
    loom_test_fail(__FILE__, __LINE__, "%s under %d bytes: %s", where, LIMIT, loom_last_error());
    goto done;
  }
  printf(
      "  %s: f32 weight %lld bytes, q4 weight %lld bytes, measured peak %lld bytes (limit %d), estimate "
      "%lld\n",
      where, LL(f32_bytes), LL(q4_bytes), LL(m.peak), LIMIT, LL(e.peak_bytes));
  if (m.peak > LIMIT || m.peak != e.peak_bytes)
    loom_test_fail(__FILE__, __LINE__, "%s: measured peak %lld, estimated %lld, limit %d", where, LL(m.peak),
                   LL(e.peak_bytes), LIMIT);
  if (dev) {
    /* the memory manager's own counters on the device's node: the most it held at once is
     * the meter's peak (earlier tests of this process held less), under the limit and a
     * quarter of the f32 weight; what it copied in counts x's slices once per outer piece */
    ASSERT_OK(loom_mem_stats(dev->memory, dev->node, &after));
    int64_t in_bytes = after.bytes_in - before.bytes_in;
    printf("  %s: the memory manager's peak live bytes %lld; copied in %lld bytes\n", where,
           LL(after.peak_live), LL(in_bytes));
    if (after.peak_live > LIMIT || after.peak_live >= f32_bytes / 4 || in_bytes < q4_bytes)
      loom_test_fail(__FILE__, __LINE__, "%s: peak live %lld bytes, copied in %lld (q4 weight %lld)", where,
                     LL(after.peak_live), LL(in_bytes), LL(q4_bytes));
  }
  check_qdot(where, &x, &w, qs[1].data, y.data);
  /* the graph as written holds the f32 weight whole: refused under the same limit */
  loom_tensor none = {0};
  if (gt_run(g, dev, in, &none, LIMIT, NULL) != LOOM_ERR_OUT_OF_MEMORY)
    loom_test_fail(__FILE__, __LINE__, "%s: the unchunked graph ran under %d bytes", where, LIMIT);
  loom_tensor_deinit(&none);
done:
  loom_estimate_deinit(&e);
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
  loom_tensor_deinit(&y);
  loom_tensor_deinit(&x);
  loom_tensor_deinit(&w);
  gt_tensors_free(qs, 2);
}

TEST(q4_dot_under_a_limit_holds_an_eighth_cpu0) {
  run_qdot(NULL);
}

TEST(quantize_dequantize_dot_match_numpy_cuda) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_CUDA, devs);
  if (nd == 0) return;
  loom_tensor in[2];
  if (!load_xw(in)) return;
  for (int32_t d = 0; d < nd; d++)
    for (int k = 0; k < LOOM_ARRAY_SIZE(cases) && !loom_test_failed(); k++) check_case(k, devs[d], in);
  loom_tensor_deinit(&in[0]);
  loom_tensor_deinit(&in[1]);
}

TEST(q4_dot_under_a_limit_holds_an_eighth_cuda) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_CUDA, devs);
  for (int32_t d = 0; d < nd && d < 1; d++) run_qdot(devs[d]);
}

TEST(q4_dot_under_a_limit_holds_an_eighth_opencl) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  for (int32_t d = 0; d < nd && d < 1; d++) run_qdot(devs[d]);
}
