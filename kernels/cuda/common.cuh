/* What every kernel file of the cuda backend shares: dtype traits, the f16/bf16 conversions,
 * complex arithmetic, index helpers and the launch shape.
 *
 * Kernels are templates over the dtype (a loom_dtype value), instantiated only for the dtypes
 * an op takes; each family is one kernel per dtype that takes the op as a code (LM_* of
 * gpu_meta.h) and switches on it, as the opencl kernels do, which keeps the number of
 * instantiations, and so nvcc's time, small. The semantics are the cpu backend's
 * (src/backends/cpu/cpu_elementwise.c heads the list): f16 and bf16 are storage types, loaded
 * to float by bit manipulation and rounded back to nearest even, exactly as the cpu backend
 * does, so no result depends on the GPU's own half-precision units.
 */
#ifndef LOOM_CUDA_COMMON_CUH
#define LOOM_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "backends/cuda/cuda_kernels.h"

namespace lc {

enum { DT_BOOL, DT_I8, DT_U8, DT_I16, DT_I32, DT_I64, DT_F16, DT_BF16, DT_F32, DT_F64, DT_C64, DT_C128 };
enum { K_BOOL, K_SINT, K_UINT, K_FLOAT, K_CPX };

/* ---- launching ---------------------------------------------------------------------------- */

/* Threads per block of the flat kernels, and the most blocks of one launch: the kernels loop
 * over the rest (GRID_LOOP), so no index range ever overflows the grid. */
constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 16384;

inline unsigned blocks_for(int64_t items) {
  int64_t b = (items + kThreads - 1) / kThreads;
  return (unsigned)(b < 1 ? 1 : b > kMaxBlocks ? kMaxBlocks : b);
}

#define GRID_LOOP(i, total)                                                     \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (total); \
       i += (int64_t)gridDim.x * blockDim.x)

/* Every launcher's end: a launch error, or none. */
inline cudaError_t launched() {
  return cudaGetLastError();
}

/* ---- f16 and bf16 (the cpu backend's conversions, bit for bit) ------------------------------ */

__device__ inline float h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t e = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (e == 0) {
    float f = (float)man * 5.9604644775390625e-8f; /* 2^-24: exact for a subnormal */
    return sign ? -f : f;
  }
  if (e == 31) return __uint_as_float(sign | 0x7f800000u | (man << 13));
  return __uint_as_float(sign | ((e + 112) << 23) | (man << 13));
}

