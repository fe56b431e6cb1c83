/* The conformance suite (DESIGN.md "Testing"), as ggml's test-backend-ops does it for every
 * backend: every op of IR.md on every dtype the IR accepts, on every GPU device the context
 * opened (each OpenCL device oclN, each CUDA device cudaN), against the cpu backend (cpu0), on
 * random inputs of several shapes: dense, broadcast, strided (transposed, sliced) and scalar
 * operands, views returned as outputs, and the paths a backend chooses between (work-item or
 * thread and work-group or block reductions, the BLAS library (CLBlast, cuBLAS) and the gemm
 * kernel, the FFT library (clFFT, cuFFT in place and packed) and the DFT kernel).
 *
 * Each graph template names the dtype $D (and $E for a second one); a dtype the IR refuses for
 * the op is skipped (the parser says so), one the cpu backend refuses with UNSUPPORTED must be
 * refused by the device too, and everything else must match the cpu backend within the
 * tolerance of gpu_util.h (scaled where results are sums).
 *
 * LOOM_CONFORMANCE_DEVICES=opencl or =cuda limits the suite to one kind of device (ctest runs
 * one entry per kind: conformance.opencl, conformance.cuda); unset, it runs on every kind. When
 * the kind has no device here, every test is skipped and the executable exits 77.
 */
#include <stdlib.h>

#include "gpu_util.h"
#if LOOM_HAVE_OPENCL
#include "backends/opencl/opencl_backend.h"
#endif
#if LOOM_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif

/* ---- device kinds ------------------------------------------------------------------------ */

/* What differs between the kinds of device: how a test forces the paths a backend chooses
 * between (set_paths(blas, fft); 0, 0: as the backend chooses), and which paths, dtypes and
 * lengths each kind sweeps. */
typedef struct device_kind {
  const char *name; /* as LOOM_CONFORMANCE_DEVICES names it */
  uint32_t backend;
  void (*set_paths)(int32_t blas, int32_t fft);
  /* dot_every_dtype: as the backend chooses, then the gemm kernel for every dtype. */
  int32_t dot_paths[2];
  /* dot_big through the kernel (path 1) and through the library (path 2): the dtypes of each.
   * CLBlast builds a program per precision on first use (seconds on PoCL, cold): f32 and c128
   * go through it (real and complex, single and double: the same calls with other types);
   * cuBLAS takes f16 and bf16 through cublasGemmStridedBatchedEx. */
  loom_dtype big_dot[2][6];
  int32_t n_big_dot[2];
  /* FFT lengths as the backend chooses (fft path 0) and with the DFT kernel forced (1). */
  int32_t fft_lengths[2][3];
  int32_t n_fft_lengths[2];
  /* FFT layouts that take the library a call per outer index (cuFFT; on PoCL each new clFFT
   * plan is a program build, seconds: not run there). */
  bool fourier_layouts;
  /* Sizes past one grid of the flat kernels (16384 blocks x 256 threads): CUDA's limits. */
  bool large_launches;
  /* quantize and dequantize (docs/ir-quant.md). */
  bool quant;
} device_kind;

static const device_kind kinds[] = {
#if LOOM_HAVE_OPENCL
    /* The DFT kernel: 12 goes to clFFT (direct and packed; each new plan is a program build,
     * seconds on PoCL cold), 17 to the DFT (a prime clFFT does not take); 16 and 15 with the
     * DFT forced. Dot path 3 is the tiled (GPU) kernel on every device. */
    {"opencl",
     LOOM_BACKEND_OPENCL,
     loom__opencl_testing_set_paths,
     {0, 3},
     {{LOOM_F32, LOOM_F64, LOOM_C64, LOOM_C128}, {LOOM_F32, LOOM_C128}},
     {4, 2},
     {{12, 17}, {16, 15}},
     {2, 2},
     false,
     false,
     true},
#endif
#if LOOM_HAVE_CUDA
    /* cuFFT (a power of two, a mixed radix, a prime it does with Bluestein), then the DFT
     * kernel. */
    {"cuda",
     LOOM_BACKEND_CUDA,
     loom__cuda_testing_set_paths,
     {0, 1},
     {{LOOM_F32, LOOM_F64, LOOM_C64, LOOM_C128, LOOM_F16, LOOM_BF16},
      {LOOM_F32, LOOM_F64, LOOM_C64, LOOM_C128, LOOM_F16, LOOM_BF16}},
     {6, 6},
     {{16, 12, 17}, {16, 12, 17}},
     {3, 3},
     true,
     true,
     true},
#endif
};
enum { MAX_KINDS = 2 };

