/* Loops run by the executor (runtime/exec.c) on cpu0 and on every OpenCL device: each combine
 * against the same computation written without a loop (run on cpu0), with a last shorter piece;
 * the meter's peak equal to the estimate, a limit of exactly that peak kept and a byte less
 * refused; streamed inputs four times the limit; errors that name the piece and the body op;
 * and every host allocation failing in turn. The graphs are built through the C API (the loop
 * op), their bodies and the references parsed from .lir. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_util.h"
#include "loom/memory.h"

#define KIB 1024

/* A graph with ref's parameters whose one op is a loop over them running `body`, returning
 * every result of the loop. NULL (and a failed test) when it does not build. */
static loom_graph *loop_graph(const loom_graph *ref, const loom_graph *body, int64_t n, int64_t piece,
                              const loom_loop_input *rules, const loom_loop_output *combines,
                              int32_t n_results) {
  loom_graph *g = NULL;
  loom_value ops[8], outs[LOOM_LOOP_MAX_RESULTS];
  int32_t np = loom_graph_param_count(ref);
  if (loom_graph_create("looped", &g)) return NULL;
  for (int32_t p = 0; p < np; p++) {
    loom_value v = loom_graph_param_at(ref, p);
    ops[p] = loom_graph_param(g, loom_value_name(ref, v), loom_value_type(ref, v));
  }
  loom_status s = loom_graph_add_loop(g, n, piece, body, ops, rules, np, combines, n_results, outs);
  if (!s) s = loom_graph_return(g, outs, n_results);
  if (s) {
    loom_test_fail(__FILE__, __LINE__, "the loop does not build: %s", loom_last_error());
    loom_graph_destroy(g);
    return NULL;
  }
  return g;
}

/* How a case shapes its random inputs. */
typedef enum data_kind {
  DATA_RANDOM,
  DATA_TIES,     /* floats rounded down to integers: many equal values */
  DATA_TIES_NAN, /* and a few NaNs (f32 only) */
  DATA_SMALL,    /* near 1, for products */
} data_kind;

static void shape_data(loom_tensor *t, data_kind kind) {
  int64_t n = 0;
  loom_type_elements(&t->type, &n);
  if (t->type.dtype == LOOM_I32) {
    for (int64_t i = 0; kind != DATA_RANDOM && i < n; i++) ((int32_t *)t->data)[i] %= 3;
    return;
  }
  if (t->type.dtype != LOOM_F32) return;
  float *x = t->data;
  for (int64_t i = 0; i < n; i++) {
    if (kind == DATA_TIES || kind == DATA_TIES_NAN) x[i] = floorf(x[i]);
    if (kind == DATA_SMALL) x[i] = 1.0f + x[i] / 8;
  }
  /* NaNs at fixed places: one early, two later in the same column or row */
  if (kind == DATA_TIES_NAN)
    for (int64_t i = 5; i < n; i += 7) x[i] = NAN;
}

typedef struct loop_case {
  const char *name;
  const char *ref, *body;
  int64_t n, piece;
  loom_loop_input rules[4];
  loom_loop_output combines[LOOM_LOOP_MAX_RESULTS];
  int32_t n_results;
  data_kind data;
  double scale; /* tolerance scale of float outputs */
} loop_case;

#define CAT(axis) \
  { LOOM_COMBINE_CONCAT, (axis), 0, false }
