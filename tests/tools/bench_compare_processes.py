#!/usr/bin/python3
"""Writes two loom-bench suite reports, a.json and b.json, of runs in 7 processes each, whose
cases are the situations loom-bench compare's rules between processes are for (docs/bench.md,
"compare"); check_bench_compare_processes.cmake compares them and checks each verdict.

  fft         Loom and its library (FFTW) share a speed per process, 30 or 45 us: A's processes
              mixed, all of B's slow. Every process of B is slower than every process of A, but
              Loom's time over FFTW held process by process: "machine".
  reduce_sum  Loom 3x slower in every process of B; its witness (a small GEMM run beside it)
              moved 1.75x in one process of B only: the witness did not move in every process,
              so it cannot clear the flag: SLOWER.
  add         Loom and its witness both 1.5x slower in every process of B (a busier machine):
              the witness moved in every process and the ratio held: "machine".
  topk        B 1.4x slower in every run, but one process of A ran at 1.5x: B's fastest process
              is not beyond A's slowest: "noise", though B's fastest run is 1.39x A's median.
  latency     the same speeds in both: no verdict.

Usage: bench_compare_processes.py DIR
"""
import json
import os
import statistics
import sys


def runs(medians, spread=0.004):
    """Three runs a process around each of its medians: (times, per-process counts)."""
    times = []
    for m in medians:
        times += [m * (1 - spread), m, m * (1 + spread)]
    return times, [3] * len(medians)


def side(prefix, times):
    med = statistics.median(times)
    mad = statistics.median(abs(t - med) for t in times)
    return {prefix + "samples": len(times), prefix + "min": min(times), prefix + "median": med,
            prefix + "mad": mad, prefix + "dispersion": mad / med, prefix + "times": times}


def case(name, loom, peer=None, library=None):
    times, counts = runs(loom)
    c = {"name": name, "dtype": "f32", "size": "1", "seconds": statistics.median(times),
         "processes": counts, "library": library, "witness": None, "error": None}
    c.update(side("", times))
    if peer is not None:
        p, _ = runs(peer)
        if library:
            c.update(side("library_", p))
            c["library_seconds"] = statistics.median(p)
            c["ratio"] = c["library_seconds"] / c["seconds"]
        else:
            c["witness"] = "OpenBLAS SGEMM 64^3"
            c.update(side("witness_", p))
    return c


def report(cases):
    return {"schema": "loom-bench-suite/2", "loom_version": "0.1.0", "profile": "quick",
            "machine": {"cpu_model": "test", "uarch": "test", "isa": "test", "cores": 2},
            "environment": {}, "load_before": [0.1, 0.1, 0.1], "load_after": [0.1, 0.1, 0.1],
            "stop": {"passes": 7, "processes": 7},
            "devices": [{"id": "cpu0", "name": "test", "vendor": "test", "driver": "",
                         "cases": cases}]}


us = 1e-6
fast, slow = [30 * us] * 7, [45 * us] * 7
mixed = [30 * us, 45 * us, 30 * us, 30 * us, 45 * us, 30 * us, 45 * us]
a = [case("fft", [x * 1.00 for x in mixed], [x * 0.97 for x in mixed], "FFTW"),
     case("reduce_sum", [100 * us] * 7, [5 * us] * 7),
     case("add", [100 * us] * 7, [5 * us] * 7),
     case("topk", [100 * us] * 6 + [150 * us]),
     case("latency", [1 * us] * 7)]
b = [case("fft", [x * 1.01 for x in slow], [x * 0.98 for x in slow], "FFTW"),
     case("reduce_sum", [300 * us] * 7, [5 * us] * 6 + [8.75 * us]),
     case("add", [150 * us] * 7, [7.5 * us] * 7),
     case("topk", [140 * us] * 7),
     case("latency", [1 * us] * 7)]
for name, r in (("a", a), ("b", b)):
    with open(os.path.join(sys.argv[1], name + ".json"), "w") as f:
        json.dump(report(r), f)
