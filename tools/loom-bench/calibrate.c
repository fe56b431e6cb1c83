/* loom-bench calibrate: the scheduler's performance models (docs/sched.md). For each device,
 * each op class is measured at three sizes through the public API (a one-op graph run on the
 * device, measure.h: one warm-up, the best of --reps), a line is fitted through the points,
 * and the model is written to the cache folder keyed by device name and driver, where
 * `loom-info --models` and the scheduler read it. Times are end to end from host memory, so
 * the model of a discrete device includes its transfers: short runs overstate small sizes, as
 * a first model should (it is refitted when calibrated again). A device with its own memory
 * also gets its host link measured (bandwidth and latency of writes and reads through the
 * memory manager). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "measure.h"

/* One op class: its .lir at three sizes (%lld filled with each). */
typedef struct calib_case {
  loom_op_class cls;
  const char *lir;
  long long sizes[3], quick[3];
} calib_case;

static const calib_case cases[] = {
    {LOOM_OP_CLASS_GEMM,
     "graph g(a: f32[%1$lld,%1$lld], b: f32[%1$lld,%1$lld]) {\n  c = dot a b\n  return c\n}\n",
     {256, 512, 1024},
     {64, 128, 256}},
    {LOOM_OP_CLASS_FFT,
     "graph g(x: c64[%1$lld]) {\n  y = fft x axis=0\n  return y\n}\n",
     {1 << 14, 1 << 16, 1 << 18},
     {1 << 10, 1 << 12, 1 << 14}},
    {LOOM_OP_CLASS_ELEMENTWISE,
     "graph g(a: f32[%1$lld], b: f32[%1$lld]) {\n  c = add a b\n  return c\n}\n",
     {1 << 18, 1 << 20, 1 << 22},
     {1 << 12, 1 << 14, 1 << 16}},
    {LOOM_OP_CLASS_REDUCTION,
     "graph g(x: f32[%1$lld]) {\n  y = reduce_sum x axes=[0]\n  return y\n}\n",
     {1 << 18, 1 << 20, 1 << 22},
     {1 << 12, 1 << 14, 1 << 16}},
    {LOOM_OP_CLASS_TOPK,
     "graph g(x: f32[%1$lld,4096]) {\n  v, i = topk x k=10 axis=1 largest=false\n  return v, i\n}\n",
     {16, 64, 256},
     {1, 4, 16}},
    {LOOM_OP_CLASS_CONV,
     "graph g(x: f32[1,8,%1$lld,%1$lld], w: f32[8,8,3,3]) {\n  y = conv x w\n  return y\n}\n",
     {64, 128, 256},
     {16, 32, 64}},
    {LOOM_OP_CLASS_COPY,
     "graph g(a: f32[%1$lld], b: f32[%1$lld]) {\n  c = concat a b axis=0\n  return c\n}\n",
     {1 << 18, 1 << 20, 1 << 22},
     {1 << 12, 1 << 14, 1 << 16}},
};

typedef struct calib_options {
  const char *devices; /* --devices LIST, or NULL: all */
  int32_t reps;
  bool quick, dry; /* --quick: small sizes; --no-save: print only */
} calib_options;

/* The size of the only op of text's graph in its class's units, as the scheduler counts it. */
static double op_units(const bench_op *op, loom_op_class cls) {
  double sizes[LOOM_OP_CLASS_COUNT] = {0};
  int32_t kernels[LOOM_OP_CLASS_COUNT] = {0};
  for (int32_t i = 0; i < loom_graph_op_count(op->g); i++) loom_sched_op_work(op->g, i, sizes, kernels);
  return sizes[cls];
}

/* Measures one class on device `id` and fits it into m; 1 when a size failed (said on stderr). */
static int calibrate_class(loom_context *ctx, const char *id, const calib_case *c, const calib_options *o,
                           loom_sched_model *m) {
  double units[3], secs[3];
  for (int k = 0; k < 3; k++) {
    char text[512], why[512] = "";
    snprintf(text, sizeof text, c->lir, o->quick ? c->quick[k] : c->sizes[k]);
    bench_op op;
    bench_times t = {0};
    if (bench_op_open(&op, text, 7)) {
      fprintf(stderr, "loom-bench calibrate: %s %s: %s\n", id, loom_op_class_name(c->cls), loom_last_error());
      return 1;
    }
    int bad = bench_measure(ctx, id, &op, NULL, o->reps, &t, why, sizeof why);
    units[k] = op_units(&op, c->cls);
    bench_op_close(&op);
    if (bad || !(t.loom_s > 0)) {
      fprintf(stderr, "loom-bench calibrate: %s %s: %s\n", id, loom_op_class_name(c->cls), why);
      return 1;
    }
    secs[k] = t.loom_s;
  }
  if (loom_sched_model_fit(m, c->cls, units, secs, 3)) {
    fprintf(stderr, "loom-bench calibrate: %s: %s\n", id, loom_last_error());
    return 1;
  }
  return 0;
}

/* The device's own memory node in the memory manager, or -1 when it computes in host memory. */
static int32_t own_node(loom_context *ctx, int32_t index, loom_mem_manager **out_m) {
  int32_t node;
  loom_mem_node_info ni;
  if (loom_context_memory(ctx, out_m) || loom_mem_device_node(*out_m, index, &node) ||
      loom_mem_node_info_get(*out_m, node, &ni))
    return -1;
  return ni.kind == LOOM_MEMORY_DEVICE ? node : -1;
}