#define COMB(c) \
  { LOOM_COMBINE_##c, 0, 0, false }
#define TOPK(axis, k, largest) \
  { LOOM_COMBINE_TOPK, (axis), (k), (largest) }

static const loop_case cases[] = {
    {"concat along axis 0 (in place), a whole operand",
     "graph ref(x: f32[10,3], w: f32[3]) {\n y = mul x x\n z = add y w\n return z\n}",
     "graph body(xs: f32[4,3], w: f32[3]) {\n y = mul xs xs\n z = add y w\n return z\n}",
     10,
     4,
     {{0, 0, 0, 0}, {-1, 0, 0, 0}},
     {CAT(0)},
     1,
     DATA_RANDOM,
     1},
    {"concat along axis 1 (copied into strided slots), an offset, a result that is the slice",
     "graph ref(x: f32[3,12]) {\n s = slice x start=[0,2] stop=[3,12]\n y = neg s\n z = exp y\n"
     " return z, s\n}",
     "graph body(xs: f32[3,4]) {\n y = neg xs\n z = exp y\n return z, xs\n}",
     10,
     4,
     {{1, 2, 0, 0}},
     {CAT(1), CAT(1)},
     2,
     DATA_RANDOM,
     1},
    {"sum, prod, max and min, NaN propagating",
     "graph ref(x: f32[10,3]) {\n s = reduce_sum x axes=[0]\n p = reduce_prod x axes=[0]\n"
     " mx = reduce_max x axes=[0]\n mn = reduce_min x axes=[0]\n return s, p, mx, mn\n}",
     "graph body(xs: f32[4,3]) {\n s = reduce_sum xs axes=[0]\n p = reduce_prod xs axes=[0]\n"
     " mx = reduce_max xs axes=[0]\n mn = reduce_min xs axes=[0]\n return s, p, mx, mn\n}",
     10,
     4,
     {{0, 0, 0, 0}},
     {COMB(SUM), COMB(PROD), COMB(MAX), COMB(MIN)},
     4,
     DATA_TIES_NAN,
     10},
    {"products near 1",
     "graph ref(x: f32[10,3]) {\n p = reduce_prod x axes=[0]\n return p\n}",
     "graph body(xs: f32[4,3]) {\n p = reduce_prod xs axes=[0]\n return p\n}",
     10,
     4,
     {{0, 0, 0, 0}},
     {COMB(PROD)},
     1,
     DATA_SMALL,
     10},
    {"dot over k by summing",
     "graph ref(a: f32[5,10], b: f32[10,4]) {\n c = dot a b\n return c\n}",
     "graph body(as: f32[5,4], bs: f32[4,4]) {\n c = dot as bs\n return c\n}",
     10,
     4,
     {{1, 0, 0, 0}, {0, 0, 0, 0}},
     {COMB(SUM)},
     1,
     DATA_RANDOM,
     10},
    /* On cpu0 a summed dot's pieces are added into the sum itself (exec.c, dot_into_sum): a
     * small batch (the kernel's plain loop), a vector (gemv), and the two a body cannot: a dot
     * read again in the body (it must stay the piece's), a dot returned twice. */
    {"dot over k by summing, a small batch and a vector",
     "graph ref(a: f32[2,5,10], b: f32[10,4], v: f32[10]) {\n c = dot a b\n w = dot v b\n return c, w\n}",
     "graph body(as: f32[2,5,4], bs: f32[4,4], vs: f32[4]) {\n c = dot as bs\n w = dot vs bs\n return c, "
     "w\n}",
     10,
     4,
     {{2, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}},
     {COMB(SUM), COMB(SUM)},
     2,
     DATA_RANDOM,
     10},
    {"dot over k by summing, the dot read again in the body",
     "graph ref(a: f32[5,10], b: f32[10,4]) {\n c = dot a b\n d = neg c\n return c, d\n}",
     "graph body(as: f32[5,4], bs: f32[4,4]) {\n c = dot as bs\n d = neg c\n return c, d\n}",
     10,
     4,
     {{1, 0, 0, 0}, {0, 0, 0, 0}},
     {COMB(SUM), COMB(SUM)},
     2,
     DATA_RANDOM,
     10},
    {"dot over k by summing, the dot returned twice",
     "graph ref(a: f32[5,10], b: f32[10,4]) {\n c = dot a b\n return c, c\n}",
     "graph body(as: f32[5,4], bs: f32[4,4]) {\n c = dot as bs\n return c, c\n}",
     10,
     4,
     {{1, 0, 0, 0}, {0, 0, 0, 0}},
     {COMB(SUM), COMB(SUM)},
     2,
     DATA_RANDOM,
     10},
    {"argmax and argmin, ties and NaN",
     "graph ref(x: f32[10,3]) {\n mv = reduce_max x axes=[0]\n mi = argmax x axis=0\n"
     " nv = reduce_min x axes=[0]\n ni = argmin x axis=0\n return mv, mi, nv, ni\n}",
     "graph body(xs: f32[4,3]) {\n mv = reduce_max xs axes=[0]\n mi = argmax xs axis=0\n"
     " nv = reduce_min xs axes=[0]\n ni = argmin xs axis=0\n return mv, mi, nv, ni\n}",
     10,
     4,
     {{0, 0, 0, 0}},
     {COMB(ARGMAX), COMB(INDEX), COMB(ARGMIN), COMB(INDEX)},
     4,
     DATA_TIES_NAN,
     1},
    {"argmax and argmin of i32 along axis 1, ties",
     "graph ref(x: i32[4,11]) {\n mv = reduce_max x axes=[1]\n mi = argmax x axis=1\n"
     " nv = reduce_min x axes=[1]\n ni = argmin x axis=1\n return mv, mi, nv, ni\n}",
     "graph body(xs: i32[4,3]) {\n mv = reduce_max xs axes=[1]\n mi = argmax xs axis=1\n"
     " nv = reduce_min xs axes=[1]\n ni = argmin xs axis=1\n return mv, mi, nv, ni\n}",
     11,
     3,
     {{1, 0, 0, 0}},
     {COMB(ARGMAX), COMB(INDEX), COMB(ARGMIN), COMB(INDEX)},
     4,
     DATA_TIES,
     1},
    {"topk largest and smallest along axis 1, ties and NaN",
     "graph ref(x: f32[3,20]) {\n a, ai = topk x k=2 axis=1\n b, bi = topk x k=2 axis=1 largest=false\n"
     " return a, ai, b, bi\n}",
     "graph body(xs: f32[3,6]) {\n a, ai = topk xs k=2 axis=1\n b, bi = topk xs k=2 axis=1 largest=false\n"
     " return a, ai, b, bi\n}",
     20,
     6,
     {{1, 0, 0, 0}},
     {TOPK(1, 2, true), COMB(INDEX), TOPK(1, 2, false), COMB(INDEX)},
     4,
     DATA_TIES_NAN,
     1},
    {"topk along axis 0 with columns after it, ties",
     "graph ref(x: f32[20,3]) {\n a, ai = topk x k=3 axis=0\n return a, ai\n}",
     "graph body(xs: f32[7,3]) {\n a, ai = topk xs k=3 axis=0\n return a, ai\n}",
     20,
     7,
     {{0, 0, 0, 0}},
     {TOPK(0, 3, true), COMB(INDEX)},
     2,
     DATA_TIES,
     1},
    {"topk indices read through a transpose (not dense)",
     "graph ref(x: f32[20,3]) {\n xt = transpose x perm=[1,0]\n a, ai = topk xt k=2 axis=1\n"
     " at = transpose a perm=[1,0]\n it = transpose ai perm=[1,0]\n return at, it\n}",
     "graph body(xs: f32[8,3]) {\n xt = transpose xs perm=[1,0]\n a, ai = topk xt k=2 axis=1\n"
     " at = transpose a perm=[1,0]\n it = transpose ai perm=[1,0]\n return at, it\n}",
     20,
     8,
     {{0, 0, 0, 0}},
     {TOPK(0, 2, true), COMB(INDEX)},
     2,
     DATA_TIES,
     1},
    {"argmax indices read through a transpose (not dense)",
     "graph ref(x: f32[9,2,3]) {\n mv = reduce_max x axes=[0]\n mi = argmax x axis=0\n"
     " vt = transpose mv perm=[1,0]\n it = transpose mi perm=[1,0]\n return vt, it\n}",
     "graph body(xs: f32[4,2,3]) {\n mv = reduce_max xs axes=[0]\n mi = argmax xs axis=0\n"
     " vt = transpose mv perm=[1,0]\n it = transpose mi perm=[1,0]\n return vt, it\n}",
     9,
     4,
     {{0, 0, 0, 0}},
     {COMB(ARGMAX), COMB(INDEX)},
     2,
     DATA_TIES,
     1},
};

/* Runs case c's looped graph on dev (NULL: cpu0) against its reference on cpu0: equal results;
 * a meter peak equal to the estimate; a limit of exactly that peak kept, a byte less refused. */
static void check_case(const loop_case *c, const loom__exec_device *dev) {
  const char *where = dev ? dev->id : "cpu0";
  loom_graph *ref = gt_parse("%s", c->ref), *body = gt_parse("%s", c->body);
  loom_graph *g =
      ref && body ? loop_graph(ref, body, c->n, c->piece, c->rules, c->combines, c->n_results) : NULL;
  loom_tensor in[4], want[LOOM_LOOP_MAX_RESULTS], got[LOOM_LOOP_MAX_RESULTS];
  int32_t np = ref ? loom_graph_param_count(ref) : 0, no = c->n_results;
  bool have_in = false, have_want = false;
  loom_estimate e = {0};
  if (!g) goto done;
  ASSERT_OK(gt_inputs(ref, 7, in));
  have_in = true;
  for (int32_t p = 0; p < np; p++) shape_data(&in[p], c->data);
  ASSERT_OK(gt_run(ref, NULL, in, want, 0, NULL));
  have_want = true;
  ASSERT_OK(loom_graph_estimate(g, NULL, &e));
  for (int32_t limit = 0; limit < 3; limit++) {
    loom__meter m;
    int64_t lim = limit == 0 ? 0 : limit == 1 ? e.peak_bytes : e.peak_bytes - 1;
    loom_status s = gt_run(g, dev, in, got, lim, &m);
    if (limit == 2) {
      if (s != LOOM_ERR_OUT_OF_MEMORY)
        loom_test_fail(__FILE__, __LINE__, "%s on %s under %lld bytes: %s (%s)", c->name, where,
                       (long long)lim, loom_status_string(s), loom_last_error());
      if (!s) gt_tensors_free(got, no);
      break;
    }
    if (s) {
      loom_test_fail(__FILE__, __LINE__, "%s on %s (limit %lld): %s: %s", c->name, where, (long long)lim,
                     loom_status_string(s), loom_last_error());
      break;
    }
    if (m.peak != e.peak_bytes)
      loom_test_fail(__FILE__, __LINE__, "%s on %s: measured peak %lld, estimated %lld", c->name, where,
                     (long long)m.peak, (long long)e.peak_bytes);
    for (int32_t i = 0; i < no; i++) {
      double rtol, atol;
      char msg[512];
      gt_tolerance(want[i].type.dtype, c->scale, &rtol, &atol);
      if (!gt_close(&want[i], &got[i], rtol, atol, msg, sizeof msg))
        loom_test_fail(__FILE__, __LINE__, "%s on %s, result %d: %s", c->name, where, (int)i, msg);
    }
    gt_tensors_free(got, no);
  }
done:
  loom_estimate_deinit(&e);
  if (have_want) gt_tensors_free(want, no);
  if (have_in) gt_tensors_free(in, np);
  loom_graph_destroy(g);
  loom_graph_destroy(body);
  loom_graph_destroy(ref);
}

TEST(loops_combine_as_unlooped_on_cpu0) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0] && !loom_test_failed(); i++)
    check_case(&cases[i], NULL);
}

