# The interop examples (examples/interop/): a program with its own device memory and queue
# (OpenCL: context, queue, buffer and kernel; CUDA: stream and cudaMalloc) that lets Loom reduce
# its memory in place and reads the result on its own queue, checked against sums it computes
# itself. They use the public headers only and link the shared library, as a user's program
# does. interop.opencl runs on PoCL's devices; each exits 77 (skipped) where Loom finds no
# device of its kind, and is not built without its backend.
if(LOOM_HAVE_CUDA)
  add_executable(loom_interop_cuda ${CMAKE_SOURCE_DIR}/examples/interop/cuda_reduce.c)
  target_link_libraries(loom_interop_cuda PRIVATE loom CUDA::cudart)
  add_test(NAME interop.cuda COMMAND loom_interop_cuda)
  set_tests_properties(interop.cuda PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 ENVIRONMENT "${LOOM_TEST_ENV}")
endif()
if(NOT LOOM_HAVE_OPENCL)
  return()
endif()
add_executable(loom_interop_opencl ${CMAKE_SOURCE_DIR}/examples/interop/opencl_reduce.c)
target_link_libraries(loom_interop_opencl PRIVATE loom OpenCL::OpenCL)
target_compile_definitions(loom_interop_opencl PRIVATE CL_TARGET_OPENCL_VERSION=300)
add_test(NAME interop.opencl COMMAND loom_interop_opencl)
set_tests_properties(interop.opencl PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  ENVIRONMENT "${LOOM_TEST_ENV};POCL_DEVICES=pthread pthread;LOOM_DEVICES=cpu0,opencl")
