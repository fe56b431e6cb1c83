#!/bin/sh
# BUILD: the build folder whose binaries it runs (default: the checkout's build/); it builds nothing.
BUILD=${BUILD:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)/build}
# Issue 34, task "stream": gemver, covariance and correlation at 1/8 of their need on cpu0,
# each beside its own whole run in the same process (ratio = whole time / limited time, best of
# 3 after a warm-up). Goals: covariance and correlation >= 0.6 (products), gemver >= 0.5 (a
# matrix-vector pair). Builds nothing: uses $BUILD/loom-bench. About 10-20 s
# on an idle machine.
set -e
B=$BUILD
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
uptime
"$B/loom-bench" limits --kernels gemver,covariance,correlation --repeats 3
