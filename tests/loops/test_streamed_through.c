/* Inputs streamed through nested loops (loom__value_streamed): a dot a . b as a loop over rows
 * of a that passes b whole to its body, where a loop over k slices both (the row piece along
 * its columns, b along its rows) and sums the pieces. Neither input is ever held whole: on
 * cpu0 the inner loop reads b's slices in place from the caller's tensor, on an OpenCL device
 * it writes each slice from there into a buffer of its own. Checked against the plain dot run
 * on cpu0: results within the dtype's tolerance, the meter's peak equal to the estimate, the
 * estimate under the size of either input (so holding one whole would not fit) and a byte
 * less refused; b read by two inner loops and by a loop of the top graph; b passed through two
 * levels; every host allocation failing in turn. The loops hold one slice of a streamed operand
 * on cpu0 and two on OpenCL (double buffered), as the chunk rewrite makes them for those
 * runners; on cpu0 the inner loop's dot pieces are added straight into its sum. */
#include "gpu_util.h"

/* The dot's sizes: a[m,k] (or a[batch,m,k]) . b[k,n], rows of a in pieces of `rows`, k in
 * pieces of `kp`. */
typedef struct dot_shape {
  int64_t batch, m, k, n, rows, kp;
} dot_shape;

/* 13 row pieces (the last of 4), 5 k pieces (the last of 44). */
static const dot_shape big = {0, 100, 300, 64, 8, 64};
/* Four matrices of 4 row pieces (the last of 3), 10 k pieces (the last of 12): one matrix of a
 * is held (a loop slices it contiguously), under the size of b. */
static const dot_shape big_batch = {4, 24, 300, 64, 7, 32};
/* Double buffered, two matrices of a are held: eight matrices of 3 row pieces (the last of 2),
 * 10 k pieces (the last of 24) keep that under the size of b. */
static const dot_shape big_batch_doubled = {8, 12, 600, 64, 5, 64};
/* For the allocation sweep: pieces of 5, 5, 2 rows and 4, 4, 2 of k. */
static const dot_shape tiny = {0, 12, 10, 3, 5, 4};
static const dot_shape tiny_batch = {2, 12, 10, 3, 5, 4};

#define LL(x) ((long long)(x))

/* The slices every loop the builders below make holds (loom_graph_loop_set_slices). */
static int32_t slices = 1;

/* Adds a loop as loom_graph_add_loop does, holding `slices` slices. */
static loom_status add_loop(loom_graph *g, int64_t n, int64_t piece, const loom_graph *body,
                            const loom_value *operands, const loom_loop_input *rules, int32_t n_operands,
                            const loom_loop_output *comb, loom_value *out) {
  loom_status st = loom_graph_add_loop(g, n, piece, body, operands, rules, n_operands, comb, 1, out);
  return st ? st : loom_graph_loop_set_slices(g, loom_graph_op_count(g) - 1, slices);
}

/* A graph with parameters x: dt[xdims] and b: dt[k,n] and a loop over n_loop in pieces of
 * piece on (x, b) by rules, running body, its one result combined by comb into *out. The
 * caller adds what else it needs and returns. NULL (and a failed test) when it does not build. */
static loom_graph *wrap_open(const char *name, loom_dtype dt, int32_t xrank, const int64_t *xdims,
                             const dot_shape *s, int64_t n_loop, int64_t piece, const loom_graph *body,
                             const loom_loop_input rules[2], loom_loop_output comb, loom_value *out_b,
                             loom_value *out) {
  loom_graph *g = NULL;
  loom_type xt, bt;
  loom_status st = loom_type_make(dt, xrank, xdims, &xt);
  if (!st) st = loom_type_make(dt, 2, (int64_t[]){s->k, s->n}, &bt);
  if (!st) st = loom_graph_create(name, &g);
  if (!st) {
    loom_value ops[2] = {loom_graph_param(g, "x", &xt), loom_graph_param(g, "b", &bt)};
    *out_b = ops[1];
    st = add_loop(g, n_loop, piece, body, ops, rules, 2, &comb, out);
  }
  if (st) {
    loom_test_fail(__FILE__, __LINE__, "graph '%s' does not build: %s", name, loom_last_error());
    loom_graph_destroy(g);
    return NULL;
  }
  return g;
}