TEST(loops_combine_as_unlooped_on_opencl) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  for (int32_t d = 0; d < nd; d++)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] && !loom_test_failed(); i++)
      check_case(&cases[i], devs[d]);
}

/* ---- loops in loops -------------------------------------------------------------------------- */

/* x: f32[6,3] by rows (pieces of `rows`); in each piece an inner loop sums y: f32[1,10] (read
 * whole by the outer loop) in pieces of 4 (the last 2), and the piece is x's rows times that sum.
 * The inner loop streams its operand (a body parameter read only by it, sliced after a length-1
 * axis): its slices are counted as the estimate counts them. */
static void check_nested(int64_t rows, const loom__exec_device *dev) {
  const char *where = dev ? dev->id : "cpu0";
  loom_graph *ref = gt_parse(
      "graph ref(x: f32[6,3], y: f32[1,10]) {\n s = reduce_sum y axes=[1]\n z = mul x s\n return z\n}");
  loom_graph *inner = gt_parse("graph inner(ys: f32[1,4]) {\n s = reduce_sum ys axes=[1]\n return s\n}");
  loom_graph *outer = NULL, *g = NULL;
  ASSERT_TRUE(ref && inner);
  ASSERT_OK(loom_graph_create("outer", &outer));
  loom_type xt, yt;
  ASSERT_OK(loom_type_make(LOOM_F32, 2, (int64_t[]){rows, 3}, &xt));
  ASSERT_OK(loom_type_make(LOOM_F32, 2, (int64_t[]){1, 10}, &yt));
  loom_value xs = loom_graph_param(outer, "xs", &xt), y = loom_graph_param(outer, "y", &yt), sum;
  loom_loop_input by_cols = {1, 0, 0, 0}, outer_rules[2] = {{0, 0, 0, 0}, {-1, 0, 0, 0}};
  loom_loop_output inner_comb = COMB(SUM), outer_comb = CAT(0);
  ASSERT_OK(loom_graph_add_loop(outer, 10, 4, inner, &y, &by_cols, 1, &inner_comb, 1, &sum));
  loom_value z = loom_binary(outer, LOOM_OP_MUL, xs, sum);
  ASSERT_OK(loom_graph_return(outer, &z, 1));
  g = loop_graph(ref, outer, 6, rows, outer_rules, &outer_comb, 1);
  ASSERT_TRUE(g != NULL);
  loom_tensor in[2], want, got;
  ASSERT_OK(gt_inputs(ref, 4, in));
  ASSERT_OK(gt_run(ref, NULL, in, &want, 0, NULL));
  loom_estimate e;
  ASSERT_OK(loom_graph_estimate(g, NULL, &e));
  loom__meter m;
  loom_status s = gt_run(g, dev, in, &got, e.peak_bytes, &m);
  if (s) loom_test_fail(__FILE__, __LINE__, "rows %lld on %s: %s", (long long)rows, where, loom_last_error());
  if (!s) {
    char msg[512];
    if (m.peak != e.peak_bytes)
      loom_test_fail(__FILE__, __LINE__, "rows %lld on %s: measured peak %lld, estimated %lld",
                     (long long)rows, where, (long long)m.peak, (long long)e.peak_bytes);
    if (!gt_close(&want, &got, 1e-5, 1e-5, msg, sizeof msg))
      loom_test_fail(__FILE__, __LINE__, "rows %lld on %s: %s", (long long)rows, where, msg);
    gt_tensors_free(&got, 1);
  }
  loom_estimate_deinit(&e);
  gt_tensors_free(&want, 1);
  gt_tensors_free(in, 2);
  loom_graph_destroy(g);
  loom_graph_destroy(outer);
  loom_graph_destroy(inner);
  loom_graph_destroy(ref);
}

