/* The attention rewrite and its kernels (src/ir/attention.c, cpu_attention.c,
 * kernels/opencl/attention.cl): which graphs it fuses and which it leaves, that the fused op
 * computes what the unfused graph does on cpu0 and on every OpenCL device (PoCL in CI), and
 * that under a limit smaller than the scores the run's measured peak stays within it. */
#include <stdlib.h>
#include <string.h>

#include "gpu_util.h"
#include "ir/attention.h"
#include "ir/ir.h"

/* o = softmax(q kt * scale) v, spelt as `form` says: 'm' multiplies the scores by a constant,
 * 'd' divides them by sqrt(d), 'n' has no max subtraction, 'p' takes kt as a parameter. */
static loom_graph *attention(char form, int n, int m, int d, int dv, const char *dt) {
  char head[256], scores[256], soft[512];
  if (form == 'p')
    snprintf(head, sizeof head, "graph att(q: %s[%d,%d], kt: %s[%d,%d], v: %s[%d,%d]) {\n", dt, n, d, dt, d,
             m, dt, m, dv);
  else
    snprintf(head, sizeof head,
             "graph att(q: %s[%d,%d], k: %s[%d,%d], v: %s[%d,%d]) {\n  kt = transpose k perm=[1,0]\n", dt, n,
             d, dt, m, d, dt, m, dv);
  if (form == 'd')
    snprintf(scores, sizeof scores, "  s0 = dot q kt\n  r = constant %.9g : %s[]\n  s = div s0 r\n", sqrt(d),
             dt);
  else
    snprintf(scores, sizeof scores, "  s0 = dot q kt\n  c = constant %.9g : %s[]\n  s = mul c s0\n",
             1 / sqrt(d), dt);
  if (form == 'n')
    snprintf(soft, sizeof soft,
             "  e = exp s\n  z = reduce_sum e axes=[1] keepdims=true\n  p = div e z\n  o = dot p v\n");
  else
    snprintf(soft, sizeof soft,
             "  mx = reduce_max s axes=[-1] keepdims=true\n  sh = sub s mx\n  e = exp sh\n"
             "  z = reduce_sum e axes=[1] keepdims=true\n  p = div e z\n  o = dot p v\n");
  return gt_parse("%s%s%s  return o\n}\n", head, scores, soft);
}

static loom_status optimize(const loom_graph *g, int64_t limit, bool attention_on, loom_graph **out,
                            loom_rewrite_report *rep) {
  const char *off[] = {"attention"};
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.limit = limit;
  o.fused_runs = loom_fused_body_runs_everywhere;
  o.disabled = attention_on ? NULL : off;
  o.n_disabled = attention_on ? 0 : 1;
  return loom_graph_optimize(g, &o, out, rep);
}

/* The attention bodies among g's fused ops (loops' bodies too). */
static int attention_ops(const loom_graph *g, loom__attention *last) {
  int n = 0;
  for (int32_t i = 0; i < g->n_ops; i++) {
    if (g->ops[i].fused && loom__attention_body(g->ops[i].fused, last)) n++;
    if (g->ops[i].loop) n += attention_ops(g->ops[i].loop->body, last);
  }
  return n;
}

static bool reported(const loom_rewrite_report *r, const char *name) {
  for (int32_t i = 0; i < r->count; i++)
    if (strcmp(r->entries[i].name, name) == 0) return true;
  return false;
}

TEST(rewrite_fires_on_every_spelling) {
  const char forms[] = {'m', 'd', 'n', 'p'};
  for (int f = 0; f < 4; f++) {
    loom_graph *g = attention(forms[f], 40, 56, 16, 24, "f32"), *opt = NULL;
    ASSERT_TRUE(g != NULL);
    loom_rewrite_report rep = {0};
    ASSERT_OK(optimize(g, 0, true, &opt, &rep));
    loom__attention a;
    ASSERT_EQ(attention_ops(opt, &a), 1);
    ASSERT_TRUE(reported(&rep, "attention"));
    ASSERT_EQ(a.n, 40);
    ASSERT_EQ(a.m, 56);
    ASSERT_EQ(a.d, 16);
    ASSERT_EQ(a.dv, 24);
    ASSERT_NEAR(a.scale, 0.25, 1e-7);
    ASSERT_EQ(opt->n_ops, forms[f] == 'p' ? 1 : 2); /* the fused op (and kt's transpose view) */
    loom_rewrite_report_deinit(&rep);
    loom_graph_destroy(opt);
    loom_graph_destroy(g);
  }
}

/* Anything between the scores and the softmax (a mask), a value of the chain read outside it,
 * another dtype, or the rewrite turned off: no attention op. */
