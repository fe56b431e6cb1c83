/* The fused evaluator's GEMM top-k (cpu_fused_run.h lists the parts): a body that is a topk (the
 * k smallest along the last axis) of an elementwise chain over one f32 dot of more than MAX_K
 * terms, as the distance rewrite's expanded form leaves a kNN: max((-2x).y^T + |x|^2 + |y|^2, 0)
 * (fuse.c, gemm_dot). The dot is computed a tile at a time by the host BLAS (a tile of rows of
 * x times a tile of columns of y^T), the chain is applied to the tile's rows as they leave the
 * GEMM, and each row is merged into its running k best, so the n x m product never exists and a
 * chunked loop's pieces are no longer bounded by it. Each thread owns its row block (or, with
 * too few rows to feed the threads, a part of the columns, whose k best are merged at the end)
 * and calls the BLAS on one thread (OpenBLAS's OpenMP build runs a call made inside a parallel
 * region on the calling thread).
 *
 * Results are the unfused ops': the same BLAS product, each chain op rounded in f32 in its
 * order, and the topk's order (smaller first, NaN last, ties to the lower index). */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_blas_host.h"
#include "backends/cpu/cpu_fused_run.h"
#include "backends/cpu/cpu_kernels.h"
#include "ir/fused_gemm_scratch.h"
#include "ir/pattern.h"

/* GT_MAX_K: as the distance kernel's (a larger k runs the body op by op); GT_MIN_TILE: the
 * fewest floats a thread's tile may have (16 rows of 256 columns) before fewer threads share the
 * scratch's tiles */
enum {
  GT_MAX_CHAIN = 8,
  GT_ROWS = LOOM_GEMM_TOPK_ROWS,
  GT_COLS = LOOM_GEMM_TOPK_COLS,
  GT_MAX_K = 64,
  GT_MIN_TILE = 16 * 256
};

/* A chain op's other operand: a scalar, or a view walking the [n, m] space (stride 0 where it
 * is broadcast). */
typedef struct gt_side {
  const float *p;
  int64_t s0, s1;
  float c;
  bool scalar;
} gt_side;

typedef struct gt_op {
  loom_op kind;
  bool chain_first; /* the chain's value is the op's first operand */
  gt_side side;
} gt_op;

/* One f32 matrix operand of the dot as BLAS reads it. */
typedef struct gt_mat {
  const float *p;
  int64_t s0, s1;
} gt_mat;

typedef struct gt_plan {
  int64_t n, m, kd, k; /* rows, columns, the dot's terms, neighbours */
  gt_mat a, b;
  gt_op ops[GT_MAX_CHAIN];
  int32_t n_ops;
  const loom__view *out;
} gt_plan;

/* The view of body value id (a parameter or a view of one) broadcast to the space, or false. */
static bool leaf_view(const loom_graph *body, const loom__view *in, const loom__layout *lay, int32_t id,
                      const loom_type *space, loom__view *out) {
  const loom__layout *l = &lay[id];
  if (l->owns && body->values[id].op >= 0) return false;
  if (l->base < 0 || body->values[l->base].op != -1) return false;
  int32_t p = body->values[l->base].result;
  loom__view v;
  memset(&v, 0, sizeof v);
  v.type = body->values[id].type;
  if (v.type.dtype != LOOM_F32) return false;
  memcpy(v.strides, l->strides, sizeof v.strides);
  v.data = (char *)in[p].data + l->offset * (int64_t)sizeof(float);
  if (!space) {
    *out = v;
    return true;
  }
  loom__view_broadcast_to(&v, space, out);
  return true;
}

/* A chain op's other operand: a scalar constant or fill, or a leaf. */
static bool side_of(const loom_graph *body, const loom__view *in, const loom__layout *lay, int32_t id,
                    const loom_type *space, gt_side *s) {
  memset(s, 0, sizeof *s);
  int32_t o = body->values[id].op;
  const loom_type *t = &body->values[id].type;
  if (t->dtype != LOOM_F32) return false;
  if (o >= 0 && body->ops[o].kind == LOOM_OP_CONSTANT) {
    if (loom__cpu_elements(t) != 1) return false;
    s->scalar = true;
    s->c = loom__cfz_load_scalar(body->ops[o].const_data, LOOM_F32, 0).f;
    return true;
  }
  if (o >= 0 && body->ops[o].kind == LOOM_OP_FILL) {
    const loom_attrs *a = &body->ops[o].attrs;
    s->scalar = true;
    s->c = a->value_is_int ? (float)a->ivalue : (float)a->value;
    return true;
  }
  loom__view v;
  if (!leaf_view(body, in, lay, id, space, &v)) return false;
  s->p = v.data;
  s->s0 = v.strides[0];
  s->s1 = v.strides[1];
  return true;
}

