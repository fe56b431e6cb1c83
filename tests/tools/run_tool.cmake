# Runs one command-line tool invocation and checks what it did, for tests/tools.cmake:
#   cmake -DTOOL=... -DWORK=... [options] -P run_tool.cmake
#
# TOOL            the executable
# ARGS            its arguments, separated by '|'; @WORK@ stands for the work directory
# WORK            a directory made empty before the run
# HELPER          loom-tool-helper; with FIXTURES=ON it first writes its fixtures into WORK
# MKDIRS          '|'-separated directories to make under WORK before the run
# EXPECT_RC       the exit code wanted (default 0)
# STDOUT_REGEX, STDERR_REGEX          regular expressions the output must match
# STDOUT_NOT_REGEX, STDERR_NOT_REGEX  ... must not match
# EXPECT_FILES    '|'-separated paths under WORK that must exist afterwards
# ONLY_FILES_IN   a directory under WORK that must hold exactly the EXPECT_FILES under it
# NO_FILES_IN     a directory under WORK that must hold no file at all (or not exist)
# EQUAL           '|'-separated A=B pairs of .npy files under WORK that must be equal
# CLOSE           ... that must agree within IR.md's float tolerance (loom-tool-helper npy-close:
#                 where a float sum's order may differ, as a conv cut into tiles by its GEMM)
# KNN_CHECK       OUT_DIR=GRAPH: check OUT_DIR's kNN result against brute force, inputs
#                 regenerated from GRAPH's parameters with seed 1 (loom-run --random 1)
# ENV             '|'-separated NAME=VALUE settings of the environment for the tool's run
#                 (LOOM_MEM_LIMIT=cpu0:8MiB)
# REF_ARGS        arguments of a reference run of the tool, made after the first without the
#                 ENV settings (its outputs are what EQUAL compares against)
# STATS_JSON      a --stats-json file under WORK whose "memory" section is checked: every node
#                 has the memory manager's counters, none peaked over its limit, one allocated
# STAGE_LIMIT     with STATS_JSON: every stage's limit_bytes is this and its peak at or under it
# NODE_LIMIT      with STATS_JSON: ID=BYTES, the limit memory node ID had
# TRACE           a --trace file under WORK: Chrome trace JSON that parses, with allocation
#                 and free events
cmake_minimum_required(VERSION 3.25)

function(fail msg)
  message(FATAL_ERROR "${msg}\n--- command: ${TOOL} ${args}\n--- exit: ${rc}\n--- stdout:\n${out}\n--- stderr:\n${err}")
endfunction()

foreach(v TOOL WORK)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_tool.cmake: ${v} is not set")
  endif()
endforeach()
if(NOT DEFINED EXPECT_RC)
  set(EXPECT_RC 0)
endif()

file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
if(FIXTURES)
  execute_process(COMMAND "${HELPER}" fixtures "${WORK}" RESULT_VARIABLE frc ERROR_VARIABLE ferr)
  if(NOT frc EQUAL 0)
    message(FATAL_ERROR "fixtures failed (${frc}): ${ferr}")
  endif()
endif()

string(REPLACE "|" ";" mkdirs "${MKDIRS}")
foreach(d ${mkdirs})
  file(MAKE_DIRECTORY "${WORK}/${d}")
endforeach()

# The environment's LOOM_MEM_LIMIT would change what every test sees: only ENV sets it.
unset(ENV{LOOM_MEM_LIMIT})
string(REPLACE "|" ";" env_settings "${ENV}")
foreach(setting ${env_settings})
  string(FIND "${setting}" "=" eq)
  string(SUBSTRING "${setting}" 0 ${eq} name)
  math(EXPR eq "${eq} + 1")
  string(SUBSTRING "${setting}" ${eq} -1 value)
  set(ENV{${name}} "${value}")
endforeach()

