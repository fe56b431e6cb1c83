/* loom-bench attention: softmax attention, o = softmax(q k^T / sqrt(dh)) v, with an n x n score
 * matrix (default 4096 x 4096 f32: 64 MiB) under a limit smaller than the scores (default
 * 16 MiB), against the same graph unconstrained (issues 14 and 35). Four runs: unconstrained
 * (every rewrite but chunk and attention: the graph as written), under the limit with every
 * rewrite (the attention rewrite's one streaming op), under the limit without attention and
 * fuse (chunked), and without attention only (chunked, then fused in the pieces). Printed per run: the best
 * time, its ratio to the unconstrained run (unconstrained / run: 1.00 is as fast), the run meter's and the
 * device node's peaks, and the largest difference from the unconstrained result relative to its largest
 * magnitude. Then, where python3 has NumPy, the NumPy chunk loop a user would write (pieces of q's rows whose
 * scores fit the limit) in a child, and loom-run against a python3 process end to end on the
 * same .npy inputs (issue 35's acceptance 2 measures loom-run). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

extern char **environ;

typedef struct attention_args {
  int64_t n, dh, limit;
  int32_t repeats;
  const char *device;
  const char *python; /* NULL: no NumPy side */
  bool no_python;
} attention_args;

static void usage(FILE *f) {
  fputs(
      "usage: loom-bench attention [--n N] [--dh D] [--limit BYTES] [--device ID] [--repeats R]\n"
      "                            [--python PROGRAM | --no-python]\n"
      "  defaults: n = 4096 (the scores are n x n f32), dh = 64, limit 16MiB, cpu0, R = 3\n"
      "  Beside Loom's runs: NumPy's chunk loop (rows of q in pieces whose scores fit the limit)\n"
      "  timed in a python3 child, and loom-run on the same inputs as .npy files timed end to end\n"
      "  (the process's wall time) against a python3 process doing the same with NumPy.\n",
      f);
}

static int parse_args(int argc, char **argv, attention_args *a) {
  *a = (attention_args){4096, 64, 16 << 20, 3, "cpu0", "/usr/bin/python3", false};
  const bench_opt opts[] = {
      BENCH_OPT_INT("n", BENCH_I64, &a->n, 1, 1 << 20, "a size from 1 to 2^20"),
      BENCH_OPT_INT("dh", BENCH_I64, &a->dh, 1, 1 << 16, "a size from 1 to 2^16"),
      BENCH_OPT_INT("repeats", BENCH_I32, &a->repeats, 1, 100, "a count from 1 to 100"),
      BENCH_OPT_TEXT("device", &a->device, "a device id"),
      BENCH_OPT_BYTES("limit", &a->limit, 1, INT64_MAX),
      BENCH_OPT_TEXT("python", &a->python, "a program"),
      BENCH_OPT_FLAG("no-python", &a->no_python),
      BENCH_OPT_END,
  };
  bench_cli b = {
      .mode = "attention", .synopsis = "loom-bench attention [options]", .usage = usage, .opts = opts};
  return bench_args(&b, argc, argv);
}

static void attention_text(const attention_args *a, char *text, size_t size) {
  long long n = (long long)a->n, d = (long long)a->dh;
  snprintf(text, size,
           "graph attention(q: f32[%lld,%lld], k: f32[%lld,%lld], v: f32[%lld,%lld]) {\n"
           "  kt = transpose k perm=[1,0]\n"
           "  s0 = dot q kt\n"
           "  scale = constant %.9g : f32[]\n"
           "  s = mul s0 scale\n"
           "  mx = reduce_max s axes=[1] keepdims=true\n"
           "  c = sub s mx\n"
           "  e = exp c\n"
           "  z = reduce_sum e axes=[1] keepdims=true\n"
           "  p = div e z\n"
           "  o = dot p v\n"
           "  return o\n}\n",
           n, d, n, d, n, d, 1.0 / sqrt((double)a->dh));
}

static loom_graph *attention_graph(const attention_args *a) {
  char text[1024];
  attention_text(a, text, sizeof text);
  return bench_parse(text, "attention");
}

/* ---- NumPy's chunk loop, and both sides end to end ---- */

/* Python defining run(): o = softmax(q k^T / sqrt(dh)) v over pieces of q's rows whose scores
 * (rows x n f32) fit the limit, in place as a careful NumPy user writes it. */
static void numpy_loop(const attention_args *a, char *buf, size_t size) {
  long long rows = a->limit / (4 * a->n);
  rows = rows < 1 ? 1 : rows > a->n ? (long long)a->n : rows;
  snprintf(buf, size,
           "import numpy\n"
           "def run():\n"
           " n = q.shape[0]\n o = numpy.empty((n, v.shape[1]), numpy.float32)\n kt = k.T\n"
           " for i in range(0, n, %lld):\n"
           "  s = q[i:i + %lld] @ kt\n  s *= numpy.float32(%.9g)\n  s -= s.max(axis=1, keepdims=True)\n"
           "  numpy.exp(s, out=s)\n  s /= s.sum(axis=1, keepdims=True)\n  o[i:i + %lld] = s @ v\n"
           " return o\n",
           rows, rows, 1.0 / sqrt((double)a->dh), rows);
}

