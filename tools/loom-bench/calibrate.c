/* loom-bench calibrate: the scheduler's performance models (docs/sched.md). For each device,
 * each op class is measured at 5 to 8 log-spaced sizes from a few KiB of operands up past the
 * last-level cache, and at a tiny size whose time is a call's cost, through the public API (a
 * one-op graph run on the device, measure.h: one warm-up, the best of --reps); a line is fitted
 * through the points, the points kept as the model's table and the call's cost as where the
 * table starts from below its first point (a limit's pieces are that small). A loop's cost of
 * a piece beyond its kernels is measured as `loom-bench overhead` does. The model is written
 * to the cache folder keyed by device name and driver, where `loom-info --models` and the
 * scheduler read it. Times are end to end from host memory, so the model of a discrete device
 * includes its transfers: short runs overstate small sizes, as a first model should (it is
 * refitted when calibrated again). A device with its own memory also gets its host link
 * measured (bandwidth and latency of writes and reads through the memory manager). About 15
 * seconds on cpu0 of a 2-core machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "measure.h"

enum { CALIB_POINTS = 8, CALIB_QUICK = 3 };

/* One op class: its .lir (%lld filled with each size), a tiny size whose time is the class's
 * cost of a call, and log-spaced sizes from a few KiB of operands up to past the last-level
 * cache (32 MiB here), so that a limit's small pieces fall inside the table; 0 ends a list.
 * No result passes 16 MiB: glibc maps a block of 32 MiB or more afresh on every call, so each
 * run of a one-op graph would pay a page fault for each of its pages (5 us each on these
 * virtual machines) where a graph's ops reuse their memory. GEMM goes up to 2048^3: beyond
 * 1024^3 two threads run faster than its rate (the whole products' predictions were 1.2x
 * their measured times, which let a limit's search spend that much more). */
typedef struct calib_case {
  loom_op_class cls;
  const char *lir;
  long long tiny, sizes[CALIB_POINTS], quick[CALIB_QUICK];
} calib_case;

