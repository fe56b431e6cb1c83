/* conv on the host: cross-correlation as in ONNX/PyTorch, x [N,C,spatial..] (1 to 3 spatial
 * dims), w [O,C/G,kernel..], by im2col and gemm.
 *
 * For each image n and group g, the output block out[n, g*Og:(g+1)*Og, :] (Og x Y, Y the
 * output's spatial size) is W_g (Og x Cg*K) times col (Cg*K x Y), where col holds the input
 * patch under each output position. col is built a tile of output positions at a time, the
 * tile sized to what is left of the op's scratch (IR.md: 2x the output), so a conv stays in
 * the memory the estimator promised; only when the scratch cannot hold a useful tile does
 * col come from the heap. A 1x1 kernel with stride 1 and no padding reads x in place.
 *
 * Spatial dims are normalized to three (leading size-1 dims), so one im2col serves 1-D, 2-D
 * and 3-D. f32 runs sgemm, f64 dgemm; f16/bf16 are widened to f32 in im2col and rounded on
 * store.
 *
 * Threads: OpenBLAS threads the gemm, and everything else here runs on the calling thread on
 * purpose. im2col is 1/Og of the gemm's work, and an OpenMP region just before a gemm costs
 * far more than it saves: libgomp's workers spin after the region and take the cores from
 * OpenBLAS's own (pthread) workers. Measured on two cores, 1x64x56x56 * 64x64x3x3: 9 ms
 * with a serial im2col, 95-230 ms with an OpenMP one on a busy machine.
 */
#include <limits.h>
#include <string.h>

#include "backends/cpu/cpu_arena.h"
#include "backends/cpu/cpu_blas_host.h"
#include "backends/cpu/cpu_kernels.h"

/* Output positions per col tile: at least this many from scratch, else a heap tile this big. */
#define CONV_TILE_MIN 64
#define CONV_TILE_HEAP 1024

typedef struct conv_problem {
  int64_t N, C, O, G, Cg, Og;
  int64_t in[3], k[3], out[3], stride[3], pad[3], dil[3]; /* spatial, normalized to 3 dims */
  int64_t xs_n, xs_c, xs[3];                              /* x's element strides */
  int64_t K, Y, CgK;                                      /* kernel size, output size, Cg*K */
  loom_dtype dtype, ct;                                   /* storage and compute dtypes */
  const char *x;
  char *outp;
} conv_problem;

static int64_t attr_or(const loom_attrs *a, uint32_t bit, const loom_int_list *l, int32_t i, int64_t dflt) {
  return ((a->set & bit) && i < l->count) ? l->v[i] : dflt;
}

static loom_status conv_setup(const loom__op *op, const loom__view *x, const loom__view *w,
                              const loom__view *out, conv_problem *p) {
  const loom_attrs *a = &op->attrs;
  int32_t nsp = x->type.rank - 2;
  memset(p, 0, sizeof *p);
  if (nsp < 1 || nsp > 3 || w->type.rank != x->type.rank || out->type.rank != x->type.rank)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "conv: x and w need 1 to 3 spatial dims");
  p->dtype = x->type.dtype;
  p->ct = (p->dtype == LOOM_F16 || p->dtype == LOOM_BF16) ? LOOM_F32 : p->dtype;
  p->N = x->type.dims[0];
  p->C = x->type.dims[1];
  p->O = w->type.dims[0];
  p->G = (a->set & LOOM_ATTR_GROUPS) ? a->groups : 1;
  if (p->G < 1 || p->C % p->G || p->O % p->G || w->type.dims[1] != p->C / p->G || out->type.dims[0] != p->N ||
      out->type.dims[1] != p->O || w->type.dtype != p->dtype || out->type.dtype != p->dtype)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "conv: operand and result types do not agree");
  p->Cg = p->C / p->G;
  p->Og = p->O / p->G;
  p->xs_n = x->strides[0];
  p->xs_c = x->strides[1];
  p->K = p->Y = 1;
  for (int32_t d = 0; d < 3; d++) {
    int32_t i = d - (3 - nsp); /* index among the op's spatial dims; < 0 for padding dims */
    bool real = i >= 0;
    p->in[d] = real ? x->type.dims[2 + i] : 1;
    p->k[d] = real ? w->type.dims[2 + i] : 1;
    p->out[d] = real ? out->type.dims[2 + i] : 1;
    p->xs[d] = real ? x->strides[2 + i] : 0;
    p->stride[d] = real ? attr_or(a, LOOM_ATTR_STRIDE, &a->stride, i, 1) : 1;
    p->pad[d] = real ? attr_or(a, LOOM_ATTR_PADDING, &a->padding, i, 0) : 0;
    p->dil[d] = real ? attr_or(a, LOOM_ATTR_DILATION, &a->dilation, i, 1) : 1;
    if (p->stride[d] < 1 || p->dil[d] < 1 || p->pad[d] < 0)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "conv: bad stride, padding or dilation");
    p->K *= p->k[d];
    p->Y *= p->out[d];
  }
  p->CgK = p->Cg * p->K;
  p->x = x->data;
  p->outp = out->data;
  return LOOM_OK;
}

