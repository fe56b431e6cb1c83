/* The fuse rewrite (docs/ir-fusion.md, "The pass"): which regions become one fused op (the
 * kernel matrix-vector product and kNN regions whole, a small dot inside, values read outside
 * kept outside, single ops left alone), inside loop bodies after chunk, what it reports, and
 * that the fused graph computes what the unfused one does (run here through the executor's
 * op-by-op run of a fused body). */
#include <stdlib.h>
#include <string.h>

#include "ir/passes.h"
#include "loom/testing.h"
#include "rw_util.h"

static const loom__op *first_fused(const loom_graph *g) {
  for (int32_t i = 0; i < g->n_ops; i++)
    if (g->ops[i].fused) return &g->ops[i];
  return NULL;
}

/* Ops of g's fused bodies (all levels, loops' bodies too) of `kind`. */
static int count_in_bodies(const loom_graph *g, loom_op kind) {
  int n = 0;
  for (int32_t i = 0; i < g->n_ops; i++) {
    if (g->ops[i].fused) n += rw_count_ops(g->ops[i].fused, kind);
    if (g->ops[i].loop) n += count_in_bodies(g->ops[i].loop->body, kind);
  }
  return n;
}

static int count_fused(const loom_graph *g) {
  int n = 0;
  for (int32_t i = 0; i < g->n_ops; i++) {
    n += g->ops[i].fused != NULL;
    if (g->ops[i].loop) n += count_fused(g->ops[i].loop->body);
  }
  return n;
}

static loom_status optimize(const loom_graph *g, int64_t limit, bool fuse, loom_graph **out,
                            loom_rewrite_report *rep) {
  const char *off[] = {"fuse"};
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.limit = limit;
  /* under a limit the distance rewrite would keep kNN's direct form at d = 3 or 4: these tests
   * are about the expanded form's regions (its small dot inside); test_distance_exact.c has
   * the direct form's */
  o.distance_form = LOOM_DISTANCE_EXPANDED;
  o.disabled = fuse ? NULL : off;
  o.n_disabled = fuse ? 0 : 1;
  return loom_graph_optimize(g, &o, out, rep);
}

/* examples/kernel_mv.lir, smaller */
static const char kmv[] =
    "graph kernel_mv(x: f32[600,4], z: f32[50,4], y: f32[600]) {\n"
    "  xe = reshape x shape=[600,1,4]\n  ze = reshape z shape=[1,50,4]\n  diff = sub xe ze\n"
    "  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n  half = constant 0.5 : f32[]\n"
    "  e = mul d2 half\n  ne = neg e\n  k = exp ne\n  kt = transpose k perm=[1,0]\n"
    "  out = dot kt y\n  return out\n}\n";

/* examples/knn.lir, smaller */
static const char knn[] =
    "graph knn(x: f32[300,3], y: f32[400,3]) {\n"
    "  xe = reshape x shape=[300,1,3]\n  ye = reshape y shape=[1,400,3]\n  diff = sub xe ye\n"
    "  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n"
    "  val, idx = topk d2 k=5 axis=1 largest=false\n  return val, idx\n}\n";

/* The fused and unfused graphs give the same results up to the order of their sums: the
 * matrix-vector dot adds 600 terms of magnitude at most 1 in another order (and another in each
 * thread count: OpenBLAS splits it by cores), which moves a result by up to n u = 3.6e-5
 * absolutely; atol 3e-5 allows that, which an error in the fused body (a wrong operand, a lost
 * block) far exceeds. */
static void check_same(const loom_graph *fused, const loom_graph *plain) {
  double worst = 0;
  ASSERT_OK(rw_compare(plain, fused, 11, 1.0, 3e-5, 1e-5, &worst));
  ASSERT_TRUE(worst <= 1.0);
}

