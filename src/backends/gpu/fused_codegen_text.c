/* The fused-kernel generator's text: a growing buffer written with printf formats, and each dtype's spelling
 * in OpenCL C and CUDA C, its wrap-around and its literals (fused_codegen_gen.h). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "backends/gpu/fused_codegen_gen.h"

void loom__fzg_put(sbuf *b, const char *fmt, ...) LOOM_PRINTF(2, 3);
void loom__fzg_put(sbuf *b, const char *fmt, ...) {
  if (b->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->failed = true;
      return;
    }
    if (b->p && b->len + (size_t)n < b->cap) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap <= b->len + (size_t)n) cap *= 2;
    char *np = loom__realloc(b->p, cap);
    if (!np) {
      b->failed = true;
      return;
    }
    b->p = np;
    b->cap = cap;
  }
}

/* ---- dtypes ------------------------------------------------------------------------------- */

bool loom__fzg_dtype_ok(loom_dtype t, bool fp64) {
  switch (t) {
    case LOOM_BOOL:
    case LOOM_I8:
    case LOOM_U8:
    case LOOM_I16:
    case LOOM_I32:
    case LOOM_I64:
    case LOOM_F32:
      return true;
    case LOOM_F64:
      return fp64;
    default:
      return false;
  }
}

const char *loom__fzg_ctype(loom_dtype t) {
  switch (t) {
    case LOOM_BOOL:
      return "fz_b";
    case LOOM_I8:
      return "fz_i8";
    case LOOM_U8:
      return "fz_u8";
    case LOOM_I16:
      return "fz_i16";
    case LOOM_I32:
      return "fz_i32";
    case LOOM_I64:
      return "fz_i64";
    case LOOM_F32:
      return "float";
    default:
      return "double";
  }
}

bool loom__fzg_is_float(loom_dtype t) {
  return t == LOOM_F32 || t == LOOM_F64;
}
bool loom__fzg_is_sint(loom_dtype t) {
  return t == LOOM_I8 || t == LOOM_I16 || t == LOOM_I32 || t == LOOM_I64;
}
bool loom__fzg_is_int(loom_dtype t) {
  return loom__fzg_is_sint(t) || t == LOOM_U8;
}
/* The wrapping type of integer arithmetic (products of narrow integers wrap mod 2^32). */
const char *loom__fzg_wrap_type(loom_dtype t) {
  return t == LOOM_I64 ? "fz_u64" : "fz_u32";
}

/* The bounds of an integer type as literals. */
const char *loom__fzg_int_lo(loom_dtype t) {
  switch (t) {
    case LOOM_I8:
      return "(-128)";
    case LOOM_U8:
      return "0";
    case LOOM_I16:
      return "(-32768)";
    case LOOM_I32:
      return "(-2147483647 - 1)";
    default:
      return "(-9223372036854775807 - 1)";
  }
}
const char *loom__fzg_int_hi(loom_dtype t) {
  switch (t) {
    case LOOM_I8:
      return "127";
    case LOOM_U8:
      return "255";
    case LOOM_I16:
      return "32767";
    case LOOM_I32:
      return "2147483647";
    default:
      return "9223372036854775807";
  }
}

/* A math function of a float dtype: CUDA spells the float ones with an f. */
const char *loom__fzg_fn(loom__fz_target target, loom_dtype t, const char *name, char *buf, size_t size) {
  snprintf(buf, size, "%s%s", name, target == LOOM__FZ_CUDA && t == LOOM_F32 ? "f" : "");
  return buf;
}

/* A literal of dtype t: floats exact (hex), NaN and infinities by macro. */
void loom__fzg_literal(sbuf *b, loom_dtype t, double v, int64_t iv, bool is_int_value) {
  if (loom__fzg_is_float(t)) {
    const char *suffix = t == LOOM_F32 ? "F" : "D";
    if (isnan(v))
      loom__fzg_put(b, "FZ_NAN_%s", suffix);
    else if (isinf(v))
      loom__fzg_put(b, "(%sFZ_INF_%s)", v < 0 ? "-" : "", suffix);
    else if (t == LOOM_F32)
      loom__fzg_put(b, "((float)%af)", (double)(float)v);
    else
      loom__fzg_put(b, "((double)%a)", v);
    return;
  }
  int64_t x = is_int_value ? iv : (int64_t)v;
  if (t == LOOM_BOOL) {
    loom__fzg_put(b, "((fz_b)%d)", (is_int_value ? iv != 0 : v != 0) ? 1 : 0);
    return;
  }
  if (x == INT64_MIN)
    loom__fzg_put(b, "((%s)(-9223372036854775807 - 1))", loom__fzg_ctype(t));
  else
    loom__fzg_put(b, "((%s)%" PRId64 ")", loom__fzg_ctype(t), x);
}
