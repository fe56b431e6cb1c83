/* Reductions: red_item (one thread per output, the reduced elements in order) and the group
 * kernels (one block per output: each thread reduces a strided share in index order, then a
 * tree in shared memory merges the shares), the kind a code (LM_SUM .. LM_ARGMIN).
 *
 * As the cpu backend (src/backends/cpu/cpu_reduce.c): integer sums and products wrap
 * (accumulated in 64 bits); float sums and products accumulate in double, complex in double
 * complex; reduce_mean is sum / n; max/min return NaN when any element is NaN;
 * argmax/argmin return the lowest index of the best value, a NaN being best (the first NaN).
 * The host refuses max/min/argmax/argmin over an empty axis before launching.
 */
#include "common.cuh"

namespace lc {

constexpr int kGroupThreads = 256;

/* ---- sums and products: SUMT ------------------------------------------------------------- */

template <int DT>
__device__ inline typename T<DT>::SUMT to_sumt(typename T<DT>::C x) {
  typedef typename T<DT>::SUMT A;
  if constexpr (T<DT>::kind == K_CPX) {
    A r;
    r.x = x.x;
    r.y = x.y;
    return r;
  } else if constexpr (T<DT>::kind == K_FLOAT) {
    return (A)x;
  } else {
    return (A)(int64_t)x; /* sign-extended, then wrapping */
  }
}

template <int DT>
__device__ inline typename T<DT>::SUMT sumt_value(double v) {
  typedef typename T<DT>::SUMT A;
  if constexpr (T<DT>::kind == K_CPX) {
    A r;
    r.x = v;
    r.y = 0;
    return r;
  } else {
    return (A)v;
  }
}

template <int DT>
__device__ inline typename T<DT>::SUMT arith(int kind, typename T<DT>::SUMT a, typename T<DT>::SUMT b) {
  if constexpr (T<DT>::kind == K_CPX)
    return kind == LM_PROD ? cmul(a, b) : cadd(a, b);
  else
    return kind == LM_PROD ? a * b : a + b;
}

/* The value stored for a sum, product or mean of n elements. */
template <int DT>
__device__ inline typename T<DT>::S arith_finish(int kind, typename T<DT>::SUMT v, int64_t n) {
  typedef typename T<DT>::C C;
  if constexpr (T<DT>::kind == K_CPX) {
    if (kind == LM_MEAN) {
      v.x /= (double)n;
      v.y /= (double)n;
    }
    C r;
    r.x = (typename T<DT>::R)v.x;
    r.y = (typename T<DT>::R)v.y;
    return r;
  } else if constexpr (T<DT>::kind == K_FLOAT) {
    return T<DT>::st((C)(kind == LM_MEAN ? v / (double)n : v));
  } else {
    if (kind == LM_MEAN) return (C)(n ? (int64_t)v / n : 0);
    return (C)v;
  }
}

/* ---- max/min and argmax/argmin: a value and an aux (NaN seen, or the best index) ------------ */

template <int DT>
struct best {
  typename T<DT>::C v;
  int64_t aux;
};

template <int DT>
__device__ inline void extreme_step(int kind, best<DT> &b, typename T<DT>::C x) {
  if (kind == LM_MAX)
    b.v = x > b.v ? x : b.v;
  else
    b.v = x < b.v ? x : b.v;
  b.aux |= is_nan(x);
}

template <int DT>
__device__ inline void extreme_merge(int kind, best<DT> &b, const best<DT> &o) {
  extreme_step<DT>(kind, b, o.v);
  b.aux |= o.aux;
}

/* In index order: the first element is taken, then only a strictly better one or a NaN (once
 * the best is NaN it stays). */
template <int DT>
__device__ inline void arg_step(int kind, best<DT> &b, typename T<DT>::C x, int64_t j) {
  bool better = kind == LM_ARGMAX ? x > b.v : x < b.v;
  if (b.aux < 0 || (!is_nan(b.v) && (better || is_nan(x)))) {
    b.v = x;
    b.aux = j;
  }
}

/* Merging shares of any order: values first, then indices. */
template <int DT>
__device__ inline void arg_merge(int kind, best<DT> &b, const best<DT> &o) {
  if (o.aux < 0) return;
  bool takes;
  if (b.aux < 0)
    takes = true;
  else if (is_nan(o.v))
    takes = !is_nan(b.v) || o.aux < b.aux;
  else {
    bool better = kind == LM_ARGMAX ? o.v > b.v : o.v < b.v;
    takes = !is_nan(b.v) && (better || (o.v == b.v && o.aux < b.aux));
  }
  if (takes) b = o;
}

/* The value a max/min stores: NaN when one was seen. */
template <int DT>
__device__ inline typename T<DT>::S extreme_value(const best<DT> &b) {
  if constexpr (T<DT>::kind == K_FLOAT)
    return T<DT>::st(b.aux ? (typename T<DT>::C)NAN : b.v);
  else
    return T<DT>::st(b.v);
}

template <int DT>
__device__ inline best<DT> best_init(int kind) {
  best<DT> b;
  b.aux = kind == LM_ARGMAX || kind == LM_ARGMIN ? -1 : 0;
  b.v = kind == LM_MAX ? T<DT>::lowest() : kind == LM_MIN ? T<DT>::highest() : (typename T<DT>::C)0;
  return b;
}

/* ---- one thread per output ----------------------------------------------------------------- */

template <int DT>
__global__ void red_item_k(const typename T<DT>::S *in, void *out, lm_reduce m, int kind) {
  typedef typename T<DT>::C C;
  GRID_LOOP(o, m.n_out) {
    int64_t base = m.in_off + nest_offset(o, m.kr, m.kdims, m.kst);
    int64_t inner = m.n_red > 0 ? m.rdims[m.rr - 1] : 0, ist = m.rst[m.rr - 1];
    int64_t outer = inner > 0 ? m.n_red / inner : 0;
    if (kind == LM_SUM || kind == LM_PROD || kind == LM_MEAN) {
      typename T<DT>::SUMT v = sumt_value<DT>(kind == LM_PROD ? 1.0 : 0.0);
      for (int64_t q = 0; q < outer; q++) {
        const typename T<DT>::S *p = in + base + nest_offset(q, m.rr - 1, m.rdims, m.rst);
        for (int64_t t = 0; t < inner; t++) v = arith<DT>(kind, v, to_sumt<DT>(T<DT>::ld(p[t * ist])));
      }
      ((typename T<DT>::S *)out)[m.out_off + o] = arith_finish<DT>(kind, v, m.n_red);
    } else if constexpr (T<DT>::kind != K_CPX) {
      best<DT> b = best_init<DT>(kind);
      bool arg = kind == LM_ARGMAX || kind == LM_ARGMIN;
      for (int64_t q = 0; q < outer; q++) {
        const typename T<DT>::S *p = in + base + nest_offset(q, m.rr - 1, m.rdims, m.rst);
        for (int64_t t = 0; t < inner; t++) {
          C x = T<DT>::ld(p[t * ist]);
          if (arg)
            arg_step<DT>(kind, b, x, q * inner + t);
          else
            extreme_step<DT>(kind, b, x);
        }
      }
      if (arg)
        ((int64_t *)out)[m.out_off + o] = b.aux;
      else
        ((typename T<DT>::S *)out)[m.out_off + o] = extreme_value<DT>(b);
    }
  }
}

/* ---- one block per output ----------------------------------------------------------------- */

/* A tree over the block's shares in shared memory; thread 0 ends with the merged state. */
template <class V, class Merge>
__device__ inline V block_merge(V v, V *shared, Merge merge) {
  int lid = threadIdx.x;
  shared[lid] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (lid < s) {
      V a = shared[lid];
      merge(a, shared[lid + s]);
      shared[lid] = a;
    }
    __syncthreads();
  }
  V r = shared[0];
  __syncthreads(); /* the next output reuses the memory */
  return r;
}