TEST(fuse_kernel_mv_region_is_one_fused_op) {
  loom_graph *g = rw_parse(kmv), *f = NULL, *u = NULL;
  ASSERT_TRUE(g != NULL);
  loom_rewrite_report rep = {0};
  ASSERT_OK(optimize(g, 0, true, &f, &rep));
  ASSERT_OK(optimize(g, 0, false, &u, NULL));
  /* the kernel region ends the graph: the dot became the body's mul and reduce_sum over the
   * transposed axis, the pairwise dot (k = 4) inside, no exp or dot left outside */
  const loom__op *last = &f->ops[f->n_ops - 1];
  ASSERT_TRUE(last->fused != NULL);
  ASSERT_EQ(rw_count_ops(last->fused, LOOM_OP_EXP), 1);
  ASSERT_EQ(rw_count_ops(last->fused, LOOM_OP_DOT), 1);
  ASSERT_EQ(rw_count_ops(last->fused, LOOM_OP_REDUCE_SUM), 1);
  ASSERT_EQ(last->fused->ops[last->fused->n_ops - 1].attrs.axes.v[0], 0);
  ASSERT_EQ(rw_count_ops(f, LOOM_OP_EXP), 0);
  ASSERT_EQ(rw_count_ops(f, LOOM_OP_DOT), 0);
  ASSERT_OK(loom__fused_check(last->fused));
  /* reported: its ops, inputs and result, and the n x m intermediates it saves */
  const loom_rewrite_entry *e = rw_entry(&rep, "fuse");
  ASSERT_TRUE(e != NULL);
  ASSERT_CONTAINS(e->detail, "(dot add add maximum mul neg exp dot), inputs ");
  ASSERT_CONTAINS(e->detail, "-> fused 'out' f32[50]");
  ASSERT_TRUE(e->bytes_saved >= 600 * 50 * 4);
  ASSERT_TRUE(rw_peak(f) < rw_peak(u));
  check_same(f, u);
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(f);
  loom_graph_destroy(u);
  loom_graph_destroy(g);
}

TEST(fuse_knn_region_holds_the_small_dot_and_topk) {
  loom_graph *g = rw_parse(knn), *f = NULL, *u = NULL;
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(optimize(g, 0, true, &f, NULL));
  ASSERT_OK(optimize(g, 0, false, &u, NULL));
  const loom__op *last = &f->ops[f->n_ops - 1];
  ASSERT_TRUE(last->fused != NULL);
  ASSERT_EQ(last->n_outputs, 2);
  ASSERT_EQ(rw_count_ops(last->fused, LOOM_OP_DOT), 1);
  ASSERT_EQ(rw_count_ops(last->fused, LOOM_OP_TOPK), 1);
  ASSERT_EQ(rw_count_ops(f, LOOM_OP_DOT) + rw_count_ops(f, LOOM_OP_TOPK), 0);
  check_same(f, u); /* indices exactly: no ties in random data */
  loom_graph_destroy(f);
  loom_graph_destroy(u);
  loom_graph_destroy(g);
}

TEST(fuse_inside_loop_bodies_after_chunk) {
  const char *texts[] = {kmv, knn};
  for (int t = 0; t < 2; t++) {
    loom_graph *g = rw_parse(texts[t]), *f = NULL, *u = NULL;
    ASSERT_TRUE(g != NULL);
    loom_rewrite_report rep = {0};
    int64_t limit = 160 * 1024;
    ASSERT_OK(optimize(g, limit, true, &f, &rep));
    ASSERT_OK(optimize(g, limit, false, &u, NULL));
    ASSERT_TRUE(rw_entry(&rep, "chunk") != NULL);
    /* the region sits in the chunk's loop, whole: no dot, exp or topk left in the body */
    const loom__op *loop = NULL;
    for (int32_t i = 0; i < f->n_ops; i++)
      if (f->ops[i].loop) loop = &f->ops[i];
    ASSERT_TRUE(loop != NULL);
    const loom_graph *body = loop->loop->body;
    ASSERT_EQ(
        rw_count_ops(body, LOOM_OP_DOT) + rw_count_ops(body, LOOM_OP_TOPK) + rw_count_ops(body, LOOM_OP_EXP),
        0);
    ASSERT_EQ(count_in_bodies(f, LOOM_OP_DOT), 1);
    bool in_body = false;
    for (int32_t i = 0; i < rep.count; i++)
      in_body |= strstr(rep.entries[i].detail, "the body of loop") != NULL;
    ASSERT_TRUE(in_body);
    /* the loop's estimate shrinks, and stays under the limit */
    ASSERT_TRUE(rw_peak(f) < rw_peak(u));
    ASSERT_TRUE(rw_peak(f) <= limit);
    check_same(f, u);
    loom_rewrite_report_deinit(&rep);
    loom_graph_destroy(f);
    loom_graph_destroy(u);
    loom_graph_destroy(g);
  }
}

