/* loom-bench overhead: what the executor costs beyond the kernels (issue 13), on cpu0 and on
 * each OpenCL device.
 *
 *   per op     a chain of N tiny adds (default 2,000 on f32[16]) run as one graph; the best
 *              run's time divided by N. The kernels do almost nothing, so this is the
 *              executor's per-op cost (allocation, lookup, bookkeeping, the launch), beside
 *              NumPy's (and PyTorch eager's) figure for the same chain measured in this run
 *              where python3 has them.
 *   per run    one add alone: the fixed cost of a call (checks, state, the device lookup).
 *   per piece  a loop over n elements in pieces of p (default 100,000 in pieces of 16, a body
 *              of one add) minus the same loop in one piece, divided by the pieces added: what
 *              one more trip of a loop costs.
 *
 * Each figure is the best of --repeats timed runs after a warm-up run, and each run's result
 * is checked against a reference computed here, so a fast wrong executor shows as a failure.
 * Goals (issue 13): under 1 us per op on cpu0, under 2 us per piece. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "loom/loom.h"

typedef struct overhead_args {
  int64_t ops, size;     /* the chain: ops adds on f32[size] */
  int64_t loop_n, piece; /* the loop: loop_n elements in pieces of piece; loop_n 0: no loop */
  int32_t repeats;
  const char *devices; /* "cpu0,ocl0"; NULL: cpu0 and every OpenCL device */
  const char *python;  /* the interpreter for NumPy's figures; NULL: python3, then /usr/bin/python3 */
  bool no_python;
} overhead_args;

static void usage(FILE *f) {
  fputs(
      "usage: loom-bench overhead [--ops N] [--size E] [--loop-n N] [--piece P] [--repeats R]\n"
      "                           [--devices LIST] [--python PROGRAM | --no-python]\n"
      "  per op:    a chain of N adds on f32[E] (default N = 2000, E = 16), time / N\n"
      "  per run:   one add on f32[E] alone\n"
      "  per piece: a loop over f32[N] in pieces of P, body one add (default N = 100000,\n"
      "             P = 16), minus the same loop in one piece, / (pieces - 1); --loop-n 0: none\n"
      "  --repeats R     timed runs per figure after one warm-up; the best is kept (default 5)\n"
      "  --devices LIST  the devices, as LOOM_DEVICES selects them (cpu0,ocl0; opencl); default:\n"
      "                  cpu0 and every OpenCL device\n"
      "  --python PROGRAM the interpreter that measures NumPy (and PyTorch eager) on the same\n"
      "                  chain: a program on PATH or a path, run without a shell (default:\n"
      "                  python3, else /usr/bin/python3); --no-python: none\n"
      "  goals (issue 13): under 1 us per op on cpu0, under 2 us per piece\n",
      f);
}

static int parse_args(int argc, char **argv, overhead_args *a) {
  *a = (overhead_args){.ops = 2000, .size = 16, .loop_n = 100000, .piece = 16, .repeats = 5};
  const bench_opt opts[] = {
      BENCH_OPT_INT("ops", BENCH_I64, &a->ops, 1, 1000000, "a count from 1 to 1000000"),
      BENCH_OPT_INT("size", BENCH_I64, &a->size, 1, (int64_t)1 << 24, "elements from 1 to 2^24"),
      BENCH_OPT_INT("loop-n", BENCH_I64, &a->loop_n, 0, (int64_t)1 << 30, "elements from 0 to 2^30"),
      BENCH_OPT_INT("piece", BENCH_I64, &a->piece, 1, INT64_MAX, "a positive piece size"),
      BENCH_OPT_INT("repeats", BENCH_I32, &a->repeats, 1, 1000, "a count from 1 to 1000"),
      BENCH_OPT_TEXT("devices", &a->devices, "a list of devices"),
      BENCH_OPT_TEXT("python", &a->python, "an interpreter"),
      BENCH_OPT_FLAG("no-python", &a->no_python),
      BENCH_OPT_END,
  };
  bench_cli b = {
      .mode = "overhead", .synopsis = "loom-bench overhead [options]", .usage = usage, .opts = opts};
  int rc = bench_args(&b, argc, argv);
  if (rc) return rc;
  if (a->loop_n > 0 && (a->piece > a->loop_n || a->loop_n / a->piece < 2))
    return bench_fail("overhead", 2, "--piece %lld leaves fewer than 2 pieces of --loop-n %lld",
                      (long long)a->piece, (long long)a->loop_n);
  if (a->python && a->no_python) return bench_fail("overhead", 2, "give --python or --no-python, not both");
  return 0;
}

