# The Fortran example (examples/fortran), built in this tree against the loom_fortran module
# and run on its .lir: its results are checked against a reference it computes itself. Without
# a Fortran compiler the test is registered anyway and skips (exit 77), so a skip shows.
if(LOOM_HAVE_FORTRAN)
  add_executable(loom_fortran_example ${CMAKE_SOURCE_DIR}/examples/fortran/main.f90)
  target_link_libraries(loom_fortran_example PRIVATE loom_fortran)
  add_test(NAME fortran.example
    COMMAND loom_fortran_example ${CMAKE_SOURCE_DIR}/examples/fortran/project.lir cpu0:1MiB)
else()
  add_test(NAME fortran.example
    COMMAND sh -c "echo 'the Fortran module is not built (no Fortran compiler, LOOM_FORTRAN=OFF, or a sanitized clang build)'; exit 77")
endif()
set_tests_properties(fortran.example PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
  ENVIRONMENT "${LOOM_TEST_ENV}")
