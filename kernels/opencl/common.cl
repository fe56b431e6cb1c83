/* What every program of the opencl backend starts with (after gpu_meta.h): the dtype
 * traits, f16/bf16 conversions and complex arithmetic.
 *
 * Programs are compiled per device and per dtype: -DLOOM_DT=<loom_dtype value> picks the
 * dtype whose kernels a program holds (the names S, C, LD, ST below), -DLOOM_FP64=1 when the
 * device has cl_khr_fp64. The dtype-free program (layout.cl) is built with LOOM_DT=-1.
 *
 * OpenCL C 1.2 only: no generic address space, no fp16 arithmetic. f16 and bf16 are storage
 * types (IR.md): loaded to float by bit manipulation and rounded back to nearest even, exactly
 * as the cpu backend does, so no device needs cl_khr_fp16.
 */
#if LOOM_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#define DT_BOOL 0
#define DT_I8 1
#define DT_U8 2
#define DT_I16 3
#define DT_I32 4
#define DT_I64 5
#define DT_F16 6
#define DT_BF16 7
#define DT_F32 8
#define DT_F64 9
#define DT_C64 10
#define DT_C128 11

/* ---- f16 and bf16 ------------------------------------------------------------------------ */

inline float h2f(ushort h) {
  uint sign = (uint)(h & 0x8000) << 16;
  uint e = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (e == 0) {
    float f = (float)man * 5.9604644775390625e-8f; /* 2^-24: exact for a subnormal */
    return sign ? -f : f;
  }
  if (e == 31) return as_float(sign | 0x7f800000u | (man << 13));
  return as_float(sign | ((e + 112) << 23) | (man << 13));
}

inline ushort f2h(float f) {
  uint x = as_uint(f);
  ushort sign = (ushort)((x >> 16) & 0x8000);
  uint ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0);
  if (ax >= 0x477ff000u) return sign | 0x7c00;
  if (ax < 0x38800000u) return sign | (ushort)rint(as_float(ax) * 16777216.0f);
  uint mant = ax & 0x7fffff;
  uint h = (((ax >> 23) - 112) << 10) | (mant >> 13);
  uint rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return sign | (ushort)h;
}

inline float bf2f(ushort h) { return as_float((uint)h << 16); }

inline ushort f2bf(float f) {
  uint x = as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (ushort)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (ushort)(x >> 16);
}

/* Rounding to float by round-to-odd, so a second rounding to f16/bf16 is correct (the cpu
 * backend's conversions do the same). */
inline float l2f_odd(long v) {
  ulong u = v < 0 ? (ulong)0 - (ulong)v : (ulong)v;
  if (u < (1ul << 24)) return (float)v;
  int shift = 64 - (int)clz(u) - 24;
  ulong t = u >> shift;
  if (u & ((1ul << shift) - 1)) t |= 1;
  float f = ldexp((float)t, shift);
  return v < 0 ? -f : f;
}
#if LOOM_FP64
inline float d2f_odd(double d) {
  float f = (float)d;
  if (isfinite(f) && (double)f != d) {
    uint bits = as_uint(f);
    if (fabs((double)f) > fabs(d)) bits--;
    bits |= 1;
    f = as_float(bits);
  }
  return f;
}
#endif

/* ---- complex --------------------------------------------------------------------------- */

#define CMUL(T, a, b) ((T)((a).x * (b).x - (a).y * (b).y, (a).x * (b).y + (a).y * (b).x))
inline float2 cdivf(float2 a, float2 b) {
  float s = fmax(fabs(b.x), fabs(b.y));
  int e = 0;
  if (isfinite(s) && s != 0.0f) e = ilogb(s);
  float c = ldexp(b.x, -e), d = ldexp(b.y, -e);
  float den = c * c + d * d;
  return (float2)(ldexp((a.x * c + a.y * d) / den, -e), ldexp((a.y * c - a.x * d) / den, -e));
}
#if LOOM_FP64
inline double2 cdivd(double2 a, double2 b) {
  double s = fmax(fabs(b.x), fabs(b.y));
  int e = 0;
  if (isfinite(s) && s != 0.0) e = ilogb(s);
  double c = ldexp(b.x, -e), d = ldexp(b.y, -e);
  double den = c * c + d * d;
  return (double2)(ldexp((a.x * c + a.y * d) / den, -e), ldexp((a.y * c - a.x * d) / den, -e));
}
#endif

/* ---- the program's dtype ---------------------------------------------------------------
 * S storage type, C compute type, LD(x) storage -> compute, ST(x) compute -> storage,
 * U the unsigned type of an integer's width (wrapping arithmetic), SUMT the accumulator of
 * sums and products, DOTT the accumulator of dot and conv. IS_* classify it. */
#if LOOM_FP64
#define FACC double
#define CACC64 double2
#else
#define FACC float
#define CACC64 float2
#endif

