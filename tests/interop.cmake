# The OpenCL interop example (examples/interop/opencl_reduce.c): a program with its own
# OpenCL context, queue, buffer and kernel that lets Loom reduce its buffer in place and reads
# the result with its own queue, checked against sums it computes itself. It uses the public
# headers only and links the shared library, as a user's program does. On PoCL's devices; it
# exits 77 (skipped) where Loom finds no OpenCL device, and is not built without the opencl
# backend.
if(NOT LOOM_HAVE_OPENCL)
  return()
endif()
add_executable(loom_interop_opencl ${CMAKE_SOURCE_DIR}/examples/interop/opencl_reduce.c)
target_link_libraries(loom_interop_opencl PRIVATE loom OpenCL::OpenCL)
target_compile_definitions(loom_interop_opencl PRIVATE CL_TARGET_OPENCL_VERSION=300)
add_test(NAME interop.opencl COMMAND loom_interop_opencl)
set_tests_properties(interop.opencl PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  ENVIRONMENT "${LOOM_TEST_ENV};POCL_DEVICES=pthread pthread;LOOM_DEVICES=cpu0,opencl")
