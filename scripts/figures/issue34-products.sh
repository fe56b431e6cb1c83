#!/bin/sh
# BUILD: the build folder whose binaries it runs (default: the checkout's build/); it builds nothing.
BUILD=${BUILD:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)/build}
# tiles (issue 34, products): loom-bench limits on the products and mat-vec kernels at their
# benchmark sizes, cpu0, best of 3 after a warm-up; ratio = whole time / limited time, measured
# in the same run. Goals: products >= 0.6 at 1/8 (gemm, 2mm, 3mm, syrk, syr2k, symm, trmm),
# mvt >= 0.5 at 1/8, gemm >= 0.5 at 1/32 and >= 0.25 at 1/128. Builds nothing: uses $BUILD.
set -e
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
exec timeout 240 "$BUILD"/loom-bench limits --kernels gemm,2mm,3mm,mvt,syrk,syr2k,symm,trmm --repeats 3