/* ---- the graphs --------------------------------------------------------------------------------- */

static loom_type vec(int64_t n) {
  loom_type t;
  loom_type_make(LOOM_F32, 1, &n, &t);
  return t;
}

/* chain(x, y): v1 = x + y, v2 = v1 + y, ..., returns v_ops. */
static loom_graph *chain_graph(int64_t ops, int64_t size) {
  loom_graph *g = NULL;
  if (loom_graph_create("chain", &g)) return NULL;
  loom_type t = vec(size);
  loom_value x = loom_graph_param(g, "x", &t), y = loom_graph_param(g, "y", &t), v = x;
  for (int64_t i = 0; i < ops; i++) v = loom_binary(g, LOOM_OP_ADD, v, y);
  loom_graph_return(g, &v, 1);
  if (loom_graph_verify(g)) {
    loom_graph_destroy(g);
    return NULL;
  }
  return g;
}

/* loop(x: f32[n]): pieces of `piece`, body r = a + a, results concatenated: 2x. */
static loom_graph *loop_graph(int64_t n, int64_t piece) {
  loom_graph *body = NULL, *g = NULL;
  if (loom_graph_create("piece", &body) || loom_graph_create("loop", &g)) {
    loom_graph_destroy(body);
    return NULL;
  }
  loom_type bt = vec(piece), t = vec(n);
  loom_value a = loom_graph_param(body, "a", &bt), r = loom_binary(body, LOOM_OP_ADD, a, a);
  loom_graph_return(body, &r, 1);
  loom_value x = loom_graph_param(g, "x", &t), out;
  loom_loop_input rule = {.axis = 0, .offset = 0};
  loom_loop_output comb = {.combine = LOOM_COMBINE_CONCAT, .axis = 0};
  loom_status s = loom_graph_verify(body);
  if (!s) s = loom_graph_add_loop(g, n, piece, body, &x, &rule, 1, &comb, 1, &out);
  if (!s) s = loom_graph_return(g, &out, 1);
  if (!s) s = loom_graph_verify(g);
  loom_graph_destroy(body);
  if (s) {
    loom_graph_destroy(g);
    return NULL;
  }
  return g;
}

/* ---- timing ------------------------------------------------------------------------------------- */

typedef enum check_kind { CHECK_CHAIN, CHECK_DOUBLE } check_kind;

/* Whether out is what the graph computes: the chain x + y + ... + y (each add rounded to f32,
 * as every backend's f32 add is) or 2x. */
static bool result_ok(check_kind kind, int64_t ops, const loom_tensor *in, const loom_tensor *out) {
  const float *x = in[0].data, *y = kind == CHECK_CHAIN ? in[1].data : NULL, *o = out->data;
  int64_t n = in[0].type.dims[0];
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    if (kind == CHECK_DOUBLE)
      v = v + v;
    else
      for (int64_t k = 0; k < ops; k++) v = v + y[i];
    if (memcmp(&v, &o[i], sizeof v) != 0) return false;
  }
  return true;
}

/* The best of `repeats` runs of g on device `id` after a warm-up run, in *best (seconds); the
 * status of a failed run (loom_last_error says why). *wrong is set when the warm-up's result
 * differs from the reference. */
static loom_status best_run(loom_context *ctx, const char *id, const loom_graph *g, const loom_tensor *in,
                            int32_t n_in, int32_t repeats, check_kind kind, int64_t ops, double *best,
                            bool *wrong) {
  *best = -1;
  for (int32_t r = 0; r <= repeats; r++) {
    loom_tensor out = {0};
    double t = bench_now();
    loom_status s = loom_graph_run_on_device(ctx, id, g, in, n_in, &out, 1, NULL);
    if (s) return s;
    t = bench_now() - t;
    if (r == 0 && !result_ok(kind, ops, in, &out)) *wrong = true;
    loom_tensor_deinit(&out);
    if (r > 0 && (*best < 0 || t < *best)) *best = t;
  }
  return LOOM_OK;
}

static int random_inputs(loom_tensor *in, int32_t n, int64_t size) {
  loom_type t = vec(size);
  for (int32_t p = 0; p < n; p++)
    if (loom_tensor_init(&in[p], &t) || loom_tensor_fill_random(&in[p], 1, (uint64_t)p)) return 1;
  return 0;
}

/* ---- one device --------------------------------------------------------------------------------- */

typedef struct device_figures {
  double per_op, per_run, per_piece; /* seconds; NaN: not measured (per piece may be < 0: noise) */
  char loop_note[512];               /* why the loop did not run, or "" */
  bool failed;
} device_figures;

