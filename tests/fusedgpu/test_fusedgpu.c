/* Fused kernels on OpenCL devices (issue 14, docs/ir-fusion.md): body graphs built with the public
 * builder, run fused through loom__cl_fused (one generated kernel) and unfused through the
 * executor on the same device, compared within the dtype's tolerance: random chains of 1 to
 * 12 elementwise ops over random dtypes and broadcasts ending in each reduction, in every
 * layout of the reduction (group, item, 8-lane vector); NaN and infinity; inputs read through
 * broadcast and offset views; and the Gaussian kernel matrix-vector product at N = 20,000
 * against a double-precision reference. LOOM_FUSEDGPU_BENCH=N times the fused kernel mat-vec
 * at N points (no assertion on time). */
#if LOOM_HAVE_OPENCL
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/gpu/fused_codegen.h"
#include "backends/opencl/opencl_backend.h"
#include "chains.h"
#include "gpu_util.h"

/* ---- running a body fused ------------------------------------------------------------------ */

/* An input as the kernel sees it: a view (type, element strides, offset) of a buffer made
 * from `bytes` bytes of `data`. */
typedef struct fz_in {
  loom_type type;
  int64_t strides[LOOM_MAX_RANK];
  int64_t offset;
  const void *data;
  int64_t bytes;
} fz_in;

static void dense_in(const loom_tensor *t, fz_in *out) {
  memset(out, 0, sizeof *out);
  out->type = t->type;
  int64_t st = 1;
  for (int32_t d = t->type.rank - 1; d >= 0; d--) {
    out->strides[d] = t->type.dims[d] == 1 ? 0 : st;
    st *= t->type.dims[d];
  }
  out->data = t->data;
  loom_type_bytes(&t->type, &out->bytes);
}

/* Runs `body` fused on device xd; outputs allocated into out (one per body output). Returns
 * the status of loom__cl_fused (or of the OpenCL calls) with the message set. */
static loom_status run_fused(const loom__exec_device *xd, const loom_graph *body, const fz_in *in,
                             loom_tensor *out) {
  loom__cl_device *d = xd->dev;
  int32_t np = loom_graph_param_count(body), no = loom_graph_output_count(body);
  loom__dview iv[16], ov[4];
  cl_mem bufs[20] = {0};
  loom_status s = LOOM_OK;
  memset(out, 0, sizeof *out * (size_t)no);
  for (int32_t p = 0; p < np && !s; p++) {
    cl_int err = CL_SUCCESS;
    size_t bytes = in[p].bytes > 0 ? (size_t)in[p].bytes : 1;
    bufs[p] = clCreateBuffer(d->context, CL_MEM_READ_WRITE | (in[p].bytes > 0 ? CL_MEM_COPY_HOST_PTR : 0),
                             bytes, in[p].bytes > 0 ? (void *)in[p].data : NULL, &err);
    s = loom__cl_status(err, "clCreateBuffer");
    memset(&iv[p], 0, sizeof iv[p]);
    iv[p].type = in[p].type;
    memcpy(iv[p].strides, in[p].strides, sizeof iv[p].strides);
    iv[p].buffer = bufs[p];
    iv[p].offset = in[p].offset;
  }
  for (int32_t r = 0; r < no && !s; r++) {
    const loom_type *t = loom_value_type(body, loom_graph_output_at(body, r));
    int64_t bytes = 0;
    loom_type_bytes(t, &bytes);
    s = loom_tensor_init(&out[r], t);
    cl_int err = CL_SUCCESS;
    if (!s)
      bufs[np + r] = clCreateBuffer(d->context, CL_MEM_READ_WRITE, bytes > 0 ? (size_t)bytes : 1, NULL, &err);
    if (!s) s = loom__cl_status(err, "clCreateBuffer");
    memset(&ov[r], 0, sizeof ov[r]);
    ov[r].type = *t;
    ov[r].buffer = bufs[np + r];
  }
  if (!s) {
    pthread_mutex_lock(&d->lock);
    s = loom__cl_fused(d, body, iv, ov, NULL, 0);
    pthread_mutex_unlock(&d->lock);
  }
  if (!s) s = loom__cl_status(clFinish(d->queue), "clFinish");
  for (int32_t r = 0; r < no && !s; r++) {
    int64_t bytes = 0;
    loom_type_bytes(&out[r].type, &bytes);
    if (bytes > 0)
      s = loom__cl_status(
          clEnqueueReadBuffer(d->queue, bufs[np + r], CL_TRUE, 0, (size_t)bytes, out[r].data, 0, NULL, NULL),
          "clEnqueueReadBuffer");
  }
  for (int32_t i = 0; i < np + no; i++)
    if (bufs[i]) clReleaseMemObject(bufs[i]);
  if (s) gt_tensors_free(out, no);
  return s;
}

