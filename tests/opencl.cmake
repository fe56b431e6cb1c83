# The opencl backend through loom-run: every example and test graph on ocl0 and on ocl1 whole
# (--runners oclN:64MiB), split across both under 8 MiB each, and on the runners
# LOOM_MEM_LIMIT=ocl0:8MiB makes, each against the cpu backend's run with the measured peaks at
# or under the limits (tests/tools/run_compare.cmake).
# Without an OpenCL device the tests are skipped. The op-by-op conformance suite on the OpenCL
# devices is conformance.opencl (tests/conformance); the runtime on them is test_opencl.
if(NOT LOOM_HAVE_OPENCL)
  return()
endif()

# PoCL's two devices where PoCL is the platform (other drivers ignore these variables), and
# ASan told to let clFFT 2.12 be: its clfftDestroyPlan deletes a plan's action through a
# pointer to the wrong class (new-delete-type-mismatch inside libclFFT).
set(_ocl_env "POCL_DEVICES=pthread pthread;POCL_MEMORY_LIMIT=1;ASAN_OPTIONS=new_delete_type_mismatch=0")
set(_ocl_examples ${CMAKE_SOURCE_DIR}/examples)
set(_ocl_data ${CMAKE_CURRENT_SOURCE_DIR})
# name|graph|extra definitions ('^'-separated -D options). The kNN graphs check indices against
# brute force (-DKNN=ON): under 8 MiB the distance rewrite keeps the direct form, the cpu run
# without a limit expands it, and the two order near ties apart.
set(_ocl_graphs
  "conv_small|${_ocl_examples}/conv_small.lir|"
  "dot_chain|${_ocl_examples}/dot_chain.lir|"
  "kernel_mv|${_ocl_examples}/kernel_mv.lir|-DRTOL=1e-3"
  "spectrum|${_ocl_examples}/spectrum.lir|-DATOL=1e-5max^-DATOL_maxe=2e-6"
  "knn|${_ocl_examples}/knn.lir|-DKNN=ON"
  "all_ops|${_ocl_data}/data/lir/all_ops.lir|"
  "quant_ops|${_ocl_data}/data/lir/quant_ops.lir|"
  "comments|${_ocl_data}/data/lir/comments.lir|"
  "passthrough|${_ocl_data}/data/lir/passthrough.lir|"
  "constants|${_ocl_data}/data/lir/constants.lir|-DRUN_ONLY=ON"
  "fft_only|${_ocl_data}/splitter/data/fft_only.lir|-DATOL=1e-5max"
  "ffts|${_ocl_data}/splitter/data/ffts.lir|-DATOL=1e-5max"
  "knn_plan|${_ocl_data}/splitter/data/knn_plan.lir|-DKNN=ON"
  "knn_small|${_ocl_data}/tools/data/knn_small.lir|-DKNN=ON"
  "small|${_ocl_data}/tools/data/small.lir|"
  "bf16_out|${_ocl_data}/tools/data/bf16_out.lir|-DRUN_ONLY=ON")

