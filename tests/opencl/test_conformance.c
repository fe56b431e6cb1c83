/* The conformance suite (DESIGN.md "Testing"): every op of IR.md on every dtype the IR
 * accepts, on every OpenCL device found, against the cpu backend, on random inputs of
 * several shapes: dense, broadcast, strided (transposed, sliced) and scalar operands, views
 * returned as outputs, and the paths a backend chooses between (work-item and work-group
 * reductions, CLBlast and the gemm kernel, clFFT and the DFT kernel).
 *
 * Each graph template names the dtype $D (and $E for a second one); a dtype the IR refuses for
 * the op is skipped (the parser says so), one the cpu backend refuses with UNSUPPORTED must be
 * refused by the device too, and everything else must match the cpu backend within the
 * tolerance of cl_util.h (scaled where results are sums).
 */
#if LOOM_HAVE_OPENCL
#include <stdlib.h>

#include "backends/opencl/opencl_backend.h"
#include "gpu_util.h"

/* ---- templates over dtypes -------------------------------------------------------------- */

/* gt_check on every device of the kind. */
static bool check_devices(const char *what, const loom_graph *g, uint64_t seed, double scale,
                          const char *file, int line) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  return nd > 0 && gt_check(devs, nd, what, g, seed, scale, file, line);
}

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

/* Checks tmpl for dtype d (and e); false only on a failure (a dtype the IR refuses is skipped). */
static bool check_one(const char *tmpl, loom_dtype d, loom_dtype e, double scale, uint64_t seed,
                      const char *file, int line) {
  char text[4096];
  expand(tmpl, loom_dtype_name(d), loom_dtype_name(e), text, sizeof text);
  loom_graph *g = NULL;
  if (loom_graph_parse(text, strlen(text), "t.lir", &g)) return true; /* the IR does not take it */
  char what[96];
  snprintf(what, sizeof what, "%s (%s%s%s)", loom_graph_name(g), loom_dtype_name(d), d == e ? "" : " -> ",
           d == e ? "" : loom_dtype_name(e));
  bool ok = check_devices(what, g, seed, scale, file, line);
  loom_graph_destroy(g);
  checks_run++;
  return ok;
}

/* Every dtype. */
static bool sweep(const char *tmpl, double scale, const char *file, int line) {
  for (int32_t i = 0; i < LOOM_DTYPE_COUNT; i++)
    if (!check_one(tmpl, gt_all_dtypes[i], gt_all_dtypes[i], scale, 1 + (uint64_t)i, file, line))
      return false;
  return true;
}
#define SWEEP(tmpl, scale)                                   \
  do {                                                       \
    if (!sweep((tmpl), (scale), __FILE__, __LINE__)) return; \
  } while (0)

static bool have_devices(void) {
  return gt_have_devices(LOOM_BACKEND_OPENCL);
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
  for (int32_t i = 0; i < LOOM_DTYPE_COUNT; i++)
    for (int32_t j = 0; j < LOOM_DTYPE_COUNT; j++) {
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
  /* Twice: the kernel the device takes, then the tiled (GPU) one on every device. */
  for (int32_t path = 0; path <= 3; path += 3) {
    loom__opencl_testing_set_paths(path, 0);
    if (!dot_graphs(__FILE__, __LINE__)) break;
  }
  loom__opencl_testing_set_paths(0, 0);
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
         sweep("graph dot_tiles(a: $D[2,19,33], b: $D[33,17]) { r = dot a b\n return r }", 8, file, line);
}

/* Big enough for CLBlast: through CLBlast and through the kernel, plain, transposed and
 * batched with a broadcast operand. */
static const char *const dot_big =
    "graph dot_big(a: $D[70,90], b: $D[90,80], c: $D[2,90,70]) { r = dot a b\n bt = transpose b perm=[1,0]\n"
    " s = dot bt c\n at = transpose a perm=[1,0]\n q = dot at a\n return r, s, q }";

TEST(dot_through_clblast_and_the_kernel) {
  if (!have_devices()) return;
  /* CLBlast builds a program per precision on first use (seconds on PoCL, cold): f32 and c128
   * go through it (real and complex, single and double: the same calls with other types),
   * every precision through the kernel. */
  static const loom_dtype floats[] = {LOOM_F32, LOOM_F64, LOOM_C64, LOOM_C128};
  for (int32_t path = 1; path <= 2; path++) {
    loom__opencl_testing_set_paths(path, 0);
    for (int32_t i = 0; i < LOOM_ARRAY_SIZE(floats); i++) {
      if (path == 2 && (floats[i] == LOOM_F64 || floats[i] == LOOM_C64)) continue;
      if (!check_one(dot_big, floats[i], floats[i], 20, 3, __FILE__, __LINE__)) {
        loom__opencl_testing_set_paths(0, 0);
        return;
      }
    }
  }
  loom__opencl_testing_set_paths(0, 0);
}

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

static bool fourier_graphs(int32_t n, const char *file, int line) {
  char tmpl[1024];
  snprintf(tmpl, sizeof tmpl,
           "graph fft%d(z: $D[3,%d]) { f = fft z axis=1\n i = ifft z axis=-1\n zt = transpose z perm=[1,0]\n"
           " g = fft zt axis=0\n return f, i, g }",
           (int)n, (int)n);
  if (!sweep(tmpl, 20, file, line)) return false;
  snprintf(tmpl, sizeof tmpl,
           "graph rfft%d(x: $D[2,%d]) { f = rfft x axis=1\n xt = transpose x perm=[1,0]\n g = rfft xt "
           "axis=0\n return f, g }",
           (int)n, (int)n);
  if (!sweep(tmpl, 20, file, line)) return false;
  snprintf(tmpl, sizeof tmpl,
           "graph irfft%d(z: $D[2,%d], y: $D[%d,3]) { x = irfft z axis=1 n=%d\n w = irfft y axis=0 n=%d\n "
           "return x, w }",
           (int)n, (int)(n / 2 + 1), (int)(n / 2 + 1), (int)n, (int)n);
  return sweep(tmpl, 20, file, line);
}

TEST(fourier_through_clfft_and_the_dft) {
  if (!have_devices()) return;
  /* 12 goes to clFFT (direct and packed; each new plan is a program build, seconds on PoCL
   * cold), 17 to the DFT (a prime clFFT does not take); 16 and 15 with the DFT forced. */
  static const int32_t auto_lengths[] = {12, 17}, dft_lengths[] = {16, 15};
  for (int32_t path = 0; path <= 1; path++) {
    loom__opencl_testing_set_paths(0, path);
    const int32_t *lengths = path ? dft_lengths : auto_lengths;
    for (int32_t i = 0; i < 2; i++)
      if (!fourier_graphs(lengths[i], __FILE__, __LINE__)) {
        loom__opencl_testing_set_paths(0, 0);
        return;
      }
  }
  loom__opencl_testing_set_paths(0, 0);
}
#endif
