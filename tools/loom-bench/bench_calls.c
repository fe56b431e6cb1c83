/* loom-bench calls: what one call of a small plan costs when a program calls it over and over
 * (issue 18: time loops in simulation codes), on cpu0 and on each OpenCL device.
 *
 * The plan: s = x + y, t = reduce_sum(s) on f32[E] (default 1,024 elements), one stage on
 * the device, made once. It is called N times in a row (default 10,000), each call's s being
 * the next call's x, in two ways:
 *   host      loom_run on host tensors: every call writes its inputs to the device and
 *             reads its results back (on cpu0 it reads them in place);
 *   resident  loom_run_buffers on buffers of the context's memory manager: the inputs
 *             stay on the device and each call's result is the next call's input, no copy.
 * Per call is the best of --repeats chains of N calls (after a warm-up chain), divided by N,
 * beside NumPy's time for the same call (x + y, then its sum) where python3 has NumPy.
 * Each chain's result is checked against x + N y computed here, and the two ways against each
 * other (the same bits: they run the same kernels), and the resident calls must copy nothing
 * (the memory manager's bytes_in and bytes_out of every node stay put): a failure exits 1.
 * Goal (issue 18): under 20 us per resident call on cpu0 and on PoCL. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "loom/loom.h"

typedef struct calls_args {
  int64_t calls, size;
  int32_t repeats;
  const char *devices; /* NULL: cpu0 and every OpenCL device */
  const char *python;  /* NULL: python3, then /usr/bin/python3 */
  bool no_python;
} calls_args;

static void usage(FILE *f) {
  fputs(
      "usage: loom-bench calls [--calls N] [--size E] [--repeats R] [--devices LIST]\n"
      "                        [--python PROGRAM | --no-python] [--tiny]\n"
      "  a one-stage plan, s = x + y and t = reduce_sum(s) on f32[E] (default E = 1024), called\n"
      "  N times in a row (default N = 10000), each call's s the next call's x:\n"
      "    host      loom_run on host tensors (inputs written in, results read back)\n"
      "    resident  loom_run_buffers on the memory manager's buffers (nothing copied)\n"
      "  --repeats R     timed chains after one warm-up chain; the best is kept (default 3)\n"
      "  --devices LIST  the devices, as LOOM_DEVICES selects them (cpu0,ocl0; opencl); default:\n"
      "                  cpu0 and every OpenCL device\n"
      "  --python PROGRAM the interpreter that times NumPy on the same call: a program on\n"
      "                  PATH or a path, run without a shell (default: python3, else\n"
      "                  /usr/bin/python3); --no-python: none\n"
      "  --tiny          N = 200, E = 64, R = 1, no NumPy: a quick check that everything runs\n"
      "  goal (issue 18): under 20 us per resident call on cpu0 and on PoCL\n",
      f);
}

static int parse_args(int argc, char **argv, calls_args *a) {
  *a = (calls_args){.calls = 10000, .size = 1024, .repeats = 3};
  bool tiny = false;
  const bench_opt opts[] = {
      BENCH_OPT_INT("calls", BENCH_I64, &a->calls, 1, 100000000, "a count from 1 to 10^8"),
      BENCH_OPT_INT("size", BENCH_I64, &a->size, 1, (int64_t)1 << 24, "elements from 1 to 2^24"),
      BENCH_OPT_INT("repeats", BENCH_I32, &a->repeats, 1, 1000, "a count from 1 to 1000"),
      BENCH_OPT_TEXT("devices", &a->devices, "a list of devices"),
      BENCH_OPT_TEXT("python", &a->python, "an interpreter"),
      BENCH_OPT_FLAG("no-python", &a->no_python),
      BENCH_OPT_FLAG("tiny", &tiny),
      BENCH_OPT_END,
  };
  bench_cli b = {.mode = "calls", .synopsis = "loom-bench calls [options]", .usage = usage, .opts = opts};
  int rc = bench_args(&b, argc, argv);
  if (rc) return rc;
  if (tiny) { /* over the sizes given: --tiny is a quick check, whatever else is said */
    a->calls = 200;
    a->size = 64;
    a->repeats = 1;
    a->no_python = true;
  }
  if (a->python && a->no_python) return bench_fail("calls", 2, "give --python or --no-python, not both");
  return 0;
}

/* ---- the plan ----------------------------------------------------------------------------------- */

static loom_type vec(int64_t n) {
  loom_type t;
  loom_type_make(LOOM_F32, 1, &n, &t);
  return t;
}

