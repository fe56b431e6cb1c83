/* The cpu evaluator's walks over a reduction's rows (cpu_fused.c, run_units) and its dense sums
 * where the last axis is kept (cpu_fused_reduce.c): the bodies `loom-bench fusion --suite` times,
 * over spaces of several row groups and column blocks (threaded: 2 OpenMP threads in the tests),
 * against the same body run op by op through the cpu backend's kernels. Each body runs twice
 * fused: with dense operands (rows outer, each row streamed) and with its first operand
 * column-major (packed per block, so blocks outer): each lane folds its blocks in the same order
 * either way, so the two agree exactly. */
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/cpu_kernels.h"
#include "fused_util.h"
#include "harness.h"

static void *alloc_of(const loom_type *t) {
  return calloc((size_t)elems(t) + 4, loom_dtype_size(t->dtype));
}

/* Every op of g on dense buffers (vals[v] per value, the params' set by the caller). */
static loom_status unfused(const loom_graph *g, void **vals) {
  for (int32_t i = 0; i < g->n_ops; i++) {
    const loom__op *op = &g->ops[i];
    loom__view in[4], out[2];
    for (int32_t k = 0; k < op->n_inputs; k++)
      in[k] = dense_view(&g->values[op->inputs[k]].type, vals[op->inputs[k]]);
    for (int32_t r = 0; r < op->n_outputs; r++) {
      vals[op->outputs[r]] = alloc_of(&g->values[op->outputs[r]].type);
      out[r] = dense_view(&g->values[op->outputs[r]].type, vals[op->outputs[r]]);
    }
    int64_t sb = loom__op_scratch_bytes(g, op);
    void *scratch = sb ? malloc((size_t)sb) : NULL;
    loom_status s = loom__cpu_run_op(g, op, in, out, scratch, sb);
    free(scratch);
    if (s) return s;
  }
  return LOOM_OK;
}

/* Runs body fused into out[], its first parameter column-major when `transposed`. */
static loom_status fused(const loom_graph *g, void **vals, bool transposed, void **out) {
  loom__view in[4], res[2];
  void *colmajor = NULL;
  for (int32_t p = 0; p < g->n_params; p++)
    in[p] = dense_view(&g->values[g->params[p]].type, vals[g->params[p]]);
  const loom_type *t = &g->values[g->params[0]].type;
  if (transposed && t->rank == 2) { /* the same values through strides (1, rows) */
    int64_t rows = t->dims[0], cols = t->dims[1];
    const float *x = vals[g->params[0]];
    float *c = malloc(sizeof *c * (size_t)(rows * cols));
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < cols; j++) c[j * rows + i] = x[i * cols + j];
    in[0].data = colmajor = c;
    in[0].strides[0] = 1;
    in[0].strides[1] = rows;
  }
  for (int32_t r = 0; r < g->n_outputs; r++) {
    out[r] = alloc_of(&g->values[g->outputs[r]].type);
    res[r] = dense_view(&g->values[g->outputs[r]].type, out[r]);
  }
  loom_status s = loom__cpu_fused(g, in, res, NULL, 0);
  free(colmajor);
  return s;
}

/* Output r of the fused run against the unfused one: values within 1e-5 of the largest
 * magnitude the final op reads or of the result (a sum adds in another order); an index by the
 * value it points at (ties within rounding may pick another). */
static bool agree(const loom_graph *g, void **vals, int32_t r, const void *got, const char *label) {
  const loom__op *fin = &g->ops[g->n_ops - 1];
  const loom_type *st = &g->values[fin->inputs[0]].type, *t = &g->values[g->outputs[r]].type;
  const float *src = vals[fin->inputs[0]];
  double scale = 0;
  for (int64_t i = 0; i < elems(st); i++) scale = fmax(scale, fabs((double)src[i]));
  for (int64_t i = 0; i < elems(t); i++) {
    double a, b;
    if (t->dtype == LOOM_I64) { /* indices along the last axis of a row-major [rows, cols] */
      int64_t cols = st->dims[1], per = elems(t) / st->dims[0], row = i / per;
      a = src[row * cols + ((const int64_t *)got)[i]];
      b = src[row * cols + ((const int64_t *)vals[g->outputs[r]])[i]];
    } else {
      a = ((const float *)got)[i];
      b = ((const float *)vals[g->outputs[r]])[i];
    }
    if (!(fabs(a - b) <= 1e-5 * fmax(scale, fabs(b)))) { /* a sum: relative to its size */
      loom_test_fail(__FILE__, __LINE__, "%s: output %d element %lld: fused %.9g, unfused %.9g", label,
                     (int)r, (long long)i, a, b);
      return false;
    }
  }
  return true;
}