/* The host link of a device with its own memory: writes and reads back of two sizes through
 * the memory manager (measure.h), the two ways averaged, a line through the two points.
 * 1 when a transfer failed (said on stderr). */
static int calibrate_link(loom_context *ctx, int32_t index, const char *id, const calib_options *o,
                          loom_sched_model *m) {
  loom_mem_manager *mm = NULL;
  int32_t node = own_node(ctx, index, &mm);
  if (node < 0) return 0;
  int64_t bytes[2] = {o->quick ? 1 << 16 : 1 << 20, o->quick ? 1 << 20 : 1 << 24};
  double secs[2];
  uint8_t *src = malloc((size_t)bytes[1]), *dst = malloc((size_t)bytes[1]);
  int bad = !src || !dst;
  char why[256] = "no host memory for the buffers";
  for (int k = 0; !bad && k < 2; k++) {
    for (int64_t i = 0; i < bytes[k]; i++) src[i] = (uint8_t)(i * 131 + 7);
    bench_transfer t = {0};
    why[0] = '\0';
    bad = bench_measure_host_transfers(mm, node, src, dst, bytes[k], o->reps, &t, why, sizeof why);
    secs[k] = (t.h2d_s + t.d2h_s) / 2;
  }
  free(src);
  free(dst);
  if (bad || !(secs[1] > 0)) {
    fprintf(stderr, "loom-bench calibrate: %s host link: %s\n", id, why);
    return 1;
  }
  double slope = (secs[1] - secs[0]) / (double)(bytes[1] - bytes[0]);
  if (!(slope > 0)) slope = secs[1] / (double)bytes[1]; /* noise: through the origin */
  m->host_bandwidth = 1.0 / slope;
  m->host_latency = secs[0] - (double)bytes[0] * slope > 0 ? secs[0] - (double)bytes[0] * slope : 0;
  return 0;
}

static int calibrate_device(loom_context *ctx, int32_t index, const loom_device_info *d,
                            const calib_options *o) {
  loom_sched_model m;
  memset(&m, 0, sizeof m);
  int failed = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    failed += calibrate_class(ctx, d->id, &cases[i], o, &m);
  failed += calibrate_link(ctx, index, d->id, o, &m);
  const char *driver = loom_sched_device_driver(d);
  printf("%s  %s  (driver %s)%s\n", d->id, d->name, *driver ? driver : "none",
         failed ? "  (some classes failed: not known)" : "");
  loom_sched_model_print(&m, 4, stdout);
  if (o->dry) return failed ? 1 : 0;
  char path[1100];
  if (loom_sched_model_save(&m, d->name, driver) ||
      loom_sched_model_path(d->name, driver, path, sizeof path)) {
    fprintf(stderr, "loom-bench calibrate: %s: %s\n", d->id, loom_last_error());
    return 1;
  }
  printf("    written to %s\n", path);
  return failed ? 1 : 0;
}

static void usage(FILE *f) {
  fputs(
      "usage: loom-bench calibrate [--devices LIST] [--reps N] [--quick] [--no-save]\n\n"
      "Measures each op class (gemm, fft, elementwise, reduction, topk, conv, copy) at three sizes on\n"
      "each device, fits seconds = latency + size x seconds_per_unit, and writes the model to the\n"
      "cache folder (LOOM_CACHE_DIR, else $XDG_CACHE_HOME/loom, else ~/.cache/loom: models/),\n"
      "keyed by device name and driver; `loom-info --models` prints them.\n\n"
      "  --devices LIST  only these ids (cpu0,ocl1)\n"
      "  --reps N        timed runs per size, the best kept (default 3)\n"
      "  --quick         small sizes (seconds in all; for tests)\n"
      "  --no-save       print the models, write nothing\n",
      f);
}

static int parse_args(int argc, char **argv, calib_options *o) {
  memset(o, 0, sizeof *o);
  o->reps = 3;
  int32_t reps = 3;
  const bench_opt opts[] = {
      BENCH_OPT_TEXT("devices", &o->devices, "a list of devices"),
      BENCH_OPT_INT("reps", BENCH_I32, &reps, 1, 100, "a count from 1 to 100"),
      BENCH_OPT_FLAG("quick", &o->quick),
      BENCH_OPT_FLAG("no-save", &o->dry),
      BENCH_OPT_END,
  };
  bench_cli b = {.mode = "calibrate",
                 .synopsis = "loom-bench calibrate [--devices LIST] [--reps N] [--quick] [--no-save]",
                 .usage = usage,
                 .opts = opts};
  int rc = bench_args(&b, argc, argv);
  o->reps = reps;
  return rc;
}

int loom_bench_calibrate(int argc, char **argv) {
  calib_options o;
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc < 0 ? 0 : rc;
  loom_context *ctx = NULL;
  if (loom_context_create(NULL, &ctx)) {
    fprintf(stderr, "loom-bench calibrate: %s\n", loom_last_error());
    return 1;
  }
  int32_t done = 0;
  for (int32_t i = 0; i < loom_context_device_count(ctx); i++) {
    loom_device_info d;
    if (loom_context_device_info(ctx, i, &d) || !bench_id_listed(o.devices, d.id)) continue;
    rc |= calibrate_device(ctx, i, &d, &o);
    done++;
  }
  loom_context_destroy(ctx);
  if (!done) {
    fprintf(stderr, "loom-bench calibrate: --devices %s: no such device here\n", o.devices ? o.devices : "");
    return 2;
  }
  return rc;
}
