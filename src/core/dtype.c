/* Element types, tensor types and host tensors. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "loom/tensor.h"

static const struct {
  const char *name;
  int64_t size;
} dtype_table[] = {
#define LOOM_X(e, name, bytes) {name, bytes},
    LOOM_DTYPE_MAP(LOOM_X)
#undef LOOM_X
};

static bool dtype_valid(loom_dtype d) {
  return (int)d >= 0 && d < LOOM_DTYPE_COUNT;
}

LOOM_HOT int64_t loom_dtype_size(loom_dtype d) {
  return dtype_valid(d) ? dtype_table[d].size : 0;
}

const char *loom_dtype_name(loom_dtype d) {
  return dtype_valid(d) ? dtype_table[d].name : "?";
}

bool loom_dtype_parse(const char *text, size_t len, loom_dtype *out) {
  for (int i = 0; i < LOOM_DTYPE_COUNT; i++) {
    if (strlen(dtype_table[i].name) == len && memcmp(dtype_table[i].name, text, len) == 0) {
      *out = (loom_dtype)i;
      return true;
    }
  }
  return false;
}

bool loom_dtype_is_float(loom_dtype d) {
  return d == LOOM_F16 || d == LOOM_BF16 || d == LOOM_F32 || d == LOOM_F64;
}
bool loom_dtype_is_complex(loom_dtype d) {
  return d == LOOM_C64 || d == LOOM_C128;
}
bool loom_dtype_is_integer(loom_dtype d) {
  return d == LOOM_I8 || d == LOOM_U8 || d == LOOM_I16 || d == LOOM_I32 || d == LOOM_I64;
}
bool loom_dtype_is_signed(loom_dtype d) {
  return d != LOOM_BOOL && d != LOOM_U8 && dtype_valid(d);
}
bool loom_dtype_is_quantized(loom_dtype d) {
  return d == LOOM_Q8 || d == LOOM_Q4;
}

int64_t loom__q4_row_nibbles(int64_t n) {
  return loom__sat_add_i64(n, n & 1); /* an odd INT64_MAX stays there rather than wrap */
}

loom_status loom_type_make(loom_dtype dtype, int32_t rank, const int64_t *dims, loom_type *out) {
  if (!out) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_type_make: out_type is NULL");
  memset(out, 0, sizeof *out);
  if (!dtype_valid(dtype))
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_type_make: unknown dtype %d", (int)dtype);
  if (rank < 0 || rank > LOOM_MAX_RANK)
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "rank %d is outside 0..%d", (int)rank, LOOM_MAX_RANK);
  out->dtype = dtype;
  out->rank = rank;
  for (int32_t i = 0; i < rank; i++) {
    if (dims[i] < 0)
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "dimension %d is negative (%lld)", (int)i,
                         (long long)dims[i]);
    out->dims[i] = dims[i];
  }
  int64_t bytes;
  return loom_type_bytes(out, &bytes);
}

LOOM_HOT loom_status loom_type_elements(const loom_type *t, int64_t *out) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->rank; i++) {
    if (!loom__mul_i64(n, t->dims[i], &n)) {
      char buf[LOOM_TYPE_STRING_MAX];
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "shape %s has more elements than fit in int64",
                         loom_type_format(t, buf, sizeof buf));
    }
  }
  *out = n;
  return LOOM_OK;
}

LOOM_HOT loom_status loom_type_bytes(const loom_type *t, int64_t *out) {
  int64_t n;
  loom_status s = loom_type_elements(t, &n);
  if (s) return s;
  if (t->dtype == LOOM_Q4) {
    /* rows of ceil(last / 2) bytes: element count with each row padded to even, halved */
    int64_t last = t->rank > 0 ? t->dims[t->rank - 1] : 1, rows = last > 0 ? n / last : 0;
    if (!loom__mul_i64(rows, loom__q4_row_nibbles(last) / 2, &n)) {
      char buf[LOOM_TYPE_STRING_MAX];
      return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s is larger than int64 bytes",
                         loom_type_format(t, buf, sizeof buf));
    }
    *out = n;
    return LOOM_OK;
  }
  if (!loom__mul_i64(n, loom_dtype_size(t->dtype), &n)) {
    char buf[LOOM_TYPE_STRING_MAX];
    return loom__error(LOOM_ERR_INVALID_ARGUMENT, "%s is larger than int64 bytes",
                       loom_type_format(t, buf, sizeof buf));
  }
  *out = n;
  return LOOM_OK;
}

