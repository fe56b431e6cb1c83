#!/usr/bin/env bash
# Runs Debian's reference BLAS test programs (libblas-test) over Loom's libblas.so.3 and fails
# when any routine fails. Each program must exit 0, print no failure line ("FAIL", "*****",
# "INSTEAD OF"), and pass as many routines (computational tests and error exits) as it has.
# With a device, LOOM_BLAS_VERBOSE=1 is set and each level-3 program must have run calls on
# that device, and none may have fallen back after a Loom failure; in c and z, each of the
# conjugating routines (hemm, herk, her2k) must have run calls there too, so that a regression
# sending them to the host BLAS fails.
#
#   usage: run-reference.sh SHIM_DIR OUT_DIR LEVELS PRECISIONS [DEVICE]
#          LEVELS: e.g. 123 or 3; PRECISIONS: e.g. sdcz or d
# Exits 77 (skipped) where libblas-test is not installed.
set -u
shim=$1 out=$2 levels=$3 precs=$4 device=${5:-}
bin=/usr/lib/x86_64-linux-gnu/blas
if [ ! -x "$bin/xblat1d" ] || [ ! -x "$bin/xdcblat3" ]; then
  echo "libblas-test is not installed ($bin/xblat1d): skipped"
  exit 77
fi
mkdir -p "$out" && cd "$out" || exit 1
export LD_LIBRARY_PATH=$shim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -n "$device" ] && export LOOM_BLAS_VERBOSE=1

# Routines per program, as reference BLAS 3.11 has them: level 1 (s d c z), 2, 3.
declare -A routines=([1s]=13 [1d]=13 [1c]=10 [1z]=10 [2s]=16 [2d]=16 [2c]=17 [2z]=17
                     [3s]=6 [3d]=6 [3c]=9 [3z]=9 [c1]=10)
failed=0

# check NAME FILE COMPUTATIONAL ERROR_EXITS RC LOG LEVEL PRECISION
check() {
  local name=$1 file=$2 want=$3 want_err=$4 rc=$5 log=$6 level=$7 prec=$8
  local pass err bad on fell r n
  pass=$(grep -cE -- '----- PASS -----|PASSED THE ((COLUMN|ROW)-MAJOR +)?COMPUTATIONAL TESTS' "$file")
  err=$(grep -c 'PASSED THE TESTS OF ERROR-EXITS' "$file")
  bad=$(grep -ciE 'FAIL|\*\*\*\*\*|INSTEAD OF' "$file")
  local verdict=ok
  if [ "$rc" != 0 ] || [ "$bad" != 0 ] || [ "$pass" -lt "$want" ] || [ "$err" -lt "$want_err" ]; then
    verdict=FAILED
  fi
  local extra=""
  if [ -n "$device" ] && [ "$level" = 3 ]; then
    on=$(grep -c -- "-> $device\$" "$log")
    fell=$(grep -c 'Loom failed' "$log")
    extra=" calls on $device: $on, Loom failures: $fell"
    if [ "$on" = 0 ] || [ "$fell" != 0 ]; then verdict=FAILED; fi
    if [ "$prec" = c ] || [ "$prec" = z ]; then
      for r in hemm herk her2k; do
        n=$(grep -c -- "^loom-blas: $prec$r .*-> $device\$" "$log")
        extra="$extra, $prec$r: $n"
        if [ "$n" = 0 ]; then verdict=FAILED; fi
      done
    fi
  fi
  echo "$name: exit $rc, passed $pass of $want computational, $err of $want_err error exits, $bad failure lines$extra: $verdict"
  if [ "$verdict" != ok ]; then
    failed=1
    grep -iE 'FAIL|\*\*\*\*\*|INSTEAD OF|Loom failed' "$file" "$log" | head -20
  fi
}

for p in $(echo "$precs" | grep -o .); do
  for l in $(echo "$levels" | grep -o .); do
    case $l in
      1)
        "$bin/xblat1$p" > "x1$p.txt" 2> "x1$p.log"; rc=$?
        check "xblat1$p" "x1$p.txt" "${routines[1$p]}" 0 $rc "x1$p.log" 1 "$p"
        "$bin/x${p}cblat1" > "c1$p.txt" 2> "c1$p.log"; rc=$?
        check "x${p}cblat1" "c1$p.txt" "${routines[c1]}" 0 $rc "c1$p.log" 1 "$p" ;;
      2 | 3)
        n=${routines[$l$p]}
        rm -f "${p}blat$l.out"
        "$bin/xblat$l$p" < "$bin/${p}blat$l.in" > "x$l$p.txt" 2> "x$l$p.log"; rc=$?
        check "xblat$l$p" "${p}blat$l.out" "$n" "$n" $rc "x$l$p.log" $l "$p"
        "$bin/x${p}cblat$l" < "$bin/${p}in$l" > "c$l$p.txt" 2> "c$l$p.log"; rc=$?
        check "x${p}cblat$l" "c$l$p.txt" $((2 * n)) "$n" $rc "c$l$p.log" $l "$p" ;;
    esac
  done
done
exit $failed
