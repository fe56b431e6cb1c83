# MPI: LOOM_MPI AUTO (built when an MPI implementation is found), ON (required), OFF.
#
# With MPI the library holds loom_plan_run_mpi (include/loom/mpi.h, src/runtime/mpi/*.c), which
# shares a plan's loop pieces between the ranks of the caller's communicator, and loom-run gets
# --mpi. It is compiled into libloom itself, not a library of its own: it reads the plan's
# insides (loop ranges, the combine of partials) that the shared library keeps hidden, and one
# copy of Loom's state (errors, contexts) must serve both. libloom then links libmpi; a program
# that never includes loom/mpi.h never calls MPI_Init and runs as before. Debian: openmpi-bin
# (mpirun) and libopenmpi-dev (scripts/install-deps.sh installs both).
string(TOUPPER "${LOOM_MPI}" _loom_mpi)
if(NOT _loom_mpi MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "LOOM_MPI must be AUTO, ON or OFF (got '${LOOM_MPI}')")
endif()

set(LOOM_HAVE_MPI OFF)
if(NOT _loom_mpi STREQUAL "OFF")
  if(_loom_mpi STREQUAL "ON")
    find_package(MPI REQUIRED COMPONENTS C)
  else()
    find_package(MPI QUIET COMPONENTS C)
  endif()
  if(MPI_C_FOUND)
    set(LOOM_HAVE_MPI ON)
  endif()
endif()

if(LOOM_HAVE_MPI)
  file(GLOB _loom_mpi_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/runtime/mpi/*.c)
  list(APPEND LOOM_SOURCES ${_loom_mpi_sources})
  list(APPEND LOOM_PRIVATE_LIBS MPI::MPI_C)
  list(APPEND LOOM_BACKEND_DEFS LOOM_HAVE_MPI=1)
  # Users of the installed static archive link libmpi from MPI's own folder (Debian keeps it
  # under lib/<arch>/openmpi/lib).
  list(APPEND LOOM_INSTALL_LIBS mpi)
  foreach(_lib ${MPI_C_LIBRARIES})
    get_filename_component(_dir ${_lib} DIRECTORY)
    list(APPEND LOOM_INSTALL_LINK_DIRS ${_dir})
  endforeach()
  list(REMOVE_DUPLICATES LOOM_INSTALL_LINK_DIRS)
  # mpirun for the tests (tests/mpi.cmake); a build without it skips them.
  find_program(LOOM_MPIEXEC NAMES ${MPIEXEC_EXECUTABLE} mpiexec mpirun)
  message(STATUS "Loom: MPI on (MPI ${MPI_C_VERSION}, ${MPI_C_LIBRARIES}; mpirun: ${LOOM_MPIEXEC})")
else()
  message(STATUS "Loom: MPI off (LOOM_MPI=${LOOM_MPI}; install libopenmpi-dev and openmpi-bin for loom_plan_run_mpi and loom-run --mpi)")
endif()
