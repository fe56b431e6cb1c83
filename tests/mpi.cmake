# loom-run --mpi under mpirun (tests/mpi/run_mpi.cmake): with 2 and 4 ranks on one machine
# (oversubscribed: CI has 2 cores), a kNN, reductions and a dot whose loops the ranks share give
# what the single-process run gives, and a rank whose limit is too small for its share fails
# the run cleanly (every rank exits with an error; the TIMEOUT catches a hang). Then the C API
# over MPI_COMM_WORLD (tests/mpi/c/plan_run_mpi.c). Without MPI in the build (LOOM_MPI) or
# without mpirun, the tests are registered anyway and skip (exit 77), so a skip shows.
set(LOOM_MPI_TESTS knn.np2 knn_fused.np4 knn_idx.np3 reduce.np2 reduce.np4 dot.np2 dot.np4 chain.np3
  knn_ocl.np2 recover_rank.np2 rank_fails c_api.np2 c_api.np3)
if(NOT LOOM_HAVE_MPI OR NOT LOOM_MPIEXEC)
  foreach(t ${LOOM_MPI_TESTS})
    add_test(NAME mpi.${t}
      COMMAND sh -c "echo 'MPI is not built (LOOM_MPI; install libopenmpi-dev and openmpi-bin) \
or mpirun is missing'; exit 77")
    set_tests_properties(mpi.${t} PROPERTIES SKIP_RETURN_CODE 77)
  endforeach()
  if(NOT LOOM_HAVE_MPI) # loom-run says why it cannot
    add_test(NAME mpi.unavailable COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:loom-run>
      -DWORK=${CMAKE_CURRENT_BINARY_DIR}/mpi-tests/unavailable -DEXPECT_RC=2
      "-DARGS=--mpi|${CMAKE_CURRENT_SOURCE_DIR}/tools/data/small.lir|--random|1"
      "-DSTDERR_REGEX=^loom-run: --mpi: this loom-run was built without MPI .install libopenmpi-dev"
      -P ${CMAKE_CURRENT_SOURCE_DIR}/tools/run_tool.cmake)
    set_tests_properties(mpi.unavailable PROPERTIES TIMEOUT 30 ENVIRONMENT "${LOOM_TEST_ENV}")
  endif()
  return()
endif()

set(LOOM_MPI_DATA ${CMAKE_CURRENT_SOURCE_DIR}/mpi/data)
# A rank runs its range on one runner: --devices (several devices at once) is refused by name.
add_test(NAME mpi.no_devices COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:loom-run>
  -DWORK=${CMAKE_CURRENT_BINARY_DIR}/mpi-tests/no_devices -DEXPECT_RC=2
  "-DARGS=--mpi|${CMAKE_CURRENT_SOURCE_DIR}/tools/data/small.lir|--random|1|--devices|auto"
  "-DSTDERR_REGEX=^loom-run: --mpi shares each loop between the ranks, one runner each: it takes no --devices"
  -P ${CMAKE_CURRENT_SOURCE_DIR}/tools/run_tool.cmake)
