# The layers of README.md's Layout, checked on every include of the tree
# (scripts/check-layers.sh), and the check itself shown to fail on planted violations.
# Included from tests/CMakeLists.txt.
find_program(LOOM_BASH bash REQUIRED)
add_test(NAME layers COMMAND ${LOOM_BASH} ${CMAKE_SOURCE_DIR}/scripts/check-layers.sh ${CMAKE_SOURCE_DIR})
add_test(NAME layers.planted COMMAND ${CMAKE_COMMAND} -DBASH=${LOOM_BASH} -DSOURCE=${CMAKE_SOURCE_DIR}
  -DWORK=${CMAKE_CURRENT_BINARY_DIR}/layers-planted -P ${CMAKE_CURRENT_SOURCE_DIR}/layers/planted.cmake)
set_tests_properties(layers layers.planted PROPERTIES TIMEOUT 120)
# The same layers on the calls the compiled library makes (scripts/check-calls.sh: nm of each
# module's objects), and that check shown to fail on planted upward calls.
add_test(NAME layers.calls COMMAND ${LOOM_BASH} ${CMAKE_SOURCE_DIR}/scripts/check-calls.sh
  ${CMAKE_BINARY_DIR}/CMakeFiles/loom_objects.dir)
add_test(NAME layers.calls_planted COMMAND ${CMAKE_COMMAND} -DBASH=${LOOM_BASH} -DCC=${CMAKE_C_COMPILER}
  -DSOURCE=${CMAKE_SOURCE_DIR} -DOBJECTS=${CMAKE_BINARY_DIR}/CMakeFiles/loom_objects.dir
  -DWORK=${CMAKE_CURRENT_BINARY_DIR}/layers-calls-planted -P ${CMAKE_CURRENT_SOURCE_DIR}/layers/planted_calls.cmake)
set_tests_properties(layers.calls layers.calls_planted PROPERTIES TIMEOUT 300)
# What the shared library exports: the public headers' functions only.
add_test(NAME layers.exports COMMAND ${CMAKE_COMMAND} -DNM=${CMAKE_NM} -DLIB=$<TARGET_FILE:loom>
  -DSOURCE=${CMAKE_SOURCE_DIR} -P ${CMAKE_CURRENT_SOURCE_DIR}/layers/exports.cmake)
set_tests_properties(layers.exports PROPERTIES TIMEOUT 120)
# No file of src/ over 1,000 lines.
add_test(NAME layers.file_sizes COMMAND ${CMAKE_COMMAND} -DSOURCE=${CMAKE_SOURCE_DIR}
  -P ${CMAKE_CURRENT_SOURCE_DIR}/layers/file_sizes.cmake)
set_tests_properties(layers.file_sizes PROPERTIES TIMEOUT 60)