/* A set of opened devices a graph is checked on. */
typedef struct device_set {
  const loom__exec_device *devs[MAX_KINDS * GT_MAX_DEVICES];
  int32_t n;
} device_set;

static struct {
  bool ready;
  const device_kind *kind[MAX_KINDS]; /* the kinds selected that have devices */
  device_set of_kind[MAX_KINDS];
  int32_t n_kinds;
  device_set all; /* every device of those kinds */
  char why_none[1024];
} suite;

/* Adds a reason why no device is checked on. */
static void why_none(const char *reason) {
  size_t n = strlen(suite.why_none);
  snprintf(suite.why_none + n, sizeof suite.why_none - n, "%s%s", n ? "; " : "", reason);
}

/* The kinds LOOM_CONFORMANCE_DEVICES selects, opened; exits on a name no kind has. */
static void suite_open(void) {
  const char *want = getenv("LOOM_CONFORMANCE_DEVICES");
  if (want && !*want) want = NULL;
  if (want && strcmp(want, "opencl") != 0 && strcmp(want, "cuda") != 0) {
    fprintf(stderr, "LOOM_CONFORMANCE_DEVICES=%s: not a device kind (opencl, cuda)\n", want);
    exit(1);
  }
  for (int32_t i = 0; i < (int32_t)LOOM_ARRAY_SIZE(kinds); i++) {
    const device_kind *k = &kinds[i];
    if (want && strcmp(want, k->name) != 0) continue;
    if (gt_device_count(k->backend) == 0) {
      why_none(gt_no_device(k->backend));
      continue;
    }
    device_set *set = &suite.of_kind[suite.n_kinds];
    set->n = gt_devices(k->backend, set->devs);
    for (int32_t d = 0; d < set->n; d++) suite.all.devs[suite.all.n++] = set->devs[d];
    suite.kind[suite.n_kinds++] = k;
  }
  if (suite.all.n == 0 && !suite.why_none[0])
    why_none(want ? "this build has no such backend" : "no GPU backend built");
  suite.ready = true;
}

/* True when there is a device to check on; otherwise marks the test skipped with the reason. */
static bool have_devices(void) {
  if (!suite.ready) suite_open();
  if (suite.all.n > 0) return true;
  loom_test_skip("%s", suite.why_none);
  return false;
}

/* Every selected kind's paths set to its own choice of index p (or 0, 0). */
static void set_dot_paths(int32_t p) {
  for (int32_t k = 0; k < suite.n_kinds; k++) suite.kind[k]->set_paths(suite.kind[k]->dot_paths[p], 0);
}
static void reset_paths(void) {
  for (int32_t k = 0; k < suite.n_kinds; k++) suite.kind[k]->set_paths(0, 0);
}

/* ---- templates over dtypes -------------------------------------------------------------- */

/* tmpl with $D -> d and $E -> e. */
static void expand(const char *tmpl, const char *d, const char *e, char *out, size_t size) {
  size_t n = 0;
  for (const char *p = tmpl; *p && n + 8 < size; p++) {
    if (p[0] == '$' && (p[1] == 'D' || p[1] == 'E')) {
      const char *r = p[1] == 'D' ? d : e;
      n += (size_t)snprintf(out + n, size - n, "%s", r);
      p++;
    } else {
      out[n++] = *p;
    }
  }
  out[n] = '\0';
}

static int checks_run;

/* Checks tmpl for dtype d (and e) on the devices of `on`; false only on a failure (a dtype
 * the IR refuses is skipped). */
static bool check_on(const device_set *on, const char *tmpl, loom_dtype d, loom_dtype e, double scale,
                     uint64_t seed, const char *file, int line) {
  char text[4096];
  expand(tmpl, loom_dtype_name(d), loom_dtype_name(e), text, sizeof text);
  loom_graph *g = NULL;
  if (loom_graph_parse(text, strlen(text), "t.lir", &g)) return true; /* the IR does not take it */
  char what[96];
  snprintf(what, sizeof what, "%s (%s%s%s)", loom_graph_name(g), loom_dtype_name(d), d == e ? "" : " -> ",
           d == e ? "" : loom_dtype_name(e));
  bool ok = gt_check(on->devs, on->n, what, g, seed, scale, file, line);
  loom_graph_destroy(g);
  checks_run++;
  return ok;
}

