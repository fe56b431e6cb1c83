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
#include "ir/pattern.h"

/* GT_MAX_K: a row's k best are merged on the stack (gt_store); a larger k runs the body op by op */
enum { GT_MAX_CHAIN = 8, GT_ROWS = 256, GT_COLS = 1024, GT_MAX_K = 64 };

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

typedef loom__cfz_best gt_best;

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

/* Inserts (v, i) into a row's k best (sorted, best first, *filled of k), where it belongs. */
static inline void offer(gt_best *h, int64_t k, int64_t *filled, float v, int64_t i) {
  int64_t at = *filled;
  if (at == k) {
    if (!before(v, i, h[k - 1].v, h[k - 1].i)) return;
    at = k - 1;
  } else {
    ++*filled;
  }
  for (; at > 0 && before(v, i, h[at - 1].v, h[at - 1].i); at--) h[at] = h[at - 1];
  h[at] = (gt_best){v, i};
}

/* The row's first values until k are kept, then runs of 64: the run's least value against the
 * worst kept (NaN, never better than a number, is left out of the least), and only a run whose
 * least would enter is offered element by element, offer deciding exactly. In a kNN row almost
 * every run is skipped after one vector minimum. */
KERNEL void merge_row_body(gt_best *h, int64_t k, int64_t *filled, const float *v, int64_t c0, int64_t n) {
  int64_t j = 0;
  for (; j < n && *filled < k; j++) offer(h, k, filled, v[j], c0 + j);
  while (j < n) {
    int64_t e = n - j >= 64 ? j + 64 : n;
    float worst = h[k - 1].v;
    if (worst == worst) {
      float lo = INFINITY;
      _Pragma("omp simd reduction(min : lo)") for (int64_t t = j; t < e; t++) lo = v[t] < lo ? v[t] : lo;
      if (!(lo < worst)) {
        j = e;
        continue;
      }
    }
    for (int64_t t = j; t < e; t++)
      if (!(v[t] >= h[k - 1].v)) offer(h, k, filled, v[t], c0 + t);
    j = e;
  }
}
ISA_VARIANTS_VOID(void, merge_row,
                  (gt_best * h, int64_t k, int64_t *filled, const float *v, int64_t c0, int64_t n),
                  (h, k, filled, v, c0, n))

void loom__cfz_best_merge(loom__cfz_best *h, int64_t k, int64_t *filled, const float *v, int64_t c0,
                          int64_t n) {
  merge_row(h, k, filled, v, c0, n);
}

void loom__cfz_best_store(const loom__view *out, int64_t i, const loom__cfz_best *const *rows,
                          const int64_t *filled, int64_t parts, int64_t k) {
  gt_best row[GT_MAX_K];
  int64_t n = 0;
  for (int64_t p = 0; p < parts; p++)
    for (int64_t t = 0; t < filled[p]; t++) offer(row, k, &n, rows[p][t].v, rows[p][t].i);
  for (int64_t t = 0; t < n; t++) {
    ((float *)out[0].data)[i * out[0].strides[0] + t * out[0].strides[1]] = row[t].v;
    ((int64_t *)out[1].data)[i * out[1].strides[0] + t * out[1].strides[1]] = row[t].i;
  }
}

/* ---- tasks ---- */

typedef struct gt_run {
  const gt_plan *P;
  int64_t rows, parts; /* rows per row block, column parts */
  int64_t blocks;      /* row blocks */
  gt_best *best;       /* [parts][n][k] */
  int64_t *filled;     /* [parts][n] */
} gt_run;

/* Rows [r0, r0 + rows) against the columns of part `part`, tile by tile. */
static void gt_task(const gt_run *R, int64_t r0, int64_t rows, int64_t part, float *c, float *pack) {
  const gt_plan *P = R->P;
  int64_t c_lo = P->m * part / R->parts, c_hi = P->m * (part + 1) / R->parts;
  gt_best *best = R->best + (part * P->n + r0) * P->k;
  int64_t *filled = R->filled + part * P->n + r0;
  for (int64_t c0 = c_lo; c0 < c_hi; c0 += GT_COLS) {
    int64_t cols = c_hi - c0 < GT_COLS ? c_hi - c0 : GT_COLS;
    tile_gemm(P, r0, rows, c0, cols, c, pack);
    for (int64_t i = 0; i < rows; i++) {
      float *v = c + i * cols;
      chain_row(P->ops, P->n_ops, v, r0 + i, c0, cols);
      merge_row(best + i * P->k, P->k, &filled[i], v, c0, cols);
    }
  }
}

