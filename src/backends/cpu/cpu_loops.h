/* What the cpu kernels share: strided loop nests over several operands, the per-dtype traits
 * the kernel generators paste together, and checks on views.
 *
 * A loop nest walks one iteration space (dims) through up to LOOM_CPU_MAX_OPERANDS operands,
 * each with its own element strides (0 on broadcast dimensions). Kernels split the flattened
 * iteration space [0, total) into blocks and run blocks on OpenMP threads; inside a block a
 * cursor walks the innermost dimension as a plain loop, so the compiler sees one strided
 * (usually unit-stride) loop per row.
 */
#ifndef LOOM_CPU_LOOPS_H
#define LOOM_CPU_LOOPS_H

#include <string.h>

#include "backends/cpu/cpu_kernels.h"

/* tile views an output as (rep, dim) pairs, so a nest may have twice the IR's rank. */
#define LOOM_CPU_MAX_DIMS (2 * LOOM_MAX_RANK)
/* select: the output and three inputs. */
#define LOOM_CPU_MAX_OPERANDS 4
/* Elements per parallel block: large enough to hide the scheduling cost, small enough to
 * balance two to a few dozen threads. */
#define LOOM_CPU_BLOCK 16384

typedef struct loom__cpu_nest {
  int32_t rank; /* >= 1 once coalesced */
  int32_t n;    /* operands */
  int64_t total;
  int64_t dims[LOOM_CPU_MAX_DIMS];
  int64_t strides[LOOM_CPU_MAX_OPERANDS][LOOM_CPU_MAX_DIMS];
  char *base[LOOM_CPU_MAX_OPERANDS];
} loom__cpu_nest;

/* Where a walk is: the outer multi-index, the position in the innermost dimension, and each
 * operand's element offset at the start of the current row. */
typedef struct loom__cpu_cursor {
  int64_t idx[LOOM_CPU_MAX_DIMS];
  int64_t j;
  int64_t row[LOOM_CPU_MAX_OPERANDS];
} loom__cpu_cursor;

/* Element count of a type, without overflow checks: callers hold types that were made with
 * loom_type_make or inferred, whose sizes are known to fit. */
static inline int64_t loom__cpu_elements(const loom_type *t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->rank; i++) n *= t->dims[i];
  return n;
}

static inline void loom__cpu_nest_init(loom__cpu_nest *L, int32_t rank, const int64_t *dims) {
  memset(L, 0, sizeof *L);
  L->rank = rank;
  L->total = 1;
  for (int32_t d = 0; d < rank; d++) {
    L->dims[d] = dims[d];
    L->total *= dims[d];
  }
}

/* Adds an operand; strides has the nest's rank entries (NULL: dense C order). */
static inline int32_t loom__cpu_nest_add(loom__cpu_nest *L, void *base, const int64_t *strides) {
  int32_t k = L->n++;
  L->base[k] = (char *)base;
  int64_t dense = 1;
  for (int32_t d = L->rank - 1; d >= 0; d--) {
    L->strides[k][d] = strides ? strides[d] : dense;
    dense *= L->dims[d];
  }
  return k;
}

/* Drops dimensions of size 1 and merges neighbours that every operand walks as one, so a
 * dense or a scalar-broadcast operation becomes a single row. Leaves rank >= 1. */
static inline void loom__cpu_nest_coalesce(loom__cpu_nest *L) {
  int32_t r = 0;
  for (int32_t d = 0; d < L->rank; d++) {
    if (L->dims[d] == 1) continue;
    bool merge = r > 0;
    for (int32_t k = 0; k < L->n && merge; k++) merge = L->strides[k][r - 1] == L->strides[k][d] * L->dims[d];
    if (merge) {
      L->dims[r - 1] *= L->dims[d];
      for (int32_t k = 0; k < L->n; k++) L->strides[k][r - 1] = L->strides[k][d];
      continue;
    }
    L->dims[r] = L->dims[d];
    for (int32_t k = 0; k < L->n; k++) L->strides[k][r] = L->strides[k][d];
    r++;
  }
  if (r == 0) { /* a single element */
    L->dims[0] = 1;
    for (int32_t k = 0; k < L->n; k++) L->strides[k][0] = 0;
    r = 1;
  }
  L->rank = r;
}

static inline int64_t loom__cpu_inner_stride(const loom__cpu_nest *L, int32_t k) {
  return L->strides[k][L->rank - 1];
}

