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
# Issue 31's second point on every fourth passing case: each run again as a plan under a
# quarter of its graph's naive peak (the refusals counted by the planner's reason); fails when
# a limited run fails or fewer pass than the floor. All cases: tests/onnx/run_limited.sh.
if(TEST onnx)
  add_test(NAME onnx.limited COMMAND test_onnx conformance)
  set_tests_properties(onnx.limited PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 ENVIRONMENT
    "${LOOM_TEST_ENV};LOOM_ONNX_LIMIT_DIV=4;LOOM_ONNX_EVERY=4;LOOM_STAGE_HISTORY=0;LOOM_ONNX_MIN_LIMITED_PASS=45")
  # Issue 31's third point at a test's size: tests/onnx/encoder.py's encoder split by its
  # weights over cpu0:192KiB, ocl0:160KiB and ocl1:128KiB (test_onnx_split.c).
  add_test(NAME onnx.split COMMAND test_onnx encoder_split_over_runners)
  set_tests_properties(onnx.split PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 ENVIRONMENT
    "${LOOM_TEST_ENV};POCL_DEVICES=pthread pthread;POCL_MEMORY_LIMIT=1;LOOM_ONNX_ENCODER=${CMAKE_CURRENT_SOURCE_DIR}/onnx/encoder.py")
endif()
# loom-bench onnx on that encoder (issue 31's fifth point at a test's size): it runs the model on
# cpu0 beside PyTorch running its nodes and reports the ratio and the largest difference of the
# outputs; no timing is asserted. Without python3-torch it reports Loom alone.
if(TARGET loom-bench)
  add_test(NAME loom-bench.onnx_encoder COMMAND sh -c
    "d=$(mktemp -d) && /usr/bin/python3 '${CMAKE_CURRENT_SOURCE_DIR}/onnx/encoder.py' $d > /dev/null && '$<TARGET_FILE:loom-bench>' onnx $d/model.onnx --reps 1; rc=$?; rm -rf $d; exit $rc")
  set_tests_properties(loom-bench.onnx_encoder PROPERTIES TIMEOUT 300 ENVIRONMENT "${LOOM_TEST_ENV}"
    PASS_REGULAR_EXPRESSION "loom +[0-9.]+ ms\n  (torch|onnxruntime) +[0-9.]+ ms.*ratio.*largest difference of the first outputs: [0-9.e-]+\n|peer +missing")
endif()
