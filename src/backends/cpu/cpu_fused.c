/* The cpu backend's fused op (docs/ir-fusion.md): a body graph of views, scalar constants, elementwise
 * ops and small dots, ending in at most one reduction, argmax/argmin or topk, evaluated over
 * blocks of the space without ever writing its intermediates to tensor memory. This file is the
 * evaluator: the per-thread workspace, the leaves, one block of the body, and the tasks on
 * threads; cpu_fused_run.h lists the other parts (the plan, the kernels, the final op).
 *
 * The space S (rank r) is walked as rows (every axis but the last) times blocks of FB
 * elements of the last axis. For one (row, block) every body op runs as one loop over the
 * block, on per-thread buffers of FB elements that stay in L1; a value constant along the
 * block (its last dimension is 1: sx[:,None], a scalar constant) is computed once per row as
 * a scalar, and the loops read it as one. The block is then folded into the final op's
 * per-lane state (a row's scalar accumulator where the last axis is reduced, FB accumulators
 * where it is kept), so the N x M intermediate of a kernel product never exists.
 *
 * Values are computed in three kinds: f32 (f32, and f16/bf16 rounded back after every op as
 * the unfused kernels store them), f64, and i64 (every integer dtype and bool, wrapped back to
 * their width after every op), so results match the unfused kernels (cpu_elementwise.c) op
 * for op; complex bodies are UNSUPPORTED here and run unfused. Reductions accumulate as
 * cpu_reduce.c does (floats in double, integers in wrapping uint64), and argmax/argmin/topk
 * keep its order: NaN ranks above every number, ties go to the lower index.
 *
 * Vector math: glibc's libmvec, through `omp simd` loops over expf/logf/sinf/cosf/tanhf/powf
 * (and the f64 forms) in kernels cloned per x86-64 level (these files are built with -O3
 * -fno-math-errno, CMakeLists.txt). Its error, and why neither SLEEF nor an inlined Cephes expf
 * replaced it, is measured in docs/ir-fusion.md ("The cpu evaluator's vector math").
 *
 * Peepholes, each keeping the unfused roundings: a scalar add/sub/mul or a neg read by one
 * elementwise op is applied as that op reads the block (absorb_scalar_ops); a 3-term f32 dot
 * read by one binary op is computed in its loop (find_dot_epilogues); a sum over the last
 * axis of a product of blocks, and of exp(e) * b, is taken in the same pass
 * (fuse_product_sum). A kernel sum as the distance rewrite writes it, sum_j exp(c max(dot3 + u,
 * lo)) b_j, is one loop per block with nothing stored (find_kernel_sum, cpu_fused_ksum.c). A topk
 * over a dot of more than MAX_K terms (a kNN's expanded distances) runs as GEMM tiles instead
 * (cpu_fused_gemm.c), and a topk over the direct form's sum of squared differences as one loop
 * per row and tile (cpu_fused_distance.c).
 *
 * Threads: the tasks (groups of rows, or (row, block) pairs where the last axis is kept) run
 * on OpenMP threads, each writing its own outputs. When there are too few tasks to feed the
 * threads (a reduction to a handful of values), each task's reduced range is split between
 * the threads instead, and their partial states are merged in thread order.
 */
#include <omp.h>
#include <stdlib.h>

#include "backends/cpu/cpu_fused_run.h"
#include "backends/cpu/cpu_kernels.h"
#include "ir/pattern.h"
#include "loom/internal/fused.h"

/* ---- per-thread workspace -------------------------------------------------------------------- */

static void work_free(work *w) {
  loom__aligned_free(w->buf);
  free(w->ptr);
  free(w->sc);
  free(w->tf);
  free(w->cache_off);
  free(w->cache_n);
}

static bool work_init(const plan *P, work *w) {
  int32_t nv = P->g->n_values;
  w->buf = loom__aligned_alloc((size_t)(P->n_slots + 1) * FB * 8);
  w->ptr = calloc((size_t)nv, sizeof *w->ptr);
  w->sc = calloc((size_t)nv, sizeof *w->sc);
  w->tf = calloc((size_t)nv, sizeof *w->tf);
  w->cache_off = malloc(sizeof *w->cache_off * (size_t)nv);
  w->cache_n = calloc((size_t)nv, sizeof *w->cache_n);
  if (!w->buf || !w->ptr || !w->sc || !w->tf || !w->cache_off || !w->cache_n) {
    work_free(w);
    return false;
  }
  for (int32_t i = 0; i < nv; i++) {
    w->cache_off[i] = -1;
    if (P->v[i].role == R_CONST) {
      w->sc[i] = P->v[i].c;
      w->ptr[i] = &w->sc[i];
    }
  }
  return true;
}