/* step(x, y) = (x + y, sum(x + y)), planned as one stage on `device`. */
static loom_status make_plan(const char *device, int64_t size, loom_plan **out) {
  loom_graph *g = NULL, *opt = NULL;
  *out = NULL;
  loom_status s = loom_graph_create("step", &g);
  if (s) return s;
  loom_type t = vec(size);
  int64_t axis = 0;
  loom_value x = loom_graph_param(g, "x", &t), y = loom_graph_param(g, "y", &t);
  loom_value v[2];
  v[0] = loom_binary(g, LOOM_OP_ADD, x, y);
  v[1] = loom_reduce(g, LOOM_OP_REDUCE_SUM, v[0], 1, &axis, false);
  s = loom_graph_return(g, v, 2);
  if (!s) s = loom_graph_verify(g);
  loom_runner runner = {"", (int64_t)64 << 20};
  snprintf(runner.device, sizeof runner.device, "%s", device);
  if (!s) s = loom_graph_optimize_for_runners(g, &runner, 1, NULL, &opt, NULL, NULL, 0);
  if (!s) s = loom_plan_split_by_memory(opt, &runner, 1, out);
  loom_graph_destroy(opt);
  loom_graph_destroy(g);
  return s;
}

/* ---- checks ------------------------------------------------------------------------------------- */

/* x0 + calls y, one f32 add at a time as the device adds. */
static float *reference(const float *x0, const float *y, int64_t n, int64_t calls) {
  float *r = malloc(sizeof *r * (size_t)n);
  if (!r) return NULL;
  for (int64_t i = 0; i < n; i++) {
    float v = x0[i];
    for (int64_t k = 0; k < calls; k++) v = v + y[i];
    r[i] = v;
  }
  return r;
}

/* Whether t is the sum of ref[0..n) within f32 summation error. */
static bool sum_ok(const float *ref, int64_t n, float t) {
  double sum = 0, mag = 0;
  for (int64_t i = 0; i < n; i++) {
    sum += ref[i];
    mag += fabs(ref[i]);
  }
  return fabs((double)t - sum) <= 1e-5 * mag + 1e-6;
}

/* Bytes copied between memory nodes so far: every node's bytes_in plus bytes_out. */
static int64_t bytes_copied(loom_context *ctx) {
  loom_mem_manager *m = NULL;
  int64_t total = 0;
  if (loom_context_memory(ctx, &m)) return -1;
  for (int32_t i = 0; i < loom_mem_node_count(m); i++) {
    loom_mem_node_stats st;
    if (loom_mem_stats(m, i, &st)) return -1;
    total += st.bytes_in + st.bytes_out;
  }
  return total;
}

/* ---- the two ways ------------------------------------------------------------------------------- */

typedef struct chain {
  loom_context *ctx;
  const loom_plan *plan;
  const loom_tensor *in; /* x0, y */
  int64_t calls;
  float *ref;
} chain;

/* N host calls from x0; seconds, or -1 (message printed). The last s goes to last_s. */
static double host_chain(const chain *c, const char *id, float *last_s) {
  loom_tensor x = c->in[0], out[2] = {0};
  loom_tensor ins[2] = {x, c->in[1]};
  loom_tensor prev = {0}; /* the previous call's s, owned */
  double t0 = bench_now();
  for (int64_t k = 0; k < c->calls; k++) {
    loom_status s = loom_run(c->ctx, c->plan, NULL, ins, 2, out, 2, NULL);
    if (s) {
      fprintf(stderr, "loom-bench calls: %s: host call %lld: %s\n", id, (long long)k, loom_last_error());
      loom_tensor_deinit(&prev);
      return -1;
    }
    loom_tensor_deinit(&prev);
    loom_tensor_deinit(&out[1]);
    prev = out[0];
    ins[0] = prev;
  }
  double t = bench_now() - t0;
  int64_t n = c->in[0].type.dims[0];
  memcpy(last_s, prev.data, sizeof *last_s * (size_t)n);
  loom_tensor_deinit(&prev);
  return t;
}

/* The device's memory node in ctx's manager. */
static loom_status device_node(loom_context *ctx, const char *id, loom_mem_manager **m, int32_t *node) {
  int32_t index;
  loom_status s = loom_context_memory(ctx, m);
  if (!s) s = loom_context_find_device(ctx, id, &index);
  return s ? s : loom_mem_device_node(*m, index, node);
}

/* N resident calls from x0: x0 and y written into buffers on the device once (outside the
 * timing), then each call's s buffer is the next call's x. Seconds until the last s is read
 * back into last_s, or -1 (message printed); *copied: the bytes the memory manager moved
 * during the calls (before that read). One more call's t goes to *last_t. */
