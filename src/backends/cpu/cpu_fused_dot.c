/* The fused evaluator's small dots (cpu_fused_run.h lists the parts): a dot of k <= MAX_K terms per
 * element over a block, its operand rows packed once while the block's columns stay the same,
 * and a binary op whose one operand is a 3-term f32 dot computed in the op's own loop
 * (find_dot_epilogues), keeping the unfused roundings. */
#include "backends/cpu/cpu_fused_run.h"
#include "ir/pattern.h"

/* The small dot: k multiply-adds per element. b's k rows are packed once per block (and kept
 * while the block's columns stay the same, across the rows of a group); a's row gives k
 * scalars. Leaves of rank 2 align with S one to one, so a's strides are (row, k) and b's
 * (k, column). */
#define DOT_BLOCK(T, FMA)                                                                                    \
  do {                                                                                                       \
    const T *bp[MAX_K];                                                                                      \
    T av[MAX_K];                                                                                             \
    bool fresh = w->cache_off[io] != boff || w->cache_n[io] != n;                                            \
    for (int64_t t = 0; t < k; t++) {                                                                        \
      av[t] = (T)loom__cfz_load_scalar(A->base, A->dtype, aoff + t * A->strides[1]).KF;                      \
      int64_t off = boff + t * B->strides[0];                                                                \
      if (B->strides[1] == 1 && B->dtype == DT) {                                                            \
        bp[t] = (const T *)B->base + off;                                                                    \
        continue;                                                                                            \
      }                                                                                                      \
      T *bt = slot(w, O->slot + 1 + (int32_t)t);                                                             \
      if (fresh) loom__cfz_pack(B->base, B->dtype, off, B->strides[1], n, bt);                               \
      bp[t] = bt;                                                                                            \
    }                                                                                                        \
    w->cache_off[io] = boff;                                                                                 \
    w->cache_n[io] = n;                                                                                      \
    T *restrict o = slot(w, O->slot);                                                                        \
    const T *restrict b0 = bp[0];                                                                            \
    T a0 = av[0];                                                                                            \
    if (k == 3) { /* points in 3-D: one pass, the roundings of three */                                      \
      const T *restrict b1 = bp[1], *restrict b2 = bp[2];                                                    \
      T a1 = av[1], a2 = av[2];                                                                              \
      _Pragma("omp simd") for (int64_t j = 0; j < n; j++) o[j] = FMA(a2, b2[j], FMA(a1, b1[j], a0 * b0[j])); \
      w->ptr[io] = o;                                                                                        \
      break;                                                                                                 \
    }                                                                                                        \
    _Pragma("omp simd") for (int64_t j = 0; j < n; j++) o[j] = a0 * b0[j];                                   \
    for (int64_t t = 1; t < k; t++) {                                                                        \
      const T *restrict bt = bp[t];                                                                          \
      T x = av[t];                                                                                           \
      _Pragma("omp simd") for (int64_t j = 0; j < n; j++) o[j] = FMA(x, bt[j], o[j]);                        \
    }                                                                                                        \
    w->ptr[io] = o;                                                                                          \
  } while (0)

KERNEL void dot_block_body(const plan *P, work *w, const loom__op *op, const int64_t *idx, int64_t n) {
  int32_t ia = op->inputs[0], ib = op->inputs[1], io = op->outputs[0];
  const fvalue *A = &P->v[ia], *B = &P->v[ib], *O = &P->v[io];
  int64_t k = P->g->values[ia].type.dims[1];
  int64_t aoff = idx[0] * A->strides[0], boff = idx[1] * B->strides[1];
  if (!O->vec) {
    double s = 0;
    for (int64_t t = 0; t < k; t++) {
      scalar x = loom__cfz_load_scalar(A->base, A->dtype, aoff + t * A->strides[1]);
      scalar y = loom__cfz_load_scalar(B->base, B->dtype, boff + t * B->strides[0]);
      s = O->kind == K_F32 ? (double)fmaf(x.f, y.f, (float)s) : fma(x.d, y.d, s);
    }
    if (O->kind == K_F32)
      w->sc[io].f = (float)s;
    else
      w->sc[io].d = s;
    w->ptr[io] = &w->sc[io];
    return;
  }
  if (O->kind == K_F32) {
#define KF f
#define DT LOOM_F32
    DOT_BLOCK(float, fmaf);
#undef KF
#undef DT
  } else {
#define KF d
#define DT LOOM_F64
    DOT_BLOCK(double, fma);
#undef KF
#undef DT
  }
}
ISA_VARIANTS_VOID(void, dot_block,
                  (const plan *P, work *w, const loom__op *op, const int64_t *idx, int64_t n),
                  (P, w, op, idx, n))

/* Computes dot op's block (or its scalar, where the dot does not vary along the block) at S
 * index idx, by the kernel of the CPU's x86-64 level. */
void loom__cfz_dot_block(const plan *P, work *w, const loom__op *op, const int64_t *idx, int64_t n) {
  dot_block(P, w, op, idx, n);
}

/* An f32 dot's k rows of b for the block (packed once while the columns stay) and a's k
 * coefficients for the row. */
