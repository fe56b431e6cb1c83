# Shell-level tests of device discovery through loom-info (tests/devices/loom_info_check.cmake
# runs one scenario each), and the fake drivers they use: a libcuda.so.1 stand-in and an
# OpenCL ICD, so the CUDA and vendor OpenCL paths run on machines without those GPUs.
if(NOT TARGET loom-info)
  return()
endif()

set(LOOM_DEVICES_DIR ${CMAKE_CURRENT_SOURCE_DIR}/devices)
set(LOOM_FAKE_DIR ${CMAKE_CURRENT_BINARY_DIR}/fake-drivers)
set(LOOM_TOPOLOGIES ${CMAKE_CURRENT_SOURCE_DIR}/data/topologies)
find_program(LOOM_CLINFO clinfo)

# The fake NVIDIA driver: libcuda.so.1 in its own folder, for LD_LIBRARY_PATH.
add_library(loom_fake_cuda SHARED ${LOOM_DEVICES_DIR}/fake_cuda/fake_cuda.c)
set_target_properties(loom_fake_cuda PROPERTIES OUTPUT_NAME cuda PREFIX lib SUFFIX .so.1
  LIBRARY_OUTPUT_DIRECTORY ${LOOM_FAKE_DIR}/cuda)

# OCL_ICD_VENDORS folders: none, a broken entry, the fake driver.
file(MAKE_DIRECTORY ${LOOM_FAKE_DIR}/icd-empty ${LOOM_FAKE_DIR}/icd-broken ${LOOM_FAKE_DIR}/icd-fake)
file(WRITE ${LOOM_FAKE_DIR}/icd-broken/broken.icd "/nonexistent/libOpenCL-broken-vendor.so\n")
if(LOOM_HAVE_OPENCL)
  add_library(loom_fake_icd SHARED ${LOOM_DEVICES_DIR}/fake_opencl/fake_icd.c)
  target_include_directories(loom_fake_icd PRIVATE ${OpenCL_INCLUDE_DIRS})
  set_target_properties(loom_fake_icd PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${LOOM_FAKE_DIR}/icd)
  file(GENERATE OUTPUT ${LOOM_FAKE_DIR}/icd-fake/loom-fake.icd CONTENT "$<TARGET_FILE:loom_fake_icd>\n")
endif()

# The machine the PoCL tests see, whatever this one has: PoCL's two devices of 1 GiB as the
# only OpenCL platform, and the fake CUDA driver without a GPU in front of any real one.
file(GLOB pocl_icd /etc/OpenCL/vendors/pocl*.icd)
set(LOOM_POCL_TWO "POCL_DEVICES=pthread pthread" "POCL_MEMORY_LIMIT=1"
  "LD_LIBRARY_PATH=${LOOM_FAKE_DIR}/cuda" "LOOM_FAKE_CUDA_DEVICES=")
if(pocl_icd)
  file(MAKE_DIRECTORY ${LOOM_FAKE_DIR}/icd-pocl)
  file(COPY ${pocl_icd} DESTINATION ${LOOM_FAKE_DIR}/icd-pocl)
  list(APPEND LOOM_POCL_TWO "OCL_ICD_VENDORS=${LOOM_FAKE_DIR}/icd-pocl")
endif()
# The C test (tests/devices/*.c) sees the same machine.
if(TEST devices)
  set_property(TEST devices APPEND PROPERTY ENVIRONMENT ${LOOM_POCL_TWO})
endif()

# loom_info_test(CASE [env...])
function(loom_info_test case)
  add_test(NAME loom_info_${case}
    COMMAND ${CMAKE_COMMAND} -DLOOM_INFO=$<TARGET_FILE:loom-info> -DCASE=${case} -DCLINFO=${LOOM_CLINFO}
            -P ${LOOM_DEVICES_DIR}/loom_info_check.cmake)
  set_tests_properties(loom_info_${case} PROPERTIES ENVIRONMENT "${LOOM_TEST_ENV};${ARGN}"
    SKIP_REGULAR_EXPRESSION "SKIPPED: " TIMEOUT 120)
endfunction()