/* On every device. */
static bool check_one(const char *tmpl, loom_dtype d, loom_dtype e, double scale, uint64_t seed,
                      const char *file, int line) {
  return check_on(&suite.all, tmpl, d, e, scale, seed, file, line);
}

/* Every dtype on the devices of `on`. */
static bool sweep_on(const device_set *on, const char *tmpl, double scale, const char *file, int line) {
  for (int32_t i = 0; i < GT_N_DTYPES; i++)
    if (!check_on(on, tmpl, gt_all_dtypes[i], gt_all_dtypes[i], scale, 1 + (uint64_t)i, file, line))
      return false;
  return true;
}

/* Every dtype on every device. */
static bool sweep(const char *tmpl, double scale, const char *file, int line) {
  return sweep_on(&suite.all, tmpl, scale, file, line);
}
#define SWEEP_ON(on, tmpl, scale)                                           \
  do {                                                                      \
    if (!sweep_on((on), (tmpl), (scale), __FILE__, __LINE__)) return false; \
  } while (0)
#define SWEEP(tmpl, scale)                                   \
  do {                                                       \
    if (!sweep((tmpl), (scale), __FILE__, __LINE__)) return; \
  } while (0)

/* One graph from text (sizes no template needs) on the devices of `on`. */
static bool check_text(const device_set *on, const char *text, double scale, const char *file, int line) {
  loom_graph *g = NULL;
  if (loom_graph_parse(text, strlen(text), "t.lir", &g)) {
    loom_test_fail(file, line, "parse failed: %s\n%s", loom_last_error(), text);
    return false;
  }
  bool ok = gt_check(on->devs, on->n, loom_graph_name(g), g, 5, scale, file, line);
  loom_graph_destroy(g);
  return ok;
}

/* ---- elementwise ------------------------------------------------------------------------- */

static const char *const unary_ops[] = {"neg", "abs",  "sign",    "exp",  "log",   "sqrt", "rsqrt", "sin",
                                        "cos", "tanh", "sigmoid", "relu", "floor", "ceil", "not",   "square"};

TEST(unary_every_dtype) {
  if (!have_devices()) return;
  char tmpl[512];
  for (int32_t i = 0; i < LOOM_ARRAY_SIZE(unary_ops); i++) {
    const char *op = unary_ops[i];
    snprintf(tmpl, sizeof tmpl, "graph un_%s(a: $D[3,5]) { r = %s a\n return r }", op, op);
    SWEEP(tmpl, 1);
    /* A transposed (strided) operand, and a scalar. */
    snprintf(tmpl, sizeof tmpl,
             "graph un_%s_t(a: $D[5,3]) { t = transpose a perm=[1,0]\n r = %s t\n return r }", op, op);
    SWEEP(tmpl, 1);
    snprintf(tmpl, sizeof tmpl, "graph un_%s_s(a: $D[]) { r = %s a\n return r }", op, op);
    SWEEP(tmpl, 1);
  }
}

static const char *const binary_ops[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq",
                                         "ne",  "lt",  "le",  "gt",  "ge",  "and",     "or"};

TEST(binary_every_dtype) {
  if (!have_devices()) return;
  char tmpl[512];
  for (int32_t i = 0; i < LOOM_ARRAY_SIZE(binary_ops); i++) {
    const char *op = binary_ops[i];
    snprintf(tmpl, sizeof tmpl, "graph bin_%s(a: $D[3,5], b: $D[3,5]) { r = %s a b\n return r }", op, op);
    SWEEP(tmpl, 1);
    /* NumPy broadcasting both ways, a broadcast scalar, a strided operand. */
    snprintf(tmpl, sizeof tmpl, "graph bin_%s_b(a: $D[4,1,5], b: $D[3,5]) { r = %s a b\n return r }", op, op);
    SWEEP(tmpl, 1);
    snprintf(tmpl, sizeof tmpl, "graph bin_%s_s(a: $D[], b: $D[2,3]) { r = %s b a\n return r }", op, op);
    SWEEP(tmpl, 1);
    snprintf(tmpl, sizeof tmpl,
             "graph bin_%s_t(a: $D[5,3], b: $D[3,11]) { t = transpose a perm=[1,0]\n s = slice b start=[0,1] "
             "stop=[3,11] step=[1,2]\n"
             " r = %s t s\n return r }",
             op, op);
    SWEEP(tmpl, 1);
  }
}