static const calib_case cases[] = {
    {LOOM_OP_CLASS_GEMM,
     "graph g(a: f32[%1$lld,%1$lld], b: f32[%1$lld,%1$lld]) {\n  c = dot a b\n  return c\n}\n",
     1,
     {16, 32, 64, 128, 256, 512, 1024, 2048},
     {64, 128, 256}},
    {LOOM_OP_CLASS_FFT,
     "graph g(x: c64[%1$lld]) {\n  y = fft x axis=0\n  return y\n}\n",
     4,
     {1 << 8, 1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20},
     {1 << 10, 1 << 12, 1 << 14}},
    {LOOM_OP_CLASS_ELEMENTWISE,
     "graph g(a: f32[%1$lld], b: f32[%1$lld]) {\n  c = add a b\n  return c\n}\n",
     1,
     {1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22},
     {1 << 12, 1 << 14, 1 << 16}},
    {LOOM_OP_CLASS_REDUCTION,
     "graph g(x: f32[%1$lld]) {\n  y = reduce_sum x axes=[0]\n  return y\n}\n",
     1,
     {1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24},
     {1 << 12, 1 << 14, 1 << 16}},
    {LOOM_OP_CLASS_TOPK,
     "graph g(x: f32[%1$lld,4096]) {\n  v, i = topk x k=10 axis=1 largest=false\n  return v, i\n}\n",
     1,
     {1, 4, 16, 64, 256},
     {1, 4, 16}},
    {LOOM_OP_CLASS_CONV,
     "graph g(x: f32[1,8,%1$lld,%1$lld], w: f32[8,8,3,3]) {\n  y = conv x w\n  return y\n}\n",
     3,
     {8, 16, 32, 64, 128, 256},
     {16, 32, 64}},
    {LOOM_OP_CLASS_COPY,
     "graph g(a: f32[%1$lld], b: f32[%1$lld]) {\n  c = concat a b axis=0\n  return c\n}\n",
     1,
     {1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 21},
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

/* One size of case c on device `id`: its units and best seconds of `reps`; 1 when it failed
 * (said on stderr). */
static int measure_size(loom_context *ctx, const char *id, const calib_case *c, long long size, int32_t reps,
                        double *units, double *secs) {
  char text[512], why[512] = "";
  snprintf(text, sizeof text, c->lir, size);
  bench_op op;
  bench_times t = {0};
  if (bench_op_open(&op, text, 7)) {
    fprintf(stderr, "loom-bench calibrate: %s %s: %s\n", id, loom_op_class_name(c->cls), loom_last_error());
    return 1;
  }
  int bad = bench_measure(ctx, id, &op, NULL, reps, &t, why, sizeof why);
  *units = op_units(&op, c->cls);
  bench_op_close(&op);
  if (bad || !(t.loom_s > 0)) {
    fprintf(stderr, "loom-bench calibrate: %s %s at %lld: %s\n", id, loom_op_class_name(c->cls), size, why);
    return 1;
  }
  *secs = t.loom_s;
  return 0;
}

/* Measures one class on device `id` and fits it into m, its call's cost (a tiny kernel's time)
 * as the latency the table starts from; 1 when a size failed (said on stderr). The small sizes
 * take microseconds, so they get five times the runs: their best is the steadiest. --quick
 * measures the sizes it always did and no tiny one (the latency is then the fit's): on an
 * OpenCL device each new size is a program to build, which tests would wait for. */
static int calibrate_class(loom_context *ctx, const char *id, const calib_case *c, const calib_options *o,
                           loom_sched_model *m) {
  double units[CALIB_POINTS], secs[CALIB_POINTS], tiny_units, tiny_s = 0;
  const long long *sizes = o->quick ? c->quick : c->sizes;
  int32_t n = 0, max = o->quick ? CALIB_QUICK : CALIB_POINTS;
  if (!o->quick && measure_size(ctx, id, c, c->tiny, 5 * o->reps, &tiny_units, &tiny_s)) return 1;
  for (; n < max && sizes[n] > 0; n++) {
    int32_t reps = !o->quick && n < max / 2 ? 5 * o->reps : o->reps;
    if (measure_size(ctx, id, c, sizes[n], reps, &units[n], &secs[n])) return 1;
  }
  if (loom_sched_model_fit(m, c->cls, units, secs, n)) {
    fprintf(stderr, "loom-bench calibrate: %s: %s\n", id, loom_last_error());
    return 1;
  }
  if (!o->quick) m->cls[c->cls].latency = tiny_s < secs[0] ? tiny_s : secs[0];
  return 0;
}

/* A loop's cost of a piece beyond its kernels: a loop of one add over f32[2^16] in pieces of
 * 16 minus the same loop in pieces of 64, over the pieces added. Both bodies stay tiny (a
 * kernel of 64 elements runs on one thread, as one of 2^16 may not), so the difference is the
 * pieces' cost alone, as `loom-bench overhead` measures it. */
static const char loop_lir[] =
    "graph g(x: f32[65536]) {\n  y = loop n=65536 piece=%lld {\n    in a = x axis=0\n"
    "    r = add a a\n    out r concat axis=0\n  }\n  return y\n}\n";

static int calibrate_piece(loom_context *ctx, const char *id, const calib_options *o, loom_sched_model *m) {
  const calib_case loop = {.cls = LOOM_OP_CLASS_ELEMENTWISE, .lir = loop_lir};
  double units, many, fewer;
  if (measure_size(ctx, id, &loop, 16, o->reps, &units, &many) ||
      measure_size(ctx, id, &loop, 64, o->reps, &units, &fewer))
    return 1;
  double per = (many - fewer) / (65536.0 / 16 - 65536.0 / 64);
  m->piece_seconds = per > 0 ? per : 0; /* noise can make it negative: a piece then costs nothing more */
  return 0;
}

/* A row gathered: sums of 16 columns of f32[2048,2048] at a time (a slice that is not dense,
 * copied row by row: 2048 x 128 rows) minus sums of 16 rows at a time (dense, read in place),
 * the same bytes and pieces, over the rows. */
static const char gather_lir[] =
    "graph g(x: f32[2048,2048]) {\n  y = loop n=2048 piece=16 {\n    in a = x axis=%lld\n"
    "    r = reduce_sum a axes=[%lld]\n    out r concat axis=0\n  }\n  return y\n}\n";

static int calibrate_gather(loom_context *ctx, const char *id, const calib_options *o, loom_sched_model *m) {
  double t[2], units;
  for (int axis = 0; axis < 2; axis++) {
    char lir[sizeof gather_lir + 16];
    snprintf(lir, sizeof lir, gather_lir, (long long)axis, (long long)(1 - axis));
    const calib_case c = {.cls = LOOM_OP_CLASS_REDUCTION, .lir = lir};
    if (measure_size(ctx, id, &c, 0, o->reps, &units, &t[axis])) return 1;
  }
  double per = (t[1] - t[0]) / (2048.0 * 128);
  m->gather_row_seconds = per > 0 ? per : 0;
  return 0;
}

/* A chain of k adds over f32[2^20] as the optimizer fuses it (the limits kernels' elementwise
 * ops run as fused bodies, whose evaluator costs an element more than a memory pass does),
 * whole or (piece > 0) in a loop over pieces of `piece` elements; its best seconds in *secs; 1
 * when it failed (said on stderr). */
static int measure_chain(loom_context *ctx, const char *id, const calib_options *o, int k, int piece,
                         double *secs) {
  char text[2048];
  const char *pad = piece > 0 ? "    " : "  ";
  int n = snprintf(text, sizeof text, "graph g(a: f32[1048576], b: f32[1048576]) {\n");
  if (piece > 0)
    n += snprintf(text + n, sizeof text - (size_t)n,
                  "  y = loop n=1048576 piece=%d {\n    in a = a axis=0\n    in b = b axis=0\n", piece);
  n += snprintf(text + n, sizeof text - (size_t)n, "%sx0 = add a b\n", pad);
  for (int i = 1; i < k; i++)
    n += snprintf(text + n, sizeof text - (size_t)n, "%sx%d = add x%d b\n", pad, i, i - 1);
  if (piece > 0)
    snprintf(text + n, sizeof text - (size_t)n, "    out x%d concat axis=0\n  }\n  return y\n}\n", k - 1);
  else
    snprintf(text + n, sizeof text - (size_t)n, "  return x%d\n}\n", k - 1);
  bench_op op;
  bench_times t = {0};
  char why[512] = "";
  loom_optimize_options oo;
  loom_optimize_options_init(&oo);
  oo.fused_runs = loom_fused_body_runs_everywhere;
  loom_graph *fused = NULL;
  if (bench_op_open(&op, text, 7)) {
    fprintf(stderr, "loom-bench calibrate: %s fused chain of %d: %s\n", id, k, loom_last_error());
    return 1;
  }
  int bad = loom_graph_optimize(op.g, &oo, &fused, NULL) != LOOM_OK;
  if (bad) {
    snprintf(why, sizeof why, "%s", loom_last_error());
  } else {
    loom_graph_destroy(op.g);
    op.g = fused;
    bad = bench_measure(ctx, id, &op, NULL, o->reps, &t, why, sizeof why);
  }
  bench_op_close(&op);
  if (bad || !(t.loom_s > 0)) {
    fprintf(stderr, "loom-bench calibrate: %s fused chain of %d: %s\n", id, k, why);
    return 1;
  }
  *secs = t.loom_s;
  return 0;
}

/* An element of an elementwise op in a fused body: a fused chain of 8 adds minus one of 2,
 * over the 6 x 2^20 element-ops added (the memory pass is the same in both). Then the same in
 * a loop's pieces of 8,192 elements (the pieces' cost is the same in both): a small body's
 * element, which does not gain from the threads (pieces of 3 rows of 2,400 elements through
 * 8 adds ran at 0.22 ns an element-op on two threads and 0.21 on one, against 0.11 for pieces
 * of 300 rows on two). */
static int calibrate_fused(loom_context *ctx, const char *id, const calib_options *o, loom_sched_model *m) {
  double t8, t2, s8, s2;
  if (measure_chain(ctx, id, o, 8, 0, &t8) || measure_chain(ctx, id, o, 2, 0, &t2) ||
      measure_chain(ctx, id, o, 8, 8192, &s8) || measure_chain(ctx, id, o, 2, 8192, &s2))
    return 1;
  double per = (t8 - t2) / (6.0 * 1048576), small = (s8 - s2) / (6.0 * 1048576);
  m->fused_element_seconds = per > 0 ? per : 0;
  m->fused_small_element_seconds = small > 0 ? small : 0;
  return 0;
}

/* A page of a new result of 32 MiB or more: an add of 2^24 elements (a 64 MiB result, which
 * glibc maps afresh on every run, each page faulted in) minus four adds of 2^22 (16 MiB results,
 * reused from the heap), over the 16,384 pages. */
static int calibrate_faults(loom_context *ctx, const char *id, const calib_options *o, loom_sched_model *m) {
  const calib_case *add = &cases[2];
  double units, big, small;
  if (measure_size(ctx, id, add, 1 << 24, o->reps, &units, &big) ||
      measure_size(ctx, id, add, 1 << 22, o->reps, &units, &small))
    return 1;
  double per = (big - 4 * small) / 16384;
  m->fault_page_seconds = per > 0 ? per : 0;
  return 0;
}

/* A thin product, as a limit's finest cuts make them: a loop over blocks of t rows of
 * f32[8192,2048] (64 MiB: from memory, as a piece's operand is), each block transposed and
 * multiplied into [t,2048] (in cache, as an outer piece's rows are), t = 8 to 256; a piece's
 * seconds less the loop's cost of a piece, by its flops. The GEMM table's squares are hot in
 * the cache and use every thread from 64^3 up; a thin piece packs its streamed operand for
 * every product and splits poorly over the threads (35 x 69 x 2048 pieces of syrk took 184 us
 * each on two threads, where the square GEMM of as many bytes priced them at 90). */
static const char thin_lir[] =
    "graph g(a: f32[%1$lld,2048], b: f32[8192,2048]) {\n  y = loop n=8192 piece=%1$lld {\n"
    "    in x = a\n    in r = b axis=0\n    v = transpose r perm=[1,0]\n    d = dot x v\n"
    "    out d concat axis=1\n  }\n  return y\n}\n";

static int calibrate_thin(loom_context *ctx, const char *id, const calib_options *o, loom_sched_model *m) {
  static const long long sides[] = {8, 16, 32, 64, 128, 256};
  enum { N = sizeof sides / sizeof sides[0] };
  const calib_case c = {.cls = LOOM_OP_CLASS_GEMM, .lir = thin_lir};
  double flops[N], secs[N], units;
  for (int i = 0; i < N; i++) {
    double t, pieces = 8192.0 / (double)sides[i];
    if (measure_size(ctx, id, &c, sides[i], o->reps, &units, &t)) return 1;
    double per = t / pieces - m->piece_seconds;
    flops[i] = 2.0 * (double)sides[i] * (double)sides[i] * 2048;
    secs[i] = per > 0 ? per : t / pieces;
  }
  loom_sched_model fit;
  memset(&fit, 0, sizeof fit);
  if (loom_sched_model_fit(&fit, LOOM_OP_CLASS_GEMM, flops, secs, N)) {
    fprintf(stderr, "loom-bench calibrate: %s thin gemm: %s\n", id, loom_last_error());
    return 1;
  }
  m->thin_gemm = fit.cls[LOOM_OP_CLASS_GEMM];
  m->thin_gemm.latency = m->cls[LOOM_OP_CLASS_GEMM].latency; /* the call, as the squares' */
  return 0;
}

/* A matrix-vector product over pieces of p rows of f32[4096,4096] (64 MiB: from memory, past
 * the cache), p = 1 to 256, by the bytes of matrix a piece reads: its seconds a piece less the
 * loop's cost of a piece. A piece's kernel too small to be split over the threads streams at
 * one core's rate, half the rate the whole product reads at on two cores (atax's 2,048
 * pieces of 2 rows ran 1.5x slower than priced at that rate). */
static const char stream_lir[] =
    "graph g(a: f32[4096,4096], x: f32[4096]) {\n  y = loop n=4096 piece=%lld {\n    in r = a axis=0\n"
    "    in v = x\n    d = dot r v\n    out d concat axis=0\n  }\n  return y\n}\n";

static int calibrate_stream(loom_context *ctx, const char *id, const calib_options *o, loom_sched_model *m) {
  static const long long rows[] = {1, 4, 16, 64, 256};
  enum { N = sizeof rows / sizeof rows[0] };
  const calib_case c = {.cls = LOOM_OP_CLASS_GEMM, .lir = stream_lir};
  double bytes[N], secs[N], units;
  for (int i = 0; i < N; i++) {
    double t;
    if (measure_size(ctx, id, &c, rows[i], o->reps, &units, &t)) return 1;
    double per = t / (4096.0 / (double)rows[i]) - m->piece_seconds;
    bytes[i] = (double)rows[i] * 4096 * 4;
    secs[i] = per > 0 ? per : t / (4096.0 / (double)rows[i]);
  }
  loom_sched_model fit;
  memset(&fit, 0, sizeof fit);
  if (loom_sched_model_fit(&fit, LOOM_OP_CLASS_COPY, bytes, secs, N)) {
    fprintf(stderr, "loom-bench calibrate: %s stream: %s\n", id, loom_last_error());
    return 1;
  }
  m->stream = fit.cls[LOOM_OP_CLASS_COPY];
  m->stream.latency = 0; /* below a row, a read costs its bytes: the call is the kernel's table's */
  return 0;
}

/* A select's element against an add's, both over f32[1024,1024] (4 MiB operands, as a halo
 * cut's pieces hold them), the select's mask bool[1024,1] broadcast along the rows as the
 * halo cut's selects read theirs: so read, the select kernel runs about four times slower than
 * an add (jacobi-2d's pieces spent half their time in selects, priced as adds); a select of
 * operands alike runs as fast as an add, and predict.c prices it as one. */
static const char select_lir[] =
    "graph g(m: bool[%1$lld,1], a: f32[%1$lld,1024], b: f32[%1$lld,1024]) {\n  c = select m a b\n"
    "  return c\n}\n";
static const char add2_lir[] =
    "graph g(a: f32[%1$lld,1024], b: f32[%1$lld,1024]) {\n  c = add a b\n  return c\n}\n";

static int calibrate_select(loom_context *ctx, const char *id, const calib_options *o, loom_sched_model *m) {
  const calib_case sel = {.cls = LOOM_OP_CLASS_ELEMENTWISE, .lir = select_lir},
                   add = {.cls = LOOM_OP_CLASS_ELEMENTWISE, .lir = add2_lir};
  double units, ts, ta;
  if (measure_size(ctx, id, &sel, 1024, o->reps, &units, &ts) ||
      measure_size(ctx, id, &add, 1024, o->reps, &units, &ta))
    return 1;
  m->select_ratio = ts / ta;
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
  if (!o->quick) /* new programs to build, as above */
    failed += calibrate_piece(ctx, d->id, o, &m) + calibrate_gather(ctx, d->id, o, &m) +
              calibrate_fused(ctx, d->id, o, &m) + calibrate_faults(ctx, d->id, o, &m) +
              calibrate_thin(ctx, d->id, o, &m) + calibrate_stream(ctx, d->id, o, &m) +
              calibrate_select(ctx, d->id, o, &m);
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
      "Measures each op class (gemm, fft, elementwise, reduction, topk, conv, copy) at 5 to 8 sizes\n"
      "from a few KiB up and at a tiny size (a call's cost) on each device, and a loop's cost of a\n"
      "piece; keeps the points as the model's table, fits seconds = latency + size x\n"
      "seconds_per_unit, and writes the model to the cache folder (LOOM_CACHE_DIR, else\n"
      "$XDG_CACHE_HOME/loom, else ~/.cache/loom: models/),\n"
      "keyed by device name and driver; `loom-info --models` prints them.\n\n"
      "  --devices LIST  only these ids (cpu0,ocl1)\n"
      "  --reps N        timed runs per size, the best kept (default 3)\n"
      "  --quick         three small sizes, no tiny one, no loop (seconds in all; for tests)\n"
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