set_tests_properties(mpi.no_devices PROPERTIES TIMEOUT 30 ENVIRONMENT "${LOOM_TEST_ENV}")
# Sanitized builds: Open MPI's own allocations outlive MPI_Finalize (tests/lsan.supp names its
# libraries); malloc's stacks must be unwound without frame pointers to reach them.
set(LOOM_MPI_TEST_ENV "OMP_NUM_THREADS=1;ASAN_OPTIONS=fast_unwind_on_malloc=0")
# loom_mpi_test(NAME NP GRAPH [CLOSE outputs...] [RANK1_ENV NAME=VALUE] [RECOVERY]
#               [FAIL_REGEX re FAIL_REGEX2 re] ARGS args...)
# The expressions hold no square bracket (CMake lists would not split there).
function(loom_mpi_test name np graph)
  cmake_parse_arguments(PARSE_ARGV 3 T "RECOVERY" "RANK1_ENV;FAIL_REGEX;FAIL_REGEX2" "ARGS;CLOSE")
  set(defs -DMPIEXEC=${LOOM_MPIEXEC} -DTOOL=$<TARGET_FILE:loom-run> -DHELPER=$<TARGET_FILE:loom-tool-helper>
    -DWORK=${CMAKE_CURRENT_BINARY_DIR}/mpi-tests/${name} -DGRAPH=${graph} -DNP=${np})
  string(REPLACE ";" "|" joined "${T_ARGS}")
  list(APPEND defs "-DARGS=${joined}")
  if(T_CLOSE)
    string(REPLACE ";" "|" joined "${T_CLOSE}")
    list(APPEND defs "-DCLOSE=${joined}")
  endif()
  if(T_RANK1_ENV)
    list(APPEND defs "-DRANK1_ENV=${T_RANK1_ENV}")
  endif()
  if(T_RECOVERY)
    list(APPEND defs -DEXPECT_RECOVERY=ON)
  endif()
  if(T_FAIL_REGEX)
    list(APPEND defs "-DEXPECT_FAIL_REGEX=${T_FAIL_REGEX}" "-DEXPECT_FAIL_REGEX2=${T_FAIL_REGEX2}")
  endif()
  add_test(NAME mpi.${name} COMMAND ${CMAKE_COMMAND} ${defs} -P ${CMAKE_CURRENT_SOURCE_DIR}/mpi/run_mpi.cmake)
  # One MPI process per rank, each with one OpenMP thread.
  set_tests_properties(mpi.${name} PROPERTIES TIMEOUT 120 PROCESSORS ${np}
    ENVIRONMENT "${LOOM_TEST_ENV};${LOOM_MPI_TEST_ENV}")
endfunction()

#               ARGS args...)
function(loom_mpi_test name np graph)
  cmake_parse_arguments(PARSE_ARGV 3 T "RECOVERY" "RANK1_ENV;FAIL_REGEX;FAIL_REGEX2" "ARGS;CLOSE")
  set(defs -DMPIEXEC=${LOOM_MPIEXEC} -DTOOL=$<TARGET_FILE:loom-run> -DHELPER=$<TARGET_FILE:loom-tool-helper>
    -DWORK=${CMAKE_CURRENT_BINARY_DIR}/mpi-tests/${name} -DGRAPH=${graph} -DNP=${np})
  string(REPLACE ";" "|" joined "${T_ARGS}")
  list(APPEND defs "-DARGS=${joined}")
  if(T_CLOSE)
    string(REPLACE ";" "|" joined "${T_CLOSE}")
    list(APPEND defs "-DCLOSE=${joined}")
  endif()
  if(T_RANK1_ENV)
    list(APPEND defs "-DRANK1_ENV=${T_RANK1_ENV}")
  endif()
  if(T_RECOVERY)
    list(APPEND defs -DEXPECT_RECOVERY=ON)
  endif()
  if(T_FAIL_REGEX)
    list(APPEND defs "-DEXPECT_FAIL_REGEX=${T_FAIL_REGEX}" "-DEXPECT_FAIL_REGEX2=${T_FAIL_REGEX2}")
  endif()
  add_test(NAME mpi.${name} COMMAND ${CMAKE_COMMAND} ${defs} -P ${CMAKE_CURRENT_SOURCE_DIR}/mpi/run_mpi.cmake)
  # One MPI process per rank, each with one OpenMP thread.
  set_tests_properties(mpi.${name} PROPERTIES TIMEOUT 120 PROCESSORS ${np}
    ENVIRONMENT "${LOOM_TEST_ENV};${LOOM_MPI_TEST_ENV}")
endfunction()

