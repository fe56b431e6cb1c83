# The cuda backend through loom-run (issue 7, point 4): example and test graphs on cuda0 whole
# under 64 MiB (the kNN example under 256 MiB) and on the runners LOOM_MEM_LIMIT=cuda0:8MiB
# makes, each against the cpu backend's run, with every stage's measured peak at or under its
# limit and within 10% of its estimate (tests/tools/run_compare.cmake). Without a CUDA device
# they print "skipped: no CUDA device" and count as skipped. The op-by-op conformance suite on
# the CUDA devices is conformance.cuda (tests/conformance); the HMM's CUDA memory and the runtime
# are the test_cuda executable (tests/cuda/*.c).
if(NOT LOOM_HAVE_CUDA)
  return()
endif()

# No OpenCL platform: the tests are about CUDA, and loading PoCL costs each run a second.
set(_cuda_env "OCL_ICD_VENDORS=${CMAKE_CURRENT_BINARY_DIR}/no-opencl-vendors")
set(_cuda_examples ${CMAKE_SOURCE_DIR}/examples)
set(_cuda_data ${CMAKE_CURRENT_SOURCE_DIR})
# name|graph|whole-graph limit|extra definitions ('^'-separated -D options)
set(_cuda_graphs
  "knn|${_cuda_examples}/knn.lir|256MiB|-DKNN=ON"
  "dot_chain|${_cuda_examples}/dot_chain.lir|64MiB|"
  "conv_small|${_cuda_examples}/conv_small.lir|64MiB|"
  "kernel_mv|${_cuda_examples}/kernel_mv.lir|64MiB|-DRTOL=1e-3"
  "spectrum|${_cuda_examples}/spectrum.lir|64MiB|-DATOL=1e-5max^-DATOL_maxe=2e-6"
  "all_ops|${_cuda_data}/data/lir/all_ops.lir|64MiB|"
  "quant_ops|${_cuda_data}/data/lir/quant_ops.lir|64MiB|"
  "constants|${_cuda_data}/data/lir/constants.lir|64MiB|-DRUN_ONLY=ON"
  "ffts|${_cuda_data}/splitter/data/ffts.lir|64MiB|-DATOL=1e-5max"
  "knn_small|${_cuda_data}/tools/data/knn_small.lir|64MiB|-DKNN=ON"
  "bf16_out|${_cuda_data}/tools/data/bf16_out.lir|64MiB|-DRUN_ONLY=ON")

foreach(entry ${_cuda_graphs})
  string(REPLACE "|" ";" parts "${entry}")
  list(GET parts 0 name)
  list(GET parts 1 graph)
  list(GET parts 2 limit)
  list(LENGTH parts nparts)
  set(extra "")
  if(nparts GREATER 3)
    list(GET parts 3 extra)
    string(REPLACE "^" ";" extra "${extra}")
  endif()
  # tag|runners|LOOM_MEM_LIMIT
  foreach(config "cuda0|cuda0:${limit}|" "mem||cuda0:8MiB")
    string(REPLACE "|" ";" c "${config}")
    list(GET c 0 tag)
    list(GET c 1 runners)
    list(GET c 2 mem_limit)
    if(tag STREQUAL "mem" AND name STREQUAL "knn")
      continue() # the whole example, under 256 MiB, is the kNN case; 8 MiB chunks are thousands
    endif()
    set(mem_def "")
    if(mem_limit)
      set(mem_def -DMEM_LIMIT=${mem_limit})
    endif()
    set(test cuda.${name}.${tag})
    add_test(NAME ${test}
      COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:loom-run> -DHELPER=$<TARGET_FILE:loom-tool-helper>
        -DWORK=${CMAKE_CURRENT_BINARY_DIR}/cuda-tests/${name}.${tag} -DGRAPH=${graph} -DRUNNERS=${runners}
        ${mem_def} ${extra} -DKIND=cuda -P ${CMAKE_CURRENT_SOURCE_DIR}/tools/run_compare.cmake)
    set_tests_properties(${test} PROPERTIES TIMEOUT 600 SKIP_REGULAR_EXPRESSION "skipped: no CUDA device"
      ENVIRONMENT "${LOOM_TEST_ENV};${_cuda_env}")
  endforeach()
endforeach()

# The C tests (the test_cuda executable), in the same environment; and its one test that needs
# no GPU, against the stand-in driver of tests/devices.cmake (a device listed by the driver,
# refused by the CUDA runtime).
if(TEST cuda)
  set_tests_properties(cuda PROPERTIES ENVIRONMENT "${LOOM_TEST_ENV};${_cuda_env}")
  add_test(NAME cuda.fake_driver COMMAND test_cuda refused_by_the_runtime)
  # Prepended, not set: a machine whose libraries are found through LD_LIBRARY_PATH keeps them.
  set_tests_properties(cuda.fake_driver PROPERTIES TIMEOUT 120
    ENVIRONMENT "${LOOM_TEST_ENV};${_cuda_env};LOOM_FAKE_CUDA_DEVICES=0000:19:00.0;${LOOM_TEST_NO_PCI_LEAK}"
    ENVIRONMENT_MODIFICATION "LD_LIBRARY_PATH=path_list_prepend:$<TARGET_FILE_DIR:loom_fake_cuda>")
endif()
if(TARGET test_conformance)
  add_test(NAME conformance.cuda COMMAND test_conformance)
  set_tests_properties(conformance.cuda PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "${LOOM_TEST_ENV};${_cuda_env};LOOM_CONFORMANCE_DEVICES=cuda")
endif()