template <int DT>
__global__ void red_group_arith_k(const typename T<DT>::S *in, typename T<DT>::S *out, lm_reduce m,
                                  int kind) {
  typedef typename T<DT>::SUMT A;
  __shared__ A shared[kGroupThreads];
  for (int64_t o = blockIdx.x; o < m.n_out; o += gridDim.x) {
    int64_t base = m.in_off + nest_offset(o, m.kr, m.kdims, m.kst);
    A v = sumt_value<DT>(kind == LM_PROD ? 1.0 : 0.0);
    for (int64_t j = threadIdx.x; j < m.n_red; j += blockDim.x)
      v = arith<DT>(kind, v, to_sumt<DT>(T<DT>::ld(in[base + nest_offset(j, m.rr, m.rdims, m.rst)])));
    v = block_merge(v, shared, [kind](A &a, const A &b) { a = arith<DT>(kind, a, b); });
    if (threadIdx.x == 0) out[m.out_off + o] = arith_finish<DT>(kind, v, m.n_red);
  }
}

template <int DT>
__global__ void red_group_best_k(const typename T<DT>::S *in, void *out, lm_reduce m, int kind) {
  __shared__ best<DT> shared[kGroupThreads];
  bool arg = kind == LM_ARGMAX || kind == LM_ARGMIN;
  for (int64_t o = blockIdx.x; o < m.n_out; o += gridDim.x) {
    int64_t base = m.in_off + nest_offset(o, m.kr, m.kdims, m.kst);
    best<DT> b = best_init<DT>(kind);
    for (int64_t j = threadIdx.x; j < m.n_red; j += blockDim.x) {
      typename T<DT>::C x = T<DT>::ld(in[base + nest_offset(j, m.rr, m.rdims, m.rst)]);
      if (arg)
        arg_step<DT>(kind, b, x, j);
      else
        extreme_step<DT>(kind, b, x);
    }
    b = block_merge(b, shared, [kind, arg](best<DT> &a, const best<DT> &c) {
      if (arg)
        arg_merge<DT>(kind, a, c);
      else
        extreme_merge<DT>(kind, a, c);
    });
    if (threadIdx.x != 0) continue;
    if (arg)
      ((int64_t *)out)[m.out_off + o] = b.aux;
    else
      ((typename T<DT>::S *)out)[m.out_off + o] = extreme_value<DT>(b);
  }
}

