# layers.calls_planted: copies a build's library objects into WORK, checks that
# scripts/check-calls.sh accepts the copy, then plants one object at a time that calls a
# function of a module above its own and checks that the script fails naming the object, the
# symbol and the module it reaches.
#   cmake -DBASH=bash -DCC=cc -DSOURCE=<tree> -DOBJECTS=<build>/CMakeFiles/loom_objects.dir
#         -DWORK=<scratch folder> -P planted_calls.cmake
foreach(var BASH CC SOURCE OBJECTS WORK)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "planted_calls.cmake: -D${var}= is required")
  endif()
endforeach()

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
file(COPY ${OBJECTS}/src DESTINATION ${WORK} FILES_MATCHING PATTERN "*.o")

function(run_check out_rc out_text)
  execute_process(COMMAND ${BASH} ${SOURCE}/scripts/check-calls.sh ${WORK}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(${out_rc} ${rc} PARENT_SCOPE)
  set(${out_text} "${out}${err}" PARENT_SCOPE)
endfunction()

run_check(rc text)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the unchanged objects fail the check:\n${text}")
endif()

# plant(MODULE SYMBOL TARGET): compiles an object into src/MODULE/ that calls SYMBOL (a
# function of module TARGET, declared by hand, as an include-dodging call would be), runs the
# check, expects it to fail naming the object, the symbol and TARGET, then removes the object.
function(plant module symbol target)
  set(c ${WORK}/planted_${module}.c)
  set(o ${WORK}/src/${module}/planted.c.o)
  file(WRITE ${c} "/* planted by tests/layers/planted_calls.cmake */\nvoid ${symbol}(void);\n"
    "void loom__planted_${module}(void) { ${symbol}(); }\n")
  execute_process(COMMAND ${CC} -c ${c} -o ${o} RESULT_VARIABLE crc ERROR_VARIABLE cerr)
  if(NOT crc EQUAL 0)
    message(FATAL_ERROR "cannot compile the planted call: ${cerr}")
  endif()
  run_check(rc text)
  file(REMOVE ${o} ${c})
  if(rc EQUAL 0)
    message(FATAL_ERROR "check-calls.sh accepted src/${module} calling ${symbol} of ${target}:\n${text}")
  endif()
  if(NOT text MATCHES "src/${module}/planted\\.c\\.o: calls ${symbol} of ${target}:")
    message(FATAL_ERROR "check-calls.sh failed but did not name the planted call of ${symbol}:\n${text}")
  endif()
  message(STATUS "caught: src/${module} calling ${symbol} of ${target}")
endfunction()

# The scheduler reaching up into the runtime (the issue's own example: it reads the context).
plant(sched loom_context_device_count runtime)
# Core, below everything, calling the IR.
plant(core loom_graph_verify ir)
# The runtime cutting a plan itself (issue 29: every cut is the splitter's, made with the plan).
plant(runtime loom_plan_split_by_memory splitter)
plant(runtime loom_graph_optimize_for_sharing splitter)