set(knn ${CMAKE_CURRENT_SOURCE_DIR}/tools/data/knn_small.lir)
# 12 pieces of 167 rows, topk merged (not fused: the loop's body is the distance and topk ops).
loom_mpi_test(knn.np2 2 ${knn} ARGS --random 1 --limit 4MiB --no-rewrite fuse)
# 334 fused pieces of 6 rows over 4 ranks.
loom_mpi_test(knn_fused.np4 4 ${knn} ARGS --random 1 --limit 256KiB)
# Only the indices returned: the ranks' partial values travel all the same, to merge them by.
loom_mpi_test(knn_idx.np3 3 ${LOOM_MPI_DATA}/knn_idx.lir ARGS --random 1 --limit 256KiB)
# 3 pieces: sum, max and argmin; with 4 ranks one rank has no piece.
loom_mpi_test(reduce.np2 2 ${LOOM_MPI_DATA}/reduce.lir ARGS --random 1 --limit 1300KiB CLOSE total)
loom_mpi_test(reduce.np4 4 ${LOOM_MPI_DATA}/reduce.lir ARGS --random 1 --limit 1300KiB CLOSE total)
# 32 pieces of the inner dimension, summed.
loom_mpi_test(dot.np2 2 ${LOOM_MPI_DATA}/dot.lir ARGS --random 1 --limit 256KiB CLOSE c)
loom_mpi_test(dot.np4 4 ${LOOM_MPI_DATA}/dot.lir ARGS --random 1 --limit 256KiB CLOSE c)
# Two loops (a dot's rows, each a loop of its own summing the inner dimension; then the sum of
# exp of a dot reading the first's result through a transpose) over 3 ranks: the combined and
# broadcast result of the first is what the second runs on.
loom_mpi_test(chain.np3 3 ${LOOM_MPI_DATA}/chain.lir ARGS --random 1 --limit 1MiB CLOSE total)
# Each rank's range on an OpenCL device of its own (PoCL's, in CI): skipped where there is none.
if(LOOM_HAVE_OPENCL)
  loom_mpi_test(knn_ocl.np2 2 ${knn} ARGS --random 1 --runners ocl0:256KiB)
  set_tests_properties(mpi.knn_ocl.np2 PROPERTIES TIMEOUT 300
    SKIP_REGULAR_EXPRESSION "this machine has no device ocl0")
endif()
# Rank 1's memory node refuses its 10th allocation and those after it over 512 KiB, as a
# crowded device would: with --recover it re-plans its range in smaller pieces and the run
# goes on, equal to the single-process run.
loom_mpi_test(recover_rank.np2 2 ${knn} ARGS --random 1 --limit 4MiB --no-rewrite fuse --recover
  RANK1_ENV LOOM_TESTING_REFUSE=host0:10:512KiB RECOVERY)
# Rank 1's own memory limit (8 KiB) is too small for a piece of its range: it says so, naming
# itself, the stage and its pieces; rank 0 says rank 1 failed; neither waits for the other.
loom_mpi_test(rank_fails 2 ${knn} ARGS --random 1 --limit 256KiB RANK1_ENV LOOM_MEM_LIMIT=cpu0:8KiB
  FAIL_REGEX
    "loom-run: rank 1: stage 1 .loop pieces .[0-9]+, [0-9]+. of [0-9]+ on cpu0, limit 8.00 KiB.: split_by_memory"
  FAIL_REGEX2 "loom-run: rank 1 failed: rank 1: stage 1 .loop pieces .[0-9]+, [0-9]+.")
set_tests_properties(mpi.rank_fails PROPERTIES TIMEOUT 60)

# The C API from a program of its own: public headers, libloom_mpi over the shared libloom, and MPI,
# as a user's code builds it.
add_executable(loom_test_mpi_c ${CMAKE_CURRENT_SOURCE_DIR}/mpi/c/plan_run_mpi.c)
target_link_libraries(loom_test_mpi_c PRIVATE loom_mpi)
# mpirun's settings as tests/mpi/run_mpi.cmake explains them.
set(LOOM_MPIRUN_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm=isolated
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl=self,vader
  OMPI_MCA_btl_vader_single_copy_mechanism=none)
foreach(np 2 3)
  add_test(NAME mpi.c_api.np${np} COMMAND ${LOOM_MPIEXEC} -np ${np} $<TARGET_FILE:loom_test_mpi_c>)
  set_tests_properties(mpi.c_api.np${np} PROPERTIES TIMEOUT 120 PROCESSORS ${np}
    ENVIRONMENT "${LOOM_TEST_ENV};${LOOM_MPI_TEST_ENV};${LOOM_MPIRUN_ENV}")
endforeach()
