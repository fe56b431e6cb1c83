/* The schedule rewrite, and loom_graph_optimize's options and report: --no-rewrite names,
 * unknown names, bad arguments, failure paths. */
#include <stdlib.h>

#include "loom/testing.h"
#include "rw_util.h"

/* Two independent branches written interleaved: each makes an n x n outer product and sums
 * it, and both products are alive at once unless one branch finishes before the other starts. */
static const char *branches =
    "graph g(ua: f32[1000,1], va: f32[1,1000], ub: f32[1000,1], vb: f32[1,1000]) {\n"
    "  a = dot ua va\n  b = dot ub vb\n"
    "  ra = reduce_sum a axes=[0,1]\n  rb = reduce_sum b axes=[0,1]\n"
    "  r = add ra rb\n  return r\n}\n";

TEST(schedule_lowers_peak_of_two_branches) {
  loom_graph *g = rw_parse(branches), *o = NULL;
  loom_rewrite_report rep = {0};
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(rw_optimize_only(g, "schedule", &o, &rep));
  const loom_rewrite_entry *e = rw_entry(&rep, "schedule");
  ASSERT_TRUE(e != NULL);
  int64_t before = rw_peak(g), after = rw_peak(o);
  ASSERT_TRUE(after < before);
  ASSERT_EQ(e->bytes_saved, before - after);
  ASSERT_EQ(before, 8000 + 3 * 4000000); /* b's inputs, both products, a dot's temporaries */
  ASSERT_EQ(after, 16000 + 2 * 4000000); /* inputs, one product and its temporaries */
  ASSERT_EQ(o->n_ops, g->n_ops);
  ASSERT_STREQ(loom_value_name(o, loom_graph_output_at(o, 0)), "r");
  double worst;
  ASSERT_OK(rw_compare(g, o, 2, 1.0, 1e-5, 1e-4, &worst));
  ASSERT_TRUE(worst <= 1.0);
  /* the measured peak follows the estimate */
  loom_tensor in[4], out;
  loom_run_stats stats;
  loom_context *ctx = NULL;
  ASSERT_OK(rw_random_inputs(o, 1, 1.0, in));
  ASSERT_OK(loom_context_create(NULL, &ctx));
  ASSERT_OK(loom_graph_run(ctx, o, in, 4, &out, 1, &stats));
  ASSERT_TRUE(stats.peak_bytes <= after);
  loom_context_destroy(ctx);
  for (int i = 0; i < 4; i++) loom_tensor_deinit(&in[i]);
  loom_tensor_deinit(&out);
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(g);
  loom_graph_destroy(o);
}

TEST(schedule_keeps_a_good_order) {
  loom_graph *g = rw_parse("graph g(x: f32[1000]) {\n  a = exp x\n  b = sin a\n  c = cos b\n  return c\n}\n"),
             *o = NULL;
  loom_rewrite_report rep = {0};
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(rw_optimize_only(g, "schedule", &o, &rep));
  ASSERT_EQ(rep.count, 0);
  ASSERT_EQ(rw_peak(o), rw_peak(g));
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(g);
  loom_graph_destroy(o);
}

TEST(schedule_deep_chain_and_wide_graph) {
  /* 20000 ops deep: the depth-first walk must not recurse */
  size_t cap = 64 + 20000 * 32;
  char *text = malloc(cap);
  ASSERT_TRUE(text != NULL);
  size_t len = (size_t)snprintf(text, cap, "graph g(x: f32[4]) {\n  v0 = exp x\n");
  for (int i = 1; i < 20000; i++)
    len += (size_t)snprintf(text + len, cap - len, "  v%d = sin v%d\n", i, i - 1);
  snprintf(text + len, cap - len, "  return v19999\n}\n");
  loom_graph *g = rw_parse(text), *o = NULL;
  free(text);
  ASSERT_TRUE(g != NULL);
  ASSERT_OK(rw_optimize_only(g, "schedule", &o, NULL));
  ASSERT_EQ(o->n_ops, 20000);
  loom_graph_destroy(g);
  loom_graph_destroy(o);
}

