/* loom-bench onnx MODEL.onnx: an ONNX model run whole on cpu0 by Loom beside a peer running
 * the same graph with the same weights, inputs and threads, in one run: Loom's runs, the
 * peer's in a child interpreter, Loom's again (issue 31, acceptance 5). The peer is PyTorch (python3-torch)
 * executing the model's nodes eagerly with torch operations, as the exported module's forward does, or else
 * onnxruntime; with neither, Loom is timed alone and the report says the peer is missing. Both sides read the
 * same random inputs (written to a temporary folder as .npy), and the peer's first output is compared with
 * Loom's. Loom's threads are OpenMP's (OMP_NUM_THREADS); the peer is given the same number. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

enum { ONNX_MAX_INPUTS = 16 };

/* The peer's side: defines run(), which runs the model once. LOOM_BENCH_ONNX_* name the
 * model, the folder with in_K.npy and the threads; the first run's first output is saved as
 * peer_0.npy there. Torch: each node as a torch operation (the ops a PyTorch export writes). */
static const char *const peer_setup =
    "import os, numpy as np, onnx\n"
    "from onnx import numpy_helper\n"
    "d = os.environ['LOOM_BENCH_ONNX_DIR']; threads = int(os.environ['LOOM_BENCH_ONNX_THREADS'])\n"
    "m = onnx.load(os.environ['LOOM_BENCH_ONNX_MODEL'])\n"
    "inits = {t.name for t in m.graph.initializer}\n"
    "names = [i.name for i in m.graph.input if i.name not in inits]\n"
    "feeds = [np.load(f'{d}/in_{k}.npy') for k in range(len(names))]\n"
    "if os.environ['LOOM_BENCH_ONNX_PEER'] == 'torch':\n"
    "  import torch\n"
    "  torch.set_num_threads(threads)\n"
    "  W = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in m.graph.initializer}\n"
    "  A = lambda n: {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}\n"
    "  def perm(x, p): return x.permute(*p) if p else x.permute(*reversed(range(x.dim())))\n"
    "  def gemm(a, b, c=None, alpha=1.0, beta=1.0, transA=0, transB=0):\n"
    "    y = alpha * ((a.t() if transA else a) @ (b.t() if transB else b))\n"
    "    return y if c is None else y + beta * c\n"
    "  def slc(x, st, en, ax=None, sp=None):\n"
    "    ax = ax.tolist() if ax is not None else list(range(len(st))); sp = sp.tolist() if sp is not None "
    "else [1] * len(ax)\n"
    "    ix = [slice(None)] * x.dim()\n"
    "    for a, s, e, k in zip(ax, st.tolist(), en.tolist(), sp): ix[a] = slice(s, min(e, x.shape[a]), k)\n"
    "    return x[tuple(ix)]\n"
    "  def ln(x, g, b=None, axis=-1, epsilon=1e-5, **_):\n"
    "    return torch.nn.functional.layer_norm(x, x.shape[axis:], g, b, epsilon)\n"
    "  def const(value=None, **_): return torch.from_numpy(numpy_helper.to_array(value).copy())\n"
    "  def rs(x, s, allowzero=0):\n"
    "    s = [x.shape[i] if v == 0 and not allowzero else v for i, v in enumerate(s.tolist())]\n"
    "    return x.reshape(s)\n"
    "  OPS = {'Add': lambda a, b: a + b, 'Sub': lambda a, b: a - b, 'Mul': lambda a, b: a * b,\n"
    "    'Div': lambda a, b: a / b if a.is_floating_point() else torch.div(a, b, rounding_mode='floor'),\n"
    "    'MatMul': torch.matmul, 'Gemm': gemm, 'Erf': torch.erf, 'Sqrt': torch.sqrt, 'Relu': torch.relu,\n"
    "    'Tanh': torch.tanh, 'Sigmoid': torch.sigmoid, 'Exp': torch.exp, 'Pow': torch.pow,\n"
    "    'Softmax': lambda x, axis=-1: torch.softmax(x, axis), 'LayerNormalization': ln,\n"
    "    'Transpose': lambda x, perm=None: globals()['perm'](x, perm), 'Reshape': rs, 'Constant': const,\n"
    "    'Shape': lambda x: torch.tensor(x.shape, dtype=torch.int64), 'Slice': slc,\n"
    "    'Gather': lambda x, i, axis=0: torch.index_select(x, axis, (i % "
    "x.shape[axis]).reshape(-1)).reshape(\n"
    "        x.shape[:axis] + i.shape + x.shape[axis + 1:]),\n"
    "    'Unsqueeze': lambda x, a: x.reshape([*x.shape[:int(a)], 1, *x.shape[int(a):]]) if a.dim() == 0 else "
    "x.reshape([*x.shape[:int(a[0])], 1, *x.shape[int(a[0]):]]),\n"
    "    'Concat': lambda *xs, axis=0: torch.cat(xs, axis), 'Cast': lambda x, to=1: x.float() if to == 1 "
    "else x.long(),\n"
    "    'ReduceMean': lambda x, axes=None, keepdims=1: x.mean(axes, keepdim=bool(keepdims)),\n"
    "    'Identity': lambda x: x}\n"
    "  ins = [torch.from_numpy(f) for f in feeds]\n"
    "  def run():\n"
    "    v = dict(W); v.update(zip(names, ins))\n"
    "    with torch.no_grad():\n"
    "      for n in m.graph.node:\n"
    "        y = OPS[n.op_type](*[v[i] if i else None for i in n.input], **A(n))\n"
    "        v[n.output[0]] = y\n"
    "    return v[m.graph.output[0].name]\n"
    "  np.save(f'{d}/peer_0.npy', run().numpy())\n"
    "else:\n"
    "  import onnxruntime as ort\n"
    "  so = ort.SessionOptions(); so.intra_op_num_threads = threads; so.inter_op_num_threads = 1\n"
    "  s = ort.InferenceSession(os.environ['LOOM_BENCH_ONNX_MODEL'], so, "
    "providers=['CPUExecutionProvider'])\n"
    "  fd = dict(zip(names, feeds))\n"
    "  def run(): return s.run(None, fd)[0]\n"
    "  np.save(f'{d}/peer_0.npy', run())\n";

