/* The chunk rewrite: each way of cutting (a parallel axis, a reduced axis combined by
 * reduction, argmax/argmin and topk merged across pieces, dot over k) gives the unchunked
 * graph's results, and the rewritten graph's measured peak stays under the limit. */
#include "ir/passes.h"
#include "runtime/exec.h"
#include "rw_util.h"

/* Chunks g under `limit`, checks the report names the cut, that the estimate and the
 * measured peak are under the limit, and that results match the unchunked graph. */
static void check_chunked(const char *text, int64_t limit, const char *detail, double rtol) {
  loom_graph *g = rw_parse(text), *c = NULL;
  ASSERT_TRUE(g);
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.limit = limit;
  const char *only_chunk[] = {"distance",  "dot_transpose", "tile_broadcast", "reduce_broadcast",
                              "dot_chain", "sum_broadcast", "schedule"};
  o.disabled = only_chunk;
  o.n_disabled = 7;
  loom_rewrite_report report = {0};
  ASSERT_OK(loom_graph_optimize(g, &o, &c, &report));
  const loom_rewrite_entry *e = rw_entry(&report, "chunk");
  ASSERT_TRUE(e != NULL);
  ASSERT_CONTAINS(e->detail, detail);
  ASSERT_TRUE(e->bytes_saved > 0);
  ASSERT_TRUE(rw_peak(c) <= limit);

  loom_tensor in[2], out[3], want[3];
  int32_t n_in = loom_graph_param_count(g), n_out = loom_graph_output_count(g);
  ASSERT_OK(rw_random_inputs(g, 5, 1.0, in));
  loom__meter meter = {0};
  meter.limit = limit;
  loom_context *ctx = NULL;
  loom__exec_options eo = {0};
  ASSERT_OK(loom_context_create(NULL, &ctx));
  ASSERT_OK(loom__context_exec_device(ctx, "cpu0", &eo.device));
  ASSERT_OK(loom__execute(c, &eo, in, out, &meter));
  loom_context_destroy(ctx);
  ASSERT_TRUE(meter.peak <= limit);
  ASSERT_EQ(meter.peak, rw_peak(c));
  ASSERT_OK(rw_run(g, in, n_in, want, n_out));
  for (int32_t k = 0; k < n_out; k++) {
    int64_t n;
    loom_type_elements(&want[k].type, &n);
    ASSERT_TRUE(loom_type_equal(&want[k].type, &out[k].type));
    for (int64_t i = 0; i < n; i++) {
      double a = rw_get(&want[k], i), b = rw_get(&out[k], i);
      if (!(fabs(a - b) <= rtol * fabs(a))) {
        ASSERT_NEAR(b, a, rtol * fabs(a));
      }
    }
    loom_tensor_deinit(&want[k]);
    loom_tensor_deinit(&out[k]);
  }
  for (int32_t p = 0; p < n_in; p++) loom_tensor_deinit(&in[p]);
  loom_rewrite_report_deinit(&report);
  loom_graph_destroy(c);
  loom_graph_destroy(g);
}

TEST(chunk_parallel_rows_of_a_softmax) {
  check_chunked(
      "graph s(x: f32[256,8192]) {\n"
      "  m = reduce_max x axes=[1] keepdims=true\n  d = sub x m\n  e = exp d\n"
      "  t = reduce_sum e axes=[1] keepdims=true\n  p = div e t\n"
      "  r = reduce_max p axes=[1]\n  return r\n}\n",
      12 << 20, "along its result's axis 0", 1e-4);
}

TEST(chunk_reduced_axis_of_a_log_sum_exp) {
  check_chunked(
      "graph lse(x: f32[1,1048576]) {\n"
      "  m = reduce_max x axes=[1] keepdims=true\n  d = sub x m\n  e = exp d\n"
      "  s = reduce_sum e axes=[1] keepdims=true\n  l = log s\n  r = add l m\n  return r\n}\n",
      6 << 20, "reduce_sum 's' and the 2 ops before it, along the reduced axis 1", 1e-5);
}

