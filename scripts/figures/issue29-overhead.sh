#!/bin/bash
# BUILD: the build folder whose binaries it runs (default: the checkout's build/); it builds nothing.
BUILD=${BUILD:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)/build}
# Issue 29, acceptance 5: per-op overhead, kNN and kmv of HEAD (NEW, $BUILD) against
# f534f4f, the tree before the architecture change (OLD: its loom-bench, built apart, e.g.
# `git worktree add /tmp/arch-old f534f4f`, then cmake -DLOOM_CUDA=OFF and the loom-bench target
# in /tmp/arch-old/build, the default), on cpu0.
# Builds nothing. Each benchmark runs as whole processes, NEW and OLD alternating (A B A B, 3 pairs);
# prints every run's figure, the medians and NEW / OLD (above 1: NEW slower). About 2 minutes idle.
# Goal: every NEW / OLD at or under about 1.0 (within the run-to-run spread, 5-10% here).
# FIX=PATH (optional) runs a third binary in each round (A B C A B C) and prints FIX / OLD too.
# Per op over placements: the per-op figure moves by up to 0.04 us (18%) when the same objects are
# linked 16 bytes further (docs/sched.md, "Where the time went"), so one binary's figure compares
# code placements as much as code. PLACED (optional, default none) names a folder that holds
# loom-bench of both trees relinked behind 0..2048 bytes of padding (lb-new-P, lb-old-P, from
# the same build folders' objects: docs/sched.md says how); each placement runs once a side,
# alternating, and the medians over the placements are compared. Since 0a68fb6 the per-op path
# is in .text.hot (LOOM_HOT), which the linker places before .text: a new tree's padding must be
# a function marked hot (`__attribute__((hot))`) to move it.
set -u
NEW=${NEW:-$BUILD/loom-bench}
OLD=${OLD:-/tmp/arch-old/build/loom-bench}
PAIRS=${PAIRS:-3}
FIX=${FIX-}
[ -n "$FIX" ] && [ ! -x "$FIX" ] && FIX=
for b in "$NEW" "$OLD"; do
  [ -x "$b" ] || { echo "measure-arch: $b is missing (build loom-bench there first)" >&2; exit 1; }
