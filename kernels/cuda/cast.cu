/* cast from a dtype to every dtype (one kernel per source dtype, the target switched per
 * element), and iota. As the cpu backend: the source goes through the widest type of its kind
 * (int64 for bool and integers, float for f16/bf16/f32, double for f64, float2/double2 for
 * complex); integers wrap; floats to integers truncate, saturate, and give 0 for NaN; anything
 * to bool is x != 0 (NaN is true); complex to real keeps the real part; conversions to
 * f16/bf16 round once (wide sources round to odd first).
 */
#include "common.cuh"

namespace lc {

/* The widest type of a source's kind, and its real part. */
template <int DT, int K = T<DT>::kind>
struct wide {
  typedef int64_t t; /* bool and integers */
};
template <int DT>
struct wide<DT, K_FLOAT> {
  typedef typename T<DT>::C t; /* float (f16, bf16, f32) or double */
};
template <int DT>
struct wide<DT, K_CPX> {
  typedef typename T<DT>::C t;
};

__device__ inline double real_of(int64_t v) {
  return (double)v;
}
__device__ inline double real_of(float v) {
  return v;
}
__device__ inline double real_of(double v) {
  return v;
}
__device__ inline double real_of(float2 v) {
  return v.x;
}
__device__ inline double real_of(double2 v) {
  return v.x;
}
__device__ inline double imag_of(int64_t) {
  return 0;
}
__device__ inline double imag_of(float) {
  return 0;
}
__device__ inline double imag_of(double) {
  return 0;
}
__device__ inline double imag_of(float2 v) {
  return v.y;
}
__device__ inline double imag_of(double2 v) {
  return v.y;
}

/* Truncates toward zero and saturates to [lo, hi]; NaN gives 0. (double)hi may round up
 * (2^63 for i64), hence >= and hi itself returned. */
__device__ inline int64_t sat(double v, int64_t lo, int64_t hi) {
  if (v != v) return 0;
  if (v <= (double)lo) return lo;
  if (v >= (double)hi) return hi;
  return (int64_t)v;
}

template <class V>
__device__ inline int64_t to_int(V v, int64_t lo, int64_t hi) {
  return sat(real_of(v), lo, hi);
}
__device__ inline int64_t to_int(int64_t v, int64_t, int64_t) {
  return v;
} /* wraps on store */

/* To float, rounded so a second rounding to f16/bf16 is right. */
__device__ inline float to_f32_odd(int64_t v) {
  return l2f_odd(v);
}
__device__ inline float to_f32_odd(float v) {
  return v;
}
__device__ inline float to_f32_odd(double v) {
  return d2f_odd(v);
}
__device__ inline float to_f32_odd(float2 v) {
  return v.x;
}
__device__ inline float to_f32_odd(double2 v) {
  return d2f_odd(v.x);
}

__device__ inline bool nonzero(int64_t v) {
  return v != 0;
}
__device__ inline bool nonzero(float v) {
  return v != 0;
}
__device__ inline bool nonzero(double v) {
  return v != 0;
}
__device__ inline bool nonzero(float2 v) {
  return v.x != 0 || v.y != 0;
}
__device__ inline bool nonzero(double2 v) {
  return v.x != 0 || v.y != 0;
}

/* float from an integer as C converts (round to nearest); from a complex, its real part. */
__device__ inline float to_f32(int64_t v) {
  return (float)v;
}
__device__ inline float to_f32(float v) {
  return v;
}
__device__ inline float to_f32(double v) {
  return (float)v;
}
__device__ inline float to_f32(float2 v) {
  return v.x;
}
__device__ inline float to_f32(double2 v) {
  return (float)v.x;
}
__device__ inline double to_f64(int64_t v) {
  return (double)v;
}
__device__ inline double to_f64(float v) {
  return v;
}
__device__ inline double to_f64(double v) {
  return v;
}
__device__ inline double to_f64(float2 v) {
  return v.x;
}
__device__ inline double to_f64(double2 v) {
  return v.x;
}

template <int DT>
__global__ void cast_k(void *o, const typename T<DT>::S *a, lm_ew m, int to) {
  typedef typename wide<DT>::t KT;
  GRID_LOOP(i, m.total) {
    int64_t off[1];
    ew_offsets<1>(m, i, off);
    KT v = (KT)T<DT>::ld(a[off[0]]);
    int64_t at = m.out_off + i;
    switch (to) {
      case DT_BOOL:
        ((uint8_t *)o)[at] = nonzero(v) ? 1 : 0;
        break;
      case DT_I8:
        ((int8_t *)o)[at] = (int8_t)to_int(v, INT8_MIN, INT8_MAX);
        break;
      case DT_U8:
        ((uint8_t *)o)[at] = (uint8_t)to_int(v, 0, UINT8_MAX);
        break;
      case DT_I16:
        ((int16_t *)o)[at] = (int16_t)to_int(v, INT16_MIN, INT16_MAX);
        break;
      case DT_I32:
        ((int32_t *)o)[at] = (int32_t)to_int(v, INT32_MIN, INT32_MAX);
        break;
      case DT_I64:
        ((int64_t *)o)[at] = to_int(v, INT64_MIN, INT64_MAX);
        break;
      case DT_F16:
        ((uint16_t *)o)[at] = f2h(to_f32_odd(v));
        break;
      case DT_BF16:
        ((uint16_t *)o)[at] = f2bf(to_f32_odd(v));
        break;
      case DT_F32:
        ((float *)o)[at] = to_f32(v);
        break;
      case DT_F64:
        ((double *)o)[at] = to_f64(v);
        break;
      case DT_C64:
        ((float2 *)o)[at] = make_float2((float)real_of(v), (float)imag_of(v));
        break;
      default: /* c128 */
        ((double2 *)o)[at] = make_double2(real_of(v), imag_of(v));
        break;
    }
  }
}

/* iota: element i holds (i / inner) % dim, converted as an integer is. */
template <int DT>
__device__ inline typename T<DT>::S iota_value(int64_t v) {
  constexpr int K = T<DT>::kind;
  if constexpr (K == K_BOOL) {
    return v != 0;
  } else if constexpr (DT == DT_F16) {
    return f2h(l2f_odd(v));
  } else if constexpr (DT == DT_BF16) {
    return f2bf(l2f_odd(v));
  } else if constexpr (K == K_CPX) {
    typename T<DT>::S r;
    r.x = (typename T<DT>::R)v;
    r.y = 0;
    return r;
  } else {
    return (typename T<DT>::S)v;
  }
}

template <int DT>
__global__ void iota_k(typename T<DT>::S *o, int64_t off, int64_t total, int64_t dim, int64_t inner) {
  GRID_LOOP(i, total) o[off + i] = iota_value<DT>((i / inner) % dim);
}

}  // namespace lc