/* Two reductions and an argmax read one intermediate: they become sinks of one region, so
 * each piece of exp is computed once and read by all three. */
TEST(chunk_joins_readers_of_one_value_as_sinks) {
  check_chunked(
      "graph two(x: f32[1,1048576]) {\n  e = exp x\n  s = reduce_sum e axes=[1]\n"
      "  m = reduce_max e axes=[1]\n  i = argmax e axis=1\n  return s, m, i\n}\n",
      6 << 20, "reduce_sum 's' (with 2 more sinks) and the 1 ops before it, along the reduced axis 1", 1e-5);
}

/* Rows of a matrix feed both a row sum and a row maximum: cut along the rows, two results. */
TEST(chunk_parallel_cut_with_two_sinks) {
  check_chunked(
      "graph rows(x: f32[512,4096]) {\n  e = exp x\n  s = reduce_sum e axes=[1]\n"
      "  m = reduce_max e axes=[1]\n  return s, m\n}\n",
      12 << 20, "(with 1 more sink) and the 1 ops before it, along its result's axis 0", 1e-5);
}

/* Columns of x (slices that take every row) are cut with the rows: the loop slices x itself,
 * and the last, shorter piece's slices stop at its length (1000 rows in pieces that do not
 * divide it). */
TEST(chunk_cuts_whole_axis_slices_with_the_rows) {
  check_chunked(
      "graph cols(x: f32[1000,2], y: f32[1,700]) {\n  a = slice x start=[0,0] stop=[1000,1]\n"
      "  b = slice x start=[0,1] stop=[1000,2]\n  s = sub a y\n  t = mul s b\n"
      "  r = reduce_max t axes=[1]\n  return r\n}\n",
      300 << 10, "reduce_max 'r' and the 4 ops before it, along its result's axis 0", 0);
}

TEST(chunk_merges_argmax_pieces) {
  check_chunked("graph am(x: f32[1,1048576]) {\n  e = exp x\n  i = argmax e axis=1\n  return i\n}\n", 6 << 20,
                "argmax 'i' and the 1 ops before it, along the reduced axis 1", 0);
}

TEST(chunk_merges_topk_pieces) {
  check_chunked(
      "graph tk(x: f32[1,1048576]) {\n  e = exp x\n  v, j = topk e k=5 axis=1 largest=false\n"
      "  return v, j\n}\n",
      /* values within 1e-6: the fused exp (libmvec, <= 4 ulp) need not round as expf does */
      6 << 20, "topk 'v' and the 1 ops before it, along the reduced axis 1", 1e-6);
}

TEST(chunk_sums_dot_over_k) {
  check_chunked(
      "graph dk(a: f32[1,1048576], b: f32[1048576,1]) {\n  s = sigmoid a\n  c = dot s b\n"
      "  return c\n}\n",
      10 << 20, "dot 'c' and the 1 ops before it, along the reduced axis 1", 1e-5);
}