static loom_graph *wrap_close(loom_graph *g, const loom_value *outs, int32_t n) {
  if (g && loom_graph_return(g, outs, n)) {
    loom_test_fail(__FILE__, __LINE__, "graph '%s' does not build: %s", "wrap", loom_last_error());
    loom_graph_destroy(g);
    return NULL;
  }
  return g;
}

static loom_graph *wrap(const char *name, loom_dtype dt, int32_t xrank, const int64_t *xdims,
                        const dot_shape *s, int64_t n_loop, int64_t piece, const loom_graph *body,
                        const loom_loop_input rules[2], loom_loop_output comb) {
  loom_value b, out;
  loom_graph *g =
      body ? wrap_open(name, dt, xrank, xdims, s, n_loop, piece, body, rules, comb, &b, &out) : NULL;
  return wrap_close(g, &out, 1);
}

static const loom_loop_output sum = {LOOM_COMBINE_SUM, 0, 0, false};
static const loom_loop_output max = {LOOM_COMBINE_MAX, 0, 0, false};
static const loom_loop_output cat0 = {LOOM_COMBINE_CONCAT, 0, 0, false};
static const loom_loop_output cat1 = {LOOM_COMBINE_CONCAT, 1, 0, false};

/* One k piece of the dot: a[.., rows, kp] . b[kp, n] (batch: a leading axis of 1). */
static loom_graph *kpiece_body(loom_dtype dt, const dot_shape *s, bool batch) {
  const char *t = loom_dtype_name(dt);
  return gt_parse("graph kpiece(ak: %s[%s%lld,%lld], bk: %s[%lld,%lld]) {\n c = dot ak bk\n return c\n}", t,
                  batch ? "1," : "", LL(s->rows), LL(s->kp), t, LL(s->kp), LL(s->n));
}

/* A piece of rows of a times b: a loop over k slicing the rows along their columns and b along
 * its rows, summing (b's parameter is streamed in this body: the loop over k slices it
 * contiguously). With colsum, a second loop over k sums b's columns and adds them to each row
 * (b read by two inner loops). */
static loom_graph *rows_body(loom_dtype dt, const dot_shape *s, bool colsum) {
  const char *t = loom_dtype_name(dt);
  loom_graph *kp = kpiece_body(dt, s, false), *cs = NULL, *g = NULL;
  if (colsum)
    cs = gt_parse("graph colsum(bk: %s[%lld,%lld]) {\n s = reduce_sum bk axes=[0]\n return s\n}", t,
                  LL(s->kp), LL(s->n));
  loom_value b, c, cols;
  const loom_loop_input by_k[2] = {{1, 0, 0, 0}, {0, 0, 0, 0}}, b_rows = {0, 0, 0, 0};
  if (kp && (cs || !colsum))
    g = wrap_open("rows", dt, 2, (int64_t[]){s->rows, s->k}, s, s->k, s->kp, kp, by_k, sum, &b, &c);
  if (g && colsum) {
    loom_status st = add_loop(g, s->k, s->kp, cs, &b, &b_rows, 1, &sum, &cols);
    if (st) loom_test_fail(__FILE__, __LINE__, "the colsum loop does not build: %s", loom_last_error());
    c = st ? c : loom_binary(g, LOOM_OP_ADD, c, cols);
  }
  g = wrap_close(g, &c, 1);
  loom_graph_destroy(cs);
  loom_graph_destroy(kp);
  return g;
}

static const loom_loop_input rows_b_whole[2] = {{0, 0, 0, 0}, {-1, 0, 0, 0}};

/* a[m,k] . b[k,n]: the loop over rows outside, k inside. */
static loom_graph *nested_dot(loom_dtype dt, const dot_shape *s) {
  loom_graph *body = rows_body(dt, s, false);
  loom_graph *g = wrap("top", dt, 2, (int64_t[]){s->m, s->k}, s, s->m, s->rows, body, rows_b_whole, cat0);
  loom_graph_destroy(body);
  return g;
}

/* a . b + b's column sums, and b's column maxima: b passed through to two inner loops, and
 * sliced by a loop of the top graph too. */
