/* The dtype-free program: strided copies by element size (copy_<bytes>), which materialize
 * every layout op (reshape of strided data, transpose, broadcast, slice, concat, tile) and pack
 * operands, and select by element size (select_<bytes>).
 */
/* A cursor over a copy's nest (up to LM_COPY_RANK dims), walked a row at a time as
 * ew_cursor is (common.cl). */
typedef struct cp_cursor {
  long idx[LM_COPY_RANK];
  long od, os;
} cp_cursor;

inline void cp_cursor_init(cp_cursor *c, long p, const lm_copy *m) {
  c->od = m->dst_off;
  c->os = m->src_off;
  for (long d = m->rank - 1; d >= 0; d--) {
    long q = p % m->dims[d];
    p /= m->dims[d];
    c->idx[d] = q;
    c->od += q * m->dst[d];
    c->os += q * m->src[d];
  }
}

inline void cp_cursor_advance(cp_cursor *c, const lm_copy *m, long len) {
  long d = m->rank - 1;
  c->idx[d] += len;
  c->od += len * m->dst[d];
  c->os += len * m->src[d];
  while (c->idx[d] >= m->dims[d] && d > 0) {
    c->od += m->dst[d - 1] - m->dst[d] * m->dims[d];
    c->os += m->src[d - 1] - m->src[d] * m->dims[d];
    c->idx[d] = 0;
    c->idx[--d]++;
  }
}

#define CP_ROWS(m, c, len)                                                                       \
  for (long s_ = get_global_id(0); s_ * (m).span < (m).total; s_ += get_global_size(0))         \
    for (long i_ = s_ * (m).span, e_ = min(i_ + (m).span, (m).total), len = (cp_cursor_init(&c, i_, &(m)), 0); \
         i_ < e_ && (len = min(e_ - i_, (m).dims[(m).rank - 1] - c.idx[(m).rank - 1]), 1);         \
         i_ += len, cp_cursor_advance(&c, &(m), len))

#define DEF_COPY(N, T)                                                          \
  __kernel void copy_##N(__global T *dst, __global const T *src, lm_copy m) {   \
    cp_cursor c;                                                                \
    long sd = m.dst[m.rank - 1], ss = m.src[m.rank - 1];                        \
    CP_ROWS(m, c, len) for (long t = 0; t < len; t++) dst[c.od + t * sd] = src[c.os + t * ss]; \
  }
DEF_COPY(1, uchar)
DEF_COPY(2, ushort)
DEF_COPY(4, uint)
DEF_COPY(8, ulong)
DEF_COPY(16, ulong2)

#define DEF_SELECT(N, T)                                                                      \
  __kernel void select_##N(__global T *o, __global const uchar *c, __global const T *a,        \
                           __global const T *b, lm_ew m) {                                    \
    ew_cursor q;                                                                              \
    long sc = m.st[0][m.rank - 1], sa = m.st[1][m.rank - 1], sb = m.st[2][m.rank - 1];       \
    EW_ROWS(m, 3, q, i, len) for (long t = 0; t < len; t++)                                   \
      o[m.out_off + i + t] = c[q.off[0] + t * sc] ? a[q.off[1] + t * sa] : b[q.off[2] + t * sb]; \
  }
DEF_SELECT(1, uchar)
DEF_SELECT(2, ushort)
DEF_SELECT(4, uint)
DEF_SELECT(8, ulong)
DEF_SELECT(16, ulong2)

/* Sets elements to zero over a strided nest (lm_copy's dst side). */
#define DEF_ZERO(N, T)                                                          \
  __kernel void zero_##N(__global T *dst, lm_copy m) {                          \
    cp_cursor c;                                                                \
    long sd = m.dst[m.rank - 1];                                                \
    CP_ROWS(m, c, len) for (long t = 0; t < len; t++) dst[c.od + t * sd] = (T)0; \
  }
DEF_ZERO(4, uint)
DEF_ZERO(8, ulong)

/* The indices of a loop's merged candidates (backend.h, loom__merge_index_fn): in place over
 * pos, rows [outer, k, inner]; p < k picks acc's index, else piece's at p - k plus lo. */
__kernel void merge_index(__global long *pos, long pos_off, __global const long *acc, long acc_off,
                          __global const long *piece, long piece_off, long total, long k, long inner,
                          long lo) {
  for (long e = get_global_id(0); e < total; e += get_global_size(0)) {
    long row = e / (k * inner) * k * inner + e % inner, p = pos[pos_off + e];
    pos[pos_off + e] = p < k ? acc[acc_off + row + p * inner] : piece[piece_off + row + (p - k) * inner] + lo;
  }
}
