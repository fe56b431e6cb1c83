/* Seeded tensor contents: xoshiro256** (Blackman and Vigna), seeded by splitmix64. Both are
 * defined on 64-bit integers only, so the sequence is the same everywhere. */
#include <string.h>

#include "io/random.h"

typedef struct rng {
  uint64_t s[4];
} rng;

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

static uint64_t next(rng *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

static void rng_seed(rng *r, uint64_t seed, uint64_t stream) {
  uint64_t x = seed ^ splitmix64(&stream); /* mix the stream in, then expand */
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

/* k / 2^bits for the top `bits` bits of a draw: exact in any float with >= bits of mantissa. */
static double unit(uint64_t draw, int bits) {
  return (double)(draw >> (64 - bits)) * (1.0 / (double)(1ull << bits));
}

loom_status loom_tensor_fill_random(loom_tensor *t, uint64_t seed, uint64_t stream) {
  int64_t n = 0;
  if (!t) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_tensor_fill_random: NULL tensor");
  loom_status s = loom_type_elements(&t->type, &n);
  if (s != LOOM_OK) return s;
  if (n > 0 && !t->data) return loom__error(LOOM_ERR_INVALID_ARGUMENT, "loom_tensor_fill_random: NULL data");
  loom__tensor_fill_random(t, seed, stream);
  return LOOM_OK;
}

void loom__tensor_fill_random(loom_tensor *t, uint64_t seed, uint64_t stream) {
  rng r;
  rng_seed(&r, seed, stream);
  int64_t n = 0;
  if (loom_type_elements(&t->type, &n) || !t->data) return;
  if (loom_dtype_is_quantized(t->type.dtype)) {
    /* any byte is a valid q8 value or pair of q4 values: uniform bytes of the packed storage */
    if (loom_type_bytes(&t->type, &n)) return;
    for (int64_t i = 0; i < n; i++) ((uint8_t *)t->data)[i] = (uint8_t)(next(&r) >> 56);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    switch (t->type.dtype) {
      case LOOM_BOOL:
        ((uint8_t *)t->data)[i] = (uint8_t)(next(&r) >> 63);
        break;
        /* (draw_hi32 * 100) >> 32: uniform up to a bias of 2^-25, the same on every host. */
#define INT_CASE(E, T)                                        \
  case E:                                                     \
    ((T *)t->data)[i] = (T)(((next(&r) >> 32) * 100u) >> 32); \
    break;
        INT_CASE(LOOM_I8, int8_t)
        INT_CASE(LOOM_U8, uint8_t)
        INT_CASE(LOOM_I16, int16_t)
        INT_CASE(LOOM_I32, int32_t)
        INT_CASE(LOOM_I64, int64_t)
#undef INT_CASE
      case LOOM_F16:
        ((uint16_t *)t->data)[i] = loom_f32_to_f16((float)unit(next(&r), 11));
        break;
      case LOOM_BF16:
        ((uint16_t *)t->data)[i] = loom_f32_to_bf16((float)unit(next(&r), 8));
        break;
      case LOOM_F32:
        ((float *)t->data)[i] = (float)unit(next(&r), 24);
        break;
      case LOOM_F64:
        ((double *)t->data)[i] = unit(next(&r), 53);
        break;
      case LOOM_C64:
        ((float *)t->data)[2 * i] = (float)unit(next(&r), 24);
        ((float *)t->data)[2 * i + 1] = (float)unit(next(&r), 24);
        break;
      case LOOM_C128:
        ((double *)t->data)[2 * i] = unit(next(&r), 53);
        ((double *)t->data)[2 * i + 1] = unit(next(&r), 53);
        break;
      default:
        return;
    }
  }
}