static bool chain_kind(loom_op k) {
  return k == LOOM_OP_ADD || k == LOOM_OP_SUB || k == LOOM_OP_MUL || k == LOOM_OP_MAXIMUM ||
         k == LOOM_OP_MINIMUM;
}

/* One op of the body into the plan; *chain is the value the chain has reached. */
static bool gt_take(const loom_graph *body, const loom__view *in, const loom__layout *lay, const loom__op *op,
                    const loom_type *space, gt_plan *P, int32_t *chain) {
  loom__op_class cls = loom__op_info_of(op->kind)->cls;
  if (cls == LOOM_CLASS_LAYOUT || op->kind == LOOM_OP_CONSTANT || op->kind == LOOM_OP_FILL) return true;
  if (op->kind == LOOM_OP_DOT) {
    loom__view a, b;
    if (*chain >= 0 || !leaf_view(body, in, lay, op->inputs[0], NULL, &a) ||
        !leaf_view(body, in, lay, op->inputs[1], NULL, &b) || a.type.rank != 2 || b.type.rank != 2)
      return false;
    P->a = (gt_mat){a.data, a.strides[0], a.strides[1]};
    P->b = (gt_mat){b.data, b.strides[0], b.strides[1]};
    P->kd = a.type.dims[1];
    *chain = op->outputs[0];
    return true;
  }
  if (*chain < 0 || !chain_kind(op->kind) || op->n_inputs != 2 || P->n_ops == GT_MAX_CHAIN) return false;
  const loom_type *t = &body->values[op->outputs[0]].type;
  if (t->dtype != LOOM_F32 || !loom_type_equal(t, space)) return false;
  bool first = op->inputs[0] == *chain;
  if (!first && op->inputs[1] != *chain) return false;
  if (op->inputs[0] == op->inputs[1]) return false;
  gt_op *g = &P->ops[P->n_ops];
  g->kind = op->kind;
  g->chain_first = first;
  if (!side_of(body, in, lay, op->inputs[first ? 1 : 0], space, &g->side)) return false;
  P->n_ops++;
  *chain = op->outputs[0];
  return true;
}

/* Whether body is a GEMM top-k (the header comment), and its plan over the operands in. */
static bool gt_match(const loom_graph *body, const loom__view *in, const loom__view *out, gt_plan *P) {
  memset(P, 0, sizeof *P);
  if (body->n_ops < 2 || body->n_outputs != 2 || out[0].type.dtype != LOOM_F32 ||
      out[1].type.dtype != LOOM_I64)
    return false;
  const loom__op *top = &body->ops[body->n_ops - 1];
  if (top->kind != LOOM_OP_TOPK || top->attrs.largest) return false;
  const loom_type *space = &body->values[top->inputs[0]].type;
  int32_t axis;
  if (space->rank != 2 || space->dtype != LOOM_F32 || !loom__axis_normalize(top->attrs.axis, 2, &axis) ||
      axis != 1 || top->attrs.k < 1 || top->attrs.k > GT_MAX_K || top->attrs.k > space->dims[1] ||
      space->dims[0] < 1)
    return false;
  loom__layout *lay = malloc(sizeof *lay * (size_t)(body->n_values + 1));
  if (!lay) return false;
  for (int32_t p = 0; p < body->n_params; p++) {
    int32_t id = body->params[p];
    memset(&lay[id], 0, sizeof lay[id]);
    lay[id].base = id;
    memcpy(lay[id].strides, in[p].strides, sizeof lay[id].strides);
  }
  bool ok = !loom__graph_layouts_given(body, lay);
  int32_t chain = -1;
  for (int32_t i = 0; ok && i < body->n_ops - 1; i++)
    ok = gt_take(body, in, lay, &body->ops[i], space, P, &chain);
  free(lay);
  /* the BLAS takes 32-bit sizes and leading dimensions */
  if (!ok || chain != top->inputs[0] || P->kd <= MAX_K || P->kd > INT32_MAX || space->dims[1] > INT32_MAX ||
      P->a.s0 > INT32_MAX || P->a.s1 > INT32_MAX || P->b.s0 > INT32_MAX || P->b.s1 > INT32_MAX)
    return false;
  P->n = space->dims[0];
  P->m = space->dims[1];
  P->k = top->attrs.k;
  P->out = out;
  return true;
}

