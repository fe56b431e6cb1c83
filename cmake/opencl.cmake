# The opencl backend: LOOM_OPENCL AUTO (when an OpenCL loader and headers are found), ON
# (required), OFF. Included by the top CMakeLists.txt before the targets are made; it adds to
# LOOM_SOURCES, LOOM_PRIVATE_LIBS and LOOM_BACKEND_DEFS.
string(TOUPPER "${LOOM_OPENCL}" _loom_opencl)
if(NOT _loom_opencl MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "LOOM_OPENCL must be AUTO, ON or OFF (got '${LOOM_OPENCL}')")
endif()

set(LOOM_HAVE_OPENCL OFF)
if(NOT _loom_opencl STREQUAL "OFF")
  if(_loom_opencl STREQUAL "ON")
    find_package(OpenCL REQUIRED)
  else()
    find_package(OpenCL QUIET)
  endif()
  if(OpenCL_FOUND)
    set(LOOM_HAVE_OPENCL ON)
    file(GLOB _loom_opencl_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/opencl/*.c)
    list(APPEND LOOM_SOURCES ${_loom_opencl_sources})
    list(APPEND LOOM_PRIVATE_LIBS OpenCL::OpenCL)
    # The API level Loom is written against; newer calls are looked up at run time.
    list(APPEND LOOM_BACKEND_DEFS LOOM_HAVE_OPENCL=1 CL_TARGET_OPENCL_VERSION=300)
  endif()
endif()
message(STATUS "Loom: opencl backend ${LOOM_HAVE_OPENCL} (LOOM_OPENCL=${LOOM_OPENCL})")
