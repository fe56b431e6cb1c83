/* Overlapping a Loom run with the program's own work (loom_run_submit, include/loom/runtime.h).
 *
 * The run (a chain of products on one device under a memory limit) is submitted and the
 * program goes on with work of its own on the host meanwhile, then waits for the run. The
 * memory manager's trace records both: Loom's stages on the run's device, and the program's
 * work as a span in a lane of its own (loom_mem_trace_span), so the overlap shows in Perfetto.
 *
 *   async [TRACE.json] [DEVICE]     (defaults: async_trace.json, cpu0)
 *
 * Prints how long each took and how long they overlapped. Exit 0 on success, 1 on a failure. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "loom/loom.h"

static const char *graph_text =
    "graph chain(a: f32[512,512], b: f32[512,512], c: f32[512,512]) {\n"
    "  ab = dot a b\n  t = tanh ab\n  abc = dot t c\n  u = tanh abc\n  v = dot u a\n"
    "  s = reduce_sum v axes=[1]\n  return s\n}\n";

/* The program's own work: a few tens of milliseconds of arithmetic on the host. */
static double own_work(void) {
  double x = 0;
  for (long i = 1; i < 10L * 1000 * 1000; i++) x += sin((double)i) / (double)i;
  return x;
}

#define CHECK(call)                                                                             \
  do {                                                                                          \
    loom_status s_ = (call);                                                                    \
    if (s_) {                                                                                   \
      fprintf(stderr, "async: %s: %s: %s\n", #call, loom_status_string(s_), loom_last_error()); \
      return 1;                                                                                 \
    }                                                                                           \
  } while (0)

int main(int argc, char **argv) {
  const char *trace = argc > 1 ? argv[1] : "async_trace.json";
  const char *device = argc > 2 ? argv[2] : "cpu0";
  loom_context *ctx = NULL;
  loom_graph *g = NULL, *opt = NULL;
  loom_plan *plan = NULL;
  loom_mem_manager *m = NULL;
  int32_t node = -1;
  loom_runner runner = {"", 16 << 20}; /* 16 MiB: room for every product at once */
  snprintf(runner.device, sizeof runner.device, "%s", device);
  CHECK(loom_context_create(NULL, &ctx));
  CHECK(loom_graph_parse(graph_text, strlen(graph_text), "chain", &g));
  CHECK(loom_graph_optimize_for_runners(g, &runner, 1, NULL, &opt, NULL, NULL, 0));
  CHECK(loom_plan_split_by_memory(opt, &runner, 1, &plan));
  CHECK(loom_context_memory(ctx, &m));
  CHECK(loom_mem_node_find(m, device, &node));
  loom_tensor in[3], out[1];
  memset(out, 0, sizeof out);
  for (int p = 0; p < 3; p++) {
    CHECK(loom_tensor_init(&in[p], loom_value_type(g, loom_graph_param_at(g, p))));
    CHECK(loom_tensor_fill_random(&in[p], 1, (uint64_t)p));
  }
  CHECK(loom_mem_trace_enable(m, true));

  loom_run_stats stats = {0};
  loom_run_handle *run = NULL;
  double t0 = loom_mem_trace_now();
  CHECK(loom_run_submit(ctx, plan, NULL, in, 3, out, 1, &stats, &run));
  double work_start = loom_mem_trace_now();
  double x = own_work(); /* while Loom runs the plan */
  CHECK(loom_mem_trace_span(m, node, "own work", work_start));
  double work_end = loom_mem_trace_now();
  CHECK(loom_run_wait(run));
  double run_end = loom_mem_trace_now();
  CHECK(loom_mem_trace_write(m, trace));

  /* The run ended no earlier than its stats say it took from its submission. */
  double run_from = t0, run_to = fmin(run_end, t0 + stats.seconds);
  double overlap = fmax(0, fmin(run_to, work_end) - fmax(run_from, work_start));
  printf("run: %d stages on %s, %.1f ms; own work: %.1f ms (%.3f); overlapped %.1f ms\n", (int)stats.n_stages,
         device, stats.seconds * 1e3, (work_end - work_start) * 1e3, x, overlap * 1e3);
  printf("trace: %s (open it in Perfetto: the stages and \"own work\" side by side)\n", trace);
  loom_run_stats_deinit(&stats);
  loom_tensor_deinit(&out[0]);
  for (int p = 0; p < 3; p++) loom_tensor_deinit(&in[p]);
  loom_plan_destroy(plan);
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
  loom_context_destroy(ctx);
  return 0;
}