/* Places the cursor at flattened position `pos`. */
static inline void loom__cpu_cursor_init(const loom__cpu_nest *L, loom__cpu_cursor *c, int64_t pos) {
  int32_t last = L->rank - 1;
  c->j = pos % L->dims[last];
  pos /= L->dims[last];
  for (int32_t k = 0; k < L->n; k++) c->row[k] = 0;
  for (int32_t d = last - 1; d >= 0; d--) {
    c->idx[d] = pos % L->dims[d];
    pos /= L->dims[d];
    for (int32_t k = 0; k < L->n; k++) c->row[k] += c->idx[d] * L->strides[k][d];
  }
}

/* Elements left in the current row, at most `left`. */
static inline int64_t loom__cpu_cursor_span(const loom__cpu_nest *L, const loom__cpu_cursor *c,
                                            int64_t left) {
  int64_t n = L->dims[L->rank - 1] - c->j;
  return n < left ? n : left;
}

/* Element offset of the cursor's position in operand k. */
static inline int64_t loom__cpu_cursor_off(const loom__cpu_nest *L, const loom__cpu_cursor *c, int32_t k) {
  return c->row[k] + c->j * L->strides[k][L->rank - 1];
}

/* Moves on by n elements, which never go past the end of the current row. */
static inline void loom__cpu_cursor_next(const loom__cpu_nest *L, loom__cpu_cursor *c, int64_t n) {
  c->j += n;
  if (c->j < L->dims[L->rank - 1]) return;
  c->j = 0;
  for (int32_t d = L->rank - 2; d >= 0; d--) {
    c->idx[d]++;
    for (int32_t k = 0; k < L->n; k++) c->row[k] += L->strides[k][d];
    if (c->idx[d] < L->dims[d]) return;
    for (int32_t k = 0; k < L->n; k++) c->row[k] -= L->strides[k][d] * L->dims[d];
    c->idx[d] = 0;
  }
}

/* Element offset in operand k of flattened position pos (one division per dimension). */
static inline int64_t loom__cpu_nest_offset(const loom__cpu_nest *L, int32_t k, int64_t pos) {
  int64_t off = 0;
  for (int32_t d = L->rank - 1; d >= 0; d--) {
    off += (pos % L->dims[d]) * L->strides[k][d];
    pos /= L->dims[d];
  }
  return off;
}

/* Runs fn over [0, L->total) in blocks, on OpenMP threads when there is more than one. One
 * block runs here without entering the parallel region: libgomp starts and ends a team even
 * under a false `if` clause (futex calls included), which cost more than a small op itself
 * (loom-bench overhead). */
typedef void (*loom__cpu_block_fn)(const loom__cpu_nest *L, int64_t lo, int64_t hi);

static inline void loom__cpu_nest_run(const loom__cpu_nest *L, loom__cpu_block_fn fn) {
  int64_t total = L->total, blocks = (total + LOOM_CPU_BLOCK - 1) / LOOM_CPU_BLOCK;
  if (blocks <= 1) {
    if (blocks == 1) fn(L, 0, total);
    return;
  }
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; b++) {
    int64_t lo = b * LOOM_CPU_BLOCK, hi = lo + LOOM_CPU_BLOCK;
    fn(L, lo, hi < total ? hi : total);
  }
}

/* ---- per-dtype traits ------------------------------------------------------------------
 * Kernels are generated by macros that paste a dtype token (b8 i8 u8 i16 i32 i64 f16 bf16 f32
 * f64 c64 c128; "b8" because `bool` is itself a macro) onto these names:
 *   LOOM_CPU_S_<t>   storage type          LOOM_CPU_C_<t>  compute type
 *   LOOM_CPU_LD_<t>  storage -> compute    LOOM_CPU_ST_<t> compute -> storage
 * f16 and bf16 compute in f32 and round to nearest even on store. */
#define LOOM_CPU_S_b8 uint8_t
#define LOOM_CPU_S_i8 int8_t
#define LOOM_CPU_S_u8 uint8_t
#define LOOM_CPU_S_i16 int16_t
#define LOOM_CPU_S_i32 int32_t
#define LOOM_CPU_S_i64 int64_t
#define LOOM_CPU_S_f16 uint16_t
#define LOOM_CPU_S_bf16 uint16_t
#define LOOM_CPU_S_f32 float
#define LOOM_CPU_S_f64 double
#define LOOM_CPU_S_c64 float _Complex
#define LOOM_CPU_S_c128 double _Complex

