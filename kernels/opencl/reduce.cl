/* Reductions of the program's dtype: red_item (one work-item per output, the reduced elements
 * in order) and red_group (one work-group per output: each work-item reduces a strided share,
 * then a tree in local memory merges the shares), each taking the kind as a code (LM_SUM ..
 * LM_ARGMIN, gpu_meta.h) switched once per output.
 *
 * Semantics as the cpu backend (src/backends/cpu/cpu_reduce.c): integer sums and products
 * wrap; float sums and products accumulate in double where the device has fp64 (float
 * otherwise); reduce_mean is sum / n; max/min return NaN when any element is NaN;
 * argmax/argmin return the lowest index of the best value, a NaN being best (the first NaN).
 * The host refuses max/min/argmax/argmin over an empty axis before launching.
 */

/* SUMT accumulators: conversions in and out (vectors do not convert implicitly). */
#if defined(IS_COMPLEX) && LOOM_DT == DT_C64 && LOOM_FP64
#define TO_SUMT(x) convert_double2(x)
#define FROM_SUMT(v) convert_float2(v)
#define SUM_N(n) ((double)(n))
#elif defined(IS_COMPLEX)
#define TO_SUMT(x) (x)
#define FROM_SUMT(v) (v)
#define SUM_N(n) ((R)(n))
#elif defined(SUMT)
#define TO_SUMT(x) ((SUMT)(x))
#define FROM_SUMT(v) ((C)(v))
#define SUM_N(n) ((SUMT)(n))
#endif

/* Each kind: INIT(v, aux); STEP(v, aux, x, j) for element x at reduced index j (in
 * increasing j within one work-item); MERGE(v, aux, bv, baux); FINISH(v, aux, n) the value
 * stored. */
#define SUM_INIT(v, aux) ((v) = TO_SUMT((C)0), (aux) = 0)
#define SUM_STEP(v, aux, x, j) ((v) += TO_SUMT(x))
#define SUM_MERGE(v, aux, bv, baux) ((v) += (bv))
#define SUM_FINISH(v, aux, n) ST(FROM_SUMT(v))

#if defined(IS_COMPLEX)
#define PROD_INIT(v, aux) ((v) = TO_SUMT((C)((R)1, (R)0)), (aux) = 0)
#define PROD_STEP(v, aux, x, j) ((v) = CMUL(SUMT, v, TO_SUMT(x)))
#define PROD_MERGE(v, aux, bv, baux) ((v) = CMUL(SUMT, v, bv))
#else
#define PROD_INIT(v, aux) ((v) = (SUMT)1, (aux) = 0)
#define PROD_STEP(v, aux, x, j) ((v) *= TO_SUMT(x))
#define PROD_MERGE(v, aux, bv, baux) ((v) *= (bv))
#endif
#define PROD_FINISH SUM_FINISH

#if defined(IS_INT)
#define MEAN_FINISH(v, aux, n) ((S)((n) ? (long)(v) / (n) : 0))
#else
#define MEAN_FINISH(v, aux, n) ST(FROM_SUMT((v) / SUM_N(n)))
#endif

#define MAX_INIT(v, aux) ((v) = LOWEST, (aux) = 0)
#define MAX_STEP(v, aux, x, j) ((v) = (x) > (v) ? (x) : (v), (aux) |= ISNAN(x))
#define MAX_MERGE(v, aux, bv, baux) ((v) = (bv) > (v) ? (bv) : (v), (aux) |= (baux))
#define MIN_INIT(v, aux) ((v) = HIGHEST, (aux) = 0)
#define MIN_STEP(v, aux, x, j) ((v) = (x) < (v) ? (x) : (v), (aux) |= ISNAN(x))
#define MIN_MERGE(v, aux, bv, baux) ((v) = (bv) < (v) ? (bv) : (v), (aux) |= (baux))
#if defined(IS_FLOAT)
#define EXTREME_FINISH(v, aux, n) ST((aux) ? (C)NAN : (v))
#else
#define EXTREME_FINISH(v, aux, n) ST(v)
#endif

/* argmax/argmin: aux is the best index so far (-1: none). In order, the first element is
 * taken, then only a strictly better one or a NaN (once the best is NaN it stays). Merging
 * shares compares values, then indices. */