__device__ inline uint16_t f2h(float f) {
  uint32_t x = __float_as_uint(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0);
  if (ax >= 0x477ff000u) return sign | 0x7c00;
  if (ax < 0x38800000u) return sign | (uint16_t)rintf(__uint_as_float(ax) * 16777216.0f);
  uint32_t mant = ax & 0x7fffff;
  uint32_t h = (((ax >> 23) - 112) << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return sign | (uint16_t)h;
}

__device__ inline float bf2f(uint16_t h) {
  return __uint_as_float((uint32_t)h << 16);
}

__device__ inline uint16_t f2bf(float f) {
  uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

/* Rounding to float by round-to-odd, so a second rounding to f16/bf16 is correct (as the cpu
 * backend's conversions do). */
__device__ inline float l2f_odd(int64_t v) {
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  if (u < (1ull << 24)) return (float)v;
  int shift = 64 - __clzll((long long)u) - 24;
  uint64_t t = u >> shift;
  if (u & ((1ull << shift) - 1)) t |= 1;
  float f = ldexpf((float)t, shift);
  return v < 0 ? -f : f;
}

__device__ inline float d2f_odd(double d) {
  float f = (float)d;
  if (isfinite(f) && (double)f != d) {
    uint32_t bits = __float_as_uint(f);
    if (fabs((double)f) > fabs(d)) bits--;
    bits |= 1;
    f = __uint_as_float(bits);
  }
  return f;
}

/* ---- complex ------------------------------------------------------------------------------ */

template <class V>
__device__ inline V cmul(V a, V b) {
  V r;
  r.x = a.x * b.x - a.y * b.y;
  r.y = a.x * b.y + a.y * b.x;
  return r;
}
template <class V>
__device__ inline V cadd(V a, V b) {
  V r;
  r.x = a.x + b.x;
  r.y = a.y + b.y;
  return r;
}
template <class V>
__device__ inline V csub(V a, V b) {
  V r;
  r.x = a.x - b.x;
  r.y = a.y - b.y;
  return r;
}
/* Division scaled by a power of two, as the cpu backend's (no overflow for large divisors). */
template <class V, class R>
__device__ inline V cdiv(V a, V b) {
  R s = fmax(fabs(b.x), fabs(b.y));
  int e = 0;
  if (isfinite(s) && s != (R)0) e = ilogb(s);
  R c = ldexp(b.x, -e), d = ldexp(b.y, -e);
  R den = c * c + d * d;
  V r;
  r.x = ldexp((a.x * c + a.y * d) / den, -e);
  r.y = ldexp((a.y * c - a.x * d) / den, -e);
  return r;
}
template <class V, class R>
__device__ inline V cmake(R x, R y) {
  V r;
  r.x = x;
  r.y = y;
  return r;
}

/* ---- dtype traits -------------------------------------------------------------------------
 * S storage, C compute, W the unsigned wrapping type of an integer, SUMT the accumulator of
 * sums and products, DOTT the accumulator of dot and conv; ld/st convert storage <-> compute. */
template <int DT>
struct T;

#define LC_INT_TRAITS(DTV, KIND, ST, WT, DOT, LO, HI) \
  template <>                                         \
  struct T<DTV> {                                     \
    typedef ST S;                                     \
    typedef ST C;                                     \
    typedef WT W;                                     \
    typedef uint64_t SUMT;                            \
    typedef DOT DOTT;                                 \
    static constexpr int kind = KIND;                 \
    __device__ static C ld(S x) {                     \
      return x;                                       \
    }                                                 \
    __device__ static S st(C x) {                     \
      return x;                                       \
    }                                                 \
    __device__ static C lowest() {                    \
      return LO;                                      \
    }                                                 \
    __device__ static C highest() {                   \
      return HI;                                      \
    }                                                 \
  };
LC_INT_TRAITS(DT_I8, K_SINT, int8_t, uint32_t, uint32_t, INT8_MIN, INT8_MAX)
LC_INT_TRAITS(DT_U8, K_UINT, uint8_t, uint32_t, uint32_t, 0, UINT8_MAX)
LC_INT_TRAITS(DT_I16, K_SINT, int16_t, uint32_t, uint32_t, INT16_MIN, INT16_MAX)
LC_INT_TRAITS(DT_I32, K_SINT, int32_t, uint32_t, uint32_t, INT32_MIN, INT32_MAX)
LC_INT_TRAITS(DT_I64, K_SINT, int64_t, uint64_t, uint64_t, INT64_MIN, INT64_MAX)
#undef LC_INT_TRAITS

template <>
struct T<DT_BOOL> {
  typedef uint8_t S;
  typedef uint8_t C;
  typedef uint32_t DOTT;
  static constexpr int kind = K_BOOL;
  __device__ static C ld(S x) {
    return x != 0;
  }
  __device__ static S st(C x) {
    return x != 0;
  }
};

#define LC_FLOAT_TRAITS(DTV, ST, CT, SUM, LD, STORE) \
  template <>                                        \
  struct T<DTV> {                                    \
    typedef ST S;                                    \
    typedef CT C;                                    \
    typedef SUM SUMT;                                \
    typedef CT DOTT;                                 \
    static constexpr int kind = K_FLOAT;             \
    __device__ static C ld(S x) {                    \
      return LD;                                     \
    }                                                \
    __device__ static S st(C x) {                    \
      return STORE;                                  \
    }                                                \
    __device__ static C lowest() {                   \
      return -INFINITY;                              \
    }                                                \
    __device__ static C highest() {                  \
      return INFINITY;                               \
    }                                                \
  };
LC_FLOAT_TRAITS(DT_F16, uint16_t, float, double, h2f(x), f2h(x))
LC_FLOAT_TRAITS(DT_BF16, uint16_t, float, double, bf2f(x), f2bf(x))
LC_FLOAT_TRAITS(DT_F32, float, float, double, x, x)
LC_FLOAT_TRAITS(DT_F64, double, double, double, x, x)
#undef LC_FLOAT_TRAITS

template <>
struct T<DT_C64> {
  typedef float2 S;
  typedef float2 C;
  typedef float R;
  typedef double2 SUMT;
  typedef float2 DOTT;
  static constexpr int kind = K_CPX;
  __device__ static C ld(S x) {
    return x;
  }
  __device__ static S st(C x) {
    return x;
  }
};
template <>
struct T<DT_C128> {
  typedef double2 S;
  typedef double2 C;
  typedef double R;
  typedef double2 SUMT;
  typedef double2 DOTT;
  static constexpr int kind = K_CPX;
  __device__ static C ld(S x) {
    return x;
  }
  __device__ static S st(C x) {
    return x;
  }
};

template <class X>
__device__ inline bool is_nan(X x) {
  return x != x;
}

/* ---- index helpers ----------------------------------------------------------------------- */

/* The element offset of flat position p over rank dims with strides st. */
__device__ inline int64_t nest_offset(int64_t p, int64_t rank, const int64_t *dims, const int64_t *st) {
  int64_t off = 0;
  for (int64_t d = rank - 1; d >= 0; d--) {
    int64_t q = p % dims[d];
    p /= dims[d];
    off += q * st[d];
  }
  return off;
}

/* Each input's offset at flat output position p of an elementwise nest. */
template <int N>
__device__ inline void ew_offsets(const lm_ew &m, int64_t p, int64_t *off) {
  for (int j = 0; j < N; j++) off[j] = m.off[j];
  if (m.rank == 1) { /* the common dense (or one-stride) case: no division */
    for (int j = 0; j < N; j++) off[j] += p * m.st[j][0];
    return;
  }
  for (int64_t d = m.rank - 1; d >= 0; d--) {
    int64_t q = p % m.dims[d];
    p /= m.dims[d];
    for (int j = 0; j < N; j++) off[j] += q * m.st[j][d];
  }
}

/* Expands F(DTV) for every dtype in a switch over `dt`; a dtype without a case returns
 * cudaErrorNotSupported. */
#define LC_CASE(F, DTV) \
  case DTV:             \
    F(DTV);             \
    break;

}  // namespace lc

#endif
