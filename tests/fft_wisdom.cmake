# FFTW wisdom in the cache folder (src/backends/cpu/cpu_fft.h): loom-run measures a small batched
# fft with FFTW_MEASURE (LOOM_FFTW_MEASURE=1, the default outside the tests), which writes the
# f32 wisdom file of this CPU under LOOM_CACHE_DIR/fftw; a second run reads it back and gives the
# same result. Included from tests/CMakeLists.txt, and run as `cmake -P fft_wisdom.cmake` (TOOL,
# LIR, DIR) for the check itself.

if(CMAKE_SCRIPT_MODE_FILE)
  cmake_minimum_required(VERSION 3.25)
  file(REMOVE_RECURSE "${DIR}")
  file(MAKE_DIRECTORY "${DIR}")
  file(WRITE "${DIR}/fft.lir" "graph g(x: c64[8,64]) {\n  y = fft x axis=1\n  return y\n}\n")
  set(ENV{LOOM_CACHE_DIR} "${DIR}/cache")
  set(ENV{LOOM_FFTW_MEASURE} "1")
  foreach(pass first second)
    execute_process(COMMAND "${TOOL}" "${DIR}/fft.lir" --random 3 --devices cpu0 --out-dir "${DIR}/${pass}"
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "loom-run (${pass} run) failed with ${rc}:\n${out}\n${err}")
    endif()
    file(GLOB wisdom "${DIR}/cache/fftw/*.f32.wisdom")
    if(NOT wisdom)
      message(FATAL_ERROR "no f32 wisdom file in ${DIR}/cache/fftw after the ${pass} run")
    endif()
    file(READ "${wisdom}" text)
    if(NOT text MATCHES "fftwf_wisdom")
      message(FATAL_ERROR "${wisdom} is not FFTW wisdom:\n${text}")
    endif()
  endforeach()
  file(SHA256 "${DIR}/first/y.npy" a)
  file(SHA256 "${DIR}/second/y.npy" b)
  if(NOT a STREQUAL b)
    message(FATAL_ERROR "the run with the stored wisdom gave another result")
  endif()
  return()
endif()

if(TARGET loom-run)
  add_test(NAME fft_wisdom
           COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:loom-run> -DDIR=${CMAKE_CURRENT_BINARY_DIR}/fft_wisdom
                   -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(fft_wisdom PROPERTIES TIMEOUT 120 ENVIRONMENT "${LOOM_TEST_ENV}")
endif()