/* ---- leaves ---------------------------------------------------------------------------------- */

/* Points each leaf's value at its block (or scalar) for the block of n elements at S index idx:
 * read in place where it is dense along the block, else packed into its buffer. */
void loom__cfz_load_leaves(const plan *P, work *w, const int64_t *idx, int64_t n) {
  for (int32_t l = 0; l < P->n_leaves; l++) {
    int32_t id = P->leaves[l];
    const fvalue *fv = &P->v[id];
    int64_t off = 0;
    for (int32_t d = 0; d < P->r; d++) off += idx[d] * fv->strides[d];
    if (!fv->vec) {
      w->sc[id] = loom__cfz_load_scalar(fv->base, fv->dtype, off);
      w->ptr[id] = &w->sc[id];
    } else if (fv->slot < 0) {
      w->ptr[id] = fv->base + off * (int64_t)loom_dtype_size(fv->dtype);
    } else {
      void *b = slot(w, fv->slot);
      /* A block that does not move with the row is packed once for all of them. */
      if (w->cache_off[id] != off || w->cache_n[id] != n) {
        loom__cfz_pack(fv->base, fv->dtype, off, fv->strides[P->r - 1], n, b);
        w->cache_off[id] = off;
        w->cache_n[id] = n;
      }
      w->ptr[id] = b;
    }
  }
}

/* ---- one block --------------------------------------------------------------------------------- */

/* An absorbed op: its block is its operand's, read through x * m + a (tfm). */
void loom__cfz_absorbed_op(const plan *P, work *w, const loom__op *op) {
  int32_t io = op->outputs[0], iv = op->inputs[0], is = -1;
  bool left = true; /* the block is the first operand */
  if (op->n_inputs == 2) {
    left = P->v[op->inputs[0]].vec;
    iv = op->inputs[left ? 0 : 1];
    is = op->inputs[left ? 1 : 0];
  }
  double c = 0;
  if (is >= 0) c = P->v[io].kind == K_F32 ? (double)w->sc[is].f : w->sc[is].d;
  if (is >= 0 && w->ptr[is] != &w->sc[is]) /* a scalar read in place (a leaf's element) */
    c = P->v[io].kind == K_F32 ? (double)*(const float *)w->ptr[is] : *(const double *)w->ptr[is];
  tfm t = {true, 1, -0.0};
  switch (op->kind) {
    case LOOM_OP_NEG:
      t.m = -1;
      break;
    case LOOM_OP_ADD:
      t.a = c;
      break;
    case LOOM_OP_SUB:
      if (left)
        t.a = -c;
      else
        t.m = -1, t.a = c;
      break;
    default:
      t.m = c;
      break; /* mul */
  }
  w->tf[io] = t;
  w->ptr[io] = w->ptr[iv];
}

/* Computes every body value over the block of n elements at S index idx (idx[r-1] the first
 * column). */