/* ---- weights ------------------------------------------------------------------------------ */

/* W as a dense [O, CgK] matrix of the compute dtype: w itself when it is laid out so, else a
 * packed copy. */
static loom_status conv_weights(const conv_problem *p, const loom__view *w, loom__cpu_arena *ar,
                                const void **out_w, int64_t *out_ld) {
  int32_t rank = w->type.rank;
  bool dense = p->ct == p->dtype;
  *out_w = NULL;
  *out_ld = 0;
  int64_t expect = 1;
  for (int32_t i = rank - 1; i >= 1 && dense; i--) {
    if (w->type.dims[i] != 1 && w->strides[i] != expect) dense = false;
    expect *= w->type.dims[i];
  }
  if (dense && (p->O == 1 || (w->strides[0] >= p->CgK && w->strides[0] <= INT_MAX))) {
    *out_w = w->data;
    *out_ld = p->O == 1 ? LOOM_MAX(p->CgK, 1) : w->strides[0];
    return LOOM_OK;
  }
  int64_t es_to = loom_dtype_size(p->ct), es_from = loom_dtype_size(p->dtype);
  char *buf = loom__cpu_arena_take(ar, p->O * p->CgK * es_to, false);
  if (!buf) return loom__oom("conv: packing the weights");
  int64_t total = p->O * p->CgK;
  for (int64_t e = 0; e < total; e++) {
    int64_t off = 0, rem = e;
    for (int32_t i = rank - 1; i >= 0; i--) {
      off += (rem % w->type.dims[i]) * w->strides[i];
      rem /= w->type.dims[i];
    }
    const char *s = (const char *)w->data + off * es_from;
    if (p->dtype == LOOM_F16)
      ((float *)buf)[e] = loom_f16_to_f32(*(const uint16_t *)s);
    else if (p->dtype == LOOM_BF16)
      ((float *)buf)[e] = loom_bf16_to_f32(*(const uint16_t *)s);
    else
      memcpy(buf + e * es_to, s, (size_t)es_to);
  }
  *out_w = buf;
  *out_ld = p->CgK;
  return LOOM_OK;
}

/* ---- im2col ------------------------------------------------------------------------------- */

/* col[r][t] for r < CgK and t < T: the input under kernel tap r (channel c, taps kd kh kw) at
 * output position j0 + t, zero where that falls in the padding. x points at channel 0 of the
 * group in image n. */