TEST(loops_in_loops_on_cpu0) {
  check_nested(4, NULL); /* 6 rows: pieces of 4 and 2 */
  check_nested(1, NULL);
}

TEST(loops_in_loops_on_opencl) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  for (int32_t d = 0; d < nd && !loom_test_failed(); d++) {
    check_nested(4, devs[d]);
    check_nested(1, devs[d]);
  }
}

/* ---- streaming ------------------------------------------------------------------------------ */

/* x: f32[4096,64], 1 MiB, read only by a loop of 256-row pieces: row sums of squares (concat) and
 * column sums (sum). */
static const char stream_ref[] =
    "graph ref(x: f32[4096,64]) {\n sq = mul x x\n r = reduce_sum sq axes=[1]\n c = reduce_sum x axes=[0]\n"
    " return r, c\n}";
static const char stream_body[] =
    "graph body(xs: f32[256,64]) {\n sq = mul xs xs\n r = reduce_sum sq axes=[1]\n c = reduce_sum xs "
    "axes=[0]\n"
    " return r, c\n}";

static loom_graph *stream_graph(loom_graph **ref) {
  loom_graph *body = gt_parse("%s", stream_body);
  *ref = gt_parse("%s", stream_ref);
  loom_loop_input rule = {0, 0, 0, 0};
  loom_loop_output comb[2] = {CAT(0), COMB(SUM)};
  loom_graph *g = body && *ref ? loop_graph(*ref, body, 4096, 256, &rule, comb, 2) : NULL;
  loom_graph_destroy(body);
  return g;
}

