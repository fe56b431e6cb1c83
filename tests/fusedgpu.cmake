# tests/fusedgpu runs fused kernels on every OpenCL device: PoCL's two where PoCL is the
# platform (other drivers ignore these variables), with ASan told to let clFFT be (as
# tests/opencl.cmake says).
if(TEST fusedgpu)
  set_tests_properties(fusedgpu PROPERTIES ENVIRONMENT
    "${LOOM_TEST_ENV};POCL_DEVICES=pthread pthread;POCL_MEMORY_LIMIT=1;ASAN_OPTIONS=new_delete_type_mismatch=0")
endif()
