# The layers of README.md's Layout, checked on every include of the tree
# (scripts/check-layers.sh), and the check itself shown to fail on planted violations.
# Included from tests/CMakeLists.txt.
find_program(LOOM_BASH bash REQUIRED)
add_test(NAME layers COMMAND ${LOOM_BASH} ${CMAKE_SOURCE_DIR}/scripts/check-layers.sh ${CMAKE_SOURCE_DIR})
add_test(NAME layers.planted COMMAND ${CMAKE_COMMAND} -DBASH=${LOOM_BASH} -DSOURCE=${CMAKE_SOURCE_DIR}
  -DWORK=${CMAKE_CURRENT_BINARY_DIR}/layers-planted -P ${CMAKE_CURRENT_SOURCE_DIR}/layers/planted.cmake)
set_tests_properties(layers layers.planted PROPERTIES TIMEOUT 120)
