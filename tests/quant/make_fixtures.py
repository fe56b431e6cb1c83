#!/usr/bin/python3
"""Writes tests/data/quant/*.npy: the NumPy references of tests/quant (docs/ir-quant.md).

Run with a Python that has NumPy (/usr/bin/python3 here); the files are committed, so the
tests need no Python. Every computation is NumPy's in float32, as Loom's kernels do it:

  scale = max|w| over the tensor or a channel / qmax      (qmax 127 for q8, 7 for q4)
  q     = clip(rint(w / scale), -qmax-1, qmax)            (rint: half to even; a 0 scale gives 0)
  d     = float32(q) * scale                              (dequantize)
  y     = x @ d

q8 values are saved as int8; q4 values packed as Loom stores them: uint8, each row of n values
in ceil(n/2) bytes, the even element in the low nibble, an odd row's last high nibble 0.
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "quant")


def quantize(w, bits, axis):
    qmax = np.float32(127 if bits == 8 else 7)
    if axis is None:
        absmax = np.abs(w).max().astype(np.float32).reshape(())
    else:
        other = tuple(a for a in range(w.ndim) if a != axis)
        absmax = np.abs(w).max(axis=other).astype(np.float32)
    scale = (absmax / qmax).astype(np.float32)
    shape = [1] * w.ndim
    if axis is not None:
        shape[axis] = -1
    s = scale.reshape(shape)
    safe = np.where(s == 0, np.float32(1), s).astype(np.float32)
    q = np.rint(w / safe).astype(np.float32)
    q = np.where(s == 0, np.float32(0), q)
    q = np.clip(q, -qmax - 1, qmax).astype(np.int8)
    d = (q.astype(np.float32) * s).astype(np.float32)
    return q, scale, d


def pack_q4(q):
    rows = q.reshape(-1, q.shape[-1]).astype(np.int16) & 15
    n = rows.shape[1]
    if n % 2:
        rows = np.concatenate([rows, np.zeros((rows.shape[0], 1), np.int16)], axis=1)
    packed = (rows[:, 0::2] | (rows[:, 1::2] << 4)).astype(np.uint8)
    return packed.reshape(q.shape[:-1] + (packed.shape[1],))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(17)
    x = rng.uniform(-2, 2, (5, 37)).astype(np.float32)
    w = rng.uniform(-2, 2, (37, 21)).astype(np.float32)
    # ties: column 0 has max 3.5, so its q4 scale is 0.5 and 0.25, 0.75, -1.25 fall on .5
    w[:, 0] = np.float32(0.25)
    w[0, 0], w[1, 0], w[2, 0], w[3, 0] = 3.5, 0.75, -1.25, -0.25
    w[:, 5] = 0  # a zero channel: its scale is 0, its values 0
    np.save(os.path.join(OUT, "x.npy"), x)
    np.save(os.path.join(OUT, "w.npy"), w)
    for bits in (8, 4):
        for axis in (None, 0, 1):
            q, scale, d = quantize(w, bits, axis)
            name = "q%d_%s" % (bits, "t" if axis is None else "a%d" % axis)
            np.save(os.path.join(OUT, name + "_q.npy"), q if bits == 8 else pack_q4(q))
            np.save(os.path.join(OUT, name + "_s.npy"), scale)
            np.save(os.path.join(OUT, name + "_d.npy"), d)
            np.save(os.path.join(OUT, name + "_y.npy"), (x @ d).astype(np.float32))


if __name__ == "__main__":
    main()