/* Runs the streamed graph on dev under a limit of a quarter of its input (or with x from
 * `buffer`), against the unlooped run on cpu0. */
static void check_stream(const loom__exec_device *dev, loom_buffer *buffer) {
  const char *where = dev ? dev->id : "cpu0";
  loom_graph *ref = NULL, *g = stream_graph(&ref);
  ASSERT_TRUE(g != NULL);
  loom_tensor in, want[2], got[2];
  ASSERT_OK(gt_inputs(ref, 3, &in));
  ASSERT_OK(gt_run(ref, NULL, &in, want, 0, NULL));
  const int64_t limit = 256 * KIB;
  ASSERT_EQ(in.type.dims[0] * in.type.dims[1] * 4, 4 * limit);
  loom_estimate e;
  ASSERT_OK(loom_graph_estimate(g, NULL, &e));
  ASSERT_EQ(e.input_bytes, 0); /* streamed: never held whole */
  ASSERT_TRUE(e.peak_bytes <= limit);
  if (buffer) ASSERT_OK(loom_buffer_write(buffer, 0, in.data, 4 * limit));
  loom__meter m = {.limit = limit};
  loom__exec_options opts = {0};
  opts.device = dev;
  if (!dev) ASSERT_OK(loom__context_exec_device(gt_context(), "cpu0", &opts.device));
  loom_buffer *bufs[1] = {buffer};
  if (buffer) opts.input_buffers = bufs;
  loom_status s = loom__execute(g, &opts, &in, got, &m);
  if (s) loom_test_fail(__FILE__, __LINE__, "on %s: %s", where, loom_last_error());
  if (!s) {
    ASSERT_EQ(m.in_use, 0);
    ASSERT_TRUE(m.peak <= limit);
    ASSERT_EQ(m.peak, e.peak_bytes);
    for (int32_t i = 0; i < 2; i++) {
      char msg[512];
      if (!gt_close(&want[i], &got[i], 1e-4, 1e-4, msg, sizeof msg))
        loom_test_fail(__FILE__, __LINE__, "on %s, result %d: %s", where, (int)i, msg);
    }
    gt_tensors_free(got, 2);
  }
  loom_estimate_deinit(&e);
  gt_tensors_free(want, 2);
  gt_tensors_free(&in, 1);
  loom_graph_destroy(g);
  loom_graph_destroy(ref);
}