done
# The working tree's knn may run FAISS beside Loom by default; neither side should here.
peer_none() { "$1" knn --help 2>&1 | grep -q -- '--peer' && echo "--peer none"; }
NEW_KNN_EXTRA=$(peer_none "$NEW")
OLD_KNN_EXTRA=$(peer_none "$OLD")
FIX_KNN_EXTRA=$([ -n "$FIX" ] && peer_none "$FIX")
PLACED=${PLACED-}
PADS="0 16 32 48 64 128 256 512 1024 2048"
[ -n "$PLACED" ] && [ ! -x "$PLACED/lb-new-0" -o ! -x "$PLACED/lb-old-0" ] && PLACED=
tmp=$(mktemp -d /tmp/measure-arch.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
echo "measure-arch: NEW $NEW, OLD $OLD${FIX:+, FIX $FIX}, $PAIRS rounds; $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"

# run NAME SIDE BINARY ARGS...: one process, its output kept as $tmp/NAME.SIDE.N
run() {
  local name=$1 side=$2 bin=$3
  shift 3
  local n=$(ls "$tmp" | grep -c "^$name\.$side\.")
  "$bin" "$@" > "$tmp/$name.$side.$n" 2>&1 || echo "measure-arch: $name $side run $n failed (rc $?)" >&2
}
for i in $(seq "$PAIRS"); do
  run overhead new "$NEW" overhead --devices cpu0 --no-python --repeats 5
  run overhead old "$OLD" overhead --devices cpu0 --no-python --repeats 5
  [ -n "$FIX" ] && run overhead fix "$FIX" overhead --devices cpu0 --no-python --repeats 5
done
if [ -n "$PLACED" ]; then
  for pad in $PADS; do
    run placed new "$PLACED/lb-new-$pad" overhead --devices cpu0 --no-python --repeats 50 --loop-n 0
    run placed old "$PLACED/lb-old-$pad" overhead --devices cpu0 --no-python --repeats 50 --loop-n 0
  done
fi
for i in $(seq "$PAIRS"); do
  run kmv new "$NEW" kmv --n 10000,30000 --unfused-max 1 --repeats 3
  run kmv old "$OLD" kmv --n 10000,30000 --unfused-max 1 --repeats 3
  [ -n "$FIX" ] && run kmv fix "$FIX" kmv --n 10000,30000 --unfused-max 1 --repeats 3
done
for i in $(seq "$PAIRS"); do
  run knn new "$NEW" knn --n 20000 --m 20000 --limits 16MiB --repeats 3 $NEW_KNN_EXTRA
  run knn old "$OLD" knn --n 20000 --m 20000 --limits 16MiB --repeats 3 $OLD_KNN_EXTRA
  [ -n "$FIX" ] && run knn fix "$FIX" knn --n 20000 --m 20000 --limits 16MiB --repeats 3 $FIX_KNN_EXTRA
done

/usr/bin/python3 - "$tmp" <<'EOF'
import os, re, statistics, sys
d = sys.argv[1]
def figures(name, side):
    """Each run's figures of one side, as {figure: value}."""
    runs = []
    for f in sorted(os.listdir(d)):
        m = re.match(r'%s\.%s\.(\d+)$' % (name, side), f)
        if not m:
            continue
        fig = {}
        for line in open(os.path.join(d, f)):
            w = line.split()
            if name in ('overhead', 'placed') and w[:1] == ['cpu0']:
                fig['per op (us)'] = float(w[1])
                fig['per run (us)'] = float(w[3])
            elif name == 'kmv' and len(w) > 2 and w[1] == 'fused' and w[0].isdigit():
                fig['fused N=%s (s)' % w[0]] = float(w[2])
            elif name == 'knn' and w[:1] == ['unchunked']:
                fig['unchunked (s)'] = float(w[2]); fig['unchunked cpu (s)'] = float(w[3])
            elif name == 'knn' and len(w) > 4 and w[1] == 'MiB':
                fig['%s MiB (s)' % w[0]] = float(w[3]); fig['%s MiB cpu (s)' % w[0]] = float(w[4])
        runs.append(fig)
    return runs
def runs_text(v):
    runs = ' '.join('%g' % x for x in v) if len(v) <= 4 else '%g..%g' % (min(v), max(v))
    return runs + ' -> %g' % statistics.median(v)
for name in ('overhead', 'placed', 'kmv', 'knn'):
    new, old, fix = figures(name, 'new'), figures(name, 'old'), figures(name, 'fix')
    keys = [k for k in (new[0] if new else {}) if all(k in r for r in new + old + fix)]
    if not keys:
        print('%s: no figures read (see the runs\' output)' % name)
        continue
    if name == 'placed':
        print('\noverhead at %d placements of the same objects (0..2048 bytes of padding linked first; median over them)' % len(new))
    else:
        print('\n%s (medians of %d processes a side; each figure is its process\'s own)' % (name, len(new)))
    head = '  %-22s %-26s %-26s %8s' % ('figure', 'NEW runs -> median', 'OLD runs -> median', 'NEW/OLD')
    print(head + ('  %-26s %8s' % ('FIX runs -> median', 'FIX/OLD') if fix else ''))
    for k in keys:
        a, b = [r[k] for r in new], [r[k] for r in old]
        mb = statistics.median(b)
        line = '  %-22s %-26s %-26s %8.2f' % (k, runs_text(a), runs_text(b), statistics.median(a) / mb)
        if fix:
            c = [r[k] for r in fix]
            line += '  %-26s %8.2f' % (runs_text(c), statistics.median(c) / mb)
        print(line)
EOF
