# layers.planted: copies the tree's src/, kernels/, tools/ and scripts/ into WORK, checks that
# scripts/check-layers.sh accepts the copy, then plants one include against the layers at a
# time and checks that the script fails and names the file, the line and the include.
#   cmake -DBASH=bash -DSOURCE=<tree> -DWORK=<scratch folder> -P planted.cmake
foreach(var BASH SOURCE WORK)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "planted.cmake: -D${var}= is required")
  endif()
endforeach()

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
foreach(dir src kernels tools scripts)
  file(COPY ${SOURCE}/${dir} DESTINATION ${WORK})
endforeach()

function(run_check out_rc out_text)
  execute_process(COMMAND ${BASH} ${WORK}/scripts/check-layers.sh ${WORK}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(${out_rc} ${rc} PARENT_SCOPE)
  set(${out_text} "${out}${err}" PARENT_SCOPE)
endfunction()

run_check(rc text)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the unchanged copy of the tree fails the check:\n${text}")
endif()

# plant(FILE LINE_TEXT): writes FILE (relative to WORK) with a comment line and LINE_TEXT on
# line 2, runs the check, expects it to fail naming FILE:2 and the header, then removes FILE.
function(plant file line_text header)
  file(WRITE ${WORK}/${file} "/* planted by tests/layers/planted.cmake */\n${line_text}\n")
  run_check(rc text)
  file(REMOVE ${WORK}/${file})
  if(rc EQUAL 0)
    message(FATAL_ERROR "check-layers.sh accepted ${file} including \"${header}\":\n${text}")
  endif()
  string(REPLACE "." "\\." pattern "${file}:2: includes \"${header}\"")
  if(NOT text MATCHES "${pattern}")
    message(FATAL_ERROR "check-layers.sh failed but did not name ${file}:2 and \"${header}\":\n${text}")
  endif()
  message(STATUS "caught: ${file}:2 including ${header}")
endfunction()

# The IR reaching up into the runtime (the issue's own example).
plant(src/ir/planted.c "#include \"runtime/context.h\"" "runtime/context.h")
# A backend reaching past the HMM's contract into its insides.
plant(src/backends/opencl/planted.c "#include \"hmm/hmm.h\"" "hmm/hmm.h")
# The HMM reaching into a backend beyond the registry.
plant(src/hmm/planted.h "#  include \"backends/backend.h\"" "backends/backend.h")
# The devices module reaching up into the backends.
plant(src/devices/planted.c "#include \"backends/registry.h\"" "backends/registry.h")
# A tool reaching into the library's insides, and a relative path out of its module.
plant(tools/loom-info/planted.c "#include \"runtime/exec.h\"" "runtime/exec.h")
plant(src/core/planted.c "#include \"../hmm/hmm.h\"" "../hmm/hmm.h")