#define CONV_IM2COL(NAME, TS, TD, LOAD)                                                        \
  static void NAME(const conv_problem *p, const char *xg, int64_t j0, int64_t T, void *colv) { \
    const TS *x = (const TS *)xg;                                                              \
    TD *col = colv;                                                                            \
    for (int64_t r = 0; r < p->CgK; r++) {                                                     \
      int64_t c = r / p->K, kk = r % p->K;                                                     \
      int64_t kw = kk % p->k[2], kh = (kk / p->k[2]) % p->k[1], kd = kk / (p->k[2] * p->k[1]); \
      const TS *xc = x + c * p->xs_c;                                                          \
      TD *dst = col + r * T;                                                                   \
      int64_t ow = j0 % p->out[2], oh = (j0 / p->out[2]) % p->out[1];                          \
      int64_t od = j0 / (p->out[2] * p->out[1]);                                               \
      for (int64_t t = 0; t < T;) {                                                            \
        int64_t run = LOOM_MIN(T - t, p->out[2] - ow); /* positions left in this output row */ \
        int64_t id = od * p->stride[0] - p->pad[0] + kd * p->dil[0];                           \
        int64_t ih = oh * p->stride[1] - p->pad[1] + kh * p->dil[1];                           \
        if (id < 0 || id >= p->in[0] || ih < 0 || ih >= p->in[1]) {                            \
          for (int64_t u = 0; u < run; u++) dst[t + u] = (TD)0;                                \
        } else {                                                                               \
          const TS *xrow = xc + id * p->xs[0] + ih * p->xs[1];                                 \
          int64_t iw = ow * p->stride[2] - p->pad[2] + kw * p->dil[2];                         \
          for (int64_t u = 0; u < run; u++, iw += p->stride[2])                                \
            dst[t + u] = (iw >= 0 && iw < p->in[2]) ? LOAD(xrow[iw * p->xs[2]]) : (TD)0;       \
        }                                                                                      \
        t += run;                                                                              \
        ow = 0;                                                                                \
        if (++oh == p->out[1]) {                                                               \
          oh = 0;                                                                              \
          od++;                                                                                \
        }                                                                                      \
      }                                                                                        \
    }                                                                                          \
  }

#define CONV_LOAD_SAME(v) (v)
#define CONV_LOAD_F16(v) loom_f16_to_f32(v)
#define CONV_LOAD_BF16(v) loom_bf16_to_f32(v)
CONV_IM2COL(im2col_f32, float, float, CONV_LOAD_SAME)
CONV_IM2COL(im2col_f64, double, double, CONV_LOAD_SAME)
CONV_IM2COL(im2col_f16, uint16_t, float, CONV_LOAD_F16)
CONV_IM2COL(im2col_bf16, uint16_t, float, CONV_LOAD_BF16)

static void im2col(const conv_problem *p, const char *xg, int64_t j0, int64_t T, void *col) {
  switch (p->dtype) {
    case LOOM_F32:
      im2col_f32(p, xg, j0, T, col);
      break;
    case LOOM_F64:
      im2col_f64(p, xg, j0, T, col);
      break;
    case LOOM_F16:
      im2col_f16(p, xg, j0, T, col);
      break;
    default:
      im2col_bf16(p, xg, j0, T, col);
      break;
  }
}

/* ---- the product -------------------------------------------------------------------------- */

/* c (Og x T, leading dim ldc) = W_g (Og x CgK) * B (CgK x T, leading dim ldb). */
static void conv_gemm(const conv_problem *p, const void *wg, int64_t ldw, const void *b, int64_t ldb,
                      int64_t T, void *c, int64_t ldc) {
  if (p->ct == LOOM_F64)
    loom__cpu_blas_get()->dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)p->Og, (int)T, (int)p->CgK,
                                1.0, wg, (int)ldw, b, (int)ldb, 0.0, c, (int)ldc);
  else
    loom__cpu_blas_get()->sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)p->Og, (int)T, (int)p->CgK,
                                1.0f, wg, (int)ldw, b, (int)ldb, 0.0f, c, (int)ldc);
}

/* Rounds an Og x T f32 block into the f16/bf16 output (leading dim Y). */
static void store_half(const conv_problem *p, const float *src, int64_t T, uint16_t *dst) {
  for (int64_t o = 0; o < p->Og; o++)
    for (int64_t t = 0; t < T; t++)
      dst[o * p->Y + t] =
          p->dtype == LOOM_F16 ? loom_f32_to_f16(src[o * T + t]) : loom_f32_to_bf16(src[o * T + t]);
}

/* True when x can be the gemm's B as it is: 1x1 kernel, stride 1, no padding, spatial dims
 * dense, and no conversion. */
static bool conv_direct(const conv_problem *p) {
  if (p->K != 1 || p->ct != p->dtype || p->xs_c < p->Y || p->xs_c > INT_MAX) return false;
  int64_t expect = 1;
  for (int32_t d = 2; d >= 0; d--) {
    if (p->stride[d] != 1 || p->pad[d] != 0) return false;
    if (p->in[d] != 1 && p->xs[d] != expect) return false;
    expect *= p->in[d];
  }
  return true;
}

