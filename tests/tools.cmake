# Shell-level tests of loom-run: each runs the tool once through tests/tools/run_tool.cmake,
# which checks its exit code, its stdout/stderr and the files it left (see that script).
# Included from tests/CMakeLists.txt, so LOOM_TEST_ENV is set.

# What these tests need besides loom-run: .npy fixtures, the kNN brute-force check and a
# file comparison, in C so that the tests need no Python.
add_executable(loom-tool-helper ${CMAKE_CURRENT_SOURCE_DIR}/tools/helper/main.c)
target_link_libraries(loom-tool-helper PRIVATE loom_internal)

set(LOOM_TOOL_DATA ${CMAKE_CURRENT_SOURCE_DIR}/tools/data)
set(LOOM_EXAMPLES ${CMAKE_SOURCE_DIR}/examples)

# loom_tool_test(NAME [RC code] [FIXTURES] [ARGS a b ...] [KEY VALUE]...) where each KEY is
# a run_tool.cmake variable (STDOUT_REGEX, STDERR_REGEX, EXPECT_FILES, ...). ARGS, REF_ARGS,
# ENV, EXPECT_FILES, EQUAL and CLOSE take several values.
function(loom_tool_test name)
  cmake_parse_arguments(PARSE_ARGV 1 T "FIXTURES"
    "RC;STDOUT_REGEX;STDERR_REGEX;STDOUT_NOT_REGEX;STDERR_NOT_REGEX;ONLY_FILES_IN;NO_FILES_IN;KNN_CHECK;TIMEOUT;STATS_JSON;STAGE_LIMIT;NODE_LIMIT;TRACE;RECOVERIES;DEVICES;PIECES"
    "ARGS;REF_ARGS;ENV;EXPECT_FILES;EQUAL;CLOSE;MKDIRS")
  set(defs -DTOOL=$<TARGET_FILE:loom-run> -DHELPER=$<TARGET_FILE:loom-tool-helper>
    -DWORK=${CMAKE_CURRENT_BINARY_DIR}/tool-tests/${name})
  if(T_FIXTURES)
    list(APPEND defs -DFIXTURES=ON)
  endif()
  if(NOT DEFINED T_RC)
    set(T_RC 0)
  endif()
  list(APPEND defs -DEXPECT_RC=${T_RC})
  foreach(key ARGS REF_ARGS ENV EXPECT_FILES EQUAL CLOSE MKDIRS)
    if(DEFINED T_${key})
      string(REPLACE ";" "|" joined "${T_${key}}")
      list(APPEND defs "-D${key}=${joined}")
    endif()
  endforeach()
  foreach(key STDOUT_REGEX STDERR_REGEX STDOUT_NOT_REGEX STDERR_NOT_REGEX ONLY_FILES_IN NO_FILES_IN KNN_CHECK
      STATS_JSON STAGE_LIMIT NODE_LIMIT TRACE RECOVERIES DEVICES PIECES)
    if(DEFINED T_${key})
      # A ';' would cut the -D argument in two (a list separator): carried as @SEMICOLON@.
      string(REPLACE ";" "@SEMICOLON@" value "${T_${key}}")
      list(APPEND defs "-D${key}=${value}")
    endif()
  endforeach()
  add_test(NAME loom-run.${name}
    COMMAND ${CMAKE_COMMAND} ${defs} -P ${CMAKE_CURRENT_SOURCE_DIR}/tools/run_tool.cmake)
  if(NOT DEFINED T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  set_tests_properties(loom-run.${name} PROPERTIES TIMEOUT ${T_TIMEOUT} ENVIRONMENT "${LOOM_TEST_ENV}")
endfunction()

set(small ${LOOM_TOOL_DATA}/small.lir)

# ---- the command line ---------------------------------------------------------------------
loom_tool_test(help ARGS --help STDOUT_REGEX "usage: loom-run FILE\\.lir" STDERR_REGEX "^$")
loom_tool_test(no_args RC 2 STDERR_REGEX "loom-run: no graph file given")
loom_tool_test(unknown_option RC 2 ARGS ${small} --bogus
  STDERR_REGEX "loom-run: unknown option '--bogus'")
loom_tool_test(trace_needs_a_file RC 2 ARGS ${small} --random 1 --trace=
  STDERR_REGEX "^loom-run: --trace '': want a file name\n$")
# Limits and runners (issue 3): the run is cut into stages that fit, and says so.
loom_tool_test(limit_stages ARGS ${small} --random 1 --limit 1KiB --stats-json @WORK@/stats.json
  STDOUT_REGEX "small: ran on cpu0 .* in [0-9]+ stages.*stage 0 +cpu0 +limit +1.00 KiB +estimated peak"
  EXPECT_FILES stats.json)
# The graph is chunked to the largest limit (400 B here) and split by memory: the first
# stage fills the 280-byte runner, the second goes on with the next runner.
loom_tool_test(runners_spec ARGS ${small} --random 1 --runners cpu0:280,cpu0:400
  STDOUT_REGEX "in 2 stages.*stage 0 +cpu0 +limit +280 B +estimated peak +268 B +measured peak +268 B.*stage 1 +cpu0 +limit +400 B")
loom_tool_test(limit_bad_size RC 2 ARGS ${small} --random 1 --limit 12QB
  STDERR_REGEX "loom-run: --limit: byte size '12QB': cannot read it at column 3")
# A size too large is blamed at its first column, not one past its end (issue 16).
loom_tool_test(limit_too_large RC 2 ARGS ${small} --random 1 --limit 9223372036854775807
  STDERR_REGEX "^loom-run: --limit: byte size '9223372036854775807': the size is not a whole number of bytes, or is too large at column 1\n$")
loom_tool_test(runners_bad_spec RC 2 ARGS ${small} --random 1 --runners cpu0:1MiX
  STDERR_REGEX "loom-run: --runners: .*cpu0:1MiX")
loom_tool_test(limit_too_small RC 1 ARGS ${small} --random 1 --limit 16 --out-dir @WORK@/out
  STDERR_REGEX "loom-run: .*(limit|needs)" NO_FILES_IN out)
# The plan is made before the inputs (issue 16): a 4 TiB input under 1 MiB is refused at once
# with the plan's message, never allocated (an allocation that size would fail, or abort under
# ASan, and the message would not be the plan's).
loom_tool_test(huge_input_refused_before_inputs RC 1 ARGS ${LOOM_TOOL_DATA}/huge_input.lir --random 1 --limit 1MiB
  --out-dir @WORK@/out STDERR_REGEX "^loom-run: [^\n]*(needs|limit)[^\n]*1\\.00 MiB" STDERR_NOT_REGEX "out of memory"
  NO_FILES_IN out TIMEOUT 30)
loom_tool_test(no_rewrite_unknown RC 2 ARGS ${small} --random 1 --no-rewrite bogus
  STDERR_REGEX "^loom-run: --no-rewrite 'bogus': want distance, [^\n]* or fuse\n$")
loom_tool_test(no_rewrite_misspelled RC 2 ARGS ${small} --random 1 --no-rewrite fsue
  STDERR_REGEX "^loom-run: --no-rewrite 'fsue': want [^\n]*\\(did you mean 'fuse'\\?\\)\n$")
loom_tool_test(missing_value RC 2 ARGS ${small} --in
  STDERR_REGEX "loom-run: option '--in' needs a value")
loom_tool_test(bad_in_spec RC 2 ARGS ${small} --in x.npy
  STDERR_REGEX "loom-run: --in 'x\\.npy': want NAME=FILE\\.npy or NAME=FILE\\.safetensors\\[:TENSOR\\]")
loom_tool_test(bad_seed RC 2 ARGS ${small} --random 1x
  STDERR_REGEX "^loom-run: --random '1x': want a seed from 0 to 2\\^64-1\n$")
loom_tool_test(bad_print RC 2 ARGS ${small} --random 1 --print -3
  STDERR_REGEX "^loom-run: --print '-3': want a count of rows")
loom_tool_test(two_graphs RC 2 ARGS ${small} ${small}
  STDERR_REGEX "loom-run: one graph file at a time")
loom_tool_test(misspelled_option RC 2 ARGS ${small} --randon 1
  STDERR_REGEX "^loom-run: unknown option '--randon' \\(did you mean '--random'\\?\\)\nusage: loom-run ")
loom_tool_test(policy_misspelled RC 2 ARGS ${small} --policy dmad
  STDERR_REGEX "^loom-run: --policy 'dmad': want dmda, eager or fixed \\(did you mean 'dmda'\\?\\)\n$")
# A misspelled op in the graph gets the closest op's name (issue 33), where the parser says it.
loom_tool_test(misspelled_op RC 1 ARGS ${LOOM_TOOL_DATA}/misspelled_op.lir --random 1
  STDERR_REGEX "misspelled_op\\.lir:2:7: error: unknown op 'ad' \\(did you mean 'add'\\?\\)")
# LOOM_LOG (issue 33): nothing from the library at the default level; at info one line per event
# ("loom: info: ..."), the context's devices among them; a misspelled level is said once.
loom_tool_test(log_default ARGS ${small} --random 1 STDERR_REGEX "^$")
loom_tool_test(log_info ENV LOOM_LOG=info ARGS ${small} --random 1
  STDERR_REGEX "^loom: info: context: [0-9]+ devices \\(cpu0[^\n]*\\)\n")
loom_tool_test(log_misspelled ENV LOOM_LOG=wran ARGS ${small} --random 1
  STDERR_REGEX "^loom: warn: LOOM_LOG: log level 'wran': want error, warn, info or debug \\(did you mean 'warn'\\?\\); using warn\n$")
# Every tool alike (issue 33): --version gives one version and commit, --help the usage.
add_test(NAME tools.versions COMMAND ${CMAKE_COMMAND}
  "-DTOOLS=$<TARGET_FILE:loom-run>|$<TARGET_FILE:loom-plan>|$<TARGET_FILE:loom-info>|$<TARGET_FILE:loom-bench>"
  -DVERSION=${PROJECT_VERSION} -P ${CMAKE_CURRENT_SOURCE_DIR}/tools/check_versions.cmake)
set_tests_properties(tools.versions PROPERTIES TIMEOUT 60 ENVIRONMENT "${LOOM_TEST_ENV}")

# ---- the files a run writes (issue 32): all through temporaries renamed at the end, so a failing
# run keeps the earlier files, a 245-character name works, and SIGTERM / SIGINT mid-write leave no
# temporary and no --out-dir the run made (tools/run_files.py says how each is caught).
find_program(LOOM_TOOLS_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(LOOM_TOOLS_PYTHON3)
  foreach(case keep long sigterm sigint)
    add_test(NAME loom-run.files_${case} COMMAND ${LOOM_TOOLS_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/tools/run_files.py
      ${case} $<TARGET_FILE:loom-run> ${CMAKE_CURRENT_BINARY_DIR}/tool-tests/files_${case})
    set_tests_properties(loom-run.files_${case} PROPERTIES TIMEOUT 300 ENVIRONMENT "${LOOM_TEST_ENV}")
  endforeach()
else()
  message(STATUS "/usr/bin/python3 not found: loom-run.files_* (outputs, temporaries, signals) are not run")
endif()

# ---- the graph and the inputs -------------------------------------------------------------
loom_tool_test(graph_not_found RC 1 ARGS @WORK@/nope.lir --random 1
  STDERR_REGEX "loom-run: .*nope\\.lir: No such file or directory")
# The parser's located message is printed as it is, not prefixed a second time.
loom_tool_test(parse_error RC 1 ARGS ${LOOM_TOOL_DATA}/bad_syntax.lir --random 1 --out-dir @WORK@/out
  STDERR_REGEX "^[^\n]*bad_syntax\\.lir:[0-9]+:[0-9]+: error: " STDERR_NOT_REGEX "loom-run: " NO_FILES_IN out)
loom_tool_test(unknown_parameter RC 2 FIXTURES ARGS ${small} --in x=@WORK@/x.npy --in z=@WORK@/y.npy
  STDERR_REGEX "graph 'small' has no parameter 'z' \\(its parameters: x, y\\)")
loom_tool_test(missing_input RC 2 FIXTURES ARGS ${small} --in x=@WORK@/x.npy --out-dir @WORK@/out
  STDERR_REGEX "loom-run: missing inputs: y \\(give --in NAME=FILE\\.npy, --in-all FILE\\.safetensors, or --random SEED\\)" NO_FILES_IN out)
loom_tool_test(input_twice RC 2 FIXTURES ARGS ${small} --in x=@WORK@/x.npy --in x=@WORK@/y.npy
  STDERR_REGEX "parameter 'x' is given twice")

# Each bad input: exit 1, a message naming the option and the file, and no output file.
foreach(case
    "wrong_shape|shape \\[5,3\\] does not match parameter x: f32\\[4,3\\]"
    "wrong_dtype|dtype f64 does not match parameter x: f32\\[4,3\\]"
    "wrong_both|type i32\\[2,2\\] does not match parameter x: f32\\[4,3\\]"
    "truncated|x_truncated\\.npy: expected 48 data bytes, found 12"
    "fortran|x_fortran\\.npy: Fortran-order arrays are not supported; save with np\\.ascontiguousarray"
    "bad_header|x_bad_header\\.npy: bad \\.npy header: expected ',' or '\\)' in 'shape'"
    "bad_magic|x_bad_magic\\.npy: not a \\.npy file \\(bad magic\\)"
    "missing|x_missing\\.npy: No such file or directory")
  string(FIND "${case}" "|" bar)
  string(SUBSTRING "${case}" 0 ${bar} file)
  math(EXPR bar "${bar} + 1")
  string(SUBSTRING "${case}" ${bar} -1 regex)
  loom_tool_test(input_${file} RC 1 FIXTURES
    ARGS ${small} --in y=@WORK@/y.npy --in x=@WORK@/x_${file}.npy --out-dir @WORK@/out
    STDERR_REGEX "^loom-run: --in x=[^ ]*x_${file}\\.npy: [^\n]*${regex}" NO_FILES_IN out)
endforeach()

# ---- outputs ------------------------------------------------------------------------------
# bf16 has no NumPy dtype: refused before running, and the output directory is not made.
loom_tool_test(bf16_output RC 1 ARGS ${LOOM_TOOL_DATA}/bf16_out.lir --random 1 --out-dir @WORK@/out/deeper
  STDERR_REGEX "loom-run: output y is bf16, which has no NumPy dtype" NO_FILES_IN out)
loom_tool_test(out_dir_is_a_file RC 1 FIXTURES ARGS ${small} --random 1 --out-dir @WORK@/x.npy/sub
  STDERR_REGEX "loom-run: cannot create output directory .*x\\.npy/sub: Not a directory")
# A write that fails after the first output was renamed into place (idx.npy is a directory
# here): the outputs already written are removed again, and no temporary is left.
loom_tool_test(write_fails_midway RC 1 ARGS ${small} --random 1 --out-dir @WORK@/out MKDIRS out/idx.npy
  STDERR_REGEX "loom-run: --out-dir .*out/idx\\.npy: a directory is in the way; nothing was written"
  NO_FILES_IN out)
# Inputs from files; outputs named after `return` (val twice: val, val_1; the parameter x
# returned as is), written into a directory made on the way, and nothing else left there.
loom_tool_test(writes_outputs FIXTURES
  ARGS ${small} --in x=@WORK@/x.npy --in=y=@WORK@/y.npy --out-dir @WORK@/out/sub
  STDOUT_REGEX "small: ran on cpu0 in [0-9.]+ m?s, peak .* bytes\\) in [0-9]+ allocations.*  val +f32\\[4,2\\]  -> .*out/sub/val\\.npy.*idx +i64\\[4,2\\].*x +f32\\[4,3\\].*val_1 +f32\\[4,2\\]"
  EXPECT_FILES out/sub/val.npy out/sub/idx.npy out/sub/x.npy out/sub/val_1.npy ONLY_FILES_IN out/sub
  EQUAL out/sub/x.npy=x.npy out/sub/val.npy=out/sub/val_1.npy)
# --random SEED: parameter x (index 0) gets the same values as the helper's seed-1 x.npy,
# which makes the sequence part of the tested contract. --print shows rows.
loom_tool_test(random_and_print FIXTURES ARGS ${small} --random 1 --print 2 --out-dir @WORK@/out
  STDOUT_REGEX "val +f32\\[4,2\\].*\n    \\[0\\] [0-9.e-]+ [0-9.e-]+\n    \\[1\\] .*\n    \\.\\.\\. 2 more rows"
  EXPECT_FILES out/val.npy out/idx.npy out/x.npy out/val_1.npy EQUAL out/x.npy=x.npy)
loom_tool_test(summary_only ARGS ${small} --random 7 STDOUT_REGEX "small: ran on cpu0" STDOUT_NOT_REGEX "-> [^ ]*\\.npy")

# ---- .safetensors (issue 17) ----------------------------------------------------------------
# tests/tools/data/small.safetensors (x, a u8 "flag", y stored misaligned after it) and the same
# x and y as .npy were written by tests/data/safetensors/make_fixtures.py (standard-library
# Python, independent of Loom). Every parameter from the file by name (x mapped, y copied), every
# output into one .safetensors file by its name: equal to the run over the .npy files.
set(st_small ${LOOM_TOOL_DATA}/small.safetensors)
set(st_ref_args ${small} --in x=${LOOM_TOOL_DATA}/small_x.npy --in y=${LOOM_TOOL_DATA}/small_y.npy --out-dir @WORK@/ref)
loom_tool_test(safetensors_in_all_and_out ARGS ${small} --in-all ${st_small} --out @WORK@/out/o.safetensors
  MKDIRS out REF_ARGS ${st_ref_args}
  STDOUT_REGEX "val +f32\\[4,2\\]  -> [^\n]*out/o\\.safetensors:val\n.*val_1 +f32\\[4,2\\]  -> [^\n]*:val_1\n"
  EXPECT_FILES out/o.safetensors ONLY_FILES_IN out
  EQUAL out/o.safetensors:val=ref/val.npy out/o.safetensors:idx=ref/idx.npy out/o.safetensors:x=ref/x.npy
  out/o.safetensors:val_1=ref/val_1.npy)
# --in NAME=FILE.safetensors:TENSOR, and NAME=FILE.safetensors for the tensor called NAME.
loom_tool_test(safetensors_in_tensor ARGS ${small} --in x=${st_small}:x --in y=${st_small} --out-dir @WORK@/out
  REF_ARGS ${st_ref_args} EQUAL out/val.npy=ref/val.npy out/idx.npy=ref/idx.npy out/x.npy=ref/x.npy)
# --in wins over --in-all (x from the helper's x.npy, y from the file).
loom_tool_test(safetensors_in_overrides_in_all FIXTURES ARGS ${small} --in-all ${st_small} --in x=@WORK@/x.npy
  --out @WORK@/o.safetensors EQUAL o.safetensors:x=x.npy)
# A file written by --out read back by --in-all, by the same names (x returned as is).
loom_tool_test(safetensors_out_of_loom_read_back FIXTURES ARGS ${small} --in-all @WORK@/x_only.safetensors
  --in y=@WORK@/y.npy --out @WORK@/o.safetensors EQUAL o.safetensors:x=x.npy)
loom_tool_test(safetensors_in_all_missing_parameter RC 2 FIXTURES ARGS ${small} --in-all @WORK@/x_only.safetensors
  --out @WORK@/out/o.safetensors MKDIRS out
  STDERR_REGEX "^loom-run: missing inputs: y \\(in no --in-all file; give --in NAME=FILE, or --random SEED\\)\n$"
  NO_FILES_IN out)
loom_tool_test(safetensors_no_such_tensor RC 1 ARGS ${small} --in x=${st_small}:w --in y=${st_small}
  STDERR_REGEX "^loom-run: --in x=[^ ]*small\\.safetensors:w: [^ ]*small\\.safetensors has no tensor 'w' \\(its tensors: flag, x, y\\)\n$")
loom_tool_test(safetensors_wrong_shape RC 1 ARGS ${small} --in x=${st_small}:y --in y=${st_small}
  STDERR_REGEX "^loom-run: --in x=[^ ]*small\\.safetensors:y: shape \\[5,3\\] does not match parameter x: f32\\[4,3\\]\n$")
loom_tool_test(safetensors_wrong_dtype RC 1 ARGS ${small} --in x=${st_small}:flag --in-all ${st_small}
  STDERR_REGEX "^loom-run: --in x=[^ ]*:flag: type u8\\[2\\] does not match parameter x: f32\\[4,3\\]\n$")
loom_tool_test(safetensors_malformed RC 1 FIXTURES ARGS ${small} --in-all @WORK@/bad_length.safetensors --out @WORK@/out/o.safetensors
  MKDIRS out STDERR_REGEX "^loom-run: --in-all [^ ]*bad_length\\.safetensors: [^ ]*bad_length\\.safetensors: header length 1000 runs past the end of the file \\(2 bytes after the length\\)\n$"
  NO_FILES_IN out)
loom_tool_test(safetensors_missing_file RC 1 ARGS ${small} --in-all @WORK@/nope.safetensors
  STDERR_REGEX "^loom-run: --in-all [^ ]*nope\\.safetensors: [^ ]*nope\\.safetensors: No such file or directory\n$")
loom_tool_test(safetensors_in_all_not_safetensors RC 2 ARGS ${small} --in-all x.npy
  STDERR_REGEX "^loom-run: --in-all 'x\\.npy': want a FILE\\.safetensors\n$")
loom_tool_test(safetensors_out_not_safetensors RC 2 ARGS ${small} --random 1 --out out.npy
  STDERR_REGEX "^loom-run: --out 'out\\.npy': want a FILE\\.safetensors")
loom_tool_test(safetensors_empty_tensor_name RC 2 ARGS ${small} --in x=${st_small}: --in-all ${st_small}
  STDERR_REGEX "^loom-run: --in x=[^ ]*small\\.safetensors:: no tensor name after ':'\n$")
# An --out that cannot be written fails the run, and nothing else is written either.
loom_tool_test(safetensors_out_unwritable RC 1 ARGS ${small} --random 1 --out @WORK@/nodir/o.safetensors
  --out-dir @WORK@/out STDERR_REGEX "^loom-run: --out: [^ ]*nodir/o\\.safetensors" NO_FILES_IN out)
# --out and --out-dir together: both written, the same values.
loom_tool_test(safetensors_out_and_out_dir ARGS ${small} --random 1 --out @WORK@/o.safetensors --out-dir @WORK@/out
  EQUAL o.safetensors:val=out/val.npy o.safetensors:idx=out/idx.npy)
# A c128 output has no safetensors dtype: refused before the run.
loom_tool_test(safetensors_out_c128 RC 1 ARGS ${LOOM_TOOL_DATA}/c128_out.lir --random 1 --out @WORK@/out/o.safetensors MKDIRS out
  STDERR_REGEX "^loom-run: output y is c128, which \\.safetensors cannot hold" NO_FILES_IN out)

# Chunked, then fused inside the pieces: the chunk rewrite sized the pieces for the body's ops
# one by one (a few rows), the fused body holds only its results, so the loop grows its pieces
# to the limit; the measured peak stays under it and the result is brute force's.
loom_tool_test(knn_loop_grown ARGS ${LOOM_TOOL_DATA}/knn_small.lir --random 1 --limit 256KiB
  --stats-json @WORK@/stats.json --out-dir @WORK@/out
  STDOUT_REGEX "rewrite chunk +saved +0 B +loop 'val' grown from pieces of [0-9] to [0-9]+ \\([2-9] pieces\\): its body is fused"
  STATS_JSON stats.json STAGE_LIMIT 262144 KNN_CHECK out=${LOOM_TOOL_DATA}/knn_small.lir)

# The rows of the result are made by a broadcast alone: the loop slices the broadcast's view.
loom_tool_test(broadcast_rows_chunked ARGS ${LOOM_TOOL_DATA}/broadcast_chain.lir --random 1 --limit 128KiB
  --stats-json @WORK@/stats.json --out-dir @WORK@/out
  REF_ARGS ${LOOM_TOOL_DATA}/broadcast_chain.lir --random 1 --out-dir @WORK@/ref
  STDOUT_REGEX "rewrite chunk [^\n]*sin 's' and the 1 ops before it, along its result's axis 0"
  STATS_JSON stats.json STAGE_LIMIT 131072 EQUAL out/s.npy=ref/s.npy)

# A loop written by hand passes the limit: the chunk rewrite gives it smaller pieces (then,
# its body fused, grows them back to what the limit holds); where the graph fits, the loop
# keeps its pieces; where an input alone passes the limit, the refusal names it.
set(chunked_knn ${LOOM_TOOL_DATA}/chunked_knn.lir)
loom_tool_test(loop_shrunk ARGS ${chunked_knn} --random 1 --limit 64KiB --stats-json @WORK@/stats.json
  --out-dir @WORK@/out
  REF_ARGS ${chunked_knn} --random 1 --out-dir @WORK@/ref
  STDOUT_REGEX "rewrite chunk [^\n]*loop 'val' in smaller pieces: 256 -> [0-9]+ \\([0-9]+ pieces\\)"
  STATS_JSON stats.json STAGE_LIMIT 65536 EQUAL out/val.npy=ref/val.npy out/idx.npy=ref/idx.npy)
loom_tool_test(loop_kept ARGS ${chunked_knn} --random 1 --limit 4MiB --out-dir @WORK@/out
  STDOUT_NOT_REGEX "rewrite chunk")
# yt (f32[3,2000], 23.44 KiB) passes the limit: the inner loop streams it in blocks of columns
loom_tool_test(loop_input_streamed ARGS ${chunked_knn} --random 1 --limit 16KiB --stats-json @WORK@/stats.json
  --out-dir @WORK@/out REF_ARGS ${chunked_knn} --random 1 --out-dir @WORK@/ref
  STATS_JSON stats.json STAGE_LIMIT 16384 EQUAL out/val.npy=ref/val.npy out/idx.npy=ref/idx.npy)

# Graphs that return a value and also reduce it, under an eighth of their naive need: the
# returned value joins the loop as a result written piece by piece beside the reduction's
# (a layer's activations and their means; a spectrum and its round trip's largest error); two
# reductions of one input both read it in pieces; a mean over several axes, one of them cut,
# divides by all the elements it covers. The conv's activations r are close, not equal, to the
# whole run's: a piece's GEMM is of another shape than the whole image's, which OpenBLAS's
# Haswell kernels (an AVX2 machine's, and a CPU it does not know: Zen 5) sum in another order
# (7,395 of 16,384 values differ, by up to 2.9e-6 near 9; ctest's isa_avx2 mode runs them).
# Likewise the spectrum's FFTs: FFTW plans a piece's 6 rows otherwise than the whole 64 (and
# splits batches across threads), so f is close, not equal, to the whole run's.
loom_tool_test(returned_and_reduced_conv ARGS ${LOOM_EXAMPLES}/conv_small.lir --random 1 --limit 27KiB
  --stats-json @WORK@/stats.json --out-dir @WORK@/out
  REF_ARGS ${LOOM_EXAMPLES}/conv_small.lir --random 1 --out-dir @WORK@/ref
  STDOUT_REGEX "rewrite chunk [^\n]*reduce_mean 'p' \\(with 1 more sink\\)"
  STATS_JSON stats.json STAGE_LIMIT 27648 CLOSE out/r.npy=ref/r.npy out/p.npy=ref/p.npy)
loom_tool_test(returned_and_reduced_spectrum ARGS ${LOOM_EXAMPLES}/spectrum.lir --random 1 --limit 164KiB
  --stats-json @WORK@/stats.json --out-dir @WORK@/out
  REF_ARGS ${LOOM_EXAMPLES}/spectrum.lir --random 1 --out-dir @WORK@/ref
  STDOUT_REGEX "rewrite chunk [^\n]*reduce_max 'maxe' \\(with 1 more sink\\)"
  STATS_JSON stats.json STAGE_LIMIT 167936 CLOSE out/f.npy=ref/f.npy out/maxe.npy=ref/maxe.npy out/zb.npy=ref/zb.npy)
loom_tool_test(two_means_of_one_input ARGS ${LOOM_TOOL_DATA}/mean_two_axes.lir --random 1 --limit 64KiB
  --stats-json @WORK@/stats.json --out-dir @WORK@/out
  REF_ARGS ${LOOM_TOOL_DATA}/mean_two_axes.lir --random 1 --out-dir @WORK@/ref
  STDOUT_REGEX "rewrite chunk [^\n]*\\(with 1 more sink\\)[^\n]*along (the reduced|its result's) axis 0"
  STATS_JSON stats.json STAGE_LIMIT 65536 CLOSE out/m.npy=ref/m.npy out/c.npy=ref/c.npy)

# ---- recovery from out of memory (issue 17) ------------------------------------------------
# cpu0's node refuses every allocation over 512 KiB from its 10th on (LOOM_TESTING_REFUSE, the
# fault injection of loom/testing.h), as a crowded device would: with --recover the stage is
# re-planned (half its 3.87 MiB, refused again; then a quarter) and finishes with the fault-free
# run's results, which are brute force's; each re-plan is listed. Fusion is off: fused, the
# stage holds 93 KiB, nearly all of it a step that cannot be chunked.
set(knn_small ${LOOM_TOOL_DATA}/knn_small.lir)
loom_tool_test(recover_knn ENV LOOM_TESTING_REFUSE=host0:10:512KiB
  ARGS ${knn_small} --random 1 --limit 4MiB --no-rewrite fuse --recover --stats-json @WORK@/stats.json --out-dir @WORK@/out
  REF_ARGS ${knn_small} --random 1 --limit 4MiB --no-rewrite fuse --out-dir @WORK@/ref
  STDOUT_REGEX "recover +stage 0 cpu0: out of memory at allocation [0-9]+; re-planned for 1\\.94 MiB \\(try 1 of 3\\): out of memory again\n +recover +stage 0 cpu0: out of memory at allocation [0-9]+; re-planned for 99[0-9]\\.[0-9]+ KiB \\(try 2 of 3\\): 1 stage, estimated peak"
  STATS_JSON stats.json RECOVERIES 2
  EQUAL out/val.npy=ref/val.npy out/idx.npy=ref/idx.npy KNN_CHECK out=${knn_small} TIMEOUT 300)
# Fused before chunking, the stage is one fused op over the whole space (547 KiB), which the
# chunk rewrite cannot cut: the re-plan unfuses it, chunks its ops for half that, and fuses them
# again inside the pieces.
loom_tool_test(recover_knn_fused ENV LOOM_TESTING_REFUSE=host0:3:16KiB
  ARGS ${knn_small} --random 1 --limit 4MiB --recover --out-dir @WORK@/out
  STDOUT_REGEX "nothing cut: fused.*recover +stage 0 cpu0: out of memory at allocation [0-9]+; re-planned for [0-9.]+ KiB \\(try 1 of 3\\): 1 stage, estimated peak [0-9.]+ KiB"
  KNN_CHECK out=${knn_small} TIMEOUT 300)
# Without --recover the refusal fails the run, naming the stage, the node and the allocation.
loom_tool_test(recover_off RC 1 ENV LOOM_TESTING_REFUSE=host0:10:512KiB
  ARGS ${knn_small} --random 1 --limit 4MiB --no-rewrite fuse
  STDERR_REGEX "^loom-run: stage 0 \\(cpu0, limit 4194304 bytes\\): .*out of memory on host0: the device refused [0-9.]+ [KM]iB \\(injected for testing\\)\n$")
# Refusing everything: recovery cannot help, and says what it tried.
loom_tool_test(recover_fails RC 1 ENV LOOM_TESTING_REFUSE=host0:1:0
  ARGS ${knn_small} --random 1 --limit 4MiB --recover --out-dir @WORK@/out NO_FILES_IN out
  STDERR_REGEX "^loom-run: stage 0 \\(cpu0\\): out of memory, and recovery failed after [1-3] tr(y|ies) \\(re-planned for [^)]*\\): ")
loom_tool_test(recover_takes_no_value RC 2 ARGS ${small} --recover=yes
  STDERR_REGEX "^loom-run: option '--recover' takes no value\nusage: loom-run ")
loom_tool_test(recover_bad_refuse RC 2 ENV LOOM_TESTING_REFUSE=host0 ARGS ${small} --random 1 --limit 1MiB
  STDERR_REGEX "LOOM_TESTING_REFUSE='host0': expected NODE:N:BYTES")

# ---- the examples and kNN against brute force ---------------------------------------------
foreach(example kernel_mv dot_chain spectrum conv_small)
  loom_tool_test(example_${example} ARGS ${LOOM_EXAMPLES}/${example}.lir --random 1 --out-dir @WORK@/out
    STDOUT_REGEX "ran on cpu0" TIMEOUT 300)
endforeach()
loom_tool_test(knn_small ARGS ${LOOM_TOOL_DATA}/knn_small.lir --random 1 --out-dir @WORK@/out
  EXPECT_FILES out/val.npy out/idx.npy KNN_CHECK out=${LOOM_TOOL_DATA}/knn_small.lir TIMEOUT 300)

# A conv whose input and output (1 MiB each) pass the limit of 256 KiB runs in tiles along its
# rows (issue 17: each tile reads its rows of x and the halo the kernel needs, the padding only at
# the image's borders); the stage's peak stays under the limit and y equals the untiled run's.
loom_tool_test(conv_tiled ARGS ${LOOM_TOOL_DATA}/conv_tiled.lir --random 1 --limit 256KiB
  --stats-json @WORK@/stats.json --out-dir @WORK@/out
  REF_ARGS ${LOOM_TOOL_DATA}/conv_tiled.lir --random 1 --out-dir @WORK@/ref
  STDOUT_REGEX "rewrite chunk [^\n]*conv 'y'[^\n]*along its result's axis 2, in [0-9]+ pieces"
  STATS_JSON stats.json STAGE_LIMIT 262144 EQUAL out/y.npy=ref/y.npy)
# Under 10 KiB even one row of tiles does not fit: rows of one outside, each row's columns in
# tiles inside (an inner loop reading the row's window through a window of its own).
loom_tool_test(conv_tiled_2d ARGS ${LOOM_TOOL_DATA}/conv_tiled.lir --random 1 --limit 10KiB
  --stats-json @WORK@/stats.json --out-dir @WORK@/out
  REF_ARGS ${LOOM_TOOL_DATA}/conv_tiled.lir --random 1 --out-dir @WORK@/ref
  STDOUT_REGEX "rewrite chunk [^\n]*conv 'y'[^\n]*along its result's axis 2, in 512 pieces of 1 \\(one loop\\); inside loop 'y': conv [^\n]*along its result's axis 3"
  STATS_JSON stats.json STAGE_LIMIT 10240 EQUAL out/y.npy=ref/y.npy)
# Eight channels in and out (2 MiB each) under 512 KiB, a quarter of either: x streamed in
# windows of one run of rows per channel, y streamed out tile by tile the same way; y within the
# float tolerance of the untiled run's (its GEMM sums 72 products per element in an order that
# may depend on the tile's size).
loom_tool_test(conv_tiled_channels ARGS ${LOOM_TOOL_DATA}/conv_tiled_channels.lir --random 1 --limit 512KiB
  --stats-json @WORK@/stats.json --out-dir @WORK@/out
  REF_ARGS ${LOOM_TOOL_DATA}/conv_tiled_channels.lir --random 1 --out-dir @WORK@/ref
  STDOUT_REGEX "rewrite chunk [^\n]*conv 'y'[^\n]*along its result's axis 2, in [0-9]+ pieces"
  STATS_JSON stats.json STAGE_LIMIT 524288 CLOSE out/y.npy=ref/y.npy)

# ---- memory: LOOM_MEM_LIMIT, the memory manager's counters and trace (issue 5) -----------------
# The devices LOOM_MEM_LIMIT names are the runners when none are given: kNN in stages that fit
# 8 MiB, no memory node over its limit, cpu0's node (host0) at 8 MiB, and the results those
# of a run under --limit 8MiB without LOOM_MEM_LIMIT (the same plan) and of brute force.
loom_tool_test(mem_limit_default_runners ENV LOOM_MEM_LIMIT=cpu0:8MiB
  ARGS ${LOOM_EXAMPLES}/knn.lir --random 1 --stats-json @WORK@/stats.json --out-dir @WORK@/out
  REF_ARGS ${LOOM_EXAMPLES}/knn.lir --random 1 --limit 8MiB --out-dir @WORK@/ref
  STDOUT_REGEX "knn: ran on cpu0 .* in [0-9]+ stages.*stage 0 +cpu0 +limit +8\\.00 MiB.*memory host0 +peak +[0-9.]+ [KM]iB +limit +8\\.00 MiB"
  STATS_JSON stats.json STAGE_LIMIT 8388608 NODE_LIMIT host0=8388608
  EQUAL out/val.npy=ref/val.npy out/idx.npy=ref/idx.npy KNN_CHECK out=${LOOM_EXAMPLES}/knn.lir TIMEOUT 300)
# A small graph chunked to fit a node limit of 250 bytes (fused whole, it needs 300) gives the
# results of the unlimited run:
# the same neighbours, and distances that brute force confirms (not the same bits: chunked, the
# distance rewrite keeps the exact direct form, and unlimited it expands it, issue 17).
loom_tool_test(mem_limit_matches_unlimited ENV LOOM_MEM_LIMIT=cpu0:250
  ARGS ${small} --random 1 --stats-json @WORK@/stats.json --out-dir @WORK@/out
  REF_ARGS ${small} --random 1 --out-dir @WORK@/ref
  STDOUT_REGEX "rewrite distance .* direct form kept.*rewrite chunk .* in 2 pieces"
  STATS_JSON stats.json STAGE_LIMIT 250 NODE_LIMIT host0=250
  EQUAL out/idx.npy=ref/idx.npy out/x.npy=ref/x.npy out/val_1.npy=out/val.npy KNN_CHECK out=${small})
# A runner over its device's LOOM_MEM_LIMIT is lowered to it, and stderr says so.
loom_tool_test(mem_limit_lowers_runners ENV LOOM_MEM_LIMIT=cpu0:1KiB ARGS ${small} --random 1 --limit 1MiB
  STDERR_REGEX "^loom-run: note: runner 0 \\(cpu0\\) lowered from 1\\.00 MiB to 1\\.00 KiB, its LOOM_MEM_LIMIT\n$"
  STDOUT_REGEX "stage 0 +cpu0 +limit +1\\.00 KiB")
# A host node's limit makes no runner: the graph runs whole, under the node's limit.
loom_tool_test(mem_limit_host_node ENV LOOM_MEM_LIMIT=host0:64MiB ARGS ${small} --random 1 --stats-json @WORK@/stats.json
  STDOUT_REGEX "small: ran on cpu0 in .* allocations" STATS_JSON stats.json NODE_LIMIT host0=67108864)
# Too little for the graph's largest value: the memory manager refuses, naming the node.
loom_tool_test(mem_limit_node_too_small RC 1 ENV LOOM_MEM_LIMIT=host0:64 ARGS ${small} --random 1 --out-dir @WORK@/out
  STDERR_REGEX "loom-run: .*out of memory on host0: .*64 B limit" NO_FILES_IN out)
# A LOOM_MEM_LIMIT that does not parse is named, with the column, before anything runs.
loom_tool_test(mem_limit_bad_size RC 2 ENV LOOM_MEM_LIMIT=cpu0:8QB ARGS ${small} --random 1
  STDERR_REGEX "^loom-run: LOOM_MEM_LIMIT 'cpu0:8QB': the size of cpu0 cannot be read at column 7 \\(write 123, 64KiB")
loom_tool_test(mem_limit_bad_id RC 2 ENV LOOM_MEM_LIMIT=cpu0:8MiB,gpu0:1GiB ARGS ${small} --random 1 --limit 1MiB
  STDERR_REGEX "^loom-run: LOOM_MEM_LIMIT 'cpu0:8MiB,gpu0:1GiB': 'gpu0' at column 11 is not a device or node id")
# Empty entries are refused in LOOM_MEM_LIMIT as in --runners, naming the column (issue 16).
loom_tool_test(mem_limit_empty_entry RC 2 ENV LOOM_MEM_LIMIT=cpu0:1MiB,, ARGS ${small} --random 1
  STDERR_REGEX "^loom-run: LOOM_MEM_LIMIT 'cpu0:1MiB,,': an entry is empty at column 11 \\(write id:size")
loom_tool_test(runners_empty_entry RC 2 ARGS ${small} --random 1 --runners cpu0:1MiB,,
  STDERR_REGEX "^loom-run: --runners: runners 'cpu0:1MiB,,': an entry is empty at column 11 \\(write ")
# Devices this machine lacks (issue 16): in LOOM_MEM_LIMIT, an environment every program shares,
# they are ignored with a note and make no runner; named as runners they are a wrong command
# line (exit 2) naming the runner, the device and the devices there are.
loom_tool_test(mem_limit_missing_device ENV LOOM_MEM_LIMIT=cpu9:1MiB ARGS ${small} --random 1
  STDERR_REGEX "^loom-run: note: LOOM_MEM_LIMIT names cpu9, which this machine lacks: ignored\n$"
  STDOUT_REGEX "small: ran on cpu0 in [^\n]* allocations")
loom_tool_test(mem_limit_missing_device_kept_others ENV LOOM_MEM_LIMIT=cpu0:1KiB,ocl7:1MiB ARGS ${small} --random 1
  STDERR_REGEX "^loom-run: note: LOOM_MEM_LIMIT names ocl7, which this machine lacks: ignored\n$"
  STDOUT_REGEX "stage 0 +cpu0 +limit +1\\.00 KiB" STDOUT_NOT_REGEX "ocl7")
loom_tool_test(runners_missing_device RC 2 ARGS ${small} --random 1 --runners cpu9:1MiB
  STDERR_REGEX "^loom-run: --runners: runner 0: this machine has no device cpu9 \\(it has: cpu0[^\n]*\\) \\(did you mean 'cpu0'\\?\\)\n$")
loom_tool_test(runners_missing_second_device RC 2 ARGS ${small} --random 1 --runners cpu0:1MiB,ocl7:1MiB
  STDERR_REGEX "^loom-run: --runners: runner 1: this machine has no device ocl7 \\(it has: cpu0")
# --stats-json keeps its keys and adds the memory manager's counters per memory node.
loom_tool_test(stats_json_memory ARGS ${small} --random 1 --limit 1KiB --stats-json @WORK@/stats.json
  STATS_JSON stats.json STAGE_LIMIT 1024)
# --trace: the run's allocations, frees and copies as Chrome trace JSON, and nothing else left.
loom_tool_test(trace_written ARGS ${small} --random 1 --limit 1KiB --trace @WORK@/t/trace.json MKDIRS t
  TRACE t/trace.json EXPECT_FILES t/trace.json ONLY_FILES_IN t)
# A run that fails writes no trace (nor its stats).
loom_tool_test(trace_not_on_failure RC 1 ARGS ${small} --random 1 --limit 16 --trace @WORK@/t/trace.json
  --stats-json @WORK@/t/stats.json MKDIRS t NO_FILES_IN t)
# A trace that cannot be written fails the run, and the outputs are not written either.
loom_tool_test(trace_unwritable RC 1 ARGS ${small} --random 1 --trace @WORK@/nodir/trace.json --out-dir @WORK@/out
  STDERR_REGEX "loom-run: --trace: [^ ]*nodir/trace\\.json: cannot create a temporary file beside it" NO_FILES_IN out)

# loom-bench knn at a small size: it exits non-zero unless every chunked run ran under its
# limit and returned the unchunked run's neighbours (ordered apart only where two are tied to
# rounding: the chunked runs take the direct distance form, the unchunked one the expanded).
add_test(NAME loom-bench.knn_small
  COMMAND $<TARGET_FILE:loom-bench> knn --n 3000 --m 3000 --repeats 1 --limits 4MiB,16MiB)
set_tests_properties(loom-bench.knn_small PROPERTIES
  FAIL_REGULAR_EXPRESSION "DIFFER|did not run"
  ENVIRONMENT "${LOOM_TEST_ENV}")

# ---- loom-bench overhead and dot (issue 13): their command lines, and small runs whose results
# (and, for dot, measured peaks against the limits) the tool checks; their timings are not.
# loom_bench_test(NAME [RC code] ARGS a b ... [STDOUT_REGEX r] [STDERR_REGEX r])
function(loom_bench_test name)
  cmake_parse_arguments(PARSE_ARGV 1 T "" "RC;STDOUT_REGEX;STDERR_REGEX" "ARGS")
  if(NOT DEFINED T_RC)
    set(T_RC 0)
  endif()
  string(REPLACE ";" "|" joined "${T_ARGS}")
  set(defs -DTOOL=$<TARGET_FILE:loom-bench> -DWORK=${CMAKE_CURRENT_BINARY_DIR}/tool-tests/bench.${name}
    -DEXPECT_RC=${T_RC} "-DARGS=${joined}")
  foreach(key STDOUT_REGEX STDERR_REGEX)
    if(DEFINED T_${key})
      string(REPLACE ";" "@SEMICOLON@" value "${T_${key}}")
      list(APPEND defs "-D${key}=${value}")
    endif()
  endforeach()
  add_test(NAME loom-bench.${name} COMMAND ${CMAKE_COMMAND} ${defs} -P ${CMAKE_CURRENT_SOURCE_DIR}/tools/run_tool.cmake)
  set_tests_properties(loom-bench.${name} PROPERTIES TIMEOUT 120 ENVIRONMENT "${LOOM_TEST_ENV}")
endfunction()

loom_bench_test(overhead_help ARGS overhead --help
  STDOUT_REGEX "^usage: loom-bench overhead \\[--ops N\\] \\[--size E\\]" STDERR_REGEX "^$")
loom_bench_test(overhead_bad_ops RC 2 ARGS overhead --ops 0
  STDERR_REGEX "^loom-bench overhead: --ops '0': want a count from 1 to 1000000\n$")
loom_bench_test(overhead_bad_size RC 2 ARGS overhead --size 16x
  STDERR_REGEX "^loom-bench overhead: --size '16x': want elements from 1 to 2\\^24\n$")
loom_bench_test(overhead_missing_value RC 2 ARGS overhead --repeats
  STDERR_REGEX "^loom-bench overhead: option '--repeats' needs a value\nusage: loom-bench overhead")
loom_bench_test(overhead_unknown_option RC 2 ARGS overhead --bogus 1
  STDERR_REGEX "^loom-bench overhead: unknown option '--bogus'\nusage: loom-bench overhead")
loom_bench_test(overhead_one_piece RC 2 ARGS overhead --loop-n 16 --piece 16
  STDERR_REGEX "^loom-bench overhead: --piece 16 leaves fewer than 2 pieces of --loop-n 16\n$")
loom_bench_test(overhead_python_twice RC 2 ARGS overhead --python python3 --no-python
  STDERR_REGEX "^loom-bench overhead: give --python or --no-python, not both\n$")
loom_bench_test(overhead_missing_device RC 2 ARGS overhead --devices ocl9
  STDERR_REGEX "^loom-bench overhead: --devices ocl9: [^\n]*no device ocl9")
# A small chain on cpu0 (its result checked by the tool), no loop; a missing interpreter is a note.
loom_bench_test(overhead_small ARGS overhead --ops 50 --loop-n 0 --repeats 1 --devices cpu0
  --python ${CMAKE_CURRENT_BINARY_DIR}/no-such-python
  STDOUT_REGEX "\ncpu0 +[0-9.]+ us +[0-9.]+ us +-\n.*\nNumPy: not measured \\(no python3 with numpy: [^\n]*no-such-python\\)\n"
  STDERR_REGEX "^$")

# ---- loom-bench calls (issue 18): its command line, and a short chain of calls on cpu0 whose
# results (host and resident calls alike) and copies (none for resident calls) the tool checks.
loom_bench_test(calls_help ARGS calls --help
  STDOUT_REGEX "^usage: loom-bench calls \\[--calls N\\] \\[--size E\\]" STDERR_REGEX "^$")
loom_bench_test(calls_bad_calls RC 2 ARGS calls --calls 0
  STDERR_REGEX "^loom-bench calls: --calls '0': want a count from 1 to 10\\^8\n$")
loom_bench_test(calls_unknown_option RC 2 ARGS calls --bogus 1
  STDERR_REGEX "^loom-bench calls: unknown option '--bogus'\nusage: loom-bench calls")
loom_bench_test(calls_missing_device RC 2 ARGS calls --devices ocl9
  STDERR_REGEX "^loom-bench calls: --devices ocl9: [^\n]*no device ocl9")
loom_bench_test(calls_tiny ARGS calls --tiny --devices cpu0
  STDOUT_REGEX "\ncpu0 +[0-9.]+ us +[0-9.]+ us +0 B\n" STDERR_REGEX "^$")

loom_bench_test(dot_help ARGS dot --help STDOUT_REGEX "^usage: loom-bench dot \\[--dots LIST\\] \\[--fractions LIST\\]"
  STDERR_REGEX "^$")
loom_bench_test(dot_bad_dtype RC 2 ARGS dot --dots f16:10x10x10
  STDERR_REGEX "^loom-bench dot: --dots: 'f16:10x10x10': want DTYPE:MxKxN with DTYPE f32 or f64 and sizes from 1 to 1000000, as f64:1000x1200x1100\n$")
loom_bench_test(dot_bad_sizes RC 2 ARGS dot --dots f64:8x8x8,f64:10x10
  STDERR_REGEX "^loom-bench dot: --dots: 'f64:10x10': want DTYPE:MxKxN")
loom_bench_test(dot_bad_fraction RC 2 ARGS dot --fractions 0.5,1.5
  STDERR_REGEX "^loom-bench dot: --fractions: '1\\.5': want a fraction of the naive peak in \\(0, 1\\], as 0\\.5\n$")
loom_bench_test(dot_bad_repeats RC 2 ARGS dot --repeats 0
  STDERR_REGEX "^loom-bench dot: --repeats '0': want a count from 1 to 1000\n$")
loom_bench_test(dot_unknown_option RC 2 ARGS dot --limit 1MiB
  STDERR_REGEX "^loom-bench dot: unknown option '--limit'\nusage: loom-bench dot")
loom_bench_test(dot_missing_device RC 2 ARGS dot --device ocl9
  STDERR_REGEX "^loom-bench dot: --device ocl9: [^\n]*no device ocl9")
# Small dots under 0.9 of their naive peak: the tool fails unless each result equals the
# unconstrained run's and the measured peaks stay at or under the limit.
loom_bench_test(dot_small ARGS dot --dots f64:40x50x60,f32:64x32x48 --fractions 0.9 --repeats 1
  STDOUT_REGEX "dot f64\\[40,50\\] x f64\\[50,60\\] on cpu0: naive peak [0-9.]+ KiB[^\n]*\n[^\n]*\nunconstrained +none +1 +1 [^\n]* reference\n1\\.11x +[0-9.]+ KiB [^\n]* equal \\([^\n]*\n\ndot f32\\[64,32\\]"
  STDERR_REGEX "^$")
# --python names a program, run without a shell (issue 32): a value that a shell would have run
# ("echo 0.5 #" printed a NumPy time of 0.5 s) is a program that does not exist.
loom_bench_test(overhead_python_no_shell ARGS overhead --ops 5 --loop-n 0 --repeats 1 --devices cpu0
  "--python=echo 0.5 #"
  STDOUT_REGEX "\nNumPy: not measured \\(no python3 with numpy: echo 0\\.5 #\\)\n" STDERR_REGEX "^$")
loom_bench_test(calls_python_no_shell ARGS calls --calls 5 --size 8 --repeats 1 --devices cpu0
  "--python=echo 0.5 #"
  STDOUT_REGEX "\nNumPy: not measured \\(no python3 with numpy: echo 0\\.5 #\\)\n" STDERR_REGEX "^$")
# The per-piece figure of a loop (issue 13): the loop runs and its row has three figures.
loom_bench_test(overhead_loop ARGS overhead --ops 10 --loop-n 64 --piece 16 --repeats 1 --devices cpu0 --no-python
  STDOUT_REGEX "\ncpu0 +[0-9.]+ us +[0-9.]+ us +-?[0-9.]+ us\n" STDERR_REGEX "^$")
# The cpu backend against OpenBLAS and FFTW (issue 14): every row has both times and a ratio.
loom_bench_test(cpu_small ARGS cpu --n 64 --fft 4x64 --reps 1
  STDOUT_REGEX "sgemm 64\\^3, first in a process +[0-9.]+ +[0-9.]+ +[0-9.]+ [^\n]*\nsgemm 64\\^3, best of 1 +[0-9.]+ +[0-9.]+ +[0-9.]+ [^\n]*\nfft 4x64 c64, best of 1 +[0-9.]+ +[0-9.]+ +[0-9.]+"
  STDERR_REGEX "^$")
loom_bench_test(cpu_bad_fft ARGS cpu --fft 4y64 RC 2 STDERR_REGEX "^loom-bench cpu: --fft '4y64': want BxL")

# ---- loom-bench suite and compare (issue 19): a tiny suite on cpu0, its JSON checked against
# the report's schema, its SVG and compare of the report with itself; the figures are not.
add_test(NAME loom-bench.suite_tiny COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:loom-bench>
  -DWORK=${CMAKE_CURRENT_BINARY_DIR}/tool-tests/bench.suite_tiny -DDEVICE=cpu0
  -P ${CMAKE_CURRENT_SOURCE_DIR}/tools/check_bench_suite.cmake)
set_tests_properties(loom-bench.suite_tiny PROPERTIES TIMEOUT 120 ENVIRONMENT "${LOOM_TEST_ENV}")
# The same plot as a browser sees it, where Debian's chromium is installed (it is not among the
# dependencies: scripts/render-svg.sh says why). Every device found, so one roofline each.
find_program(LOOM_CHROMIUM NAMES chromium chromium-browser)
if(LOOM_CHROMIUM)
  add_test(NAME loom-bench.suite_svg_browser COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:loom-bench>
    -DCHROMIUM=${LOOM_CHROMIUM} -DRENDER=${PROJECT_SOURCE_DIR}/scripts/render-svg.sh
    -DWORK=${CMAKE_CURRENT_BINARY_DIR}/tool-tests/bench.suite_svg_browser
    -P ${CMAKE_CURRENT_SOURCE_DIR}/tools/check_bench_svg_browser.cmake)
  # clFFT frees with a size its allocation did not have: ASan's check is off for it, as in
  # tests/opencl.cmake.
  set_tests_properties(loom-bench.suite_svg_browser PROPERTIES TIMEOUT 180
    ENVIRONMENT "${LOOM_TEST_ENV};POCL_DEVICES=pthread pthread;ASAN_OPTIONS=new_delete_type_mismatch=0")
else()
  message(STATUS "chromium not found: loom-bench.suite_svg_browser (the plot in a browser) is not run")
endif()
loom_bench_test(suite_help ARGS suite --help
  STDOUT_REGEX "^usage: loom-bench suite \\[--quick\\] \\[--devices LIST\\] \\[--json FILE\\] \\[--plot FILE.svg\\]"
  STDERR_REGEX "^$")
loom_bench_test(suite_unknown_option RC 2 ARGS suite --fast
  STDERR_REGEX "^loom-bench suite: unknown option '--fast'\nusage: loom-bench suite")
loom_bench_test(suite_missing_value RC 2 ARGS suite --json
  STDERR_REGEX "^loom-bench suite: option '--json' needs a value\nusage: loom-bench suite")
loom_bench_test(suite_bad_reps RC 2 ARGS suite --reps 0
  STDERR_REGEX "^loom-bench suite: --reps '0': want a count from 1 to 64\n$")
loom_bench_test(suite_bad_cases RC 2 ARGS suite --tiny --cases gemm,rfftt
  STDERR_REGEX "^loom-bench suite: --cases: no case 'rfftt' \\(loom-bench suite --help lists them\\)\n$")
loom_bench_test(suite_reps_over_max RC 2 ARGS suite --tiny --reps 9 --max-reps 4
  STDERR_REGEX "^loom-bench suite: --reps 9 is more than --max-reps 4\nusage: loom-bench suite")
loom_bench_test(suite_missing_device RC 2 ARGS suite --tiny --devices ocl9
  STDERR_REGEX "^loom-bench suite: --devices ocl9: no such device here\n$")
# Every mode reads its numbers whole (issue 32: no atoi, no trailing garbage), says why a value
# is refused, and suggests the mode or option meant (issue 33).
loom_bench_test(hmm_size_zero RC 2 ARGS hmm --size 0
  STDERR_REGEX "^loom-bench hmm: --size '0': want a byte size of at least 1 B \\(123, 64KiB, 1\\.5GiB, 2GB\\)\n$")
loom_bench_test(knn_limit_zero RC 2 ARGS knn --limits 16MiB,0
  STDERR_REGEX "^loom-bench knn: --limits '0': want byte sizes of at least 1 B")
loom_bench_test(calibrate_reps_garbage RC 2 ARGS calibrate --reps 3x --no-save
  STDERR_REGEX "^loom-bench calibrate: --reps '3x': want a count from 1 to 100\n$")
loom_bench_test(kmv_d_garbage RC 2 ARGS kmv --d 3.5
  STDERR_REGEX "^loom-bench kmv: --d '3\\.5': want dimensions from 1 to 64\n$")
loom_bench_test(blas_repeat_garbage RC 2 ARGS blas --repeat 2x
  STDERR_REGEX "^loom-bench blas: --repeat '2x': want a count from 1 to 1000\n$")
loom_bench_test(blas_size_zero RC 2 ARGS blas --sizes 256,0
  STDERR_REGEX "^loom-bench blas: --sizes '0': want sizes from 1 to 65536")
loom_bench_test(unknown_mode RC 2 ARGS overhaed
  STDERR_REGEX "^loom-bench: unknown mode 'overhaed' \\(did you mean 'overhead'\\?\\)\nusage: loom-bench MODE")
loom_bench_test(misspelled_option RC 2 ARGS knn --limit 1MiB
  STDERR_REGEX "^loom-bench knn: unknown option '--limit' \\(did you mean '--limits'\\?\\)\nusage: loom-bench knn")
loom_bench_test(mode_version ARGS suite --version STDOUT_REGEX "^loom-bench \\(Loom\\) [0-9]+\\.[0-9]+\\.[0-9]+\ncommit "
  STDERR_REGEX "^$")
loom_bench_test(compare_one_report RC 2 ARGS compare a.json
  STDERR_REGEX "^loom-bench compare: want two reports, A.json and B.json\nusage: loom-bench compare")
loom_bench_test(compare_bad_threshold RC 2 ARGS compare a.json b.json --threshold -1
  STDERR_REGEX "^loom-bench compare: --threshold '-1': want a fraction from 0 to 100, as 0.1\n$")
loom_bench_test(compare_bad_k RC 2 ARGS compare a.json b.json --k -3
  STDERR_REGEX "^loom-bench compare: --k '-3': want a number of MADs from 0 to 100, as 3\n$")
loom_bench_test(compare_bad_floor RC 2 ARGS compare a.json b.json --floor x
  STDERR_REGEX "^loom-bench compare: --floor 'x': want seconds from 0 to 3600, as 0.0001\n$")
loom_bench_test(compare_missing_file RC 1 ARGS compare @WORK@/none.json @WORK@/none.json
  STDERR_REGEX "^loom-bench compare: cannot read [^\n]*none.json\n$")
# Issue 14's benchmarks run at tiny sizes: the fused and unfused runs both finish under the limit
# and within 1e-4 of the float64 reference (kmv), or of the unconstrained run (attention).
loom_bench_test(kmv_small ARGS kmv --n 300 --repeats 1 --limit 1MiB
  STDOUT_REGEX "\n300 +fused +[0-9.]+ +[0-9.]+x [^\n]*\n300 +unfused " STDERR_REGEX "^$")
loom_bench_test(kmv_bad_limit ARGS kmv --limit lots RC 2 STDERR_REGEX "--limit")
loom_bench_test(attention_small ARGS attention --n 256 --limit 128KiB --repeats 1
  STDOUT_REGEX "\nunconstrained [^\n]*\nlimit [^\n]*\nlimit, unfused +[0-9.]+ " STDERR_REGEX "^$")
loom_bench_test(knn_l1_unfused ARGS knn --n 500 --m 600 --limits 256KiB --repeats 1 --metric l1 --no-rewrite fuse
  STDOUT_REGEX "kNN \\(L1\\)[^\n]*--no-rewrite fuse\n[^\n]*\nunchunked [^\n]* equal\n256.00 KiB [^\n]* equal" STDERR_REGEX "^$")

# Quantized parameters from their NumPy storage files, and a file of another dtype refused.
set(_quant ${CMAKE_CURRENT_SOURCE_DIR}/data/quant)
loom_tool_test(quantized_inputs ARGS ${LOOM_TOOL_DATA}/dequantize.lir --in q=${_quant}/q4_a1_q.npy
  --in s=${_quant}/q4_a1_s.npy --in q8v=${_quant}/q8_t_q.npy --in s8=${_quant}/q8_t_s.npy --out-dir @WORK@/out
  STDOUT_REGEX "d +f32\\[37,21\\]" EXPECT_FILES out/d.npy out/d8.npy)
loom_tool_test(quantized_input_bad_dtype RC 1 ARGS ${LOOM_TOOL_DATA}/dequantize.lir --in q=${_quant}/q8_t_q.npy --random 1
  STDERR_REGEX "--in q=.*q8_t_q\\.npy: dtype i8 does not match parameter q: q4\\[37,21\\]")

# ---- --simulate: the planner and the scheduler against a platform file (issue 15) ------------
# kNN at 1e6 x 1e6 on the 1-CPU + 4-GPU example node: every GPU busy, the makespan within 15%
# of the printed lower bound (the acceptance; the ratio's digits are checked in tests/sched).
loom_tool_test(simulate_knn_1m ARGS ${LOOM_EXAMPLES}/knn_1m.lir --simulate ${LOOM_EXAMPLES}/platforms/1cpu-4gpu.json
  STDOUT_REGEX "policy dmda: [0-9]+ tasks, makespan [0-9.]+ s\nlower bound [0-9.]+ s .*makespan / lower bound: 1\\.(0[0-9]|1[0-4])[0-9]\n.*gpu3 +cuda +busy [0-9.]+ s .*link gpu0 <-> host"
  STDERR_REGEX "^$")
loom_tool_test(simulate_fixed ARGS ${LOOM_EXAMPLES}/knn.lir --simulate ${LOOM_EXAMPLES}/platforms/cpu-slow-opencl.json
  --policy fixed STDOUT_REGEX "policy fixed: .*cpu0 +cpu +busy")
# The shared runner's cut (loom_share_cut): the two towers are stages of their own, each on a
# GPU of its own at the same time, the join after them.
loom_tool_test(simulate_towers ARGS ${LOOM_EXAMPLES}/towers.lir --simulate ${LOOM_EXAMPLES}/platforms/1cpu-4gpu.json
  STDOUT_REGEX "3 stages, 3 tasks\n.*\n +gpu0 +cuda +busy [0-9.e-]+ s \\([0-9.]+%\\), [12] tasks\n +gpu1 +cuda +busy [0-9.e-]+ s \\([0-9.]+%\\), [12] tasks\n")
# The H200 node of docs/cuda.md (measured where it could be, estimated elsewhere): a graph with
# a branch the GPU does best (a 4096^3 product) and one the host does (the sum of a 4 GiB matrix
# it holds, which the GPU would first have to receive) puts one on each device; --devices cuda0
# simulates the GPU alone, which takes the 4 GiB over PCIe.
loom_tool_test(simulate_gpu_and_host ARGS ${LOOM_EXAMPLES}/gpu_and_host.lir
  --simulate ${LOOM_EXAMPLES}/platforms/h200-node.json --devices cpu0,cuda0
  STDOUT_REGEX "2 stages, 2 tasks\n.*\n +cpu0 +cpu +busy [0-9.e-]+ s \\([0-9.]+%\\), 1 tasks\n +cuda0 +cuda +busy [0-9.e-]+ s \\([0-9.]+%\\), 1 tasks\n  link cuda0 <-> host: 128\\.00 MiB moved")
loom_tool_test(simulate_gpu_alone ARGS ${LOOM_EXAMPLES}/gpu_and_host.lir
  --simulate ${LOOM_EXAMPLES}/platforms/h200-node.json --devices cuda0
  STDOUT_REGEX "1 stages, 1 tasks\n.*\n +cuda0 +cuda +busy [0-9.e-]+ s \\([0-9.]+%\\), 1 tasks\n  link cuda0 <-> host: 4\\.13 GiB moved")
loom_tool_test(simulate_devices_unknown RC 2 ARGS ${LOOM_EXAMPLES}/knn.lir
  --simulate ${LOOM_EXAMPLES}/platforms/h200-node.json --devices cpu0,gpu0
  STDERR_REGEX "^loom-run: --devices: platform: 'gpu0' in 'cpu0,gpu0' is none of its devices\n$")
loom_tool_test(simulate_bad_policy RC 2 ARGS ${LOOM_EXAMPLES}/knn.lir
  --simulate ${LOOM_EXAMPLES}/platforms/cpu-slow-opencl.json --policy heft
  STDERR_REGEX "loom-run: --policy 'heft': want dmda, eager or fixed")
# --policy without --simulate is a real run (on --devices auto): it needs its inputs.
loom_tool_test(policy_real_run RC 2 ARGS ${LOOM_EXAMPLES}/knn.lir --policy dmda
  STDERR_REGEX "loom-run: missing inputs: x, y")
loom_tool_test(simulate_missing_platform RC 1 ARGS ${LOOM_EXAMPLES}/knn.lir --simulate @WORK@/none.json
  STDERR_REGEX "loom-run: .*none\\.json: No such file")

# loom-bench calibrate measures every op class on cpu0 and fits its model (printed, not saved:
# the shared test cache keeps no model from a test).
loom_bench_test(calibrate_cpu0_quick ARGS calibrate --quick --reps 1 --devices cpu0 --no-save
  STDOUT_REGEX "^cpu0 .*\n +gemm +latency [0-9.e+-]+ s, [0-9.e+-]+ units/s, 3 points.*\n +copy +latency"
  STDERR_REGEX "^$")
loom_bench_test(calibrate_no_device RC 2 ARGS calibrate --devices ocl9 --no-save
  STDERR_REGEX "^loom-bench calibrate: --devices ocl9: no such device here\n$")
# --simulate here and loom-info --platform: this machine's devices with the models calibrated
# on it (tests/tools/simulate_here.cmake says what is checked).
if(LOOM_HAVE_OPENCL)
  add_test(NAME loom-run.simulate_here COMMAND ${CMAKE_COMMAND} -DRUN=$<TARGET_FILE:loom-run>
    -DINFO=$<TARGET_FILE:loom-info> -DBENCH=$<TARGET_FILE:loom-bench> -DTOWERS=${LOOM_EXAMPLES}/towers.lir
    -DWORK=${CMAKE_CURRENT_BINARY_DIR}/tool-tests/simulate_here -P ${CMAKE_CURRENT_SOURCE_DIR}/tools/simulate_here.cmake)
  # clFFT's plan destructor deletes through the wrong type (its own bug, as in tests/opencl.cmake).
  set_tests_properties(loom-run.simulate_here PROPERTIES TIMEOUT 180
    ENVIRONMENT "${LOOM_TEST_ENV};ASAN_OPTIONS=new_delete_type_mismatch=0")
endif()
loom_tool_test(simulate_stats_json ARGS ${LOOM_EXAMPLES}/knn.lir --simulate ${LOOM_EXAMPLES}/platforms/cpu-slow-opencl.json
  --stats-json @WORK@/sched.json STDOUT_REGEX "policy dmda" EXPECT_FILES sched.json)

# ---- several devices at once (issue 15, loom/share.h) ------------------------------------------
# --devices: a device the machine lacks or one named twice is a usage error; on cpu0 alone the
# shared runner runs the graph as a plan (nothing to share).
loom_tool_test(devices_unknown RC 2 ARGS ${knn_small} --random 1 --devices cpu0,cpu9
  STDERR_REGEX "loom-run: devices 'cpu0,cpu9': .*cpu9.* \\(did you mean 'cpu0'\\?\\)\n$")
loom_tool_test(devices_twice RC 2 ARGS ${knn_small} --random 1 --devices cpu0,cpu0
  STDERR_REGEX "named twice")
loom_tool_test(devices_cpu0 ARGS ${knn_small} --random 1 --devices cpu0 --policy eager --out-dir @WORK@/out
  --stats-json @WORK@/stats.json
  STDOUT_REGEX "knn: ran on cpu0 \\(cpu0, policy eager\\) .*\n.*device cpu0 +busy +[0-9.]+ s"
  KNN_CHECK out=${knn_small} STATS_JSON stats.json DEVICES 1)
if(LOOM_HAVE_OPENCL)
  # PoCL's two devices share the kNN's loop (each takes ranges of its pieces, dmda and eager),
  # the neighbours brute force's; every piece is run once; the trace has a range lane per device.
  foreach(policy dmda eager)
    loom_tool_test(devices_ocl_${policy} ENV "POCL_DEVICES=pthread pthread" POCL_MEMORY_LIMIT=1
      ARGS ${knn_small} --random 1 --devices ocl0,ocl1 --policy ${policy} --out-dir @WORK@/out
      --stats-json @WORK@/stats.json --trace @WORK@/trace.json
      STDOUT_REGEX "ran on ocl0,ocl1 .*, 1 loops shared\n.*in [0-9]+ pieces of [0-9]+ \\(one loop\\).*device ocl0 .*device ocl1 "
      KNN_CHECK out=${knn_small} STATS_JSON stats.json DEVICES 2 TRACE trace.json)
  endforeach()
  # kernel_mv: the loop's stage makes two of its operands (the scalar 0.5, a reshape of the
  # norms), made on the host for the ranges; the sum over the loop's pieces within tolerance
  loom_tool_test(devices_ocl_kernel_mv ENV "POCL_DEVICES=pthread pthread" POCL_MEMORY_LIMIT=1
    ARGS ${LOOM_EXAMPLES}/kernel_mv.lir --random 1 --devices cpu0,ocl0,ocl1 --policy eager --out-dir @WORK@/out
    REF_ARGS ${LOOM_EXAMPLES}/kernel_mv.lir --random 1 --out-dir @WORK@/ref
    STDOUT_REGEX ", 1 loops shared\n" CLOSE out/out.npy=ref/out.npy)
  # --policy fixed: the plan's stages on their runners, one after another, nothing shared
  loom_tool_test(devices_ocl_fixed ENV "POCL_DEVICES=pthread pthread" POCL_MEMORY_LIMIT=1
    ARGS ${knn_small} --random 1 --devices ocl0,ocl1 --policy fixed --out-dir @WORK@/out
    --stats-json @WORK@/stats.json
    STDOUT_REGEX "ran on ocl0,ocl1 \\(ocl0,ocl1, policy fixed\\) .* 0 loops shared\n.*device ocl0 .* 0 pieces in +0 ranges +1 stages"
    KNN_CHECK out=${knn_small} STATS_JSON stats.json DEVICES 2 PIECES 0)
  # Two towers of dots joined at the end: cut by branch into three stages, a tower on each
  # device at once (dmda without models: a stage ready while the first device is busy goes to
  # the next; tests/share/test_branches.c covers eager). Without chunking: chunked for sharing,
  # the towers are one loop whose pieces both devices run.
  loom_tool_test(devices_ocl_towers ENV "POCL_DEVICES=pthread pthread" POCL_MEMORY_LIMIT=1
    ARGS ${LOOM_EXAMPLES}/towers.lir --random 1 --devices ocl0,ocl1 --no-rewrite chunk --out-dir @WORK@/out
    REF_ARGS ${LOOM_EXAMPLES}/towers.lir --random 1 --out-dir @WORK@/ref
    STDOUT_REGEX "in 3 stages, 0 loops shared\n.*device ocl0 .* [12] stages .*\n.*device ocl1 .* [12] stages "
    CLOSE out/s.npy=ref/s.npy)
  # --limit is every device's limit: the pieces fit it
  loom_tool_test(devices_ocl_limit ENV "POCL_DEVICES=pthread pthread" POCL_MEMORY_LIMIT=1
    ARGS ${knn_small} --random 1 --devices cpu0,ocl0,ocl1 --limit 4MiB --out-dir @WORK@/out
    --stats-json @WORK@/stats.json
    STDOUT_REGEX "device cpu0 .* limit +4\\.00 MiB .*device ocl0 .* limit +4\\.00 MiB"
    KNN_CHECK out=${knn_small} STATS_JSON stats.json DEVICES 3)
endif()

# The tools' man pages (issue 33): made by help2man from --help and --version, installed under
# share/man/man1, and `man` finds and renders each there.
if(LOOM_HELP2MAN AND TARGET loom_man)
  string(REPLACE ";" "|" loom_tools_joined "${LOOM_TOOLS}")
  add_test(NAME tools.man_pages COMMAND ${CMAKE_COMMAND} -DBINARY_DIR=${CMAKE_BINARY_DIR}
    -DWORK=${CMAKE_CURRENT_BINARY_DIR}/tool-tests/man "-DTOOLS=${loom_tools_joined}" -DVERSION=${PROJECT_VERSION}
    -P ${CMAKE_CURRENT_SOURCE_DIR}/tools/check_man.cmake)
  set_tests_properties(tools.man_pages PROPERTIES TIMEOUT 120)
endif()