static loom_graph *two_readers(loom_dtype dt, const dot_shape *s) {
  loom_graph *body = rows_body(dt, s, true);
  loom_graph *mx = gt_parse("graph colmax(bk: %s[%lld,%lld]) {\n x = reduce_max bk axes=[0]\n return x\n}",
                            loom_dtype_name(dt), LL(s->kp), LL(s->n));
  loom_value b, outs[2];
  const loom_loop_input b_rows = {0, 0, 0, 0};
  loom_graph *g = body && mx ? wrap_open("top", dt, 2, (int64_t[]){s->m, s->k}, s, s->m, s->rows, body,
                                         rows_b_whole, cat0, &b, &outs[0])
                             : NULL;
  if (g && add_loop(g, s->k, s->kp, mx, &b, &b_rows, 1, &max, &outs[1])) {
    loom_test_fail(__FILE__, __LINE__, "the colmax loop does not build: %s", loom_last_error());
    loom_graph_destroy(g);
    g = NULL;
  }
  g = wrap_close(g, outs, 2);
  loom_graph_destroy(mx);
  loom_graph_destroy(body);
  return g;
}

/* a[batch,m,k] . b[k,n]: a loop over a's matrices, in each a loop over rows, in each a loop
 * over k; b is passed whole through two levels before the innermost loop slices it. */
static loom_graph *two_levels(loom_dtype dt, const dot_shape *s) {
  loom_graph *kp = kpiece_body(dt, s, true);
  const loom_loop_input by_k[2] = {{2, 0, 0, 0}, {0, 0, 0, 0}}, by_rows[2] = {{1, 0, 0, 0}, {-1, 0, 0, 0}};
  loom_graph *rows = wrap("rows", dt, 3, (int64_t[]){1, s->rows, s->k}, s, s->k, s->kp, kp, by_k, sum);
  loom_graph *mats = wrap("mats", dt, 3, (int64_t[]){1, s->m, s->k}, s, s->m, s->rows, rows, by_rows, cat1);
  loom_graph *g =
      wrap("top", dt, 3, (int64_t[]){s->batch, s->m, s->k}, s, s->batch, 1, mats, rows_b_whole, cat0);
  loom_graph_destroy(mats);
  loom_graph_destroy(rows);
  loom_graph_destroy(kp);
  return g;
}

typedef loom_graph *(*build_fn)(loom_dtype dt, const dot_shape *s);

typedef struct nested_case {
  const char *name;
  build_fn build;
  const char *ref; /* .lir: dtype, a's dims, dtype, k, n */
  int32_t n_results;
  const dot_shape *big, *tiny;
  const dot_shape *big_doubled; /* big, where the loops hold two slices */
} nested_case;

static const nested_case nested_cases[] = {
    {"the dot, rows outside and k inside", nested_dot,
     "graph ref(a: %s[%s], b: %s[%lld,%lld]) {\n c = dot a b\n return c\n}", 1, &big, &tiny, &big},
    {"b read by two inner loops and by a loop of its own", two_readers,
     "graph ref(a: %s[%s], b: %s[%lld,%lld]) {\n c = dot a b\n s = reduce_sum b axes=[0]\n"
     " d = add c s\n x = reduce_max b axes=[0]\n return d, x\n}",
     2, &big, &tiny, &big},
    {"b passed through two levels", two_levels,
     "graph ref(a: %s[%s], b: %s[%lld,%lld]) {\n c = dot a b\n return c\n}", 1, &big_batch, &tiny_batch,
     &big_batch_doubled},
};

static loom_graph *case_ref(const nested_case *c, loom_dtype dt, const dot_shape *s) {
  const char *t = loom_dtype_name(dt);
  char a[64];
  if (s->batch)
    snprintf(a, sizeof a, "%lld,%lld,%lld", LL(s->batch), LL(s->m), LL(s->k));
  else
    snprintf(a, sizeof a, "%lld,%lld", LL(s->m), LL(s->k));
  return gt_parse(c->ref, t, a, t, LL(s->k), LL(s->n));
}

/* Runs case c in dtype dt on dev (NULL: cpu0) under a limit of exactly its estimate, against
 * the plain graph on cpu0; a byte less is refused. */