#define ARG_INIT(v, aux) ((v) = (C)0, (aux) = -1)
#define ARG_STEP(v, aux, x, j, CMP)                                      \
  do {                                                                   \
    if ((aux) < 0 || (!ISNAN(v) && ((x)CMP(v) || ISNAN(x)))) {           \
      (v) = (x);                                                         \
      (aux) = (j);                                                       \
    }                                                                    \
  } while (0)
#define ARG_TAKES(v, aux, bv, baux, CMP)                                                    \
  ((baux) >= 0 && ((aux) < 0 || (ISNAN(bv) ? (!ISNAN(v) || (baux) < (aux))                \
                                           : (!ISNAN(v) && ((bv)CMP(v) || ((bv) == (v) && (baux) < (aux)))))))
#define ARG_MERGE(v, aux, bv, baux, CMP) \
  do {                                   \
    if (ARG_TAKES(v, aux, bv, baux, CMP)) { \
      (v) = (bv);                        \
      (aux) = (baux);                    \
    }                                    \
  } while (0)
#define ARGMAX_STEP(v, aux, x, j) ARG_STEP(v, aux, x, j, >)
#define ARGMIN_STEP(v, aux, x, j) ARG_STEP(v, aux, x, j, <)
#define ARGMAX_MERGE(v, aux, bv, baux) ARG_MERGE(v, aux, bv, baux, >)
#define ARGMIN_MERGE(v, aux, bv, baux) ARG_MERGE(v, aux, bv, baux, <)
#define ARG_FINISH(v, aux, n) (aux)

/* The loops of one kind, for one output at `base`: in order (item) or a strided share of a
 * work-group and the tree that merges the shares (group). V is the state's type, OT the
 * output's. */
#define ITEM_CASE(ID, V, OT, INIT, STEP, FINISH)                                             \
  case ID: {                                                                                 \
    V v;                                                                                     \
    long aux;                                                                                \
    INIT(v, aux);                                                                            \
    if (m.n_red > 0) {                                                                       \
      long inner = m.rdims[m.rr - 1], ist = m.rst[m.rr - 1], outer = m.n_red / inner;        \
      for (long q = 0; q < outer; q++) {                                                     \
        long p = base + nest_offset(q, m.rr - 1, m.rdims, m.rst);                            \
        for (long t = 0; t < inner; t++) {                                                   \
          C x = LD(in[p + t * ist]);                                                         \
          STEP(v, aux, x, q * inner + t);                                                    \
        }                                                                                    \
      }                                                                                      \
    }                                                                                        \
    ((__global OT *)out)[m.out_off + o] = FINISH(v, aux, m.n_red);                           \
    break;                                                                                   \
  }

#if defined(IS_INT) || defined(IS_FLOAT) || defined(IS_COMPLEX)
__kernel void red_item(__global const S *in, __global void *out, lm_reduce m, int kind) {
  GRID_LOOP(o, m.n_out) {
    long base = m.in_off + nest_offset(o, m.kr, m.kdims, m.kst);
    switch (kind) {
      ITEM_CASE(LM_SUM, SUMT, S, SUM_INIT, SUM_STEP, SUM_FINISH)
      ITEM_CASE(LM_PROD, SUMT, S, PROD_INIT, PROD_STEP, PROD_FINISH)
      ITEM_CASE(LM_MEAN, SUMT, S, SUM_INIT, SUM_STEP, MEAN_FINISH)
#if !defined(IS_COMPLEX)
      ITEM_CASE(LM_MAX, C, S, MAX_INIT, MAX_STEP, EXTREME_FINISH)
      ITEM_CASE(LM_MIN, C, S, MIN_INIT, MIN_STEP, EXTREME_FINISH)
      ITEM_CASE(LM_ARGMAX, C, long, ARG_INIT, ARGMAX_STEP, ARG_FINISH)
      ITEM_CASE(LM_ARGMIN, C, long, ARG_INIT, ARGMIN_STEP, ARG_FINISH)
#endif
      default:
        break;
    }
  }
}