static void eval_block(const plan *P, work *w, const int64_t *idx, int64_t n) {
  loom__cfz_load_leaves(P, w, idx, n);
  for (int32_t q = 0; q < P->n_ops; q++) {
    const loom__op *op = &P->g->ops[P->ops[q]];
    int32_t io = op->outputs[0];
    const fvalue *O = &P->v[io];
    if (op->kind == LOOM_OP_DOT) {
      if (!O->in_epilogue) loom__cfz_dot_block(P, w, op, idx, n);
      continue;
    }
    if (O->epi_dot >= 0) {
      loom__cfz_dot_epilogue(P, w, op, idx, n);
      continue;
    }
    if (O->absorbed) {
      loom__cfz_absorbed_op(P, w, op);
      continue;
    }
    void *o = O->vec ? slot(w, O->slot) : (void *)&w->sc[io];
    int64_t nn = O->vec ? n : 1;
    const void *pin[3];
    bool vin[3];
    tfm tf[3] = {{0}};
    for (int32_t i = 0; i < op->n_inputs; i++) {
      pin[i] = w->ptr[op->inputs[i]];
      vin[i] = P->v[op->inputs[i]].vec;
      if (P->v[op->inputs[i]].absorbed) tf[i] = w->tf[op->inputs[i]];
    }
    loom__cfz_run_ew(P, op, o, pin, vin, tf, nn);
    loom__cfz_normalize_block(O->dtype, o, nn);
    w->ptr[io] = o;
  }
  const fvalue *S = &P->v[P->src];
  if (!S->vec && P->M > 1) { /* the folded value is constant along the block: spread it */
    if (S->kind == K_F32) {
      float x = *(const float *)w->ptr[P->src], *o = slot(w, S->slot);
      for (int64_t j = 0; j < n; j++) o[j] = x;
      w->ptr[P->src] = o;
    } else {
      int64_t x = *(const int64_t *)w->ptr[P->src], *o = slot(w, S->slot);
      for (int64_t j = 0; j < n; j++) o[j] = x;
      w->ptr[P->src] = o;
    }
  }
}

/* The S index of row (ko, ro) at column j0: ko over the kept outer axes, ro over the reduced
 * ones, each in C order. */
static void index_of(const plan *P, int64_t ko, int64_t ro, int64_t j0, int64_t *idx) {
  for (int32_t q = P->nk - 1; q >= 0; q--) {
    int32_t d = P->kax[q];
    idx[d] = ko % P->dims[d];
    ko /= P->dims[d];
  }
  for (int32_t q = P->nr - 1; q >= 0; q--) {
    int32_t d = P->rax[q];
    idx[d] = ro % P->dims[d];
    ro /= P->dims[d];
  }
  idx[P->r - 1] = j0;
}

void loom__cfz_unit_index(const plan *P, int64_t ko, int64_t u, int64_t *idx) {
  index_of(P, ko, u / P->nb, (u % P->nb) * FB, idx);
}

static int64_t out_offset(const plan *P, const int64_t *idx) {
  int64_t off = 0;
  for (int32_t d = 0; d < P->r; d++) off += idx[d] * P->ostrides[d];
  return off;
}

/* ---- tasks ---------------------------------------------------------------------------------------- */

/* A task's output rows: where the last axis is reduced, up to ROW_GROUP (a kernel sum: KS_ROW_GROUP) kept
 * rows whose blocks are walked together (lanes: one per row); where it is kept, one kept row and one block
 * (lanes: one per column). With no final op a task is one (row, block) written out. */
static int64_t task_count(const plan *P, int64_t *group) {
  *group = 1;
  if (P->fin != F_NONE && P->last_red) {
    int64_t most = P->ks ? KS_ROW_GROUP : ROW_GROUP;
    *group = P->Ok < most ? (P->Ok > 0 ? P->Ok : 1) : most;
    return (P->Ok + *group - 1) / *group;
  }
  return P->Ok * P->nb;
}

static int64_t lanes_of(const plan *P, int64_t group) {
  return P->last_red ? group : FB;
}

/* Whether a block of the body is made from what depends on its columns alone (a leaf packed into
 * a buffer, a dot's packed rows): then the rows of a group share it while their column block is
 * walked, and it is packed once for all of them. */
static bool shares_column_blocks(const plan *P) {
  for (int32_t l = 0; l < P->n_leaves; l++)
    if (P->v[P->leaves[l]].vec && P->v[P->leaves[l]].slot >= 0) return true;
  for (int32_t q = 0; q < P->n_ops; q++)
    if (P->g->ops[P->ops[q]].kind == LOOM_OP_DOT) return true;
  return P->ks;
}

