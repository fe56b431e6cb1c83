# Runs a graph with loom-run on OpenCL or CUDA runners (KIND=opencl | cuda) and checks it
# against the cpu backend, for tests/opencl.cmake and tests/cuda.cmake:
#   cmake -DKIND=opencl|cuda -DTOOL=loom-run -DHELPER=loom-tool-helper -DWORK=dir -DGRAPH=g.lir
#         -DRUNNERS=spec [-DRTOL=r -DATOL=a] [-DATOL_<output>=a] [-DKNN=ON] [-DRUN_ONLY=ON]
#         -P run_compare.cmake
#
# 1. loom-run GRAPH --random 1 --runners RUNNERS --out-dir WORK/dev --stats-json WORK/stats.json
#    (a machine without the devices: prints "skipped: no OpenCL device" (or CUDA) and stops; the test's
#    SKIP_REGULAR_EXPRESSION turns that into a skip)
# 2. every stage ran on its runner with a measured peak at or under its limit and within 10% of
#    its estimate (IR.md: the estimate is a promise)
# 3. loom-run GRAPH --random 1 --out-dir WORK/cpu, and every output of the device run equal to
#    the cpu run's within RTOL/ATOL (loom-tool-helper npy-close); with KNN, idx.npy is checked
#    against brute force instead (near ties may order differently), val.npy as the others.
#    ATOL_<output> replaces ATOL for that output: an output that is itself a rounding error
#    (spectrum's maxe, the largest error of an FFT round trip) differs between FFT libraries by
#    its own size, so it is compared against the inputs' scale instead of its own.
# Step 2 also checks that no runner's memory node peaked over the largest limit of its stages
# (the values a plan holds between stages, and the pool, included).
# PEER: the plan passes values between two devices of one platform: every runner's node got
# bytes from another device without the host (peer_bytes_in), and the host none.
# RUN_ONLY: outputs .npy cannot hold (bf16): only steps 1 and 2.
# MEM_LIMIT: LOOM_MEM_LIMIT for the device run (the cpu run has none); with RUNNERS empty the
# runners are loom-run's default, the devices MEM_LIMIT names. Step 2 then also checks that no
# memory node of the device run's memory manager peaked over its limit.
cmake_minimum_required(VERSION 3.25)

if(KIND STREQUAL "opencl")
  set(_prefix ocl)
  set(_label OpenCL)
elseif(KIND STREQUAL "cuda")
  set(_prefix cuda)
  set(_label CUDA)
else()
  message(FATAL_ERROR "run_compare.cmake: KIND must be opencl or cuda (got '${KIND}')")
endif()

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

set(args "${GRAPH}" --random 1 --stats-json "${WORK}/stats.json")
if(RUNNERS)
  list(APPEND args --runners "${RUNNERS}")
endif()
if(NOT RUN_ONLY)
  list(APPEND args --out-dir "${WORK}/dev")
endif()
if(DEFINED MEM_LIMIT)
  set(ENV{LOOM_MEM_LIMIT} "${MEM_LIMIT}")
else()
  unset(ENV{LOOM_MEM_LIMIT})
endif()
execute_process(COMMAND "${TOOL}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
unset(ENV{LOOM_MEM_LIMIT})
# A machine without such a device: loom-run refuses a runner on it (exit 2), and ignores it
# in LOOM_MEM_LIMIT with a note (the run then has no runner of the backend's).
if((NOT rc EQUAL 0 AND err MATCHES "(device ${_prefix}[0-9]+ is not in this context|this machine has no device ${_prefix}[0-9]+)")
   OR err MATCHES "LOOM_MEM_LIMIT names [^\n]*${_prefix}[0-9]+[^\n]*, which this machine lacks")
  message(STATUS "skipped: no ${_label} device for runners ${RUNNERS}: ${err}")
  return()
endif()
if(NOT rc EQUAL 0)
  fail("the run on ${RUNNERS} failed")
endif()
message(STATUS "${out}")

# ---- the stages: on the backend's runners, under their limits, as estimated
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
  if(NOT runner MATCHES "^${_prefix}[0-9]+$")
    fail("stage ${i} ran on ${runner}, not on a ${_label} runner")
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
# ---- what each runner's memory node held, and where its bytes came from
string(JSON n_nodes LENGTH "${stats}" memory nodes)
math(EXPR last_node "${n_nodes} - 1")
foreach(i RANGE ${last_node})
  string(JSON id GET "${stats}" memory nodes ${i} id)
  string(JSON peak GET "${stats}" memory nodes ${i} peak_in_use)
  string(JSON peer GET "${stats}" memory nodes ${i} peer_bytes_in)
  string(JSON bytes_in GET "${stats}" memory nodes ${i} bytes_in)
  set(runner_limit 0)
  foreach(k ${indices})
    string(JSON runner GET "${stats}" stages ${k} runner)
    string(JSON limit GET "${stats}" stages ${k} limit_bytes)
    if(runner STREQUAL id AND limit GREATER runner_limit)
      set(runner_limit ${limit})
    endif()
  endforeach()
  string(JSON limit GET "${stats}" memory nodes ${i} limit)
  if(DEFINED MEM_LIMIT AND peak GREATER limit)
    fail("memory node ${id} peaked at ${peak} bytes, over its limit of ${limit}")
  endif()
  if(runner_limit GREATER 0 AND peak GREATER runner_limit)
    fail("memory node ${id} peaked at ${peak} bytes, over its runner's limit of ${runner_limit}")
  endif()
  if(PEER AND runner_limit GREATER 0 AND NOT peer GREATER 0)
    fail("${id} got no value from another device without the host (peer_bytes_in ${peer})")
  endif()
  if(PEER AND id MATCHES "^host" AND bytes_in GREATER 0)
    fail("${id} got ${bytes_in} bytes: values went through host memory")
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
  get_filename_component(name "${f}" NAME_WE)
  set(atol ${ATOL})
  if(DEFINED ATOL_${name})
    set(atol ${ATOL_${name}})
  endif()
  execute_process(COMMAND "${HELPER}" npy-close "${WORK}/cpu/${f}" "${WORK}/dev/${f}" ${RTOL} ${atol}
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