using namespace lc;

#define LAUNCH_CAST(DTV) \
  cast_k<DTV><<<blocks_for(m->total), kThreads, 0, stream>>>(out, (const T<DTV>::S *)a, *m, to)
#define CASE_CAST(DTV) LC_CASE(LAUNCH_CAST, DTV)

extern "C" cudaError_t loom__cu_cast(cudaStream_t stream, int from, void *out, const void *a, const lm_ew *m,
                                     int to) {
  switch (from) {
    CASE_CAST(DT_BOOL)
    CASE_CAST(DT_I8)
    CASE_CAST(DT_U8)
    CASE_CAST(DT_I16)
    CASE_CAST(DT_I32)
    CASE_CAST(DT_I64)
    CASE_CAST(DT_F16)
    CASE_CAST(DT_BF16)
    CASE_CAST(DT_F32)
    CASE_CAST(DT_F64)
    CASE_CAST(DT_C64)
    CASE_CAST(DT_C128)
    default:
      return cudaErrorNotSupported;
  }
  return launched();
}

#define LAUNCH_IOTA(DTV) \
  iota_k<DTV><<<blocks_for(total), kThreads, 0, stream>>>((T<DTV>::S *)out, off, total, dim, inner)
#define CASE_IOTA(DTV) LC_CASE(LAUNCH_IOTA, DTV)

extern "C" cudaError_t loom__cu_iota(cudaStream_t stream, int dt, void *out, int64_t off, int64_t total,
                                     int64_t dim, int64_t inner) {
  switch (dt) {
    CASE_IOTA(DT_BOOL)
    CASE_IOTA(DT_I8)
    CASE_IOTA(DT_U8)
    CASE_IOTA(DT_I16)
    CASE_IOTA(DT_I32)
    CASE_IOTA(DT_I64)
    CASE_IOTA(DT_F16)
    CASE_IOTA(DT_BF16)
    CASE_IOTA(DT_F32)
    CASE_IOTA(DT_F64)
    CASE_IOTA(DT_C64)
    CASE_IOTA(DT_C128)
    default:
      return cudaErrorNotSupported;
  }
  return launched();
}
