/* cast from the program's dtype to every dtype (the cast kernel), and iota of the program's
 * dtype. As the cpu backend: the source goes through the widest type of its kind (long for
 * bool and integers, float for f16/bf16/f32, double for f64, float2/double2 for complex);
 * integers wrap; floats to integers truncate, saturate, and give 0 for NaN; anything to bool
 * is x != 0 (NaN is true); complex to real keeps the real part; conversions to f16/bf16 round
 * once (wide sources round to odd first).
 */
#if defined(IS_BOOL) || defined(IS_INT)
#define KIND_I 1
#define KT long
#elif LOOM_DT == DT_F64
#define KIND_D 1
#define KT double
#elif defined(IS_FLOAT)
#define KIND_F 1
#define KT float
#elif LOOM_DT == DT_C64
#define KIND_CF 1
#define KT float2
#elif LOOM_DT == DT_C128
#define KIND_CD 1
#define KT double2
#endif

/* Truncates toward zero and saturates to [LO, HI]; NaN gives 0. The bounds are compared in
 * the source's real type, where HI may round up (2^63 for i64): hence >=, and HI returned. */
#if defined(KIND_D) || defined(KIND_CD)
#define KR double
#else
#define KR float
#endif
#define SAT(T, v, LO, HI) ((v) != (v) ? (T)0 : (v) <= (KR)(LO) ? (T)(LO) : (v) >= (KR)(HI) ? (T)(HI) : (T)(v))

/* REAL(v): the real value behind v (the real part of a complex). */
#if defined(KIND_CF) || defined(KIND_CD)
#define REAL(v) ((v).x)
#define NONZERO(v) ((v).x != 0 || (v).y != 0)
#else
#define REAL(v) (v)
#define NONZERO(v) ((v) != 0)
#endif

#if defined(KIND_I)
#define TO_INT(T, LO, HI, v) ((T)(v))
#define TO_F32_ODD(v) l2f_odd(v)
#else
#define TO_INT(T, LO, HI, v) SAT(T, REAL(v), LO, HI)
#if defined(KIND_D) || defined(KIND_CD)
#define TO_F32_ODD(v) d2f_odd(REAL(v))
#else
#define TO_F32_ODD(v) ((float)REAL(v))
#endif
#endif

inline uchar cv_to_b8(KT v) { return NONZERO(v) ? 1 : 0; }
inline char cv_to_i8(KT v) { return TO_INT(char, CHAR_MIN, CHAR_MAX, v); }
inline uchar cv_to_u8(KT v) { return TO_INT(uchar, 0, UCHAR_MAX, v); }
inline short cv_to_i16(KT v) { return TO_INT(short, SHRT_MIN, SHRT_MAX, v); }
inline int cv_to_i32(KT v) { return TO_INT(int, INT_MIN, INT_MAX, v); }
inline long cv_to_i64(KT v) { return TO_INT(long, LONG_MIN, LONG_MAX, v); }
inline ushort cv_to_f16(KT v) { return f2h(TO_F32_ODD(v)); }
inline ushort cv_to_bf16(KT v) { return f2bf(TO_F32_ODD(v)); }
inline float cv_to_f32(KT v) { return (float)REAL(v); }
#if defined(KIND_CF)
inline float2 cv_to_c64(KT v) { return v; }
#elif defined(KIND_CD)
inline float2 cv_to_c64(KT v) { return (float2)((float)v.x, (float)v.y); }
#else
inline float2 cv_to_c64(KT v) { return (float2)((float)v, 0.0f); }
#endif
#if LOOM_FP64
inline double cv_to_f64(KT v) { return (double)REAL(v); }
#if defined(KIND_CD)
inline double2 cv_to_c128(KT v) { return v; }
#elif defined(KIND_CF)
inline double2 cv_to_c128(KT v) { return (double2)((double)v.x, (double)v.y); }
#else
inline double2 cv_to_c128(KT v) { return (double2)((double)v, 0.0); }
#endif
#endif

/* One kernel per source dtype: `to` (a loom_dtype) picks the target's conversion once per
 * row. */
#define CAST_CASE(DT, TOK, TS)                                                    \
  case DT: {                                                                      \
    __global TS *out = (__global TS *)o + m.out_off + i;                          \
    for (long t = 0; t < len; t++) out[t] = cv_to_##TOK((KT)LD(ap[t * sa]));    \
    break;                                                                        \
  }

__kernel void cast(__global void *o, __global const S *a, lm_ew m, int to) {
  ew_cursor c;
  long sa = m.st[0][m.rank - 1];
  EW_ROWS(m, 1, c, i, len) {
    __global const S *ap = a + c.off[0];
    switch (to) {
      CAST_CASE(DT_BOOL, b8, uchar)
      CAST_CASE(DT_I8, i8, char)
      CAST_CASE(DT_U8, u8, uchar)
      CAST_CASE(DT_I16, i16, short)
      CAST_CASE(DT_I32, i32, int)
      CAST_CASE(DT_I64, i64, long)
      CAST_CASE(DT_F16, f16, ushort)
      CAST_CASE(DT_BF16, bf16, ushort)
      CAST_CASE(DT_F32, f32, float)
      CAST_CASE(DT_C64, c64, float2)
#if LOOM_FP64
      CAST_CASE(DT_F64, f64, double)
      CAST_CASE(DT_C128, c128, double2)
#endif
      default:
        break;
    }
  }
}

/* ---- iota: element i holds (i / inner) % dim, converted as an integer is ------------------- */
#if defined(IS_BOOL)
#define IOTA_CV(v) ((uchar)((v) != 0))
#elif defined(IS_INT)
#define IOTA_CV(v) ((S)(v))
#elif LOOM_DT == DT_F16
#define IOTA_CV(v) f2h(l2f_odd(v))
#elif LOOM_DT == DT_BF16
#define IOTA_CV(v) f2bf(l2f_odd(v))
#elif defined(IS_COMPLEX)
#define IOTA_CV(v) ((S)((R)(v), (R)0))
#else
#define IOTA_CV(v) ((S)(v))
#endif

__kernel void iota(__global S *o, long o_off, long total, long dim, long inner) {
  GRID_LOOP(i, total) o[o_off + i] = IOTA_CV((i / inner) % dim);
}
