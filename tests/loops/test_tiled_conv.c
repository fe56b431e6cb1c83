/* Tiled convolutions (docs/ir-loops.md "Windows"): the chunk rewrite cuts a conv along a
 * spatial axis of its output, each piece reading the window of its receptive fields (the halo
 * the kernel needs, the padding only at the input's true ends). For conv 1-D and 2-D, stride 1
 * and 2, padding same and valid, dilation 2, odd sizes whose last tile is shorter, under limits
 * that force two to many tiles: the rewritten graph holds a windowed loop, its estimate stays
 * under the limit, the run's meter peak equals that estimate, and the results equal the
 * unlimited run's (computed without any loop) within the dtype's tolerance. Each rewritten
 * graph also round-trips through its text. On cpu0 and on every OpenCL device (where a streamed
 * x has its windows written in from the caller's tensor, one run per channel, with the
 * padding's zeros; an x held whole gives the tiles that read padding a copy of their window). */
#include <stdlib.h>
#include <string.h>

#include "gpu_util.h"
#include "ir/ir.h"

typedef struct conv_case {
  const char *name;
  const char *lir;
  double fractions[3]; /* limits as fractions of the unlimited peak (0: none) */
  bool streamed;       /* x is read only by the tiles: its windows are streamed */
} conv_case;

static const conv_case cases[] = {
    {"1-D, one channel, stride 1, padding same, 37 long (streamed in and out)",
     "graph c(x: f32[1,1,37], w: f32[1,1,3]) {\n y = conv x w padding=[1]\n return y\n}",
     {0.9, 0.5, 0.2},
     true},
    {"1-D, stride 2, padding valid, kernel 4, 41 long",
     "graph c(x: f32[1,1,41], w: f32[1,1,4]) {\n y = conv x w stride=[2]\n return y\n}",
     {0.9, 0.5, 0.2},
     true},
    {"1-D, three channels in and five out, dilation 2, padding same, then a relu (x held: also returned)",
     "graph c(x: f32[1,3,53], w: f32[5,3,3]) {\n y = conv x w padding=[2] dilation=[2]\n z = relu y\n"
     " return z, x\n}",
     {0.95, 0.8, 0.7},
     false},
    {"1-D, stride 2, dilation 2, padding 1, 41 long (pieces read padding at one end only)",
     "graph c(x: f32[1,1,41], w: f32[1,1,3]) {\n y = conv x w stride=[2] padding=[1] dilation=[2]\n"
     " return y\n}",
     {0.9, 0.5, 0.25},
     true},
    {"2-D, two channels in and three out, padding same, 19 x 13 (x streamed, two runs a window)",
     "graph c(x: f32[1,2,19,13], w: f32[3,2,3,3]) {\n y = conv x w padding=[1,1]\n return y\n}",
     {0.95, 0.6, 0.42},
     true},
    {"2-D, a batch of two, three channels in and two out, stride 2, padding same, 15 x 9",
     "graph c(x: f32[2,3,15,9], w: f32[2,3,3,3]) {\n y = conv x w stride=[2,2] padding=[1,1]\n return y\n}",
     {0.7, 0.6, 0.45},
     true},
    {"2-D, one channel, stride 2, dilation 2, padding 2, 23 x 17 (streamed)",
     "graph c(x: f32[1,1,23,17], w: f32[1,1,3,3]) {\n y = conv x w stride=[2,2] padding=[2,2] "
     "dilation=[2,2]\n return y\n}",
     {0.9, 0.5, 0.35},
     true},
    {"2-D, a chain: conv, relu, conv (the first conv and the relu tiled together, then the second)",
     "graph c(x: f32[1,2,21,11], w1: f32[4,2,3,3], w2: f32[2,4,3,3]) {\n h = conv x w1 padding=[1,1]\n"
     " r = relu h\n y = conv r w2 padding=[1,1]\n return y\n}",
     {0.8, 0.6, 0.5},
     true},
    {"2-D f64, one channel in and four out, stride 2, padding valid, 21 x 11",
     "graph c(x: f64[1,1,21,11], w: f64[4,1,3,2]) {\n y = conv x w stride=[2,1]\n return y\n}",
     {0.9, 0.6, 0.4},
     true},
};