/* ---- one tile ---- */

/* The BLAS form of rows [r0, r0 + rows) of a, or of columns [c0, c0 + cols) of b; false where
 * neither axis is unit-stride (the caller packs). */
static bool blas_form(const gt_mat *x, int64_t dim1, bool *trans, int64_t *ld) {
  if (x->s1 == 1) {
    *trans = false;
    *ld = x->s0 > dim1 ? x->s0 : dim1;
    return true;
  }
  if (x->s0 == 1) {
    *trans = true;
    *ld = x->s1;
    return true;
  }
  return false;
}

/* C[rows, cols] = A[r0.., :] . B[:, c0..], through the BLAS on this thread; `pack` holds a copy
 * of an operand BLAS cannot read (strides with no unit axis, never from the rewrites). */
static void tile_gemm(const gt_plan *P, int64_t r0, int64_t rows, int64_t c0, int64_t cols, float *c,
                      float *pack) {
  bool ta, tb;
  int64_t lda, ldb;
  const float *a = P->a.p + r0 * P->a.s0, *b = P->b.p + c0 * P->b.s1;
  if (!blas_form(&P->a, P->kd, &ta, &lda)) {
    for (int64_t i = 0; i < rows; i++)
      for (int64_t t = 0; t < P->kd; t++) pack[i * P->kd + t] = a[i * P->a.s0 + t * P->a.s1];
    a = pack, ta = false, lda = P->kd;
    pack += rows * P->kd;
  }
  if (!blas_form(&P->b, P->m, &tb, &ldb)) {
    for (int64_t t = 0; t < P->kd; t++)
      for (int64_t j = 0; j < cols; j++) pack[t * cols + j] = b[t * P->b.s0 + j * P->b.s1];
    b = pack, tb = false, ldb = cols;
  }
  if (ta && lda < P->kd) lda = P->kd;
  if (tb && ldb < P->kd) ldb = P->kd;
  loom__cpu_blas_get()->sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                              (blasint)rows, (blasint)cols, (blasint)P->kd, 1.0f, a, (blasint)lda, b,
                              (blasint)ldb, 0.0f, c, (blasint)cols);
}

/* One chain op over a row, its other operand read as Y (a scalar, or sp[j]): cpu_elementwise.c's
 * f32 semantics, NaN propagating through maximum and minimum. */
#define CHAIN_LOOP(Y)                                                                  \
  do {                                                                                 \
    switch (o->kind) {                                                                 \
      case LOOM_OP_ADD:                                                                \
        _Pragma("omp simd") for (int64_t j = 0; j < n; j++) v[j] = v[j] + (Y);         \
        break;                                                                         \
      case LOOM_OP_SUB:                                                                \
        if (f)                                                                         \
          _Pragma("omp simd") for (int64_t j = 0; j < n; j++) v[j] = v[j] - (Y);       \
        else                                                                           \
          _Pragma("omp simd") for (int64_t j = 0; j < n; j++) v[j] = (Y)-v[j];         \
        break;                                                                         \
      case LOOM_OP_MUL:                                                                \
        _Pragma("omp simd") for (int64_t j = 0; j < n; j++) v[j] = v[j] * (Y);         \
        break;                                                                         \
      case LOOM_OP_MAXIMUM:                                                            \
        if (f)                                                                         \
          _Pragma("omp simd") for (int64_t j = 0; j < n; j++) v[j] = MAX_F(v[j], (Y)); \
        else                                                                           \
          _Pragma("omp simd") for (int64_t j = 0; j < n; j++) v[j] = MAX_F((Y), v[j]); \
        break;                                                                         \
      default:                                                                         \
        if (f)                                                                         \
          _Pragma("omp simd") for (int64_t j = 0; j < n; j++) v[j] = MIN_F(v[j], (Y)); \
        else                                                                           \
          _Pragma("omp simd") for (int64_t j = 0; j < n; j++) v[j] = MIN_F((Y), v[j]); \
        break;                                                                         \
    }                                                                                  \
  } while (0)

