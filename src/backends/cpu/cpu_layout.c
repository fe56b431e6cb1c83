/* The cpu backend's layout ops, materialized: reshape, transpose, broadcast, slice, concat and
 * tile. Each becomes one strided copy (concat one per operand): the op only decides the
 * iteration space and the source and destination strides, and a copy loop per element size
 * (1, 2, 4, 8, 16 bytes) moves the bytes, threaded over blocks for large copies.
 *
 * The runtime keeps transpose, broadcast, slice and contiguous reshape as views and calls
 * these only where a value must own storage (a reshape of strided data, a returned view, a
 * backend that wants dense inputs); run directly they work for every op.
 */
#include <stdlib.h>

#include "backends/cpu/cpu_loops.h"

typedef struct u128_pair {
  uint64_t lo, hi;
} u128_pair;

/* Operand 0 is the destination, operand 1 the source; both may be strided. */
#define DEF_COPY(N, T)                                                            \
  static void copy_##N(const loom__cpu_nest *L, int64_t lo, int64_t hi) {         \
    T *dst = (T *)L->base[0];                                                     \
    const T *src = (const T *)L->base[1];                                         \
    int64_t sd = loom__cpu_inner_stride(L, 0), ss = loom__cpu_inner_stride(L, 1); \
    loom__cpu_cursor c;                                                           \
    loom__cpu_cursor_init(L, &c, lo);                                             \
    for (int64_t pos = lo; pos < hi;) {                                           \
      int64_t n = loom__cpu_cursor_span(L, &c, hi - pos);                         \
      T *d = dst + loom__cpu_cursor_off(L, &c, 0);                                \
      const T *s = src + loom__cpu_cursor_off(L, &c, 1);                          \
      if (sd == 1 && ss == 1) {                                                   \
        memcpy(d, s, (size_t)n * sizeof(T));                                      \
      } else if (ss == 0) {                                                       \
        T v = s[0];                                                               \
        for (int64_t j = 0; j < n; j++) d[j * sd] = v;                            \
      } else {                                                                    \
        for (int64_t j = 0; j < n; j++) d[j * sd] = s[j * ss];                    \
      }                                                                           \
      pos += n;                                                                   \
      loom__cpu_cursor_next(L, &c, n);                                            \
    }                                                                             \
  }
DEF_COPY(1, uint8_t)
DEF_COPY(2, uint16_t)
DEF_COPY(4, uint32_t)
DEF_COPY(8, uint64_t)
DEF_COPY(16, u128_pair)

/* ---- transposes: tiled ------------------------------------------------------------------
 * When the destination runs along the last dimension but the source along another one (k),
 * an element-by-element copy reads one element per cache line (and page, for big strides).
 * Copying TILE x TILE blocks of (k, last) reuses each source line TILE times while it is in
 * cache. TILE = 16 measured best here (4096^2 f32: about 30 ms against 40 for 32 and 135 for
 * the plain loop; a block staged through a local buffer was slower). The other dimensions
 * form an outer nest; work units are (outer, block) pairs. */
#define TILE 16

typedef struct tiled {
  loom__cpu_nest outer; /* operands: dst, src */
  int64_t nk, nl;       /* sizes of dims k and last */
  int64_t dk, dl, sk, sl;
  int64_t tk, tl; /* blocks along k and last */
} tiled;

#define DEF_TILED(N, T)                                                                  \
  static void tiled_##N(const tiled *P, char *dst, const char *src, int64_t u) {         \
    int64_t q = u / (P->tk * P->tl), b = u % (P->tk * P->tl);                            \
    int64_t i0 = b / P->tl * TILE, j0 = b % P->tl * TILE;                                \
    int64_t i1 = LOOM_MIN(P->nk, i0 + TILE), j1 = LOOM_MIN(P->nl, j0 + TILE);            \
    T *d = (T *)dst + loom__cpu_nest_offset(&P->outer, 0, q);                            \
    const T *s = (const T *)src + loom__cpu_nest_offset(&P->outer, 1, q);                \
    int64_t dk = P->dk, dl = P->dl, sk = P->sk, sl = P->sl; /* locals: T may alias *P */ \
    for (int64_t i = i0; i < i1; i++)                                                    \
      for (int64_t j = j0; j < j1; j++) d[i * dk + j * dl] = s[i * sk + j * sl];         \
  }
