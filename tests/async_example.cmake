# The asynchronous-run example (examples/async/): a program that submits a run (loom_run_submit),
# works on its own meanwhile and records that work in the memory manager's trace. Built against
# the public headers and the shared library, as a user's program is; the test reads the trace it
# wrote and checks that the program's span and one of Loom's stages overlap in time.
add_executable(loom_async_example ${CMAKE_SOURCE_DIR}/examples/async/main.c)
target_link_libraries(loom_async_example PRIVATE loom m)
add_test(NAME example.async COMMAND ${CMAKE_COMMAND} -DPROGRAM=$<TARGET_FILE:loom_async_example>
  -DWORK=${CMAKE_CURRENT_BINARY_DIR}/example-async -P ${CMAKE_CURRENT_SOURCE_DIR}/examples/check_async_trace.cmake)
set_tests_properties(example.async PROPERTIES TIMEOUT 300 ENVIRONMENT "${LOOM_TEST_ENV}")