TEST(rewrite_leaves_other_graphs) {
  const char *texts[] = {
      "graph att(q: f32[8,4], k: f32[6,4], v: f32[6,4], mask: f32[8,6]) {\n  kt = transpose k perm=[1,0]\n"
      "  s0 = dot q kt\n  s = add s0 mask\n  mx = reduce_max s axes=[1] keepdims=true\n  sh = sub s mx\n"
      "  e = exp sh\n  z = reduce_sum e axes=[1] keepdims=true\n  p = div e z\n  o = dot p v\n  return "
      "o\n}\n",
      "graph att(q: f32[8,4], k: f32[6,4], v: f32[6,4]) {\n  kt = transpose k perm=[1,0]\n"
      "  s = dot q kt\n  mx = reduce_max s axes=[1] keepdims=true\n  sh = sub s mx\n"
      "  e = exp sh\n  z = reduce_sum e axes=[1] keepdims=true\n  p = div e z\n  o = dot p v\n  return o, "
      "p\n}\n",
      "graph att(q: f32[8,4], k: f32[6,4], v: f32[6,4]) {\n  kt = transpose k perm=[1,0]\n"
      "  s = dot q kt\n  mx = reduce_max s axes=[0] keepdims=true\n  sh = sub s mx\n"
      "  e = exp sh\n  z = reduce_sum e axes=[0] keepdims=true\n  p = div e z\n  pt = transpose p "
      "perm=[1,0]\n"
      "  o = dot pt q\n  return o\n}\n",
  };
  for (int t = 0; t < 3; t++) {
    loom_graph *g = gt_parse("%s", texts[t]), *opt = NULL;
    ASSERT_TRUE(g != NULL);
    ASSERT_OK(optimize(g, 0, true, &opt, NULL));
    ASSERT_EQ(attention_ops(opt, NULL), 0);
    loom_graph_destroy(opt);
    loom_graph_destroy(g);
  }
  loom_graph *g = attention('m', 8, 6, 4, 4, "f64"), *opt = NULL;
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(optimize(g, 0, true, &opt, NULL));
  ASSERT_EQ(attention_ops(opt, NULL), 0); /* f64 stays as written (cpu0's kernel is f32) */
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
  g = attention('m', 8, 6, 4, 4, "f32");
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(optimize(g, 0, false, &opt, NULL));
  ASSERT_EQ(attention_ops(opt, NULL), 0);
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
}

/* The fused op in text: printed, parsed back, printed again, the same. */
TEST(fused_attention_round_trips_as_text) {
  loom_graph *g = attention('m', 12, 10, 4, 6, "f32"), *opt = NULL, *back = NULL;
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(optimize(g, 0, true, &opt, NULL));
  char *a = NULL, *b = NULL;
  size_t na = 0, nb = 0;
  FILE *f = open_memstream(&a, &na);
  ASSERT_OK(loom_graph_print(opt, f));
  fclose(f);
  ASSERT_OK(loom_graph_parse(a, na, "att.lir", &back));
  ASSERT_EQ(attention_ops(back, NULL), 1);
  f = open_memstream(&b, &nb);
  ASSERT_OK(loom_graph_print(back, f));
  fclose(f);
  ASSERT_STREQ(b, a);
  free(a);
  free(b);
  loom_graph_destroy(back);
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
}

/* The fused graph's outputs against the unfused graph's on cpu0, then on each OpenCL device. */
static void check_equal(loom_graph *g, double scale) {
  loom_graph *opt = NULL;
  ASSERT_OK(optimize(g, 0, true, &opt, NULL));
  ASSERT_EQ(attention_ops(opt, NULL), 1);
  loom_tensor in[3], want[1], got[1];
  ASSERT_OK(gt_inputs(g, 11, in));
  ASSERT_OK(gt_run(g, NULL, in, want, 0, NULL));
  ASSERT_OK(gt_run(opt, NULL, in, got, 0, NULL));
  double rtol, atol;
  gt_tolerance(LOOM_F32, scale, &rtol, &atol);
  char msg[512];
  bool ok = gt_close(&want[0], &got[0], rtol, atol, msg, sizeof msg);
  gt_tensors_free(got, 1);
  if (!ok) loom_test_fail(__FILE__, __LINE__, "cpu0: %s", msg);
  int32_t nd = gt_device_count(LOOM_BACKEND_OPENCL);
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (ok && nd > 0) nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  for (int32_t k = 0; ok && k < nd; k++) {
    loom_status s = gt_run(opt, devs[k], in, got, 0, NULL);
    if (s) {
      loom_test_fail(__FILE__, __LINE__, "%s: %s", devs[k]->id, loom_last_error());
      break;
    }
    ok = gt_close(&want[0], &got[0], rtol, atol, msg, sizeof msg);
    gt_tensors_free(got, 1);
    if (!ok) loom_test_fail(__FILE__, __LINE__, "%s: %s", devs[k]->id, msg);
  }
  gt_tensors_free(want, 1);
  gt_tensors_free(in, 3);
  loom_graph_destroy(opt);
}

