# CUDA: LOOM_CUDA AUTO, ON (the toolkit is required), OFF (no CUDA at all).
#
# Device discovery needs no toolkit: src/backends/cuda/cuda_device.c loads the driver
# (libcuda.so.1) with dlopen at run time, so it is compiled unless LOOM_CUDA is OFF, and a
# machine without a driver has zero CUDA devices. The toolkit, when found, sets
# LOOM_HAVE_CUDA_TOOLKIT for the cuda compute backend (kernels, cuBLAS, cuFFT) to come.
string(TOUPPER "${LOOM_CUDA}" _loom_cuda)
if(NOT _loom_cuda MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "LOOM_CUDA must be AUTO, ON or OFF (got '${LOOM_CUDA}')")
endif()

set(LOOM_HAVE_CUDA_TOOLKIT OFF)
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
  endif()
endif()
message(STATUS "Loom: cuda discovery ${_loom_cuda_discovery}, toolkit ${LOOM_HAVE_CUDA_TOOLKIT} (LOOM_CUDA=${LOOM_CUDA})")