#if LOOM_DT == DT_BOOL
#define S uchar
#define C uchar
#define U uchar
#define LD(x) ((uchar)((x) != 0))
#define ST(x) ((uchar)((x) != 0))
#define IS_BOOL 1
#define DOTT uint
#elif LOOM_DT == DT_I8
#define S char
#define C char
#define U uchar
#define IS_SINT 1
#define LOWEST CHAR_MIN
#define HIGHEST CHAR_MAX
#define DOTT uint
#elif LOOM_DT == DT_U8
#define S uchar
#define C uchar
#define U uchar
#define IS_UINT 1
#define LOWEST 0
#define HIGHEST UCHAR_MAX
#define DOTT uint
#elif LOOM_DT == DT_I16
#define S short
#define C short
#define U ushort
#define IS_SINT 1
#define LOWEST SHRT_MIN
#define HIGHEST SHRT_MAX
#define DOTT uint
#elif LOOM_DT == DT_I32
#define S int
#define C int
#define U uint
#define IS_SINT 1
#define LOWEST INT_MIN
#define HIGHEST INT_MAX
#define DOTT uint
#elif LOOM_DT == DT_I64
#define S long
#define C long
#define U ulong
#define IS_SINT 1
#define LOWEST LONG_MIN
#define HIGHEST LONG_MAX
#define DOTT ulong
#elif LOOM_DT == DT_F16
#define S ushort
#define C float
#define LD(x) h2f(x)
#define ST(x) f2h(x)
#define IS_FLOAT 1
#define IS_HALF 1
#define SUMT FACC
#define DOTT float
#elif LOOM_DT == DT_BF16
#define S ushort
#define C float
#define LD(x) bf2f(x)
#define ST(x) f2bf(x)
#define IS_FLOAT 1
#define IS_HALF 1
#define SUMT FACC
#define DOTT float
#elif LOOM_DT == DT_F32
#define S float
#define C float
#define IS_FLOAT 1
#define SUMT FACC
#define DOTT float
#elif LOOM_DT == DT_F64
#define S double
#define C double
#define IS_FLOAT 1
#define SUMT double
#define DOTT double
#elif LOOM_DT == DT_C64
#define S float2
#define C float2
#define R float
#define IS_COMPLEX 1
#define SUMT CACC64
#define DOTT float2
#define CDIV cdivf
#elif LOOM_DT == DT_C128
#define S double2
#define C double2
#define R double
#define IS_COMPLEX 1
#define SUMT double2
#define DOTT double2
#define CDIV cdivd
#endif

#if defined(IS_SINT) || defined(IS_UINT)
#define IS_INT 1
#define SUMT ulong
#endif
#ifndef LD
#define LD(x) (x)
#define ST(x) (x)
#endif
#if defined(IS_FLOAT)
#define LOWEST (-INFINITY)
#define HIGHEST INFINITY
#define ISNAN(x) isnan(x)
#else
#define ISNAN(x) 0
#endif

/* ---- index helpers ---------------------------------------------------------------------- */

/* The element offset of flat position p over rank dims with strides st. */
inline long nest_offset(long p, long rank, const long *dims, const long *st) {
  long off = 0;
  for (long d = rank - 1; d >= 0; d--) {
    long q = p % dims[d];
    p /= dims[d];
    off += q * st[d];
  }
  return off;
}

#define GRID_LOOP(i, total) for (long i = get_global_id(0); i < (total); i += get_global_size(0))

/* A cursor over an elementwise nest: the multi-index and each input's offset. A work-item
 * decomposes the first position of its span only (64-bit divisions are what a strided kernel
 * pays for) and then walks the span a row (run of the innermost dimension) at a time, with
 * every input at a constant stride inside the row. */
typedef struct ew_cursor {
  long idx[LM_RANK];
  long off[3];
} ew_cursor;

inline void ew_cursor_init(ew_cursor *c, long p, const lm_ew *m, int n) {
  for (int j = 0; j < n; j++) c->off[j] = m->off[j];
  for (long d = m->rank - 1; d >= 0; d--) {
    long q = p % m->dims[d];
    p /= m->dims[d];
    c->idx[d] = q;
    for (int j = 0; j < n; j++) c->off[j] += q * m->st[j][d];
  }
}

/* Moves on by len elements, which never pass the end of the current row. */
inline void ew_cursor_advance(ew_cursor *c, const lm_ew *m, int n, long len) {
  long d = m->rank - 1;
  c->idx[d] += len;
  for (int j = 0; j < n; j++) c->off[j] += len * m->st[j][d];
  while (c->idx[d] >= m->dims[d] && d > 0) {
    for (int j = 0; j < n; j++) c->off[j] += m->st[j][d - 1] - m->st[j][d] * m->dims[d];
    c->idx[d] = 0;
    c->idx[--d]++;
  }
}

/* EW_ROWS(m, n, c, i, len) { body }: for each row segment of this work-item's spans, with i its
 * first flat position, len its length and c.off[j] input j's offset at its start. */
#define EW_ROWS(m, n, c, i, len)                                                                 \
  for (long s_ = get_global_id(0); s_ * (m).span < (m).total; s_ += get_global_size(0))         \
    for (long i = s_ * (m).span, e_ = min(i + (m).span, (m).total), len = (ew_cursor_init(&c, i, &(m), n), 0); \
         i < e_ && (len = min(e_ - i, (m).dims[(m).rank - 1] - c.idx[(m).rank - 1]), 1);           \
         i += len, ew_cursor_advance(&c, &(m), n, len))
