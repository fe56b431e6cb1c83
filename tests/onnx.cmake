# ONNX's conformance cases (tests/onnx, Debian's libonnx-testdata): the module test `onnx` runs
# every case on cpu0 and the reader's own tests; `onnx.ocl0` runs every fourth case on PoCL's
# device under the 1 GiB cap CI uses (all of them take about four minutes there: the subset
# keeps `make check` short). Each fails if an accepted case fails, if a refusal does not name
# its node and op, or if fewer cases pass than the floor below (the count reached when it was
# set: a lowering that starts refusing what it ran fails the test).
if(TEST onnx)
  set_property(TEST onnx APPEND PROPERTY ENVIRONMENT "LOOM_ONNX_MIN_PASS=867")
  add_test(NAME onnx.ocl0 COMMAND test_onnx conformance)
  set_tests_properties(onnx.ocl0 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 ENVIRONMENT
    "${LOOM_TEST_ENV};POCL_DEVICES=pthread;POCL_MEMORY_LIMIT=1;LOOM_ONNX_DEVICE=ocl0;LOOM_ONNX_EVERY=4;LOOM_ONNX_MIN_PASS=221")
endif()
if(TEST onnx AND TARGET loom-run AND TARGET loom-plan)
  add_test(NAME onnx.tools COMMAND test_onnx tools_read_onnx)
  set_tests_properties(onnx.tools PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 ENVIRONMENT
    "${LOOM_TEST_ENV};LOOM_RUN=$<TARGET_FILE:loom-run>;LOOM_PLAN=$<TARGET_FILE:loom-plan>")
endif()