/* The work-group kernels, one per kind of state (a switch around a barrier makes drivers that
 * run work-items in loops, PoCL among them, compile every region once per case): each
 * work-item reduces a strided share in index order, then a tree in local memory merges the
 * shares, the kind switched inside each step. lv holds ls states, la ls longs. */
#define GROUP_BEGIN(V)                                                                       \
  long lid = get_local_id(0), ls = get_local_size(0);                                        \
  for (long o = get_group_id(0); o < m.n_out; o += get_num_groups(0)) {                      \
    long base = m.in_off + nest_offset(o, m.kr, m.kdims, m.kst);                             \
    V v;                                                                                     \
    long aux;
#define GROUP_SHARE(STEPS)                                                                   \
    for (long j = lid; j < m.n_red; j += ls) {                                               \
      C x = LD(in[base + nest_offset(j, m.rr, m.rdims, m.rst)]);                             \
      STEPS                                                                                  \
    }                                                                                        \
    lv[lid] = v;                                                                             \
    la[lid] = aux;                                                                           \
    barrier(CLK_LOCAL_MEM_FENCE);                                                            \
    for (long s = ls / 2; s > 0; s >>= 1) {                                                  \
      if (lid < s) {                                                                         \
        v = lv[lid];                                                                         \
        aux = la[lid];
#define GROUP_STORE                                                                          \
        lv[lid] = v;                                                                         \
        la[lid] = aux;                                                                       \
      }                                                                                      \
      barrier(CLK_LOCAL_MEM_FENCE);                                                          \
    }                                                                                        \
    if (lid == 0) {                                                                          \
      v = lv[0];                                                                             \
      aux = la[0];
#define GROUP_END                                                                            \
    }                                                                                        \
    barrier(CLK_LOCAL_MEM_FENCE);                                                            \
  }

__kernel void red_group_arith(__global const S *in, __global S *out, lm_reduce m, int kind, __local SUMT *lv,
                              __local long *la) {
  GROUP_BEGIN(SUMT)
  if (kind == LM_PROD) PROD_INIT(v, aux);
  else SUM_INIT(v, aux);
  GROUP_SHARE(if (kind == LM_PROD) PROD_STEP(v, aux, x, j); else SUM_STEP(v, aux, x, j);)
  if (kind == LM_PROD) PROD_MERGE(v, aux, lv[lid + s], la[lid + s]);
  else SUM_MERGE(v, aux, lv[lid + s], la[lid + s]);
  GROUP_STORE
  out[m.out_off + o] = kind == LM_MEAN ? MEAN_FINISH(v, aux, m.n_red) : SUM_FINISH(v, aux, m.n_red);
  GROUP_END
}

#if !defined(IS_COMPLEX)
__kernel void red_group_extreme(__global const S *in, __global S *out, lm_reduce m, int kind, __local C *lv,
                                __local long *la) {
  GROUP_BEGIN(C)
  if (kind == LM_MIN) MIN_INIT(v, aux);
  else MAX_INIT(v, aux);
  GROUP_SHARE(if (kind == LM_MIN) MIN_STEP(v, aux, x, j); else MAX_STEP(v, aux, x, j);)
  if (kind == LM_MIN) MIN_MERGE(v, aux, lv[lid + s], la[lid + s]);
  else MAX_MERGE(v, aux, lv[lid + s], la[lid + s]);
  GROUP_STORE
  out[m.out_off + o] = EXTREME_FINISH(v, aux, m.n_red);
  GROUP_END
}

__kernel void red_group_arg(__global const S *in, __global long *out, lm_reduce m, int kind, __local C *lv,
                            __local long *la) {
  GROUP_BEGIN(C)
  ARG_INIT(v, aux);
  GROUP_SHARE(if (kind == LM_ARGMIN) ARGMIN_STEP(v, aux, x, j); else ARGMAX_STEP(v, aux, x, j);)
  if (kind == LM_ARGMIN) ARGMIN_MERGE(v, aux, lv[lid + s], la[lid + s]);
  else ARGMAX_MERGE(v, aux, lv[lid + s], la[lid + s]);
  GROUP_STORE
  out[m.out_off + o] = ARG_FINISH(v, aux, m.n_red);
  GROUP_END
}
#endif
#endif
