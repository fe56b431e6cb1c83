# loom-run --simulate here and loom-info --platform against models measured on this machine,
# for tests/tools.cmake:
#   cmake -DRUN=loom-run -DINFO=loom-info -DBENCH=loom-bench -DTOWERS=towers.lir -DWORK=dir -P ...
# With PoCL's two basic devices (one name, so one model for both): calibrates cpu0 and ocl0
# quickly into a cache folder of its own, then checks that
#  - loom-info --platform writes this machine as a platform file (kinds by backend; PoCL's
#    devices on the host's memory node, so no link),
#  - --simulate here --devices ocl0,ocl1 puts a tower on each device (the branch cut), and
#    --devices ocl0 runs the graph as one stage,
#  - the platform file, simulated, gives the makespan --simulate here gives (the same models),
#  - with no model, both name the device and say to run `loom-bench calibrate`.
cmake_minimum_required(VERSION 3.25)

file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/cache" "${WORK}/empty")
unset(ENV{LOOM_MEM_LIMIT})
unset(ENV{LOOM_DEVICES})
set(ENV{POCL_DEVICES} "basic basic")
set(ENV{LOOM_CACHE_DIR} "${WORK}/cache")

function(run what expect_rc)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "${what}: exit ${rc}, wanted ${expect_rc}\n--- command: ${ARGN}\n--- stdout:\n${out}\n--- stderr:\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()

function(expect what text regex)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "${what}: does not match '${regex}':\n${text}")
  endif()
endfunction()

# No model yet: loom-info --platform and --simulate here fail naming cpu0.
set(ENV{LOOM_CACHE_DIR} "${WORK}/empty")
run("loom-info --platform, no model" 1 ${INFO} --platform)
expect("its stderr" "${err}" "^loom-info: --platform: cpu0 \\([^)]*\\): no performance model yet \\(run `loom-bench calibrate`\\)")
run("--simulate here, no model" 1 ${RUN} ${TOWERS} --simulate here)
expect("its stderr" "${err}" "--simulate here: .*cpu0 \\([^)]*\\): no performance model yet \\(run `loom-bench calibrate`\\)")
set(ENV{LOOM_CACHE_DIR} "${WORK}/cache")

run("calibrate" 0 ${BENCH} calibrate --quick --reps 1 --devices cpu0,ocl0)

run("loom-info --platform" 0 ${INFO} --platform)
file(WRITE "${WORK}/here.json" "${out}")
expect("the platform" "${out}" "\"comment\": \"this machine's devices, measured by loom-bench calibrate: cpu0 ")
expect("the platform" "${out}" "\"id\": \"cpu0\",\n *\"kind\": \"cpu\"")
# PoCL's devices compute in host memory: on node "host", no link to write.
expect("the platform" "${out}" "\"id\": \"ocl1\",\n *\"kind\": \"opencl\",\n *\"memory\": [0-9]+,\n *\"node\": \"host\",")
expect("the platform" "${out}" "\"gemm\": {\n *\"latency\": [0-9.e+-]+,\n *\"seconds_per_unit\": [0-9.e+-]+,\n *\"points\": ")
if(out MATCHES "\"links\"")
  message(FATAL_ERROR "the platform: a link, where every device computes in host memory:\n${out}")
endif()

run("--simulate here, two devices" 0 ${RUN} ${TOWERS} --simulate here --devices ocl0,ocl1)
expect("two devices" "${out}" "on this machine's models \\(simulated, no kernel run\\): 3 stages, 3 tasks\n")
expect("two devices" "${out}" "\n +ocl0 +opencl +busy [0-9.e-]+ s \\([0-9.]+%\\), [12] tasks\n +ocl1 +opencl +busy [0-9.e-]+ s \\([0-9.]+%\\), [12] tasks\n")
run("--simulate here, one device" 0 ${RUN} ${TOWERS} --simulate here --devices ocl0)
expect("one device" "${out}" "1 stages, 1 tasks\n")

run("--simulate here" 0 ${RUN} ${TOWERS} --simulate here)
string(REGEX MATCH "policy dmda: [^\n]*" here_line "${out}")
run("--simulate here.json" 0 ${RUN} ${TOWERS} --simulate ${WORK}/here.json)
string(REGEX MATCH "policy dmda: [^\n]*" file_line "${out}")
if(NOT here_line OR NOT here_line STREQUAL file_line)
  message(FATAL_ERROR "the platform file simulates otherwise than here:\n  here: ${here_line}\n  file: ${file_line}")
endif()

run("--simulate here, a device not here" 1 ${RUN} ${TOWERS} --simulate here --devices ocl7)
expect("its stderr" "${err}" "names no device of this machine")
run("--simulate here, a device twice" 2 ${RUN} ${TOWERS} --simulate here --devices ocl0,ocl0)
expect("its stderr" "${err}" "^loom-run: --devices: platform: 'ocl0,ocl0' names ocl0 twice\n$")
