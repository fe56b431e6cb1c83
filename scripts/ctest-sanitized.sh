#!/usr/bin/env bash
# Runs ctest in a sanitizer build folder; reruns, up to twice, the tests whose only fault was
# LeakSanitizer's own crash at exit.
#
# Usage: scripts/ctest-sanitized.sh BUILD_DIR [ctest arguments...]
#
# LeakSanitizer stops every thread at exit to scan their stacks; now and then its tracer
# faults on a thread that is winding down ("Tracer caught signal 11 ... LeakSanitizer has
# encountered a fatal error", google/sanitizers#1353), here PoCL's worker threads. That is no
# finding about Loom: the test had already passed its checks. It comes with load (a test that
# crashed it twice in a row in CI passed alone every time), so such a test is rerun up to
# twice. Any other failure, in the first run or a rerun, fails the run; what was rerun is
# printed.
set -uo pipefail
build=${1:?usage: $0 BUILD_DIR [ctest arguments...]}
shift
cd "$build" || exit 2

ctest --output-on-failure "$@" && exit 0

failed=Testing/Temporary/LastTestsFailed.log
log=Testing/Temporary/LastTest.log
for attempt in 1 2; do
  [ -s "$failed" ] && [ -s "$log" ] || exit 1
  # The failed tests whose output holds the tracer's crash, from ctest's full log (blocks that
  # start "N/M Testing: NAME").
  crashed=$(awk '
    /^[0-9]+\/[0-9]+ Testing: / { name = $3 }
    /LeakSanitizer has encountered a fatal error/ && name != "" { print name; name = "" }
  ' "$log" | sort -u)
  others=""
  while IFS=: read -r _ name; do
    if ! grep -qxF "$name" <<<"$crashed"; then others="$others $name"; fi
  done <"$failed"
  if [ -n "$others" ]; then
    echo "ctest-sanitized: failed for a reason other than LeakSanitizer's tracer:$others" >&2
    exit 1
  fi
  echo "ctest-sanitized: LeakSanitizer's tracer crashed at exit in:" \
    "$(cut -d: -f2 "$failed" | tr '\n' ' ')- rerunning them (rerun $attempt of 2)" >&2
  ctest --output-on-failure --rerun-failed && exit 0
done
exit 1
