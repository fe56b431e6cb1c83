# Regenerates the committed .safetensors fixtures with make_fixtures.py into WORK and checks
# that they are byte for byte the files in the tree (so the script and the files agree):
#   cmake -DPYTHON=python3 -DSRC=<source dir> -DWORK=<scratch dir> -P check_fixtures.cmake
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/lib" "${WORK}/tools")
set(script "${SRC}/tests/data/safetensors/make_fixtures.py")
execute_process(COMMAND "${PYTHON}" "${script}" "${WORK}/lib" RESULT_VARIABLE rc1)
execute_process(COMMAND "${PYTHON}" "${script}" --tools "${WORK}/tools" RESULT_VARIABLE rc2)
if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0)
  message(FATAL_ERROR "make_fixtures.py failed (${rc1}, ${rc2})")
endif()
foreach(pair "lib/dtypes.safetensors|tests/data/safetensors/dtypes.safetensors"
    "lib/misaligned.safetensors|tests/data/safetensors/misaligned.safetensors"
    "tools/small.safetensors|tests/tools/data/small.safetensors"
    "tools/small_x.npy|tests/tools/data/small_x.npy" "tools/small_y.npy|tests/tools/data/small_y.npy")
  string(REPLACE "|" ";" pair "${pair}")
  list(GET pair 0 made)
  list(GET pair 1 committed)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK}/${made}" "${SRC}/${committed}"
    RESULT_VARIABLE same)
  if(NOT same EQUAL 0)
    message(FATAL_ERROR "${committed} differs from what make_fixtures.py writes now: rerun it")
  endif()
endforeach()