/* ---- random chains --------------------------------------------------------------------------- */

/* Runs body fused and unfused on dev and compares every output; false after a failure. */
static bool fused_matches(const loom__exec_device *dev, const loom_graph *body, const loom_tensor *in,
                          double scale, const char *what) {
  int32_t np = loom_graph_param_count(body), no = loom_graph_output_count(body);
  loom_tensor ref[4], got[4];
  fz_in fin[16];
  for (int32_t p = 0; p < np; p++) dense_in(&in[p], &fin[p]);
  loom_status s = gt_run(body, dev, in, ref, 0, NULL);
  if (s) {
    loom_test_fail(__FILE__, __LINE__, "%s: %s unfused: %s: %s", what, dev->id, loom_status_string(s),
                   loom_last_error());
    return false;
  }
  s = run_fused(dev, body, fin, got);
  if (s) {
    loom_test_fail(__FILE__, __LINE__, "%s: %s fused: %s: %s", what, dev->id, loom_status_string(s),
                   loom_last_error());
    gt_tensors_free(ref, no);
    return false;
  }
  bool ok = true;
  for (int32_t r = 0; r < no && ok; r++) {
    double rtol, atol;
    char msg[512];
    gt_tolerance(ref[r].type.dtype, scale, &rtol, &atol);
    if (!gt_close(&ref[r], &got[r], rtol, atol, msg, sizeof msg)) {
      loom_test_fail(__FILE__, __LINE__, "%s: %s output %d (fused vs unfused): %s", what, dev->id, (int)r,
                     msg);
      ok = false;
    }
  }
  gt_tensors_free(ref, no);
  gt_tensors_free(got, no);
  return ok;
}

/* Random chains of 1..12 ops over f32, f64, i32 and i64 ending in each final op, fused (both
 * layouts of reductions) against unfused. */
TEST(random_chains_match_unfused) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  int32_t nd = gt_devices(LOOM_BACKEND_OPENCL, devs);
  if (nd == 0) return;
  const loom__exec_device *dev = devs[0];
  loom__cl_device *d = dev->dev;
  static const loom_dtype dts[] = {LOOM_F32, LOOM_F64, LOOM_I32, LOOM_I64};
  int cases = 0;
  for (int di = 0; di < 4; di++) {
    if (dts[di] == LOOM_F64 && !d->fp64) continue;
    for (int f = 0; f < F_COUNT; f++) {
      uint64_t seed = (uint64_t)(di * 100 + f + 1);
      int n_ops = 1 + (int)((di * F_COUNT + f) % 12);
      loom_graph *g = build_chain(seed, dts[di], n_ops, f);
      ASSERT_TRUE(g != NULL);
      loom_tensor in[4];
      ASSERT_OK(gt_inputs(g, seed, in));
      for (int layout = 3; layout >= 1; layout--) {
        if (layout != 2 && (f == F_NONE || f >= F_TOPK_LARGEST)) continue; /* no reduction layout */
        loom__cl_fused_testing_layout(layout);
        char what[160];
        snprintf(what, sizeof what, "%s chain of %d ops (seed %llu) ending in %s, %s layout",
                 loom_dtype_name(dts[di]), n_ops, (unsigned long long)seed, final_names[f],
                 layout == 1   ? "group"
                 : layout == 2 ? "item"
                               : "vector");
        bool ok = fused_matches(dev, g, in, 20, what);
        cases++;
        if (!ok) break;
      }
      loom__cl_fused_testing_layout(0);
      gt_tensors_free(in, 4);
      loom_graph_destroy(g);
      if (loom_test_failed()) return;
    }
  }
  ASSERT_TRUE(cases >= 40);
}