TEST(select_every_dtype) {
  if (!have_devices()) return;
  SWEEP("graph sel(c: bool[3,5], a: $D[3,5], b: $D[5]) { r = select c a b\n return r }", 1);
  SWEEP("graph sel_b(c: bool[5], a: $D[3,1], b: $D[]) { r = select c a b\n return r }", 1);
}

TEST(cast_every_pair) {
  if (!have_devices()) return;
  for (int32_t i = 0; i < GT_N_DTYPES; i++)
    for (int32_t j = 0; j < GT_N_DTYPES; j++) {
      loom_dtype d = gt_all_dtypes[i], e = gt_all_dtypes[j];
      if (!check_one("graph cast(a: $D[3,5]) { r = cast a to=$E\n return r }", d, e, 1, 7, __FILE__,
                     __LINE__))
        return;
      /* Out of range and NaN: saturation, NaN -> 0, overflow to inf in f16. */
      if (loom_dtype_is_float(d) &&
          !check_one("graph cast_big(a: $D[4,6]) { k = fill value=40000 : $D[4,6]\n b = mul a k\n l = log a\n"
                     " rb = cast b to=$E\n rl = cast l to=$E\n return rb, rl }",
                     d, e, 1, 8, __FILE__, __LINE__))
        return;
    }
}

TEST(sources_every_dtype) {
  if (!have_devices()) return;
  SWEEP("graph iota0() { r = iota axis=1 : $D[3,5]\n return r }", 1);
  SWEEP("graph iota1() { r = iota axis=0 : $D[70,3]\n return r }", 1);
  /* A fill returned as is, used as an operand, and viewed (broadcast of a fill). */
  SWEEP(
      "graph fill(a: $D[3,5]) { f = fill value=3 : $D[3,5]\n g = fill value=0.5 : $D[5]\n r = add a f\n"
      " s = broadcast g shape=[2,5]\n return f, r, s }",
      1);
  SWEEP("graph fill_only() { f = fill value=1 : $D[2,3]\n return f }", 1);
  SWEEP("graph constant(a: $D[2,3]) { c = constant [1,2,3,4,5,6] : $D[2,3]\n r = mul a c\n return r, c }", 1);
}

/* ---- layout ---------------------------------------------------------------------------------- */

TEST(layout_every_dtype) {
  if (!have_devices()) return;
  /* Views returned as they are (downloaded densely), and materialized through a reshape of
   * non-contiguous data (the copy kernel). */
  SWEEP(
      "graph views(a: $D[2,3,4]) { t = transpose a perm=[2,0,1]\n b = broadcast a shape=[2,2,3,4]\n"
      " s = slice a start=[0,1,0] stop=[2,3,4] step=[1,1,3]\n r = reshape a shape=[6,-1]\n return t, b, s, r "
      "}",
      1);
  SWEEP(
      "graph copies(a: $D[2,3,4]) { t = transpose a perm=[2,0,1]\n tr = reshape t shape=[-1]\n"
      " b = broadcast a shape=[2,2,3,4]\n br = reshape b shape=[4,12]\n"
      " s = slice a start=[1,0,1] stop=[2,3,4] step=[1,2,2]\n sr = reshape s shape=[4]\n return tr, br, sr }",
      1);
  SWEEP(
      "graph concat(a: $D[2,3], b: $D[3,4], c: $D[1,3]) { t = transpose b perm=[1,0]\n r = concat a t c "
      "axis=0\n"
      " q = concat a a axis=1\n return r, q }",
      1);
  SWEEP(
      "graph tile(a: $D[2,3]) { r = tile a reps=[2,3]\n t = transpose a perm=[1,0]\n q = tile t reps=[2]\n "
      "return r, q }",
      1);
}

/* ---- reductions --------------------------------------------------------------------------- */

static const char *const reduce_ops[] = {"reduce_sum", "reduce_prod", "reduce_mean", "reduce_max",
                                         "reduce_min"};