TEST(chunk_refuses_what_cannot_be_cut) {
  /* An FFT is not cut along its axis: its 2x temporary and output cannot be made smaller. */
  loom_graph *g = rw_parse("graph f(x: c64[262144]) {\n  y = fft x axis=0\n  return y\n}\n"), *c = NULL;
  ASSERT_TRUE(g);
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.limit = 4 << 20;
  ASSERT_STATUS(loom_graph_optimize(g, &o, &c, NULL), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_CONTAINS(loom_last_error(), "fft 'y' needs 8.00 MiB");
  ASSERT_CONTAINS(loom_last_error(), "limit of 4.00 MiB, and cannot be chunked");
  ASSERT_TRUE(c == NULL);
  loom_graph_destroy(g);
}

/* Issue 16, finding 2: the search for a cut gives up quickly where nothing fits. Here the
 * peak is an FFT along the axis every cut would need (x could be streamed, the FFT's input and
 * result cannot), so no loop fits; the search tries few bodies and names the op. */
TEST(chunk_refuses_quickly_when_nothing_fits) {
  loom_graph *g = rw_parse(
                 "graph spec(x: f32[1,131072]) {\n  y = exp x\n  f = rfft y axis=1\n  return f\n}\n"),
             *c = NULL;
  ASSERT_TRUE(g);
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.limit = 1 << 20;
  int64_t before = loom__chunk_pieces_emitted();
  ASSERT_STATUS(loom_graph_optimize(g, &o, &c, NULL), LOOM_ERR_OUT_OF_MEMORY);
  int64_t bodies = loom__chunk_pieces_emitted() - before;
  ASSERT_CONTAINS(loom_last_error(), "rfft 'f' needs");
  ASSERT_CONTAINS(loom_last_error(), "limit of 1.00 MiB");
  printf("    %lld loop bodies emitted\n", (long long)bodies);
  ASSERT_TRUE(bodies < 200);
  ASSERT_TRUE(c == NULL);
  loom_graph_destroy(g);
}

/* Issue 16's log-sum-exp over axis 0 of a row, whose result is as long as its input: the two
 * fill the 1 MiB, which issue 16 refused. Issue 13: x is streamed in and r out, piece by piece,
 * as one loop, so it fits. */
TEST(chunk_streams_an_input_and_a_result_the_limit_cannot_hold) {
  loom_graph *g = rw_parse(
                 "graph lse(x: f32[1,131072]) {\n"
                 "  m = reduce_max x axes=[0] keepdims=true\n  d = sub x m\n  e = exp d\n"
                 "  s = reduce_sum e axes=[0] keepdims=true\n  l = log s\n  r = add l m\n"
                 "  return r\n}\n"),
             *c = NULL;
  ASSERT_TRUE(g);
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.limit = 1 << 20;
  ASSERT_OK(loom_graph_optimize(g, &o, &c, NULL));
  ASSERT_TRUE(rw_peak(c) <= o.limit);
  int32_t loops = 0;
  for (int32_t i = 0; i < loom_graph_op_count(c); i++) {
    loom_op_info info;
    ASSERT_OK(loom_graph_op_info_get(c, i, &info));
    loops += info.kind == LOOM_OP_LOOP;
  }
  ASSERT_EQ(loops, 1);
  loom_graph_destroy(c);
  loom_graph_destroy(g);
}

/* A constant at the peak of a graph over its limit (ONNX's Size, folded at read time, under a
 * quarter of its need): no op reads it, so it is no sink to cut, and the chunk rewrite says
 * the graph cannot fit instead of reading the inputs it does not have (a SIGSEGV before). */
TEST(chunk_refuses_a_constant_at_the_peak) {
  loom_graph *g = rw_parse("graph g(x: f32[3,4,5]) {\n  y = constant [60] : i64[1]\n  return y\n}\n");
  ASSERT_TRUE(g != NULL);
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.limit = 2;
  loom_graph *out = NULL;
  ASSERT_STATUS(loom_graph_optimize(g, &o, &out, NULL), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_TRUE(out == NULL);
  loom_graph_destroy(g);
}

/* An iota read by the ops cut into pieces is made whole and sliced, never put in the body: a
 * piece of an iota along the cut axis would count from 0 again (and the body could not type it:
 * the rewrite failed with "iota: needs a result type"). The chunked sum equals the whole one. */
TEST(chunk_leaves_an_iota_outside_the_body) {
  loom_graph *g = rw_parse(
      "graph g(x: f32[65536]) {\n  a = iota axis=0 : f32[65536]\n  b = add a x\n"
      "  s = reduce_sum b axes=[0]\n  return s\n}\n");
  ASSERT_TRUE(g != NULL);
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.limit = 300 << 10;
  loom_graph *out = NULL;
  ASSERT_OK(loom_graph_optimize(g, &o, &out, NULL));
  ASSERT_EQ(rw_count_ops(out, LOOM_OP_LOOP), 1);
  ASSERT_EQ(rw_count_ops(out, LOOM_OP_IOTA), 1); /* outside the loop, whole */
  double worst = 0;
  ASSERT_OK(rw_compare(g, out, 3, 1.0, 1e-2, 1e-5, &worst));
  ASSERT_TRUE(worst <= 1);
  loom_graph_destroy(out);
  loom_graph_destroy(g);
}
