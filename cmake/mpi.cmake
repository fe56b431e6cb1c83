# MPI: LOOM_MPI AUTO (built when an MPI implementation is found), ON (required), OFF.
#
# With MPI, libloom_mpi holds loom_plan_run_mpi (include/loom/mpi.h, src/mpi/*.c), which
# shares a plan's loop pieces between the ranks of the caller's communicator, and loom-run gets
# --mpi. It is a library of its own, so that libloom needs no MPI: a program that links Loom
# loads no MPI, and an HPC code on MPICH, Cray MPI or Intel MPI does not get Open MPI beside
# its own (StarPU keeps its MPI part apart the same way). libloom_mpi links the shared libloom
# and reaches what it needs past the public API (loop ranges, the combine of partials) through
# the one table libloom exports for it (src/runtime/mpi_hooks.h), so one copy of Loom's state
# (errors, the allocator) serves both. Its static archive goes with libloom's (loom-run links
# both). Debian: openmpi-bin (mpirun) and libopenmpi-dev (scripts/install-deps.sh).
#
# Included by the top CMakeLists.txt once loom and loom_static exist; adds LOOM_HAVE_MPI=1 to
# LOOM_BACKEND_DEFS (tools/loom-run/mpi.c tests it) and makes loom_mpi and loom_mpi_static.
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

if(NOT LOOM_HAVE_MPI)
  message(STATUS "Loom: MPI off (LOOM_MPI=${LOOM_MPI}; install libopenmpi-dev and openmpi-bin for loom_plan_run_mpi and loom-run --mpi)")
  return()
endif()

list(APPEND LOOM_BACKEND_DEFS LOOM_HAVE_MPI=1)
file(GLOB _loom_mpi_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/mpi/*.c)
add_library(loom_mpi_objects OBJECT ${_loom_mpi_sources})
target_include_directories(loom_mpi_objects PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/include
  ${CMAKE_CURRENT_SOURCE_DIR}/src ${CMAKE_CURRENT_BINARY_DIR}/generated)
target_compile_definitions(loom_mpi_objects PRIVATE "LOOM_VERSION_STRING=\"${PROJECT_VERSION}\"")
target_link_libraries(loom_mpi_objects PRIVATE MPI::MPI_C)

add_library(loom_mpi SHARED $<TARGET_OBJECTS:loom_mpi_objects>)
add_library(loom_mpi_static STATIC $<TARGET_OBJECTS:loom_mpi_objects>)
set_target_properties(loom_mpi loom_mpi_static PROPERTIES OUTPUT_NAME loom_mpi)
set_target_properties(loom_mpi PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
# loom/mpi.h includes <mpi.h>: its users compile and link against MPI too.
target_link_libraries(loom_mpi PUBLIC loom MPI::MPI_C)
target_link_libraries(loom_mpi_static INTERFACE loom_static MPI::MPI_C)
# Every symbol it calls must be one libloom or MPI exports: a hidden loom__ function would
# otherwise be found missing only when a program loads it. (Sanitized builds leave the
# sanitizer runtime's symbols to the program.)
if(NOT LOOM_SANITIZE AND NOT LOOM_TSAN AND NOT LOOM_FUZZ)
  target_link_options(loom_mpi PRIVATE -Wl,--no-undefined)
endif()
add_library(Loom::loom_mpi ALIAS loom_mpi)
add_library(Loom::loom_mpi_static ALIAS loom_mpi_static)

# loom-mpi.pc: the MPI the library was built with, by its own pkg-config module (Open MPI's
# ompi-c, MPICH's mpich), so no folder of this machine is written into it.
pkg_search_module(LOOM_MPI_PC QUIET ompi-c mpich mpi-c)
set(LOOM_MPI_PC_MODULE "")
if(LOOM_MPI_PC_FOUND)
  set(LOOM_MPI_PC_MODULE ${LOOM_MPI_PC_MODULE_NAME})
endif()

# mpirun for the tests (tests/mpi.cmake); a build without it skips them.
find_program(LOOM_MPIEXEC NAMES ${MPIEXEC_EXECUTABLE} mpiexec mpirun)
message(STATUS "Loom: MPI on in libloom_mpi (MPI ${MPI_C_VERSION}, ${MPI_C_LIBRARIES}; pkg-config "
  "'${LOOM_MPI_PC_MODULE}'; mpirun: ${LOOM_MPIEXEC})")