template <int DT>
cudaError_t launch_reduce(cudaStream_t stream, const void *in, void *out, const lm_reduce *m, int kind,
                          int group) {
  typedef typename T<DT>::S S;
  if (!group) {
    red_item_k<DT><<<blocks_for(m->n_out), kThreads, 0, stream>>>((const S *)in, out, *m, kind);
    return launched();
  }
  unsigned blocks = (unsigned)(m->n_out < kMaxBlocks ? m->n_out : kMaxBlocks);
  if (kind == LM_SUM || kind == LM_PROD || kind == LM_MEAN)
    red_group_arith_k<DT><<<blocks, kGroupThreads, 0, stream>>>((const S *)in, (S *)out, *m, kind);
  else if constexpr (T<DT>::kind != K_CPX)
    red_group_best_k<DT><<<blocks, kGroupThreads, 0, stream>>>((const S *)in, out, *m, kind);
  else
    return cudaErrorNotSupported;
  return launched();
}

}  // namespace lc

using namespace lc;

#define CASE_REDUCE(DTV) \
  case DTV:              \
    return launch_reduce<DTV>(stream, in, out, m, kind, group);

extern "C" cudaError_t loom__cu_reduce(cudaStream_t stream, int dt, const void *in, void *out,
                                       const lm_reduce *m, int kind, int group) {
  switch (dt) {
    CASE_REDUCE(DT_I8)
    CASE_REDUCE(DT_U8)
    CASE_REDUCE(DT_I16)
    CASE_REDUCE(DT_I32)
    CASE_REDUCE(DT_I64)
    CASE_REDUCE(DT_F16)
    CASE_REDUCE(DT_BF16)
    CASE_REDUCE(DT_F32)
    CASE_REDUCE(DT_F64)
    CASE_REDUCE(DT_C64)
    CASE_REDUCE(DT_C128)
    default:
      return cudaErrorNotSupported;
  }
}