DEF_TILED(1, uint8_t)
DEF_TILED(2, uint16_t)
DEF_TILED(4, uint32_t)
DEF_TILED(8, uint64_t)
DEF_TILED(16, u128_pair)

/* Runs the copy tiled when it is a transpose; false when it is not one. */
static bool try_tiled(int64_t esize, const loom__cpu_nest *L) {
  int32_t last = L->rank - 1, k = -1;
  int64_t sl = L->strides[1][last];
  if (L->rank < 2 || L->dims[last] < TILE / 4 || sl == 0 || sl == 1 || sl == -1) return false;
  for (int32_t d = 0; d < last; d++)
    if (L->strides[1][d] != 0 && (k < 0 || llabs(L->strides[1][d]) < llabs(L->strides[1][k]))) k = d;
  if (k < 0 || llabs(L->strides[1][k]) >= llabs(sl) || L->dims[k] < TILE / 4) return false;
  tiled P;
  int64_t od[LOOM_CPU_MAX_DIMS], ods[LOOM_CPU_MAX_DIMS], oss[LOOM_CPU_MAX_DIMS];
  int32_t r = 0;
  for (int32_t d = 0; d < last; d++) {
    if (d == k) continue;
    od[r] = L->dims[d];
    ods[r] = L->strides[0][d];
    oss[r++] = L->strides[1][d];
  }
  loom__cpu_nest_init(&P.outer, r, od);
  loom__cpu_nest_add(&P.outer, L->base[0], ods);
  loom__cpu_nest_add(&P.outer, L->base[1], oss);
  P.nk = L->dims[k];
  P.nl = L->dims[last];
  P.dk = L->strides[0][k];
  P.dl = L->strides[0][last];
  P.sk = L->strides[1][k];
  P.sl = sl;
  P.tk = (P.nk + TILE - 1) / TILE;
  P.tl = (P.nl + TILE - 1) / TILE;
  int64_t units = P.outer.total * P.tk * P.tl;
  void (*fn)(const tiled *, char *, const char *, int64_t) = esize == 1   ? tiled_1
                                                             : esize == 2 ? tiled_2
                                                             : esize == 4 ? tiled_4
                                                             : esize == 8 ? tiled_8
                                                                          : tiled_16;
#pragma omp parallel for schedule(static) if (units * TILE * TILE > 2 * LOOM_CPU_BLOCK)
  for (int64_t u = 0; u < units; u++) fn(&P, L->base[0], L->base[1], u);
  return true;
}

/* Copies the iteration space `dims` (rank up to LOOM_CPU_MAX_DIMS) from src to dst. */
static void strided_copy(int64_t esize, int32_t rank, const int64_t *dims, void *dst,
                         const int64_t *dst_strides, const void *src, const int64_t *src_strides) {
  loom__cpu_nest L;
  loom__cpu_nest_init(&L, rank, dims);
  if (L.total == 0) return;
  loom__cpu_nest_add(&L, dst, dst_strides);
  loom__cpu_nest_add(&L, (void *)src, src_strides);
  loom__cpu_nest_coalesce(&L);
  if (try_tiled(esize, &L)) return;
  switch (esize) {
    case 1:
      loom__cpu_nest_run(&L, copy_1);
      break;
    case 2:
      loom__cpu_nest_run(&L, copy_2);
      break;
    case 4:
      loom__cpu_nest_run(&L, copy_4);
      break;
    case 8:
      loom__cpu_nest_run(&L, copy_8);
      break;
    default:
      loom__cpu_nest_run(&L, copy_16);
      break;
  }
}

