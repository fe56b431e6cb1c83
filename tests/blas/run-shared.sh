#!/usr/bin/env bash
# One dgemm through Loom's libblas.so.3 shared across two devices: the call's verbose line must
# say it ran on both (`-> ocl0,ocl1`), no Loom failure may be logged, and C must equal
# OpenBLAS's within 1e-12 (loom-bench blas --once checks it and exits 1 otherwise). Speed is
# not judged here (loom-bench blas --devices ocl0,ocl1 --versus ocl0 measures it).
#
#   usage: run-shared.sh LOOM_BENCH SHIM DEVICES N
# The environment names the devices (POCL_DEVICES="basic basic") and LOOM_BLAS_FORCE=1.
set -u
bench=$1 shim=$2 devices=$3 n=$4
log=$(mktemp)
trap 'rm -f "$log"' EXIT
LOOM_BLAS_VERBOSE=1 "$bench" blas --once --shim "$shim" --devices "$devices" --sizes "$n" 2>"$log"
rc=$?
cat "$log"
want="loom-blas: dgemm ${n}x${n}x${n} -> $devices"
on=$(grep -cxF -- "$want" "$log")
fell=$(grep -c 'Loom failed' "$log")
echo "calls '$want': $on (2 wanted: the warm-up and the timed call), Loom failures: $fell, exit $rc"
[ "$rc" = 0 ] && [ "$on" -ge 2 ] && [ "$fell" = 0 ]
