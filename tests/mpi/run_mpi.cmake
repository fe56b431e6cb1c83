# Runs loom-run --mpi under mpirun and checks it against the single-process run, for
# tests/mpi.cmake:
#   cmake -DMPIEXEC=mpirun -DTOOL=loom-run -DHELPER=loom-tool-helper -DWORK=dir -DGRAPH=g.lir
#         -DNP=n -DARGS='a|b|...' [-DCLOSE='out|...'] [-DRANK1_ENV=NAME=VALUE]
#         [-DEXPECT_FAIL_REGEX=re [-DEXPECT_FAIL_REGEX2=re]] [-DEXPECT_RECOVERY=ON] -P run_mpi.cmake
#
# 1. loom-run GRAPH ARGS --out-dir WORK/ref: the single-process run
# 2. mpirun -np NP loom-run --mpi GRAPH ARGS --out-dir WORK/mpi --stats-json WORK/stats.json
#    (RANK1_ENV: rank 1 runs with that environment setting, the others without, through
#    mpirun's MPMD form "-np 1 loom-run ... : -np NP-1 env NAME=VALUE loom-run ...")
# 3. every output of the single-process run equal to the MPI run's, byte for byte, except those
#    named in CLOSE (sums, whose partial sums the ranks group differently), which must agree
#    within IR.md's float tolerance (loom-tool-helper npy-close)
# 4. the report: at least one loop was shared, every rank ran under NP ranks' ranges that cover
#    every piece once, and each range's and each rank's measured peak is at or under its limit;
#    with EXPECT_RECOVERY, some range was re-planned after out of memory (--recover)
# EXPECT_FAIL_REGEX: the MPI run must fail instead (not hang: the test's TIMEOUT), its stderr
# matching the expression (and EXPECT_FAIL_REGEX2: the ranks' messages come in either order),
# and write nothing; steps 3 and 4 are skipped.
#
# mpirun is told what a root CI container needs (OMPI_ALLOW_RUN_AS_ROOT), to start the ranks on
# this machine without ssh or rsh (plm isolated: a container without either otherwise refuses
# to start), to place more ranks than cores (oversubscribe) and to yield the core while
# waiting, to use shared memory only (btl self,vader) and no single-copy mechanism (CMA, which
# containers without ptrace refuse).
cmake_minimum_required(VERSION 3.25)

function(fail msg)
  message(FATAL_ERROR
    "${msg}\n--- command: ${cmd}\n--- exit: ${rc}\n--- stdout:\n${out}\n--- stderr:\n${err}")
endfunction()

foreach(v MPIEXEC TOOL HELPER WORK GRAPH NP)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_mpi.cmake: ${v} is not set")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
string(REPLACE "|" ";" args "${ARGS}")
string(REPLACE "|" ";" close "${CLOSE}")

set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
set(ENV{OMPI_MCA_rmaps_base_oversubscribe} 1)
set(ENV{OMPI_MCA_mpi_yield_when_idle} 1)
set(ENV{OMPI_MCA_plm} isolated)
set(ENV{OMPI_MCA_btl} "self,vader")
set(ENV{OMPI_MCA_btl_vader_single_copy_mechanism} none)

# ---- 1. the single-process run
set(cmd "${TOOL}" "${GRAPH}" ${args} --out-dir "${WORK}/ref")
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  fail("the single-process run failed")
endif()

# ---- 2. the MPI run
set(mpi_args --mpi "${GRAPH}" ${args} --out-dir "${WORK}/mpi" --stats-json "${WORK}/stats.json")
if(DEFINED RANK1_ENV)
  math(EXPR rest "${NP} - 1")
  set(cmd "${MPIEXEC}" -np 1 "${TOOL}" ${mpi_args} : -np ${rest} env "${RANK1_ENV}" "${TOOL}" ${mpi_args})
else()
  set(cmd "${MPIEXEC}" -np ${NP} "${TOOL}" ${mpi_args})
endif()
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(DEFINED EXPECT_FAIL_REGEX)
  if(rc EQUAL 0)
    fail("the MPI run succeeded; it should have failed")
  endif()
  foreach(re "${EXPECT_FAIL_REGEX}" "${EXPECT_FAIL_REGEX2}")
    if(NOT err MATCHES "${re}")
      fail("stderr does not match '${re}'")
    endif()
  endforeach()
  if(EXISTS "${WORK}/mpi" OR EXISTS "${WORK}/stats.json")
    fail("a failed run left outputs behind")
  endif()
  message(STATUS "failed as expected:\n${err}")
  return()
