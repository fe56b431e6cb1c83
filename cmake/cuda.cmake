# CUDA: LOOM_CUDA AUTO, ON (the toolkit is required), OFF (no CUDA at all).
#
# Device discovery needs no toolkit: src/backends/cuda/cuda_device.c loads the driver
# (libcuda.so.1) with dlopen at run time, so it is compiled unless LOOM_CUDA is OFF, and a
# machine without a driver has zero CUDA devices.
#
# The cuda compute backend (src/backends/cuda/*.c, kernels/cuda/*.cu) is built when the toolkit
# and nvcc are found. Its kernels are compiled for LOOM_CUDA_ARCHITECTURES (default: sm_75, the
# oldest GPU CUDA 13 builds for, and sm_90 (H100) as machine code, plus compute_75 PTX that the
# driver compiles for any later GPU); "native" needs a GPU at configure time, so it is not the
# default. The CUDA runtime is linked statically (it loads libcuda.so.1 itself when first
# called) and cuBLAS and cuFFT are opened with dlopen (src/backends/cuda/cuda_libs.c), so the
# binaries start on machines without the driver or the CUDA libraries.
string(TOUPPER "${LOOM_CUDA}" _loom_cuda)
if(NOT _loom_cuda MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "LOOM_CUDA must be AUTO, ON or OFF (got '${LOOM_CUDA}')")
endif()
set(LOOM_CUDA_ARCHITECTURES "75-real;90-real;75-virtual" CACHE STRING
  "GPU architectures of the cuda backend's kernels (CMAKE_CUDA_ARCHITECTURES syntax)")

set(LOOM_HAVE_CUDA_TOOLKIT OFF)
set(LOOM_HAVE_CUDA OFF)
set(_loom_cuda_discovery OFF)
if(NOT _loom_cuda STREQUAL "OFF")
  list(APPEND LOOM_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/cuda/cuda_device.c)
  list(APPEND LOOM_BACKEND_DEFS LOOM_HAVE_CUDA_DISCOVERY=1)
  set(_loom_cuda_discovery ON)
  if(_loom_cuda STREQUAL "ON")
    find_package(CUDAToolkit REQUIRED)
  else()
    find_package(CUDAToolkit QUIET)
  endif()
  if(CUDAToolkit_FOUND)
    set(LOOM_HAVE_CUDA_TOOLKIT ON)
    include(CheckLanguage)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES ${LOOM_CUDA_ARCHITECTURES})
    endif()
    if(NOT CMAKE_CUDA_COMPILER)
      set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
    endif()
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      set(LOOM_HAVE_CUDA ON)
    elseif(_loom_cuda STREQUAL "ON")
      message(FATAL_ERROR "LOOM_CUDA=ON: the CUDA toolkit is found but nvcc does not work")
    endif()
  endif()
endif()

if(LOOM_HAVE_CUDA)
  enable_language(CUDA)
  # The C compiler links every target that holds the cuda backend's objects (they need only the
  # C++ runtime and cudart, both in LOOM_PRIVATE_LIBS): by default CMake links them with the
  # CUDA host compiler's C++ driver (g++), which in a clang build with sanitizers brings GCC's
  # ASan runtime in beside clang's, and the two refuse to run together.
  set(CMAKE_CUDA_HOST_LINK_LAUNCHER ${CMAKE_C_COMPILER})
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  file(GLOB _loom_cuda_sources CONFIGURE_DEPENDS
    ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/cuda/*.c ${CMAKE_CURRENT_SOURCE_DIR}/kernels/cuda/*.cu)
  list(REMOVE_ITEM _loom_cuda_sources ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/cuda/cuda_device.c)
  # loom/cuda.h's functions (the CUDA objects behind devices and memory nodes).
  list(APPEND LOOM_SOURCES ${_loom_cuda_sources} ${CMAKE_CURRENT_SOURCE_DIR}/src/runtime/interop/cuda.c
    ${CMAKE_CURRENT_SOURCE_DIR}/src/runtime/interop/cuda_wrap.c)
  # The kernels include src/ (cuda_kernels.h, backends/gpu/gpu_meta.h) like every library source; nvcc
  # gets no C warning or sanitizer flags (the top CMakeLists.txt gives those to C alone).
  # nvcc's objects need the C++ runtime when linked by the C compiler.
  list(APPEND LOOM_PRIVATE_LIBS CUDA::cudart_static stdc++)
  string(REPLACE ";" "," _loom_cuda_archs "${CMAKE_CUDA_ARCHITECTURES}")
  list(APPEND LOOM_BACKEND_DEFS LOOM_HAVE_CUDA=1 "LOOM_CUDA_LIBDIR=\"${CUDAToolkit_LIBRARY_DIR}\""
    "LOOM_CUDA_ARCHS=\"${_loom_cuda_archs}\"")
  # Users of the installed static archive link the runtime from the toolkit's folder.
  list(APPEND LOOM_INSTALL_LIBS cudart_static stdc++ rt)
  list(APPEND LOOM_INSTALL_LINK_DIRS ${CUDAToolkit_LIBRARY_DIR})
endif()
set(_loom_cuda_archs_note "")
if(LOOM_HAVE_CUDA)
  set(_loom_cuda_archs_note "; kernels for ${CMAKE_CUDA_ARCHITECTURES}")
endif()
message(STATUS "Loom: cuda discovery ${_loom_cuda_discovery}, toolkit ${LOOM_HAVE_CUDA_TOOLKIT}, "
  "backend ${LOOM_HAVE_CUDA} (LOOM_CUDA=${LOOM_CUDA}${_loom_cuda_archs_note})")
