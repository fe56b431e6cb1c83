#!/usr/bin/env bash
# BUILD: the build folder whose binaries it runs (default: the checkout's build/); it builds nothing.
BUILD=${BUILD:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)/build}
# Issue 35 acceptance 5 (task kern): three figures, each with its peer or peak measured in the same
# run, from $BUILD's loom-bench (builds nothing). About 3 minutes on an idle
# 2-core machine. Goals: kNN d=128 under 64 MiB >= 2.00x FAISS ('faiss x' column of the 64 MiB
# row); kNN d=3 2e5 under 64 MiB >= 20% 'of peak' (3d flops per pair over the FMA loop measured
# first); kmv N=1e5 under 64 MiB >= 35% 'of peak' (13 flops per pair over the same FMA loop).
# BLOCKS: which of the three to run (default: all), e.g. BLOCKS=3 for kmv alone (well under a minute).
set -euo pipefail
b=$BUILD/loom-bench
blocks=" ${BLOCKS:-1 2 3} "
export OMP_PROC_BIND=spread OMP_PLACES=cores
if [[ $blocks == *" 1 "* ]]; then
echo "== kNN 1e5 x 1e5, d=128, k=10 under 64 MiB, FAISS IndexFlatL2 in the same run (1 warm-up + 1 timed each side)"
"$b" knn --n 100000 --m 100000 --d 128 --k 10 --limits 64MiB --repeats 1 --no-unchunked
fi
if [[ $blocks == *" 2 "* ]]; then
echo "== kNN 2e5 x 2e5, d=3, k=10 under 64 MiB: of peak (goal >= 20%)"
"$b" knn --n 200000 --m 200000 --d 3 --k 10 --limits 64MiB --repeats 2 --no-unchunked --peer none
fi
if [[ $blocks == *" 3 "* ]]; then
echo "== kmv N=1e5, d=3 under 64 MiB: of peak (goal >= 35%)"
"$b" kmv --n 100000 --limit 64MiB --repeats 3 --unfused-max 1
fi
