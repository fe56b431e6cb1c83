# The Fortran module (src/fortran/loom.f90, `use loom`): LOOM_FORTRAN AUTO (built when a
# Fortran compiler is found), ON (required), OFF. It is the library loom_fortran, over the
# public C API of the shared library, and its loom.mod, installed in include/loom/fortran/.
# A .mod file is the compiler's own format: programs use the Fortran compiler Loom was built
# with (gfortran's modules change format between major versions).
string(TOUPPER "${LOOM_FORTRAN}" _loom_fortran)
if(NOT _loom_fortran MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "LOOM_FORTRAN must be AUTO, ON or OFF (got '${LOOM_FORTRAN}')")
endif()

set(LOOM_HAVE_FORTRAN OFF)
if(NOT _loom_fortran STREQUAL "OFF")
  include(CheckLanguage)
  check_language(Fortran)
  if(CMAKE_Fortran_COMPILER)
    enable_language(Fortran)
    set(LOOM_HAVE_FORTRAN ON)
  elseif(_loom_fortran STREQUAL "ON")
    message(FATAL_ERROR "LOOM_FORTRAN is ON but no Fortran compiler was found (install gfortran)")
  else()
    message(STATUS "Loom: no Fortran compiler: the Fortran module is not built")
  endif()
endif()

# A sanitized library needs its users linked with its sanitizer's runtime: gfortran would link
# GCC's beside the clang runtime of a clang build (make check-tsan), and the two refuse to run
# together.
if(LOOM_HAVE_FORTRAN AND (LOOM_SANITIZE OR LOOM_TSAN) AND
   NOT CMAKE_C_COMPILER_ID STREQUAL CMAKE_Fortran_COMPILER_ID)
  message(STATUS "Loom: the Fortran module is not built: a sanitized ${CMAKE_C_COMPILER_ID} build and "
    "${CMAKE_Fortran_COMPILER_ID} Fortran's sanitizer runtime do not mix")
  set(LOOM_HAVE_FORTRAN OFF)
endif()

if(LOOM_HAVE_FORTRAN)
  set(LOOM_FORTRAN_MODULE_DIR ${CMAKE_CURRENT_BINARY_DIR}/fortran)
  add_library(loom_fortran SHARED src/fortran/loom.f90)
  set_target_properties(loom_fortran PROPERTIES Fortran_MODULE_DIRECTORY ${LOOM_FORTRAN_MODULE_DIR}
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
  # Assumed-rank arrays and is_contiguous are Fortran 2018.
  target_compile_options(loom_fortran PRIVATE
    $<$<Fortran_COMPILER_ID:GNU>:-std=f2018 -Wall -Wno-maybe-uninitialized>)
  target_link_libraries(loom_fortran PUBLIC loom)
  target_include_directories(loom_fortran PUBLIC
    $<BUILD_INTERFACE:${LOOM_FORTRAN_MODULE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/loom/fortran>)
  add_library(Loom::loom_fortran ALIAS loom_fortran)
  message(STATUS "Loom: Fortran module with ${CMAKE_Fortran_COMPILER_ID} ${CMAKE_Fortran_COMPILER_VERSION}")
endif()