foreach(entry ${_ocl_graphs})
  string(REPLACE "|" ";" parts "${entry}")
  list(GET parts 0 name)
  list(GET parts 1 graph)
  list(LENGTH parts nparts)
  set(extra "")
  if(nparts GREATER 2)
    list(GET parts 2 extra)
    string(REPLACE "^" ";" extra "${extra}")
  endif()
  # tag|runners|LOOM_MEM_LIMIT: "mem" runs on loom-run's default runners, the devices
  # LOOM_MEM_LIMIT names (issue 5), under ocl0's memory node limited to 8 MiB.
  foreach(config "ocl0|ocl0:64MiB|" "ocl1|ocl1:64MiB|" "split|ocl0:8MiB,ocl1:8MiB|" "mem||ocl0:8MiB")
    string(REPLACE "|" ";" c "${config}")
    list(GET c 0 tag)
    list(GET c 1 runners)
    list(GET c 2 mem_limit)
    set(mem_def "")
    if(mem_limit)
      set(mem_def -DMEM_LIMIT=${mem_limit})
    endif()
    set(test opencl.${name}.${tag})
    add_test(NAME ${test}
      COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:loom-run> -DHELPER=$<TARGET_FILE:loom-tool-helper>
        -DWORK=${CMAKE_CURRENT_BINARY_DIR}/opencl-tests/${name}.${tag} -DGRAPH=${graph} -DRUNNERS=${runners}
        ${mem_def} ${extra} -DKIND=opencl -P ${CMAKE_CURRENT_SOURCE_DIR}/tools/run_compare.cmake)
    set_tests_properties(${test} PROPERTIES TIMEOUT 300 SKIP_REGULAR_EXPRESSION "skipped: no OpenCL device"
      ENVIRONMENT "${LOOM_TEST_ENV};${_ocl_env}")
  endforeach()
endforeach()

# Three stages, ocl0 -> ocl1 -> ocl0: the values pass between the devices without the host.
add_test(NAME opencl.ffts.peer
  COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:loom-run> -DHELPER=$<TARGET_FILE:loom-tool-helper>
    -DWORK=${CMAKE_CURRENT_BINARY_DIR}/opencl-tests/ffts.peer -DGRAPH=${_ocl_data}/splitter/data/ffts.lir
    -DRUNNERS=ocl0:128KiB,ocl1:96KiB -DPEER=ON -DATOL=1e-5max -DKIND=opencl
    -P ${CMAKE_CURRENT_SOURCE_DIR}/tools/run_compare.cmake)
set_tests_properties(opencl.ffts.peer PROPERTIES TIMEOUT 300 SKIP_REGULAR_EXPRESSION "skipped: no OpenCL device"
  ENVIRONMENT "${LOOM_TEST_ENV};${_ocl_env}")

# loom-bench hmm at a small size: every path's data checked, and the two devices copy to each
# other without the host.
add_test(NAME opencl.bench_hmm COMMAND $<TARGET_FILE:loom-bench> hmm --size 1MiB --reps 1)
set_tests_properties(opencl.bench_hmm PROPERTIES TIMEOUT 120
  PASS_REGULAR_EXPRESSION "ocl0 +ocl1 +peer [^\n]*\nocl1 +ocl0 +peer"
  FAIL_REGULAR_EXPRESSION "loom-bench hmm: (ocl|cuda|host)[0-9]" SKIP_REGULAR_EXPRESSION "no device node to measure"
  ENVIRONMENT "${LOOM_TEST_ENV};${_ocl_env}")

# loom-bench calls on cpu0 and the OpenCL devices, a short chain: the tool checks every result and
# that the resident calls copy nothing (issue 18).
add_test(NAME opencl.bench_calls COMMAND $<TARGET_FILE:loom-bench> calls --tiny)
set_tests_properties(opencl.bench_calls PROPERTIES TIMEOUT 120
  PASS_REGULAR_EXPRESSION "\nocl0 +[0-9.]+ us +[0-9.]+ us +0 B\n" SKIP_REGULAR_EXPRESSION "no OpenCL device"
  FAIL_REGULAR_EXPRESSION "loom-bench calls: (cpu|ocl)[0-9]" ENVIRONMENT "${LOOM_TEST_ENV};${_ocl_env}")

# The runtime's tests (the test_opencl executable) and the conformance suite on the OpenCL
# devices, in the same environment.
if(TEST opencl)
  set_tests_properties(opencl PROPERTIES ENVIRONMENT "${LOOM_TEST_ENV};${_ocl_env}")
endif()
if(TARGET test_conformance)
  add_test(NAME conformance.opencl COMMAND test_conformance)
  set_tests_properties(conformance.opencl PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "${LOOM_TEST_ENV};${_ocl_env};LOOM_CONFORMANCE_DEVICES=opencl")
endif()