/* NaN and infinities in the inputs propagate through the fused expression and reductions as
 * through the unfused ops (max/min give NaN, argmax/argmin and topk rank NaN first). */
TEST(nan_and_infinity_propagate) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_OPENCL, devs) == 0) return;
  for (int f = F_SUM; f < F_COUNT; f++) {
    for (int layout = 3; layout >= 1; layout--) {
      loom_graph *g = NULL;
      ASSERT_OK(loom_graph_create("nan", &g));
      loom_type tx = {LOOM_F32, 2, {4, 1500}}, tb = {LOOM_F32, 1, {1500}};
      loom_value x = loom_graph_param(g, "x", &tx), b = loom_graph_param(g, "b", &tb);
      loom_value t = loom_binary(g, LOOM_OP_MUL, x, loom_scalar_f64(g, LOOM_F32, 2));
      t = loom_binary(g, LOOM_OP_MAXIMUM, t, b);
      t = loom_unary(g, LOOM_OP_TANH, t);
      t = loom_binary(g, LOOM_OP_ADD, t, x);
      loom_value outs[2];
      int64_t ax1[] = {1};
      int n_out = 1;
      switch (f) {
        case F_ARGMAX:
        case F_ARGMIN:
          outs[0] = loom_argreduce(g, f == F_ARGMAX ? LOOM_OP_ARGMAX : LOOM_OP_ARGMIN, t, 1);
          break;
        case F_TOPK_LARGEST:
        case F_TOPK_SMALLEST:
          loom_topk(g, t, 4, 1, f == F_TOPK_LARGEST, &outs[0], &outs[1]);
          n_out = 2;
          break;
        default: {
          static const loom_op red[] = {[F_SUM] = LOOM_OP_REDUCE_SUM,
                                        [F_MAX] = LOOM_OP_REDUCE_MAX,
                                        [F_MIN] = LOOM_OP_REDUCE_MIN,
                                        [F_PROD] = LOOM_OP_REDUCE_PROD,
                                        [F_MEAN] = LOOM_OP_REDUCE_MEAN};
          outs[0] = loom_reduce(g, red[f], t, 1, ax1, false);
        }
      }
      ASSERT_OK(loom_graph_return(g, outs, n_out));
      ASSERT_OK(loom_graph_verify(g));
      loom_tensor in[2];
      ASSERT_OK(gt_inputs(g, 7, in));
      float *xv = in[0].data, *bv = in[1].data;
      /* Row 0: one NaN late; row 1: +inf and -inf (their sum is NaN); row 2: +inf only;
       * row 3: finite, with a NaN in b (maximum propagates it in every row at that column...
       * only where x's term is not NaN already). */
      xv[0 * 1500 + 1400] = NAN;
      xv[1 * 1500 + 10] = INFINITY;
      xv[1 * 1500 + 700] = -INFINITY;
      xv[2 * 1500 + 1499] = INFINITY;
      bv[333] = NAN;
      if (f == F_PROD) /* products of 1500 terms under/overflow anyway: keep them near 1 */
        for (int64_t i = 0; i < 4 * 1500; i++)
          if (isfinite(xv[i])) xv[i] = 0.2f + 0.0001f * (float)(i % 7);
      loom__cl_fused_testing_layout(layout);
      char what[96];
      snprintf(what, sizeof what, "NaN/inf ending in %s, %s layout", final_names[f],
               layout == 1   ? "group"
               : layout == 2 ? "item"
                             : "vector");
      bool ok = layout != 2 && f >= F_TOPK_LARGEST ? true : fused_matches(devs[0], g, in, 20, what);
      loom__cl_fused_testing_layout(0);
      gt_tensors_free(in, 2);
      loom_graph_destroy(g);
      if (!ok) return;
    }
  }
}

/* Inputs reach the kernel as views: a row broadcast (stride 0), a transposed and offset view;
 * the fused result equals the unfused run on the same values laid out densely. */
