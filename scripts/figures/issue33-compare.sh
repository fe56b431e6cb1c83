#!/bin/bash
# BUILD: the build folder whose binaries it runs (default: the checkout's build/); it builds nothing.
BUILD=${BUILD:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)/build}
# Issue 33 acceptance 3: two back-to-back quick suites, compare; then one case slowed on purpose.
# Each suite runs its passes in 7 processes (the default --processes); about 3 x 1 min idle.
cd "$BUILD" || exit 1
export POCL_DEVICES="pthread pthread"
d=${OUT:-/tmp/issue33-compare}; rm -rf $d; mkdir -p $d
echo "load before: $(cat /proc/loadavg)"
for run in a b s; do
  slow=; [ $run = s ] && slow=reduce_sum
  t0=$(date +%s.%N)
  LOOM_BENCH_SLOW_CASE=$slow ./loom-bench suite --quick --json $d/$run.json > $d/$run.md 2>$d/$run.err
  echo "suite $run${slow:+ ($slow slowed)}: exit $?, $(awk "BEGIN { printf \"%.0f\", $(date +%s.%N) - $t0 }") s"
done
echo "load after: $(cat /proc/loadavg)"
# the flagged rows' device, case, dtype, size and verdict
flags() { grep -E '^\| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| (SLOWER|FASTER) ' "$1" |
  awk -F' [|] ' '{sub(/^\| /, "", $1); printf "%s %s %s %s %s\n", $1, $2, $3, $4, $8}'; }
echo "== compare a b"; ./loom-bench compare $d/a.json $d/b.json > $d/ab.txt 2>&1; echo "rc=$?"
grep -E '^\| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| (SLOWER|FASTER) ' $d/ab.txt; tail -1 $d/ab.txt
echo "== compare b s (reduce_sum slowed)"; ./loom-bench compare $d/b.json $d/s.json > $d/bs.txt 2>&1; echo "rc=$?"
grep -E '\| (SLOWER|FASTER) \|' $d/bs.txt | grep '^|'; tail -1 $d/bs.txt
# The right answer: nothing flagged back to back; with reduce_sum slowed, reduce_sum SLOWER on
# every device of the report and nothing else.
ab=$(flags $d/ab.txt); bs=$(flags $d/bs.txt)
devices=$(grep -o '"id": "[^"]*"' $d/s.json | sort -u | grep -c .)
want=$(grep -cE '^\| [^|]+ \| reduce_sum \| f32 ' $d/bs.txt)
ok_ab=$([ -z "$ab" ] && echo yes || echo no)
ok_bs=$([ "$(echo "$bs" | grep -c .)" = "$want" ] && [ "$want" = "$devices" ] &&
  ! echo "$bs" | grep -qv ' reduce_sum f32 .* SLOWER$' && echo yes || echo no)
echo "== a-b flagged: ${ab:-nothing}" | paste -sd';'
echo "== b-s flagged: ${bs:-nothing}" | paste -sd';'
echo "== right answer: back to back $ok_ab; reduce_sum slowed $ok_bs (expected reduce_sum SLOWER on $devices devices)"