static bool every_body(const loom_graph *body) {
  (void)body;
  return true;
}
static bool no_body(const loom_graph *body) {
  (void)body;
  return false;
}

static int32_t count_loops(const loom_graph *g) {
  int32_t n = 0;
  for (int32_t i = 0; i < g->n_ops; i++) n += g->ops[i].loop != NULL;
  return n;
}

/* loom_optimize_options.fused_runs: where the fused graph fits the limit, nothing is chunked;
 * where a body would run op by op somewhere (the callback says no), or the fused graph does
 * not fit either, the graph is chunked and then fused as before. */
TEST(fuse_before_chunk_where_the_fused_graph_fits) {
  const char *texts[] = {kmv, knn};
  for (int t = 0; t < 2; t++) {
    loom_graph *g = rw_parse(texts[t]), *f = NULL, *c = NULL, *r = NULL;
    ASSERT_TRUE(g != NULL);
    int64_t limit = 160 * 1024;
    ASSERT_TRUE(rw_peak(g) > limit);
    loom_optimize_options o;
    loom_optimize_options_init(&o);
    o.limit = limit;
    o.fused_runs = every_body;
    loom_rewrite_report rep = {0};
    ASSERT_OK(loom_graph_optimize(g, &o, &f, &rep));
    ASSERT_EQ(count_loops(f), 0);
    ASSERT_TRUE(count_fused(f) >= 1);
    ASSERT_TRUE(rw_peak(f) <= limit);
    const loom_rewrite_entry *e = rw_entry(&rep, "chunk");
    ASSERT_TRUE(e != NULL);
    ASSERT_CONTAINS(e->detail, "nothing cut: fused, the graph's peak falls from ");
    ASSERT_CONTAINS(e->detail, "within the limit 160.00 KiB");
    check_same(f, g);
    loom_rewrite_report_deinit(&rep);
    /* a body some backend runs op by op: chunked first, as without the callback */
    o.fused_runs = no_body;
    ASSERT_OK(loom_graph_optimize(g, &o, &c, &rep));
    ASSERT_EQ(count_loops(c), 1);
    ASSERT_TRUE(strstr(rw_entry(&rep, "chunk")->detail, "nothing cut") == NULL);
    loom_rewrite_report_deinit(&rep);
    /* the runtime's answer: these f32 bodies run fused on every backend */
    o.fused_runs = loom_fused_body_runs_everywhere;
    ASSERT_OK(loom_graph_optimize(g, &o, &r, NULL));
    ASSERT_EQ(count_loops(r), 0);
    for (int32_t i = 0; i < r->n_ops; i++)
      if (r->ops[i].fused) ASSERT_TRUE(loom_fused_body_runs_everywhere(r->ops[i].fused));
    loom_graph_destroy(f);
    loom_graph_destroy(c);
    loom_graph_destroy(r);
    loom_graph_destroy(g);
  }
}

/* A limit the fused graph does not fit either: chunked, then fused inside the loop. */
TEST(fuse_before_chunk_falls_back_to_chunking) {
  loom_graph *g = rw_parse(kmv), *f = NULL;
  ASSERT_TRUE(g != NULL);
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.limit = 24 * 1024; /* the inputs alone are 12.6 KiB, the fused graph needs more */
  o.fused_runs = every_body;
  o.distance_form = LOOM_DISTANCE_EXPANDED; /* the direct form, fused, would fit */
  loom_rewrite_report rep = {0};
  ASSERT_OK(loom_graph_optimize(g, &o, &f, &rep));
  ASSERT_EQ(count_loops(f), 1);
  ASSERT_TRUE(rw_peak(f) <= o.limit);
  check_same(f, g);
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(f);
  loom_graph_destroy(g);
}

/* Complex values are run op by op by the cpu evaluator and the GPU generator: not everywhere. */
TEST(fused_bodies_with_complex_values_do_not_run_everywhere) {
  loom_graph *g = rw_parse(
      "graph g(x: c64[64,32], y: c64[64,32]) {\n  a = mul x x\n  b = add a y\n  m = mul b y\n"
      "  s = reduce_sum m axes=[1]\n  return s\n}\n");
  ASSERT_TRUE(g != NULL);
  loom_graph *f = NULL;
  ASSERT_OK(optimize(g, 0, true, &f, NULL));
  int32_t seen = 0;
  for (int32_t i = 0; i < f->n_ops; i++)
    if (f->ops[i].fused) {
      seen++;
      bool complex = false;
      for (int32_t v = 0; v < f->ops[i].fused->n_values; v++)
        complex |= loom_dtype_is_complex(f->ops[i].fused->values[v].type.dtype);
      ASSERT_EQ(loom_fused_body_runs_everywhere(f->ops[i].fused), !complex);
    }
  ASSERT_TRUE(seen >= 1);
  loom_graph_destroy(f);
  loom_graph_destroy(g);
}

