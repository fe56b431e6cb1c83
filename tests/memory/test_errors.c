/* Graphs that cannot fit: an op over the limit that no chunking can cut is OUT_OF_MEMORY from
 * loom_graph_optimize with a limit and from loom_plan_split_by_memory (alone or after
 * loom_graph_optimize_for_runners), naming the op, its need and the limit; nothing is left allocated. */
#include "loom/testing.h"
#include "mem_util.h"

/* An FFT along its only axis cannot be cut: 3 MiB in, 3 MiB out and 6 MiB of temporaries. */
static const char *fft_text =
    "graph spectrum3(x: c64[393216]) {\n"
    "  f = fft x axis=0                           : c64[393216]\n"
    "  return f\n"
    "}\n";

#define FFT_NEED "fft 'f' needs 12.00 MiB"

TEST(fft_over_the_limit_is_out_of_memory_everywhere) {
  loom_graph *g = MEM_PARSE(fft_text);
  ASSERT_TRUE(g != NULL);
  loom_runner r = {"cpu0", 4 * MIB};
  int64_t live = loom_testing_live_allocations();

  loom_plan *plan = NULL;
  ASSERT_STATUS(loom_plan_split_by_memory(g, &r, 1, &plan), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_TRUE(plan == NULL);
  printf("    split_by_memory: %s\n", loom_last_error());
  ASSERT_CONTAINS(loom_last_error(), FFT_NEED);
  ASSERT_CONTAINS(loom_last_error(), "4.00 MiB");

  /* The pipeline loom-run takes: optimize for the runners (which may leave the op whole for
   * the splitter to refuse), then split. */
  loom_graph *opt = NULL;
  loom_rewrite_report report = {0};
  char note[256];
  loom_status st = loom_graph_optimize_for_runners(g, &r, 1, NULL, &opt, &report, note, sizeof note);
  if (!st) st = loom_plan_split_by_memory(opt, &r, 1, &plan);
  ASSERT_STATUS(st, LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_TRUE(plan == NULL);
  printf("    optimize_for_runners + split_by_memory: %s\n", loom_last_error());
  ASSERT_CONTAINS(loom_last_error(), FFT_NEED);
  ASSERT_CONTAINS(loom_last_error(), "4.00 MiB");
  loom_graph_destroy(opt);
  opt = NULL;
  loom_rewrite_report_deinit(&report);

  loom_optimize_options opts;
  loom_optimize_options_init(&opts);
  opts.limit = 4 * MIB;
  ASSERT_STATUS(loom_graph_optimize(g, &opts, &opt, NULL), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_TRUE(opt == NULL);
  printf("    optimize: %s\n", loom_last_error());
  ASSERT_CONTAINS(loom_last_error(), FFT_NEED);
  ASSERT_CONTAINS(loom_last_error(), "4.00 MiB");

  ASSERT_EQ(loom_testing_live_allocations(), live);
  loom_graph_destroy(g);
}

/* Several runners: the message names the largest limit. */
TEST(fft_over_every_runner_names_the_largest_limit) {
  loom_graph *g = MEM_PARSE(fft_text);
  ASSERT_TRUE(g != NULL);
  loom_runner r[3] = {{"cpu0", 4 * MIB}, {"cpu0", 10 * MIB}, {"cpu0", 6 * MIB}};
  loom_plan *plan = NULL;
  ASSERT_STATUS(loom_plan_split_by_memory(g, r, 3, &plan), LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_CONTAINS(loom_last_error(), FFT_NEED);
  ASSERT_CONTAINS(loom_last_error(), "10.00 MiB");
  loom_graph *opt = NULL;
  loom_status st = loom_graph_optimize_for_runners(g, r, 3, NULL, &opt, NULL, NULL, 0);
  if (!st) st = loom_plan_split_by_memory(opt, r, 3, &plan);
  loom_graph_destroy(opt);
  ASSERT_STATUS(st, LOOM_ERR_OUT_OF_MEMORY);
  ASSERT_CONTAINS(loom_last_error(), FFT_NEED);
  ASSERT_CONTAINS(loom_last_error(), "10.00 MiB");
  /* At 12 MiB it fits as it is, in one stage. */
  r[1].limit = 12 * MIB;
  ASSERT_OK(loom_plan_split_by_memory(g, r, 3, &plan));
  ASSERT_EQ(loom_plan_stage_count(plan), 1);
  loom_stage_info info;
  ASSERT_OK(loom_plan_stage(plan, 0, &info));
  ASSERT_EQ(info.runner, 1);
  ASSERT_EQ(info.estimated_peak, 12 * MIB);
  loom_plan_destroy(plan);
  loom_graph_destroy(g);
}

/* log-sum-exp of a 4 MiB row under 4 MiB: the input alone fills the limit, and anything on
 * top of it (the 4-byte maximum) passes it. */
TEST(log_sum_exp_of_a_4_mib_row_does_not_fit_4_mib) {
  loom_graph *g = MEM_PARSE(
      "graph lse(x: f32[1,1048576]) {\n"
      "  m = reduce_max x axes=[1] keepdims=true\n  d = sub x m\n  e = exp d\n"
      "  s = reduce_sum e axes=[1] keepdims=true\n  l = log s\n  r = add m l\n  return r\n}\n");
  ASSERT_TRUE(g != NULL);
  loom_runner r = {"cpu0", 4 * MIB};
  int64_t live = loom_testing_live_allocations();
  loom_graph *opt = NULL;
  loom_status s = loom_graph_optimize_for_runners(g, &r, 1, NULL, &opt, NULL, NULL, 0);
  loom_plan *plan = NULL;
  if (!s) s = loom_plan_split_by_memory(opt, &r, 1, &plan);
  ASSERT_STATUS(s, LOOM_ERR_OUT_OF_MEMORY);
  printf("    %s\n", loom_last_error());
  ASSERT_CONTAINS(loom_last_error(), "the largest limit is 4194304 B"); /* bytes: the need is that close */
  loom_graph_destroy(opt);
  ASSERT_EQ(loom_testing_live_allocations(), live);
  loom_graph_destroy(g);
}
