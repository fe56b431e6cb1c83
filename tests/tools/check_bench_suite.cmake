# The test of `loom-bench suite` and `compare` (issue 19): a tiny suite on one device writes JSON
# and SVG; the JSON is checked against the report's schema (docs/bench.md, "JSON"), the SVG for
# one roofline per device; compare of the report with itself lists every case at 1.00, and
# against a changed copy flags what changed.
#   cmake -DTOOL=loom-bench -DWORK=dir -DDEVICE=cpu0 -P check_bench_suite.cmake
cmake_minimum_required(VERSION 3.25)

function(fail msg)
  message(FATAL_ERROR "${msg}")
endfunction()

# Sets the runs of case `index` of device 0 in the JSON text `var` to five of `seconds` (its
# seconds, min and median) and, with `side` (library or witness, not "-"), that side's runs to
# five of `side_seconds`: compare reads both the summary and the runs, pair by pair.
function(set_case_runs var index seconds side side_seconds)
  set(j "${${var}}")
  foreach(key seconds min median)
    string(JSON j SET "${j}" devices 0 cases ${index} ${key} ${seconds})
  endforeach()
  string(JSON j SET "${j}" devices 0 cases ${index} times "[${seconds}, ${seconds}, ${seconds}, ${seconds}, ${seconds}]")
  if(side STREQUAL "library")
    string(JSON j SET "${j}" devices 0 cases ${index} library_seconds ${side_seconds})
  endif()
  if(NOT side STREQUAL "-")
    set(t ${side_seconds})
    string(JSON j SET "${j}" devices 0 cases ${index} ${side}_times "[${t}, ${t}, ${t}, ${t}, ${t}]")
  endif()
  set(${var} "${j}" PARENT_SCOPE)