/* Unit u (row ro, column block jb) of row kk of the group starting at row ko0, into its lane. */
static void row_unit(const plan *P, work *w, state *st, int64_t ko0, int64_t kk, int64_t u) {
  int64_t idx[LOOM_MAX_RANK];
  int64_t ro = u / P->nb, jb = u % P->nb, j0 = jb * FB, n = LOOM_MIN(FB, P->M - j0);
  index_of(P, ko0 + kk, ro, j0, idx);
  eval_block(P, w, idx, n);
  loom__cfz_fold_row(P, &st->lanes[kk], st->heap ? st->heap + kk * P->k : NULL, w->ptr[P->src],
                     P->prod_b >= 0 ? w->ptr[P->prod_b] : NULL, P->v[P->src].absorbed ? &w->tf[P->src] : NULL,
                     n, j0);
}

/* Runs units [u0, u1) of a task into st: where the last axis is reduced a unit is one block of
 * the reduced rows, (ro, jb) with jb fastest, for every row of the group; where it is kept a
 * unit is one reduced row ro of the task's block. Each lane folds its units in the same order
 * either way. */
static void run_units(const plan *P, work *w, state *st, int64_t task, int64_t group, int64_t u0,
                      int64_t u1) {
  int64_t idx[LOOM_MAX_RANK];
  if (P->last_red) {
    int64_t ko0 = task * group, rows = LOOM_MIN(group, P->Ok - ko0);
    if (P->ks) /* the kernel sum walks its units itself, each row's constants kept across blocks */
      loom__cfz_kernel_sum_units(P, w, st->lanes, ko0, rows, u0, u1);
    else if (shares_column_blocks(P)) { /* blocks outer, rows inner: a shared block is packed once */
      for (int64_t u = u0; u < u1; u++)
        for (int64_t kk = 0; kk < rows; kk++) row_unit(P, w, st, ko0, kk, u);
    } else { /* rows outer: each row's operands stream in order, as the prefetchers like */
      for (int64_t kk = 0; kk < rows; kk++)
        for (int64_t u = u0; u < u1; u++) row_unit(P, w, st, ko0, kk, u);
    }
    return;
  }
  int64_t ko = task / P->nb, jb = task % P->nb, j0 = jb * FB, n = LOOM_MIN(FB, P->M - j0);
  for (int64_t ro = u0; ro < u1; ro++) {
    index_of(P, ko, ro, j0, idx);
    eval_block(P, w, idx, n);
    loom__cfz_fold_cols(P, st, w->ptr[P->src], n, P->fin >= F_ARGMAX ? idx[P->axis] : 0);
  }
}

static int64_t units_of(const plan *P) {
  return P->last_red ? P->Or * P->nb : P->Or;
}

static void store_task(const plan *P, state *st, int64_t task, int64_t group) {
  int64_t idx[LOOM_MAX_RANK];
  loom__cfz_state_settle(st);
  if (P->last_red) {
    int64_t ko0 = task * group;
    for (int64_t kk = 0; kk < st->n; kk++) {
      index_of(P, ko0 + kk, 0, 0, idx);
      loom__cfz_store_lane(P, &st->lanes[kk], st->heap ? st->heap + kk * P->k : NULL, out_offset(P, idx));
    }
    return;
  }
  int64_t ko = task / P->nb, jb = task % P->nb;
  index_of(P, ko, 0, jb * FB, idx);
  int64_t off = out_offset(P, idx);
  for (int64_t j = 0; j < st->n; j++)
    loom__cfz_store_lane(P, &st->lanes[j], st->heap ? st->heap + j * P->k : NULL,
                         off + j * P->ostrides[P->r - 1]);
}

static int64_t task_lanes(const plan *P, int64_t task, int64_t group) {
  if (P->last_red) return LOOM_MIN(group, P->Ok - task * group);
  int64_t j0 = (task % P->nb) * FB;
  return LOOM_MIN(FB, P->M - j0);
}

/* No final op: every (row, block) is written where it belongs. */
static void elementwise_tasks(const plan *P, work *w, int64_t t0, int64_t t1) {
  for (int64_t t = t0; t < t1; t++) {
    int64_t idx[LOOM_MAX_RANK], ko = t / P->nb, j0 = (t % P->nb) * FB, n = LOOM_MIN(FB, P->M - j0);
    index_of(P, ko, 0, j0, idx);
    eval_block(P, w, idx, n);
    int64_t off = 0, s = 1;
    for (int32_t d = P->r - 1; d >= 0; d--) {
      off += idx[d] * s;
      s *= P->dims[d];
    }
    loom__cfz_store_block(P, w->ptr[P->src], n, off);
  }
}

