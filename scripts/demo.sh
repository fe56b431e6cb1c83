#!/usr/bin/env bash
# `make run`: what this machine has (loom-info), then IR.md's kNN example (examples/knn.lir:
# for each of 20000 points, the 10 nearest of 30000) with seeded random inputs under a 64 MiB
# limit: Loom rewrites the 13.4 GiB graph (pairwise distance -> a dot) and chunks it so its
# peak stays under the limit. Prints the rewrites, the estimated and measured peaks, the time
# and the first rows of each result, and leaves the results in BUILD_DIR/demo.
#   usage: scripts/demo.sh [BUILD_DIR]     (default: build)
#   env:   DEMO_LIMIT (default 64MiB)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
tool=$build/loom-run
graph=$root/examples/knn.lir
out=$build/demo
limit=${DEMO_LIMIT:-64MiB}

if [ ! -x "$tool" ]; then
  echo "demo: $tool is missing; build first (make build, or cmake --build $build)" >&2
  exit 1
fi

echo "+ loom-info"
"$build/loom-info" || true
echo
echo "+ loom-run examples/knn.lir --random 1 --limit $limit --out-dir $out --print 5"
"$tool" "$graph" --random 1 --limit "$limit" --out-dir "$out" --print 5