endif()
if(NOT rc EQUAL 0)
  fail("the MPI run failed")
endif()
message(STATUS "${out}")

# ---- 3. the outputs against the single-process run's
file(GLOB outputs RELATIVE "${WORK}/ref" "${WORK}/ref/*.npy")
if(NOT outputs)
  fail("the single-process run wrote no output")
endif()
foreach(f ${outputs})
  get_filename_component(name "${f}" NAME_WE)
  if(name IN_LIST close)
    set(how npy-close)
  else()
    set(how npy-equal)
  endif()
  execute_process(COMMAND "${HELPER}" ${how} "${WORK}/ref/${f}" "${WORK}/mpi/${f}" RESULT_VARIABLE hrc
    OUTPUT_VARIABLE hout ERROR_VARIABLE herr)
  if(NOT hrc EQUAL 0)
    fail("output ${f} of the MPI run differs from the single-process run's (${how}): ${hout}${herr}")
  endif()
endforeach()

# ---- 4. the report
file(READ "${WORK}/stats.json" stats)
string(JSON ranks GET "${stats}" mpi ranks)
string(JSON loops GET "${stats}" mpi loop_stages)
string(JSON n_ranges LENGTH "${stats}" mpi ranges)
string(JSON n_by_rank LENGTH "${stats}" mpi by_rank)
if(NOT ranks EQUAL NP OR NOT n_by_rank EQUAL NP)
  fail("the report has ${ranks} ranks (${n_by_rank} records), not ${NP}")
endif()
if(loops LESS 1)
  fail("no loop was shared: the test needs a graph the limit cuts into a loop")
endif()
math(EXPR want_ranges "${loops} * ${NP}")
if(NOT n_ranges EQUAL want_ranges)
  fail("the report has ${n_ranges} ranges, not ${want_ranges} (${loops} loops x ${NP} ranks)")
endif()
math(EXPR last_range "${n_ranges} - 1")
math(EXPR last_rank "${NP} - 1")
set(next_piece 0)
foreach(i RANGE ${last_range})
  string(JSON rank GET "${stats}" mpi ranges ${i} rank)
  string(JSON first GET "${stats}" mpi ranges ${i} first)
  string(JSON last GET "${stats}" mpi ranges ${i} last)
  string(JSON pieces GET "${stats}" mpi ranges ${i} pieces)
  string(JSON peak GET "${stats}" mpi ranges ${i} peak_bytes)
  string(JSON limit GET "${stats}" mpi ranges ${i} limit_bytes)
  math(EXPR want_rank "${i} % ${NP}")
  if(want_rank EQUAL 0)
    set(next_piece 0)
  endif()
  if(NOT rank EQUAL want_rank OR NOT first EQUAL next_piece OR last LESS first)
    fail("range ${i}: rank ${rank} pieces [${first}, ${last}): \
not rank ${want_rank}'s range from piece ${next_piece}")
  endif()
  set(next_piece ${last})
  if(want_rank EQUAL last_rank AND NOT last EQUAL pieces)
    fail("the ranges end at piece ${last}, not at the loop's ${pieces}")
  endif()
  if(limit GREATER 0 AND peak GREATER limit)
    fail("rank ${rank}: its range peaked at ${peak} bytes, over its limit ${limit}")
  endif()
endforeach()
if(EXPECT_RECOVERY)
  set(recovered 0)
  foreach(i RANGE ${last_range})
    string(JSON n GET "${stats}" mpi ranges ${i} recoveries)
    math(EXPR recovered "${recovered} + ${n}")
  endforeach()
  if(recovered EQUAL 0)
    fail("no range was re-planned after out of memory (EXPECT_RECOVERY)")
  endif()
endif()
foreach(i RANGE ${last_rank})
  string(JSON peak GET "${stats}" mpi by_rank ${i} peak_bytes)
  string(JSON limit GET "${stats}" mpi by_rank ${i} limit_bytes)
  if(limit GREATER 0 AND peak GREATER limit)
    fail("rank ${i} peaked at ${peak} bytes, over its limit ${limit}")
  endif()
endforeach()