string(REPLACE "@WORK@" "${WORK}" args "${ARGS}")
string(REPLACE "|" ";" args "${args}")
execute_process(COMMAND "${TOOL}" ${args} WORKING_DIRECTORY "${WORK}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)

foreach(setting ${env_settings})
  string(FIND "${setting}" "=" eq)
  string(SUBSTRING "${setting}" 0 ${eq} name)
  unset(ENV{${name}})
endforeach()
if(DEFINED REF_ARGS)
  string(REPLACE "@WORK@" "${WORK}" ref_args "${REF_ARGS}")
  string(REPLACE "|" ";" ref_args "${ref_args}")
  execute_process(COMMAND "${TOOL}" ${ref_args} WORKING_DIRECTORY "${WORK}"
    RESULT_VARIABLE ref_rc OUTPUT_VARIABLE ref_out ERROR_VARIABLE ref_err)
  if(NOT ref_rc EQUAL 0)
    fail("the reference run (${ref_args}) failed (${ref_rc}): ${ref_err}")
  endif()
endif()

if(NOT "${rc}" STREQUAL "${EXPECT_RC}")
  fail("exit code ${rc}, expected ${EXPECT_RC}")
endif()
foreach(stream out err)
  string(TOUPPER "STD${stream}" name)
  if(DEFINED ${name}_REGEX AND NOT "${${stream}}" MATCHES "${${name}_REGEX}")
    fail("${name} does not match: ${${name}_REGEX}")
  endif()
  if(DEFINED ${name}_NOT_REGEX AND "${${stream}}" MATCHES "${${name}_NOT_REGEX}")
    fail("${name} matches what it must not: ${${name}_NOT_REGEX}")
  endif()
endforeach()
# A failure says so on stderr, as one loom-run line or a located parser error.
if(NOT EXPECT_RC EQUAL 0 AND err STREQUAL "")
  fail("failed without a message on stderr")
endif()

string(REPLACE "|" ";" expect_files "${EXPECT_FILES}")
foreach(f ${expect_files})
  if(NOT EXISTS "${WORK}/${f}")
    fail("missing output file ${f}")
  endif()
endforeach()

if(DEFINED ONLY_FILES_IN)
  file(GLOB_RECURSE present RELATIVE "${WORK}" LIST_DIRECTORIES false "${WORK}/${ONLY_FILES_IN}/*")
  # dot files too: temporaries are named .NAME.npy.*.tmp
  file(GLOB_RECURSE hidden RELATIVE "${WORK}" LIST_DIRECTORIES false "${WORK}/${ONLY_FILES_IN}/.*")
  list(APPEND present ${hidden})
  list(REMOVE_DUPLICATES present)
  list(SORT present)
  set(wanted ${expect_files})
  list(SORT wanted)
  if(NOT "${present}" STREQUAL "${wanted}")
    fail("${ONLY_FILES_IN} holds [${present}], expected [${wanted}]")
  endif()
endif()

if(DEFINED NO_FILES_IN AND EXISTS "${WORK}/${NO_FILES_IN}")
  file(GLOB_RECURSE left LIST_DIRECTORIES false "${WORK}/${NO_FILES_IN}/*" "${WORK}/${NO_FILES_IN}/.*")
  if(left)
    fail("files left behind in ${NO_FILES_IN}: ${left}")
  endif()
endif()

string(REPLACE "|" ";" pairs "${EQUAL}")
foreach(pair ${pairs})
  string(REPLACE "=" ";" ab "${pair}")
  list(GET ab 0 a)
  list(GET ab 1 b)
  execute_process(COMMAND "${HELPER}" npy-equal "${WORK}/${a}" "${WORK}/${b}" RESULT_VARIABLE erc ERROR_VARIABLE eerr)
  if(NOT erc EQUAL 0)
    fail("${a} and ${b} differ: ${eerr}")
  endif()
endforeach()

string(REPLACE "|" ";" pairs "${CLOSE}")
foreach(pair ${pairs})
  string(REPLACE "=" ";" ab "${pair}")
  list(GET ab 0 a)
  list(GET ab 1 b)
  execute_process(COMMAND "${HELPER}" npy-close "${WORK}/${a}" "${WORK}/${b}" RESULT_VARIABLE crc ERROR_VARIABLE cerr)
  if(NOT crc EQUAL 0)
    fail("${a} and ${b} are not close: ${cerr}")
  endif()
endforeach()

if(DEFINED KNN_CHECK)
  string(REPLACE "=" ";" kg "${KNN_CHECK}")
  list(GET kg 0 kdir)
  list(GET kg 1 kgraph)
  execute_process(COMMAND "${HELPER}" knn-check "${WORK}/${kdir}" --seed 1 "${kgraph}"
    RESULT_VARIABLE krc OUTPUT_VARIABLE kout ERROR_VARIABLE kerr)
  if(NOT krc EQUAL 0)
    fail("kNN check failed: ${kout}${kerr}")
  endif()
endif()

# Reads a JSON member of `doc` or fails the test naming it.
function(json_get var doc)
  string(JSON value ERROR_VARIABLE jerr GET "${doc}" ${ARGN})
  if(jerr)
    fail("JSON: ${ARGN}: ${jerr}")
  endif()
  set(${var} "${value}" PARENT_SCOPE)
endfunction()

if(DEFINED STATS_JSON)
  file(READ "${WORK}/${STATS_JSON}" stats)
  string(JSON n_nodes ERROR_VARIABLE jerr LENGTH "${stats}" memory nodes)
  if(jerr)
    fail("${STATS_JSON}: no memory nodes: ${jerr}")
  endif()
  math(EXPR last "${n_nodes} - 1")
  set(allocated OFF)
  foreach(i RANGE ${last})
    foreach(key id in_use peak_in_use limit allocations pool_hits evictions bytes_in bytes_out)
      json_get(v "${stats}" memory nodes ${i} ${key})
    endforeach()
    json_get(id "${stats}" memory nodes ${i} id)
    json_get(peak "${stats}" memory nodes ${i} peak_in_use)
    json_get(limit "${stats}" memory nodes ${i} limit)
    json_get(allocations "${stats}" memory nodes ${i} allocations)
    if(peak GREATER limit)
      fail("${STATS_JSON}: memory node ${id} peaked at ${peak} bytes, over its limit of ${limit}")
    endif()
    if(allocations GREATER 0)
      set(allocated ON)
    endif()
    if(DEFINED NODE_LIMIT AND NODE_LIMIT MATCHES "^${id}=")
      string(REPLACE "${id}=" "" want "${NODE_LIMIT}")
      if(NOT limit EQUAL want)
        fail("${STATS_JSON}: memory node ${id} has the limit ${limit}, expected ${want}")
      endif()
      set(node_seen ON)
    endif()
  endforeach()
  if(NOT allocated)
    fail("${STATS_JSON}: no memory node counted an allocation")
  endif()
  if(DEFINED NODE_LIMIT AND NOT node_seen)
    fail("${STATS_JSON}: no memory node for ${NODE_LIMIT}")
  endif()
  if(DEFINED STAGE_LIMIT)
    string(JSON n_stages LENGTH "${stats}" stages)
    math(EXPR last "${n_stages} - 1")
    foreach(i RANGE ${last})
      json_get(limit "${stats}" stages ${i} limit_bytes)
      json_get(peak "${stats}" stages ${i} peak_bytes)
      if(NOT limit EQUAL STAGE_LIMIT OR peak GREATER limit)
        fail("${STATS_JSON}: stage ${i} has the limit ${limit} and the peak ${peak}; expected the limit ${STAGE_LIMIT}")
      endif()
    endforeach()
  endif()
endif()

if(DEFINED TRACE)
  file(READ "${WORK}/${TRACE}" trace)
  string(JSON n_events ERROR_VARIABLE jerr LENGTH "${trace}" traceEvents)
  if(jerr)
    fail("${TRACE} is not Chrome trace JSON: ${jerr}")
  endif()
  foreach(event alloc free)
    if(NOT trace MATCHES "\"name\": *\"${event}\"")
      fail("${TRACE}: no '${event}' event among its ${n_events}")
    endif()
  endforeach()
endif()