TEST(fused_equals_unfused_on_cpu0_and_opencl) {
  /* sizes that leave partial blocks of rows (128) and keys (256); dv past the kernel's 32 */
  loom_graph *g = attention('m', 300, 517, 40, 72, "f32");
  ASSERT_TRUE(g != NULL);
  check_equal(g, 20);
  loom_graph_destroy(g);
  g = attention('p', 129, 257, 3, 5, "f32"); /* kt read by rows, not as a transposed k */
  ASSERT_TRUE(g != NULL);
  check_equal(g, 20);
  loom_graph_destroy(g);
  g = attention('n', 64, 40, 8, 8, "f32");
  ASSERT_TRUE(g != NULL);
  check_equal(g, 20);
  loom_graph_destroy(g);
  /* operands no BLAS call takes as they are (every other column): packed block by block */
  g = gt_parse(
      "graph att(qq: f32[50,16], k: f32[70,8], vv: f32[70,12]) {\n  q = slice qq start=[0,0] stop=[50,16] "
      "step=[1,2]\n  kt = transpose k perm=[1,0]\n  v = slice vv start=[0,0] stop=[70,12] step=[1,2]\n"
      "  s0 = dot q kt\n  mx = reduce_max s0 axes=[1] keepdims=true\n  sh = sub s0 mx\n  e = exp sh\n"
      "  z = reduce_sum e axes=[1] keepdims=true\n  p = div e z\n  o = dot p v\n  return o\n}\n");
  ASSERT_TRUE(g != NULL);
  check_equal(g, 20);
  loom_graph_destroy(g);
}

/* Under a limit of half the scores, the rewrite fuses the graph (the chunk rewrite then cuts
 * nothing), and the measured peak is the operands and the result, within the limit. */
TEST(peak_stays_under_a_small_limit) {
  enum { N = 1024, D = 64 };
  const int64_t limit = 2 << 20; /* the scores alone are 4 MiB */
  loom_graph *g = attention('m', N, N, D, D, "f32"), *opt = NULL;
  ASSERT_TRUE(g != NULL);
  loom_rewrite_report rep = {0};
  ASSERT_OK(optimize(g, limit, true, &opt, &rep));
#if LOOM_HAVE_CUDA
  /* A build with CUDA has no fused attention kernel there yet (see cuda_fused.c): a
   * stage placed on cuda0 would run the body op by op and hold the whole scores, so under a
   * limit the rewrite must leave the chain to the chunk rewrite, whatever device runs it. */
  ASSERT_EQ(attention_ops(opt, NULL), 0);
  ASSERT_TRUE(!reported(&rep, "attention"));
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
  return;
#endif
  ASSERT_EQ(attention_ops(opt, NULL), 1);
  ASSERT_TRUE(reported(&rep, "attention"));
  loom_rewrite_report_deinit(&rep);
  loom_tensor in[3], want[1], got[1];
  ASSERT_OK(gt_inputs(g, 5, in));
  ASSERT_OK(gt_run(g, NULL, in, want, 0, NULL));
  double rtol, atol;
  gt_tolerance(LOOM_F32, 20, &rtol, &atol);
  char msg[512];
  loom__meter m;
  ASSERT_OK(gt_run(opt, NULL, in, got, limit, &m));
  ASSERT_TRUE(m.peak <= limit);
  loom_estimate est;
  ASSERT_OK(loom_graph_estimate(opt, NULL, &est));
  ASSERT_EQ(m.peak, est.peak_bytes); /* q, k, v and o: nothing of the scores */
  ASSERT_EQ(est.peak_bytes, 4 * (int64_t)N * D * 4);
  loom_estimate_deinit(&est);
  bool ok = gt_close(&want[0], &got[0], rtol, atol, msg, sizeof msg);
  gt_tensors_free(got, 1);
  if (!ok) loom_test_fail(__FILE__, __LINE__, "cpu0 under %lld bytes: %s", (long long)limit, msg);
  int32_t nd = gt_device_count(LOOM_BACKEND_OPENCL);
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (ok && nd > 0) nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  for (int32_t k = 0; ok && k < nd; k++) {
    ASSERT_OK(gt_run(opt, devs[k], in, got, limit, &m));
    ASSERT_TRUE(m.peak <= limit);
    ok = gt_close(&want[0], &got[0], rtol, atol, msg, sizeof msg);
    gt_tensors_free(got, 1);
    if (!ok)
      loom_test_fail(__FILE__, __LINE__, "%s under %lld bytes: %s", devs[k]->id, (long long)limit, msg);
  }
  gt_tensors_free(want, 1);
  gt_tensors_free(in, 3);
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
}

/* Where even the operands and the result pass the limit, the fused op could not be placed:
 * the rewrite leaves the chain for the chunk rewrite to cut. */
TEST(rewrite_yields_to_chunk_under_a_tiny_limit) {
  loom_graph *g = attention('m', 256, 256, 64, 64, "f32"), *opt = NULL;
  ASSERT_TRUE(g != NULL);
  loom_rewrite_report rep = {0};
  ASSERT_OK(optimize(g, 160 << 10, true, &opt, &rep));
  ASSERT_TRUE(!reported(&rep, "attention"));
  ASSERT_TRUE(reported(&rep, "chunk"));
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
}