TEST(reductions_every_dtype) {
  if (!have_devices()) return;
  char tmpl[512];
  for (int32_t i = 0; i < LOOM_ARRAY_SIZE(reduce_ops); i++) {
    const char *op = reduce_ops[i];
    snprintf(tmpl, sizeof tmpl,
             "graph %s(a: $D[4,6,5]) { r1 = %s a axes=[1]\n r2 = %s a axes=[0,2] keepdims=true\n r3 = %s a "
             "axes=[0,1,2]\n"
             " t = transpose a perm=[2,1,0]\n r4 = %s t axes=[-1]\n return r1, r2, r3, r4 }",
             op, op, op, op, op);
    SWEEP(tmpl, 10);
  }
  /* Long reductions take a work-group per output; a reduced axis with a large stride too. */
  SWEEP(
      "graph long_sum(a: $D[3,3000]) { r = reduce_sum a axes=[1]\n m = reduce_max a axes=[1]\n"
      " t = transpose a perm=[1,0]\n s = reduce_mean t axes=[0]\n return r, m, s }",
      100);
  /* Empty reduced axes give the identities. */
  SWEEP(
      "graph empty_sum(a: $D[0,4]) { r = reduce_sum a axes=[0]\n p = reduce_prod a axes=[0]\n return r, p }",
      1);
}

TEST(argreduce_every_dtype) {
  if (!have_devices()) return;
  SWEEP(
      "graph arg(a: $D[4,7]) { x = argmax a axis=1\n n = argmin a axis=0\n t = transpose a perm=[1,0]\n"
      " y = argmax t axis=-1\n return x, n, y }",
      1);
  SWEEP("graph arg_long(a: $D[2,2500]) { x = argmax a axis=1\n n = argmin a axis=1\n return x, n }", 1);
}

TEST(reductions_with_nan) {
  if (!have_devices()) return;
  /* log of [-2, 2) is NaN for about half the elements: NaN propagates through max/min and is
   * the best for argmax and argmin (the first one wins). */
  SWEEP(
      "graph nan(a: $D[6,5]) { l = log a\n mx = reduce_max l axes=[1]\n mn = reduce_min l axes=[0]\n"
      " ax = argmax l axis=1\n an = argmin l axis=0\n return mx, mn, ax, an }",
      1);
  SWEEP(
      "graph nan_long(a: $D[2,3000]) { l = log a\n mx = reduce_max l axes=[1]\n ax = argmax l axis=1\n "
      "return mx, ax }",
      1);
}

TEST(topk_every_dtype) {
  if (!have_devices()) return;
  SWEEP(
      "graph topk(a: $D[4,20]) { v, i = topk a k=5 axis=1\n w, j = topk a k=3 axis=0 largest=false\n"
      " t = transpose a perm=[1,0]\n x, y = topk t k=20 axis=0\n return v, i, w, j, x, y }",
      1);
  /* NaN ranks above every number; ties (integers in a small range) go to the lower index. */
  SWEEP(
      "graph topk_nan(a: $D[3,16]) { l = log a\n v, i = topk l k=6 axis=1\n w, j = topk l k=4 axis=1 "
      "largest=false\n"
      " return v, i, w, j }",
      1);
  SWEEP("graph topk_k0(a: $D[3,4]) { v, i = topk a k=0 axis=1\n return v, i }", 1);
}

/* ---- dot ---------------------------------------------------------------------------------- */

static bool dot_graphs(const char *file, int line);

TEST(dot_every_dtype) {
  if (!have_devices()) return;
  /* Twice: as the backend chooses (the library where it takes the dtype and layout), then the
   * gemm kernel for every dtype. */
  for (int32_t p = 0; p < 2; p++) {
    set_dot_paths(p);
    if (!dot_graphs(__FILE__, __LINE__)) break;
  }
  reset_paths();
}