/* The chain over one row of a tile: an operand constant along the row (a scalar, |x_i|^2
 * broadcast) is read once, a dense one (|y|^2) as a vector. */
KERNEL void chain_row_body(const gt_op *ops, int32_t n_ops, float *restrict v, int64_t row, int64_t c0,
                           int64_t n) {
  for (int32_t q = 0; q < n_ops; q++) {
    const gt_op *o = &ops[q];
    bool f = o->chain_first;
    const float *restrict sp = o->side.scalar ? NULL : o->side.p + row * o->side.s0 + c0 * o->side.s1;
    int64_t ss = o->side.s1;
    if (o->side.scalar || ss == 0) {
      const float c = o->side.scalar ? o->side.c : sp[0];
      CHAIN_LOOP(c);
    } else if (ss == 1) {
      CHAIN_LOOP(sp[j]);
    } else {
      CHAIN_LOOP(sp[j * ss]);
    }
  }
}
ISA_VARIANTS_VOID(void, chain_row,
                  (const gt_op *ops, int32_t n_ops, float *v, int64_t row, int64_t c0, int64_t n),
                  (ops, n_ops, v, row, c0, n))

/* Whether (a, ia) comes before (b, ib) in a topk of the smallest: NaN last, ties to the lower
 * index (cpu_fused_reduce.c's order). */
static inline bool before(float a, int64_t ia, float b, int64_t ib) {
  bool an = a != a, bn = b != b;
  bool ahead = bn ? !an : (!an && a < b), behind = an ? !bn : (!bn && b < a);
  return ahead || (!behind && ia < ib);
}

void loom__cfz_best_init(const loom__cfz_best *h, int64_t k) {
  for (int64_t t = 0; t < k; t++) {
    h->v[t * h->sv] = NAN;
    h->i[t * h->si] = INT64_MAX;
  }
}

void loom__cfz_best_offer(const loom__cfz_best *h, int64_t k, float v, int64_t i) {
  float *hv = h->v;
  int64_t *hi = h->i, sv = h->sv, si = h->si, at = k - 1;
  if (!before(v, i, hv[at * sv], hi[at * si])) return;
  /* a number (the common case) goes before a NaN, a larger value, or an equal one of a higher
   * index: `before` without its NaN cases; the loop after it then stops at once */
  if (v == v)
    for (; at > 0 && (!(hv[(at - 1) * sv] <= v) || (hv[(at - 1) * sv] == v && i < hi[(at - 1) * si])); at--) {
      hv[at * sv] = hv[(at - 1) * sv];
      hi[at * si] = hi[(at - 1) * si];
    }
  for (; at > 0 && before(v, i, hv[(at - 1) * sv], hi[(at - 1) * si]); at--) {
    hv[at * sv] = hv[(at - 1) * sv];
    hi[at * si] = hi[(at - 1) * si];
  }
  hv[at * sv] = v;
  hi[at * si] = i;
}

/* Runs of 64: the run's least value against the worst kept (NaN, never better than a number,
 * is left out of the least), and only a run whose least would enter is offered element by
 * element, the offer deciding exactly. In a kNN row almost every run is skipped after one
 * vector minimum; while the list still holds a placeholder (NaN) every element is offered. */
KERNEL void merge_row_body(const loom__cfz_best *h, int64_t k, const float *v, int64_t c0, int64_t n) {
  const float *worst = &h->v[(k - 1) * h->sv];
  for (int64_t j = 0; j < n; j += 64) {
    int64_t e = n - j >= 64 ? j + 64 : n;
    if (*worst == *worst) {
      float lo = INFINITY;
      _Pragma("omp simd reduction(min : lo)") for (int64_t t = j; t < e; t++) lo = v[t] < lo ? v[t] : lo;
      if (!(lo < *worst)) continue;
    }
    for (int64_t t = j; t < e; t++)
      if (!(v[t] >= *worst)) loom__cfz_best_offer(h, k, v[t], c0 + t);
  }
}
ISA_VARIANTS_VOID(void, merge_row,
                  (const loom__cfz_best *h, int64_t k, const float *v, int64_t c0, int64_t n),
                  (h, k, v, c0, n))

void loom__cfz_best_merge(const loom__cfz_best *h, int64_t k, const float *v, int64_t c0, int64_t n) {
  merge_row(h, k, v, c0, n);
}