/* Per op and per run: the chain of a->ops adds and one add. */
static void chain_figures(loom_context *ctx, const char *id, const overhead_args *a, device_figures *f) {
  loom_graph *chain = chain_graph(a->ops, a->size), *one = chain_graph(1, a->size);
  loom_tensor in[2];
  memset(in, 0, sizeof in);
  bool wrong = false;
  if (!chain || !one || random_inputs(in, 2, a->size)) {
    fprintf(stderr, "loom-bench overhead: the chain graph: %s\n", loom_last_error());
    f->failed = true;
  } else {
    double t, t1;
    loom_status s = best_run(ctx, id, chain, in, 2, a->repeats, CHECK_CHAIN, a->ops, &t, &wrong);
    if (!s) s = best_run(ctx, id, one, in, 2, a->repeats, CHECK_CHAIN, 1, &t1, &wrong);
    if (s) {
      fprintf(stderr, "loom-bench overhead: %s: the chain of adds: %s\n", id, loom_last_error());
      f->failed = true;
    } else if (wrong) {
      fprintf(stderr, "loom-bench overhead: %s: the chain of adds returned a wrong result\n", id);
      f->failed = true;
    } else {
      f->per_op = t / (double)a->ops;
      f->per_run = t1;
    }
  }
  loom_tensor_deinit(&in[0]);
  loom_tensor_deinit(&in[1]);
  loom_graph_destroy(chain);
  loom_graph_destroy(one);
}

/* Per piece: the loop in pieces of a->piece minus the loop in one piece. A loop the executor
 * cannot run yet is a note, not a failure of the other figures. */
static void loop_figures(loom_context *ctx, const char *id, const overhead_args *a, device_figures *f) {
  loom_graph *many = loop_graph(a->loop_n, a->piece), *whole = loop_graph(a->loop_n, a->loop_n);
  loom_tensor in[1];
  memset(in, 0, sizeof in);
  bool wrong = false;
  if (!many || !whole || random_inputs(in, 1, a->loop_n)) {
    fprintf(stderr, "loom-bench overhead: the loop graph: %s\n", loom_last_error());
    f->failed = true;
  } else {
    double t, t1;
    loom_status s = best_run(ctx, id, many, in, 1, a->repeats, CHECK_DOUBLE, 0, &t, &wrong);
    if (!s) s = best_run(ctx, id, whole, in, 1, a->repeats, CHECK_DOUBLE, 0, &t1, &wrong);
    if (s) {
      snprintf(f->loop_note, sizeof f->loop_note, "%s: per piece: the loop did not run (%s): %s", id,
               loom_status_string(s), loom_last_error());
      f->failed = s != LOOM_ERR_UNSUPPORTED;
    } else if (wrong) {
      fprintf(stderr, "loom-bench overhead: %s: the loop returned a wrong result\n", id);
      f->failed = true;
    } else {
      int64_t pieces = (a->loop_n + a->piece - 1) / a->piece;
      f->per_piece = (t - t1) / (double)(pieces - 1);
    }
  }
  loom_tensor_deinit(&in[0]);
  loom_graph_destroy(many);
  loom_graph_destroy(whole);
}

/* ---- NumPy and PyTorch ---------------------------------------------------------------------------- */

/* The chain in Python: `lib` is "numpy" or "torch"; seconds per op, or -1 when the
 * interpreter or the library is missing. */
static double python_per_op(const char *python, const char *lib, const overhead_args *a) {
  char make[96], script[1024];
  if (strcmp(lib, "torch") == 0)
    snprintf(make, sizeof make, "torch.rand(%lld)", (long long)a->size);
  else
    snprintf(make, sizeof make, "numpy.random.rand(%lld).astype('float32')", (long long)a->size);
  snprintf(
      script, sizeof script,
      "import time, %s\nx = %s\ny = %s\nbest = 1e9\nfor r in range(%d):\n t = time.perf_counter()\n"
      " v = x\n for i in range(%lld): v = v + y\n best = min(best, time.perf_counter() - t)\nprint(best / "
      "%lld)\n",
      lib, make, make, (int)a->repeats + 1, (long long)a->ops, (long long)a->ops);
  return bench_python(python, script);
}

/* NumPy's and PyTorch's figures (-1 each when absent); *used names the interpreter that had
 * NumPy. */