static loom_status run_elementwise(const plan *P) {
  int64_t tasks = P->Ok * P->nb;
  bool failed = false;
  /* Little work runs here, outside any parallel region: libgomp starts a team even under a
   * false `if`, which costs more than a small body (cpu_loops.h says the same of the kernels). */
  if (tasks == 1 || P->Ok * P->M * (P->n_ops + 1) < 16 * LOOM_CPU_BLOCK) {
    work w;
    if (!work_init(P, &w)) return loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory for blocks");
    elementwise_tasks(P, &w, 0, tasks);
    work_free(&w);
    return LOOM_OK;
  }
#pragma omp parallel
  {
    work w;
    bool ok = work_init(P, &w);
    if (!ok) {
#pragma omp atomic write
      failed = true;
    }
#pragma omp for schedule(dynamic, 4)
    for (int64_t t = 0; t < tasks; t++)
      if (ok) elementwise_tasks(P, &w, t, t + 1);
    if (ok) work_free(&w);
  }
  return failed ? loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory for a thread's blocks")
                : LOOM_OK;
}

/* Workspace and lanes for one thread; false (both freed) when out of memory. */
static bool thread_init(const plan *P, int64_t group, work *w, state *st) {
  if (!work_init(P, w)) return false;
  if (loom__cfz_state_init(P, st, lanes_of(P, group))) return true;
  work_free(w);
  return false;
}

static void whole_task(const plan *P, work *w, state *st, int64_t t, int64_t group) {
  loom__cfz_state_reset(P, st, task_lanes(P, t, group));
  run_units(P, w, st, t, group, 0, units_of(P));
  store_task(P, st, t, group);
}

/* Many tasks: each thread runs whole tasks and writes their outputs. Little work runs outside
 * any parallel region, as in run_elementwise: a team costs microseconds on a quiet machine and a
 * scheduler's time slice on a busy one, where the unfused kernels run so little work on one
 * thread (docs/ir-fusion.md, "When fusing pays"). */
static loom_status run_by_tasks(const plan *P, int64_t tasks, int64_t group, bool team) {
  bool failed = false;
  if (!team || tasks == 1) {
    work w;
    state st;
    if (!thread_init(P, group, &w, &st))
      return loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory for blocks");
    for (int64_t t = 0; t < tasks; t++) whole_task(P, &w, &st, t, group);
    work_free(&w);
    loom__cfz_state_free(&st);
    return LOOM_OK;
  }
#pragma omp parallel
  {
    work w;
    state st;
    bool ok = thread_init(P, group, &w, &st);
    if (!ok) {
#pragma omp atomic write
      failed = true;
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; t++)
      if (ok) whole_task(P, &w, &st, t, group);
    if (ok) {
      work_free(&w);
      loom__cfz_state_free(&st);
    }
  }
  return failed ? loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory for a thread's blocks")
                : LOOM_OK;
}

/* Few tasks: the threads split each task's units, and their partial states are merged in
 * thread order (so argmax/topk ties still go to the lower index). */
static loom_status run_split(const plan *P, int64_t tasks, int64_t group, int nt) {
  int64_t units = units_of(P), lanes = lanes_of(P, group);
  state *parts = calloc((size_t)nt, sizeof *parts);
  work *ws = calloc((size_t)nt, sizeof *ws);
  bool failed = !parts || !ws;
  for (int t = 0; t < nt && !failed; t++)
    failed = !loom__cfz_state_init(P, &parts[t], lanes) || !work_init(P, &ws[t]);
  for (int64_t task = 0; task < tasks && !failed; task++) {
    int64_t n = task_lanes(P, task, group);
    for (int t = 0; t < nt; t++) loom__cfz_state_reset(P, &parts[t], n);
#pragma omp parallel num_threads(nt)
    {
      int t = omp_get_thread_num(), got = omp_get_num_threads();
      int64_t u0 = units * t / got, u1 = units * (t + 1) / got;
      run_units(P, &ws[t], &parts[t], task, group, u0, u1);
    }
    for (int t = 0; t < nt; t++) loom__cfz_state_settle(&parts[t]);
    for (int t = 1; t < nt; t++) loom__cfz_state_merge(P, &parts[0], &parts[t]);
    store_task(P, &parts[0], task, group);
  }
  for (int t = 0; parts && ws && t < nt; t++) {
    loom__cfz_state_free(&parts[t]);
    if (ws[t].buf) work_free(&ws[t]);
  }
  free(parts);
  free(ws);
  return failed ? loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory for a thread's blocks")
                : LOOM_OK;
}