/* The loop the rewrite made, reading x (the graph's parameter 0) through a window; NULL when
 * it made none. */
static const loom__op *window_loop(const loom_graph *g) {
  for (int32_t o = 0; o < g->n_ops; o++) {
    const loom__op *op = &g->ops[o];
    if (!op->loop) continue;
    for (int32_t i = 0; i < op->n_inputs; i++)
      if (op->inputs[i] == g->params[0] && loom__loop_windowed(&op->loop->rules[i])) return op;
  }
  return NULL;
}

/* Case c under a limit of `fraction` of its unlimited peak, on dev (NULL: cpu0), against want. */
static void check_limit(const conv_case *c, const loom__exec_device *dev, const loom_graph *g,
                        const loom_tensor *in, const loom_tensor *want, int32_t n_out, int64_t peak,
                        double fraction) {
  const char *where = dev ? dev->id : "cpu0";
  int64_t limit = (int64_t)((double)peak * fraction);
  loom_optimize_options opts;
  loom_optimize_options_init(&opts);
  opts.limit = limit;
  loom_graph *tiled = NULL;
  loom_status s = loom_graph_optimize(g, &opts, &tiled, NULL);
  if (s) {
    loom_test_fail(__FILE__, __LINE__, "%s under %lld bytes: %s", c->name, (long long)limit,
                   loom_last_error());
    return;
  }
  const loom__op *op = window_loop(tiled);
  loom_estimate e = {0};
  loom_tensor got[2];
  loom__meter m;
  bool ran = false;
  if (!op) {
    loom_test_fail(__FILE__, __LINE__, "%s under %lld bytes: no loop reads x through a window", c->name,
                   (long long)limit);
    goto done;
  }
  if (loom__loop_trips(op->loop) < 2)
    loom_test_fail(__FILE__, __LINE__, "%s under %lld bytes: %lld tile", c->name, (long long)limit,
                   (long long)loom__loop_trips(op->loop));
  if (loom__value_streamed(tiled, tiled->params[0]) != c->streamed)
    loom_test_fail(__FILE__, __LINE__, "%s: x is%s streamed", c->name, c->streamed ? " not" : "");
  if ((s = loom_graph_estimate(tiled, NULL, &e))) {
    loom_test_fail(__FILE__, __LINE__, "%s: %s", c->name, loom_last_error());
    goto done;
  }
  if (e.peak_bytes > limit)
    loom_test_fail(__FILE__, __LINE__, "%s: estimated peak %lld over the limit %lld", c->name,
                   (long long)e.peak_bytes, (long long)limit);
  s = gt_run(tiled, dev, in, got, limit, &m);
  if (s) {
    loom_test_fail(__FILE__, __LINE__, "%s on %s under %lld bytes: %s", c->name, where, (long long)limit,
                   loom_last_error());
    goto done;
  }
  ran = true;
  if (m.peak != e.peak_bytes || m.peak > limit)
    loom_test_fail(__FILE__, __LINE__, "%s on %s: measured peak %lld, estimated %lld, limit %lld", c->name,
                   where, (long long)m.peak, (long long)e.peak_bytes, (long long)limit);
  double rtol, atol;
  char msg[512];
  for (int32_t k = 0; k < n_out; k++) {
    gt_tolerance(want[k].type.dtype, 10, &rtol, &atol);
    if (!gt_close(&want[k], &got[k], rtol, atol, msg, sizeof msg))
      loom_test_fail(__FILE__, __LINE__, "%s on %s in %lld tiles, output %d: %s", c->name, where,
                     (long long)loom__loop_trips(op->loop), (int)k, msg);
  }
  if (!dev) { /* the loop's text once */
    char *text = NULL, *again = NULL;
    loom_graph *back = NULL;
    s = loom_graph_to_string(tiled, &text);
    if (!s) s = loom_graph_parse(text, strlen(text), "tiled.lir", &back);
    if (!s) s = loom_graph_to_string(back, &again);
    if (s || strcmp(text, again) != 0)
      loom_test_fail(__FILE__, __LINE__, "%s: the tiled graph does not round-trip: %s\n%s", c->name,
                     s ? loom_last_error() : "the prints differ", text ? text : "");
    free(text);
    free(again);
    loom_graph_destroy(back);
  }
done:
  if (ran) gt_tensors_free(got, n_out);
  loom_estimate_deinit(&e);
  loom_graph_destroy(tiled);
}