TEST(loops_stream_an_input_four_times_the_limit_on_cpu0) {
  check_stream(NULL, NULL);
}

TEST(loops_stream_an_input_four_times_the_limit_on_opencl) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  for (int32_t d = 0; d < nd && !loom_test_failed(); d++) check_stream(devs[d], NULL);
}

/* The input in a buffer of the device's memory (as a plan's earlier stage leaves it): read in
 * place, each piece's slice counted. */
TEST(loops_stream_from_a_device_buffer) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  if (nd == 0) return;
  loom_buffer *b = NULL;
  ASSERT_OK(
      loom_buffer_allocate(devs[0]->memory, 1024 * KIB, LOOM_F32, devs[0]->node, LOOM_MEM_DEVICE_LOCAL, &b));
  check_stream(devs[0], b);
  loom_buffer_free(b);
}

/* Double buffering on OpenCL: ocl0 of a context of its own (its memory node's counters are
 * this run's), the input four times the limit written in slice by slice, each next slice
 * ahead on the device's transfer queue while the piece before it computes. Results equal the
 * unlooped run on cpu0; the meter's peak equals the estimate, which counts two slices (16
 * pieces: the next one is in flight), and is under the limit; the node's own peak (its pool
 * included) is too, and each slice crossed to the device exactly once. */
TEST(loops_stream_double_buffered_on_opencl) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_OPENCL, devs) == 0) return;
  loom_context *ctx = NULL;
  ASSERT_OK(loom_context_create(NULL, &ctx));
  const loom__exec_device *dev = NULL;
  ASSERT_OK(loom__context_exec_device(ctx, "ocl0", &dev));
  loom_graph *ref = NULL, *g = stream_graph(&ref);
  ASSERT_TRUE(g != NULL);
  loom_tensor in, want[2], got[2];
  ASSERT_OK(gt_inputs(ref, 5, &in));
  ASSERT_OK(gt_run(ref, NULL, &in, want, 0, NULL));
  const int64_t limit = 256 * KIB, slice = 256 * 64 * 4;
  loom_estimate e, one;
  ASSERT_OK(loom_graph_estimate(g, NULL, &e));
  /* the same loop in one piece holds one slice (of the whole input): nothing to bring ahead */
  loom_graph *body = gt_parse("%s", stream_body), *whole = NULL;
  ASSERT_TRUE(body != NULL);
  {
    loom_loop_input rule = {0, 0, 0, 0};
    loom_loop_output comb[2] = {CAT(0), COMB(SUM)};
    loom_graph *b1 = gt_parse(
        "graph body(xs: f32[4096,64]) {\n sq = mul xs xs\n r = reduce_sum sq axes=[1]\n"
        " c = reduce_sum xs axes=[0]\n return r, c\n}");
    ASSERT_TRUE(b1 != NULL);
    whole = loop_graph(ref, b1, 4096, 4096, &rule, comb, 2);
    loom_graph_destroy(b1);
  }
  ASSERT_TRUE(whole != NULL);
  ASSERT_OK(loom_graph_estimate(whole, NULL, &one));
  /* the loop's c (256 B; r is streamed out, never held whole), the slices, then the body's
   * peak at r: the square of the slice, r's piece (1 KiB) and the reduction's scratch (1 KiB) */
  ASSERT_EQ(e.peak_bytes, 256 + 2 * slice + slice + 2 * KIB);
  ASSERT_EQ(one.peak_bytes, 256 + 16 * slice + 16 * slice + 32 * KIB);
  ASSERT_TRUE(e.peak_bytes <= limit);
  loom__meter m = {.limit = limit};
  loom__exec_options opts = {.device = dev};
  loom_status s = loom__execute(g, &opts, &in, got, &m);
  if (s) loom_test_fail(__FILE__, __LINE__, "on ocl0: %s", loom_last_error());
  loom_mem_manager *mem = NULL;
  int32_t node = -1;
  loom_mem_node_stats st;
  ASSERT_OK(loom_context_memory(ctx, &mem));
  ASSERT_OK(loom_mem_node_find(mem, "ocl0", &node));
  ASSERT_OK(loom_mem_stats(mem, node, &st));
  if (!s) {
    ASSERT_EQ(m.in_use, 0);
    ASSERT_EQ(m.peak, e.peak_bytes);
    if (st.peak_in_use > limit)
      loom_test_fail(__FILE__, __LINE__, "ocl0's node held %lld bytes at its peak, over the %lld limit",
                     (long long)st.peak_in_use, (long long)limit);
    ASSERT_EQ(st.bytes_in, 16 * slice);
    for (int32_t i = 0; i < 2; i++) {
      char msg[512];
      if (!gt_close(&want[i], &got[i], 1e-4, 1e-4, msg, sizeof msg))
        loom_test_fail(__FILE__, __LINE__, "result %d: %s", (int)i, msg);
    }
    gt_tensors_free(got, 2);
  }
  loom_estimate_deinit(&e);
  loom_estimate_deinit(&one);
  gt_tensors_free(want, 2);
  gt_tensors_free(&in, 1);
  loom_graph_destroy(whole);
  loom_graph_destroy(body);
  loom_graph_destroy(g);
  loom_graph_destroy(ref);
  loom_context_destroy(ctx);
}

