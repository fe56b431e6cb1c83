/* The fused evaluator's direct distance top-k (cpu_fused_run.h lists the parts): a topk of the
 * smallest over sum_k (a_k - b_k)^2, as the distance rewrite's direct form writes a kNN at small
 * d (rewrite_match.c, direct_sum: per feature a sub of a column of x and a row of y^T, squared,
 * added in order), and the fuse rewrite leaves it. The generic evaluator runs that as 3d - 1
 * passes over each block and a fold; here it is one loop per row and tile of columns: each
 * tile's rows of y^T packed once for a block of rows, the distances of a row computed in
 * registers with the unfused roundings (the square and the add rounded apart: no contraction
 * into a multiply-add), then merged into the row's k best behind a vector threshold test
 * (loom__cfz_best_merge). */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DT3_SIMD 1
#else
#define DT3_SIMD 0
#endif

#include "backends/cpu/cpu_fused_run.h"
#include "backends/cpu/cpu_kernels.h"
#include "ir/pattern.h"

/* DT_MAX_D: the direct form is written out up to d = 32 (LOOM_DISTANCE_UNROLL_MAX_D); k up to
 * DT_MAX_K as in cpu_fused_gemm.c. d = 3 runs DT_G rows at a time, testing runs of DT_RUN
 * columns against each row's worst kept (DT_COLS is a whole number of runs). */
enum { DT_MAX_D = 32, DT_ROWS = 64, DT_COLS = 2048, DT_MAX_K = 64, DT_G = 4, DT_RUN = 64 };

/* One feature: the per-row operand (a column of x: stride 0 along the columns) and the
 * per-column one (a row of y^T: stride 0 along the rows). */
typedef struct dt_term {
  const float *a, *b;
  int64_t sa, sb; /* a's stride down the rows, b's along the columns */
} dt_term;

typedef struct dt_plan {
  int64_t n, m, k;
  int32_t d;
  dt_term t[DT_MAX_D];
  const loom__view *out;
} dt_plan;

/* A parameter or a view of one, as its view over the space, or false. */
static bool space_view(const loom_graph *body, const loom__view *in, const loom__layout *lay, int32_t id,
                       const loom_type *space, loom__view *out) {
  const loom__layout *l = &lay[id];
  if ((l->owns && body->values[id].op >= 0) || l->base < 0 || body->values[l->base].op != -1) return false;
  loom__view v;
  memset(&v, 0, sizeof v);
  v.type = body->values[id].type;
  if (v.type.dtype != LOOM_F32) return false;
  memcpy(v.strides, l->strides, sizeof v.strides);
  v.data = (char *)in[body->values[l->base].result].data + l->offset * (int64_t)sizeof(float);
  loom__view_broadcast_to(&v, space, out);
  return true;
}

/* sub's operands as a term: one constant along the columns, the other along the rows. */
static bool term_of(const loom_graph *body, const loom__view *in, const loom__layout *lay,
                    const loom__op *sub, const loom_type *space, dt_term *t) {
  loom__view p, q;
  if (!space_view(body, in, lay, sub->inputs[0], space, &p) ||
      !space_view(body, in, lay, sub->inputs[1], space, &q))
    return false;
  if (p.strides[1] != 0 && q.strides[1] == 0) { /* (b - a)^2 == (a - b)^2 exactly */
    loom__view s = p;
    p = q;
    q = s;
  }
  if (p.strides[1] != 0 || q.strides[0] != 0) return false;
  *t = (dt_term){p.data, q.data, p.strides[0], q.strides[1]};
  return true;
}

/* Whether body is sub, square (or mul t t), then per further feature sub, square, add onto the
 * sum, ending in a topk of the smallest along the rows; the plan over in. */