TEST(strided_and_broadcast_inputs) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_OPENCL, devs) == 0) return;
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_create("views", &g));
  loom_type t = {LOOM_F32, 2, {6, 40}};
  loom_value a = loom_graph_param(g, "a", &t), b = loom_graph_param(g, "b", &t);
  loom_value e = loom_unary(g, LOOM_OP_EXP, loom_binary(g, LOOM_OP_SUB, a, b));
  int64_t ax[] = {1};
  loom_value r = loom_reduce(g, LOOM_OP_REDUCE_SUM, e, 1, ax, false);
  ASSERT_OK(loom_graph_return(g, &r, 1));
  ASSERT_OK(loom_graph_verify(g));
  /* a: one row of 40 broadcast over 6 rows; b: the transpose of a [40,6] buffer from element 5. */
  float row[40], tb[5 + 40 * 6];
  for (int j = 0; j < 40; j++) row[j] = 0.05f * (float)j - 1;
  for (int i = 0; i < 5 + 240; i++) tb[i] = 0.01f * (float)((i * 37) % 101);
  loom_tensor dense[2];
  ASSERT_OK(loom_tensor_init(&dense[0], &t));
  ASSERT_OK(loom_tensor_init(&dense[1], &t));
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 40; j++) {
      ((float *)dense[0].data)[i * 40 + j] = row[j];
      ((float *)dense[1].data)[i * 40 + j] = tb[5 + j * 6 + i];
    }
  fz_in fin[2] = {{t, {0, 1}, 0, row, sizeof row}, {t, {1, 6}, 5, tb, sizeof tb}};
  loom_tensor ref, got;
  ASSERT_OK(gt_run(g, devs[0], dense, &ref, 0, NULL));
  ASSERT_OK(run_fused(devs[0], g, fin, &got));
  double rtol, atol;
  char msg[512];
  gt_tolerance(LOOM_F32, 20, &rtol, &atol);
  bool ok = gt_close(&ref, &got, rtol, atol, msg, sizeof msg);
  if (!ok) loom_test_fail(__FILE__, __LINE__, "views: %s", msg);
  loom_tensor_deinit(&ref);
  loom_tensor_deinit(&got);
  gt_tensors_free(dense, 2);
  loom_graph_destroy(g);
}

/* ---- the Gaussian kernel matrix-vector product -------------------------------------------- */

/* Points in [0, 4)^3 (so each row has a few hundred near neighbours), b in [-1, 1). */
static void kmv_inputs(int64_t n, loom_tensor *in) {
  loom_type t3 = {LOOM_F32, 2, {n, 3}}, t1 = {LOOM_F32, 1, {n}};
  loom_tensor_init(&in[0], &t3);
  loom_tensor_init(&in[1], &t3);
  for (int i = 2; i < 5; i++) loom_tensor_init(&in[i], &t1);
  uint64_t s = 99;
  float *x = in[0].data, *y = in[1].data, *sx = in[2].data, *sy = in[3].data, *b = in[4].data;
  for (int64_t i = 0; i < 3 * n; i++) {
    x[i] = 4.0f * (float)(fz_next(&s) >> 40) / (float)(1 << 24);
    y[i] = 4.0f * (float)(fz_next(&s) >> 40) / (float)(1 << 24);
  }
  for (int64_t i = 0; i < n; i++) {
    sx[i] = x[3 * i] * x[3 * i] + x[3 * i + 1] * x[3 * i + 1] + x[3 * i + 2] * x[3 * i + 2];
    sy[i] = y[3 * i] * y[3 * i] + y[3 * i + 1] * y[3 * i + 1] + y[3 * i + 2] * y[3 * i + 2];
    b[i] = 2.0f * (float)(fz_next(&s) >> 40) / (float)(1 << 24) - 1.0f;
  }
}

/* At a size the unfused graph fits PoCL's memory: fused against unfused on the device. */
TEST(kernel_matvec_small_matches_unfused) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_OPENCL, devs) == 0) return;
  loom_graph *g = kmv_body(1500);
  ASSERT_TRUE(g != NULL);
  loom_tensor in[5];
  kmv_inputs(1500, in);
  for (int layout = 3; layout >= 1; layout--) {
    loom__cl_fused_testing_layout(layout);
    static const char *const names[] = {"", "kmv N=1500, group layout", "kmv N=1500, item layout",
                                        "kmv N=1500, vector layout"};
    bool ok = fused_matches(devs[0], g, in, 100, names[layout]);
    loom__cl_fused_testing_layout(0);
    if (!ok) break;
  }
  gt_tensors_free(in, 5);
  loom_graph_destroy(g);
}

