# loom-run --simulate here against a real run of the same graph (issue 29, acceptance 2):
#   cmake -DRUN=loom-run -DBENCH=loom-bench -DGRAPH=towers.lir -DDEVICES=cpu0,ocl0,ocl1 -DWORK=dir -P ...
# With PoCL's two pthread devices, calibrates cpu0 and ocl0 (one model for both OpenCL devices,
# which share a name) into a cache folder of its own, then runs GRAPH under --policy dmda on
# DEVICES twice: simulated on this machine's models (--simulate here) and for real (--random 1).
# Both plan alike (the sharing cut; --no-rewrite chunk keeps every stage whole, so each stage
# has one device) and place each stage by the policy table (src/sched/policy.c). Checks that
# both runs have the same stages and that each stage ran on the device the simulation placed it
# on: the real run's --stats-json "stages"[i]."device" against the simulated tasks labelled
# "stage i".
cmake_minimum_required(VERSION 3.25)

file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/cache")
unset(ENV{LOOM_MEM_LIMIT})
unset(ENV{LOOM_DEVICES})
set(ENV{POCL_DEVICES} "pthread pthread")
set(ENV{POCL_MEMORY_LIMIT} "1")
set(ENV{LOOM_CACHE_DIR} "${WORK}/cache")

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what}: exit ${rc}\n--- command: ${ARGN}\n--- stdout:\n${out}\n--- stderr:\n${err}")
  endif()
  message(STATUS "${what}:\n${out}")
endfunction()

run("calibrate" ${BENCH} calibrate --quick --reps 1 --devices cpu0,ocl0)
set(common ${GRAPH} --policy dmda --devices ${DEVICES} --no-rewrite chunk)
run("simulated" ${RUN} ${common} --simulate here --stats-json ${WORK}/sim.json)
run("real" ${RUN} ${common} --random 1 --stats-json ${WORK}/run.json)

file(READ "${WORK}/sim.json" sim)
file(READ "${WORK}/run.json" real)
string(JSON n_real LENGTH "${real}" stages)
string(JSON n_tasks LENGTH "${sim}" tasks)
# the simulated stages: the largest N of the tasks' "stage N ..." labels, plus one
set(n_sim 0)
math(EXPR last_task "${n_tasks} - 1")
foreach(t RANGE ${last_task})
  string(JSON label GET "${sim}" tasks ${t} label)
  if(NOT label MATCHES "^stage ([0-9]+) ")
    message(FATAL_ERROR "simulated task ${t}: label '${label}' names no stage")
  endif()
  math(EXPR next "${CMAKE_MATCH_1} + 1")
  if(next GREATER n_sim)
    set(n_sim ${next})
  endif()
endforeach()
if(NOT n_sim EQUAL n_real)
  message(FATAL_ERROR "the simulation has ${n_sim} stages, the real run ${n_real}")
endif()

set(placed "")
math(EXPR last_stage "${n_real} - 1")
foreach(i RANGE ${last_stage})
  string(JSON device GET "${real}" stages ${i} device)
  if(device STREQUAL "ranges" OR device STREQUAL "none")
    message(FATAL_ERROR "real stage ${i}: '${device}': every stage of this test runs whole")
  endif()
  set(seen 0)
  foreach(t RANGE ${last_task})
    string(JSON label GET "${sim}" tasks ${t} label)
    if(label MATCHES "^stage ${i} ")
      string(JSON sim_device GET "${sim}" tasks ${t} device)
      if(NOT sim_device STREQUAL device)
        message(FATAL_ERROR "stage ${i}: the simulation places '${label}' on ${sim_device}, the real run "
                            "ran the stage on ${device}\n--- sim.json:\n${sim}\n--- run.json:\n${real}")
      endif()
      math(EXPR seen "${seen} + 1")
    endif()
  endforeach()
  if(seen EQUAL 0)
    message(FATAL_ERROR "stage ${i}: no simulated task")
  endif()
  string(APPEND placed " ${i}:${device}")
endforeach()
message(STATUS "every stage on the same device in both runs:${placed}")
