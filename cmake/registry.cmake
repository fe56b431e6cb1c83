# The one list of backends (src/backends/registry.c): which are compiled in is decided here,
# from what cmake/opencl.cmake and cmake/cuda.cmake found, and written as X-macro lines into
# generated/loom_backends.h. The order is the preference rule: cpu for the host, then cuda, then
# opencl, so a GPU that both CUDA and OpenCL show runs and is managed through CUDA when the cuda
# backend is built. CUDA discovery needs no toolkit (cmake/cuda.cmake): without the cuda
# compute backend its entry discovers devices and drives none of them.
set(LOOM_BACKEND_LIST "LOOM_BACKEND(cpu, LOOM_BACKEND_CPU, NULL, &loom__cpu_backend, NULL)\n")
if(LOOM_HAVE_CUDA)
  string(APPEND LOOM_BACKEND_LIST
    "LOOM_BACKEND(cuda, LOOM_BACKEND_CUDA, loom__cuda_discover, &loom__cuda_backend, &loom__hmm_cuda_backend)\n")
elseif(_loom_cuda_discovery)
  string(APPEND LOOM_BACKEND_LIST "LOOM_BACKEND(cuda, LOOM_BACKEND_CUDA, loom__cuda_discover, NULL, NULL)\n")
else()
  string(APPEND LOOM_BACKEND_LIST
    "LOOM_BACKEND_ABSENT(cuda, LOOM_BACKEND_CUDA, \"cuda: CUDA support not built (LOOM_CUDA=OFF): 0 CUDA devices\")\n")
endif()
if(LOOM_HAVE_OPENCL)
  string(APPEND LOOM_BACKEND_LIST
    "LOOM_BACKEND(opencl, LOOM_BACKEND_OPENCL, loom__opencl_discover, &loom__opencl_backend, &loom__hmm_opencl_backend)\n")
else()
  string(APPEND LOOM_BACKEND_LIST
    "LOOM_BACKEND_ABSENT(opencl, LOOM_BACKEND_OPENCL, \"opencl: OpenCL support not built (LOOM_OPENCL=OFF or no "
    "OpenCL loader at configure time): 0 OpenCL devices\")\n")
endif()
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/backends.h.in ${CMAKE_CURRENT_BINARY_DIR}/generated/loom_backends.h
  @ONLY)