loom__cfz_best loom__cfz_best_row(const loom__view *out, int64_t i) {
  return (loom__cfz_best){(float *)out[0].data + i * out[0].strides[0],
                          (int64_t *)out[1].data + i * out[1].strides[0], out[0].strides[1],
                          out[1].strides[1]};
}

/* ---- tasks ---- */

/* The k best of each row are kept where the topk writes them: part 0's in the outputs, a
 * second column part's in the op's scratch (IR.md's 1x the results), and the GEMM tiles after
 * them (loom__fused_gemm_tile_bytes), so nothing the kernel holds is outside the estimate. */
typedef struct gt_run {
  const gt_plan *P;
  int64_t rows, parts; /* rows per row block, column parts (1 or 2) */
  int64_t blocks;      /* row blocks */
  int64_t width;       /* a tile's columns */
  float *part_v;       /* part 1's lists: [n][k] */
  int64_t *part_i;
  float *tiles; /* per thread: `per` floats */
  int64_t per;
} gt_run;

static loom__cfz_best part_row(const gt_run *R, int64_t part, int64_t i) {
  if (part == 0) return loom__cfz_best_row(R->P->out, i);
  return (loom__cfz_best){R->part_v + i * R->P->k, R->part_i + i * R->P->k, 1, 1};
}

/* Rows [r0, r0 + rows) against the columns of part `part`, tile by tile; the operands BLAS
 * cannot read are packed after the tile (gt_shape left room). */
static void gt_task(const gt_run *R, int64_t r0, int64_t rows, int64_t part, float *c) {
  const gt_plan *P = R->P;
  int64_t c_lo = P->m * part / R->parts, c_hi = P->m * (part + 1) / R->parts;
  for (int64_t c0 = c_lo; c0 < c_hi; c0 += R->width) {
    int64_t cols = c_hi - c0 < R->width ? c_hi - c0 : R->width;
    tile_gemm(P, r0, rows, c0, cols, c, c + rows * cols);
    for (int64_t i = 0; i < rows; i++) {
      float *v = c + i * cols;
      loom__cfz_best h = part_row(R, part, r0 + i);
      chain_row(P->ops, P->n_ops, v, r0 + i, c0, cols);
      merge_row(&h, P->k, v, c0, cols);
    }
  }
}

/* Task t of gt_fused's loop: a block of rows against one part of the columns, in tile `c`. */
static void gt_block(const gt_run *R, int64_t t, float *c) {
  int64_t b = t / R->parts, r0 = b * R->rows, rows = R->P->n - r0 < R->rows ? R->P->n - r0 : R->rows;
  gt_task(R, r0, rows, t % R->parts, c);
}

/* How the work is cut for nt threads (team) or one: tiles of up to GT_COLS columns and as many
 * rows as a thread's share of the scratch's tiles holds, beside room for packed operands. Row
 * blocks of up to GT_ROWS are the tasks, at least two per thread where there are rows enough
 * (down to 64 a block); with a single block and a team the columns are split in two parts,
 * whose k best are merged at the end (a block packs its tile of y^T once per tile, so a short
 * block is what makes the product skinny). Without a team the rows go to the BLAS in as few
 * calls as the tile allows, and the BLAS threads each call itself (as the dot op would).
 * False when not even one row fits (an unpackable operand of very many terms). */
static bool gt_shape(gt_run *R, int nt, bool team, bool packs) {
  const gt_plan *P = R->P;
  int64_t rows = P->n, kd = packs ? P->kd : 0;
  if (team) {
    rows = P->n <= GT_ROWS ? P->n : (P->n + 2 * nt - 1) / (2 * nt);
    rows = rows > GT_ROWS ? GT_ROWS : rows < 64 && P->n > 64 ? 64 : rows;
  }
  R->parts = team && rows >= P->n && P->m >= 2 * P->k ? 2 : 1;
  R->width = (P->m + R->parts - 1) / R->parts;
  R->width = R->width < GT_COLS ? R->width : GT_COLS;
  int64_t fit = 0;
  for (; R->width >= 1; R->width /= 2) {
    fit = (R->per - R->width * kd) / (R->width + kd);
    if (fit >= 1) break;
  }
  if (fit < 1) return false;
  R->rows = rows < fit ? rows : fit;
  R->blocks = (P->n + R->rows - 1) / R->rows;
  return true;
}

