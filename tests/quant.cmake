# tests/quant runs the quantized ops on cpu0 and on every OpenCL device: PoCL's two where PoCL
# is the platform (other drivers ignore these variables), as tests/loops.cmake does.
if(TEST quant)
  set_tests_properties(quant PROPERTIES ENVIRONMENT
    "${LOOM_TEST_ENV};POCL_DEVICES=pthread pthread;POCL_MEMORY_LIMIT=1;ASAN_OPTIONS=new_delete_type_mismatch=0")
endif()
