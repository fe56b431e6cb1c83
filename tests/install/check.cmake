# cmake -P script behind install.package (see tests/install.cmake).
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(LAST_OUT "${out}" PARENT_SCOPE)
endfunction()

# A sanitized Loom needs its users linked with the sanitizer runtimes too.
set(san_flags "")
if(SANITIZE)
  set(san_flags -fsanitize=address,undefined)
elseif(TSAN)
  set(san_flags -fsanitize=thread)
endif()
string(REPLACE ";" " " san_string "${san_flags}")

file(REMOVE_RECURSE ${WORK})
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})

# 1. find_package(Loom) + Loom::loom
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/embed -B ${WORK}/cmake-build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_C_COMPILER=${CC} "-DCMAKE_C_FLAGS=${san_string}"
    "-DCMAKE_EXE_LINKER_FLAGS=${san_string}")
run(${CMAKE_COMMAND} --build ${WORK}/cmake-build)
run(env LD_LIBRARY_PATH=${PREFIX}/lib ${WORK}/cmake-build/embed)
message("cmake package: ${LAST_OUT}")

# 2. pkg-config
find_program(CC NAMES cc gcc REQUIRED)
file(GLOB _pcdirs ${PREFIX}/lib*/pkgconfig)
run(env PKG_CONFIG_PATH=${_pcdirs} pkg-config --cflags --libs loom)
string(STRIP "${LAST_OUT}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
run(${CC} -std=c11 ${san_flags} ${SOURCE_DIR}/examples/embed/main.c -o ${WORK}/embed-pc ${flags})
file(GLOB _libdirs ${PREFIX}/lib*)
run(env LD_LIBRARY_PATH=${PREFIX}/lib:${PREFIX}/lib64 ${WORK}/embed-pc)
message("pkg-config: ${LAST_OUT}")

# 3. The Fortran module (`use loom`, Loom::loom_fortran), where this Loom was built with one:
#    the installed loom.mod and library, with the compiler Loom was built with.
if(FC)
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/fortran -B ${WORK}/fortran-build -G ${GENERATOR}
      -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_Fortran_COMPILER=${FC}
      "-DCMAKE_Fortran_FLAGS=${san_string}" "-DCMAKE_EXE_LINKER_FLAGS=${san_string}")
  run(${CMAKE_COMMAND} --build ${WORK}/fortran-build)
  run(env LD_LIBRARY_PATH=${PREFIX}/lib:${PREFIX}/lib64 ${WORK}/fortran-build/loom_fortran_example
      ${SOURCE_DIR}/examples/fortran/project.lir)
  message("fortran package: ${LAST_OUT}")
endif()