static bool dot_graphs(const char *file, int line) {
  return sweep("graph dot(a: $D[3,4], b: $D[4,5]) { r = dot a b\n return r }", 4, file, line) &&
         sweep("graph dot_batch(a: $D[2,1,3,4], b: $D[5,4,2]) { r = dot a b\n return r }", 4, file, line) &&
         sweep(
             "graph dot_vec(a: $D[4], b: $D[4,3], c: $D[5,4]) { r = dot a b\n s = dot c a\n q = dot a a\n"
             " return r, s, q }",
             4, file, line) &&
         sweep(
             "graph dot_t(a: $D[4,3], b: $D[5,4]) { at = transpose a perm=[1,0]\n bt = transpose b "
             "perm=[1,0]\n"
             " r = dot at bt\n return r }",
             4, file, line) &&
         sweep("graph dot_k0(a: $D[3,0], b: $D[0,2]) { r = dot a b\n return r }", 1, file, line) &&
         sweep("graph dot_tiles(a: $D[2,19,33], b: $D[33,17]) { r = dot a b\n return r }", 8, file, line) &&
         /* Batches: one strided batched call (both operands batched), a loop over an outer batch
          * dim, a broadcast operand (a call per matrix), and a sliced (strided) operand. */
         sweep("graph dot_b3(a: $D[3,2,5,6], b: $D[3,2,6,4]) { r = dot a b\n return r }", 8, file, line) &&
         sweep("graph dot_bc(a: $D[4,5,6], b: $D[1,6,3]) { r = dot a b\n return r }", 8, file, line) &&
         sweep(
             "graph dot_sl(a: $D[5,12], b: $D[6,4]) { s = slice a start=[0,0] stop=[5,12] step=[1,2]\n"
             " r = dot s b\n return r }",
             8, file, line);
}

/* Big enough to be worth the library: through the kernel (path 1) and through the library
 * (path 2), plain, transposed (a transpose flag) and batched with a broadcast operand. */
static const char *const dot_big =
    "graph dot_big(a: $D[70,90], b: $D[90,80], c: $D[2,90,70]) { r = dot a b\n bt = transpose b perm=[1,0]\n"
    " s = dot bt c\n at = transpose a perm=[1,0]\n q = dot at a\n return r, s, q }";

TEST(dot_through_the_library_and_the_kernel) {
  if (!have_devices()) return;
  bool ok = true;
  for (int32_t k = 0; ok && k < suite.n_kinds; k++) {
    const device_kind *kind = suite.kind[k];
    for (int32_t path = 1; ok && path <= 2; path++) {
      kind->set_paths(path, 0);
      for (int32_t i = 0; ok && i < kind->n_big_dot[path - 1]; i++) {
        loom_dtype d = kind->big_dot[path - 1][i];
        ok = check_on(&suite.of_kind[k], dot_big, d, d, 20, 3, __FILE__, __LINE__);
      }
    }
    kind->set_paths(0, 0);
  }
}

#if LOOM_HAVE_OPENCL
/* Under a limit CLBlast's temporaries must fit the op's scratch (1x the output, IR.md); a
 * product whose indirect GEMM wants more runs in blocks: of rows and columns (square, and with
 * a transposed operand: a transpose flag at each block's offset), or of k (a long inner dim,
 * each block after the first adding to C). Each gives cpu0's results with cpu0's peak (no
 * byte beyond the estimate), and is counted as blocked. */
TEST(dot_in_blocks_under_a_limit) {
  if (!gt_have_devices(LOOM_BACKEND_OPENCL)) return;
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  static const struct {
    const char *lir;
    double scale;
  } cases[] = {
      {"graph sq(a: f32[1000,1000], b: f32[1000,1000]) { at = transpose a perm=[1,0]\n r = dot a b\n"
       " s = dot at b\n return r, s }",
       50},
      {"graph long_k(c: f32[128,65536], d: f32[65536,128]) { q = dot c d\n return q }", 500},
  };
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    loom_graph *g = gt_parse("%s", cases[t].lir);
    ASSERT_TRUE(g != NULL);
    int32_t no = loom_graph_output_count(g);
    loom_tensor in[2], ref[2], got[2];
    ASSERT_OK(gt_inputs(g, 11 + t, in));
    loom__meter cpu_meter, dev_meter;
    ASSERT_OK(gt_run(g, NULL, in, ref, 1ll << 30, &cpu_meter));
    for (int32_t k = 0; k < nd; k++) {
      int64_t before = loom__opencl_testing_blocked_dots();
      ASSERT_OK(gt_run(g, devs[k], in, got, 1ll << 30, &dev_meter));
      ASSERT_EQ(loom__opencl_testing_blocked_dots() - before, no);
      ASSERT_EQ(dev_meter.peak, cpu_meter.peak);
      for (int32_t i = 0; i < no; i++) {
        double rtol, atol;
        char msg[512];
        gt_tolerance(LOOM_F32, cases[t].scale, &rtol, &atol);
        if (!gt_close(&ref[i], &got[i], rtol, atol, msg, sizeof msg))
          loom_test_fail(__FILE__, __LINE__, "%s output %d on %s: %s", loom_graph_name(g), i, devs[k]->id,
                         msg);
      }
      gt_tensors_free(got, no);
    }
    gt_tensors_free(ref, no);
    gt_tensors_free(in, loom_graph_param_count(g));
    loom_graph_destroy(g);
  }
}
#endif

