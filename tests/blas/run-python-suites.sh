#!/bin/bash
# NumPy's and SciPy's own linear-algebra tests (Debian's python3-numpy, python3-scipy, pytest)
# over Loom's libblas.so.3 and over OpenBLAS's, each paired with netlib LAPACK (issue 30,
# acceptance 3): passes when both give the same counts ("414 passed, 1 skipped, 2 xfailed"),
# and Loom's library was the one loaded (a forced dgemm's verbose line).
#   run-python-suites.sh SHIM_DIR numpy|scipy
# Exit 77 (skipped) where /usr/bin/python3 lacks the package or pytest.
set -u
shim_dir=$1
suite=$2
py=/usr/bin/python3
lapack=/usr/lib/x86_64-linux-gnu/lapack
openblas=/usr/lib/x86_64-linux-gnu/openblas-openmp
for d in "$lapack" "$openblas"; do
  [ -e "$d/liblapack.so.3" ] || [ -e "$d/libblas.so.3" ] || { echo "skipped: $d has no library"; exit 77; }
done
$py -c "import $suite, pytest" 2>/dev/null || { echo "skipped: $py lacks $suite or pytest"; exit 77; }
root=$($py -c "import $suite, os; print(os.path.dirname($suite.__file__))")
case $suite in
  numpy) tests=("$root/linalg/tests") ;;
  scipy) tests=() && for t in test_blas test_fblas test_cython_blas test_basic test_decomp_cholesky; do
           tests+=("$root/linalg/tests/$t.py"); done ;;
  *) echo "run-python-suites.sh: unknown suite '$suite' (numpy or scipy)" >&2; exit 2 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

# The shim is the one loaded: a forced dgemm through it says where it ran.
if ! LD_LIBRARY_PATH=$shim_dir:$lapack LOOM_BLAS_FORCE=1 LOOM_BLAS_VERBOSE=1 \
  $py -c "import numpy as np; a = np.ones((64, 64)); assert (a @ a)[0, 0] == 64" 2>&1 | grep -q "loom-blas: dgemm 64x64x64 ->"; then
  echo "FAIL: numpy did not load $shim_dir/libblas.so.3"
  exit 1
fi
# pytest's last line without its time: "414 passed, 1 skipped, 2 xfailed"
counts() {
  LD_LIBRARY_PATH=$1:$lapack $py -m pytest -q -p no:cacheprovider "${tests[@]}" > "$work/$2.log" 2>&1
  tail -n 1 "$work/$2.log" | sed -e 's/=//g' -e 's/ in [0-9.]*s.*//' -e 's/^ *//;s/ *$//'
}
loom=$(counts "$shim_dir" loom)
ref=$(counts "$openblas" openblas)
echo "$suite over Loom's libblas.so.3: $loom"
echo "$suite over OpenBLAS:            $ref"
if [ -z "$loom" ] || [ "$loom" != "$ref" ] || ! echo "$loom" | grep -q passed; then
  echo "FAIL: the counts differ; Loom's run:"
  grep -E "FAILED|Error" "$work/loom.log" | head -20
  exit 1
fi
