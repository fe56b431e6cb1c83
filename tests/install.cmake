# Installs Loom, moves the installed tree elsewhere, and builds and runs examples/embed (CMake
# package and pkg-config, shared and static), examples/fortran and examples/mpi against it in a
# clean environment (tests/install/check.cmake says how); checks that libloom.so needs no MPI.
set(_prefix ${CMAKE_BINARY_DIR}/install-test/prefix)
set(_work ${CMAKE_BINARY_DIR}/install-test)
set(_mpiexec "")
if(LOOM_HAVE_MPI AND LOOM_MPIEXEC)
  set(_mpiexec ${LOOM_MPIEXEC})
endif()
add_test(NAME install.package
  COMMAND ${CMAKE_COMMAND}
    -DBUILD_DIR=${CMAKE_BINARY_DIR} -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
    -DPREFIX=${_prefix} -DWORK=${_work} -DGENERATOR=${CMAKE_GENERATOR} -DSANITIZE=${LOOM_SANITIZE}
    -DTSAN=${LOOM_TSAN} -DCC=${CMAKE_C_COMPILER} -DFC=$<$<BOOL:${LOOM_HAVE_FORTRAN}>:${CMAKE_Fortran_COMPILER}>
    -DMPIEXEC=${_mpiexec} -DCUDA_LIBDIR=$<$<BOOL:${LOOM_HAVE_CUDA}>:${CUDAToolkit_LIBRARY_DIR}>
    -P ${CMAKE_CURRENT_SOURCE_DIR}/install/check.cmake)
# Only the sanitizers' settings reach the programs (check.cmake clears the rest): LeakSanitizer's
# suppressions (PoCL, Open MPI), and full stacks to reach Open MPI's allocations.
set_tests_properties(install.package PROPERTIES TIMEOUT 600 RUN_SERIAL TRUE
  ENVIRONMENT "${LOOM_TEST_ENV};ASAN_OPTIONS=fast_unwind_on_malloc=0:new_delete_type_mismatch=0")
