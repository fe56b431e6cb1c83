# Planning is near-linear in the number of ops (issue 32: a 1,000,000-op chain once took 116 s
# to plan, 1e4 ops 0.85 s, 4e4 ops 4.25 s). The check counts instructions, not seconds, so a
# loaded machine cannot make it flaky: valgrind's callgrind counts what `loom-plan` executes for
# chains of N, 4N and 16N ops, and the cost of one more op between 4N and 16N must stay within
# SLACK_PERCENT of its cost between N and 4N (linear planning gives 100%; N log N about 120%; a
# quadratic step 400% or more, whatever the constant). The chain alternates add and mul over two
# inputs with fuse off and a limit, so that the optimizer, the estimator and the splitter all
# see every op.
#
# This file is the list of tests (included from tests/CMakeLists.txt) and, run as
# `cmake -P planning_scale.cmake`, the check itself:
#   TOOL      the loom-plan executable
#   WORK      a scratch folder
#   N         the smallest chain (default 500)
#   SLACK_PERCENT   the growth allowed, in percent (default 150)

if(CMAKE_SCRIPT_MODE_FILE)
  cmake_minimum_required(VERSION 3.25)
  find_program(VALGRIND valgrind)
  if(NOT VALGRIND)
    message("SKIP: valgrind is not installed (scripts/install-deps.sh installs it)")
    return()
  endif()
  if(NOT DEFINED N)
    set(N 500)
  endif()
  if(NOT DEFINED SLACK_PERCENT)
    set(SLACK_PERCENT 150)
  endif()
  file(MAKE_DIRECTORY "${WORK}")

  # Instructions executed by loom-plan on a chain of n ops, into the variable named by out_var.
  function(count_instructions n out_var)
    set(text "graph chain(x: f32[1024], y: f32[1024]) {\n  v0 = add x y\n")
    math(EXPR last "${n} - 1")
    foreach(i RANGE 1 ${last})
      math(EXPR prev "${i} - 1")
      math(EXPR odd "${i} % 2")
      math(EXPR third "${i} % 3")
      set(op mul)
      if(odd)
        set(op add)
      endif()
      set(arg y)
      if(third)
        set(arg x)
      endif()
      string(APPEND text "  v${i} = ${op} v${prev} ${arg}\n")
    endforeach()
    string(APPEND text "  return v${last}\n}\n")
    set(file "${WORK}/chain${n}.lir")
    file(WRITE "${file}" "${text}")
    execute_process(
      COMMAND "${VALGRIND}" --tool=callgrind --callgrind-out-file=/dev/null
              "${TOOL}" "${file}" --json --limit 16KiB --no-rewrite fuse
      RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "loom-plan on a chain of ${n} ops under valgrind: exit ${rc}\n${err}")
    endif()
    if(NOT err MATCHES "I +refs: +([0-9,]+)")
      message(FATAL_ERROR "no instruction count in valgrind's output for ${n} ops:\n${err}")
    endif()
    string(REPLACE "," "" count "${CMAKE_MATCH_1}")
    set(${out_var} ${count} PARENT_SCOPE)
  endfunction()

  math(EXPR n4 "${N} * 4")
  math(EXPR n16 "${N} * 16")
  count_instructions(${N} i1)
  count_instructions(${n4} i4)
  count_instructions(${n16} i16)
  # Per op, in instructions: between N and 4N, then between 4N and 16N (startup cancels out).
  math(EXPR early "(${i4} - ${i1}) / (${n4} - ${N})")
  math(EXPR late "(${i16} - ${i4}) / (${n16} - ${n4})")
  if(early LESS_EQUAL 0)
    message(FATAL_ERROR "planning ${n4} ops cost no more than ${N} (${i4} vs ${i1} instructions)")
  endif()
  # CMake's math is integer: compare in percent.
  math(EXPR late100 "${late} * 100")
  math(EXPR bound100 "${early} * ${SLACK_PERCENT}")
  message("instructions: ${N} ops ${i1}, ${n4} ops ${i4}, ${n16} ops ${i16}; "
          "per op ${early} then ${late} (allowed up to ${SLACK_PERCENT}%)")
  if(late100 GREATER bound100)
    message(FATAL_ERROR "planning grows faster than linear: one op costs ${late} instructions "
                        "between ${n4} and ${n16} ops against ${early} between ${N} and ${n4}")
  endif()
  return()
endif()

# Valgrind cannot run a sanitized program, and Debian 12's valgrind (3.19) cannot read the DWARF 5
# debug information clang 14 writes ("unhandled dwarf2 abbrev form code 0x25", then it stops):
# those builds leave the count to `make check`'s gcc build.
if(LOOM_SANITIZE OR LOOM_TSAN OR CMAKE_C_COMPILER_ID MATCHES "Clang")
  return()
endif()
add_test(NAME plan.scale
         COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:loom-plan>
                 -DWORK=${CMAKE_CURRENT_BINARY_DIR}/planning_scale -P
                 ${CMAKE_CURRENT_LIST_DIR}/planning_scale.cmake)
set_tests_properties(plan.scale PROPERTIES SKIP_REGULAR_EXPRESSION "SKIP:" TIMEOUT 600)