static bool dt_walk(const loom_graph *body, const loom__view *in, const loom__layout *lay,
                    const loom_type *space, dt_plan *P) {
  int32_t acc = -1, sub = -1, sq = -1;
  for (int32_t i = 0; i < body->n_ops - 1; i++) {
    const loom__op *op = &body->ops[i];
    if (loom__op_info_of(op->kind)->cls == LOOM_CLASS_LAYOUT) continue;
    int32_t out = op->outputs[0];
    if (!loom_type_equal(&body->values[out].type, space)) return false;
    if (op->kind == LOOM_OP_SUB && sub < 0 && sq < 0) {
      if (P->d == DT_MAX_D || !term_of(body, in, lay, op, space, &P->t[P->d])) return false;
      sub = out;
    } else if (sub >= 0 && op->inputs[0] == sub &&
               (op->kind == LOOM_OP_SQUARE || (op->kind == LOOM_OP_MUL && op->inputs[1] == sub))) {
      sq = out, sub = -1;
      P->d++;
      if (acc < 0) acc = sq, sq = -1;
    } else if (op->kind == LOOM_OP_ADD && sq >= 0 && acc >= 0 &&
               ((op->inputs[0] == acc && op->inputs[1] == sq) ||
                (op->inputs[0] == sq && op->inputs[1] == acc))) {
      acc = out, sq = -1;
    } else {
      return false;
    }
  }
  return sub < 0 && sq < 0 && acc == body->ops[body->n_ops - 1].inputs[0] && P->d >= 1;
}

static bool dt_match(const loom_graph *body, const loom__view *in, const loom__view *out, dt_plan *P) {
  memset(P, 0, sizeof *P);
  if (body->n_ops < 3 || body->n_outputs != 2 || out[0].type.dtype != LOOM_F32 ||
      out[1].type.dtype != LOOM_I64)
    return false;
  const loom__op *top = &body->ops[body->n_ops - 1];
  const loom_type *space = &body->values[top->inputs[0]].type;
  int32_t axis;
  if (top->kind != LOOM_OP_TOPK || top->attrs.largest || space->rank != 2 || space->dtype != LOOM_F32 ||
      !loom__axis_normalize(top->attrs.axis, 2, &axis) || axis != 1 || top->attrs.k < 1 ||
      top->attrs.k > DT_MAX_K || top->attrs.k > space->dims[1] || space->dims[0] < 1)
    return false;
  loom__layout *lay = malloc(sizeof *lay * (size_t)(body->n_values + 1));
  if (!lay) return false;
  for (int32_t p = 0; p < body->n_params; p++) {
    int32_t id = body->params[p];
    memset(&lay[id], 0, sizeof lay[id]);
    lay[id].base = id;
    memcpy(lay[id].strides, in[p].strides, sizeof lay[id].strides);
  }
  bool ok = !loom__graph_layouts_given(body, lay) && dt_walk(body, in, lay, space, P);
  free(lay);
  P->n = space->dims[0];
  P->m = space->dims[1];
  P->k = top->attrs.k;
  P->out = out;
  return ok;
}

/* A row's distances to a tile's n columns (b: the tile's d rows, packed). */
KERNEL void dt_row_body(const float *restrict a, const float *restrict b, int32_t d, float *restrict v,
                        int64_t n) {
  const float a0 = a[0];
  if (d == 3) { /* points in 3-D: one pass, the sum in registers, added in the same order */
    const float a1 = a[1], a2 = a[2];
    const float *restrict b1 = b + DT_COLS, *restrict b2 = b + 2 * DT_COLS;
    _Pragma("omp simd") for (int64_t j = 0; j < n; j++) {
      float t0 = a0 - b[j], t1 = a1 - b1[j], t2 = a2 - b2[j];
      float s0 = t0 * t0, s1 = t1 * t1, s2 = t2 * t2;
      float u = s0 + s1;
      v[j] = u + s2;
    }
    return;
  }
  _Pragma("omp simd") for (int64_t j = 0; j < n; j++) {
    float t = a0 - b[j];
    v[j] = t * t;
  }
  for (int32_t f = 1; f < d; f++) {
    const float af = a[f];
    const float *restrict bf = b + (int64_t)f * DT_COLS;
    _Pragma("omp simd") for (int64_t j = 0; j < n; j++) {
      float t = af - bf[j];
      float s = t * t;
      v[j] = v[j] + s;
    }
  }
}
ISA_VARIANTS_VOID(void, dt_row, (const float *a, const float *b, int32_t d, float *v, int64_t n),
                  (a, b, d, v, n))