endfunction()
# Case 0's runs, and its library's unless `library` is "-".
function(set_runs var seconds library)
  set(j "${${var}}")
  if(library STREQUAL "-")
    set_case_runs(j 0 ${seconds} - -)
  else()
    set_case_runs(j 0 ${seconds} library ${library})
  endif()
  set(${var} "${j}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
execute_process(COMMAND "${TOOL}" suite --tiny --devices ${DEVICE} --json ${WORK}/r.json --plot ${WORK}/r.svg
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  fail("suite exited ${rc}\n--- stdout:\n${out}\n--- stderr:\n${err}")
endif()
if(NOT out MATCHES "\n## ${DEVICE}: [^\n]+\n.*\n\\| case \\| dtype \\| size \\| Loom \\|")
  fail("suite printed no table of ${DEVICE}:\n${out}")
endif()
file(READ ${WORK}/r.json json)

# ---- the schema ----
# Checks the type of json[path...]: TYPES is a '|' list of string(JSON TYPE) answers.
function(want types)
  string(JSON t ERROR_VARIABLE jerr TYPE "${json}" ${ARGN})
  if(jerr)
    fail("JSON: ${ARGN}: ${jerr}")
  endif()
  string(REPLACE "|" ";" allowed "${types}")
  if(NOT t IN_LIST allowed)
    fail("JSON: ${ARGN} is ${t}, want ${types}")
  endif()
endfunction()
function(get var)
  string(JSON v GET "${json}" ${ARGN})
  set(${var} "${v}" PARENT_SCOPE)
endfunction()

get(schema schema)
if(NOT schema STREQUAL "loom-bench-suite/2")
  fail("JSON: schema is '${schema}'")
endif()
foreach(key loom_version profile date commit build_type compiler)
  want(STRING ${key})
endforeach()
want(NUMBER reps)
want(NUMBER wall_seconds)
# the run's circumstances (issue 33): when, which build, which machine, threads, environment, load
get(date date)
if(NOT date MATCHES "^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9:]+Z$")
  fail("JSON: date '${date}'")
endif()
foreach(key cpu_model uarch isa flops_source)
  want(STRING machine ${key})
endforeach()
foreach(key flops_per_cycle_f32 flops_per_cycle_f64 cores pus)
  want(NUMBER machine ${key})
endforeach()
foreach(key openmp openblas cpus_in_affinity)
  want(NUMBER threads ${key})
endforeach()
want(OBJECT environment)
get(omp environment OMP_NUM_THREADS)
if(NOT omp STREQUAL "$ENV{OMP_NUM_THREADS}")
  fail("JSON: environment OMP_NUM_THREADS '${omp}', the test runs with '$ENV{OMP_NUM_THREADS}'")
endif()
foreach(key load_before load_after)
  want("ARRAY|NULL" ${key})
endforeach()
foreach(key min_samples max_samples target budget_seconds passes)
  want(NUMBER stop ${key})
endforeach()
foreach(key gflops_f32 gflops_f64 triad_gbps)
  want(NUMBER host_peaks ${key})
endforeach()
string(JSON n_devices LENGTH "${json}" devices)
if(NOT n_devices EQUAL 1)
  fail("JSON: ${n_devices} devices, want 1 (--devices ${DEVICE})")
endif()
get(id devices 0 id)
if(NOT id STREQUAL DEVICE)
  fail("JSON: the device is '${id}'")
endif()
foreach(key id vendor name driver runtime kind)
  want(STRING devices 0 ${key})
endforeach()
foreach(key compute_units clock_mhz)
  want(NUMBER devices 0 ${key})
endforeach()
foreach(key peak_gflops_f64 spec_gflops opencl_gflops opencl_gbps)
  want("NUMBER|NULL" devices 0 ${key})
endforeach()
foreach(peak peak_gflops peak_gbps)
  want("NUMBER|NULL" devices 0 ${peak})
  want("STRING|NULL" devices 0 ${peak}_source)
endforeach()

string(JSON n_cases LENGTH "${json}" devices 0 cases)
math(EXPR last "${n_cases} - 1")
set(names "")
foreach(i RANGE ${last})
  set(c devices 0 cases ${i})
  foreach(key name size dtype)
    want(STRING ${c} ${key})
  endforeach()
  get(name ${c} name)
  list(APPEND names ${name})
  want(NULL ${c} error)
  foreach(key seconds rate flops bytes)
    want(NUMBER ${c} ${key})
  endforeach()
  get(seconds ${c} seconds)
  if(NOT seconds GREATER 0)
    fail("JSON: ${name}: seconds ${seconds}")
  endif()
  # its runs and their spread: seconds is the median, at least 3 runs with --tiny
  foreach(key samples min median mad dispersion)
    want(NUMBER ${c} ${key})
  endforeach()
  get(n ${c} samples)
  string(JSON n_times LENGTH "${json}" ${c} times)
  get(median ${c} median)
  get(min ${c} min)
  if(n LESS 3 OR NOT n_times EQUAL n OR NOT median EQUAL seconds OR min GREATER median)
    fail("JSON: ${name}: ${n} samples, ${n_times} times, min ${min}, median ${median}, seconds ${seconds}")
  endif()
  get(unit ${c} unit)
  if(NOT unit MATCHES "^(GFLOP/s|GB/s|us)$")
    fail("JSON: ${name}: unit '${unit}'")
  endif()
  want("NUMBER|NULL" ${c} fraction_of_peak)
  # every case has a vendor ratio or says why not
  string(JSON lib_type TYPE "${json}" ${c} library)
  if(lib_type STREQUAL "STRING")
    want(NUMBER ${c} library_seconds)
    want(NUMBER ${c} ratio)
    want(NUMBER ${c} library_min)
    want(NUMBER ${c} library_mad)
    want(NULL ${c} reason)
    want(NULL ${c} witness)
  else()
    want(NULL ${c} ratio)
    want(STRING ${c} reason)
    # and, on cpu0 (OpenBLAS), a witness run alternately with it: as many runs as Loom's
    want(STRING ${c} witness)
    get(n_wit ${c} witness_samples)
    string(JSON n_wit_times LENGTH "${json}" ${c} witness_times)
    if(NOT n_wit EQUAL n OR NOT n_wit_times EQUAL n)
      fail("JSON: ${name}: ${n} runs, a witness of ${n_wit} samples and ${n_wit_times} times")
    endif()
  endif()
endforeach()
# min, median and MAD are those of the runs the report lists, recomputed here from `times`
find_program(PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(PYTHON3)
  execute_process(COMMAND ${PYTHON3} -c [=[
import json, statistics, sys
r = json.load(open(sys.argv[1]))
for c in r["devices"][0]["cases"]:
    for p in ("", "library_", "witness_"):
        t = c[p + "times"]
        if not t:
            continue
        med = statistics.median(t)
        mad = statistics.median(abs(x - med) for x in t)
        got = (c[p + "min"], c[p + "median"], c[p + "mad"])
        want = (min(t), med, mad)
        if c[p + "samples"] != len(t) or any(abs(g - w) > 1e-9 * max(1.0, w) for g, w in zip(got, want)):
            sys.exit("%s %s %s %s: min, median, MAD %s, from its times %s" % (p or "loom", c["name"], c["dtype"], c["size"], got, want))
]=] ${WORK}/r.json RESULT_VARIABLE prc ERROR_VARIABLE perr)
  if(NOT prc EQUAL 0)
    fail("JSON: ${perr}")
  endif()
endif()
foreach(name gemm fft fft_batched rfft reduce_sum add topk conv2d latency)
  if(NOT name IN_LIST names)
    fail("JSON: no ${name} case among ${names}")
  endif()
endforeach()

# ---- the plot ----
file(READ ${WORK}/r.svg svg)
string(REGEX MATCHALL "${DEVICE}: [^<]*roofline" rooflines "${svg}")
list(LENGTH rooflines n)
if(NOT svg MATCHES "^<\\?xml[^\n]*\n<svg xmlns=\"http://www.w3.org/2000/svg\"" OR NOT svg MATCHES "</svg>\n$" OR
   NOT n EQUAL 1)
  fail("SVG: want one roofline of ${DEVICE} in an <svg> document (${n})")
endif()
# the points' numbers do not overlap (issue 33: labels had run into unreadable clusters), each
# number keyed under the plot, and the panel has its legend
if(PYTHON3)
  execute_process(COMMAND ${PYTHON3} -c [=[
import sys, xml.etree.ElementTree as ET
ns = {"s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()
for panel in root.findall("s:g[@class='device']", ns):
    nums = panel.findall("s:g[@class='point-numbers']/s:text", ns)
    keys = panel.findall("s:g[@class='point-key']/s:text", ns)
    if panel.find("s:g[@class='legend']", ns) is None or len(keys) != len(nums) or not nums:
        sys.exit("%s: %d numbers, %d keys, legend %s" % (panel.get("id"), len(nums), len(keys), panel.find("s:g[@class='legend']", ns) is not None))
    boxes = [(float(t.get("x")), float(t.get("y")), len(t.text)) for t in nums]
    boxes = [(x, y - 8, x + 5.5 * n, y + 2, n) for x, y, n in boxes]
    for i, a in enumerate(boxes):
        for b in boxes[:i]:
            if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]:
                sys.exit("%s: numbers at %s and %s overlap" % (panel.get("id"), a[:2], b[:2]))
]=] ${WORK}/r.svg RESULT_VARIABLE prc ERROR_VARIABLE perr)
  if(NOT prc EQUAL 0)
    fail("SVG: ${perr}")
  endif()
endif()
find_program(XMLLINT xmllint)
if(XMLLINT)
  execute_process(COMMAND ${XMLLINT} --noout ${WORK}/r.svg RESULT_VARIABLE xrc ERROR_VARIABLE xerr)
  if(NOT xrc EQUAL 0)
    fail("SVG: not well-formed XML: ${xerr}")
  endif()
endif()

# ---- compare: the report with itself lists every case, B/A of each, no case in one only ----
execute_process(COMMAND "${TOOL}" compare ${WORK}/r.json ${WORK}/r.json --fail-on-regression
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCHALL "\n\\| ${DEVICE} \\| [a-z0-9_]+ \\| [a-z0-9]+ \\| [^\n]*\\| 1\\.00 \\|" rows "${out}")
list(LENGTH rows n_rows)
if(NOT rc EQUAL 0 OR NOT n_rows EQUAL n_cases OR out MATCHES "only in" OR
   NOT out MATCHES "\n0 slower, 0 faster beyond both runs' noise and 10%")
  fail("compare of a report with itself (exit ${rc}, ${n_rows} of ${n_cases} rows at 1.00):\n${out}\n${err}")
endif()

# ---- compare against a B with the first case gone and the second 1000 s long in every run: the
# first is listed as only in A, the second as slower with why, and --fail-on-regression exits 1 ----
string(JSON name0 GET "${json}" devices 0 cases 0 name)
string(JSON name1 GET "${json}" devices 0 cases 1 name)
string(JSON b REMOVE "${json}" devices 0 cases 0)
foreach(key seconds min median)
  string(JSON b SET "${b}" devices 0 cases 0 ${key} 1000)
endforeach()
# its runs too: compare judges a case with a library again by the runs' ratios to it
string(JSON b SET "${b}" devices 0 cases 0 times "[1000, 1000, 1000, 1000, 1000]")
file(WRITE ${WORK}/b.json "${b}")
execute_process(COMMAND "${TOOL}" compare ${WORK}/r.json ${WORK}/b.json --fail-on-regression
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1 OR NOT out MATCHES "\n\\| ${DEVICE} \\| ${name0} \\| [^\n]* \\| - \\| - \\| only in A \\|" OR
   NOT out MATCHES "\n\\| ${DEVICE} \\| ${name1} \\| [^\n]* \\| 1000000\\.000 ms \\| [0-9.]+ \\| SLOWER \\| B's fastest 1000000\\.000 ms > A's median " OR
   NOT out MATCHES "\n1 slower, 0 faster beyond both runs' noise")
  fail("compare with a changed B (exit ${rc}):\n${out}\n${err}")
endif()

# ---- a case five times slower in every run of B, but A's runs spread over more than that: within
# the noise, not flagged; with A's spread small, flagged; under --floor, not judged ----
set(a2 "${json}")
set_runs(a2 0.000001 0.000001)
string(JSON a2 SET "${a2}" devices 0 cases 0 mad 0.000002)
set(b2 "${a2}")
set_runs(b2 0.000005 -)
file(WRITE ${WORK}/a2.json "${a2}")
file(WRITE ${WORK}/b2.json "${b2}")
execute_process(COMMAND "${TOOL}" compare ${WORK}/a2.json ${WORK}/b2.json --fail-on-regression
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\n\\| ${DEVICE} \\| ${name0} \\| [^\n]* \\| 5\\.00 \\| noise \\| within the noise: B's fastest 5\\.0 us <= A's median 1\\.0 us \\+ 3 x MAD 2\\.0 us \\|")
  fail("compare of a case within A's noise (exit ${rc}):\n${out}\n${err}")
endif()
string(JSON a2 SET "${a2}" devices 0 cases 0 mad 0.0000001)
file(WRITE ${WORK}/a2.json "${a2}")
execute_process(COMMAND "${TOOL}" compare ${WORK}/a2.json ${WORK}/b2.json --fail-on-regression
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1 OR NOT out MATCHES "\n\\| ${DEVICE} \\| ${name0} \\| [^\n]* \\| 5\\.00 \\| SLOWER \\|")
  fail("compare of a case beyond A's noise (exit ${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND "${TOOL}" compare ${WORK}/a2.json ${WORK}/b2.json --floor 0.0001 --fail-on-regression
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\n\\| ${DEVICE} \\| ${name0} \\| [^\n]* \\| 5\\.00 \\| under the floor \\|")
  fail("compare --floor 0.0001 of a microsecond case (exit ${rc}):\n${out}\n${err}")
endif()

# ---- the first case (a GEMM, OpenBLAS beside it) five times slower in every run of B, and its
# library too: the machine's, not flagged; with the library unchanged, slower ----
set(a3 "${json}")
set_runs(a3 0.0001 0.0001)
string(JSON a3 SET "${a3}" devices 0 cases 0 mad 0.000001)
set(b3 "${a3}")
set_runs(b3 0.0005 0.0005)
file(WRITE ${WORK}/a3.json "${a3}")
file(WRITE ${WORK}/b3.json "${b3}")
execute_process(COMMAND "${TOOL}" compare ${WORK}/a3.json ${WORK}/b3.json --fail-on-regression
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\n\\| ${DEVICE} \\| ${name0} \\| [^\n]* \\| 5\\.00 \\| machine \\| the machine: Loom's time over its library's held run by run \\(A 1\\.00, MAD 0\\.00; B 1\\.00, MAD 0\\.00\\); B's fastest" OR
   NOT out MATCHES "; 1 held against their library \\(the machine\\)\n")
  fail("compare of a case whose library slowed as much (exit ${rc}):\n${out}\n${err}")
endif()
set_runs(b3 0.0005 0.0001)
file(WRITE ${WORK}/b3.json "${b3}")
execute_process(COMMAND "${TOOL}" compare ${WORK}/a3.json ${WORK}/b3.json --fail-on-regression
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1 OR NOT out MATCHES "\n\\| ${DEVICE} \\| ${name0} \\| [^\n]* \\| 5\\.00 \\| SLOWER \\|")
  fail("compare of a case slower beside an unchanged library (exit ${rc}):\n${out}\n${err}")
endif()

# ---- a case without a library (its witness beside it) five times slower with its witness: the
# machine's; with the witness unchanged, slower ----
set(wi -1)
math(EXPR last "${n_cases} - 1")
foreach(i RANGE ${last})
  string(JSON t TYPE "${json}" devices 0 cases ${i} witness)
  if(t STREQUAL "STRING" AND wi EQUAL -1)
    set(wi ${i})
  endif()
endforeach()
if(wi EQUAL -1)
  fail("no case with a witness in the report")
endif()
string(JSON wname GET "${json}" devices 0 cases ${wi} name)
set(a4 "${json}")
set_case_runs(a4 ${wi} 0.0001 witness 0.00001)
string(JSON a4 SET "${a4}" devices 0 cases ${wi} mad 0.0000001)
set(b4 "${json}")
set_case_runs(b4 ${wi} 0.0005 witness 0.00005)
file(WRITE ${WORK}/a4.json "${a4}")
file(WRITE ${WORK}/b4.json "${b4}")
execute_process(COMMAND "${TOOL}" compare ${WORK}/a4.json ${WORK}/b4.json --fail-on-regression
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\n\\| ${DEVICE} \\| ${wname} \\| [^\n]* \\| 5\\.00 \\| machine \\| the machine: Loom's time over its witness's held run by run \\(A 10\\.00, MAD 0\\.00; B 10\\.00, MAD 0\\.00\\)")
  fail("compare of a case whose witness slowed as much (exit ${rc}):\n${out}\n${err}")
endif()
set(b4 "${json}")
set_case_runs(b4 ${wi} 0.0005 witness 0.00001)
file(WRITE ${WORK}/b4.json "${b4}")
execute_process(COMMAND "${TOOL}" compare ${WORK}/a4.json ${WORK}/b4.json --fail-on-regression
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1 OR NOT out MATCHES "\n\\| ${DEVICE} \\| ${wname} \\| [^\n]* \\| 5\\.00 \\| SLOWER \\|")
  fail("compare of a case slower beside an unchanged witness (exit ${rc}):\n${out}\n${err}")
endif()

# ---- a report of the first schema names no machine: refused, unless --force ----
string(JSON old SET "${json}" schema "\"loom-bench-suite/1\"")
string(JSON old REMOVE "${old}" machine)
file(WRITE ${WORK}/old.json "${old}")
execute_process(COMMAND "${TOOL}" compare ${WORK}/old.json ${WORK}/r.json
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1 OR NOT err MATCHES "are not from the same machine: A names no machine \\(a report older than loom-bench-suite/2\\) \\(--force compares them anyway\\)\n$")
  fail("compare of a report without a machine (exit ${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND "${TOOL}" compare ${WORK}/old.json ${WORK}/r.json --force
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\n0 slower, 0 faster beyond both runs' noise")
  fail("compare --force of a report without a machine (exit ${rc}):\n${out}\n${err}")
endif()
