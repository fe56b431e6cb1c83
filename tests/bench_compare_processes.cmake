# loom-bench compare's rules between processes (suite --processes) on two reports written by a
# script, no timing involved: check_bench_compare_processes.cmake says which case tests which rule.
add_test(NAME loom-bench.compare_processes COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:loom-bench>
  -DPYTHON=/usr/bin/python3 -DGEN=${CMAKE_CURRENT_SOURCE_DIR}/tools/bench_compare_processes.py
  -DWORK=${CMAKE_CURRENT_BINARY_DIR}/tool-tests/bench.compare_processes
  -P ${CMAKE_CURRENT_SOURCE_DIR}/tools/check_bench_compare_processes.cmake)