/* ---- d = 3 in registers (AVX-512 or AVX2) ----
 * A group of DT_G rows against a packed tile: each vector of columns loaded once for the group,
 * each row's distances computed in registers with the unfused roundings, and only a run's least
 * value per row kept (min drops a NaN distance: it keeps its second operand); a run whose least
 * is below the row's worst kept (or whose row still holds a placeholder or a NaN, so every lane
 * passes !(least >= worst)) is computed again, the same way, and only the lanes that may enter
 * (!(d >= worst), a vector compare) are offered. Most runs cost 9 vector ops per row and vector
 * and never leave the registers. The tile's padding (NaN) never lowers a least either. */
#if DT3_SIMD
#define DT3_GROUP(NAME, TARGET, V, W, SET1, LOAD, STORE, MIN, MAY_ENTER)                                    \
  TARGET static void NAME##_rescan(const float *w, const float *a, const loom__cfz_best *h, int64_t k,      \
                                   int64_t c0, int64_t j, int64_t e) {                                      \
    float buf[W];                                                                                           \
    V x0 = SET1(a[0]), x1 = SET1(a[1]), x2 = SET1(a[2]);                                                    \
    const float *worst = &h->v[(k - 1) * h->sv];                                                            \
    for (int64_t t = j; t < e; t += W) {                                                                    \
      V t0 = x0 - LOAD(w + t), t1 = x1 - LOAD(w + DT_COLS + t), t2 = x2 - LOAD(w + 2 * DT_COLS + t);        \
      V u = t0 * t0 + t1 * t1, d = u + t2 * t2;                                                             \
      unsigned bits = MAY_ENTER(d, SET1(*worst));                                                           \
      if (e - t < W) bits &= (1u << (e - t)) - 1; /* not the padding */                                     \
      if (!bits) continue;                                                                                  \
      STORE(buf, d);                                                                                        \
      for (; bits; bits &= bits - 1) {                                                                      \
        int l = __builtin_ctz(bits);                                                                        \
        if (!(buf[l] >= *worst)) loom__cfz_best_offer(h, k, buf[l], c0 + t + l);                            \
      }                                                                                                     \
    }                                                                                                       \
  }                                                                                                         \
  TARGET static void NAME(const float *w, int64_t cols, const float *a, const loom__cfz_best *h, int64_t k, \
                          int64_t c0) {                                                                     \
    V x0[DT_G], x1[DT_G], x2[DT_G], thr[DT_G]; /* thr: the row's worst kept, NaN while it may be */         \
    _Pragma("GCC unroll 4") for (int r = 0; r < DT_G; r++) {                                                \
      x0[r] = SET1(a[3 * r]), x1[r] = SET1(a[3 * r + 1]), x2[r] = SET1(a[3 * r + 2]);                       \
      thr[r] = SET1(h[r].v[(k - 1) * h[r].sv]);                                                             \
    }                                                                                                       \
    for (int64_t j = 0; j < cols; j += DT_RUN) {                                                            \
      V lo[DT_G];                                                                                           \
      _Pragma("GCC unroll 4") for (int r = 0; r < DT_G; r++) lo[r] = SET1(INFINITY);                        \
      for (int64_t t = j; t < j + DT_RUN; t += W) {                                                         \
        V p = LOAD(w + t), q = LOAD(w + DT_COLS + t), s = LOAD(w + 2 * DT_COLS + t);                        \
        _Pragma("GCC unroll 4") for (int r = 0; r < DT_G; r++) {                                            \
          V t0 = x0[r] - p, t1 = x1[r] - q, t2 = x2[r] - s;                                                 \
          V u = t0 * t0 + t1 * t1;                                                                          \
          lo[r] = MIN(u + t2 * t2, lo[r]);                                                                  \
        }                                                                                                   \
      }                                                                                                     \
      int64_t e = cols - j < DT_RUN ? cols : j + DT_RUN;                                                    \
      _Pragma("GCC unroll 4") for (int r = 0; r < DT_G; r++) {                                              \
        if (__builtin_expect(MAY_ENTER(lo[r], thr[r]) != 0, 0)) {                                           \
          NAME##_rescan(w, a + 3 * r, &h[r], k, c0, j, e);                                                  \
          thr[r] = SET1(h[r].v[(k - 1) * h[r].sv]);                                                         \
        }                                                                                                   \
      }                                                                                                     \
    }                                                                                                       \
  }
