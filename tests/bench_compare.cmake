# loom-bench compare judges only beyond both runs' noise (issue 33, acceptance 3): two
# back-to-back quick suites of a few cases on cpu0 flag nothing, one with a case slowed on
# purpose (LOOM_BENCH_SLOW_CASE) flags exactly that case; reports of another machine are
# refused and a different load is warned about. Three suites of 2 to 3 s each (more where a
# busy machine makes a pair be measured again: check_bench_compare_noise.cmake says why).
add_test(NAME loom-bench.compare_noise COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:loom-bench>
  -DWORK=${CMAKE_CURRENT_BINARY_DIR}/tool-tests/bench.compare_noise
  -DCASES=gemm/f32,fft,reduce_sum,add,topk -DSLOW=reduce_sum
  -P ${CMAKE_CURRENT_SOURCE_DIR}/tools/check_bench_compare_noise.cmake)
set_tests_properties(loom-bench.compare_noise PROPERTIES TIMEOUT 180 ENVIRONMENT "${LOOM_TEST_ENV}")
