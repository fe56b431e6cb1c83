# docs: every example output of README.md and docs/*.md marked `<!-- docs-example: COMMAND -->`
# must be what COMMAND prints with this build's tools (scripts/update-docs.sh --check; times,
# dates and machine names masked), and no block may show a loom command's output unmarked.
# scripts/update-docs.sh BUILD_DIR rewrites the blocks. About 5 s (a minute sanitized).
add_test(NAME docs COMMAND ${CMAKE_SOURCE_DIR}/scripts/update-docs.sh --check ${CMAKE_BINARY_DIR})
# RUN_SERIAL: its MPI example runs two ranks. The tests' environment for the sanitizers'
# settings (the script sets its own cache folders and clears other LOOM_ settings); full stacks
# for LeakSanitizer to reach Open MPI's allocations, as tests/mpi.cmake.
set_tests_properties(docs PROPERTIES TIMEOUT 300 RUN_SERIAL TRUE
  ENVIRONMENT "${LOOM_TEST_ENV};ASAN_OPTIONS=fast_unwind_on_malloc=0:new_delete_type_mismatch=0")
