#!/bin/bash
# BUILD: the build folder whose binaries it runs (default: the checkout's build/); it builds nothing.
BUILD=${BUILD:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)/build}
# Issue 33 acceptance 3: two back-to-back quick suites, compare; then one case slowed on purpose.
cd "$BUILD" || exit 1
export POCL_DEVICES="pthread pthread"
d=${OUT:-/tmp/issue33-compare}; rm -rf $d; mkdir -p $d
echo "load before: $(cat /proc/loadavg)"
./loom-bench suite --quick --json $d/a.json > $d/a.md 2>/dev/null
./loom-bench suite --quick --json $d/b.json > $d/b.md 2>/dev/null
LOOM_BENCH_SLOW_CASE=reduce_sum ./loom-bench suite --quick --json $d/s.json > $d/s.md 2>/dev/null
echo "load after: $(cat /proc/loadavg)"
echo "== compare a b"; ./loom-bench compare $d/a.json $d/b.json > $d/ab.txt 2>&1; echo "rc=$?"
grep -E '^\| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| (SLOWER|FASTER) ' $d/ab.txt; tail -1 $d/ab.txt
echo "== compare b s (reduce_sum slowed)"; ./loom-bench compare $d/b.json $d/s.json > $d/bs.txt 2>&1; echo "rc=$?"
grep -E '\| (SLOWER|FASTER) \|' $d/bs.txt | grep '^|'; tail -1 $d/bs.txt
