#!/usr/bin/env bash
# The layers of Loom (README.md, "Layout"), checked on every #include "..." of src/, kernels/
# and tools/: a file may include the public headers (loom/...), the headers of its own module
# and those of the modules below it, nothing else.
#
#   core -> io (file formats: .npy, .safetensors, mapped files, random fills)
#   core -> ir -> splitter
#   core -> devices -> backends, hmm -> runtime -> tools
#   core, ir, splitter, devices -> sched -> runtime, tools
#   runtime (its table for libloom_mpi only) -> mpi (libloom_mpi, a library of its own)
#
#   module     may include (src/<module>/...)
#   core       core
#   io         core io
#   onnx       core io ir onnx (ONNX models read into the IR)
#   ir         core ir
#   splitter   core ir splitter
#   sched      core ir splitter devices sched
#   devices    core devices
#   backends   core ir devices backends, and from hmm only hmm/hmm_backend.h (kernels/: backends)
#   hmm        core devices hmm, and from backends only backends/registry.h
#   runtime    every module (io included; of sched only sched/sched.h and sched/policy.h)
#   mpi        mpi, and from runtime only runtime/mpi_hooks.h (libloom_mpi sees no other internal
#              symbol of libloom)
#   tools      public headers and the tool's own files only
#   blas       blas (libblas.so.3, a user of libloom: the public headers and its own)
#
# Prints one line per include against the table (file:line, what it includes, the rule) and
# exits 1 when there is any, 0 when there is none.
#   usage: scripts/check-layers.sh [ROOT]     (default: the tree this script is in)
set -euo pipefail

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

# Headers CMake writes into the build's generated/ folder, by name.
generated=" loom_backends.h "

declare -A allowed=(
  [core]="core"
  [io]="core io"
  [onnx]="core io ir onnx"
  [ir]="core ir"
  [splitter]="core ir splitter"
  [sched]="core ir splitter devices sched"
  [devices]="core devices"
  [backends]="core ir devices backends hmm/hmm_backend.h"
  [hmm]="core devices hmm backends/registry.h"
  [runtime]="core io ir splitter devices backends hmm runtime sched/sched.h sched/policy.h"
  [mpi]="mpi runtime/mpi_hooks.h runtime/run_hooks.h"
  [tools]=""
  [blas]="blas"
)

# module=the module file $1 of the tree belongs to, or "" for files outside the layers.
module_of() {
  case "$1" in
    src/*/*) module=${1#src/} module=${module%%/*} ;;
    kernels/*) module=backends ;;
    tools/*) module=tools ;;
    *) module="" ;;
  esac
}

# normalized=$1 without its ./ and ../ components (no symlinks).
normalize() {
  local IFS=/ part out=()
  for part in $1; do
    case "$part" in
      '' | .) ;;
      ..) [ ${#out[@]} -gt 0 ] && unset 'out[${#out[@]}-1]' ;;
      *) out+=("$part") ;;
    esac
  done
  normalized="${out[*]}"
}

failures=0
fail() {
  echo "$1:$2: includes \"$3\": $4" >&2
  failures=$((failures + 1))
}

while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  line=${rest%%:*}
  [[ "${rest#*:}" =~ include[[:space:]]*\"([^\"]*)\" ]] || continue
  header=${BASH_REMATCH[1]}
  module_of "$file"
  mod=$module
  [ -n "$mod" ] || continue
  case "$header" in loom/*) continue ;; esac # the public headers: everyone's
  if [[ "$header" != */* || "$header" == ./* || "$header" == ../* ]]; then
    # Relative to the including file: a generated header, else a file of the tree.
    if [[ "$generated" == *" $header "* ]]; then continue; fi
    normalize "${file%/*}/$header"
    target=$normalized
    if [ ! -f "$target" ]; then
      fail "$file" "$line" "$header" "no such file beside it (and not a generated header)"
      continue
    fi
    module_of "$target"
    tmod=$module
    if [ "$tmod" = "$mod" ] && { [ "$mod" != tools ] || [ "${target%/*}" = "${file%/*}" ]; }; then continue; fi
    fail "$file" "$line" "$header" "reaches $target outside its own module ($mod)"
    continue
  fi
  tmod=${header%%/*}
  if [ "$mod" = tools ]; then
    fail "$file" "$line" "$header" "tools use the public headers (loom/...) only"
    continue
  fi
  ok=false
  for a in ${allowed[$mod]}; do
    if [ "$a" = "$tmod" ] || [ "$a" = "$header" ]; then ok=true; fi
  done
  $ok || fail "$file" "$line" "$header" "$mod may include ${allowed[$mod]} (README.md, Layout)"
done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' --include='*.c' --include='*.h' \
  --include='*.cu' --include='*.cl' src kernels tools 2>/dev/null | LC_ALL=C sort)

if [ "$failures" -gt 0 ]; then
  echo "check-layers: $failures include(s) against the layers" >&2
  exit 1
fi
echo "check-layers: every include follows the layers"