/* ---- conv --------------------------------------------------------------------------------- */

TEST(conv_every_dtype) {
  if (!have_devices()) return;
  SWEEP(
      "graph conv1(x: $D[2,4,10], w: $D[6,2,3]) { y = conv x w stride=[2] padding=[1] dilation=[2] "
      "groups=2\n return y }",
      4);
  SWEEP("graph conv2(x: $D[1,3,8,8], w: $D[4,3,3,3]) { y = conv x w padding=[1,1]\n return y }", 4);
  SWEEP(
      "graph conv3(x: $D[1,2,4,5,6], w: $D[3,2,2,3,2]) { y = conv x w stride=[1,2,1] padding=[1,0,1]\n "
      "return y }",
      4);
  SWEEP("graph conv_t(x: $D[2,8,3], w: $D[4,3,1]) { t = transpose x perm=[0,2,1]\n y = conv t w\n return y }",
        4);
}

/* ---- fourier ------------------------------------------------------------------------------- */

static bool fourier_graphs(const device_set *on, int32_t n, const char *file, int line) {
  char tmpl[1024];
  snprintf(tmpl, sizeof tmpl,
           "graph fft%d(z: $D[3,%d]) { f = fft z axis=1\n i = ifft z axis=-1\n zt = transpose z perm=[1,0]\n"
           " g = fft zt axis=0\n return f, i, g }",
           (int)n, (int)n);
  if (!sweep_on(on, tmpl, 20, file, line)) return false;
  snprintf(tmpl, sizeof tmpl,
           "graph rfft%d(x: $D[2,%d]) { f = rfft x axis=1\n xt = transpose x perm=[1,0]\n g = rfft xt "
           "axis=0\n return f, g }",
           (int)n, (int)n);
  if (!sweep_on(on, tmpl, 20, file, line)) return false;
  snprintf(tmpl, sizeof tmpl,
           "graph irfft%d(z: $D[2,%d], y: $D[%d,3]) { x = irfft z axis=1 n=%d\n w = irfft y axis=0 n=%d\n "
           "return x, w }",
           (int)n, (int)(n / 2 + 1), (int)(n / 2 + 1), (int)n, (int)n);
  return sweep_on(on, tmpl, 20, file, line);
}

TEST(fourier_through_the_library_and_the_dft) {
  if (!have_devices()) return;
  /* Each length along the last axis (in place: rows), the first (in place: columns) and, for
   * irfft, packed (c2r overwrites its input). */
  bool ok = true;
  for (int32_t k = 0; ok && k < suite.n_kinds; k++) {
    const device_kind *kind = suite.kind[k];
    for (int32_t path = 0; ok && path <= 1; path++) {
      kind->set_paths(0, path);
      for (int32_t i = 0; ok && i < kind->n_fft_lengths[path]; i++)
        ok = fourier_graphs(&suite.of_kind[k], kind->fft_lengths[path][i], __FILE__, __LINE__);
    }
    kind->set_paths(0, 0);
  }
}

static bool fourier_layouts(const device_set *on) {
  /* The axis in the middle (outer and inner both > 1: packed, one cuFFT call per outer
   * index), a sliced input (strided rows), a broadcast input (stride 0: packed), and length 1. */
  SWEEP_ON(on,
           "graph fft_mid(z: $D[2,8,3]) { f = fft z axis=1\n i = ifft z axis=1\n s = slice z start=[0,0,0] "
           "stop=[2,8,3] step=[1,2,1]\n g = fft s axis=1\n return f, i, g }",
           20);
  SWEEP_ON(
      on,
      "graph fft_bc(z: $D[1,10]) { b = broadcast z shape=[3,10]\n t = transpose b perm=[1,0]\n f = fft t "
      "axis=1\n"
      " g = fft b axis=1\n return f, g }",
      20);
  SWEEP_ON(on, "graph fft_one(z: $D[4,1]) { f = fft z axis=1\n i = ifft z axis=1\n return f, i }", 1);
  SWEEP_ON(on, "graph rfft_mid(x: $D[2,10,3]) { f = rfft x axis=1\n return f }", 20);
  SWEEP_ON(on, "graph irfft_mid(z: $D[2,5,3]) { x = irfft z axis=1 n=8\n return x }", 20);
  return true;
}