static void check(const char *text) {
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_parse(text, strlen(text), "orders.lir", &g));
  void **vals = calloc((size_t)g->n_values, sizeof *vals);
  uint64_t seed = 12345;
  for (int32_t p = 0; p < g->n_params; p++) {
    const loom_type *t = &g->values[g->params[p]].type;
    float *x = vals[g->params[p]] = alloc_of(t);
    for (int64_t i = 0; i < elems(t); i++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      x[i] = (float)((double)(seed >> 40) / (double)(1 << 24)) * 2 - 1;
    }
  }
  void *dense[2] = {NULL, NULL}, *packed[2] = {NULL, NULL};
  bool ok = !unfused(g, vals);
  if (!ok) loom_test_fail(__FILE__, __LINE__, "%s: unfused: %s", text, loom_last_error());
  ok = ok && !fused(g, vals, false, dense) && !fused(g, vals, true, packed);
  if (!ok) loom_test_fail(__FILE__, __LINE__, "%s: fused: %s", text, loom_last_error());
  for (int32_t r = 0; ok && r < g->n_outputs; r++) {
    const loom_type *t = &g->values[g->outputs[r]].type;
    ok = agree(g, vals, r, dense[r], text);
    if (ok && memcmp(dense[r], packed[r], (size_t)elems(t) * loom_dtype_size(t->dtype)) != 0) {
      loom_test_fail(__FILE__, __LINE__, "%s: output %d: rows outer and blocks outer differ", text, (int)r);
      ok = false;
    }
  }
  for (int32_t r = 0; r < 2; r++) {
    free(dense[r]);
    free(packed[r]);
  }
  for (int32_t v = 0; v < g->n_values; v++) free(vals[v]);
  free(vals);
  loom_graph_destroy(g);
}

/* 150 rows: three groups of up to 64; 2100 columns: three blocks, the last partial. */
TEST(fused_orders_row_reductions) {
  check(
      "graph b(x: f32[150,2100], y: f32[150,2100]) {\n  d = sub x y\n  q = mul d d\n"
      "  s = reduce_sum q axes=[1]\n  return s\n}\n");
  check(
      "graph b(x: f32[150,2100], y: f32[150,2100]) {\n  e = exp x\n  p = mul e y\n"
      "  m = reduce_max p axes=[1]\n  return m\n}\n");
  check(
      "graph b(x: f32[150,2100], y: f32[150,2100]) {\n  d = sub x y\n  a = abs d\n"
      "  i = argmax a axis=1\n  return i\n}\n");
  check(
      "graph b(x: f32[150,2100], y: f32[150,2100]) {\n  d = sub x y\n  q = mul d d\n"
      "  v, i = topk q k=8 axis=1\n  return v, i\n}\n");
  /* a matrix-vector product as the fuse rewrite writes its body: mul by the row, then sum */
  check(
      "graph b(a: f32[150,2100], c: f32[150,2100], v: f32[1,2100]) {\n  s = add a c\n"
      "  w = broadcast v shape=[150,2100]\n  p = mul s w\n  y = reduce_sum p axes=[1]\n  return y\n}\n");
}

TEST(fused_orders_column_sums) {
  check(
      "graph b(x: f32[150,2100], y: f32[150,2100]) {\n  d = sub x y\n  q = mul d d\n"
      "  s = reduce_sum q axes=[0]\n  return s\n}\n");
  check(
      "graph b(x: f32[150,2100], y: f32[150,2100]) {\n  d = sub x y\n  q = mul d d\n"
      "  s = reduce_mean q axes=[0]\n  return s\n}\n");
  /* five column blocks: fewer tasks than threads can share, so the threads split the rows and
   * merge their sums */
  check(
      "graph b(x: f32[64,5000], y: f32[64,5000]) {\n  d = sub x y\n  e = exp d\n"
      "  s = reduce_sum e axes=[0]\n  return s\n}\n");
}
