/* Elementwise kernels, one per arity and dtype: unary, binary, and compare (bool output:
 * compare and logic), each taking the op as a code (LM_*) and computing in the dtype's compute
 * type; inputs are read in place through their strides (broadcasts have stride 0), the output
 * is dense. Codes an op does not take for the dtype (the host's table in cuda_kernels.c) write
 * nothing; the host never sends them.
 *
 * As the cpu backend (src/backends/cpu/cpu_elementwise.c): integer arithmetic wraps (done in an
 * unsigned type), integer div truncates with x/0 = 0 and MIN/-1 = MIN, integer pow by squaring
 * (negative exponents give 0 but for bases 1 and -1), maximum/minimum propagate NaN, sign keeps
 * NaN and signed zeros.
 */
#include "common.cuh"

namespace lc {

__device__ inline int64_t ipow(int64_t base, int64_t e) {
  if (e < 0) {
    if (base == 1) return 1;
    if (base == -1) return (e & 1) ? -1 : 1;
    return 0;
  }
  uint64_t result = 1, b = (uint64_t)base;
  for (uint64_t k = (uint64_t)e; k; k >>= 1) {
    if (k & 1) result *= b;
    b *= b;
  }
  return (int64_t)result;
}

template <int DT>
__device__ inline typename T<DT>::C unary_op(int op, typename T<DT>::C x) {
  typedef typename T<DT>::C C;
  constexpr int K = T<DT>::kind;
  if constexpr (K == K_SINT || K == K_UINT) {
    typedef typename T<DT>::W W;
    switch (op) {
      case LM_NEG:
        return (C)((W)0 - (W)x);
      case LM_NOT:
        return (C)~x;
      case LM_SQUARE:
        return (C)((W)x * (W)x);
      case LM_ABS:
        return K == K_SINT && x < 0 ? (C)((W)0 - (W)x) : x;
      case LM_SIGN:
        return K == K_SINT ? (C)((x > 0) - (x < 0)) : (C)(x > 0);
      case LM_RELU:
        return K == K_SINT && x < 0 ? (C)0 : x;
      default: /* floor, ceil */
        return x;
    }
  } else if constexpr (K == K_FLOAT) { /* f16 and bf16 compute in float */
    switch (op) {
      case LM_NEG:
        return -x;
      case LM_ABS:
        return fabs(x);
      case LM_SIGN:
        return x > 0 ? (C)1 : x < 0 ? (C)-1 : x;
      case LM_EXP:
        return exp(x);
      case LM_LOG:
        return log(x);
      case LM_SQRT:
        return sqrt(x);
      case LM_RSQRT:
        return (C)1 / sqrt(x);
      case LM_SIN:
        return sin(x);
      case LM_COS:
        return cos(x);
      case LM_TANH:
        return tanh(x);
      case LM_SIGMOID:
        return (C)1 / ((C)1 + exp(-x));
      case LM_RELU:
        return x < 0 ? (C)0 : x;
      case LM_FLOOR:
        return floor(x);
      case LM_CEIL:
        return ceil(x);
      default: /* square */
        return x * x;
    }
  } else if constexpr (K == K_CPX) {
    if (op == LM_NEG) {
      x.x = -x.x;
      x.y = -x.y;
      return x;
    }
    return cmul(x, x);
  } else { /* bool: not */
    return (C)!x;
  }
}

template <int DT>
__global__ void unary_k(typename T<DT>::S *o, const typename T<DT>::S *a, lm_ew m, int op) {
  GRID_LOOP(i, m.total) {
    int64_t off[1];
    ew_offsets<1>(m, i, off);
    o[m.out_off + i] = T<DT>::st(unary_op<DT>(op, T<DT>::ld(a[off[0]])));
  }
}

template <int DT>
__device__ inline typename T<DT>::C binary_op(int op, typename T<DT>::C x, typename T<DT>::C y) {
  typedef typename T<DT>::C C;
  constexpr int K = T<DT>::kind;
  if constexpr (K == K_SINT || K == K_UINT) {
    typedef typename T<DT>::W W;
    switch (op) {
      case LM_ADD:
        return (C)((W)x + (W)y);
      case LM_SUB:
        return (C)((W)x - (W)y);
      case LM_MUL:
        return (C)((W)x * (W)y);
      case LM_DIV:
        if (y == 0) return 0;
        if (K == K_SINT && y == (C)-1) return (C)((W)0 - (W)x);
        return (C)(x / y);
      case LM_POW:
        return (C)ipow((int64_t)x, (int64_t)y);
      case LM_MAXIMUM:
        return x >= y ? x : y;
      default: /* minimum */
        return x <= y ? x : y;
    }
  } else if constexpr (K == K_FLOAT) {
    switch (op) {
      case LM_ADD:
        return x + y;
      case LM_SUB:
        return x - y;
      case LM_MUL:
        return x * y;
      case LM_DIV:
        return x / y;
      case LM_POW:
        return pow(x, y);
      case LM_MAXIMUM:
        return x != x ? x : x >= y ? x : y;
      default: /* minimum */
        return x != x ? x : x <= y ? x : y;
    }
  } else { /* complex */
    switch (op) {
      case LM_ADD:
        return cadd(x, y);
      case LM_SUB:
        return csub(x, y);
      case LM_MUL:
        return cmul(x, y);
      default: /* div */
        return cdiv<C, typename T<DT>::R>(x, y);
    }
  }
}

template <int DT>
__global__ void binary_k(typename T<DT>::S *o, const typename T<DT>::S *a, const typename T<DT>::S *b,
                         lm_ew m, int op) {
  GRID_LOOP(i, m.total) {
    int64_t off[2];
    ew_offsets<2>(m, i, off);
    o[m.out_off + i] = T<DT>::st(binary_op<DT>(op, T<DT>::ld(a[off[0]]), T<DT>::ld(b[off[1]])));
  }
}

template <int DT>
__device__ inline bool compare_op(int op, typename T<DT>::C x, typename T<DT>::C y) {
  if constexpr (T<DT>::kind == K_CPX) {
    bool eq = x.x == y.x && x.y == y.y;
    return op == LM_EQ ? eq : !eq;
  } else {
    switch (op) {
      case LM_EQ:
        return x == y;
      case LM_NE:
        return x != y;
      case LM_LT:
        return x < y;
      case LM_LE:
        return x <= y;
      case LM_GT:
        return x > y;
      case LM_GE:
        return x >= y;
      case LM_AND:
        return x && y;
      default: /* or */
        return x || y;
    }
  }
}

template <int DT>
__global__ void compare_k(uint8_t *o, const typename T<DT>::S *a, const typename T<DT>::S *b, lm_ew m,
                          int op) {
  GRID_LOOP(i, m.total) {
    int64_t off[2];
    ew_offsets<2>(m, i, off);
    o[m.out_off + i] = compare_op<DT>(op, T<DT>::ld(a[off[0]]), T<DT>::ld(b[off[1]])) ? 1 : 0;
  }
}

/* Element types by size, for select (a copy that does not look at the bits). */
struct b16 {
  uint64_t x, y;
};
template <int N>
struct bytes_t;
template <>
struct bytes_t<1> {
  typedef uint8_t t;
};
template <>
struct bytes_t<2> {
  typedef uint16_t t;
};
template <>
struct bytes_t<4> {
  typedef uint32_t t;
};
template <>
struct bytes_t<8> {
  typedef uint64_t t;
};
template <>
struct bytes_t<16> {
  typedef b16 t;
};

template <class E>
__global__ void select_k(E *o, const uint8_t *c, const E *a, const E *b, lm_ew m) {
  GRID_LOOP(i, m.total) {
    int64_t off[3];
    ew_offsets<3>(m, i, off);
    o[m.out_off + i] = c[off[0]] ? a[off[1]] : b[off[2]];
  }
}

}  // namespace lc