TEST(fuse_values_read_outside_stay_outside) {
  /* e is returned, so it stays a value of the graph and an operand of the region after it */
  loom_graph *g = rw_parse(
      "graph g(x: f32[64,32]) {\n  a = neg x\n  e = exp a\n  m = mul e e\n  s = reduce_sum m axes=[1]\n"
      "  return s, e\n}\n");
  loom_graph *f = NULL;
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(optimize(g, 0, true, &f, NULL));
  ASSERT_EQ(count_fused(f), 2);
  ASSERT_EQ(rw_count_ops(f, LOOM_OP_REDUCE_SUM) + rw_count_ops(f, LOOM_OP_MUL), 0);
  /* e = exp(neg x) is an elementwise region of its own; the reduction's region reads it */
  const loom__op *red = &f->ops[f->n_ops - 1];
  ASSERT_TRUE(red->fused && red->n_inputs == 1);
  ASSERT_EQ(rw_count_ops(red->fused, LOOM_OP_EXP), 0);
  check_same(f, g);
  loom_graph_destroy(f);
  loom_graph_destroy(g);
}

TEST(fuse_leaves_single_ops_and_is_disabled_by_name) {
  loom_graph *g = rw_parse(
      "graph g(x: f32[64,32], y: f32[32,8]) {\n  s = reduce_sum x axes=[1]\n  n = neg x\n  d = dot n y\n"
      "  return s, d\n}\n");
  loom_graph *f = NULL;
  ASSERT_TRUE(g != NULL);
  loom_rewrite_report rep = {0};
  ASSERT_OK(optimize(g, 0, true, &f, &rep));
  /* a reduction of an input, one elementwise op, and a dot of k = 32: nothing to fuse */
  ASSERT_EQ(count_fused(f), 0);
  ASSERT_TRUE(rw_entry(&rep, "fuse") == NULL);
  loom_graph_destroy(f);
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(g);
  g = rw_parse(kmv);
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(optimize(g, 0, false, &f, &rep));
  ASSERT_EQ(count_fused(f), 0);
  ASSERT_TRUE(rw_entry(&rep, "fuse") == NULL);
  loom_graph_destroy(f);
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(g);
}

TEST(fuse_elementwise_chain_and_argmax) {
  loom_graph *g = rw_parse(
      "graph g(x: f32[40,30], b: f32[30]) {\n  a = add x b\n  t = tanh a\n  two = fill value=2.0 : f32[]\n"
      "  m = mul t two\n  i = argmax m axis=0\n  c = sigmoid x\n  d = sub c x\n  return i, d\n}\n");
  loom_graph *f = NULL;
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(optimize(g, 0, true, &f, NULL));
  ASSERT_EQ(count_fused(f), 2); /* add tanh mul argmax; sigmoid sub */
  ASSERT_EQ(rw_count_ops(f, LOOM_OP_ARGMAX) + rw_count_ops(f, LOOM_OP_SUB), 0);
  for (int32_t i = 0; i < f->n_ops; i++)
    if (f->ops[i].fused) ASSERT_OK(loom__fused_check(f->ops[i].fused));
  check_same(f, g);
  loom_graph_destroy(f);
  loom_graph_destroy(g);
}

/* An elementwise region is fused only where its cost says it runs faster (region_cost): two
 * adds on f32[16] cost more fused than the executor's two dispatches, 20 do not; on f32[2^20]
 * the plain kernels stream adds faster than the evaluator runs them, so neither is fused. */
static loom_graph *add_chain(int32_t ops, int64_t size) {
  char text[4096];
  int len = snprintf(text, sizeof text, "graph c(x: f32[%lld], y: f32[%lld]) {\n  v0 = add x y\n",
                     (long long)size, (long long)size);
  for (int32_t i = 1; i < ops; i++)
    len += snprintf(text + len, sizeof text - (size_t)len, "  v%d = add v%d y\n", i, i - 1);
  snprintf(text + len, sizeof text - (size_t)len, "  return v%d\n}\n", ops - 1);
  return rw_parse(text);
}

