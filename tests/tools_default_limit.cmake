# loom-run without --limit (issue 32): a graph larger than the memory it may use is planned for
# the default limit (loom_runner_default) and runs, the note saying the limit and its source;
# --limit none runs it whole, as before, and fails there. The memory here is host0's node limit
# (LOOM_MEM_LIMIT=host0:8MiB, a node, which makes no runner), so that the test does not depend on
# the machine's free memory. Included after tools.cmake (loom_tool_test).
loom_tool_test(default_limit_plans_to_fit ARGS ${CMAKE_CURRENT_SOURCE_DIR}/splitter/data/default_limit.lir --random 1 ENV LOOM_MEM_LIMIT=host0:8MiB
  STDERR_REGEX "loom-run: note: no --limit: the graph needs [0-9.]+ MiB at its peak, more than cpu0 can hold now; planned for cpu0:8\\.00 MiB \\(the memory node's limit"
  STDOUT_REGEX "big: ran on cpu0 in .* stages\n.*stage 0   cpu0   limit   8\\.00 MiB")
loom_tool_test(default_limit_none_runs_whole RC 1 ARGS ${CMAKE_CURRENT_SOURCE_DIR}/splitter/data/default_limit.lir --random 1 --limit none
  ENV LOOM_MEM_LIMIT=host0:8MiB STDERR_REGEX "out of memory on host0" STDERR_NOT_REGEX "note: no --limit")
