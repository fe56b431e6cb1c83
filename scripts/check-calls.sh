#!/usr/bin/env bash
# The layers of Loom (README.md, "Layout") checked on the calls the compiled library makes, as
# scripts/check-layers.sh checks its includes: a function may call functions of its own module
# and of the modules below it, nothing above. An include can be dodged (a declaration written by
# hand, a function pointer's target named in a table); a call into a module above still shows
# as an undefined symbol of the caller's object that another module's object defines.
#
#   module     may call (functions defined in src/<module>/)
#   core       core
#   io         core io
#   ir         core ir
#   onnx       core io ir onnx
#   splitter   core ir splitter
#   sched      core ir splitter devices sched
#   devices    core devices
#   backends   core ir devices backends hmm        (the HMM: hmm/hmm_backend.h's functions)
#   hmm        core devices hmm backends           (backends: the registry's lookups)
#   runtime    every module of libloom (sched and io included), except the optimizer and the
#              cuts: a run executes the plan it is given (issue 29), so the runtime calls no
#              loom_graph_optimize*, loom_plan_split*, loom_share_cut nor loom__branch_cut_*; a
#              stage it must have planned again goes through the splitter's loom__plan_restage
#
# libloom_mpi and libblas are libraries of their own above libloom: they call its exported
# functions, which the include check and the link (--no-undefined) already hold them to.
#
# Reads every object under OBJECTS (a build's CMakeFiles/loom_objects.dir, where each object
# sits at its source's path: src/<module>/<file>.c.o) with nm, prints one line per call against
# the table (the calling object, the symbol, the module that defines it, the rule) and exits 1
# when there is any, 0 when there is none.
#   usage: scripts/check-calls.sh OBJECTS
set -euo pipefail

objects=${1:?usage: check-calls.sh OBJECTS, the CMakeFiles/loom_objects.dir of a build}
if [ ! -d "$objects/src" ]; then
  echo "check-calls: $objects has no src/ folder of objects (build the library first)" >&2
  exit 2
fi
NM=${NM:-nm}

declare -A allowed=(
  [core]="core"
  [io]="core io"
  [ir]="core ir"
  [onnx]="core io ir onnx"
  [splitter]="core ir splitter"
  [sched]="core ir splitter devices sched"
  [devices]="core devices"
  [backends]="core ir devices backends hmm"
  [hmm]="core devices hmm backends"
  [runtime]="core io ir onnx splitter sched devices backends hmm runtime"
)

# module_of PATH: the module of an object at src/<module>/... below $objects.
module_of() {
  local rel=${1#"$objects"/src/}
  module=${rel%%/*}
}

declare -A defined_in=()
mapfile -t objs < <(find "$objects/src" -name '*.o' | LC_ALL=C sort)
if [ ${#objs[@]} -eq 0 ]; then
  echo "check-calls: no objects under $objects/src" >&2
  exit 2
fi

# Pass 1: which module defines each global symbol (one nm for every object: nm -A prefixes
# each line with the object, "OBJECT: SYMBOL TYPE ...").
while read -r o sym _; do
  module_of "${o%:}"
  defined_in[$sym]=$module
done < <($NM -A --defined-only --extern-only --format=posix "${objs[@]}" 2>/dev/null)

# Pass 2: every undefined symbol of every object against the table.
failures=0
while read -r o sym _; do
  o=${o%:}
  module_of "$o"
  mod=$module
  [ -n "${allowed[$mod]+x}" ] || continue
  target=${defined_in[$sym]:-}
  [ -n "$target" ] || continue # a library outside Loom (libc, OpenCL, BLAS)
  ok=false
  for a in ${allowed[$mod]}; do [ "$a" = "$target" ] && ok=true; done
  if ! $ok; then
    echo "${o#"$objects"/}: calls $sym of $target: $mod may call ${allowed[$mod]} (README.md, Layout)" >&2
    failures=$((failures + 1))
  elif [ "$mod" = runtime ] && [[ "$sym" =~ ^(loom_graph_optimize|loom_plan_split|loom_share_cut|loom__branch_cut_) ]]; then
    echo "${o#"$objects"/}: calls $sym of $target: the runtime runs the plan it is given and cuts nothing" \
      "(a stage planned again: the splitter's loom__plan_restage)" >&2
    failures=$((failures + 1))
  fi
done < <($NM -A --undefined-only --format=posix "${objs[@]}" 2>/dev/null)

if [ "$failures" -gt 0 ]; then
  echo "check-calls: $failures call(s) against the layers" >&2
  exit 1
fi
echo "check-calls: every call of ${#objs[@]} objects follows the layers"