static double resident_chain(const chain *c, const char *id, float *last_s, float *last_t, int64_t *copied) {
  loom_mem_manager *m = NULL;
  int32_t node;
  loom_buffer *x = NULL, *y = NULL, *out[2] = {NULL, NULL};
  int64_t n = c->in[0].type.dims[0], bytes = n * (int64_t)sizeof(float);
  double t = -1;
  loom_status s = device_node(c->ctx, id, &m, &node);
  if (!s) s = loom_buffer_allocate(m, bytes, LOOM_F32, node, LOOM_MEM_DEVICE_LOCAL, &x);
  if (!s) s = loom_buffer_allocate(m, bytes, LOOM_F32, node, LOOM_MEM_DEVICE_LOCAL, &y);
  if (!s) s = loom_buffer_write(x, 0, c->in[0].data, bytes);
  if (!s) s = loom_buffer_write(y, 0, c->in[1].data, bytes);
  if (s) {
    fprintf(stderr, "loom-bench calls: %s: the input buffers: %s\n", id, loom_last_error());
    goto done;
  }
  int64_t before = bytes_copied(c->ctx);
  double t0 = bench_now();
  for (int64_t k = 0; k < c->calls; k++) {
    loom_buffer *ins[2] = {x, y};
    s = loom_run_buffers(c->ctx, c->plan, NULL, ins, 2, out, 2, NULL);
    if (s) {
      fprintf(stderr, "loom-bench calls: %s: resident call %lld: %s\n", id, (long long)k, loom_last_error());
      goto done;
    }
    loom_buffer_free(x);
    loom_buffer_free(out[1]);
    out[1] = NULL;
    x = out[0];
    out[0] = NULL;
  }
  *copied = bytes_copied(c->ctx) - before;
  /* Until the last result is back: a device may still be running calls that returned. */
  s = loom_buffer_read(x, 0, last_s, bytes);
  t = bench_now() - t0;
  loom_buffer *ins[2] = {x, y};
  /* One more call for a t to check: from x0 + (N - 1) y, as the chain's last call. */
  if (!s) s = loom_run_buffers(c->ctx, c->plan, NULL, ins, 2, out, 2, NULL);
  if (!s) s = loom_buffer_read(out[1], 0, last_t, sizeof *last_t);
  if (s) {
    fprintf(stderr, "loom-bench calls: %s: reading the results: %s\n", id, loom_last_error());
    t = -1;
  }
done:
  loom_buffer_free(x);
  loom_buffer_free(y);
  loom_buffer_free(out[0]);
  loom_buffer_free(out[1]);
  return t;
}

/* ---- one device --------------------------------------------------------------------------------- */

typedef struct device_row {
  double host, resident; /* seconds per call; NaN: failed */
  double copied;         /* bytes per resident call */
} device_row;

static int bench_device(loom_context *ctx, const char *id, const calls_args *a, const loom_tensor *in,
                        const float *ref, const float *ref_next, device_row *row) {
  loom_plan *plan = NULL;
  int64_t n = a->size;
  int rc = 0;
  *row = (device_row){NAN, NAN, NAN};
  float *hs = malloc(sizeof *hs * (size_t)n), *rs = malloc(sizeof *rs * (size_t)n);
  if (!hs || !rs) {
    fprintf(stderr, "loom-bench calls: out of memory\n");
    rc = 1;
    goto done;
  }
  if (make_plan(id, n, &plan)) {
    fprintf(stderr, "loom-bench calls: %s: the plan: %s\n", id, loom_last_error());
    rc = 1;
    goto done;
  }
  chain c = {ctx, plan, in, a->calls, NULL};
  for (int32_t r = 0; r <= a->repeats && rc == 0; r++) {
    float last_t = 0;
    int64_t copied = 0;
    double th = host_chain(&c, id, hs), tr = resident_chain(&c, id, rs, &last_t, &copied);
    if (th < 0 || tr < 0) {
      rc = 1;
      break;
    }
    if (r == 0) { /* the warm-up chain's results */
      /* s is exact (one f32 add per call, as computed here); t after one more call. */
      if (memcmp(hs, ref, sizeof *hs * (size_t)n) != 0 || memcmp(rs, ref, sizeof *rs * (size_t)n) != 0 ||
          !sum_ok(ref_next, n, last_t)) {
        fprintf(stderr, "loom-bench calls: %s: a wrong result (%s)\n", id,
                memcmp(hs, ref, sizeof *hs * (size_t)n)   ? "host calls' s"
                : memcmp(rs, ref, sizeof *rs * (size_t)n) ? "resident calls' s"
                                                          : "t");
        rc = 1;
      }
      continue;
    }
    if (copied != 0) {
      fprintf(stderr, "loom-bench calls: %s: the resident calls copied %lld bytes between memory nodes\n", id,
              (long long)copied);
      rc = 1;
    }
    if (isnan(row->host) || th < row->host * (double)a->calls) row->host = th / (double)a->calls;
    if (isnan(row->resident) || tr < row->resident * (double)a->calls) row->resident = tr / (double)a->calls;
    row->copied = (double)copied / (double)a->calls;
  }
done:
  free(hs);
  free(rs);
  loom_plan_destroy(plan);
  return rc;
}