/* Points in 2-D and 4-D (a dot of 2 and 4 terms, its second operand read through a transpose,
 * whose lanes the vector layout loads as K vectors and a shuffle), 1,027 of them (a run of
 * 1024 and a tail), summed into each row; and the product too: fused against unfused. */
TEST(dot_of_interleaved_points_matches_unfused) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_OPENCL, devs) == 0) return;
  const int64_t n = 61, m = 1027;
  for (int64_t k = 2; k <= 4; k += 2) {
    for (int reduce = 0; reduce < 2; reduce++) {
      loom_graph *g = NULL;
      ASSERT_OK(loom_graph_create("dotk", &g));
      loom_type tx = {LOOM_F32, 2, {n, k}}, ty = {LOOM_F32, 2, {m, k}}, tb = {LOOM_F32, 1, {m}};
      loom_value x = loom_graph_param(g, "x", &tx), y = loom_graph_param(g, "y", &ty),
                 b = loom_graph_param(g, "b", &tb);
      int64_t perm[] = {1, 0}, rowv[] = {1, m}, ax[] = {1};
      loom_value d = loom_dot(g, x, loom_transpose(g, y, 2, perm));
      loom_value e = loom_binary(g, LOOM_OP_MUL, loom_unary(g, LOOM_OP_EXP, loom_unary(g, LOOM_OP_NEG, d)),
                                 loom_reshape(g, b, 2, rowv));
      loom_value r = reduce ? loom_reduce(g, LOOM_OP_REDUCE_SUM, e, 1, ax, false)
                            : loom_reduce(g, LOOM_OP_REDUCE_MAX, e, 1, ax, false);
      loom_graph_return(g, &r, 1);
      ASSERT_OK(loom_graph_verify(g));
      loom_tensor in[3];
      loom_tensor_init(&in[0], &tx);
      loom_tensor_init(&in[1], &ty);
      loom_tensor_init(&in[2], &tb);
      uint64_t seed = 7 + (uint64_t)k;
      for (int t = 0; t < 3; t++) {
        float *v = in[t].data;
        int64_t count = t == 0 ? n * k : t == 1 ? m * k : m;
        for (int64_t i = 0; i < count; i++) v[i] = 2.0f * (float)(fz_next(&seed) >> 40) / (float)(1 << 24);
      }
      char what[64];
      snprintf(what, sizeof what, "dot of %d terms then %s, vector layout", (int)k, reduce ? "sum" : "max");
      loom__cl_fused_testing_layout(3);
      bool ok = fused_matches(devs[0], g, in, (double)m, what);
      loom__cl_fused_testing_layout(0);
      gt_tensors_free(in, 3);
      loom_graph_destroy(g);
      if (!ok) return;
    }
  }
}

/* N = 20,000 (the [N,N] kernel matrix would be 1.6 GB): the fused result against a
 * double-precision reference of every 16th row, within 1e-4 relative of the row's sum of
 * |terms| (the sum itself may cancel). */
TEST(kernel_matvec_20000_matches_double_reference) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_OPENCL, devs) == 0) return;
  const int64_t n = 20000;
  loom_graph *g = kmv_body(n);
  ASSERT_TRUE(g != NULL);
  loom_tensor in[5], got;
  kmv_inputs(n, in);
  fz_in fin[5];
  for (int p = 0; p < 5; p++) dense_in(&in[p], &fin[p]);
  loom_status s = run_fused(devs[0], g, fin, &got);
  if (s)
    loom_test_fail(__FILE__, __LINE__, "kmv N=20000 fused: %s: %s", loom_status_string(s), loom_last_error());
  const float *x = in[0].data, *y = in[1].data, *b = in[4].data, *a = got.data;
  int bad = 0;
  for (int64_t i = 0; !s && i < n && bad < 5; i += 16) {
    double sum = 0, mag = 0;
    for (int64_t j = 0; j < n; j++) {
      double dx = (double)x[3 * i] - y[3 * j], dy = (double)x[3 * i + 1] - y[3 * j + 1],
             dz = (double)x[3 * i + 2] - y[3 * j + 2];
      double term = exp(-0.5 * (dx * dx + dy * dy + dz * dz)) * b[j];
      sum += term;
      mag += fabs(term);
    }
    if (fabs(a[i] - sum) > 1e-4 * mag + 1e-6) {
      loom_test_fail(__FILE__, __LINE__,
                     "kmv N=20000 row %lld: fused %.9g, float64 reference %.9g (sum |terms| %.6g)",
                     (long long)i, (double)a[i], sum, mag);
      bad++;
    }
  }
  if (!s) loom_tensor_deinit(&got);
  gt_tensors_free(in, 5);
  loom_graph_destroy(g);
}