/* The chunk loop's best seconds over R calls in a child (after a warm-up), or -1. */
static double numpy_in_process(const attention_args *a) {
  char loop[1024], setup[2048];
  numpy_loop(a, loop, sizeof loop);
  long long n = (long long)a->n, d = (long long)a->dh;
  snprintf(setup, sizeof setup,
           "%s\nq, k, v = (numpy.random.rand(%lld, %lld).astype(numpy.float32) * 2 - 1 for _ in range(3))\n",
           loop, n, d);
  bench_py py;
  if (!bench_py_open(&py, a->python, setup)) return -1;
  double best = -1;
  for (int32_t r = 0; r <= a->repeats; r++) {
    double t = bench_py_call(&py);
    if (t < 0) best = -1;
    if (t < 0) break;
    if (r > 0 && (best < 0 || t < best)) best = t;
  }
  bench_py_close(&py);
  return best;
}

/* The wall seconds of running argv (stdout and stderr to /dev/null), or -1 when it does not
 * start or exits with a failure. */
static double wall_of(char *const argv[]) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  double t = bench_now();
  int err = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  t = bench_now() - t;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? t : -1;
}

/* loom-run beside this program (the build tree and an install both put the tools together). */
static bool loom_run_path(char *buf, size_t size) {
  ssize_t len = readlink("/proc/self/exe", buf, size - 16);
  if (len <= 0) return false;
  buf[len] = '\0';
  char *slash = strrchr(buf, '/');
  if (!slash) return false;
  strcpy(slash + 1, "loom-run");
  return access(buf, X_OK) == 0;
}

typedef struct e2e_times {
  double loom_run, numpy; /* best wall seconds, -1 when not measured */
} e2e_times;

/* Writes the graph and inputs to dir, then times loom-run and a NumPy script on them, R rounds
 * alternating. */
static void end_to_end(const attention_args *a, const loom_tensor in[3], const char *dir, e2e_times *t) {
  t->loom_run = t->numpy = -1;
  char tool[4096], lir[4200], q[4200], k[4200], v[4200], out[4200], lim[32], loop[1024], script[4096];
  if (!loom_run_path(tool, sizeof tool)) return;
  snprintf(lir, sizeof lir, "%s/attention.lir", dir);
  const char *names[3] = {"q", "k", "v"};
  char *paths[3] = {q, k, v};
  for (int i = 0; i < 3; i++) {
    snprintf(paths[i], sizeof q, "%s=%s/%s.npy", names[i], dir, names[i]);
    if (loom_tensor_save_npy(paths[i] + 2, &in[i])) return;
  }
  char text[1024];
  attention_text(a, text, sizeof text);
  FILE *f = fopen(lir, "w");
  if (!f || fputs(text, f) == EOF) {
    if (f) fclose(f);
    return;
  }
  fclose(f);
  snprintf(out, sizeof out, "%s/out", dir);
  snprintf(lim, sizeof lim, "%lld", (long long)a->limit);
  char *run_argv[] = {tool, lir, "--in", q, "--in", k, "--in", v, "--limit", lim, "--out-dir", out, NULL};
  numpy_loop(a, loop, sizeof loop);
  snprintf(script, sizeof script,
           "%s\nd = '%s'\nq, k, v = (numpy.load(d + '/' + x + '.npy') for x in 'qkv')\n"
           "numpy.save(d + '/o_numpy.npy', run())\n",
           loop, dir);
  char *py_argv[] = {(char *)a->python, "-c", script, NULL};
  bool py = !a->no_python;
  for (int32_t r = 0; r <= a->repeats; r++) { /* round 0 warms the page cache and PoCL's */
    double lr = wall_of(run_argv), np = py ? wall_of(py_argv) : -1;
    if (r == 0) continue;
    if (lr >= 0 && (t->loom_run < 0 || lr < t->loom_run)) t->loom_run = lr;
    if (np >= 0 && (t->numpy < 0 || np < t->numpy)) t->numpy = np;
  }
}

