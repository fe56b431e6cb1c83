/* Element types, tensor types (dtype + shape) and host tensors. */
#ifndef LOOM_TENSOR_H
#define LOOM_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loom/export.h"
#include "loom/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most dimensions a shape may have (IR.md). */
#define LOOM_MAX_RANK 8

/* X(ENUM, name, bytes). Order is fixed: it is part of the ABI. */
#define LOOM_DTYPE_MAP(X) \
  X(BOOL, "bool", 1)      \
  X(I8, "i8", 1)          \
  X(U8, "u8", 1)          \
  X(I16, "i16", 2)        \
  X(I32, "i32", 4)        \
  X(I64, "i64", 8)        \
  X(F16, "f16", 2)        \
  X(BF16, "bf16", 2)      \
  X(F32, "f32", 4)        \
  X(F64, "f64", 8)        \
  X(C64, "c64", 8)        \
  X(C128, "c128", 16)     \
  X(Q8, "q8", 1)          \
  X(Q4, "q4", 1)

typedef enum loom_dtype {
#define LOOM_X(e, name, bytes) LOOM_##e,
  LOOM_DTYPE_MAP(LOOM_X)
#undef LOOM_X
      LOOM_DTYPE_COUNT
} loom_dtype;

/* Bytes of one element; 0 for an out-of-range value. q4 packs two elements in a byte
 * (docs/ir-quant.md): its entry is 1, the byte a pair shares, and loom_type_bytes gives a q4
 * tensor's real (packed) size. */
LOOM_API int64_t loom_dtype_size(loom_dtype dtype);
/* The IR spelling ("f32"); "?" for an out-of-range value. */
LOOM_API const char *loom_dtype_name(loom_dtype dtype);
/* Parses an IR spelling of `len` bytes. Returns false when it names no dtype. */
LOOM_API bool loom_dtype_parse(const char *text, size_t len, loom_dtype *out_dtype);
/* Classes used by op rules. bool is neither integer nor float. */
LOOM_API bool loom_dtype_is_float(loom_dtype dtype);   /* f16 bf16 f32 f64 */
LOOM_API bool loom_dtype_is_complex(loom_dtype dtype); /* c64 c128 */
LOOM_API bool loom_dtype_is_integer(loom_dtype dtype); /* i8 u8 i16 i32 i64 */
LOOM_API bool loom_dtype_is_signed(loom_dtype dtype);  /* signed ints, floats, complex, q8 q4 */
/* q8 and q4: quantized integers read only by `dequantize` (docs/ir-quant.md). */
LOOM_API bool loom_dtype_is_quantized(loom_dtype dtype);

/* A tensor type: element type and shape. dims[rank..] are ignored. Plain data. */
typedef struct loom_type {
  loom_dtype dtype;
  int32_t rank;
  int64_t dims[LOOM_MAX_RANK];
} loom_type;

/* Fills *out_type. Fails with LOOM_ERR_INVALID_ARGUMENT for a bad dtype, a rank outside
 * 0..LOOM_MAX_RANK, a negative dimension, or a shape whose byte size overflows int64. */
LOOM_API loom_status loom_type_make(loom_dtype dtype, int32_t rank, const int64_t *dims, loom_type *out_type);
/* Element count and byte size. Overflow is LOOM_ERR_INVALID_ARGUMENT, never a wrap. A q4
 * tensor's bytes are its packed size: each row (the last axis) ceil(n/2) bytes, low nibble
 * first, an odd row's last byte padded (a rank-0 q4 is one byte). */
LOOM_API loom_status loom_type_elements(const loom_type *type, int64_t *out_elements);
LOOM_API loom_status loom_type_bytes(const loom_type *type, int64_t *out_bytes);
LOOM_API bool loom_type_equal(const loom_type *a, const loom_type *b);
/* Writes the IR spelling ("f32[20000,3]", "f32[]") into buf, always NUL-terminated.
 * Returns buf, so it can be used inside a printf argument list. */
LOOM_API char *loom_type_format(const loom_type *type, char *buf, size_t size);
/* Room enough for any loom_type_format result. */
#define LOOM_TYPE_STRING_MAX 256

/* A tensor in host memory: dense, C order, little-endian. bool is one byte, 0 or 1; c64 is
 * (re, im) f32 pairs; f16/bf16 are raw 16-bit patterns. */
typedef struct loom_tensor {
  loom_type type;
  void *data;
} loom_tensor;

/* Allocates zeroed storage for a tensor of `type` into caller storage *out. The data is owned
 * by *out until loom_tensor_deinit. Errors: INVALID_ARGUMENT (bad type), OUT_OF_MEMORY. */
LOOM_API loom_status loom_tensor_init(loom_tensor *out, const loom_type *type);
/* Frees data allocated by Loom (loom_tensor_init, or outputs of a run) and clears *t.
 * Accepts NULL and an already deinitialized tensor. */
LOOM_API void loom_tensor_deinit(loom_tensor *t);

/* Fills an allocated tensor with seeded pseudo-random values, the same on every machine and
 * build for the same (seed, stream): floats uniform in [0,1) on a grid the dtype holds exactly,
 * complex numbers part by part, integers uniform in [0,100), bools 0 or 1, q8/q4 uniform bytes of their
 * packed storage. loom-run --random uses the parameter's index as the stream, so one input's values do not
 * depend on the others. Errors: INVALID_ARGUMENT (NULL tensor, an invalid type, NULL data for a non-empty
 * tensor). */
LOOM_API loom_status loom_tensor_fill_random(loom_tensor *t, uint64_t seed, uint64_t stream);

/* f16 and bf16 conversions (round to nearest even; NaN stays NaN). */
LOOM_API float loom_f16_to_f32(uint16_t h);
LOOM_API uint16_t loom_f32_to_f16(float f);
LOOM_API float loom_bf16_to_f32(uint16_t h);
LOOM_API uint16_t loom_f32_to_bf16(float f);

#ifdef __cplusplus
}
#endif
#endif