/* The lanes that may enter: !(d >= worst), so every lane against a NaN worst (a placeholder) */
#define DT3_NGE16(x, y) ((unsigned)_mm512_cmp_ps_mask((x), (y), _CMP_NGE_UQ))
#define DT3_NGE8(x, y) ((unsigned)_mm256_movemask_ps(_mm256_cmp_ps((x), (y), _CMP_NGE_UQ)))
DT3_GROUP(dt3_group_v4, __attribute__((target("arch=x86-64-v4"))), __m512, 16, _mm512_set1_ps,
          _mm512_loadu_ps, _mm512_storeu_ps, _mm512_min_ps, DT3_NGE16)
DT3_GROUP(dt3_group_v3, __attribute__((target("arch=x86-64-v3"))), __m256, 8, _mm256_set1_ps, _mm256_loadu_ps,
          _mm256_storeu_ps, _mm256_min_ps, DT3_NGE8)
#endif

/* Rows [r0, r0 + rows) of a d = 3 plan in groups of DT_G, tile by tile (w: 3 tiles, padded to
 * whole runs with NaN); a short last group fills its places with row r0's point and a list of
 * its own on the stack, whose offers are dropped. False where the CPU has neither AVX2 nor
 * AVX-512 (or LOOM_CPU_ISA says so), for the portable loop. */
static bool dt3_task(const dt_plan *P, int64_t r0, int64_t rows, float *w) {
#if DT3_SIMD
  int isa = loom__cpu_isa_level();
  if (P->d != 3 || isa < 3) return false;
  float spare_v[DT_MAX_K];
  int64_t spare_i[DT_MAX_K];
  for (int64_t c0 = 0; c0 < P->m; c0 += DT_COLS) {
    int64_t cols = P->m - c0 < DT_COLS ? P->m - c0 : DT_COLS, padded = (cols + DT_RUN - 1) / DT_RUN * DT_RUN;
    for (int32_t f = 0; f < 3; f++) {
      const float *b = P->t[f].b + c0 * P->t[f].sb;
      float *o = w + (int64_t)f * DT_COLS;
      int64_t s = P->t[f].sb;
      for (int64_t j = 0; j < cols; j++) o[j] = b[j * s];
      for (int64_t j = cols; j < padded; j++) o[j] = NAN;
    }
    for (int64_t i = 0; i < rows; i += DT_G) {
      float a[3 * DT_G];
      loom__cfz_best h[DT_G];
      for (int r = 0; r < DT_G; r++) {
        int64_t row = r0 + (i + r < rows ? i + r : 0);
        for (int32_t f = 0; f < 3; f++) a[3 * r + f] = P->t[f].a[row * P->t[f].sa];
        h[r] = i + r < rows ? loom__cfz_best_row(P->out, row) : (loom__cfz_best){spare_v, spare_i, 1, 1};
        if (i + r >= rows) loom__cfz_best_init(&h[r], P->k);
      }
      if (isa >= 4)
        dt3_group_v4(w, cols, a, h, P->k, c0);
      else
        dt3_group_v3(w, cols, a, h, P->k, c0);
    }
  }
  return true;
#else
  (void)P, (void)r0, (void)rows, (void)w;
  return false;
#endif
}

