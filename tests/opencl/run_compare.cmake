# Runs a graph with loom-run on OpenCL runners and checks it against the cpu backend, for
# tests/opencl.cmake:
#   cmake -DTOOL=loom-run -DHELPER=loom-tool-helper -DWORK=dir -DGRAPH=g.lir -DRUNNERS=spec
#         [-DRTOL=r -DATOL=a] [-DKNN=ON] [-DRUN_ONLY=ON] -P run_compare.cmake
#
# 1. loom-run GRAPH --random 1 --runners RUNNERS --out-dir WORK/dev --stats-json WORK/stats.json
#    (a machine without the devices: prints "skipped: no OpenCL device" and stops; the test's
#    SKIP_REGULAR_EXPRESSION turns that into a skip)
# 2. every stage ran on its runner with a measured peak at or under its limit and within 10% of
#    its estimate (IR.md: the estimate is a promise)
# 3. loom-run GRAPH --random 1 --out-dir WORK/cpu, and every output of the device run equal to
#    the cpu run's within RTOL/ATOL (loom-tool-helper npy-close); with KNN, idx.npy is checked
#    against brute force instead (near ties may order differently), val.npy as the others.
# RUN_ONLY: outputs .npy cannot hold (bf16): only steps 1 and 2.
cmake_minimum_required(VERSION 3.25)

function(fail msg)
  message(FATAL_ERROR "${msg}\n--- command: ${TOOL} ${args}\n--- exit: ${rc}\n--- stdout:\n${out}\n--- stderr:\n${err}")
endfunction()

if(NOT DEFINED RTOL)
  set(RTOL 2e-4)
endif()
if(NOT DEFINED ATOL)
  set(ATOL 1e-4)
endif()
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

set(args "${GRAPH}" --random 1 --runners "${RUNNERS}" --stats-json "${WORK}/stats.json")
if(NOT RUN_ONLY)
  list(APPEND args --out-dir "${WORK}/dev")
endif()
execute_process(COMMAND "${TOOL}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 AND err MATCHES "device ocl[0-9]+ is not in this context")
  message(STATUS "skipped: no OpenCL device for runners ${RUNNERS}: ${err}")
  return()
endif()
if(NOT rc EQUAL 0)
  fail("the run on ${RUNNERS} failed")
endif()
message(STATUS "${out}")

# ---- the stages: on OpenCL runners, under their limits, as estimated
file(READ "${WORK}/stats.json" stats)
string(JSON n LENGTH "${stats}" stages)
set(indices "")
if(n GREATER 0)
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    list(APPEND indices ${i})
  endforeach()
endif()
foreach(i ${indices})
  string(JSON runner GET "${stats}" stages ${i} runner)
  string(JSON limit GET "${stats}" stages ${i} limit_bytes)
  string(JSON peak GET "${stats}" stages ${i} peak_bytes)
  string(JSON est GET "${stats}" stages ${i} estimated_peak_bytes)
  if(NOT runner MATCHES "^ocl[0-9]+$")
    fail("stage ${i} ran on ${runner}, not on an OpenCL runner")
  endif()
  if(peak GREATER limit)
    fail("stage ${i} on ${runner}: measured peak ${peak} bytes is over its limit ${limit}")
  endif()
  math(EXPR diff "${peak} - ${est}")
  if(diff LESS 0)
    math(EXPR diff "0 - ${diff}")
  endif()
  math(EXPR diff10 "${diff} * 10")
  if(diff10 GREATER peak AND diff10 GREATER est)
    fail("stage ${i} on ${runner}: measured peak ${peak} is not within 10% of the estimate ${est}")
  endif()
endforeach()
if(RUN_ONLY)
  return()
endif()

# ---- the outputs against the cpu backend's
set(cpu_args "${GRAPH}" --random 1 --out-dir "${WORK}/cpu")
execute_process(COMMAND "${TOOL}" ${cpu_args} RESULT_VARIABLE crc OUTPUT_VARIABLE cout ERROR_VARIABLE cerr)
if(NOT crc EQUAL 0)
  fail("the cpu run failed: ${cerr}")
endif()
file(GLOB outputs RELATIVE "${WORK}/cpu" "${WORK}/cpu/*.npy")
if(NOT outputs)
  fail("the cpu run wrote no output")
endif()
foreach(f ${outputs})
  if(KNN AND f STREQUAL "idx.npy")
    continue()
  endif()
  execute_process(COMMAND "${HELPER}" npy-close "${WORK}/cpu/${f}" "${WORK}/dev/${f}" ${RTOL} ${ATOL}
    RESULT_VARIABLE hrc ERROR_VARIABLE herr)
  if(NOT hrc EQUAL 0)
    fail("output ${f} differs from the cpu backend's: ${herr}")
  endif()
endforeach()
if(KNN)
  execute_process(COMMAND "${HELPER}" knn-check "${WORK}/dev" --seed 1 "${GRAPH}"
    RESULT_VARIABLE krc OUTPUT_VARIABLE kout ERROR_VARIABLE kerr)
  if(NOT krc EQUAL 0)
    fail("kNN check failed: ${kout}${kerr}")
  endif()
endif()
