#!/usr/bin/env bash
# Rewrites the example outputs of README.md and docs/*.md (each fenced block under a
# `<!-- docs-example: COMMAND -->` marker) with what COMMAND prints now, run with the tools of
# a build folder. `--check` writes nothing and fails where a block no longer matches (times,
# dates and machine names masked): the ctest `docs` runs that. See scripts/docs-examples.py.
#   usage: scripts/update-docs.sh [--check] [BUILD_DIR] [FILE.md ...]    (default BUILD_DIR: build)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
check=()
if [ "${1:-}" = "--check" ]; then
  check=(--check)
  shift
fi
build=${1:-$root/build}
[ $# -gt 0 ] && shift
if [ ! -x "$build/loom-run" ]; then
  echo "update-docs: $build/loom-run not found: build the tools first (cmake --build $build)" >&2
  exit 2
fi
exec /usr/bin/python3 "$root/scripts/docs-examples.py" --build "$build" "${check[@]}" "$@"
