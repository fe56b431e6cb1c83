#!/bin/sh
# BUILD: the build folder whose binaries it runs (default: the checkout's build/); it builds nothing.
BUILD=${BUILD:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)/build}
# Issue 34, task "stencil": the four time-stepped stencils (jacobi-1d and 2-D over 100 steps,
# heat-3d and fdtd-2d over 50) at 1/8 of their need on cpu0, cut by the halo cut
# (docs/limits.md "Halos"), each beside its own whole run in the same process (ratio = whole
# time / limited time, best of 3 after a warm-up), with the estimated and measured peaks and the
# results against the whole run. Goal: ratio >= 0.25, results equal, estimate = measured peak.
# jacobi-2d's pieces are sized on its fused body; heat-3d runs in groups of steps, one stage each
# (a grid passes its limit), the grids between them in host memory; fdtd-2d is one loop.
# Builds nothing: uses $BUILD/loom-bench. About 1-2 min on an idle machine.
set -e
B=$BUILD
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
uptime
"$B/loom-bench" limits --kernels jacobi1d,jacobi2d,heat3d,fdtd2d --repeats 3
