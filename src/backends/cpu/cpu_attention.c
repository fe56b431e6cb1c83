/* Fused softmax attention on the host (ir/attention.h): o = softmax(q kt * scale) v, streamed
 * over blocks of keys with an online softmax (flash attention's scheme), so the n x m scores
 * are never stored whole.
 *
 * Each task owns a block of ATT_ROWS query rows and its rows of o. For each block of ATT_KEYS
 * keys it takes the scores s = scale q_b kt_b (sgemm), the block's row maxima, raises the
 * running maximum where it grew (the row's partial output and sum are multiplied by
 * e^(old - new)), replaces s by e^(s - max) summing each row, and adds p v_b to the output
 * rows (sgemm, beta = 1). Each row is divided by its sum at the end. The scores block stays
 * in the thread's L2; q, kt and v are read in place when BLAS can take their layout (rows or
 * columns of unit stride), else each block is packed first.
 *
 * Threads: tasks run on OpenMP threads; each calls BLAS from inside the region, where
 * OpenBLAS's OpenMP build runs single-threaded (one pool, no oversubscription). Memory: per
 * thread, one scores block and the packing blocks (ATT_ROWS x ATT_KEYS floats plus at most
 * (ATT_ROWS + 2 ATT_KEYS) x max(d, dv)), malloc'd outside the memory manager as the fused
 * evaluator's blocks are (docs/ir-fusion.md); the op's scratch is not used.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_attention.h"
#include "backends/cpu/cpu_blas_host.h"
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/cpu_vmath.h"

/* Query rows per task and keys per block: a 128 x 256 f32 scores block is 128 KiB, in L2 on
 * every x86-64 this project meets, and a sgemm of k = 256 for p v. */
#define ATT_ROWS 128
#define ATT_KEYS 256

/* A matrix operand as BLAS can take it: rows of unit column stride (NoTrans, ld = rs) or
 * columns of unit row stride (Trans, ld = cs); `packed` when neither holds. */
typedef struct att_mat {
  const float *data;
  int64_t rows, cols, rs, cs;
  bool packed;
} att_mat;

static att_mat att_mat_of(const loom__view *v) {
  att_mat a = {v->data, v->type.dims[0], v->type.dims[1], v->strides[0], v->strides[1], false};
  bool by_rows = a.cs == 1 && a.rs >= LOOM_MAX(a.cols, 1);
  bool by_cols = a.rs == 1 && a.cs >= LOOM_MAX(a.rows, 1);
  a.packed = !by_rows && !by_cols;
  return a;
}

/* The block of rows [r0, r0 + nr) x cols [c0, c0 + nc) of a, for BLAS: *trans and *ld set, its
 * pointer returned; packed densely into buf (nr x nc) when a's layout needs it. */
static const float *att_block(const att_mat *a, int64_t r0, int64_t nr, int64_t c0, int64_t nc, float *buf,
                              CBLAS_TRANSPOSE *trans, int64_t *ld) {
  const float *base = a->data + r0 * a->rs + c0 * a->cs;
  if (!a->packed) {
    *trans = a->cs == 1 ? CblasNoTrans : CblasTrans;
    *ld = a->cs == 1 ? LOOM_MAX(a->rs, 1) : LOOM_MAX(a->cs, 1);
    return base;
  }
  for (int64_t i = 0; i < nr; i++)
    for (int64_t j = 0; j < nc; j++) buf[i * nc + j] = base[i * a->rs + j * a->cs];
  *trans = CblasNoTrans;
  *ld = LOOM_MAX(nc, 1);
  return buf;
}

/* One scores block s (nr x nc, row stride ATT_KEYS) into e^(s - max): per row, the running
 * maximum mx and sum l updated and the factor e^(old - new) the row's output must take.
 * Inlined into each ISA's clone below (else each clone would call one baseline copy, whose
 * fmaf is a libm call: measured 3 GFLOP/s for the whole op). */