using namespace lc;

/* ---- launchers ------------------------------------------------------------------------------ */

#define LAUNCH_UNARY(DTV) \
  unary_k<DTV><<<blocks_for(m->total), kThreads, 0, stream>>>((T<DTV>::S *)out, (const T<DTV>::S *)a, *m, op)
#define CASE_UNARY(DTV) LC_CASE(LAUNCH_UNARY, DTV)

extern "C" cudaError_t loom__cu_unary(cudaStream_t stream, int dt, void *out, const void *a, const lm_ew *m,
                                      int op) {
  switch (dt) {
    CASE_UNARY(DT_BOOL)
    CASE_UNARY(DT_I8)
    CASE_UNARY(DT_U8)
    CASE_UNARY(DT_I16)
    CASE_UNARY(DT_I32)
    CASE_UNARY(DT_I64)
    CASE_UNARY(DT_F16)
    CASE_UNARY(DT_BF16)
    CASE_UNARY(DT_F32)
    CASE_UNARY(DT_F64)
    CASE_UNARY(DT_C64)
    CASE_UNARY(DT_C128)
    default:
      return cudaErrorNotSupported;
  }
  return launched();
}

#define LAUNCH_BINARY(DTV)                                                                             \
  binary_k<DTV><<<blocks_for(m->total), kThreads, 0, stream>>>((T<DTV>::S *)out, (const T<DTV>::S *)a, \
                                                               (const T<DTV>::S *)b, *m, op)
