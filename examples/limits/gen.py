#!/usr/bin/python3
"""Writes the kernels of examples/limits/ as .lir files, each at two sizes: NAME.small.lir (the
tests': runs in well under a second) and NAME.lir (the benchmark's: a whole need of 64-256 MiB).

Run from anywhere: /usr/bin/python3 examples/limits/gen.py (rewrites the .lir files beside it).
The kernels are PolyBench's, written as tensor graphs; the time-stepped stencils are unrolled
(the IR's `loop` op runs pieces of an axis, not time steps): one block of statements per step.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def header(name, what, params):
    ps = ", ".join(f"{p}: f32[{','.join(str(d) for d in s)}]" for p, s in params)
    return [f"# {what}", f"graph {name}({ps}) {{"]


def scalars(**kv):
    return [f"  {k} = constant {v} : f32[]" for k, v in kv.items()]


def gemm(n, k, m):
    s = header("gemm", f"gemm-like scaled product: alpha A B + beta C, A [{n},{k}], B [{k},{m}]",
               [("a", (n, k)), ("b", (k, m)), ("c", (n, m))])
    s += scalars(alpha=1.5, beta=1.2)
    s += ["  ab = dot a b", "  sab = mul ab alpha", "  sc = mul c beta", "  out = add sab sc",
          "  return out"]
    return s


def mm2(n):
    s = header("mm2", f"2mm: D = alpha A B C + beta D, all [{n},{n}]",
               [("a", (n, n)), ("b", (n, n)), ("c", (n, n)), ("d", (n, n))])
    s += scalars(alpha=1.5, beta=1.2)
    s += ["  ab = dot a b", "  tmp = mul ab alpha", "  tc = dot tmp c", "  bd = mul d beta",
          "  out = add tc bd", "  return out"]
    return s


def mm3(n):
    s = header("mm3", f"3mm: G = (A B) (C D), all [{n},{n}]",
               [("a", (n, n)), ("b", (n, n)), ("c", (n, n)), ("d", (n, n))])
    s += ["  e = dot a b", "  f = dot c d", "  g = dot e f", "  return g"]
    return s


def syrk(n, k):
    s = header("syrk", f"syrk-like rank-k update: alpha A A^T + beta C, A [{n},{k}], C [{n},{n}]",
               [("a", (n, k)), ("c", (n, n))])
    s += scalars(alpha=1.5, beta=1.2)
    s += ["  at = transpose a perm=[1,0]", "  aat = dot a at", "  sa = mul aat alpha",
          "  sc = mul c beta", "  out = add sa sc", "  return out"]
    return s


def syr2k(n, k):
    s = header("syr2k", f"syr2k-like update: alpha (A B^T + B A^T) + beta C, A and B [{n},{k}]",
               [("a", (n, k)), ("b", (n, k)), ("c", (n, n))])
    s += scalars(alpha=1.5, beta=1.2)
    s += ["  at = transpose a perm=[1,0]", "  bt = transpose b perm=[1,0]", "  abt = dot a bt",
          "  bat = dot b at", "  both = add abt bat", "  sa = mul both alpha", "  sc = mul c beta",
          "  out = add sa sc", "  return out"]
    return s


def triangle(n):
    """The lower-triangle mask of an [n,n] matrix (i >= j), from two iotas."""
    return [f"  ri = iota axis=0 : i32[{n},1]", f"  ci = iota axis=1 : i32[1,{n}]",
            "  lower = ge ri ci"]


def symm(n, m):
    s = header("symm", f"symm-like product: alpha S B + beta C, S symmetric [{n},{n}] read from "
               f"the lower triangle of A, B and C [{n},{m}]",
               [("a", (n, n)), ("b", (n, m)), ("c", (n, m))])
    s += scalars(alpha=1.5, beta=1.2)
    s += triangle(n)
    s += ["  at = transpose a perm=[1,0]", "  sym = select lower a at", "  sb = dot sym b",
          "  ssb = mul sb alpha", "  sc = mul c beta", "  out = add ssb sc", "  return out"]
    return s


def trmm(n, m):
    s = header("trmm", f"trmm-like product: alpha L B, L the lower triangle of A [{n},{n}], "
               f"B [{n},{m}]", [("a", (n, n)), ("b", (n, m))])
    s += scalars(alpha=1.5, zero=0)
    s += triangle(n)
    s += ["  tri = select lower a zero", "  tb = dot tri b", "  out = mul tb alpha",
          "  return out"]
    return s


def gemver(n):
    vec = [(v, (n,)) for v in ("u1", "v1", "u2", "v2", "y", "z")]
    s = header("gemver", f"gemver-like pair: A' = A + u1 v1^T + u2 v2^T, x = beta A'^T y + z, "
               f"w = alpha A' x, A [{n},{n}]", [("a", (n, n))] + vec)
    s += scalars(alpha=1.5, beta=1.2)
    s += [f"  u1c = reshape u1 shape=[{n},1]", f"  v1r = reshape v1 shape=[1,{n}]",
          f"  u2c = reshape u2 shape=[{n},1]", f"  v2r = reshape v2 shape=[1,{n}]",
          "  r1 = mul u1c v1r", "  r2 = mul u2c v2r", "  a1 = add a r1", "  a2 = add a1 r2",
          "  a2t = transpose a2 perm=[1,0]", "  aty = dot a2t y", "  bx = mul aty beta",
          "  x = add bx z", "  ax = dot a2 x", "  w = mul ax alpha", "  return w, x"]
    return s


def atax(m, n):
    s = header("atax", f"atax: y = A^T (A x), A [{m},{n}]", [("a", (m, n)), ("x", (n,))])
    s += ["  ax = dot a x", "  at = transpose a perm=[1,0]", "  y = dot at ax", "  return y"]
    return s


def bicg(n, m):
    s = header("bicg", f"bicg: s = A^T r, q = A p, A [{n},{m}]",
               [("a", (n, m)), ("r", (n,)), ("p", (m,))])
    s += ["  at = transpose a perm=[1,0]", "  s = dot at r", "  q = dot a p", "  return s, q"]
    return s


def mvt(n):
    s = header("mvt", f"mvt: x1 = x1 + A y1, x2 = x2 + A^T y2, A [{n},{n}]",
               [("a", (n, n)), ("x1", (n,)), ("x2", (n,)), ("y1", (n,)), ("y2", (n,))])
    s += ["  ay = dot a y1", "  o1 = add x1 ay", "  at = transpose a perm=[1,0]",
          "  aty = dot at y2", "  o2 = add x2 aty", "  return o1, o2"]
    return s


def covariance(n, m):
    s = header("covariance", f"covariance of {m} variables over {n} samples (mean-centred), "
               f"data [{n},{m}]", [("data", (n, m))])
    s += scalars(scale=f"{1.0 / (n - 1):.9g}")
    s += ["  mean = reduce_mean data axes=[0] keepdims=true", "  cen = sub data mean",
          "  cent = transpose cen perm=[1,0]", "  prod = dot cent cen", "  cov = mul prod scale",
          "  return cov"]
    return s


def correlation(n, m):
    s = header("correlation", f"correlation of {m} variables over {n} samples (mean-centred, "
               f"scaled by the standard deviation), data [{n},{m}]", [("data", (n, m))])
    s += scalars(eps=0.1, one=1, rsn=f"{1.0 / n ** 0.5:.9g}")
    s += ["  mean = reduce_mean data axes=[0] keepdims=true", "  cen = sub data mean",
          "  sq = mul cen cen", "  var = reduce_mean sq axes=[0] keepdims=true",
          "  sd = sqrt var", "  small = le sd eps", "  sdn = select small one sd",
          "  scaled = div cen sdn", "  nrm = mul scaled rsn", "  nt = transpose nrm perm=[1,0]",
          "  corr = dot nt nrm", "  return corr"]
    return s


def jacobi1d(n, steps):
    s = header("jacobi1d", f"jacobi-1d: {steps} steps of a[i] = (a[i-1] + a[i] + a[i+1]) / 3 "
               f"inside, the ends kept, a [{n}] (steps unrolled)", [("a", (n,))])
    s += scalars(third="0.333333343")
    s += [f"  e0 = slice a start=[0] stop=[1]", f"  e1 = slice a start=[{n - 1}] stop=[{n}]"]
    cur = "a"
    for t in range(steps):
        p = f"s{t}_"
        nxt = f"g{t}"
        s += [f"  {p}l = slice {cur} start=[0] stop=[{n - 2}]",
              f"  {p}c = slice {cur} start=[1] stop=[{n - 1}]",
              f"  {p}r = slice {cur} start=[2] stop=[{n}]",
              f"  {p}x = add {p}l {p}c", f"  {p}y = add {p}x {p}r", f"  {p}i = mul {p}y third",
              f"  {nxt} = concat e0 {p}i e1 axis=0"]
        cur = nxt
    s.append(f"  return {cur}")
    return s


def frame2d(s, p, cur, inner, n, m):
    """The grid `cur` [n,m] with its interior [1:n-1,1:m-1] replaced by `inner`."""
    return s + [f"  {p}wl = slice {cur} start=[1,0] stop=[{n - 1},1]",
                f"  {p}wr = slice {cur} start=[1,{m - 1}] stop=[{n - 1},{m}]",
                f"  {p}mid = concat {p}wl {inner} {p}wr axis=1",
                f"  {p}top = slice {cur} start=[0,0] stop=[1,{m}]",
                f"  {p}bot = slice {cur} start=[{n - 1},0] stop=[{n},{m}]"]


def jacobi2d(n, steps):
    s = header("jacobi2d", f"jacobi-2d: {steps} steps of the 5-point average inside, the border "
               f"kept, a [{n},{n}] (steps unrolled)", [("a", (n, n))])
    s += scalars(fifth=0.2)
    cur = "a"
    for t in range(steps):
        p = f"s{t}_"
        nxt = f"g{t}"
        sl = lambda nm, i0, j0: (f"  {p}{nm} = slice {cur} start=[{i0},{j0}] "
                                 f"stop=[{i0 + n - 2},{j0 + n - 2}]")
        s += [sl("c", 1, 1), sl("w", 1, 0), sl("e", 1, 2), sl("n", 0, 1), sl("s", 2, 1),
              f"  {p}x1 = add {p}c {p}w", f"  {p}x2 = add {p}x1 {p}e",
              f"  {p}x3 = add {p}x2 {p}n", f"  {p}x4 = add {p}x3 {p}s",
              f"  {p}i = mul {p}x4 fifth"]
        s = frame2d(s, p, cur, f"{p}i", n, n)
        s.append(f"  {nxt} = concat {p}top {p}mid {p}bot axis=0")
        cur = nxt
    s.append(f"  return {cur}")
    return s


def heat3d(n, steps):
    s = header("heat3d", f"heat-3d: {steps} steps of a + 0.125 (the 3-D Laplacian) inside, the "
               f"boundary kept, a [{n},{n},{n}] (steps unrolled)", [("a", (n, n, n))])
    s += scalars(k=0.125, six=6)
    cur = "a"
    m = n - 2
    for t in range(steps):
        p = f"s{t}_"
        nxt = f"g{t}"

        def sl(nm, i, j, l):
            return (f"  {p}{nm} = slice {cur} start=[{i},{j},{l}] "
                    f"stop=[{i + m},{j + m},{l + m}]")
        s += [sl("c", 1, 1, 1), sl("xm", 0, 1, 1), sl("xp", 2, 1, 1), sl("ym", 1, 0, 1),
              sl("yp", 1, 2, 1), sl("zm", 1, 1, 0), sl("zp", 1, 1, 2),
              f"  {p}c6 = mul {p}c six",
              f"  {p}a1 = add {p}xm {p}xp", f"  {p}a2 = add {p}ym {p}yp", f"  {p}a3 = add {p}zm {p}zp",
              f"  {p}b1 = add {p}a1 {p}a2", f"  {p}b2 = add {p}b1 {p}a3",
              f"  {p}d3 = sub {p}b2 {p}c6",
              f"  {p}d4 = mul {p}d3 k", f"  {p}i = add {p}c {p}d4",
              # the boundary: faces of axis 2, then of axis 1, then of axis 0
              f"  {p}z0 = slice {cur} start=[1,1,0] stop=[{n - 1},{n - 1},1]",
              f"  {p}z1 = slice {cur} start=[1,1,{n - 1}] stop=[{n - 1},{n - 1},{n}]",
              f"  {p}zz = concat {p}z0 {p}i {p}z1 axis=2",
              f"  {p}y0 = slice {cur} start=[1,0,0] stop=[{n - 1},1,{n}]",
              f"  {p}y1 = slice {cur} start=[1,{n - 1},0] stop=[{n - 1},{n},{n}]",
              f"  {p}yy = concat {p}y0 {p}zz {p}y1 axis=1",
              f"  {p}x0 = slice {cur} start=[0,0,0] stop=[1,{n},{n}]",
              f"  {p}x1 = slice {cur} start=[{n - 1},0,0] stop=[{n},{n},{n}]",
              f"  {nxt} = concat {p}x0 {p}yy {p}x1 axis=0"]
        cur = nxt
    s.append(f"  return {cur}")
    return s


def fdtd2d(nx, ny, steps):
    s = header("fdtd2d", f"fdtd-2d: {steps} steps of the Yee updates of ey, ex and hz [{nx},{ny}], "
               "the source row ey[0,:] = t at step t (steps unrolled)",
               [("ex", (nx, ny)), ("ey", (nx, ny)), ("hz", (nx, ny))])
    s += scalars(half=0.5, c7=0.7)
    ex, ey, hz = "ex", "ey", "hz"
    for t in range(steps):
        p = f"s{t}_"
        s += [f"  {p}src = fill value={t} : f32[1,{ny}]",
              # ey[1:,:] -= 0.5 (hz[1:,:] - hz[:-1,:])
              f"  {p}ey1 = slice {ey} start=[1,0] stop=[{nx},{ny}]",
              f"  {p}hzd = slice {hz} start=[1,0] stop=[{nx},{ny}]",
              f"  {p}hzu = slice {hz} start=[0,0] stop=[{nx - 1},{ny}]",
              f"  {p}dy = sub {p}hzd {p}hzu", f"  {p}dyh = mul {p}dy half",
              f"  {p}eyi = sub {p}ey1 {p}dyh",
              f"  {p}ey = concat {p}src {p}eyi axis=0",
              # ex[:,1:] -= 0.5 (hz[:,1:] - hz[:,:-1])
              f"  {p}ex0 = slice {ex} start=[0,0] stop=[{nx},1]",
              f"  {p}ex1 = slice {ex} start=[0,1] stop=[{nx},{ny}]",
              f"  {p}hzr = slice {hz} start=[0,1] stop=[{nx},{ny}]",
              f"  {p}hzl = slice {hz} start=[0,0] stop=[{nx},{ny - 1}]",
              f"  {p}dx = sub {p}hzr {p}hzl", f"  {p}dxh = mul {p}dx half",
              f"  {p}exi = sub {p}ex1 {p}dxh",
              f"  {p}ex = concat {p}ex0 {p}exi axis=1",
              # hz[:-1,:-1] -= 0.7 (ex[:-1,1:] - ex[:-1,:-1] + ey[1:,:-1] - ey[:-1,:-1])
              f"  {p}xr = slice {p}ex start=[0,1] stop=[{nx - 1},{ny}]",
              f"  {p}xl = slice {p}ex start=[0,0] stop=[{nx - 1},{ny - 1}]",
              f"  {p}yd = slice {p}ey start=[1,0] stop=[{nx},{ny - 1}]",
              f"  {p}yu = slice {p}ey start=[0,0] stop=[{nx - 1},{ny - 1}]",
              f"  {p}q1 = sub {p}xr {p}xl", f"  {p}q2 = sub {p}yd {p}yu",
              f"  {p}q3 = add {p}q1 {p}q2", f"  {p}q4 = mul {p}q3 c7",
              f"  {p}hc = slice {hz} start=[0,0] stop=[{nx - 1},{ny - 1}]",
              f"  {p}hi = sub {p}hc {p}q4",
              f"  {p}hr = slice {hz} start=[0,{ny - 1}] stop=[{nx - 1},{ny}]",
              f"  {p}hm = concat {p}hi {p}hr axis=1",
              f"  {p}hb = slice {hz} start=[{nx - 1},0] stop=[{nx},{ny}]",
              f"  {p}hz = concat {p}hm {p}hb axis=0"]
        ex, ey, hz = f"{p}ex", f"{p}ey", f"{p}hz"
    s.append(f"  return {ex}, {ey}, {hz}")
    return s


# name: (builder, small arguments, benchmark arguments)
KERNELS = {
    "gemm": (gemm, (96, 80, 112), (2048, 2048, 2048)),
    "2mm": (mm2, (96,), (2048,)),
    "3mm": (mm3, (96,), (2048,)),
    "syrk": (syrk, (96, 80), (2048, 2048)),
    "syr2k": (syr2k, (96, 80), (2048, 1536)),
    "symm": (symm, (96, 112), (2048, 2048)),
    "trmm": (trmm, (96, 112), (2048, 2048)),
    "gemver": (gemver, (128,), (4096,)),
    "atax": (atax, (128, 112), (4096, 4096)),
    "bicg": (bicg, (128, 112), (4096, 4096)),
    "mvt": (mvt, (128,), (4096,)),
    "covariance": (covariance, (96, 80), (4096, 2048)),
    "correlation": (correlation, (96, 80), (4096, 2048)),
    "jacobi1d": (jacobi1d, (1000, 100), (4 << 20, 100)),
    "jacobi2d": (jacobi2d, (64, 100), (2400, 100)),
    "heat3d": (heat3d, (20, 50), (200, 50)),
    "fdtd2d": (fdtd2d, (48, 40, 50), (2048, 2048, 50)),
}


def main():
    names = sys.argv[1:] or list(KERNELS)
    for name in names:
        build, small, bench = KERNELS[name]
        for suffix, args in ((".small.lir", small), (".lir", bench)):
            lines = build(*args) + ["}", ""]
            lines.insert(0, "# generated by examples/limits/gen.py: edit that, not this file")
            with open(os.path.join(HERE, name + suffix), "w") as f:
                f.write("\n".join(lines))


if __name__ == "__main__":
    main()