static inline __attribute__((always_inline)) void softmax_block_body(float *s, int64_t nr, int64_t nc,
                                                                     float *mx, float *l, float *corr) {
  for (int64_t i = 0; i < nr; i++) {
    float *row = s + i * ATT_KEYS;
    float bm = -INFINITY;
#pragma omp simd reduction(max : bm)
    for (int64_t j = 0; j < nc; j++) bm = row[j] > bm ? row[j] : bm;
    float m_new = bm > mx[i] ? bm : mx[i];
    /* A row of -inf so far keeps factor 1: nothing was added to it yet. */
    corr[i] = mx[i] == -INFINITY ? 1.0f : loom__exp_f32(mx[i] - m_new);
    mx[i] = m_new;
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < nc; j++) {
      float e = loom__exp_f32(row[j] - m_new);
      row[j] = e;
      sum += e;
    }
    l[i] = l[i] * corr[i] + sum;
  }
}

__attribute__((target("arch=x86-64-v4"))) static void softmax_block_v4(float *s, int64_t nr, int64_t nc,
                                                                       float *mx, float *l, float *corr) {
  softmax_block_body(s, nr, nc, mx, l, corr);
}
__attribute__((target("arch=x86-64-v3"))) static void softmax_block_v3(float *s, int64_t nr, int64_t nc,
                                                                       float *mx, float *l, float *corr) {
  softmax_block_body(s, nr, nc, mx, l, corr);
}
static void softmax_block(int isa, float *s, int64_t nr, int64_t nc, float *mx, float *l, float *corr) {
  if (isa >= 4)
    softmax_block_v4(s, nr, nc, mx, l, corr);
  else if (isa >= 3)
    softmax_block_v3(s, nr, nc, mx, l, corr);
  else
    softmax_block_body(s, nr, nc, mx, l, corr);
}

typedef struct att_problem {
  const loom__attention *a;
  att_mat q, kt, v;
  float *o; /* dense n x dv */
  int isa;
} att_problem;

/* Per-thread storage: the scores block, the row states, and packing blocks where needed. */
typedef struct att_scratch {
  float *s, *mx, *l, *corr, *pq, *pk, *pv;
} att_scratch;

static bool scratch_init(const att_problem *p, att_scratch *w) {
  memset(w, 0, sizeof *w);
  size_t d = (size_t)p->a->d, dv = (size_t)p->a->dv;
  w->s = malloc(sizeof(float) * ATT_ROWS * ATT_KEYS);
  w->mx = malloc(sizeof(float) * ATT_ROWS * 3);
  if (p->q.packed) w->pq = malloc(sizeof(float) * ATT_ROWS * LOOM_MAX(d, 1));
  if (p->kt.packed) w->pk = malloc(sizeof(float) * ATT_KEYS * LOOM_MAX(d, 1));
  if (p->v.packed) w->pv = malloc(sizeof(float) * ATT_KEYS * LOOM_MAX(dv, 1));
  if (w->mx) {
    w->l = w->mx + ATT_ROWS;
    w->corr = w->l + ATT_ROWS;
  }
  return w->s && w->mx && (!p->q.packed || w->pq) && (!p->kt.packed || w->pk) && (!p->v.packed || w->pv);
}

static void scratch_deinit(att_scratch *w) {
  free(w->s);
  free(w->mx);
  free(w->pq);
  free(w->pk);
  free(w->pv);
}