void loom__cpu_strided_copy(int64_t esize, int32_t rank, const int64_t *dims, void *dst,
                            const int64_t *dst_strides, const void *src, const int64_t *src_strides) {
  strided_copy(esize, rank, dims, dst, dst_strides, src, src_strides);
}

static loom_status bad(const loom__op *op, const loom__view *in, const loom__view *out, const char *why) {
  char a[LOOM_TYPE_STRING_MAX], b[LOOM_TYPE_STRING_MAX];
  return loom__error(LOOM_ERR_INVALID_ARGUMENT, "cpu: %s: %s to %s: %s", loom_op_name(op->kind),
                     loom_type_format(&in->type, a, sizeof a), loom_type_format(&out->type, b, sizeof b),
                     why);
}

/* reshape: the input in C order is the output's linear order. */
static loom_status run_reshape(const loom__op *op, const loom__view *in, const loom__view *out) {
  if (loom__cpu_elements(&in->type) != loom__cpu_elements(&out->type))
    return bad(op, in, out, "element counts differ");
  strided_copy(loom_dtype_size(in->type.dtype), in->type.rank, in->type.dims, out->data, NULL, in->data,
               in->strides);
  return LOOM_OK;
}

static loom_status run_transpose(const loom__op *op, const loom__view *in, const loom__view *out) {
  const loom_int_list *perm = &op->attrs.perm;
  int64_t strides[LOOM_MAX_RANK];
  uint32_t seen = 0;
  if (perm->count != in->type.rank || out->type.rank != in->type.rank)
    return bad(op, in, out, "perm does not match the rank");
  for (int32_t k = 0; k < perm->count; k++) {
    int64_t p = perm->v[k];
    if (p < 0 || p >= in->type.rank || (seen & (1u << p)))
      return bad(op, in, out, "perm is not a permutation");
    seen |= 1u << p;
    if (out->type.dims[k] != in->type.dims[p]) return bad(op, in, out, "shapes do not match perm");
    strides[k] = in->strides[p];
  }
  strided_copy(loom_dtype_size(in->type.dtype), out->type.rank, out->type.dims, out->data, NULL, in->data,
               strides);
  return LOOM_OK;
}

static loom_status run_broadcast(const loom__op *op, const loom__view *in, const loom__view *out) {
  const loom_type *t = &in->type, *o = &out->type;
  bool ok = t->rank <= o->rank;
  for (int32_t d = 1; ok && d <= t->rank; d++)
    ok = t->dims[t->rank - d] == o->dims[o->rank - d] || t->dims[t->rank - d] == 1;
  if (!ok) return bad(op, in, out, "shapes do not broadcast");
  loom__view b;
  loom__view_broadcast_to(in, o, &b);
  strided_copy(loom_dtype_size(t->dtype), o->rank, o->dims, out->data, NULL, b.data, b.strides);
  return LOOM_OK;
}

/* slice: start >= 0 and step >= 1 per dimension (the IR's rule); the output's shape says how
 * many elements each dimension takes, and every one of them must lie inside the input. */
static loom_status run_slice(const loom__op *op, const loom__view *in, const loom__view *out) {
  const loom_attrs *a = &op->attrs;
  const loom_type *t = &in->type;
  bool has_step = (a->set & LOOM_ATTR_STEP) != 0;
  if (a->start.count != t->rank || out->type.rank != t->rank || (has_step && a->step.count != t->rank))
    return bad(op, in, out, "start/step do not match the rank");
  int64_t strides[LOOM_MAX_RANK], offset = 0;
  for (int32_t d = 0; d < t->rank; d++) {
    int64_t start = a->start.v[d], step = has_step ? a->step.v[d] : 1, n = out->type.dims[d];
    if (start < 0 || step < 1 || (n > 0 && (start >= t->dims[d] || (t->dims[d] - 1 - start) / step < n - 1)))
      return bad(op, in, out, "the slice reads outside the input");
    offset += start * in->strides[d];
    strides[d] = in->strides[d] * step;
  }
  if (loom__cpu_elements(&out->type) == 0) return LOOM_OK;
  int64_t esize = loom_dtype_size(t->dtype);
  strided_copy(esize, t->rank, out->type.dims, out->data, NULL, (const char *)in->data + offset * esize,
               strides);
  return LOOM_OK;
}