LOOM_HOT bool loom_type_equal(const loom_type *a, const loom_type *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int32_t i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

char *loom_type_format(const loom_type *t, char *buf, size_t size) {
  size_t n = (size_t)snprintf(buf, size, "%s[", loom_dtype_name(t->dtype));
  for (int32_t i = 0; i < t->rank && n < size; i++)
    n += (size_t)snprintf(buf + n, size - n, i ? ",%lld" : "%lld", (long long)t->dims[i]);
  if (n < size) snprintf(buf + n, size - n, "]");
  return buf;
}

static loom_status tensor_alloc(loom_tensor *out, const loom_type *type, bool zero) {
  if (!out || !type) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_tensor_init: NULL argument");
  memset(out, 0, sizeof *out);
  int64_t bytes;
  loom_status s = loom_type_make(type->dtype, type->rank, type->dims, &out->type);
  if (s) return s;
  if ((s = loom_type_bytes(type, &bytes))) return s;
  void *data = loom__aligned_alloc((size_t)bytes);
  if (!data) {
    char buf[LOOM_TYPE_STRING_MAX];
    return loom__error(LOOM_ERR_OUT_OF_MEMORY, "out of memory: %lld bytes for a %s tensor", (long long)bytes,
                       loom_type_format(type, buf, sizeof buf));
  }
  if (zero) memset(data, 0, (size_t)bytes);
  out->data = data;
  return LOOM_OK;
}

loom_status loom_tensor_init(loom_tensor *out, const loom_type *type) {
  return tensor_alloc(out, type, true);
}

loom_status loom__tensor_init_unzeroed(loom_tensor *out, const loom_type *type) {
  return tensor_alloc(out, type, false);
}

void loom_tensor_deinit(loom_tensor *t) {
  if (!t) return;
  loom__aligned_free(t->data);
  memset(t, 0, sizeof *t);
}

/* IEEE half precision, round to nearest even. */
float loom_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else { /* subnormal: normalise */
      float f = ldexpf((float)man, -24);
      return sign ? -f : f;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t loom_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) /* inf or nan */
    return sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0);
  if (absx >= 0x477ff000u) return sign | 0x7c00; /* rounds to >= 65520: overflow to inf */
  if (absx < 0x38800000u) {                      /* below the smallest normal: subnormal */
    float a;
    memcpy(&a, &absx, 4);
    /* a * 2^24 rounded to nearest even gives the subnormal mantissa */
    return sign | (uint16_t)nearbyintf(a * 16777216.0f);
  }
  uint32_t mant = absx & 0x7fffff;
  uint32_t exp = (absx >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return sign | (uint16_t)h;
}

float loom_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t loom_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

/* double -> int64 without undefined behaviour: NaN gives 0, out of range saturates. */
static int64_t saturate_i64(double v) {
  if (v != v) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)v;
}

LOOM_HOT int64_t loom__dtype_offset_bytes(loom_dtype dtype, int64_t elements) {
  /* q4 offsets count nibbles of rows padded to even; the piece and slot offsets the runtime
   * forms for q4 are whole rows or even columns, so the halving is exact */
  return dtype == LOOM_Q4 ? elements / 2 : elements * loom_dtype_size(dtype);
}

void loom__scalar_store(int dtype, double value, int64_t ivalue, bool is_int, void *dst) {
  double v = is_int ? (double)ivalue : value;
  if (!is_int) ivalue = saturate_i64(value);
  switch ((loom_dtype)dtype) {
    case LOOM_BOOL:
      *(uint8_t *)dst = is_int ? ivalue != 0 : value != 0.0;
      break;
    case LOOM_I8:
      *(int8_t *)dst = (int8_t)ivalue;
      break;
    case LOOM_U8:
      *(uint8_t *)dst = (uint8_t)ivalue;
      break;
    case LOOM_I16:
      *(int16_t *)dst = (int16_t)ivalue;
      break;
    case LOOM_I32:
      *(int32_t *)dst = (int32_t)ivalue;
      break;
    case LOOM_I64:
      *(int64_t *)dst = ivalue;
      break;
    case LOOM_F16:
      *(uint16_t *)dst = loom_f32_to_f16((float)v);
      break;
    case LOOM_BF16:
      *(uint16_t *)dst = loom_f32_to_bf16((float)v);
      break;
    case LOOM_F32:
      *(float *)dst = (float)v;
      break;
    case LOOM_F64:
      *(double *)dst = v;
      break;
    case LOOM_C64:
      ((float *)dst)[0] = (float)v;
      ((float *)dst)[1] = 0.0f;
      break;
    case LOOM_C128:
      ((double *)dst)[0] = v;
      ((double *)dst)[1] = 0.0;
      break;
    default:
      break;
  }
}