/* Rows [r0, r0 + nr) of o: every block of keys in turn, then each row over its sum. */
static void att_rows(const att_problem *p, const loom__cpu_blas *blas, att_scratch *w, int64_t r0,
                     int64_t nr) {
  const loom__attention *a = p->a;
  float *o = p->o + r0 * a->dv;
  memset(o, 0, sizeof(float) * (size_t)(nr * a->dv));
  for (int64_t i = 0; i < nr; i++) w->mx[i] = -INFINITY, w->l[i] = 0;
  CBLAS_TRANSPOSE tq, tk, tv;
  int64_t lq, lk, lv;
  const float *qb = att_block(&p->q, r0, nr, 0, a->d, w->pq, &tq, &lq);
  for (int64_t c0 = 0; c0 < a->m; c0 += ATT_KEYS) {
    int64_t nc = LOOM_MIN(ATT_KEYS, a->m - c0);
    const float *kb = att_block(&p->kt, 0, a->d, c0, nc, w->pk, &tk, &lk);
    if (a->d > 0)
      blas->sgemm(CblasRowMajor, tq, tk, (int)nr, (int)nc, (int)a->d, (float)a->scale, qb, (int)lq, kb,
                  (int)lk, 0.0f, w->s, ATT_KEYS);
    else
      for (int64_t i = 0; i < nr; i++) memset(w->s + i * ATT_KEYS, 0, sizeof(float) * (size_t)nc);
    softmax_block(p->isa, w->s, nr, nc, w->mx, w->l, w->corr);
    for (int64_t i = 0; i < nr; i++)
      if (w->corr[i] != 1.0f)
        for (int64_t j = 0; j < a->dv; j++) o[i * a->dv + j] *= w->corr[i];
    const float *vb = att_block(&p->v, c0, nc, 0, a->dv, w->pv, &tv, &lv);
    if (a->dv > 0)
      blas->sgemm(CblasRowMajor, CblasNoTrans, tv, (int)nr, (int)a->dv, (int)nc, 1.0f, w->s, ATT_KEYS, vb,
                  (int)lv, 1.0f, o, (int)a->dv);
  }
  for (int64_t i = 0; i < nr; i++) {
    float inv = 1.0f / w->l[i];
    for (int64_t j = 0; j < a->dv; j++) o[i * a->dv + j] *= inv;
  }
}

loom_status loom__cpu_attention_supported(const loom__attention *a) {
  if (a->dtype != LOOM_F32)
    return loom__error(LOOM_ERR_UNSUPPORTED, "cpu: fused attention: %s (f32 only)",
                       loom_dtype_name(a->dtype));
  if (a->n > INT32_MAX || a->m > INT32_MAX || a->d > INT32_MAX || a->dv > INT32_MAX)
    return loom__error(LOOM_ERR_UNSUPPORTED, "cpu: fused attention: a dimension passes BLAS's int");
  return LOOM_OK;
}

loom_status loom__cpu_attention(const loom__attention *a, const loom__view *in, const loom__view *out) {
  loom_status st = loom__cpu_attention_supported(a);
  if (st) return st;
  if (a->m == 0 && a->n > 0 && a->dv > 0)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT,
                       "cpu: fused attention: the softmax's reduce_max runs over 0 keys (an empty axis)");
  if (a->n == 0 || a->dv == 0) return LOOM_OK;
  att_problem p = {a,           att_mat_of(&in[0]),   att_mat_of(&in[1]), att_mat_of(&in[2]),
                   out[0].data, loom__cpu_isa_level()};
  const loom__cpu_blas *blas = loom__cpu_blas_get();
  int64_t tasks = (a->n + ATT_ROWS - 1) / ATT_ROWS;
  bool failed = false;
#pragma omp parallel if (tasks > 1)
  {
    att_scratch w;
    if (!scratch_init(&p, &w)) {
#pragma omp atomic write
      failed = true;
    }
#pragma omp barrier
    bool any_failed;
#pragma omp atomic read
    any_failed = failed;
    if (!any_failed) { /* the same answer on every thread: all of them meet the loop, or none */
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < tasks; t++)
        att_rows(&p, blas, &w, t * ATT_ROWS, LOOM_MIN(ATT_ROWS, a->n - t * ATT_ROWS));
    }
    scratch_deinit(&w);
  }
  return failed ? loom__oom("cpu: fused attention's per-thread blocks") : LOOM_OK;
}