TEST(fuse_only_what_pays) {
  static const struct {
    int32_t ops;
    int64_t size;
    int fused;
  } cases[] = {{2, 16, 0}, {20, 16, 1}, {2, 1 << 20, 0}, {20, 1 << 20, 0}};
  for (int i = 0; i < LOOM_ARRAY_SIZE(cases); i++) {
    loom_graph *g = add_chain(cases[i].ops, cases[i].size), *f = NULL;
    ASSERT_TRUE(g != NULL);
    ASSERT_OK(optimize(g, 0, true, &f, NULL));
    ASSERT_EQ(count_fused(f), cases[i].fused);
    if (cases[i].size == 16) check_same(f, g);
    loom_graph_destroy(f);
    loom_graph_destroy(g);
  }
}

TEST(fuse_round_trips_as_text) {
  loom_graph *g = rw_parse(knn), *f = NULL, *back = NULL;
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(optimize(g, 64 * 1024, true, &f, NULL));
  ASSERT_TRUE(first_fused(f) != NULL || count_fused(f) > 0);
  char *a = NULL, *b = NULL;
  ASSERT_OK(loom_graph_to_string(f, &a));
  ASSERT_OK(loom_graph_parse(a, strlen(a), "fused.lir", &back));
  ASSERT_OK(loom_graph_to_string(back, &b));
  ASSERT_STREQ(b, a);
  free(a);
  free(b);
  loom_graph_destroy(back);
  loom_graph_destroy(f);
  loom_graph_destroy(g);
}

TEST(fuse_allocation_failures) {
  /* the fuse rewrite alone on kernel_mv chunked under a limit: the loop body fused, the norms at
   * the top. (A sweep through the whole pipeline also fails the chunk rewrite's allocations,
   * some of which it survives with another cut that the fused loop then refuses to rebuild:
   * see the report of issue 14.) */
  loom_graph *g = rw_parse(kmv), *c = NULL;
  ASSERT_TRUE(g != NULL);
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.limit = 160 * 1024;
  const char *off[] = {"fuse"};
  o.disabled = off;
  o.n_disabled = 1;
  ASSERT_OK(loom_graph_optimize(g, &o, &c, NULL));
  loom_test_sweep sw;
  SWEEP_ALLOCATIONS(&sw, 0, 1000000) {
    loom_graph *f = NULL;
    loom_rewrite_report rep = {0};
    if (SWEEP_RUN(&sw, loom__rewrite_fuse(c, NULL, &f, &rep)) == LOOM_OK) {
      ASSERT_TRUE(count_fused(f) >= 2);
    } else {
      ASSERT_TRUE(f == NULL);
    }
    loom_graph_destroy(f);
    loom_rewrite_report_deinit(&rep);
  }
  ASSERT_TRUE(sw.failures > 10);
  loom_graph_destroy(c);
  loom_graph_destroy(g);
}

/* A value nobody reads (dead code, as ONNX's IsInf lowering leaves one) joins no region: it once
 * joined the region beside it, whose body then failed its check ("eq 'v2': its result is never
 * read") and the whole graph could not be planned under a limit. */
TEST(fuse_leaves_a_value_nobody_reads_outside) {
  static const char text[] =
      "graph dead(x: f32[64,32]) {\n"
      "  one = constant 1 : f32[]\n"
      "  unread = add x one\n"
      "  two = constant 2 : f32[]\n"
      "  m = mul x two\n"
      "  e = exp m\n"
      "  s = reduce_sum e axes=[1]\n"
      "  return s\n}\n";
  loom_graph *g = rw_parse(text), *opt = NULL;
  ASSERT_TRUE(g != NULL);
  loom_rewrite_report rep = {0};
  ASSERT_OK(optimize(g, 0, true, &opt, &rep));
  ASSERT_EQ(count_fused(opt), 1);
  ASSERT_EQ(count_in_bodies(opt, LOOM_OP_ADD), 0);
  ASSERT_EQ(count_in_bodies(opt, LOOM_OP_EXP), 1);
  check_same(opt, g);
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
}