/* Picks the col tile width and takes its buffers: from scratch when a useful tile fits. */
static loom_status conv_tiles(const conv_problem *p, loom__cpu_arena *ar, bool direct, int64_t *out_T,
                              void **out_col, float **out_tmp) {
  int64_t es = loom_dtype_size(p->ct);
  int64_t per = (direct ? 0 : p->CgK * es) + (p->ct != p->dtype ? p->Og * 4 : 0);
  int64_t T = direct || per == 0 ? p->Y : LOOM_MIN(p->Y, LOOM_MAX(ar->left - 128, 0) / per);
  bool heap = T < LOOM_MIN(p->Y, CONV_TILE_MIN);
  if (heap) T = LOOM_MIN(p->Y, CONV_TILE_HEAP);
  if (T > INT_MAX) T = INT_MAX;
  *out_T = T;
  *out_col = NULL;
  *out_tmp = NULL;
  if (!direct && !(*out_col = loom__cpu_arena_take(ar, p->CgK * T * es, !heap)))
    return loom__oom("conv: im2col buffer");
  if (p->ct != p->dtype && !(*out_tmp = loom__cpu_arena_take(ar, p->Og * T * 4, !heap)))
    return loom__oom("conv: f32 output tile");
  return LOOM_OK;
}

static loom_status conv_run(const conv_problem *p, const loom__view *w, loom__cpu_arena *ar) {
  const void *wmat;
  int64_t ldw, T;
  void *col;
  float *tmp;
  loom_status s = conv_weights(p, w, ar, &wmat, &ldw);
  if (s) return s;
  bool direct = conv_direct(p);
  if (!direct && (p->CgK > INT_MAX || p->Og > INT_MAX))
    return loom__error(LOOM_ERR_UNSUPPORTED, "conv: a group's matrix exceeds BLAS's int range");
  s = conv_tiles(p, ar, direct, &T, &col, &tmp);
  if (s) return s;
  int64_t esx = loom_dtype_size(p->dtype), esc = loom_dtype_size(p->ct);
  for (int64_t n = 0; n < p->N; n++)
    for (int64_t g = 0; g < p->G; g++) {
      const char *xg = p->x + (n * p->xs_n + g * p->Cg * p->xs_c) * esx;
      const char *wg = (const char *)wmat + g * p->Og * ldw * esc;
      char *og = p->outp + (n * p->O + g * p->Og) * p->Y * esx;
      for (int64_t j0 = 0; j0 < p->Y; j0 += T) {
        int64_t t = LOOM_MIN(T, p->Y - j0);
        const void *b = direct ? (const void *)(xg + j0 * esx) : col;
        if (!direct) im2col(p, xg, j0, t, col);
        if (tmp) {
          conv_gemm(p, wg, ldw, b, direct ? p->xs_c : t, t, tmp, t);
          store_half(p, tmp, t, (uint16_t *)og + j0);
        } else {
          conv_gemm(p, wg, ldw, b, direct ? p->xs_c : t, t, og + j0 * esx, p->Y);
        }
      }
    }
  return LOOM_OK;
}

loom_status loom__cpu_conv(const loom_graph *g, const loom__op *op, const loom__view *in,
                           const loom__view *out, void *scratch, int64_t scratch_bytes) {
  (void)g;
  loom_dtype dt = in[0].type.dtype;
  if (dt != LOOM_F32 && dt != LOOM_F64 && dt != LOOM_F16 && dt != LOOM_BF16)
    return loom__error(LOOM_ERR_UNSUPPORTED, "%s: dtype %s is not supported on cpu", loom_op_name(op->kind),
                       loom_dtype_name(dt));
  conv_problem p;
  loom_status s = conv_setup(op, &in[0], &in[1], &out[0], &p);
  if (s) return s;
  if (p.N == 0 || p.O == 0 || p.Y == 0) return LOOM_OK;
  if (p.CgK == 0) {
    memset(p.outp, 0, (size_t)(p.N * p.O * p.Y * loom_dtype_size(p.dtype)));
    return LOOM_OK;
  }
  loom__cpu_arena ar = loom__cpu_arena_make(scratch, scratch_bytes);
  s = conv_run(&p, &in[1], &ar);
  loom__cpu_arena_release(&ar);
  return s;
}