/* Row i's k best over the parts, into the outputs. */
static void gt_store(const gt_run *R, int64_t i) {
  const gt_plan *P = R->P;
  gt_best row[GT_MAX_K];
  int64_t filled = 0;
  for (int64_t p = 0; p < R->parts; p++) {
    const gt_best *b = R->best + (p * P->n + i) * P->k;
    for (int64_t t = 0; t < R->filled[p * P->n + i]; t++) offer(row, P->k, &filled, b[t].v, b[t].i);
  }
  const loom__view *o = P->out;
  for (int64_t t = 0; t < filled; t++) {
    ((float *)o[0].data)[i * o[0].strides[0] + t * o[0].strides[1]] = row[t].v;
    ((int64_t *)o[1].data)[i * o[1].strides[0] + t * o[1].strides[1]] = row[t].i;
  }
}

static loom_status gt_fused(const gt_plan *P) {
  int nt = omp_get_max_threads();
  gt_run R = {.P = P};
  /* Row blocks of GT_ROWS, each a task, where there are at least two per thread; else fewer
   * rows (all of them, down to 64 a block) and the columns split among the threads: a block
   * packs its tile of y^T once per tile, so a short block is what makes the product skinny. */
  R.rows = P->n <= GT_ROWS ? P->n : (P->n + 2 * nt - 1) / (2 * nt);
  R.rows = R.rows > GT_ROWS ? GT_ROWS : R.rows < 64 && P->n > 64 ? 64 : R.rows;
  R.blocks = (P->n + R.rows - 1) / R.rows;
  R.parts = R.blocks >= 2 * nt ? 1 : (2 * nt + R.blocks - 1) / R.blocks;
  if (R.parts > (P->m + GT_COLS - 1) / GT_COLS) R.parts = (P->m + GT_COLS - 1) / GT_COLS;
  if (R.parts < 1) R.parts = 1;
  R.best = malloc(sizeof *R.best * (size_t)(R.parts * P->n * P->k));
  R.filled = calloc((size_t)(R.parts * P->n), sizeof *R.filled);
  if (!R.best || !R.filled) {
    free(R.best);
    free(R.filled);
    return loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory for the k best of %lld rows",
                       (long long)P->n);
  }
  /* Threads only where each has milliseconds of work: a loop cut along y's points calls this
   * op hundreds of times on a few dozen columns, and a team's barriers on a busy machine wait
   * for a thread that lost its core. Without a team, the rows go to the BLAS in as few calls as
   * a tile's floats allow, and the BLAS threads each call itself (as the dot op would). */
  bool team = nt > 1 && (double)P->n * (double)P->m * (double)P->kd >= (double)(1 << 26);
  if (!team) {
    int64_t cap = (int64_t)GT_ROWS * GT_COLS / (P->m < GT_COLS ? P->m : GT_COLS);
    R.rows = P->n < cap ? P->n : cap;
    R.blocks = (P->n + R.rows - 1) / R.rows;
    R.parts = 1;
  }
  bool failed = false;
  int64_t tasks = R.blocks * R.parts;
  /* The tile, and room for operands BLAS cannot read as they are laid out */
  bool ta, tb;
  int64_t ld;
  bool packs = !blas_form(&P->a, P->kd, &ta, &ld) || !blas_form(&P->b, P->m, &tb, &ld);
  /* a tile no wider than a part's columns: a loop cut along y's points (under a small limit)
   * gives pieces of a few dozen columns, and each call allocates its tiles afresh */
  int64_t width = (P->m + R.parts - 1) / R.parts;
  width = width < GT_COLS ? width : GT_COLS;
  size_t tile = (size_t)(R.rows * width), pack = packs ? (size_t)(R.rows + width) * (size_t)P->kd : 0;
#pragma omp parallel if (team && tasks > 1) reduction(|| : failed)
  {
    float *c = loom__aligned_alloc((tile + pack) * sizeof(float));
    failed = !c;
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; t++) {
      int64_t b = t / R.parts, r0 = b * R.rows, rows = P->n - r0 < R.rows ? P->n - r0 : R.rows;
      if (c) gt_task(&R, r0, rows, t % R.parts, c, c + tile);
    }
    loom__aligned_free(c);
  }
  if (!failed) {
#pragma omp parallel for schedule(static) if (P->n >= 4096)
    for (int64_t i = 0; i < P->n; i++) gt_store(&R, i);
  }
  free(R.best);
  free(R.filled);
  return failed ? loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory for a GEMM tile") : LOOM_OK;
}

bool loom__cfz_gemm_topk_matches(const loom_graph *body, const loom__view *in, const loom__view *out) {
  gt_plan P;
  return gt_match(body, in, out, &P);
}

loom_status loom__cfz_gemm_topk(const loom_graph *body, const loom__view *in, const loom__view *out,
                                bool *taken) {
  gt_plan P;
  *taken = gt_match(body, in, out, &P);
  return *taken ? gt_fused(&P) : LOOM_OK;
}