/* The tiles' threads: as many as there are, each with a tile of at least GT_MIN_TILE floats. */
static int gt_threads(int64_t tile_floats, bool team) {
  int nt = team ? omp_get_max_threads() : 1;
  int64_t most = tile_floats / GT_MIN_TILE;
  return most < 1 ? 1 : nt > most ? (int)most : nt;
}

static loom_status gt_fused(const gt_plan *P, char *scratch, int64_t tile_bytes) {
  /* Threads only where each has milliseconds of work: a loop cut along y's points calls this
   * op hundreds of times on a few dozen columns, and a team's barriers on a busy machine wait
   * for a thread that lost its core. */
  bool team = omp_get_max_threads() > 1 && (double)P->n * (double)P->m * (double)P->kd >= (double)(1 << 26);
  int nt = gt_threads(tile_bytes / (int64_t)sizeof(float), team);
  team = nt > 1;
  gt_run R = {.P = P};
  R.part_i = (int64_t *)scratch;
  R.part_v = (float *)(scratch + P->n * P->k * (int64_t)sizeof(int64_t));
  R.tiles = (float *)(scratch + P->n * P->k * (int64_t)(sizeof(int64_t) + sizeof(float)));
  R.per = tile_bytes / (int64_t)sizeof(float) / nt;
  bool ta, tb;
  int64_t ld;
  bool packs = !blas_form(&P->a, P->kd, &ta, &ld) || !blas_form(&P->b, P->m, &tb, &ld);
  if (!gt_shape(&R, nt, team, packs))
    return loom__error(LOOM_ERR_UNSUPPORTED,
                       "cpu: fused: a GEMM top-k operand with no unit stride and %lld terms leaves no room "
                       "for a tile in the op's scratch",
                       (long long)P->kd);
  for (int64_t i = 0; i < P->n; i++)
    for (int64_t p = 0; p < R.parts; p++) {
      loom__cfz_best h = part_row(&R, p, i);
      loom__cfz_best_init(&h, P->k);
    }
  int64_t tasks = R.blocks * R.parts;
  /* Without a team no OpenMP region at all, not one serialized by an if clause: inside one,
   * LLVM's libomp gave OpenBLAS's own parallel region a single thread while OpenBLAS, not seeing
   * itself nested, waited for the others (check-clang hung in fused_gemm_topk_short_rows_split_columns). */
  if (team && tasks > 1) {
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; t++) gt_block(&R, t, R.tiles + (int64_t)omp_get_thread_num() * R.per);
  } else {
    for (int64_t t = 0; t < tasks; t++) gt_block(&R, t, R.tiles);
  }
  for (int64_t i = 0; R.parts == 2 && i < P->n; i++) {
    loom__cfz_best h = part_row(&R, 0, i), q = part_row(&R, 1, i);
    for (int64_t t = 0; t < P->k; t++) loom__cfz_best_offer(&h, P->k, q.v[t], q.i[t]);
  }
  return LOOM_OK;
}

bool loom__cfz_gemm_topk_matches(const loom_graph *body, const loom__view *in, const loom__view *out) {
  gt_plan P;
  return gt_match(body, in, out, &P);
}

/* The scratch holds a column part's k best (1x the results) and the tiles; a caller outside
 * the runtime (no scratch) gets them from the heap, as much as the runtime would give. */
loom_status loom__cfz_gemm_topk(const loom_graph *body, const loom__view *in, const loom__view *out,
                                void *scratch, int64_t scratch_bytes, bool *taken) {
  gt_plan P;
  *taken = gt_match(body, in, out, &P);
  if (!*taken) return LOOM_OK;
  int64_t tiles = loom__fused_gemm_tile_bytes(body);
  int64_t need = P.n * P.k * (int64_t)(sizeof(int64_t) + sizeof(float)) + tiles;
  void *heap = NULL;
  if (!scratch) {
    scratch = heap = loom__aligned_alloc((size_t)need);
    if (!heap)
      return loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory for %lld bytes of GEMM tiles",
                         (long long)need);
  } else if (scratch_bytes < need) {
    return loom__error(LOOM_ERR_INTERNAL,
                       "cpu: fused: a GEMM top-k's scratch has %lld bytes, the estimator's rule %lld",
                       (long long)scratch_bytes, (long long)need);
  }
  loom_status s = gt_fused(&P, scratch, tiles);
  loom__aligned_free(heap);
  return s;
}