/* One slice (slices=1, as the chunk rewrite makes loops under LOOM_WRITE_AHEAD=0): each
 * piece's slice is written into the one buffer when the piece begins, behind the kernels of
 * the piece before it. Results equal the unlooped run; the estimate is one slice less than
 * double buffering's and the meter's peak equals it; each slice crosses once. */
TEST(loops_stream_one_slice_on_opencl) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  for (int32_t d = 0; d < nd && !loom_test_failed(); d++) {
    loom_graph *ref = NULL, *g = stream_graph(&ref);
    ASSERT_TRUE(g != NULL);
    loom_tensor in, want[2], got[2];
    ASSERT_OK(gt_inputs(ref, 9, &in));
    ASSERT_OK(gt_run(ref, NULL, &in, want, 0, NULL));
    loom_estimate two, one;
    ASSERT_OK(loom_graph_estimate(g, NULL, &two));
    ASSERT_OK(loom_graph_loop_set_slices(g, 0, 1));
    ASSERT_OK(loom_graph_estimate(g, NULL, &one));
    ASSERT_EQ(two.peak_bytes - one.peak_bytes, 256 * 64 * 4);
    loom__meter m;
    loom_status s = gt_run(g, devs[d], &in, got, one.peak_bytes, &m);
    if (s) loom_test_fail(__FILE__, __LINE__, "on %s: %s", devs[d]->id, loom_last_error());
    if (!s) {
      ASSERT_EQ(m.peak, one.peak_bytes);
      for (int32_t i = 0; i < 2; i++) {
        char msg[512];
        if (!gt_close(&want[i], &got[i], 1e-4, 1e-4, msg, sizeof msg))
          loom_test_fail(__FILE__, __LINE__, "on %s, result %d: %s", devs[d]->id, (int)i, msg);
      }
      gt_tensors_free(got, 2);
    }
    loom_estimate_deinit(&two);
    loom_estimate_deinit(&one);
    gt_tensors_free(want, 2);
    gt_tensors_free(&in, 1);
    loom_graph_destroy(g);
    loom_graph_destroy(ref);
  }
}

/* The second slice buffer the estimate promised, refused by the device: the loop fails naming
 * it, and nothing is left held (the sweep checks for leaks, gt_run the meter). Every other
 * allocation of the run failing in turn fails it cleanly too. */
