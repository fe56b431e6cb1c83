# tests/share runs loops shared among cpu0 and PoCL's two pthread devices (ocl0, ocl1) where
# PoCL is the platform (other drivers ignore these variables), as tests/loops.cmake does.
if(TEST share)
  set_tests_properties(share PROPERTIES ENVIRONMENT
    "${LOOM_TEST_ENV};POCL_DEVICES=pthread pthread;POCL_MEMORY_LIMIT=1;ASAN_OPTIONS=new_delete_type_mismatch=0")
endif()
