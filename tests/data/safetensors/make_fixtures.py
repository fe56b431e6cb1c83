#!/usr/bin/env python3
"""Writes the .safetensors (and .npy) fixtures of Loom's tests with the standard library only
(struct, json): a writer independent of Loom's, following the format as huggingface/safetensors
documents it (8-byte little-endian header length, JSON header, data section).

    python3 make_fixtures.py OUT_DIR

The files are committed (tests must not need Python); rerun this after changing it:
    python3 tests/data/safetensors/make_fixtures.py tests/data/safetensors
    (tools' inputs:) python3 tests/data/safetensors/make_fixtures.py --tools tests/tools/data

Values are simple functions of the element index i, which the C tests recompute:
  floats (F64 F32 F16 BF16): i * 0.5 - 1     (exact in every one of them)
  C64: real i * 0.5 - 1, imaginary -i
  signed ints: i * 3 - 5     U8: i * 3 + 1     BOOL: i % 2
"""
import json
import os
import struct
import sys


def values(dtype, n):
    out = []
    for i in range(n):
        if dtype in ("F64", "F32", "F16", "BF16"):
            out.append(i * 0.5 - 1)
        elif dtype == "C64":
            out.append((i * 0.5 - 1, -float(i)))
        elif dtype == "U8":
            out.append(i * 3 + 1)
        elif dtype == "BOOL":
            out.append(i % 2)
        else:
            out.append(i * 3 - 5)
    return out


def encode(dtype, vals):
    if dtype == "BF16":  # the top half of the f32 bits (exact for these values)
        return b"".join(struct.pack("<H", struct.unpack("<I", struct.pack("<f", v))[0] >> 16) for v in vals)
    if dtype == "C64":
        return b"".join(struct.pack("<ff", re, im) for re, im in vals)
    fmt = {"F64": "d", "F32": "f", "F16": "e", "I64": "q", "I32": "i", "I16": "h", "I8": "b",
           "U8": "B", "BOOL": "B"}[dtype]
    return struct.pack("<%d%s" % (len(vals), fmt), *vals)


def count(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def write(path, tensors, metadata=None, pad_to=8, keys_order=None, indent=None):
    """tensors: [(name, dtype, shape, data bytes)] laid out in this order, back to back."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    entries = {}
    for name, dtype, shape, raw in tensors:
        entries[name] = {"data_offsets": [len(data), len(data) + len(raw)], "shape": shape, "dtype": dtype}
        data += raw
    for name in keys_order or entries:
        header[name] = entries[name]
    text = json.dumps(header, ensure_ascii=True, indent=indent).encode("utf-8")
    text += b" " * ((-(8 + len(text))) % pad_to)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.write(data)


def npy(path, fmt, shape, raw):
    """A .npy 1.0 file (for the tools' reference runs)."""
    d = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        fmt, "".join("%d, " % s for s in shape).rstrip(" "))
    d += " " * ((-(10 + len(d) + 1)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode("latin1") + raw)


def library_fixtures(out):
    # Every dtype, [2,3]; laid out largest element first (as the Python library does), so all
    # are aligned; the header lists them in another order, indented, with metadata and escapes.
    dtypes = ["C64", "F64", "I64", "F32", "I32", "F16", "BF16", "I16", "I8", "U8", "BOOL"]
    tensors = [("t_" + dt.lower(), dt, [2, 3], encode(dt, values(dt, 6))) for dt in dtypes]
    tensors.insert(0, ("scalar", "F64", [], encode("F64", [2.5])))
    tensors.append(("\u00e9t\u00e9 \"q\"", "F32", [0, 4], b""))  # empty, escaped name
    names = [t[0] for t in tensors]
    write(os.path.join(out, "dtypes.safetensors"), tensors,
          metadata={"format": "pt", "note": "caf\u00e9 \"quoted\"\n"},
          keys_order=list(reversed(names)), indent=1)
    # Tensors at offsets their dtype does not divide: u8[3] first, then f32 and i16 unaligned.
    write(os.path.join(out, "misaligned.safetensors"),
          [("a", "U8", [3], encode("U8", values("U8", 3))),
           ("b", "F32", [2, 2], encode("F32", values("F32", 4))),
           ("c", "I16", [3], encode("I16", values("I16", 3)))])


def tools_fixtures(out):
    # small.lir's x: f32[4,3] and y: f32[5,3]; y lies after a 2-byte u8 tensor, misaligned,
    # so loom-run both maps (x) and copies (y). The same values as .npy for the reference run.
    x = [((i * 7) % 11) * 0.25 - 1 for i in range(12)]
    y = [((i * 5) % 13) * 0.125 - 0.5 for i in range(15)]
    xr, yr = struct.pack("<12f", *x), struct.pack("<15f", *y)
    write(os.path.join(out, "small.safetensors"),
          [("x", "F32", [4, 3], xr), ("flag", "U8", [2], bytes([1, 0])), ("y", "F32", [5, 3], yr)],
          metadata={"made_by": "make_fixtures.py"})
    npy(os.path.join(out, "small_x.npy"), "<f4", [4, 3], xr)
    npy(os.path.join(out, "small_y.npy"), "<f4", [5, 3], yr)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--tools"]:
        tools_fixtures(args[1])
    elif len(args) == 1:
        library_fixtures(args[0])
    else:
        sys.exit(__doc__)