static void usage(FILE *f) {
  fputs(
      "usage: loom-bench onnx MODEL.onnx [--reps R] [--python CMD | --no-python]\n"
      "  The model run whole on cpu0 (planned once, rewrites as loom-run applies them) beside PyTorch\n"
      "  running its nodes with the same weights, inputs and threads (else onnxruntime): Loom's runs,\n"
      "  the peer's, Loom's again; the best of R runs each (default 3) after a warm-up, their ratio, and\n"
      "  the largest difference of the first outputs. The inputs are random (fixed seed); the threads\n"
      "  are OMP_NUM_THREADS on both sides.\n"
      "  --reps R      timed runs per side (default 3)\n"
      "  --python CMD  the interpreter with python3-onnx and the peer (default /usr/bin/python3)\n"
      "  --no-python   Loom alone\n",
      f);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Random inputs of the graph's parameter types (a fixed LCG: floats in [-1, 1), others 0),
 * each saved as DIR/in_K.npy for the peer. */
static int make_inputs(const loom_graph *g, const char *dir, loom_tensor *in, int32_t *n_in) {
  *n_in = loom_graph_param_count(g);
  if (*n_in > ONNX_MAX_INPUTS)
    return bench_fail("onnx", 1, "the model has %d inputs, at most %d", *n_in, ONNX_MAX_INPUTS);
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int32_t k = 0; k < *n_in; k++) {
    const loom_type *t = loom_value_type(g, loom_graph_param_at(g, k));
    int64_t n = 0;
    if (loom_tensor_init(&in[k], t) || loom_type_elements(t, &n))
      return bench_fail("onnx", 1, "input %d: %s", (int)k, loom_last_error());
    if (t->dtype == LOOM_F32)
      for (int64_t i = 0; i < n; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        ((float *)in[k].data)[i] = (float)((double)(state >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
      }
    char path[4200];
    snprintf(path, sizeof path, "%s/in_%d.npy", dir, (int)k);
    if (loom_tensor_save_npy(path, &in[k])) return bench_fail("onnx", 1, "%s", loom_last_error());
  }
  return 0;
}

/* The plan of g whole on cpu0: the rewrites loom-run applies, one stage under host memory. */
static int plan_whole(const loom_graph *g, loom_graph **og, loom_plan **plan) {
  loom_runner r = {"cpu0", (int64_t)1 << 46};
  char note[256];
  if (loom_graph_optimize_for_runners(g, &r, 1, NULL, og, NULL, note, sizeof note) ||
      loom_plan_split_by_memory(*og, &r, 1, plan))
    return bench_fail("onnx", 1, "planning: %s", loom_last_error());
  return 0;
}

/* Which peer this python has: "torch", "onnxruntime", or NULL. */
static const char *find_peer(const char *python) {
  if (bench_python(python, "import onnx, torch; print(0)") >= 0) return "torch";
  if (bench_python(python, "import onnx, onnxruntime; print(0)") >= 0) return "onnxruntime";
  return NULL;
}

static float largest_difference(const loom_tensor *a, const char *peer_npy) {
  loom_tensor b;
  int64_t n = 0;
  if (a->type.dtype != LOOM_F32 || loom_tensor_load_npy(peer_npy, &b)) return NAN;
  float d = loom_type_equal(&a->type, &b.type) ? 0 : NAN;
  loom_type_elements(&a->type, &n);
  for (int64_t i = 0; i < n && !isnan(d); i++)
    d = fmaxf(d, fabsf(((const float *)a->data)[i] - ((const float *)b.data)[i]));
  loom_tensor_deinit(&b);
  return d;
}

/* Loom's best seconds over reps runs of the plan after a warm-up (outputs kept from the last
 * run), or -1 after printing why a run failed. */
static double time_loom(loom_context *ctx, const loom_plan *plan, const loom_tensor *in, int32_t n_in,
                        loom_tensor *out, int32_t n_out, int32_t reps) {
  double best = INFINITY;
  for (int32_t r = 0; r <= reps; r++) { /* run 0 warms up */
    for (int32_t k = 0; k < n_out; k++) loom_tensor_deinit(&out[k]);
    double t = now_s();
    if (loom_run(ctx, plan, NULL, in, n_in, out, n_out, NULL)) {
      bench_fail("onnx", 1, "run: %s", loom_last_error());
      return -1;
    }
    if (r > 0) best = fmin(best, now_s() - t);
  }
  return best;
}

/* The peer's best seconds (peer_setup, then a warm-up and reps timed runs in the child), -1
 * when it fails. */
static double time_peer(const char *python, int32_t reps) {
  size_t len = strlen(peer_setup) + 256;
  char *script = malloc(len);
  if (!script) return -1;
  snprintf(script, len,
           "%s\nimport time\nbest = 1e30\nfor r in range(%d):\n t = time.perf_counter()\n run()\n"
           " best = min(best, time.perf_counter() - t)\nprint(best)\n",
           peer_setup, (int)reps);
  double s = bench_python(python, script);
  free(script);
  return s;
}

static void report(const char *model, const char *python, const char *peer, const double best[2], float diff,
                   int threads) {
  printf("loom-bench onnx: %s on cpu0, %d threads, best of the timed runs\n", model, threads);
  printf("  loom   %10.2f ms\n", 1e3 * best[0]);
  if (!peer && !python) {
    printf("  peer   not run (--no-python)\n");
  } else if (!peer) {
    printf("  peer   missing: %s imports neither PyTorch (python3-torch) nor onnxruntime with onnx\n",
           python);
  } else if (best[1] < 0) {
    printf("  %-6s failed to run the model (an op its interpreter lacks?)\n", peer);
  } else {
    printf("  %-6s %10.2f ms (the model's nodes, same weights, inputs and threads)\n", peer, 1e3 * best[1]);
    printf("  ratio  %10.2f (%s / loom: above 1, Loom is faster)\n", best[1] / best[0], peer);
    printf("  largest difference of the first outputs: %.3g\n", diff);
  }
}

static int bench_model(const char *model, const char *dir, const char *python, int32_t reps) {
  loom_graph *g = NULL, *og = NULL;
  loom_plan *plan = NULL;
  loom_context *ctx = NULL;
  loom_tensor in[ONNX_MAX_INPUTS], out[ONNX_MAX_INPUTS];
  int32_t n_in = 0, n_out = 0;
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  int rc = loom_graph_from_onnx(model, NULL, &g) ? bench_fail("onnx", 1, "%s", loom_last_error()) : 0;
  if (!rc) rc = make_inputs(g, dir, in, &n_in);
  if (!rc && (n_out = loom_graph_output_count(g)) > ONNX_MAX_INPUTS)
    rc = bench_fail("onnx", 1, "the model has %d outputs, at most %d", n_out, ONNX_MAX_INPUTS);
  if (!rc) rc = plan_whole(g, &og, &plan);
  if (!rc && loom_context_create(NULL, &ctx)) rc = bench_fail("onnx", 1, "%s", loom_last_error());
  const char *peer = !rc && python ? find_peer(python) : NULL;
  char threads[16], npy[4200];
  int nt = getenv("OMP_NUM_THREADS") ? atoi(getenv("OMP_NUM_THREADS")) : (int)sysconf(_SC_NPROCESSORS_ONLN);
  snprintf(threads, sizeof threads, "%d", nt > 0 ? nt : 1);
  setenv("LOOM_BENCH_ONNX_MODEL", model, 1);
  setenv("LOOM_BENCH_ONNX_DIR", dir, 1);
  setenv("LOOM_BENCH_ONNX_THREADS", threads, 1);
  setenv("LOOM_BENCH_ONNX_PEER", peer ? peer : "", 1);
  /* Loom's runs before and after the peer's, its best of both: a quieter spell of a shared
   * machine during the peer's runs does not favour the peer alone */
  double best[2] = {-1, -1}, again = -1;
  if (!rc && (best[0] = time_loom(ctx, plan, in, n_in, out, n_out, reps)) < 0) rc = 1;
  if (!rc && peer) best[1] = time_peer(python, reps);
  if (!rc && peer && (again = time_loom(ctx, plan, in, n_in, out, n_out, reps)) < 0) rc = 1;
  if (!rc && peer) best[0] = fmin(best[0], again);
  snprintf(npy, sizeof npy, "%s/peer_0.npy", dir);
  if (!rc)
    report(model, python, peer, best, best[1] >= 0 ? largest_difference(&out[0], npy) : NAN, atoi(threads));
  for (int32_t k = 0; k < ONNX_MAX_INPUTS; k++) loom_tensor_deinit(&in[k]), loom_tensor_deinit(&out[k]);
  loom_context_destroy(ctx);
  loom_plan_destroy(plan);
  loom_graph_destroy(og);
  loom_graph_destroy(g);
  return rc;
}

int loom_bench_onnx(int argc, char **argv) {
  const char *python = "/usr/bin/python3";
  bool no_python = false;
  int32_t reps = 3;
  const bench_opt opts[] = {
      BENCH_OPT_INT("reps", BENCH_I32, &reps, 1, 100, "a count from 1 to 100"),
      BENCH_OPT_TEXT("python", &python, "an interpreter"),
      BENCH_OPT_FLAG("no-python", &no_python),
      BENCH_OPT_END,
  };
  bench_cli b = {.mode = "onnx",
                 .synopsis = "loom-bench onnx MODEL.onnx [--reps R] [--python CMD | --no-python]",
                 .usage = usage,
                 .opts = opts,
                 .max_operands = 1};
  int rc = bench_args(&b, argc, argv);
  if (!rc && b.n_operands != 1) rc = bench_usage_error(&b, "give one MODEL.onnx");
  if (rc) return rc < 0 ? 0 : rc;
  char dir[] = "/tmp/loom-bench-onnx-XXXXXX";
  if (!mkdtemp(dir)) return bench_fail("onnx", 1, "cannot make a temporary folder in /tmp");
  rc = bench_model(b.operands[0], dir, no_python ? NULL : python, reps);
  char path[4200];
  for (int32_t k = 0; k < ONNX_MAX_INPUTS; k++)
    snprintf(path, sizeof path, "%s/in_%d.npy", dir, (int)k), unlink(path);
  snprintf(path, sizeof path, "%s/peer_0.npy", dir);
  unlink(path);
  rmdir(dir);
  return rc;
}