void loom__cfz_dot_rows_f32(const plan *P, work *w, const loom__op *op, const int64_t *idx, int64_t n,
                            const float **bp, float *av) {
  int32_t ia = op->inputs[0], ib = op->inputs[1], io = op->outputs[0];
  const fvalue *A = &P->v[ia], *B = &P->v[ib], *O = &P->v[io];
  int64_t k = P->g->values[ia].type.dims[1];
  int64_t aoff = idx[0] * A->strides[0], boff = idx[1] * B->strides[1];
  bool fresh = w->cache_off[io] != boff || w->cache_n[io] != n;
  for (int64_t t = 0; t < k; t++) {
    av[t] = loom__cfz_load_scalar(A->base, A->dtype, aoff + t * A->strides[1]).f;
    int64_t off = boff + t * B->strides[0];
    if (B->strides[1] == 1 && B->dtype == LOOM_F32) {
      bp[t] = (const float *)B->base + off;
      continue;
    }
    float *bt = slot(w, O->slot + 1 + (int32_t)t);
    if (fresh) loom__cfz_pack(B->base, B->dtype, off, B->strides[1], n, bt);
    bp[t] = bt;
  }
  w->cache_off[io] = boff;
  w->cache_n[io] = n;
}

/* o = x OP y where one of x, y is the 3-term dot (through its absorbed op, tdot) and the other
 * a block or a scalar (through its own, tother), in one loop. */
#define EPI_LOOPS(EXPR)                                         \
  do {                                                          \
    if (ov) {                                                   \
      _Pragma("omp simd") for (int64_t j = 0; j < n; j++) {     \
        float d = fmaf(a2, b2[j], fmaf(a1, b1[j], a0 * b0[j])); \
        d = td ? d * md + ad : d;                               \
        float u = to ? ou[j] * mo + ao : ou[j];                 \
        float x = left ? d : u, y = left ? u : d;               \
        o[j] = (EXPR);                                          \
      }                                                         \
    } else {                                                    \
      const float u = ou[0];                                    \
      _Pragma("omp simd") for (int64_t j = 0; j < n; j++) {     \
        float d = fmaf(a2, b2[j], fmaf(a1, b1[j], a0 * b0[j])); \
        d = td ? d * md + ad : d;                               \
        float x = left ? d : u, y = left ? u : d;               \
        o[j] = (EXPR);                                          \
      }                                                         \
    }                                                           \
  } while (0)

KERNEL void dot3_epilogue_body(loom_op op, float *restrict o, const float *const *bp, const float *av,
                               tfm tdot, bool left, const float *restrict ou, bool ov, tfm tother,
                               int64_t n) {
  const float *restrict b0 = bp[0], *restrict b1 = bp[1], *restrict b2 = bp[2];
  const float a0 = av[0], a1 = av[1], a2 = av[2];
  const bool td = tdot.on, to = tother.on;
  const float md = (float)tdot.m, ad = (float)tdot.a, mo = (float)tother.m, ao = (float)tother.a;
  switch (op) {
    case LOOM_OP_ADD:
      EPI_LOOPS(x + y);
      break;
    case LOOM_OP_SUB:
      EPI_LOOPS(x - y);
      break;
    case LOOM_OP_MUL:
      EPI_LOOPS(x * y);
      break;
    case LOOM_OP_DIV:
      EPI_LOOPS(x / y);
      break;
    case LOOM_OP_MAXIMUM:
      EPI_LOOPS(MAX_F(x, y));
      break;
    default:
      EPI_LOOPS(MIN_F(x, y));
      break;
  }
}
ISA_VARIANTS_VOID(void, dot3_epilogue,
                  (loom_op op, float *restrict o, const float *const *bp, const float *av, tfm tdot,
                   bool left, const float *restrict ou, bool ov, tfm tother, int64_t n),
                  (op, o, bp, av, tdot, left, ou, ov, tother, n))

/* Binary op c whose one operand is a dot (find_dot_epilogues), over the block. */
void loom__cfz_dot_epilogue(const plan *P, work *w, const loom__op *c, const int64_t *idx, int64_t n) {
  const fvalue *cv = &P->v[c->outputs[0]];
  const loom__op *dot = loom__producer(P->g, cv->epi_dot);
  int32_t mine = cv->epi_via >= 0 ? cv->epi_via : cv->epi_dot;
  bool left = c->inputs[0] == mine;
  int32_t other = c->inputs[left ? 1 : 0];
  const float *bp[MAX_K];
  float av[MAX_K];
  loom__cfz_dot_rows_f32(P, w, dot, idx, n, bp, av);
  tfm none = {false, 1, 0};
  tfm tdot = cv->epi_via >= 0 ? w->tf[cv->epi_via] : none;
  tfm tother = P->v[other].absorbed ? w->tf[other] : none;
  float *o = slot(w, cv->slot);
  dot3_epilogue(c->kind, o, bp, av, tdot, left, w->ptr[other], P->v[other].vec, tother, n);
  w->ptr[c->outputs[0]] = o;
}