static void check_case(const conv_case *c, const loom__exec_device *dev) {
  loom_graph *g = gt_parse("%s", c->lir);
  ASSERT_TRUE(g != NULL);
  loom_tensor in[3], want[2];
  int32_t n_out = loom_graph_output_count(g);
  ASSERT_OK(gt_inputs(g, 11, in));
  ASSERT_OK(gt_run(g, NULL, in, want, 0, NULL));
  loom_estimate e;
  ASSERT_OK(loom_graph_estimate(g, NULL, &e));
  for (int32_t k = 0; k < 3 && c->fractions[k] > 0 && !loom_test_failed(); k++)
    check_limit(c, dev, g, in, want, n_out, e.peak_bytes, c->fractions[k]);
  loom_estimate_deinit(&e);
  gt_tensors_free(want, n_out);
  gt_tensors_free(in, loom_graph_param_count(g));
  loom_graph_destroy(g);
}

TEST(tiled_conv_equals_untiled_on_cpu0) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0] && !loom_test_failed(); i++)
    check_case(&cases[i], NULL);
}

TEST(tiled_conv_equals_untiled_on_opencl) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  for (int32_t d = 0; d < nd && !loom_test_failed(); d++)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] && !loom_test_failed(); i++)
      check_case(&cases[i], devs[d]);
}

/* Input and output four times the limit each: x (one image, `channels` channels) streamed in
 * windows, one run of rows per channel, y streamed out tile by tile the same way, so neither is
 * ever held whole; the meter's peak equals the estimate, under the limit. */
static void check_stream(const loom__exec_device *dev, int64_t channels) {
  const char *where = dev ? dev->id : "cpu0";
  int64_t side = channels == 1 ? 256 : 128; /* x and y hold 256 KiB each */
  loom_graph *g = gt_parse(
      "graph big(x: f32[1,%lld,%lld,%lld], w: f32[%lld,%lld,5,5]) {\n"
      " y = conv x w padding=[2,2]\n return y\n}",
      (long long)channels, (long long)side, (long long)side, (long long)channels, (long long)channels);
  ASSERT_TRUE(g != NULL);
  loom_tensor in[2], want, got;
  ASSERT_OK(gt_inputs(g, 5, in));
  ASSERT_OK(gt_run(g, NULL, in, &want, 0, NULL));
  const int64_t limit = 64 * 1024;
  loom_optimize_options opts;
  loom_optimize_options_init(&opts);
  opts.limit = limit;
  loom_graph *tiled = NULL;
  ASSERT_OK(loom_graph_optimize(g, &opts, &tiled, NULL));
  const loom__op *op = window_loop(tiled);
  ASSERT_TRUE(op != NULL);
  ASSERT_TRUE(loom__loop_trips(op->loop) >= 8);
  ASSERT_TRUE(loom__value_streamed_out(tiled, tiled->outputs[0]));
  loom_estimate e;
  ASSERT_OK(loom_graph_estimate(tiled, NULL, &e));
  ASSERT_EQ(e.input_bytes, channels * channels * 5 * 5 * 4); /* w only: x is streamed */
  ASSERT_TRUE(e.peak_bytes <= limit);
  loom__meter m;
  loom_status s = gt_run(tiled, dev, in, &got, limit, &m);
  if (s)
    loom_test_fail(__FILE__, __LINE__, "%lld channels on %s: %s", (long long)channels, where,
                   loom_last_error());
  if (!s) {
    char msg[512];
    if (m.peak != e.peak_bytes)
      loom_test_fail(__FILE__, __LINE__, "%lld channels on %s: measured peak %lld, estimated %lld",
                     (long long)channels, where, (long long)m.peak, (long long)e.peak_bytes);
    if (!gt_close(&want, &got, 1e-4, 1e-4, msg, sizeof msg))
      loom_test_fail(__FILE__, __LINE__, "%lld channels on %s: %s", (long long)channels, where, msg);
    gt_tensors_free(&got, 1);
  }
  loom_estimate_deinit(&e);
  gt_tensors_free(&want, 1);
  gt_tensors_free(in, 2);
  loom_graph_destroy(tiled);
  loom_graph_destroy(g);
}

