# loom-bench compare's rules for reports whose runs came from several processes (suite
# --processes), on two reports written by bench_compare_processes.py, whose docstring says what
# each case stands for: a library sharing the case's speed per process clears a flag ("machine"),
# a witness that did not move in every process does not (SLOWER), a witness that did and a ratio
# that held does ("machine"), a run whose processes overlap the other's is not flagged ("noise"),
# and equal runs get no verdict. No timing: the same answer on any machine, at any load.
#   cmake -DTOOL=loom-bench -DPYTHON=/usr/bin/python3 -DGEN=bench_compare_processes.py -DWORK=dir
#         -P check_bench_compare_processes.cmake
cmake_minimum_required(VERSION 3.25)

file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
execute_process(COMMAND "${PYTHON}" "${GEN}" "${WORK}" RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${GEN} exited ${rc}: ${err}")
endif()
execute_process(COMMAND "${TOOL}" compare ${WORK}/a.json ${WORK}/b.json --fail-on-regression
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "compare exited ${rc}, not 1 (one case slower):\n${out}\n${err}")
endif()
# each case's verdict and the words that say why
foreach(want
    "fft \\| f32 \\| 1 \\| [^|]* \\| [^|]* \\| 1\\.51 \\| machine \\| the machine: Loom's time over its library's held run by run [^|]*processes 1\\.03-1\\.03 and 1\\.03-1\\.03\\)[^|]*B's fastest of 7 processes \\(median 45\\.4 us\\) > A's slowest of 7 \\(45\\.0 us\\)"
    "reduce_sum \\| f32 \\| 1 \\| [^|]* \\| [^|]* \\| 3\\.00 \\| SLOWER \\| [^|]*B's fastest of 7 processes \\(median 300\\.0 us\\) > A's slowest of 7 \\(100\\.0 us\\); its witness did not move so in every process \\(A 5\\.0 us-5\\.0 us, B 5\\.0 us-8\\.8 us\\)"
    "add \\| f32 \\| 1 \\| [^|]* \\| [^|]* \\| 1\\.50 \\| machine \\| the machine: Loom's time over its witness's held run by run \\(A 20\\.00, MAD 0\\.00; B 20\\.00, MAD 0\\.00; processes 20\\.00-20\\.00 and 20\\.00-20\\.00\\)"
    "topk \\| f32 \\| 1 \\| [^|]* \\| [^|]* \\| 1\\.40 \\| noise \\| within the noise: B's fastest 139\\.4 us > A's median 100\\.0 us [^|]*; B's fastest of 7 processes \\(median 140\\.0 us\\) <= A's slowest of 7 \\(150\\.0 us\\)"
    "latency \\| f32 \\| 1 \\| [^|]* \\| [^|]* \\| 1\\.00 \\|  \\|  \\|")
  if(NOT out MATCHES "\n\\| cpu0 \\| ${want}")
    message(FATAL_ERROR "compare did not print a row matching\n  ${want}\n---\n${out}\n${err}")
  endif()
endforeach()
if(NOT out MATCHES "\n1 slower, 0 faster beyond both runs' noise and 10%; 1 beyond 10% within the noise; 2 held against their library \\(the machine\\)\n")
  message(FATAL_ERROR "compare's tally:\n${out}")
endif()