static void check_nested_case(const nested_case *c, loom_dtype dt, const loom__exec_device *dev) {
  const char *where = dev ? dev->id : "cpu0", *t = loom_dtype_name(dt);
  const dot_shape *shape = slices == 2 ? c->big_doubled : c->big;
  loom_graph *ref = case_ref(c, dt, shape), *g = ref ? c->build(dt, shape) : NULL;
  loom_tensor in[2], want[2], got[2];
  int32_t no = c->n_results;
  bool have_in = false, have_want = false;
  loom_estimate e = {0};
  if (!g) goto done;
  ASSERT_OK(gt_inputs(ref, 11, in));
  have_in = true;
  ASSERT_OK(gt_run(ref, NULL, in, want, 0, NULL));
  have_want = true;
  ASSERT_OK(loom_graph_estimate(g, NULL, &e));
  ASSERT_EQ(e.input_bytes, 0); /* neither input held whole */
  for (int32_t p = 0; p < 2; p++) {
    int64_t bytes = 0;
    ASSERT_OK(loom_type_bytes(&in[p].type, &bytes));
    if (e.peak_bytes >= bytes)
      loom_test_fail(__FILE__, __LINE__, "%s (%s): the estimate %lld is not under input %d's %lld bytes",
                     c->name, t, LL(e.peak_bytes), (int)p, LL(bytes));
  }
  /* the plain dot holds its inputs whole: refused under the same limit */
  if (gt_run(ref, NULL, in, got, e.peak_bytes, NULL) != LOOM_ERR_OUT_OF_MEMORY)
    loom_test_fail(__FILE__, __LINE__, "%s (%s): the plain graph runs under %lld bytes", c->name, t,
                   LL(e.peak_bytes));
  loom__meter m;
  loom_status s = gt_run(g, dev, in, got, e.peak_bytes, &m);
  if (s == LOOM_ERR_UNSUPPORTED && dt == LOOM_F64 && strstr(loom_last_error(), "fp64")) goto done;
  if (s) {
    loom_test_fail(__FILE__, __LINE__, "%s (%s) on %s under %lld bytes: %s", c->name, t, where,
                   LL(e.peak_bytes), loom_last_error());
    goto done;
  }
  if (m.peak != e.peak_bytes || m.in_use != 0)
    loom_test_fail(__FILE__, __LINE__, "%s (%s) on %s: measured peak %lld (%lld left), estimated %lld",
                   c->name, t, where, LL(m.peak), LL(m.in_use), LL(e.peak_bytes));
  for (int32_t i = 0; i < no; i++) {
    double rtol, atol;
    char msg[512];
    gt_tolerance(dt, 100, &rtol, &atol); /* sums over k = 300 */
    if (!gt_close(&want[i], &got[i], rtol, atol, msg, sizeof msg))
      loom_test_fail(__FILE__, __LINE__, "%s (%s) on %s, result %d: %s", c->name, t, where, (int)i, msg);
  }
  gt_tensors_free(got, no);
  s = gt_run(g, dev, in, got, e.peak_bytes - 1, NULL);
  if (s != LOOM_ERR_OUT_OF_MEMORY)
    loom_test_fail(__FILE__, __LINE__, "%s (%s) on %s a byte under the estimate: %s (%s)", c->name, t, where,
                   loom_status_string(s), loom_last_error());
  if (!s) gt_tensors_free(got, no);
done:
  loom_estimate_deinit(&e);
  if (have_want) gt_tensors_free(want, no);
  if (have_in) gt_tensors_free(in, 2);
  loom_graph_destroy(g);
  loom_graph_destroy(ref);
}

static void check_all(const loom__exec_device *dev) {
  static const loom_dtype dtypes[] = {LOOM_F32, LOOM_F64};
  slices = dev ? 2 : 1;
  for (size_t i = 0; i < sizeof nested_cases / sizeof nested_cases[0]; i++)
    for (size_t d = 0; d < 2 && !loom_test_failed(); d++) check_nested_case(&nested_cases[i], dtypes[d], dev);
}

TEST(loops_stream_inputs_through_nested_loops_on_cpu0) {
  check_all(NULL);
}

TEST(loops_stream_inputs_through_nested_loops_on_opencl) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  for (int32_t d = 0; d < nd && !loom_test_failed(); d++) check_all(devs[d]);
}

/* Both inputs in buffers of the device's memory (as a plan's earlier stage leaves them): b is
 * passed through to the inner loop as the caller's buffer, and each slice read in place there,
 * counted as the estimate counts it. */