TEST(tiled_conv_streams_in_and_out_four_times_the_limit_on_cpu0) {
  check_stream(NULL, 1);
  check_stream(NULL, 4);
}

TEST(tiled_conv_streams_in_and_out_four_times_the_limit_on_opencl) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  for (int32_t d = 0; d < nd && !loom_test_failed(); d++) {
    check_stream(devs[d], 1);
    check_stream(devs[d], 4);
  }
}

/* Every host allocation of a tiled run failing in turn (the padded copies of the first and last
 * tiles, the streamed windows' padding, the last shorter tile's body): an OUT_OF_MEMORY each
 * time, nothing left behind. One case whose x is held, two whose x is streamed. */
static void sweep_tiled(const loom__exec_device *dev) {
  static const size_t picks[] = {2, 3, 4};
  for (size_t k = 0; k < sizeof picks / sizeof picks[0]; k++) {
    const conv_case *c = &cases[picks[k]];
    loom_graph *g = gt_parse("%s", c->lir), *tiled = NULL;
    ASSERT_TRUE(g != NULL);
    loom_estimate e;
    ASSERT_OK(loom_graph_estimate(g, NULL, &e));
    loom_optimize_options opts;
    loom_optimize_options_init(&opts);
    opts.limit = (int64_t)((double)e.peak_bytes * c->fractions[1]);
    loom_estimate_deinit(&e);
    ASSERT_OK(loom_graph_optimize(g, &opts, &tiled, NULL));
    ASSERT_TRUE(window_loop(tiled) != NULL);
    loom_tensor in[2], got[2];
    int32_t n_out = loom_graph_output_count(tiled);
    ASSERT_OK(gt_inputs(tiled, 2, in));
    /* a first run fills the device's caches (kernels, programs), which outlive a run */
    ASSERT_OK(gt_run(tiled, dev, in, got, opts.limit, NULL));
    gt_tensors_free(got, n_out);
    loom_test_sweep sw;
    SWEEP_ALLOCATIONS(&sw, 0, 100000) {
      loom_status s = SWEEP_RUN(&sw, gt_run(tiled, dev, in, got, opts.limit, NULL));
      if (!s) gt_tensors_free(got, n_out);
    }
    ASSERT_TRUE(sw.failures > 5);
    gt_tensors_free(in, 2);
    loom_graph_destroy(tiled);
    loom_graph_destroy(g);
  }
}

TEST(tiled_conv_allocation_failures_on_cpu0) {
  const loom__exec_device *cpu = NULL;
  ASSERT_OK(loom__context_exec_device(gt_context(), "cpu0", &cpu));
  sweep_tiled(cpu);
}

TEST(tiled_conv_allocation_failures_on_opencl) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_OPENCL, devs) > 0) sweep_tiled(devs[0]);
}
