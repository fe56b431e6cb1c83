#!/usr/bin/env bash
# Issue 31's second acceptance point: every case that passes on DEVICE runs again as a plan
# under a limit of 1/DIV of its graph's naive peak; results must equal ONNX's within the same
# tolerances, every stage's measured peak be at most its limit and equal to its estimate. Each
# case runs in a process of its own, so a crash in the planner ends only that case (it is
# counted as failed, with its exit status).
#   usage: tests/onnx/run_limited.sh BUILD_DIR [DIV=4] [DEVICE=cpu0]
set -u
bin=$1/tests/test_onnx
div=${2:-4}
export LOOM_ONNX_DEVICE=${3:-cpu0} LOOM_STAGE_HISTORY=0 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" conformance | sed -n 's/^\([^ ]*\): passed$/\1/p' > "$work/cases"
passed=0 failed=0 refused=0
while read -r c; do
  LOOM_ONNX_CASES="=$c" LOOM_ONNX_LIMIT_DIV=$div "$bin" conformance > "$work/out" 2>&1
  rc=$?
  line=$(grep "^  under 1/" "$work/out")
  [ -n "$line" ] || line="  under 1/$div: FAILED: the run ended with status $rc before its result"
  echo "$c"
  echo "$line"
  case "$line" in
    *": passed"*) passed=$((passed + 1)) ;;
    *": not planned"*) refused=$((refused + 1)) ;;
    *) failed=$((failed + 1)) ;;
  esac
done < "$work/cases"
echo "onnx under 1/$div on $LOOM_ONNX_DEVICE: $passed passed, $failed failed, $refused refused by the planner"
[ "$failed" -eq 0 ]