TEST(loops_stream_through_nested_loops_from_device_buffers) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_OPENCL, devs) == 0) return;
  const loom__exec_device *dev = devs[0];
  const nested_case *c = &nested_cases[0];
  slices = 2;
  loom_graph *ref = case_ref(c, LOOM_F32, &big), *g = ref ? nested_dot(LOOM_F32, &big) : NULL;
  ASSERT_TRUE(g != NULL);
  loom_tensor in[2], want, got;
  ASSERT_OK(gt_inputs(ref, 13, in));
  ASSERT_OK(gt_run(ref, NULL, in, &want, 0, NULL));
  loom_buffer *bufs[2] = {NULL, NULL};
  for (int32_t p = 0; p < 2; p++) {
    int64_t bytes = 0;
    ASSERT_OK(loom_type_bytes(&in[p].type, &bytes));
    ASSERT_OK(loom_buffer_allocate(dev->memory, bytes, LOOM_F32, dev->node, LOOM_MEM_DEVICE_LOCAL, &bufs[p]));
    ASSERT_OK(loom_buffer_write(bufs[p], 0, in[p].data, bytes));
  }
  loom_estimate e;
  ASSERT_OK(loom_graph_estimate(g, NULL, &e));
  loom__meter m = {.limit = e.peak_bytes};
  loom__exec_options opts = {.device = dev, .input_buffers = bufs};
  loom_status s = loom__execute(g, &opts, in, &got, &m);
  if (s) loom_test_fail(__FILE__, __LINE__, "on %s: %s", dev->id, loom_last_error());
  if (!s) {
    char msg[512];
    double rtol, atol;
    gt_tolerance(LOOM_F32, 100, &rtol, &atol);
    if (m.peak != e.peak_bytes || m.in_use != 0)
      loom_test_fail(__FILE__, __LINE__, "on %s: measured peak %lld (%lld left), estimated %lld", dev->id,
                     LL(m.peak), LL(m.in_use), LL(e.peak_bytes));
    if (!gt_close(&want, &got, rtol, atol, msg, sizeof msg))
      loom_test_fail(__FILE__, __LINE__, "on %s: %s", dev->id, msg);
    gt_tensors_free(&got, 1);
  }
  loom_estimate_deinit(&e);
  for (int32_t p = 0; p < 2; p++) loom_buffer_free(bufs[p]);
  gt_tensors_free(&want, 1);
  gt_tensors_free(in, 2);
  loom_graph_destroy(g);
  loom_graph_destroy(ref);
}

/* Every host allocation of the nested dot's run (under its estimate) failing in turn: an
 * OUT_OF_MEMORY each time, nothing left behind. */
static void sweep_nested(const loom__exec_device *dev) {
  slices = dev->backend->host_memory ? 1 : 2;
  for (size_t i = 0; i < sizeof nested_cases / sizeof nested_cases[0]; i++) {
    const nested_case *c = &nested_cases[i];
    loom_graph *g = c->build(LOOM_F32, c->tiny);
    ASSERT_TRUE(g != NULL);
    loom_tensor in[2], got[2];
    ASSERT_OK(gt_inputs(g, 5, in));
    loom_estimate e;
    ASSERT_OK(loom_graph_estimate(g, NULL, &e));
    /* a first run fills the device's caches (kernels, programs), which outlive a run */
    ASSERT_OK(gt_run(g, dev, in, got, e.peak_bytes, NULL));
    gt_tensors_free(got, c->n_results);
    loom_test_sweep sw;
    SWEEP_ALLOCATIONS(&sw, 0, 100000) {
      loom_status s = SWEEP_RUN(&sw, gt_run(g, dev, in, got, e.peak_bytes, NULL));
      if (!s) gt_tensors_free(got, c->n_results);
    }
    ASSERT_TRUE(sw.failures > 10);
    loom_estimate_deinit(&e);
    gt_tensors_free(in, 2);
    loom_graph_destroy(g);
  }
}

TEST(loops_stream_through_nested_loops_allocation_failures_on_cpu0) {
  const loom__exec_device *cpu = NULL;
  ASSERT_OK(loom__context_exec_device(gt_context(), "cpu0", &cpu));
  sweep_nested(cpu);
}

TEST(loops_stream_through_nested_loops_allocation_failures_on_opencl) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_OPENCL, devs) > 0) sweep_nested(devs[0]);
}