/* ---- options and report ------------------------------------------------------------------ */

TEST(optimize_disabled_names) {
  loom_graph *g = rw_parse(branches), *o = NULL;
  ASSERT_TRUE(g != NULL);
  loom_rewrite_report rep = {0};
  const char *off[] = {"schedule", "fuse"}; /* fuse would fuse the branches' chains */
  loom_optimize_options opts;
  loom_optimize_options_init(&opts);
  opts.disabled = off;
  opts.n_disabled = 2;
  ASSERT_OK(loom_graph_optimize(g, &opts, &o, &rep));
  ASSERT_EQ(rep.count, 0);
  ASSERT_EQ(rw_peak(o), rw_peak(g));
  loom_graph_destroy(o);
  /* enabled: applied, and every entry names a known rewrite */
  ASSERT_OK(loom_graph_optimize(g, NULL, &o, &rep));
  ASSERT_EQ(rw_count_entries(&rep, "schedule"), 1);
  static const char *const names[] = {LOOM_REWRITE_NAMES};
  for (int32_t i = 0; i < rep.count; i++) {
    bool known = false;
    for (int k = 0; k < (int)(sizeof names / sizeof names[0]); k++)
      known |= strcmp(names[k], rep.entries[i].name) == 0;
    ASSERT_TRUE(known);
  }
  loom_rewrite_report_deinit(&rep);
  loom_graph_destroy(o);
  loom_graph_destroy(g);
}

TEST(optimize_bad_arguments) {
  loom_graph *g = rw_parse(branches), *o = NULL;
  ASSERT_TRUE(g != NULL);
  loom_optimize_options opts;
  loom_optimize_options_init(&opts);
  const char *off[] = {"distance", "no_such_rewrite"};
  opts.disabled = off;
  opts.n_disabled = 2;
  ASSERT_STATUS(loom_graph_optimize(g, &opts, &o, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "no_such_rewrite");
  ASSERT_TRUE(o == NULL);
  loom_optimize_options_init(&opts);
  opts.limit = -1;
  ASSERT_STATUS(loom_graph_optimize(g, &opts, &o, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_graph_optimize(g, NULL, NULL, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_graph_optimize(NULL, NULL, &o, NULL), LOOM_ERR_INVALID_ARGUMENT);
  loom_graph *open = NULL; /* no return: does not verify */
  ASSERT_OK(loom_graph_create("open", &open));
  ASSERT_STATUS(loom_graph_optimize(open, NULL, &o, NULL), LOOM_ERR_INVALID_ARGUMENT);
  loom_graph_destroy(open);
  loom_graph_destroy(g);
  loom_rewrite_report_deinit(NULL);
  loom_optimize_options_init(NULL);
}

/* Every allocation failure on the way out of loom_graph_optimize frees what it took and
 * leaves no output and no report entries. */
TEST(optimize_allocation_failures) {
  loom_graph *g = rw_parse(
      "graph g(x: f32[40,3], y: f32[30,3], s: f32[]) {\n"
      "  xe = reshape x shape=[40,1,3]\n  ye = reshape y shape=[1,30,3]\n"
      "  diff = sub xe ye\n  sq = mul diff diff\n  d2 = reduce_sum sq axes=[2]\n"
      "  e = add d2 s\n  return e\n}\n");
  ASSERT_TRUE(g != NULL);
  loom_test_sweep sw;
  SWEEP_ALLOCATIONS(&sw, 0, 100000) {
    loom_graph *o = NULL;
    loom_rewrite_report rep = {0};
    if (SWEEP_RUN(&sw, loom_graph_optimize(g, NULL, &o, &rep)) == LOOM_OK) {
      ASSERT_TRUE(rw_entry(&rep, "distance") != NULL);
    } else {
      ASSERT_TRUE(o == NULL);
      ASSERT_EQ(rep.count, 0);
    }
    loom_graph_destroy(o);
    loom_rewrite_report_deinit(&rep);
  }
  ASSERT_TRUE(sw.failures > 10);
  loom_graph_destroy(g);
}
