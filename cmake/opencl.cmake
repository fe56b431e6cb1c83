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
    # loom/opencl.h's functions (the OpenCL objects behind devices and memory nodes).
    list(APPEND LOOM_SOURCES ${_loom_opencl_sources} ${CMAKE_CURRENT_SOURCE_DIR}/src/runtime/interop/opencl.c
      ${CMAKE_CURRENT_SOURCE_DIR}/src/runtime/interop/opencl_wrap.c)
    list(APPEND LOOM_PRIVATE_LIBS OpenCL::OpenCL)
    # The API level Loom is written against; newer calls are looked up at run time.
    list(APPEND LOOM_BACKEND_DEFS LOOM_HAVE_OPENCL=1 CL_TARGET_OPENCL_VERSION=300)

    # The compute backend's kernels, embedded at build time (cmake/embed.cmake); the struct
    # header is read by the host and the kernels alike.
    include(${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed.cmake)
    file(GLOB _loom_cl_kernels CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/kernels/opencl/*.cl)
    set(_loom_cl_embedded ${CMAKE_CURRENT_BINARY_DIR}/generated/loom_opencl_sources.c)
    loom_embed_files(OUTPUT ${_loom_cl_embedded} SYMBOL loom__opencl_sources
      FILES ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/gpu/gpu_meta.h ${_loom_cl_kernels})
    list(APPEND LOOM_SOURCES ${_loom_cl_embedded})

    # CLBlast (dot) and clFFT (transforms): used when found; without them the backend's own
    # kernels run every dot and transform (src/backends/opencl/none/ stands in). Pointing
    # LOOM_CLBLAST_INCLUDE or LOOM_CLFFT_INCLUDE elsewhere builds without them.
    find_path(LOOM_CLBLAST_INCLUDE clblast_c.h)
    find_library(LOOM_CLBLAST_LIBRARY clblast)
    find_path(LOOM_CLFFT_INCLUDE clFFT.h)
    find_library(LOOM_CLFFT_LIBRARY clFFT)
    set(LOOM_HAVE_CLBLAST OFF)
    set(LOOM_HAVE_CLFFT OFF)
    if(LOOM_CLBLAST_LIBRARY AND EXISTS "${LOOM_CLBLAST_INCLUDE}/clblast_c.h")
      set(LOOM_HAVE_CLBLAST ON)
      list(APPEND LOOM_PRIVATE_LIBS ${LOOM_CLBLAST_LIBRARY})
      list(APPEND LOOM_BACKEND_DEFS LOOM_HAVE_CLBLAST=1)
    else()
      list(REMOVE_ITEM LOOM_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/opencl/opencl_clblast.c)
      list(APPEND LOOM_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/opencl/none/opencl_clblast_none.c)
    endif()
    if(LOOM_CLFFT_LIBRARY AND EXISTS "${LOOM_CLFFT_INCLUDE}/clFFT.h")
      set(LOOM_HAVE_CLFFT ON)
      list(APPEND LOOM_PRIVATE_LIBS ${LOOM_CLFFT_LIBRARY})
      list(APPEND LOOM_BACKEND_DEFS LOOM_HAVE_CLFFT=1)
    else()
      list(REMOVE_ITEM LOOM_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/opencl/opencl_clfft.c)
      list(APPEND LOOM_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/opencl/none/opencl_clfft_none.c)
    endif()
    message(STATUS "Loom: opencl CLBlast ${LOOM_HAVE_CLBLAST}, clFFT ${LOOM_HAVE_CLFFT}")
  endif()
endif()
message(STATUS "Loom: opencl backend ${LOOM_HAVE_OPENCL} (LOOM_OPENCL=${LOOM_OPENCL})")