/* The NumPy and end-to-end lines after Loom's table. */
static void compare_numpy(const attention_args *a, const loom_tensor in[3], const bench_run *limited) {
  double np = a->no_python ? -1 : numpy_in_process(a);
  if (np > 0 && limited->ok)
    printf("NumPy chunk loop %10.4f s (best of %d in a python3 child); NumPy / Loom under the limit %.2f\n",
           np, (int)a->repeats, np / limited->best_seconds);
  else if (!a->no_python)
    printf("NumPy chunk loop: not measured (no %s with numpy)\n", a->python);
  char dir[] = "/tmp/loom-bench-attention-XXXXXX";
  if (!mkdtemp(dir)) return;
  e2e_times t;
  end_to_end(a, in, dir, &t);
  if (t.loom_run > 0) {
    printf("end to end (process wall, inputs from .npy, result to .npy): loom-run %.3f s", t.loom_run);
    if (t.numpy > 0)
      printf(", python3 + NumPy chunk loop %.3f s; NumPy / loom-run %.2f", t.numpy, t.numpy / t.loom_run);
    if (np > 0) printf("; NumPy's loop alone / loom-run %.2f", np / t.loom_run);
    printf("\n");
  } else {
    printf("end to end: loom-run did not run (not beside loom-bench, or it failed)\n");
  }
  char rm[128];
  snprintf(rm, sizeof rm, "%s/out", dir);
  const char *files[] = {"q.npy", "k.npy", "v.npy", "attention.lir", "o_numpy.npy", "out/o.npy"};
  for (int i = 0; i < 6; i++) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    unlink(path);
  }
  rmdir(rm);
  rmdir(dir);
}

static double rel_diff(const loom_tensor *x, const loom_tensor *ref) {
  int64_t n = 0;
  loom_type_elements(&ref->type, &n);
  const float *u = x->data, *v = ref->data;
  double diff = 0, mag = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)u[i] - (double)v[i]);
    if (!(e <= diff)) diff = e; /* NaN counts */
    if (fabs((double)v[i]) > mag) mag = fabs((double)v[i]);
  }
  return mag > 0 ? diff / mag : diff;
}

int loom_bench_attention(int argc, char **argv) {
  attention_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;
  loom_graph *g = attention_graph(&a);
  loom_tensor in[3] = {0};
  bool ok = g != NULL;
  for (int32_t p = 0; p < 3 && ok; p++) {
    ok = !loom_tensor_init(&in[p], loom_value_type(g, loom_graph_param_at(g, p))) &&
         !loom_tensor_fill_random(&in[p], 3, (uint64_t)p);
    if (!ok) fprintf(stderr, "loom-bench attention: inputs: %s\n", loom_last_error());
  }
  if (!ok) {
    for (int32_t p = 0; p < 3; p++) loom_tensor_deinit(&in[p]);
    loom_graph_destroy(g);
    return 1;
  }
  static const char *const off[] = {"attention", "fuse"};
  enum { RUNS = 4 };
  bench_run runs[RUNS];
  const char *names[RUNS] = {"unconstrained", "limit", "limit, unfused", "limit, chunked"};
  bench_plan_run(a.device, g, in, 3, 0, off, 1, a.repeats, &runs[0]);
  bench_plan_run(a.device, g, in, 3, a.limit, NULL, 0, a.repeats, &runs[1]);
  bench_plan_run(a.device, g, in, 3, a.limit, off, 2, a.repeats, &runs[2]);
  bench_plan_run(a.device, g, in, 3, a.limit, off, 1, a.repeats, &runs[3]);
  char lim[32], sc[32];
  printf("softmax attention on %s: n = %lld, dh = %lld, f32 (scores %s), limit %s; best of %d runs\n",
         a.device, (long long)a.n, (long long)a.dh, loom_bytes_format(a.n * a.n * 4, sc, sizeof sc),
         loom_bytes_format(a.limit, lim, sizeof lim), (int)a.repeats);
  printf("%-16s %10s %8s %12s %12s %12s\n", "run", "seconds", "ratio", "meter peak", "node peak",
         "vs unconstr.");
  rc = 0;
  for (int32_t i = 0; i < RUNS; i++) {
    const bench_run *r = &runs[i];
    char meter[32], node[32];
    if (!r->ok) {
      printf("%-16s did not run: %s\n", names[i], r->why);
      rc = 1;
      continue;
    }
    double diff = runs[0].ok ? rel_diff(&r->out, &runs[0].out) : NAN;
    bool bad = i > 0 && (r->meter_peak > a.limit || r->node_peak > a.limit || !(diff <= 1e-4));
    printf("%-16s %10.3f %8.2f %12s %12s %12.1e%s\n", names[i], r->best_seconds,
           runs[0].ok ? runs[0].best_seconds / r->best_seconds : NAN,
           loom_bytes_format(r->meter_peak, meter, sizeof meter),
           r->node_peak < 0 ? "?" : loom_bytes_format(r->node_peak, node, sizeof node), diff,
           bad ? "  FAILED (over the limit or off the unconstrained result)" : "");
    rc |= bad;
  }
  compare_numpy(&a, in, &runs[1]);
  for (int32_t i = 0; i < RUNS; i++) loom_tensor_deinit(&runs[i].out);
  for (int32_t p = 0; p < 3; p++) loom_tensor_deinit(&in[p]);
  loom_graph_destroy(g);
  return rc;
}