/* The tests of one kind's own paths, on each selected kind that has them. */
#define FOR_KINDS_WITH(flag, fn)                                                         \
  do {                                                                                   \
    bool any_ = false;                                                                   \
    for (int32_t k_ = 0; k_ < suite.n_kinds; k_++) {                                     \
      if (!suite.kind[k_]->flag) continue;                                               \
      any_ = true;                                                                       \
      if (!fn(&suite.of_kind[k_])) return;                                               \
    }                                                                                    \
    if (!any_) loom_test_skip("no selected kind of device has a case here (%s)", #flag); \
  } while (0)

TEST(fourier_layouts) {
  if (!have_devices()) return;
  FOR_KINDS_WITH(fourier_layouts, fourier_layouts);
}

/* ---- sizes past one launch -------------------------------------------------------------------- */

#define CHECK_TEXT(on, text, scale)                                           \
  do {                                                                        \
    if (!check_text((on), (text), (scale), __FILE__, __LINE__)) return false; \
  } while (0)

static bool large_launches(const device_set *on) {
  /* More elements than one grid of the flat kernels (16384 blocks x 256 threads) and more
   * outputs than a grid of blocks: the kernels' grid-stride loops. */
  CHECK_TEXT(on, "graph big_ew(a: f32[2100,2100], b: f32[2100]) { r = add a b\n s = exp r\n return s }", 1);
  CHECK_TEXT(
      on,
      "graph big_red(a: f32[70000,64]) { r = reduce_max a axes=[1]\n s = reduce_sum a axes=[0]\n return r, s "
      "}",
      10);
  CHECK_TEXT(
      on,
      "graph big_group(a: f32[1100,20000]) { s = reduce_sum a axes=[0]\n m = argmax a axis=0\n return s, m }",
      100);
  CHECK_TEXT(
      on,
      "graph big_copy(a: i16[1000,4400]) { t = transpose a perm=[1,0]\n r = reshape t shape=[-1]\n return r "
      "}",
      1);
  return true;
}

TEST(large_launches) {
  if (!have_devices()) return;
  FOR_KINDS_WITH(large_launches, large_launches);
}

/* ---- quantized values (docs/ir-quant.md) ------------------------------------------------------ */

static bool quant_graphs(const device_set *on) {
  /* per tensor and per channel along each axis, odd rows (q4 padding), strided input */
  CHECK_TEXT(
      on,
      "graph quant(w: f32[7,5]) { q4a, s4a = quantize w to=q4 axis=1\n q4b, s4b = quantize w to=q4 axis=0\n"
      " q8t, s8t = quantize w to=q8\n d4a = dequantize q4a s4a axis=1\n d4b = dequantize q4b s4b axis=0\n"
      " d8t = dequantize q8t s8t\n return d4a, d4b, d8t, s4a, s4b, s8t }",
      1);
  CHECK_TEXT(on,
             "graph quant_t(w: f32[6,9]) { t = transpose w perm=[1,0]\n q, s = quantize t to=q4 axis=-1\n"
             " d = dequantize q s axis=-1\n return d, s }",
             1);
  /* dequantize of given values (every byte pattern), rank 0 to 3 */
  CHECK_TEXT(on,
             "graph deq(a: q4[3,5], sa: f32[5], b: q8[4,2,3], sb: f32[2], c: q4[], sc: f32[]) {"
             " da = dequantize a sa axis=1\n db = dequantize b sb axis=1\n dc = dequantize c sc\n"
             " return da, db, dc }",
             1);
  /* the dot of dequantized weights, as the chunk rewrite puts it in a loop */
  CHECK_TEXT(
      on,
      "graph qdot(x: f32[4,10], q: q4[10,6], s: f32[6]) { r = loop n=6 piece=4 {\n in qs = q axis=1\n"
      " in ss = s axis=0\n in xx = x\n d = dequantize qs ss axis=1\n y = dot xx d\n out y concat axis=1\n"
      " }\n return r }",
      4);
  return true;
}

TEST(quantized_ops) {
  if (!have_devices()) return;
  FOR_KINDS_WITH(quant, quant_graphs);
}
