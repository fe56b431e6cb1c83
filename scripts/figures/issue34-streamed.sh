#!/bin/sh
# BUILD: the build folder whose binaries it runs (default: the checkout's build/); it builds nothing.
BUILD=${BUILD:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)/build}
# Issue 34, tasks "stream" and "covar": gemver, covariance and correlation at 1/8 of their need
# on cpu0, and the matrix-vector pairs atax, bicg and mvt beside them (they must not regress),
# each beside its own whole run in the same process (ratio = whole time / limited time, best of
# 3 after a warm-up). Goals: covariance and correlation >= 0.6 (products), gemver, atax, bicg
# and mvt >= 0.5 (matrix-vector pairs). Builds nothing: uses $BUILD/loom-bench. About 15-30 s
# on an idle machine.
set -e
B=$BUILD
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
uptime
"$B/loom-bench" limits --kernels covariance,correlation,gemver,atax,bicg,mvt --repeats 3
