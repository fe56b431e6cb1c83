# Loom's libblas.so.3 (docs/blas.md), judged by Debian's reference BLAS tests (libblas-test):
# every program of levels 1 to 3 in the four precisions, BLAS and CBLAS, with the shim as
# libblas.so.3 (LD_LIBRARY_PATH), as configured by default; then the level-3 programs with every
# call forced through Loom on cpu0, and on PoCL's ocl0 (levels 1 and 2 never reach Loom: those
# runs would repeat the first). On ocl0, s and c only (f32 and c64, real and complex forms):
# all four precisions take about three minutes of PoCL there (docs/blas.md has that run).
# tests/blas/run-reference.sh fails when any routine fails, and, on a device, when a level-3
# program sent no call there, a call fell back after a Loom failure, or (c and z) hemm, herk or
# her2k sent none there: the conjugating forms may not regress to the host BLAS.
if(TARGET loom_blas_shim)
  set(LOOM_BLAS_SHIM_DIR ${CMAKE_BINARY_DIR}/blas)
  set(LOOM_BLAS_REF ${CMAKE_CURRENT_SOURCE_DIR}/blas/run-reference.sh)
  set(LOOM_BLAS_OUT ${CMAKE_BINARY_DIR}/blas-tests)
  add_test(NAME blas.reference
    COMMAND ${LOOM_BLAS_REF} ${LOOM_BLAS_SHIM_DIR} ${LOOM_BLAS_OUT}/default 123 sdcz)
  add_test(NAME blas.reference.cpu0
    COMMAND ${LOOM_BLAS_REF} ${LOOM_BLAS_SHIM_DIR} ${LOOM_BLAS_OUT}/cpu0 3 sdcz cpu0)
  add_test(NAME blas.reference.ocl0
    COMMAND ${LOOM_BLAS_REF} ${LOOM_BLAS_SHIM_DIR} ${LOOM_BLAS_OUT}/ocl0 3 sc ocl0)
  # Every level-3 form split across PoCL's two basic devices (a block of C each: columns, a
  # triangle's columns with their rows in it, both sides of symm and trmm, transposes), d and z.
  add_test(NAME blas.reference.shared
    COMMAND ${LOOM_BLAS_REF} ${LOOM_BLAS_SHIM_DIR} ${LOOM_BLAS_OUT}/shared 3 dz ocl0,ocl1)
  set_tests_properties(blas.reference blas.reference.cpu0 blas.reference.ocl0 blas.reference.shared PROPERTIES
    SKIP_RETURN_CODE 77 TIMEOUT 900 ENVIRONMENT "${LOOM_TEST_ENV}")
  set_property(TEST blas.reference.cpu0 APPEND PROPERTY ENVIRONMENT
    LOOM_BLAS_FORCE=1 LOOM_BLAS_DEVICES=cpu0)
  set_property(TEST blas.reference.ocl0 APPEND PROPERTY ENVIRONMENT
    LOOM_BLAS_FORCE=1 LOOM_BLAS_DEVICES=ocl0 POCL_DEVICES=pthread POCL_MEMORY_LIMIT=1)
  set_property(TEST blas.reference.shared APPEND PROPERTY ENVIRONMENT
    LOOM_BLAS_FORCE=1 LOOM_BLAS_DEVICES=ocl0,ocl1 "POCL_DEVICES=basic basic" POCL_MEMORY_LIMIT=1)
  # Sanitized builds: Debian's test programs are not instrumented, and the instrumented shim
  # they load needs AddressSanitizer's runtime loaded first; their Fortran runtime's own
  # allocations at exit are not Loom's to report.
  if(LOOM_SANITIZE)
    execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so OUTPUT_VARIABLE asan_rt
      OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(IS_ABSOLUTE "${asan_rt}" AND EXISTS "${asan_rt}")
      set_property(TEST blas.reference blas.reference.cpu0 blas.reference.ocl0 blas.reference.shared APPEND PROPERTY ENVIRONMENT
        LD_PRELOAD=${asan_rt} ASAN_OPTIONS=detect_leaks=0)
    endif()
  endif()

  # The C tests open the shim by path; `blas` also runs with it preloaded, as a program put on
  # it by LD_PRELOAD (not under ThreadSanitizer, whose runtime must be the first library).
  foreach(t blas blas_limit)
    if(TEST ${t})
      add_dependencies(test_${t} loom_blas_shim)
      set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT LOOM_BLAS_SHIM=${LOOM_BLAS_SHIM_DIR}/libblas.so.3)
    endif()
  endforeach()
  if(TEST blas AND NOT LOOM_TSAN AND NOT LOOM_SANITIZE)
    set_property(TEST blas APPEND PROPERTY ENVIRONMENT LD_PRELOAD=${LOOM_BLAS_SHIM_DIR}/libblas.so.3)
  endif()
endif()

# Reference LAPACK's linear-equation tests (acceptance 2; tests/blas/run-lapack-lin.sh) and
# NumPy's and SciPy's own linear-algebra tests (acceptance 3; run-python-suites.sh) over the
# shim, as over OpenBLAS: the same results. Not in sanitized or TSan builds: the programs,
# Python and its extensions are not instrumented.
if(TARGET loom_blas_shim AND NOT LOOM_TSAN AND NOT LOOM_SANITIZE)
  add_test(NAME blas.lapack_lin
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/blas/run-lapack-lin.sh ${CMAKE_BINARY_DIR}/blas sdcz)
  set_tests_properties(blas.lapack_lin PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "${LOOM_TEST_ENV}")
  foreach(suite numpy scipy)
    add_test(NAME blas.${suite}_linalg
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/blas/run-python-suites.sh ${CMAKE_BINARY_DIR}/blas ${suite})
    set_tests_properties(blas.${suite}_linalg PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
      ENVIRONMENT "${LOOM_TEST_ENV}")
  endforeach()
endif()

# A dgemm shared across PoCL's two single-threaded 'basic' devices (cpu0 excluded): the verbose
# line says `-> ocl0,ocl1` and C equals OpenBLAS's (tests/blas/run-shared.sh). n = 300 splits into
# two blocks of 150 columns of C; forced, since such a call is under the threshold.
if(TARGET loom_blas_shim AND TARGET loom-bench)
  add_test(NAME blas.shared COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/blas/run-shared.sh
    $<TARGET_FILE:loom-bench> ${CMAKE_BINARY_DIR}/blas/libblas.so.3 ocl0,ocl1 300)
  set_tests_properties(blas.shared PROPERTIES TIMEOUT 300 ENVIRONMENT "${LOOM_TEST_ENV}")
  set_property(TEST blas.shared APPEND PROPERTY ENVIRONMENT
    LOOM_BLAS_FORCE=1 "POCL_DEVICES=basic basic" POCL_MEMORY_LIMIT=1)
endif()

# loom-bench blas runs (small sizes): both sides' results are timed, not judged; the test
# shows the mode works and prints the forwarded calls' cost.
if(TARGET loom_blas_shim AND TARGET loom-bench)
  add_test(NAME blas.bench COMMAND $<TARGET_FILE:loom-bench> blas --sizes 64 --repeat 1
    --shim ${CMAKE_BINARY_DIR}/blas/libblas.so.3 --json ${CMAKE_BINARY_DIR}/blas-tests/bench.json)
  set_tests_properties(blas.bench PROPERTIES ENVIRONMENT "${LOOM_TEST_ENV}" TIMEOUT 300
    PASS_REGULAR_EXPRESSION "daxpy 16 +host +[0-9.]+ +shim +[0-9.]+ +extra")
endif()