static void python_figures(const overhead_args *a, double *numpy, double *torch, const char **used) {
  static const char *const fallback[] = {"python3", "/usr/bin/python3"};
  *numpy = *torch = -1;
  *used = NULL;
  if (a->no_python) return;
  const char *const *tries = a->python ? &a->python : fallback;
  int32_t n = a->python ? 1 : 2;
  for (int32_t i = 0; i < n && *numpy < 0; i++) {
    *numpy = python_per_op(tries[i], "numpy", a);
    if (*numpy >= 0) *used = tries[i];
  }
  const char *t_python = *used ? *used : tries[0];
  *torch = python_per_op(t_python, "torch", a);
}

/* ---- the devices -------------------------------------------------------------------------------- */

static void print_us(double seconds) {
  if (isnan(seconds))
    printf(" %12s", "-");
  else
    printf(" %9.3f us", seconds * 1e6);
}

/* Measures and prints one device's row; 1 when a figure failed. */
static int bench_device(loom_context *ctx, const char *id, const overhead_args *a, char *notes,
                        size_t notes_size) {
  device_figures f = {.per_op = NAN, .per_run = NAN, .per_piece = NAN};
  chain_figures(ctx, id, a, &f);
  if (a->loop_n > 0) loop_figures(ctx, id, a, &f);
  printf("%-8s", id);
  print_us(f.per_op);
  print_us(f.per_run);
  print_us(f.per_piece);
  printf("\n");
  if (f.loop_note[0]) {
    size_t used = strlen(notes);
    snprintf(notes + used, notes_size - used, "  %s\n", f.loop_note);
  }
  return f.failed;
}

/* Runs every wanted device: cpu0 and the OpenCL devices, or those --devices selects. */
static int bench_devices(loom_context *ctx, const overhead_args *a) {
  char notes[4096] = "";
  int rc = 0, measured = 0;
  for (int32_t i = 0; i < loom_context_device_count(ctx); i++) {
    loom_device_info d;
    if (loom_context_device_info(ctx, i, &d)) return 1;
    /* With --devices the context holds just the devices it selects (ids, aliases or classes). */
    bool wanted = a->devices || strcmp(d.id, "cpu0") == 0 || (d.backends & LOOM_BACKEND_OPENCL);
    if (!wanted) continue;
    rc |= bench_device(ctx, d.id, a, notes, sizeof notes);
    measured++;
  }
  if (notes[0]) printf("\n%s", notes);
  if (measured == 0) {
    fprintf(stderr, "loom-bench overhead: no device to measure\n");
    return 1;
  }
  return rc;
}

int loom_bench_overhead(int argc, char **argv) {
  overhead_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;
  loom_context *ctx = NULL;
  if (loom_context_create(&(loom_context_options){a.devices}, &ctx)) {
    if (a.devices) { /* a device this machine lacks is a wrong command line */
      fprintf(stderr, "loom-bench overhead: --devices %s: %s\n", a.devices, loom_last_error());
      return 2;
    }
    fprintf(stderr, "loom-bench overhead: %s\n", loom_last_error());
    return 1;
  }
  int64_t pieces = a.loop_n > 0 ? (a.loop_n + a.piece - 1) / a.piece : 0;
  printf("loom-bench overhead: best of %d runs after a warm-up\n", (int)a.repeats);
  printf("  per op:    a chain of %lld adds on f32[%lld], time / %lld\n", (long long)a.ops, (long long)a.size,
         (long long)a.ops);
  printf("  per run:   one add on f32[%lld]\n", (long long)a.size);
  if (pieces > 0)
    printf(
        "  per piece: a loop over f32[%lld] in %lld pieces of %lld (body: one add), minus it in one piece, / "
        "%lld\n",
        (long long)a.loop_n, (long long)pieces, (long long)a.piece, (long long)(pieces - 1));
  printf("\n%-8s %12s %12s %12s\n", "device", "per op", "per run", "per piece");
  rc = bench_devices(ctx, &a);
  double numpy, torch;
  const char *python;
  python_figures(&a, &numpy, &torch, &python);
  if (!a.no_python) {
    printf("\n");
    if (numpy >= 0)
      printf("%-8s %9.2f us   (the same chain in %s)\n", "NumPy", numpy * 1e6, python);
    else
      printf("NumPy: not measured (no python3 with numpy%s%s)\n", a.python ? ": " : "",
             a.python ? a.python : "");
    if (torch >= 0) printf("%-8s %9.2f us   (PyTorch eager)\n", "PyTorch", torch * 1e6);
  }
  printf("\ngoals (issue 13): per op under 1 us on cpu0, per piece under 2 us\n");
  loom_context_destroy(ctx);
  return rc;
}
