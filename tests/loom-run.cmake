# loom-run's simulation and its real run place every stage alike (issue 29, acceptance 2):
# tests/loom-run/simulate_matches_run.cmake says how. On cpu0 with PoCL's two devices, where
# dmda keeps stages on cpu0 beside them; and on PoCL's two devices alone, where the branch cut's
# two towers go one to each device.
if(LOOM_HAVE_OPENCL)
  foreach(case "cpu0,ocl0,ocl1" "ocl0,ocl1")
    string(REPLACE "," "_" name "${case}")
    add_test(NAME loom-run.simulate_matches_run.${name} COMMAND ${CMAKE_COMMAND} -DRUN=$<TARGET_FILE:loom-run>
      -DBENCH=$<TARGET_FILE:loom-bench> -DGRAPH=${CMAKE_SOURCE_DIR}/examples/towers.lir -DDEVICES=${case}
      -DWORK=${CMAKE_CURRENT_BINARY_DIR}/tool-tests/simulate_matches_run_${name}
      -P ${CMAKE_CURRENT_SOURCE_DIR}/loom-run/simulate_matches_run.cmake)
    # clFFT's plan destructor deletes through the wrong type (its own bug, as in tests/opencl.cmake).
    set_tests_properties(loom-run.simulate_matches_run.${name} PROPERTIES TIMEOUT 300
      ENVIRONMENT "${LOOM_TEST_ENV};ASAN_OPTIONS=new_delete_type_mismatch=0")
  endforeach()
endif()
