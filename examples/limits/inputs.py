#!/usr/bin/python3
"""Writes random .npy inputs for one kernel of examples/limits/: one PARAM.npy per parameter of
NAME.lir (or NAME.small.lir), f32 uniform in [-1, 1) from NumPy's generator with seed 1.

usage: /usr/bin/python3 examples/limits/inputs.py NAME[.small] DIR
then:  loom-run examples/limits/NAME.lir --in PARAM=DIR/PARAM.npy ...
"""
import os
import re
import sys

import numpy as np


def params(path):
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*graph\s+\w+\((.*)\)\s*\{", line)
            if m:
                return re.findall(r"(\w+):\s*f32\[([0-9,]*)\]", m.group(1))
    sys.exit(f"{path}: no graph line")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: inputs.py NAME[.small] DIR")
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), sys.argv[1] + ".lir")
    if not os.path.exists(path):
        sys.exit(f"inputs.py: {path}: no such kernel")
    os.makedirs(sys.argv[2], exist_ok=True)
    rng = np.random.default_rng(1)
    args = []
    for name, dims in params(path):
        shape = tuple(int(d) for d in dims.split(",") if d)
        out = os.path.join(sys.argv[2], name + ".npy")
        np.save(out, rng.uniform(-1, 1, size=shape).astype(np.float32))
        args.append(f"--in {name}={out}")
    print(" ".join(args))


if __name__ == "__main__":
    main()
