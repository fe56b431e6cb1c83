/* dot of the program's dtype where CLBlast does not run it (integers, bool, f16/bf16, small
 * or strided problems, or no CLBlast): a batch of tiled products reading both operands in
 * place through their strides. Accumulates as the cpu backend does: float for f32/f16/bf16,
 * double for f64, integers wrap (in 32 bits, 64 for i64), bool is OR of ANDs.
 */
#define TS 16

#if defined(IS_BOOL)
#define DOT_ZERO ((DOTT)0)
#define MAC(acc, x, y) ((acc) |= (DOTT)((x) & (y)))
#define DOT_STORE(acc) ((uchar)((acc) != 0))
#elif defined(IS_COMPLEX)
#define DOT_ZERO ((DOTT)0)
#define MAC(acc, x, y) ((acc) += CMUL(DOTT, x, y))
#define DOT_STORE(acc) (acc)
#elif defined(IS_INT)
#define DOT_ZERO ((DOTT)0)
#define MAC(acc, x, y) ((acc) += (DOTT)(x) * (DOTT)(y))
#define DOT_STORE(acc) ((S)(acc))
#else
#define DOT_ZERO ((DOTT)0)
#define MAC(acc, x, y) ((acc) = fma((DOTT)(x), (DOTT)(y), (acc)))
#define DOT_STORE(acc) ST(acc)
#endif

inline long batch_offset(long b, long nb, const long *dims, const long *st) {
  return nest_offset(b, nb, dims, st);
}

__kernel __attribute__((reqd_work_group_size(TS, TS, 1))) void gemm(__global const S *a, __global const S *b,
                                                                    __global S *c, lm_gemm m) {
  __local C ta[TS][TS];
  __local C tb[TS][TS];
  int lx = get_local_id(0), ly = get_local_id(1);
  long col = get_group_id(0) * TS + lx, row = get_group_id(1) * TS + ly;
  for (long bi = get_global_id(2); bi < m.batch; bi += get_global_size(2)) {
    long ao = m.a_off + batch_offset(bi, m.nb, m.bdims, m.a_bs);
    long bo = m.b_off + batch_offset(bi, m.nb, m.bdims, m.b_bs);
    DOTT acc = DOT_ZERO;
    for (long k0 = 0; k0 < m.k; k0 += TS) {
      long ka = k0 + lx, kb = k0 + ly;
      ta[ly][lx] = (row < m.n && ka < m.k) ? LD(a[ao + row * m.a_rs + ka * m.a_cs]) : (C)0;
      tb[ly][lx] = (kb < m.k && col < m.m) ? LD(b[bo + kb * m.b_rs + col * m.b_cs]) : (C)0;
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int t = 0; t < TS; t++) MAC(acc, ta[ly][t], tb[t][lx]);
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < m.n && col < m.m) c[m.c_off + (bi * m.n + row) * m.m + col] = DOT_STORE(acc);
  }
}

/* The same product without local memory, for CPU devices (where caches do the tiling and
 * barriers cost): each work-item computes `span` consecutive outputs, walking them in order. */
__kernel void gemm_flat(__global const S *a, __global const S *b, __global S *c, lm_gemm m, long span) {
  long total = m.batch * m.n * m.m;
  for (long s = get_global_id(0); s * span < total; s += get_global_size(0)) {
    long i = s * span, end = min(i + span, total);
    long col = i % m.m, t = i / m.m, row = t % m.n, bi = t / m.n;
    long ab = m.a_off + batch_offset(bi, m.nb, m.bdims, m.a_bs);
    long bb = m.b_off + batch_offset(bi, m.nb, m.bdims, m.b_bs);
    for (; i < end; i++) {
      long ao = ab + row * m.a_rs, bo = bb + col * m.b_cs;
      DOTT acc = DOT_ZERO;
      for (long q = 0; q < m.k; q++) MAC(acc, LD(a[ao + q * m.a_cs]), LD(b[bo + q * m.b_rs]));
      c[m.c_off + i] = DOT_STORE(acc);
      if (++col == m.m) {
        col = 0;
        if (++row == m.n) {
          row = 0;
          bi++;
          ab = m.a_off + batch_offset(bi, m.nb, m.bdims, m.a_bs);
          bb = m.b_off + batch_offset(bi, m.nb, m.bdims, m.b_bs);
        }
      }
    }
  }
}