#define CASE_BINARY(DTV) LC_CASE(LAUNCH_BINARY, DTV)

extern "C" cudaError_t loom__cu_binary(cudaStream_t stream, int dt, void *out, const void *a, const void *b,
                                       const lm_ew *m, int op) {
  switch (dt) {
    CASE_BINARY(DT_I8)
    CASE_BINARY(DT_U8)
    CASE_BINARY(DT_I16)
    CASE_BINARY(DT_I32)
    CASE_BINARY(DT_I64)
    CASE_BINARY(DT_F16)
    CASE_BINARY(DT_BF16)
    CASE_BINARY(DT_F32)
    CASE_BINARY(DT_F64)
    CASE_BINARY(DT_C64)
    CASE_BINARY(DT_C128)
    default:
      return cudaErrorNotSupported;
  }
  return launched();
}

#define LAUNCH_COMPARE(DTV)                                                                           \
  compare_k<DTV><<<blocks_for(m->total), kThreads, 0, stream>>>((uint8_t *)out, (const T<DTV>::S *)a, \
                                                                (const T<DTV>::S *)b, *m, op)
#define CASE_COMPARE(DTV) LC_CASE(LAUNCH_COMPARE, DTV)

extern "C" cudaError_t loom__cu_compare(cudaStream_t stream, int dt, void *out, const void *a, const void *b,
                                        const lm_ew *m, int op) {
  switch (dt) {
    CASE_COMPARE(DT_BOOL)
    CASE_COMPARE(DT_I8)
    CASE_COMPARE(DT_U8)
    CASE_COMPARE(DT_I16)
    CASE_COMPARE(DT_I32)
    CASE_COMPARE(DT_I64)
    CASE_COMPARE(DT_F16)
    CASE_COMPARE(DT_BF16)
    CASE_COMPARE(DT_F32)
    CASE_COMPARE(DT_F64)
    CASE_COMPARE(DT_C64)
    CASE_COMPARE(DT_C128)
    default:
      return cudaErrorNotSupported;
  }
  return launched();
}

#define LAUNCH_SELECT(N)                                                  \
  select_k<bytes_t<N>::t><<<blocks_for(m->total), kThreads, 0, stream>>>( \
      (bytes_t<N>::t *)out, (const uint8_t *)cond, (const bytes_t<N>::t *)a, (const bytes_t<N>::t *)b, *m)

extern "C" cudaError_t loom__cu_select(cudaStream_t stream, int64_t esize, void *out, const void *cond,
                                       const void *a, const void *b, const lm_ew *m) {
  switch (esize) {
    LC_CASE(LAUNCH_SELECT, 1)
    LC_CASE(LAUNCH_SELECT, 2)
    LC_CASE(LAUNCH_SELECT, 4)
    LC_CASE(LAUNCH_SELECT, 8)
    LC_CASE(LAUNCH_SELECT, 16)
    default:
      return cudaErrorNotSupported;
  }
  return launched();
}
