# Issue 34's shell-level tests: loom-plan's predicted time, its warning and --max-slowdown, and
# the kernels of examples/limits/ at their test sizes under 1/8 of their need (loom-bench limits
# --small: every limited run the planner accepts must equal the whole run and keep its limit).
# This file is both the list of tests (included from tests/CMakeLists.txt) and, run as
# `cmake -P limits.cmake`, the check of one case:
#
#   CASE    predict | warn | no_warn | max_slowdown | bad_options | bench
#   TOOL    the loom-plan (or, for bench, loom-bench) executable
#   KERNELS the folder examples/limits
#   WORK    a folder of the test's own
#
# Predictions come from a cache folder of the test's own, with no model in it: the defaults
# that loom_sched_platform_for_prediction derives from the device ("uncalibrated"), so the
# figures do not depend on what another test calibrated.

if(CMAKE_SCRIPT_MODE_FILE)
  cmake_minimum_required(VERSION 3.25)
  file(REMOVE_RECURSE "${WORK}")
  file(MAKE_DIRECTORY "${WORK}/cache")
  set(ENV{LOOM_CACHE_DIR} "${WORK}/cache")
  unset(ENV{LOOM_MEM_LIMIT})
  set(gemm "${KERNELS}/gemm.small.lir")

  function(run)
    execute_process(COMMAND "${TOOL}" ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "exit ${rc}: ${TOOL} ${ARGN}\n--- stdout:\n${out}\n--- stderr:\n${err}")
    endif()
    set(out "${out}" PARENT_SCOPE)
  endfunction()
  function(expect regex)
    if(NOT out MATCHES "${regex}")
      message(FATAL_ERROR "the output does not match '${regex}':\n${out}")
    endif()
  endfunction()
  function(json_get var)
    string(JSON value ERROR_VARIABLE jerr GET "${out}" ${ARGN})
    if(jerr)
      message(FATAL_ERROR "JSON: ${ARGN}: ${jerr}\n${out}")
    endif()
    set(${var} "${value}" PARENT_SCOPE)
  endfunction()

  if(CASE STREQUAL "predict")
    # the plan's time beside the whole graph's, in text and in JSON, both positive
    run("${gemm}" --limit 64KiB)
    expect("\npredicted time on cpu0 \\(uncalibrated\\): [0-9.e+]+ [mu]?s under the limit 64\\.00 KiB, "
           "[0-9.e+]+ [mu]?s whole \\(its need [0-9.]+ KiB\\): [0-9.]+x the whole time\n")
    run("${gemm}" --limit 64KiB --json)
    json_get(ok prediction ok)
    json_get(t prediction seconds)
    json_get(whole prediction whole_seconds)
    json_get(need prediction whole_need_bytes)
    json_get(before estimate_before peak_bytes)
    # the whole need: the graph rewritten without chunking, which holds no more than as written
    if(NOT ok OR NOT t GREATER 0 OR NOT whole GREATER 0 OR NOT need GREATER 0 OR need GREATER before)
      message(FATAL_ERROR "prediction: ok ${ok}, ${t} s, whole ${whole} s, need ${need}:\n${out}")
    endif()
  elseif(CASE STREQUAL "warn")
    # 8 KiB cuts the product into hundreds of pieces, each paying a kernel's latency: over 10x
    run("${gemm}" --limit 8KiB)
    expect("\nwarning: the limit 8\\.00 KiB makes this run about [0-9]+x slower than whole \\(predicted [^)]+\\); "
           "the smallest limit within 2x is [0-9.]+ [KM]iB \\(--max-slowdown 2\\)\n")
  elseif(CASE STREQUAL "no_warn")
    # a limit above the whole need: the plan is the whole graph, as fast
    run("${gemm}" --limit 1MiB)
    expect("predicted time on cpu0 \\(uncalibrated\\): ")
    if(out MATCHES "warning:")
      message(FATAL_ERROR "a warning under a generous limit:\n${out}")
    endif()
  elseif(CASE STREQUAL "max_slowdown")
    # the limit chosen is below the whole need and its prediction within 2x of the whole time
    run("${gemm}" --max-slowdown 2 --json)
    json_get(limit max_slowdown limit_bytes)
    json_get(need max_slowdown whole_need_bytes)
    json_get(t prediction seconds)
    json_get(whole prediction whole_seconds)
    json_get(planned runners 0 limit_bytes)
    # CMake's comparisons read integers only: the seconds are compared by Python
    execute_process(COMMAND /usr/bin/python3 -c "import sys; t, w = float(sys.argv[1]), float(sys.argv[2]); \
sys.exit(0 if 0 < t <= 2 * w else 1)" "${t}" "${whole}" RESULT_VARIABLE within)
    if(NOT limit LESS need OR NOT planned EQUAL limit OR NOT within EQUAL 0)
      message(FATAL_ERROR "--max-slowdown 2: limit ${limit} (planned ${planned}), need ${need}, "
                          "predicted ${t} s vs ${whole} s whole:\n${out}")
    endif()
    run("${gemm}" --max-slowdown 2)
    expect("\nmax slowdown 2x: the smallest limit predicted within it is [0-9.]+ [KM]iB \\([0-9.]+x the whole time")
  elseif(CASE STREQUAL "bad_options")
    # a factor below 1, and a factor beside a limit: usage errors naming the option
    foreach(args "--max-slowdown;0.5" "--max-slowdown;2;--limit;1MiB")
      execute_process(COMMAND "${TOOL}" "${gemm}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
      if(NOT rc EQUAL 2 OR NOT err MATCHES "^loom-plan: --max-slowdown[ ']")
        message(FATAL_ERROR "loom-plan ${args}: exit ${rc}, stderr:\n${err}")
      endif()
    endforeach()
  elseif(CASE STREQUAL "bench")
    # every kernel at its test size, whole and at 1/8 (gemm 1/32 and 1/128 too): the exit code
    # is 1 where a limited run's results differ from the whole run's or its peak passes its limit
    run(limits --small --repeats 1 --dir "${KERNELS}" --json "${WORK}/limits.json")
    expect("\nlimited runs that met their goal: [0-9]+; that missed it or did not run: [0-9]+\n")
    file(READ "${WORK}/limits.json" out)
    string(JSON n LENGTH "${out}" kernels)
    if(NOT n EQUAL 17)
      message(FATAL_ERROR "limits.json lists ${n} kernels, not 17")
    endif()
  else()
    message(FATAL_ERROR "limits.cmake: unknown CASE '${CASE}'")
  endif()
  return()
endif()

# ---- the tests ----------------------------------------------------------------------------
if(NOT TARGET loom-plan OR NOT TARGET loom-bench)
  return()
endif()

foreach(case predict warn no_warn max_slowdown bad_options bench)
  set(tool $<TARGET_FILE:loom-plan>)
  if(case STREQUAL "bench")
    set(tool $<TARGET_FILE:loom-bench>)
  endif()
  add_test(NAME limits.${case}
           COMMAND ${CMAKE_COMMAND} -DCASE=${case} -DTOOL=${tool} -DKERNELS=${CMAKE_SOURCE_DIR}/examples/limits
                   -DWORK=${CMAKE_CURRENT_BINARY_DIR}/limits-${case} -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(limits.${case} PROPERTIES TIMEOUT 300 ENVIRONMENT "${LOOM_TEST_ENV}")
endforeach()