/* ---- NumPy -------------------------------------------------------------------------------------- */

/* NumPy's seconds per call of the same step chained as here; -1 without python3 or NumPy. */
static double numpy_per_call(const char *python, const calls_args *a) {
  char script[1024];
  snprintf(script, sizeof script,
           "import time, numpy\nx0 = numpy.random.rand(%lld).astype('float32')\ny = "
           "numpy.random.rand(%lld).astype('float32')\nbest = 1e9\nfor r in range(%d):\n x = x0\n t0 = "
           "time.perf_counter()\n for i in range(%lld):\n  x = x + y\n  t = x.sum()\n best = min(best, "
           "time.perf_counter() - t0)\nprint(best / %lld)\n",
           (long long)a->size, (long long)a->size, (int)a->repeats + 1, (long long)a->calls,
           (long long)a->calls);
  return bench_python(python, script);
}

static void print_us(double seconds) {
  if (isnan(seconds))
    printf(" %12s", "-");
  else
    printf(" %9.2f us", seconds * 1e6);
}

int loom_bench_calls(int argc, char **argv) {
  calls_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;
  loom_context *ctx = NULL;
  if (loom_context_create(&(loom_context_options){a.devices}, &ctx)) {
    if (a.devices) {
      fprintf(stderr, "loom-bench calls: --devices %s: %s\n", a.devices, loom_last_error());
      return 2;
    }
    fprintf(stderr, "loom-bench calls: %s\n", loom_last_error());
    return 1;
  }
  loom_tensor in[2];
  memset(in, 0, sizeof in);
  loom_type t = vec(a.size);
  float *ref = NULL, *ref_next = NULL;
  for (int32_t p = 0; p < 2 && rc == 0; p++)
    if (loom_tensor_init(&in[p], &t) || loom_tensor_fill_random(&in[p], 7, (uint64_t)p)) rc = 1;
  if (!rc) {
    ref = reference(in[0].data, in[1].data, a.size, a.calls);
    ref_next = reference(in[0].data, in[1].data, a.size, a.calls + 1);
    if (!ref || !ref_next) rc = 1;
  }
  if (rc) {
    fprintf(stderr, "loom-bench calls: the inputs: %s\n", loom_last_error());
    goto done;
  }
  printf(
      "loom-bench calls: a plan of s = x + y, t = reduce_sum(s) on f32[%lld], called %lld times in a row\n"
      "(each call's s the next call's x); per call: the best of %d chains after a warm-up chain\n"
      "  host:     loom_run on host tensors\n"
      "  resident: loom_run_buffers on buffers that stay on the device\n\n",
      (long long)a.size, (long long)a.calls, (int)a.repeats);
  printf("%-8s %12s %12s %16s\n", "device", "host", "resident", "copied/call");
  int measured = 0, opencl = 0;
  for (int32_t i = 0; i < loom_context_device_count(ctx); i++) {
    loom_device_info d;
    if (loom_context_device_info(ctx, i, &d)) {
      rc = 1;
      break;
    }
    if (!a.devices && strcmp(d.id, "cpu0") != 0 && !(d.backends & LOOM_BACKEND_OPENCL)) continue;
    opencl += (d.backends & LOOM_BACKEND_OPENCL) != 0;
    device_row row;
    rc |= bench_device(ctx, d.id, &a, in, ref, ref_next, &row);
    printf("%-8s", d.id);
    print_us(row.host);
    print_us(row.resident);
    if (isnan(row.copied))
      printf(" %16s\n", "-");
    else
      printf(" %14.0f B\n", row.copied);
    measured++;
  }
  if (!a.devices && opencl == 0) printf("(no OpenCL device: cpu0 only)\n");
  if (measured == 0) {
    fprintf(stderr, "loom-bench calls: no device to measure\n");
    rc = 1;
  }
  if (!a.no_python) {
    static const char *const fallback[] = {"python3", "/usr/bin/python3"};
    const char *const *tries = a.python ? &a.python : fallback;
    double np = -1;
    const char *used = NULL;
    for (int32_t i = 0; i < (a.python ? 1 : 2) && np < 0; i++)
      if ((np = numpy_per_call(tries[i], &a)) >= 0) used = tries[i];
    if (np >= 0)
      printf("\n%-8s %9.2f us   (the same calls in %s)\n", "NumPy", np * 1e6, used);
    else
      printf("\nNumPy: not measured (no python3 with numpy%s%s)\n", a.python ? ": " : "",
             a.python ? a.python : "");
  }
  printf("\ngoal (issue 18): under 20 us per resident call on cpu0 and on PoCL\n");
done:
  free(ref);
  free(ref_next);
  loom_tensor_deinit(&in[0]);
  loom_tensor_deinit(&in[1]);
  loom_context_destroy(ctx);
  return rc;
}
