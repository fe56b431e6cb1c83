#!/usr/bin/env bash
# Checks that every C source and header of the library, tools, tests and examples follows the
# repository's .clang-format; with --fix, rewrites them in place (`make format`).
# The check is pinned to Debian 12's clang-format 14: other major versions lay out some
# constructs differently, so there it exits 77 (ctest's "skipped") rather than fail on style.
# Kernels (.cl, .cu) are left alone: clang-format only guesses at OpenCL C and CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
[ "${1:-}" = "--fix" ] && fix=1
cf=${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format || true)}
if [ -z "$cf" ]; then
  echo "check-format: skipped: clang-format not found (scripts/install-deps.sh installs it)"
  exit 77
fi
version=$("$cf" --version)
if [[ "$version" != *"version 14."* ]]; then
  echo "check-format: skipped: pinned to clang-format 14, found: $version"
  exit 77
fi
mapfile -t files < <(find src include tools tests examples -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort)
if [ "$fix" = 1 ]; then
  "$cf" -i "${files[@]}"
  echo "check-format: formatted ${#files[@]} files"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$cf" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check-format: ${#bad[@]} of ${#files[@]} files differ from .clang-format (run 'make format'):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "check-format: ${#files[@]} files follow .clang-format"
