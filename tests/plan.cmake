# Shell-level tests of loom-plan. This file is both the list of tests (included from
# tests/CMakeLists.txt) and, run as `cmake -P plan.cmake`, the check of one invocation:
#
#   TOOL          the loom-plan executable
#   ARGS          its arguments, separated by '|'
#   EXPECT_RC     the exit code wanted (default 0)
#   STDOUT_REGEX, STDERR_REGEX   regular expressions the output must match ('|' as in CMake
#                 regexes; several checks: give several tests)
#   STDOUT_NOT_REGEX             ... must not match
#   JSON          a check of the --json object: "plan" (every key of the stages too) or
#                 "no_distance" (the distance rewrite is not in the report)
#   MEM_LIMIT     LOOM_MEM_LIMIT for the run (else it is unset, whatever the environment says)

if(CMAKE_SCRIPT_MODE_FILE)
  cmake_minimum_required(VERSION 3.25)
  string(REPLACE "|" ";" args "${ARGS}")
  # loom_plan_test carries a ';' of the expressions as @SEMICOLON@ (a list separator on its way).
  foreach(v STDOUT_REGEX STDERR_REGEX STDOUT_NOT_REGEX JSON)
    if(DEFINED ${v})
      string(REPLACE "@SEMICOLON@" ";" ${v} "${${v}}")
    endif()
  endforeach()
  if(DEFINED MEM_LIMIT)
    set(ENV{LOOM_MEM_LIMIT} "${MEM_LIMIT}")
  else()
    unset(ENV{LOOM_MEM_LIMIT})
  endif()
  execute_process(COMMAND "${TOOL}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  function(fail msg)
    message(FATAL_ERROR "${msg}\n--- command: ${TOOL} ${args}\n--- exit: ${rc}\n--- stdout:\n${out}\n--- stderr:\n${err}")
  endfunction()
  if(NOT DEFINED EXPECT_RC)
    set(EXPECT_RC 0)
  endif()
  if(NOT rc STREQUAL EXPECT_RC)
    fail("exit code ${rc}, expected ${EXPECT_RC}")
  endif()
  foreach(stream STDOUT STDERR)
    if(stream STREQUAL "STDOUT")
      set(text "${out}")
    else()
      set(text "${err}")
    endif()
    if(DEFINED ${stream}_REGEX AND NOT text MATCHES "${${stream}_REGEX}")
      fail("${stream} does not match '${${stream}_REGEX}'")
    endif()
    if(DEFINED ${stream}_NOT_REGEX AND text MATCHES "${${stream}_NOT_REGEX}")
      fail("${stream} matches '${${stream}_NOT_REGEX}'")
    endif()
  endforeach()
  # Reads a JSON member or fails the test naming it.
  function(json_get var)
    string(JSON value ERROR_VARIABLE jerr GET "${out}" ${ARGN})
    if(jerr)
      fail("JSON: ${ARGN}: ${jerr}")
    endif()
    set(${var} "${value}" PARENT_SCOPE)
  endfunction()
  function(json_length var)
    string(JSON value ERROR_VARIABLE jerr LENGTH "${out}" ${ARGN})
    if(jerr)
      fail("JSON: ${ARGN}: ${jerr}")
    endif()
    set(${var} "${value}" PARENT_SCOPE)
  endfunction()
  if(JSON STREQUAL "plan")
    json_get(graph graph)
    if(NOT graph STREQUAL "knn_plan")
      fail("JSON: graph is '${graph}'")
    endif()
    foreach(est estimate_before estimate)
      foreach(key input_bytes logical_bytes physical_bytes temporary_bytes total_bytes peak_bytes peak_step)
        json_get(v ${est} ${key})
      endforeach()
      json_length(n ${est} ops)
      # after the rewrites the fuse rewrite has made the kNN region one op
      set(least 6)
      if(est STREQUAL "estimate")
        set(least 3)
      endif()
      if(n LESS least)
        fail("JSON: ${est}.ops has ${n} entries")
      endif()
      foreach(key step index op results logical_bytes physical_bytes temporary_bytes live_bytes peak_bytes)
        json_get(v ${est} ops 0 ${key})
      endforeach()
    endforeach()
    json_get(before estimate_before peak_bytes)
    json_get(after estimate peak_bytes)
    if(NOT after LESS before)
      fail("JSON: the rewrites did not lower the peak (${before} -> ${after})")
    endif()
    json_length(n rewrites)
    if(n LESS 1)
      fail("JSON: no rewrites")
    endif()
    foreach(key name detail bytes_saved)
      json_get(v rewrites 0 ${key})
    endforeach()
    json_length(n stages)
    if(n LESS 1)
      fail("JSON: no stages")
    endif()
    math(EXPR last "${n} - 1")
    foreach(i RANGE ${last})
      foreach(key runner limit_bytes estimated_peak_bytes ops inputs outputs)
        json_get(v stages ${i} ${key})
      endforeach()
      json_get(runner stages ${i} runner)
      json_get(limit stages ${i} limit_bytes)
      json_get(peak stages ${i} estimated_peak_bytes)
      if(NOT runner STREQUAL "cpu0" OR peak GREATER limit)
        fail("JSON: stage ${i} on '${runner}' estimates ${peak} bytes for a limit of ${limit}")
      endif()
    endforeach()
  elseif(JSON STREQUAL "no_distance")
    json_length(n rewrites)
    if(n GREATER 0)
      math(EXPR last "${n} - 1")
      foreach(i RANGE ${last})
        json_get(name rewrites ${i} name)
        if(name STREQUAL "distance")
          fail("JSON: the distance rewrite ran though it was disabled")
        endif()
      endforeach()
    endif()
  endif()
  return()
endif()

# ---- the tests ----------------------------------------------------------------------------
if(NOT TARGET loom-plan)
  return()
endif()

set(LOOM_PLAN_DATA ${CMAKE_CURRENT_SOURCE_DIR}/splitter/data)

# loom_plan_test(NAME [RC code] [ARGS a b ...] [STDOUT_REGEX r] [STDERR_REGEX r]
#                [STDOUT_NOT_REGEX r] [JSON check] [MEM_LIMIT spec])
function(loom_plan_test name)
  cmake_parse_arguments(PARSE_ARGV 1 T "" "RC;STDOUT_REGEX;STDERR_REGEX;STDOUT_NOT_REGEX;JSON;MEM_LIMIT" "ARGS")
  set(defs -DTOOL=$<TARGET_FILE:loom-plan>)
  if(DEFINED T_RC)
    list(APPEND defs -DEXPECT_RC=${T_RC})
  endif()
  if(DEFINED T_ARGS)
    string(REPLACE ";" "|" joined "${T_ARGS}")
    list(APPEND defs "-DARGS=${joined}")
  endif()
  foreach(key STDOUT_REGEX STDERR_REGEX STDOUT_NOT_REGEX JSON MEM_LIMIT)
    if(DEFINED T_${key})
      # A ';' would cut the -D argument in two (a list separator): carried as @SEMICOLON@.
      string(REPLACE ";" "@SEMICOLON@" value "${T_${key}}")
      list(APPEND defs "-D${key}=${value}")
    endif()
  endforeach()
  add_test(NAME loom-plan.${name} COMMAND ${CMAKE_COMMAND} ${defs} -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(loom-plan.${name} PROPERTIES TIMEOUT 120 ENVIRONMENT "${LOOM_TEST_ENV}")
endfunction()

set(knn ${LOOM_PLAN_DATA}/knn_plan.lir)

# ---- text ----------------------------------------------------------------------------------
loom_plan_test(help ARGS --help STDOUT_REGEX "^usage: loom-plan FILE\\.lir \\[--runners SPEC \\| --limit BYTES\\]")
loom_plan_test(estimate_only ARGS ${knn}
  STDOUT_REGEX "estimate before rewrites: 6 ops\n  inputs +[^\n]+\n  logical +[^\n]+\n  physical +[^\n]+\n  temporaries +[^\n]+\n  total +[^\n]+\n  peak +[^\n]+ at step [0-9]+, [a-z_]+ [^\n]+\n\n +step +op +results +logical +physical +temporaries +live +step peak\n.*rewrites applied: [1-9].*  distance +saved .*estimate after rewrites: .*no plan: give --runners SPEC or --limit BYTES")
loom_plan_test(text_limit ARGS ${knn} --limit 1MiB
  STDOUT_REGEX "  chunk +saved .*plan for graph 'knn_plan': [0-9]+ stages? on 1 runner\nstage 0: runner 0 \\(cpu0, limit 1\\.00 MiB\\), estimated peak [0-9.]+ [KM]i?B, [0-9]+ ops \\(0\\.\\.[0-9]+\\)\n  inputs: [^\n]*\n  outputs: [^\n]*val")
loom_plan_test(text_runners ARGS ${knn} --runners=cpu0:2MiB,cpu0:1MiB
  STDOUT_REGEX "plan for graph 'knn_plan': [0-9]+ stages? on 2 runners\nstage 0: runner 0 \\(cpu0, limit 2\\.00 MiB\\)")
# Found by fuzzing: a graph of 17 results under a limit far below its need overran the halo
# cut's groups of steps (the sanitizer build fails on it); it plans.
loom_plan_test(many_results_tiny_limit ARGS ${LOOM_PLAN_DATA}/halo_many_results.lir --limit 109
  STDOUT_REGEX "plan for graph 'constants': [0-9]+ stages? on 1 runner")

# ---- JSON ----------------------------------------------------------------------------------
loom_plan_test(json_plan ARGS ${knn} --runners cpu0:2MiB,cpu0:1MiB --json JSON plan)
loom_plan_test(json_no_rewrite ARGS ${knn} --json --no-rewrite distance --no-rewrite=schedule JSON no_distance)

# ---- the distance rewrite's form (issue 17): under a limit at d = 3 the graph is chunked
# anyway, so the direct form is kept, exact to rounding, x streamed by the loop; without a
# limit the expanded form; --no-rewrite distance leaves the graph's own form. A ";" in a regex
# would split the -D argument that carries it (the rest silently dropped): "." stands for it.
loom_plan_test(distance_direct_under_limit ARGS ${knn} --limit 128KiB
  STDOUT_REGEX "\n  distance +saved [^\n]*-> direct form kept: d = 3 <= 4 and the expanded graph passes the limit, exact to rounding[^\n]*\n.*\n  loop val,idx: [0-9]+ pieces of [0-9]+[^\n]*, slicing x axis 0. body of 4 ops: slice slice slice fused\n")
loom_plan_test(distance_expanded_without_limit ARGS ${knn}
  STDOUT_REGEX "\n  distance +saved [^\n]*-> \\|a\\|\\^2 \\+ \\|b\\|\\^2 - 2 a\\.b\\^T clamped at 0\n")
loom_plan_test(distance_disabled_under_limit ARGS ${knn} --limit 1MiB --no-rewrite distance
  STDOUT_REGEX "\n  loop val,idx: [0-9]+ pieces of [0-9]+[^\n]*, slicing x axis 0. body of [0-9]+ ops: reshape fused topk\n"
  STDOUT_NOT_REGEX "\n  distance +saved")

# ---- a wrong command line: usage and exit 2 --------------------------------------------------
loom_plan_test(no_args RC 2 STDERR_REGEX "loom-plan: no graph file given\nusage: loom-plan")
loom_plan_test(unknown_option RC 2 ARGS ${knn} --bogus STDERR_REGEX "loom-plan: unknown option '--bogus'\nusage: loom-plan ")
loom_plan_test(missing_value RC 2 ARGS ${knn} --limit STDERR_REGEX "loom-plan: option '--limit' needs a value")
loom_plan_test(two_files RC 2 ARGS ${knn} ${knn} STDERR_REGEX "loom-plan: one graph file at a time")
loom_plan_test(limit_and_runners RC 2 ARGS ${knn} --limit 1MiB --runners cpu0:1MiB
  STDERR_REGEX "loom-plan: give --runners or --limit, not both")
loom_plan_test(unknown_rewrite RC 2 ARGS ${knn} --no-rewrite fold
  STDERR_REGEX "loom-plan: --no-rewrite 'fold': want distance, ")
loom_plan_test(misspelled_rewrite RC 2 ARGS ${knn} --no-rewrite chnuk
  STDERR_REGEX "^loom-plan: --no-rewrite 'chnuk': want [^\n]* \\(did you mean 'chunk'\\?\\)\n$")
loom_plan_test(bad_limit RC 2 ARGS ${knn} --limit 12MiX
  STDERR_REGEX "loom-plan: --limit: byte size '12MiX': cannot read it at column 3")
loom_plan_test(bad_runners RC 2 ARGS ${knn} --runners cpu0:64MiX
  STDERR_REGEX "loom-plan: --runners: runners 'cpu0:64MiX': cannot read the byte size at column 8")
loom_plan_test(bad_runner_id RC 2 ARGS ${knn} --runners cpu0:1MiB,GPU:1MiB
  STDERR_REGEX "loom-plan: --runners: runners 'cpu0:1MiB,GPU:1MiB': expected a device id at column 11")

# ---- the graph or the plan fails: exit 1 -----------------------------------------------------
loom_plan_test(missing_file RC 1 ARGS ${LOOM_PLAN_DATA}/nope.lir STDERR_REGEX "nope\\.lir: No such file or directory")
loom_plan_test(type_error RC 1 ARGS ${LOOM_PLAN_DATA}/bad_type.lir
  STDERR_REGEX "^[^\n]*bad_type\\.lir:2:[0-9]+: error: [^\n]+\n$")
loom_plan_test(op_over_every_limit RC 1 ARGS ${LOOM_PLAN_DATA}/fft_only.lir --runners cpu0:64KiB,cpu0:100KiB
  STDERR_REGEX "loom-plan: [^\n]*fft 'f' needs 128\\.00 KiB[^\n]*100\\.00 KiB")

# The whole graph holds more than the limit and chunking cannot help, but its stages fit.
loom_plan_test(split_where_chunking_cannot ARGS ${LOOM_PLAN_DATA}/ffts.lir --limit 128KiB
  STDOUT_REGEX "note: the chunk rewrite cannot fit the whole graph under 128\\.00 KiB \\([^\n]*\\); the plan cuts it into stages instead\n.*plan for graph 'ffts': 3 stages on 1 runner\n")

# ---- LOOM_MEM_LIMIT (issue 5): the devices it names are the runners when none are given, and
# runners given are lowered to it -------------------------------------------------------------
loom_plan_test(mem_limit_default_runners ARGS ${knn} MEM_LIMIT "cpu0:1MiB,host0:64MiB"
  STDOUT_REGEX "plan for graph 'knn_plan': [0-9]+ stages? on 1 runner\nstage 0: runner 0 \\(cpu0, limit 1\\.00 MiB\\)")
loom_plan_test(mem_limit_lowers_runners ARGS ${knn} --runners cpu0:2MiB,cpu0:512KiB MEM_LIMIT cpu0:1MiB
  STDERR_REGEX "^loom-plan: note: runner 0 \\(cpu0\\) lowered from 2\\.00 MiB to 1\\.00 MiB, its LOOM_MEM_LIMIT\n$"
  STDOUT_REGEX "on 2 runners\nstage 0: runner 0 \\(cpu0, limit 1\\.00 MiB\\)")
# Devices this machine lacks (issue 16): ignored with a note in LOOM_MEM_LIMIT, a wrong command
# line in --runners, as loom-run has it.
loom_plan_test(mem_limit_missing_device ARGS ${knn} MEM_LIMIT cpu9:1MiB
  STDERR_REGEX "^loom-plan: note: LOOM_MEM_LIMIT names cpu9, which this machine lacks: ignored\n$"
  STDOUT_REGEX "no plan: give --runners SPEC or --limit BYTES")
loom_plan_test(mem_limit_missing_device_kept_others ARGS ${knn} MEM_LIMIT cpu0:1MiB,ocl7:1MiB
  STDERR_REGEX "names ocl7, which this machine lacks: ignored"
  STDOUT_REGEX "on 1 runner\nstage 0: runner 0 \\(cpu0, limit 1\\.00 MiB\\)")
loom_plan_test(runners_missing_device RC 2 ARGS ${knn} --runners cpu0:1MiB,cpu9:1MiB
  STDERR_REGEX "^loom-plan: --runners: runner 1: this machine has no device cpu9 \\(it has: cpu0")
loom_plan_test(mem_limit_host_node_only ARGS ${knn} MEM_LIMIT host0:1MiB
  STDOUT_REGEX "no plan: give --runners SPEC or --limit BYTES")
loom_plan_test(mem_limit_bad RC 2 ARGS ${knn} MEM_LIMIT cpu0:1MiB,ocl0
  STDERR_REGEX "^loom-plan: LOOM_MEM_LIMIT 'cpu0:1MiB,ocl0': item ocl0 at column 11 has no ':'")

# ---- loops (issue 13): plans that do not grow with the pieces, inputs larger than a limit ----
loom_plan_test(loop_one_line ARGS ${LOOM_PLAN_DATA}/huge_streamed.lir --limit 1MiB
  STDOUT_REGEX "\n  loop y: 8388608 pieces of 131072, slicing x axis 0; body of 1 op: mul\n.*stage 0: runner 0 \\(cpu0, limit 1\\.00 MiB\\)")
loom_plan_test(knn_million ARGS ${LOOM_PLAN_DATA}/knn_million.lir --limit 64MiB
  STDOUT_REGEX "\n  loop val,idx: [0-9]+ pieces of [0-9]+[^\n]*, slicing x axis 0; body of [0-9]+ ops:[a-z_ ]* fused\n  loop val,idx: fused [^\n]*topk; inputs.*plan for graph 'knn_million': 1 stage on 1 runner")
# The loop's body fused, its pieces grow from the unfused ops' 4 rows to what 64 MiB holds.
loom_plan_test(knn_million_grown ARGS ${LOOM_PLAN_DATA}/knn_million.lir --limit 64MiB
  STDOUT_REGEX "chunk +saved +0 B +loop 'val' grown from pieces of 4 to [0-9]+ \\([0-9] pieces\\)")
loom_plan_test(input_larger_than_every_limit ARGS ${LOOM_PLAN_DATA}/chain_big_input.lir
  --runners cpu0:6MiB,cpu0:3MiB
  STDOUT_REGEX "loop out: [0-9]+ pieces of [0-9]+[^\n]*, slicing b axis 0, a axis 1; body of 2 ops: dot dot\n.*stage 0: runner 0 \\(cpu0, limit 6\\.00 MiB\\)")
# The body is fused or not as the fuse rewrite's cost says (an elementwise body of three ops
# over a piece runs as fast unfused); what this checks is the three offsets of x.
loom_plan_test(stencil_offsets ARGS ${LOOM_PLAN_DATA}/stencil_streamed.lir --limit 1MiB
  STDOUT_REGEX "\n  loop y: [0-9]+ pieces of [0-9]+[^\n]*, slicing x axis 0, x axis 0 from [12], x axis 0 from [12]; body of (1 op: fused\n  loop y: fused v[0-9]+: 3 ops: add mul sub;|3 ops: add mul sub\n)")
# A conv whose input and output (1 MiB each) pass the limit is tiled along its rows, each tile
# reading its rows of x with a row of halo on each side (docs/ir-loops.md "Windows").
loom_plan_test(conv_tiled ARGS ${CMAKE_CURRENT_SOURCE_DIR}/tools/data/conv_tiled.lir --limit 256KiB
  STDOUT_REGEX "  chunk +saved [^\n]*conv 'y' [^\n]*along its result's axis 2, in [0-9]+ pieces[^\n]*\n.*\n  loop y: [0-9]+ pieces of [0-9]+[^\n]*, slicing x axis 2 from -1 \\(window: stride 1, halo 2\\); body of 1 op: conv\n.*stage 0: runner 0 \\(cpu0, limit 256\\.00 KiB\\)")