TEST(loops_stream_second_buffer_refused_on_opencl) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_OPENCL, devs) == 0) return;
  loom_graph *ref = NULL, *g = stream_graph(&ref);
  ASSERT_TRUE(g != NULL);
  loom_tensor in, got[2];
  ASSERT_OK(gt_inputs(ref, 3, &in));
  ASSERT_OK(gt_run(g, devs[0], &in, got, 256 * KIB, NULL)); /* the device's caches */
  gt_tensors_free(got, 2);
  bool named = false;
  loom_test_sweep sw;
  SWEEP_ALLOCATIONS(&sw, 0, 100000) {
    loom_status s = SWEEP_RUN(&sw, gt_run(g, devs[0], &in, got, 256 * KIB, NULL));
    if (!s) gt_tensors_free(got, 2);
    if (s && strstr(loom_last_error(),
                    "loop over 4096 in pieces of 256: the two streamed slices of value 'x' "
                    "(double buffered), its second buffer (the estimate counts it): "))
      named = true;
  }
  ASSERT_TRUE(named);
  gt_tensors_free(&in, 1);
  loom_graph_destroy(g);
  loom_graph_destroy(ref);
}

/* Without streaming the same input cannot be held under the limit. */
TEST(loops_the_input_held_whole_does_not_fit) {
  loom_graph *ref = gt_parse("%s", stream_ref);
  ASSERT_TRUE(ref != NULL);
  loom_tensor in, got[2];
  ASSERT_OK(gt_inputs(ref, 3, &in));
  ASSERT_EQ(gt_run(ref, NULL, &in, got, 256 * KIB, NULL), LOOM_ERR_OUT_OF_MEMORY);
  gt_tensors_free(&in, 1);
  loom_graph_destroy(ref);
}

/* ---- errors and allocation failures ------------------------------------------------------- */

TEST(loops_errors_name_the_piece_and_the_body_op) {
  const loop_case *c = &cases[0];
  loom_graph *ref = gt_parse("%s", c->ref), *body = gt_parse("%s", c->body);
  ASSERT_TRUE(ref && body);
  loom_graph *g = loop_graph(ref, body, c->n, c->piece, c->rules, c->combines, c->n_results);
  ASSERT_TRUE(g != NULL);
  loom_tensor in[2], got[1];
  ASSERT_OK(gt_inputs(ref, 1, in));
  loom_estimate e;
  ASSERT_OK(loom_graph_estimate(g, NULL, &e));
  /* the body's last op is the peak (its result, streamed out, is held for the piece): a byte
   * less fails it in the first piece */
  ASSERT_EQ(gt_run(g, NULL, in, got, e.peak_bytes - 1, NULL), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_CONTAINS(loom_last_error(),
                  "loop over 10 in pieces of 4: piece 1 of 3 [0, 4): add 'z' (line 3): value 'z' needs");
  loom_estimate_deinit(&e);
  gt_tensors_free(in, 2);
  loom_graph_destroy(g);
  loom_graph_destroy(body);
  loom_graph_destroy(ref);
}

/* Every host allocation of a looped run on dev failing in turn (the topk and argmax merges, the
 * last shorter piece, a copied concat): an OUT_OF_MEMORY each time, nothing left behind. */
static void sweep_cases(const loom__exec_device *dev) {
  static const size_t picks[] = {1, 5, 7};
  for (size_t k = 0; k < sizeof picks / sizeof picks[0]; k++) {
    const loop_case *c = &cases[picks[k]];
    loom_graph *ref = gt_parse("%s", c->ref), *body = gt_parse("%s", c->body);
    ASSERT_TRUE(ref && body);
    loom_graph *g = loop_graph(ref, body, c->n, c->piece, c->rules, c->combines, c->n_results);
    ASSERT_TRUE(g != NULL);
    loom_tensor in[4], got[LOOM_LOOP_MAX_RESULTS];
    int32_t np = loom_graph_param_count(g);
    ASSERT_OK(gt_inputs(g, 2, in));
    /* a first run fills the device's caches (kernels, programs), which outlive a run */
    ASSERT_OK(gt_run(g, dev, in, got, 0, NULL));
    gt_tensors_free(got, c->n_results);
    loom_test_sweep sw;
    SWEEP_ALLOCATIONS(&sw, 0, 100000) {
      loom_status s = SWEEP_RUN(&sw, gt_run(g, dev, in, got, 0, NULL));
      if (!s) gt_tensors_free(got, c->n_results);
    }
    ASSERT_TRUE(sw.failures > 10);
    gt_tensors_free(in, np);
    loom_graph_destroy(g);
    loom_graph_destroy(body);
    loom_graph_destroy(ref);
  }
}

TEST(loops_allocation_failures_on_cpu0) {
  const loom__exec_device *cpu = NULL;
  ASSERT_OK(loom__context_exec_device(gt_context(), "cpu0", &cpu));
  sweep_cases(cpu);
}

TEST(loops_allocation_failures_on_opencl) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_OPENCL, devs) > 0) sweep_cases(devs[0]);
}
