# docs: every example output of README.md and docs/*.md marked `<!-- docs-example: COMMAND -->`
# must be what COMMAND prints with this build's tools (scripts/update-docs.sh --check; times,
# dates and machine names masked), and no block may show a loom command's output unmarked.
# scripts/update-docs.sh BUILD_DIR rewrites the blocks.
add_test(NAME docs COMMAND ${CMAKE_SOURCE_DIR}/scripts/update-docs.sh --check ${CMAKE_BINARY_DIR})
# The tools it runs; loom-run --mpi under mpirun for the MPI example.
set_tests_properties(docs PROPERTIES TIMEOUT 120 RUN_SERIAL TRUE
  ENVIRONMENT "OMP_NUM_THREADS=2")