/* concat: operand j fills the output's slab [at_j, at_j + len_j) along the axis. */
static loom_status run_concat(const loom__op *op, const loom__view *in, const loom__view *out) {
  const loom_type *o = &out->type;
  int32_t axis;
  if (!loom__axis_normalize(op->attrs.axis, o->rank, &axis))
    return bad(op, &in[0], out, "axis is out of range");
  int64_t at = 0, esize = loom_dtype_size(o->dtype), strides[LOOM_MAX_RANK];
  loom__view_dense_strides(o, strides);
  for (int32_t j = 0; j < op->n_inputs; j++) {
    const loom_type *t = &in[j].type;
    bool ok = t->rank == o->rank && t->dtype == o->dtype;
    for (int32_t d = 0; ok && d < t->rank; d++) ok = d == axis || t->dims[d] == o->dims[d];
    if (!ok || at + t->dims[axis] > o->dims[axis]) return bad(op, &in[j], out, "shapes do not concatenate");
    if (loom__cpu_elements(t) > 0)
      strided_copy(esize, t->rank, t->dims, (char *)out->data + at * strides[axis] * esize, strides,
                   in[j].data, in[j].strides);
    at += t->dims[axis];
  }
  if (at != o->dims[axis]) return bad(op, &in[0], out, "operands do not fill the output");
  return LOOM_OK;
}

/* tile: the output seen as (rep, dim) pairs per dimension, the input repeated along each rep
 * (stride 0). Missing leading reps are 1, as in NumPy. */
static loom_status run_tile(const loom__op *op, const loom__view *in, const loom__view *out) {
  const loom_int_list *reps = &op->attrs.reps;
  const loom_type *t = &in->type;
  if (reps->count > t->rank || out->type.rank != t->rank)
    return bad(op, in, out, "reps do not match the rank");
  int64_t dims[LOOM_CPU_MAX_DIMS], dst[LOOM_CPU_MAX_DIMS], src[LOOM_CPU_MAX_DIMS], ostrides[LOOM_MAX_RANK];
  loom__view_dense_strides(&out->type, ostrides);
  int32_t lead = t->rank - reps->count;
  for (int32_t d = 0; d < t->rank; d++) {
    int64_t rep = d < lead ? 1 : reps->v[d - lead];
    if (rep < 0 || out->type.dims[d] != t->dims[d] * rep) return bad(op, in, out, "shapes do not match reps");
    dims[2 * d] = rep;
    dims[2 * d + 1] = t->dims[d];
    dst[2 * d] = t->dims[d] * ostrides[d];
    dst[2 * d + 1] = ostrides[d];
    src[2 * d] = 0;
    src[2 * d + 1] = in->strides[d];
  }
  strided_copy(loom_dtype_size(t->dtype), 2 * t->rank, dims, out->data, dst, in->data, src);
  return LOOM_OK;
}

loom_status loom__cpu_layout(const loom_graph *g, const loom__op *op, const loom__view *in,
                             const loom__view *out) {
  (void)g;
  for (int32_t j = 0; j < op->n_inputs; j++)
    if (in[j].type.dtype != out->type.dtype) return bad(op, &in[j], out, "dtypes differ");
  switch (op->kind) {
    case LOOM_OP_RESHAPE:
      return run_reshape(op, in, out);
    case LOOM_OP_TRANSPOSE:
      return run_transpose(op, in, out);
    case LOOM_OP_BROADCAST:
      return run_broadcast(op, in, out);
    case LOOM_OP_SLICE:
      return run_slice(op, in, out);
    case LOOM_OP_CONCAT:
      return run_concat(op, in, out);
    case LOOM_OP_TILE:
      return run_tile(op, in, out);
    default:
      return loom__error(LOOM_ERR_INTERNAL, "cpu: %s is not a layout op", loom_op_name(op->kind));
  }
}
