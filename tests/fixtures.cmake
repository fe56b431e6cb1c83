# The committed .safetensors fixtures (tests/data/safetensors, tests/tools/data) are what
# make_fixtures.py, the independent standard-library-Python writer, makes. Checked only where
# a python3 is found: the other tests never need Python.
find_program(LOOM_TEST_PYTHON3 python3)
if(LOOM_TEST_PYTHON3)
  add_test(NAME safetensors_fixtures_current
    COMMAND ${CMAKE_COMMAND} -DPYTHON=${LOOM_TEST_PYTHON3} -DSRC=${CMAKE_SOURCE_DIR}
      -DWORK=${CMAKE_CURRENT_BINARY_DIR}/fixtures-check -P ${CMAKE_CURRENT_SOURCE_DIR}/data/safetensors/check_fixtures.cmake)
endif()
