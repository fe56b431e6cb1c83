#!/bin/bash
# Reference LAPACK's linear-equation tests (Debian's liblapack-test: xlintst[sdcz] < [sdcz]test.in)
# over Loom's libblas.so.3 and over OpenBLAS's, each under netlib LAPACK (issue 30, acceptance
# 2): passes when every precision ends its tests and Loom's run has no failure line that
# OpenBLAS's run lacks (single precision's STR: 104 of 8008 under the threshold in both).
#   run-lapack-lin.sh SHIM_DIR [PRECISIONS]      (default sdcz; exit 77 without the package)
set -u
shim_dir=$1
precisions=${2:-sdcz}
lapack=/usr/lib/x86_64-linux-gnu/lapack
openblas=/usr/lib/x86_64-linux-gnu/openblas-openmp
[ -x "$lapack/xlintstd" ] && [ -e "$openblas/libblas.so.3" ] || { echo "skipped: liblapack-test or OpenBLAS missing"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
status=0
for ((i = 0; i < ${#precisions}; i++)); do
  p=${precisions:i:1}
  for side in loom:$shim_dir openblas:$openblas; do
    OMP_NUM_THREADS=1 LD_LIBRARY_PATH=${side#*:}:$lapack "$lapack/xlintst$p" < "$lapack/${p}test.in" > "${side%%:*}-$p.out" 2>&1
  done
  passed=$(grep -c "passed the threshold" loom-$p.out)
  failed=$(grep "failed to pass" loom-$p.out | sort)
  echo "$p over Loom's libblas.so.3: $passed groups passed the threshold, ${failed:-no failures}"
  if ! grep -q "End of tests" loom-$p.out; then
    echo "FAIL: xlintst$p over Loom did not end its tests:"; tail -5 loom-$p.out; status=1
  elif [ "$passed" != "$(grep -c 'passed the threshold' openblas-$p.out)" ] ||
       [ "$failed" != "$(grep 'failed to pass' openblas-$p.out | sort)" ]; then
    echo "FAIL: xlintst$p differs from its run over OpenBLAS:"; diff <(grep -E "threshold" openblas-$p.out) <(grep -E "threshold" loom-$p.out) | head -10; status=1
  fi
done
exit $status
