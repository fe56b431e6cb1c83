# Installs Loom into a folder of the build tree, then builds examples/embed against it twice:
# through the CMake package (find_package(Loom), Loom::loom) and through pkg-config, and runs
# both programs; with the Fortran module, examples/fortran too (Loom::loom_fortran).
set(_prefix ${CMAKE_BINARY_DIR}/install-test/prefix)
set(_work ${CMAKE_BINARY_DIR}/install-test)
add_test(NAME install.package
  COMMAND ${CMAKE_COMMAND}
    -DBUILD_DIR=${CMAKE_BINARY_DIR} -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
    -DPREFIX=${_prefix} -DWORK=${_work} -DGENERATOR=${CMAKE_GENERATOR} -DSANITIZE=${LOOM_SANITIZE}
    -DTSAN=${LOOM_TSAN} -DCC=${CMAKE_C_COMPILER} -DFC=$<$<BOOL:${LOOM_HAVE_FORTRAN}>:${CMAKE_Fortran_COMPILER}>
    -P ${CMAKE_CURRENT_SOURCE_DIR}/install/check.cmake)
set_tests_properties(install.package PROPERTIES TIMEOUT 300 RUN_SERIAL TRUE
  PASS_REGULAR_EXPRESSION "cmake package: y = \\[0\\.34299[0-9]*, 0\\.15446[0-9]*\\].*pkg-config: y = \\[0\\.34299")