set(no_cuda "LD_LIBRARY_PATH=${LOOM_FAKE_DIR}/cuda" "LOOM_FAKE_CUDA_DEVICES=")
# PoCL's two devices are only Loom's where the opencl backend is built.
if(LOOM_HAVE_OPENCL)
  loom_info_test(json ${LOOM_POCL_TWO})
  loom_info_test(text ${LOOM_POCL_TWO})
  loom_info_test(select_ocl1 ${LOOM_POCL_TWO} "LOOM_DEVICES=ocl1")
endif()
loom_info_test(help)
loom_info_test(bad_flag)
loom_info_test(bad_selection "LOOM_DEVICES=cpu0,bogus")
# The cases that expect no GPU hide a real one behind the stand-in driver (${no_cuda}).
loom_info_test(no_platform ${no_cuda} "OCL_ICD_VENDORS=${LOOM_FAKE_DIR}/icd-empty")
add_test(NAME loom_info_broken_icd COMMAND ${CMAKE_COMMAND} -DLOOM_INFO=$<TARGET_FILE:loom-info> -DCASE=no_platform
  -P ${LOOM_DEVICES_DIR}/loom_info_check.cmake)
set_tests_properties(loom_info_broken_icd PROPERTIES
  ENVIRONMENT "${LOOM_TEST_ENV};${no_cuda};OCL_ICD_VENDORS=${LOOM_FAKE_DIR}/icd-broken" TIMEOUT 120)
loom_info_test(recorded_topology ${no_cuda} "HWLOC_XMLFILE=${LOOM_TOPOLOGIES}/2s-2numa-4gpu.xml"
  "OCL_ICD_VENDORS=${LOOM_FAKE_DIR}/icd-empty")
# The stand-in driver is only read by builds with CUDA discovery (not LOOM_CUDA=OFF).
if(_loom_cuda_discovery)
loom_info_test(fake_cuda_no_gpu ${no_cuda} "OCL_ICD_VENDORS=${LOOM_FAKE_DIR}/icd-empty")
loom_info_test(fake_cuda_failures ${LOOM_TEST_NO_PCI_LEAK} "LD_LIBRARY_PATH=${LOOM_FAKE_DIR}/cuda"
  "LOOM_FAKE_CUDA_DEVICES=0000:19:00.0,0000:87:00.0" "LOOM_FAKE_CUDA_FAIL=cuDeviceGetName:1"
  "OCL_ICD_VENDORS=${LOOM_FAKE_DIR}/icd-empty")
loom_info_test(fake_cuda_no_free_memory ${LOOM_TEST_NO_PCI_LEAK} "LD_LIBRARY_PATH=${LOOM_FAKE_DIR}/cuda"
  "LOOM_FAKE_CUDA_DEVICES=0000:19:00.0" "LOOM_FAKE_CUDA_FAIL=cuMemGetInfo"
  "OCL_ICD_VENDORS=${LOOM_FAKE_DIR}/icd-empty")
endif()
if(LOOM_HAVE_OPENCL AND _loom_cuda_discovery)
  loom_info_test(fake_gpus "LD_LIBRARY_PATH=${LOOM_FAKE_DIR}/cuda"
    "LOOM_FAKE_CUDA_DEVICES=0000:19:00.0,0000:87:00.0" "OCL_ICD_VENDORS=${LOOM_FAKE_DIR}/icd-fake"
    "HWLOC_XMLFILE=${LOOM_TOPOLOGIES}/2s-2numa-4gpu.xml")
endif()

# loom-info --models with an empty cache folder: every device listed, none with a model yet.
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/empty-model-cache)
add_test(NAME loom_info_models_none COMMAND loom-info --models)
set_tests_properties(loom_info_models_none PROPERTIES ENVIRONMENT
  "LOOM_CACHE_DIR=${CMAKE_CURRENT_BINARY_DIR}/empty-model-cache;LOOM_DEVICES=cpu0"
  PASS_REGULAR_EXPRESSION "^cpu0  [^\n]*\n  model [^\n]*empty-model-cache/models/[^\n]*\\.json\n    none yet: `loom-bench calibrate` measures one\n$")