/* Rows [r0, r0 + rows) against every column, tile by tile; w: d + 1 tiles of DT_COLS floats. */
static void dt_task(const dt_plan *P, int64_t r0, int64_t rows, float *w) {
  if (dt3_task(P, r0, rows, w)) return;
  float *v = w + (int64_t)P->d * DT_COLS, a[DT_MAX_D];
  for (int64_t c0 = 0; c0 < P->m; c0 += DT_COLS) {
    int64_t cols = P->m - c0 < DT_COLS ? P->m - c0 : DT_COLS;
    for (int32_t f = 0; f < P->d; f++) {
      const float *b = P->t[f].b + c0 * P->t[f].sb;
      float *o = w + (int64_t)f * DT_COLS;
      int64_t s = P->t[f].sb;
      for (int64_t j = 0; j < cols; j++) o[j] = b[j * s];
    }
    for (int64_t i = 0; i < rows; i++) {
      for (int32_t f = 0; f < P->d; f++) a[f] = P->t[f].a[(r0 + i) * P->t[f].sa];
      loom__cfz_best h = loom__cfz_best_row(P->out, r0 + i);
      dt_row(a, w, P->d, v, cols);
      loom__cfz_best_merge(&h, P->k, v, c0, cols);
    }
  }
}

/* The k best of each row are kept where the topk writes them (no list of their own); each
 * thread packs its tiles of y^T into d + 1 blocks of DT_COLS floats (at most 33 x 8 KiB, the
 * evaluator's per-thread blocks: docs/ir-fusion.md, "Memory"). */
static loom_status dt_fused(const dt_plan *P) {
  for (int64_t i = 0; i < P->n; i++) {
    loom__cfz_best h = loom__cfz_best_row(P->out, i);
    loom__cfz_best_init(&h, P->k);
  }
  /* Blocks of rows as tasks, four a thread where the rows allow: a block packs each tile of
   * y^T once, so longer blocks pack less, down to DT_ROWS (and up to 8 DT_ROWS) a block. */
  int64_t per = (P->n + 4 * omp_get_max_threads() - 1) / (4 * omp_get_max_threads());
  per = per < DT_ROWS ? DT_ROWS : per > 8 * DT_ROWS ? 8 * DT_ROWS : per;
  int64_t blocks = (P->n + per - 1) / per;
  bool failed = false;
#pragma omp parallel if (blocks > 1 && P->n * P->m >= (1 << 20)) reduction(|| : failed)
  {
    float *w = loom__aligned_alloc(sizeof(float) * (size_t)(P->d + 1) * DT_COLS);
    failed = !w;
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < blocks; b++) {
      int64_t r0 = b * per, rows = P->n - r0 < per ? P->n - r0 : per;
      if (w) dt_task(P, r0, rows, w);
    }
    loom__aligned_free(w);
  }
  return failed ? loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory for a tile of distances")
                : LOOM_OK;
}

bool loom__cfz_distance_topk_matches(const loom_graph *body, const loom__view *in, const loom__view *out) {
  dt_plan P;
  return dt_match(body, in, out, &P);
}

/* The scratch is not needed: the lists are the outputs (cpu_fused.c passes it to every kernel). */
loom_status loom__cfz_distance_topk(const loom_graph *body, const loom__view *in, const loom__view *out,
                                    void *scratch, int64_t scratch_bytes, bool *taken) {
  (void)scratch, (void)scratch_bytes;
  dt_plan P;
  *taken = dt_match(body, in, out, &P);
  return *taken ? dt_fused(&P) : LOOM_OK;
}