#define LOOM_CPU_C_b8 uint8_t
#define LOOM_CPU_C_i8 int8_t
#define LOOM_CPU_C_u8 uint8_t
#define LOOM_CPU_C_i16 int16_t
#define LOOM_CPU_C_i32 int32_t
#define LOOM_CPU_C_i64 int64_t
#define LOOM_CPU_C_f16 float
#define LOOM_CPU_C_bf16 float
#define LOOM_CPU_C_f32 float
#define LOOM_CPU_C_f64 double
#define LOOM_CPU_C_c64 float _Complex
#define LOOM_CPU_C_c128 double _Complex

static inline float loom__cpu_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

#define LOOM_CPU_LD_b8(v) ((uint8_t)((v) != 0))
#define LOOM_CPU_LD_i8(v) (v)
#define LOOM_CPU_LD_u8(v) (v)
#define LOOM_CPU_LD_i16(v) (v)
#define LOOM_CPU_LD_i32(v) (v)
#define LOOM_CPU_LD_i64(v) (v)
#define LOOM_CPU_LD_f16(v) loom_f16_to_f32(v)
#define LOOM_CPU_LD_bf16(v) loom__cpu_bf16_to_f32(v)
#define LOOM_CPU_LD_f32(v) (v)
#define LOOM_CPU_LD_f64(v) (v)
#define LOOM_CPU_LD_c64(v) (v)
#define LOOM_CPU_LD_c128(v) (v)

#define LOOM_CPU_ST_b8(v) ((uint8_t)((v) != 0))
#define LOOM_CPU_ST_i8(v) ((int8_t)(v))
#define LOOM_CPU_ST_u8(v) ((uint8_t)(v))
#define LOOM_CPU_ST_i16(v) ((int16_t)(v))
#define LOOM_CPU_ST_i32(v) ((int32_t)(v))
#define LOOM_CPU_ST_i64(v) ((int64_t)(v))
#define LOOM_CPU_ST_f16(v) loom_f32_to_f16((float)(v))
#define LOOM_CPU_ST_bf16(v) loom_f32_to_bf16((float)(v))
#define LOOM_CPU_ST_f32(v) ((float)(v))
#define LOOM_CPU_ST_f64(v) ((double)(v))
#define LOOM_CPU_ST_c64(v) ((float _Complex)(v))
#define LOOM_CPU_ST_c128(v) ((double _Complex)(v))

/* Dtype groups for kernel tables: M(token, ENUM, ...) for each member. */
/* One line per dtype group reads better than clang-format's wrapping. */
/* clang-format off */
#define LOOM_CPU_SINTS(M, ...) M(i8, I8, __VA_ARGS__) M(i16, I16, __VA_ARGS__) \
  M(i32, I32, __VA_ARGS__) M(i64, I64, __VA_ARGS__)
#define LOOM_CPU_UINTS(M, ...) M(u8, U8, __VA_ARGS__)
#define LOOM_CPU_FLOATS(M, ...) M(f16, F16, __VA_ARGS__) M(bf16, BF16, __VA_ARGS__) \
  M(f32, F32, __VA_ARGS__) M(f64, F64, __VA_ARGS__)
#define LOOM_CPU_COMPLEX(M, ...) M(c64, C64, __VA_ARGS__) M(c128, C128, __VA_ARGS__)
#define LOOM_CPU_BOOL(M, ...) M(b8, BOOL, __VA_ARGS__)
#define LOOM_CPU_INTS(M, ...) LOOM_CPU_SINTS(M, __VA_ARGS__) LOOM_CPU_UINTS(M, __VA_ARGS__)
#define LOOM_CPU_REALS(M, ...) LOOM_CPU_INTS(M, __VA_ARGS__) LOOM_CPU_FLOATS(M, __VA_ARGS__)
/* clang-format on */

/* "cpu: exp: unsupported dtype i32" */
static inline loom_status loom__cpu_unsupported(const loom__op *op, loom_dtype dtype) {
  return loom__error(LOOM_ERR_UNSUPPORTED, "cpu: %s: unsupported dtype %s", loom_op_name(op->kind),
                     loom_dtype_name(dtype));
}

/* topk (cpu_topk.c), dispatched from loom__cpu_reduce. */
loom_status loom__cpu_topk(const loom_graph *g, const loom__op *op, const loom__view *in,
                           const loom__view *out);

#endif
