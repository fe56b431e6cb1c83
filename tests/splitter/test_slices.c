/* The slices of a streamed operand the chunk rewrite's loops hold, as
 * loom_graph_optimize_for_runners chooses them (docs/ir-loops.md, Memory): one where every
 * runner is a cpu device (cpu0 reads each slice in place, so the room goes to longer pieces),
 * two where a runner has memory of its own (double buffering), one there too under
 * LOOM_WRITE_AHEAD=0, and what loom_optimize_options.slices says where it is set. */
#include <stdlib.h>

#include "split_util.h"

/* x (4 MiB) read only by one elementwise op and y only returned: both stream, so under 64 KiB
 * a piece holds its slices of x and its piece of y, 4 bytes an element each. */
static const char *const streamed_lir = "graph s(x: f32[1048576]) {\n  y = mul x x\n  return y\n}\n";

/* The graph prepared for one runner on `device` under 64 KiB (opts->slices `slices`): its one
 * loop's slices and piece. */
static void prepare(const char *device, int32_t slices, int32_t *out_slices, int64_t *out_piece) {
  *out_slices = 0;
  *out_piece = 0;
  loom_graph *g = su_parse(streamed_lir), *opt = NULL;
  if (!g) return;
  loom_runner r = {.limit = 64 * 1024};
  snprintf(r.device, sizeof r.device, "%s", device);
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.slices = slices;
  loom_status s = loom_graph_optimize_for_runners(g, &r, 1, &o, &opt, NULL, NULL, 0);
  if (s) loom_test_fail(__FILE__, __LINE__, "%s: %s", device, loom_last_error());
  for (int32_t i = 0; !s && i < loom_graph_op_count(opt); i++)
    if (loom_graph_loop_slices(opt, i)) {
      *out_slices = loom_graph_loop_slices(opt, i);
      loom_graph_loop_get(opt, i, NULL, NULL, out_piece);
    }
  loom_estimate e;
  if (!s && !loom_graph_estimate(opt, NULL, &e)) {
    if (e.peak_bytes > r.limit)
      loom_test_fail(__FILE__, __LINE__, "%s: estimated %lld bytes over the %lld limit", device,
                     (long long)e.peak_bytes, (long long)r.limit);
    loom_estimate_deinit(&e);
  }
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
}

TEST(slices_follow_the_runners) {
  const char *saved = getenv("LOOM_WRITE_AHEAD");
  char keep[16] = "";
  if (saved) snprintf(keep, sizeof keep, "%s", saved);
  unsetenv("LOOM_WRITE_AHEAD");
  int32_t slices;
  int64_t piece, one;
  /* cpu0: one slice of x, so 8 bytes an element: pieces of 8192 */
  prepare("cpu0", 0, &slices, &one);
  ASSERT_EQ(slices, 1);
  ASSERT_EQ(one, 8192);
  prepare("CPU0", 0, &slices, &piece);
  ASSERT_EQ(slices, 1);
  /* a device of its own memory: two slices, 12 bytes an element, so shorter pieces */
  prepare("ocl0", 0, &slices, &piece);
  ASSERT_EQ(slices, 2);
  ASSERT_TRUE(piece < one && piece * 12 <= 64 * 1024 && (piece + 64) * 12 > 64 * 1024);
  prepare("cuda0", 0, &slices, &piece);
  ASSERT_EQ(slices, 2);
  /* the options' choice wins over the runners' */
  prepare("cpu0", 2, &slices, &piece);
  ASSERT_EQ(slices, 2);
  prepare("ocl0", 1, &slices, &piece);
  ASSERT_EQ(slices, 1);
  ASSERT_EQ(piece, one);
  /* without write-ahead nothing overlaps the next slice's copy: one slice */
  setenv("LOOM_WRITE_AHEAD", "0", 1);
  prepare("ocl0", 0, &slices, &piece);
  ASSERT_EQ(slices, 1);
  ASSERT_EQ(piece, one);
  if (saved)
    setenv("LOOM_WRITE_AHEAD", keep, 1);
  else
    unsetenv("LOOM_WRITE_AHEAD");
}

TEST(slices_option_out_of_range) {
  loom_graph *g = su_parse(streamed_lir), *opt = NULL;
  ASSERT_TRUE(g != NULL);
  loom_optimize_options o;
  loom_optimize_options_init(&o);
  o.limit = 64 * 1024;
  o.slices = 3;
  ASSERT_STATUS(loom_graph_optimize(g, &o, &opt, NULL), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STREQ(loom_last_error(),
               "loom_graph_optimize: slices=3: a loop holds 1 or 2 slices of a streamed operand (0: the "
               "default)");
  ASSERT_TRUE(opt == NULL);
  /* loom_graph_optimize alone keeps the default, two */
  o.slices = 0;
  ASSERT_OK(loom_graph_optimize(g, &o, &opt, NULL));
  ASSERT_EQ(loom_graph_loop_slices(opt, 0), LOOM_LOOP_SLICES_DEFAULT);
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
}
