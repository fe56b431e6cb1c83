# The cpu backend's other code paths (issue 32): its vector kernels are compiled per x86-64
# level and the best the CPU has runs (src/backends/cpu/cpu_isa.h), so a machine with AVX-512
# never runs the AVX2 code that a Zen 3 runs, and results computed in another order there
# (FMA contraction, vector widths) would only fail on the other machine. Likewise OpenBLAS
# picks its kernels by CPU, and takes its Haswell ones on a CPU it does not know (Zen 5), where
# a GEMM cut into pieces rounds otherwise than whole: the comparisons that failed there failed
# here too with OPENBLAS_CORETYPE=Haswell. The cpu-heavy suites run again as an AVX2 machine
# would run them: Loom's kernels at x86-64-v3 (LOOM_CPU_ISA=avx2), OpenBLAS's Haswell kernels
# and glibc's libm and string functions without AVX-512 (GLIBC_TUNABLES). On a machine without
# AVX-512 these are the suites as they are. The OpenCL conformance suite compares PoCL with
# this cpu0.
set(_isa_avx2_env "LOOM_CPU_ISA=avx2;OPENBLAS_CORETYPE=Haswell;GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD")
set(_isa_pocl_env "POCL_DEVICES=pthread pthread;POCL_MEMORY_LIMIT=1;ASAN_OPTIONS=new_delete_type_mismatch=0")
# splitter: only its chunked runs compared with whole ones (the whole suite takes minutes).
foreach(module backends fused loops splitter conformance)
  if(TARGET test_${module})
    set(_name ${module}.isa_avx2)
    set(_args "")
    set(_env "${LOOM_TEST_ENV};${_isa_avx2_env}")
    if(module STREQUAL "splitter")
      set(_args recovery_loops)
    elseif(module STREQUAL "loops")
      set(_env "${_env};${_isa_pocl_env}")
    elseif(module STREQUAL "conformance")
      set(_name conformance.opencl.isa_avx2)
      set(_env "${_env};${_isa_pocl_env};LOOM_CONFORMANCE_DEVICES=opencl")
    endif()
    add_test(NAME ${_name} COMMAND test_${module} ${_args})
    set_tests_properties(${_name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 ENVIRONMENT "${_env}")
  endif()
endforeach()
# The setting itself: a value it does not take is named, not ignored.
if(TARGET loom-run)
  add_test(NAME isa.bad_setting COMMAND loom-run ${CMAKE_SOURCE_DIR}/examples/conv_small.lir --random 1)
  set_tests_properties(isa.bad_setting PROPERTIES ENVIRONMENT "${LOOM_TEST_ENV};LOOM_CPU_ISA=avx3"
    WILL_FAIL FALSE PASS_REGULAR_EXPRESSION "LOOM_CPU_ISA=avx3: expected native, avx2 or portable")
endif()