loom_status loom__cpu_fused_supported(const loom_graph *body) {
  if (!body) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: fused: body is NULL");
  int32_t np = body->n_params, no = body->n_outputs;
  loom__view *views = calloc((size_t)(np + no) + 1, sizeof *views);
  loom__layout *lay = malloc(sizeof *lay * (size_t)(body->n_values + 1));
  if (!views || !lay) {
    free(views);
    free(lay);
    return loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory");
  }
  for (int32_t i = 0; i < np + no; i++) {
    int32_t v = i < np ? body->params[i] : body->outputs[i - np];
    views[i].type = body->values[v].type;
    loom__view_dense_strides(&views[i].type, views[i].strides);
  }
  plan P;
  loom_status s = LOOM_OK;
  if (!loom__cfz_gemm_topk_matches(body, views, views + np) &&
      !loom__cfz_distance_topk_matches(body, views, views + np)) {
    s = loom__cfz_build_plan(body, views, views + np, &P, lay);
    loom__cfz_plan_free(&P);
  }
  free(lay);
  free(views);
  return s;
}

bool loom__fused_body_runs_on_cpu(const loom_graph *body) {
  return loom__cpu_fused_supported(body) == LOOM_OK;
}

loom_status loom__cpu_fused(const loom_graph *body, const loom__view *in, const loom__view *out,
                            void *scratch, int64_t scratch_bytes) {
  /* The GEMM and distance top-k keep their tiles and second lists in the scratch; the other
   * bodies' accumulators live per task, in registers and per-thread lanes. */
  if (!body || (body->n_params > 0 && !in) || !out)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: fused: body, operands or outputs are NULL");
  bool gemm = false;
  loom_status s = loom__cfz_gemm_topk(body, in, out, scratch, scratch_bytes, &gemm);
  if (gemm) return s;
  s = loom__cfz_distance_topk(body, in, out, scratch, scratch_bytes, &gemm);
  if (gemm) return s;
  loom__layout *lay = malloc(sizeof *lay * (size_t)(body->n_values + 1));
  if (!lay) return loom__error(LOOM_ERR_OUT_OF_MEMORY, "cpu: fused: out of memory");
  plan P;
  s = loom__cfz_build_plan(body, in, out, &P, lay);
  free(lay);
  if (s) {
    loom__cfz_plan_free(&P);
    return s;
  }
  __atomic_store_n(&loom__cpu_ks_taken, P.ks, __ATOMIC_RELAXED);
  __atomic_store_n(&loom__cpu_ks_wide_taken, P.ks && P.ks_avx512, __ATOMIC_RELAXED);
  int64_t total = 1, outputs = 1;
  for (int32_t d = 0; d < P.r; d++) total *= P.dims[d];
  for (int32_t r = 0; r < body->n_outputs; r++) outputs = LOOM_MIN(outputs, loom__cpu_elements(&out[r].type));
  if (outputs == 0) {
    loom__cfz_plan_free(&P);
    return LOOM_OK;
  }
  if (P.fin == F_NONE) {
    s = total ? run_elementwise(&P) : LOOM_OK;
    loom__cfz_plan_free(&P);
    return s;
  }
  int64_t group, tasks = task_count(&P, &group);
  int nt = omp_get_max_threads();
  bool team = nt > 1 && total * (P.n_ops + 1) >= 16 * LOOM_CPU_BLOCK; /* fuse.c's FUSED_THREADED_WORK */
  /* Split a task between threads only where there are too few tasks and enough work in each. */
  if (team && tasks < 4 * (int64_t)nt && total / (tasks ? tasks : 1) >= 4 * FB)
    s = run_split(&P, tasks, group, nt);
  else
    s = run_by_tasks(&P, tasks, group, team);
  loom__cfz_plan_free(&P);
  return s;
}
