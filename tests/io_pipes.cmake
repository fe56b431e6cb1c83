# .npy inputs that are not regular files (issue 32): a named FIFO is opened once (a second open
# would wait forever for a writer that has gone) and a shell's `<(cat x.npy)` is read whole from
# the descriptor loom-run opened; both give the run over the regular files' results. Each run
# is bounded by `timeout`, so a hang fails the test instead of stalling the suite.
if(TARGET loom-run)
  set(_pipe_data ${CMAKE_CURRENT_SOURCE_DIR}/tools/data)
  set(_pipe_work ${CMAKE_CURRENT_BINARY_DIR}/io-pipes)
  set(_pipe_run "$<TARGET_FILE:loom-run> ${_pipe_data}/small.lir")
  add_test(NAME io.npy_fifo_and_pipe COMMAND bash -c "
    set -e; rm -rf '${_pipe_work}'; mkdir -p '${_pipe_work}'; cd '${_pipe_work}'
    ${_pipe_run} --in x=${_pipe_data}/small_x.npy --in y=${_pipe_data}/small_y.npy --out-dir ref >/dev/null
    mkfifo x_fifo.npy
    (cat ${_pipe_data}/small_x.npy > x_fifo.npy) &
    timeout 60 ${_pipe_run} --in x=x_fifo.npy --in y=${_pipe_data}/small_y.npy --out-dir fifo >/dev/null
    timeout 60 ${_pipe_run} --in x=<(cat ${_pipe_data}/small_x.npy) --in y=<(cat ${_pipe_data}/small_y.npy) --out-dir pipe >/dev/null
    for f in ref/*.npy; do cmp \"$f\" fifo/\${f#ref/}; cmp \"$f\" pipe/\${f#ref/}; done
    echo fifo and pipe runs equal the run over regular files")
  set_tests_properties(io.npy_fifo_and_pipe PROPERTIES ENVIRONMENT "${LOOM_TEST_ENV}" TIMEOUT 300
    PASS_REGULAR_EXPRESSION "fifo and pipe runs equal the run over regular files")
endif()