/* Body ops the generator cannot express are refused with UNSUPPORTED naming the op. */
TEST(unsupported_bodies_name_the_op) {
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_OPENCL, devs) == 0) return;
  loom_graph *g = NULL;
  ASSERT_OK(loom_graph_create("iota_body", &g));
  loom_type t = {LOOM_F32, 2, {3, 4}};
  loom_value x = loom_graph_param(g, "x", &t);
  loom_value r = loom_binary(g, LOOM_OP_ADD, x, loom_iota(g, &t, 1));
  ASSERT_OK(loom_graph_return(g, &r, 1));
  loom_tensor in[1], out[1];
  ASSERT_OK(gt_inputs(g, 1, in));
  fz_in fin[1];
  dense_in(&in[0], &fin[0]);
  ASSERT_STATUS(run_fused(devs[0], g, fin, out), LOOM_ERR_UNSUPPORTED);
  ASSERT_CONTAINS(loom_last_error(), "iota");
  ASSERT_CONTAINS(loom_last_error(), "ocl0");
  gt_tensors_free(in, 1);
  loom_graph_destroy(g);
}

/* Not a test: LOOM_FUSEDGPU_BENCH=N times the fused kmv at N points on ocl0 (best of 3 after
 * a warm-up that builds the kernel), for the figures. */
TEST(bench_kernel_matvec) {
  const char *env = getenv("LOOM_FUSEDGPU_BENCH");
  if (!env || !*env) {
    loom_test_skip("set LOOM_FUSEDGPU_BENCH=N to time the fused kernel mat-vec");
    return;
  }
  const loom__exec_device *devs[GT_MAX_DEVICES];
  if (gt_devices(LOOM_BACKEND_OPENCL, devs) == 0) return;
  int64_t n = atoll(env);
  loom_graph *g = kmv_body(n);
  ASSERT_TRUE(g != NULL);
  loom_tensor in[5], got;
  kmv_inputs(n, in);
  fz_in fin[5];
  for (int p = 0; p < 5; p++) dense_in(&in[p], &fin[p]);
  const char *lay = getenv("LOOM_FUSEDGPU_LAYOUT");
  if (getenv("LOOM_FUSEDGPU_NO_FP64")) loom__opencl_testing_disable_fp64(devs[0]->dev); /* float sums */
  loom__cl_fused_testing_layout(lay ? atoi(lay) : 0);
  double best = 1e30;
  for (int rep = 0; rep < 4; rep++) {
    /* The process's CPU time too: on a shared machine it says more than the wall clock. */
    struct timespec t0, t1, c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    ASSERT_OK(run_fused(devs[0], g, fin, &got));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
    printf("fused kmv N=%lld on %s: %.3f s wall, %.3f s CPU%s (a[0] = %.6g)\n", (long long)n, devs[0]->id,
           sec, cpu, rep ? "" : " (first: builds the kernel)", (double)((float *)got.data)[0]);
    if (rep && sec < best) best = sec;
    loom_tensor_deinit(&got);
  }
  printf("fused kmv N=%lld on %s: best of 3 %.3f s\n", (long long)n, devs[0]->id, best);
  loom__cl_fused_testing_layout(0);
  gt_tensors_free(in, 5);
  loom_graph_destroy(g);
}

#else
#include "harness.h"
TEST(no_opencl) {
  loom_test_skip("built without OpenCL");
}
#endif
