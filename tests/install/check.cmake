# cmake -P script behind install.package (see tests/install.cmake).
#
# Installs Loom, moves the installed tree to another folder (nothing may point back to where it
# was installed, nor to this build), and builds and runs against the moved tree, each step in a
# clean environment (env -i, PATH only: no LD_LIBRARY_PATH, PKG_CONFIG_PATH or CMAKE_PREFIX_PATH):
#   1. examples/embed through the CMake package, shared (Loom::loom) and static (Loom::loom_static);
#   2. examples/embed through pkg-config, shared and static (libloom.a, `--static`);
#   3. examples/fortran (Loom::loom_fortran), where Loom has the Fortran module;
#   4. examples/mpi under mpirun -np 2, through the CMake package (Loom::loom_mpi, and
#      Loom::loom_mpi_static) and pkg-config (loom-mpi), where Loom has MPI;
#   5. libloom.so needs no MPI, and the installed tools and libraries find what they need.
# A program finds libloom through its own RUNPATH (CMake's, or -Wl,-rpath as a pkg-config user
# passes it) and the installed libraries find each other through theirs ($ORIGIN).
cmake_minimum_required(VERSION 3.25) # if() compares quoted strings as strings
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "install.package: failed (${rc}): ${cmd}\n${out}\n${err}")
  endif()
  set(LAST_OUT "${out}" PARENT_SCOPE)
endfunction()

# The example's answer, y = sigmoid(A.x + b), printed by each build of examples/embed.
function(expect_embed what)
  if(NOT LAST_OUT MATCHES "y = \\[0\\.34299[0-9]*, 0\\.15446[0-9]*\\]")
    message(FATAL_ERROR "install.package: ${what}: the example printed '${LAST_OUT}'")
  endif()
  message("${what}: ${LAST_OUT}")
endfunction()

# A sanitized Loom needs its users linked with the sanitizer runtimes too, and its runtime's
# settings (suppressions) kept.
set(san_flags "")
set(san_env "")
if(SANITIZE)
  set(san_flags -fsanitize=address,undefined)
elseif(TSAN)
  set(san_flags -fsanitize=thread)
endif()
if(san_flags)
  foreach(v ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS)
    if(DEFINED ENV{${v}})
      list(APPEND san_env "${v}=$ENV{${v}}")
    endif()
  endforeach()
endif()
string(REPLACE ";" " " san_string "${san_flags}")

# PATH only: this cmake's folder first, then the system's.
get_filename_component(cmake_dir ${CMAKE_COMMAND} DIRECTORY)
set(clean env -i "PATH=${cmake_dir}:/usr/local/bin:/usr/bin:/bin" ${san_env})

file(REMOVE_RECURSE ${WORK})
set(installed ${WORK}/installed-here)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${installed})
file(RENAME ${installed} ${PREFIX})
file(GLOB libdir LIST_DIRECTORIES true ${PREFIX}/lib ${PREFIX}/lib64 ${PREFIX}/lib/*-linux-gnu)
list(FILTER libdir INCLUDE REGEX "/lib(64|/[^/]*-linux-gnu)?$")
foreach(d ${libdir})
  if(EXISTS ${d}/pkgconfig/loom.pc)
    set(pcdir ${d}/pkgconfig)
    set(libdir ${d})
    break()
  endif()
endforeach()

# 1. find_package(Loom): Loom::loom and Loom::loom_static
foreach(kind shared static)
  set(static OFF)
  if(kind STREQUAL "static")
    set(static ON)
  endif()
  run(${clean} ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/embed -B ${WORK}/cmake-${kind} -G ${GENERATOR}
      -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_C_COMPILER=${CC} -DLOOM_EXAMPLE_STATIC=${static}
      "-DCMAKE_C_FLAGS=${san_string}" "-DCMAKE_EXE_LINKER_FLAGS=${san_string}")
  run(${clean} ${CMAKE_COMMAND} --build ${WORK}/cmake-${kind})
  run(${clean} ${WORK}/cmake-${kind}/embed)
  expect_embed("cmake package, ${kind}")
endforeach()
run(${clean} ldd ${WORK}/cmake-static/embed)
if(LAST_OUT MATCHES "libloom")
  message(FATAL_ERROR "install.package: the static build loads a libloom:\n${LAST_OUT}")
endif()

# 2. pkg-config, as a Makefile would call it (the prefix's .pc folder given on the command
#    line, not through the environment). Shared: -Wl,-rpath to find libloom at run time.
#    Static: libloom.a by name (-l:libloom.a), with `--static` for what it needs.
set(pc ${clean} pkg-config --with-path=${pcdir})
run(${pc} --cflags --libs loom)
string(STRIP "${LAST_OUT}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
run(${clean} ${CC} -std=c11 ${san_flags} ${SOURCE_DIR}/examples/embed/main.c -o ${WORK}/embed-pc ${flags}
    -Wl,-rpath,${libdir})
run(${clean} ${WORK}/embed-pc)
expect_embed("pkg-config, shared")
run(${pc} --cflags --static --libs loom)
string(STRIP "${LAST_OUT}" flags)
string(REGEX REPLACE "(^| )-lloom( |$)" "\\1-l:libloom.a\\2" flags "${flags}")
separate_arguments(flags UNIX_COMMAND "${flags}")
if(CUDA_LIBDIR) # CUDA's runtime has no .pc: its folder is the user's to give, as loom.pc says
  list(APPEND flags -L${CUDA_LIBDIR})
endif()
run(${clean} ${CC} -std=c11 ${san_flags} ${SOURCE_DIR}/examples/embed/main.c -o ${WORK}/embed-pc-static ${flags})
run(${clean} ${WORK}/embed-pc-static)
expect_embed("pkg-config, static")

# 3. The Fortran module (`use loom`, Loom::loom_fortran), where this Loom was built with one:
#    the installed loom.mod and library, with the compiler Loom was built with.
if(FC)
  run(${clean} ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/fortran -B ${WORK}/fortran-build -G ${GENERATOR}
      -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_Fortran_COMPILER=${FC}
      "-DCMAKE_Fortran_FLAGS=${san_string}" "-DCMAKE_EXE_LINKER_FLAGS=${san_string}")
  run(${clean} ${CMAKE_COMMAND} --build ${WORK}/fortran-build)
  run(${clean} ${WORK}/fortran-build/loom_fortran_example ${SOURCE_DIR}/examples/fortran/project.lir)
  message("fortran package: ${LAST_OUT}")
endif()

# 4. MPI: libloom_mpi, under mpirun (as root it must be allowed; ranks on this machine only;
#    shared memory without the cross-memory attach containers refuse).
if(MPIEXEC)
  set(mpirun ${clean} ${MPIEXEC} -np 2 --oversubscribe --mca plm isolated --mca btl self,vader
      --mca btl_vader_single_copy_mechanism none)
  execute_process(COMMAND id -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(uid STREQUAL "0")
    list(APPEND mpirun --allow-run-as-root)
  endif()
  foreach(kind shared static)
    set(static OFF)
    if(kind STREQUAL "static")
      set(static ON)
    endif()
    run(${clean} ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/mpi -B ${WORK}/mpi-${kind} -G ${GENERATOR}
        -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_C_COMPILER=${CC} -DLOOM_EXAMPLE_STATIC=${static}
        "-DCMAKE_C_FLAGS=${san_string}" "-DCMAKE_EXE_LINKER_FLAGS=${san_string}")
    run(${clean} ${CMAKE_COMMAND} --build ${WORK}/mpi-${kind})
    run(${mpirun} ${WORK}/mpi-${kind}/loom_mpi_example)
    message("mpi, cmake package, ${kind}: ${LAST_OUT}")
  endforeach()
  run(${pc} --cflags --libs loom-mpi)
  string(STRIP "${LAST_OUT}" flags)
  separate_arguments(flags UNIX_COMMAND "${flags}")
  run(${clean} ${CC} -std=c11 ${san_flags} ${SOURCE_DIR}/examples/mpi/main.c -o ${WORK}/mpi-pc ${flags}
      -Wl,-rpath,${libdir})
  run(${mpirun} ${WORK}/mpi-pc)
  message("mpi, pkg-config: ${LAST_OUT}")
endif()

# 5. What the installed files load.
run(${clean} ldd ${libdir}/libloom.so)
if(LAST_OUT MATCHES "libmpi|not found")
  message(FATAL_ERROR "install.package: libloom.so loads MPI or misses a library:\n${LAST_OUT}")
endif()
message("ldd libloom.so: no MPI")
file(GLOB installed_elf ${libdir}/libloom*.so ${PREFIX}/bin/*)
foreach(f ${installed_elf})
  run(${clean} ldd ${f})
  if(LAST_OUT MATCHES "not found")
    message(FATAL_ERROR "install.package: ${f} misses a library from the moved prefix:\n${LAST_OUT}")
  endif()
endforeach()
run(${clean} ${PREFIX}/bin/loom-plan ${SOURCE_DIR}/examples/knn.lir --limit 8MiB)
message("installed loom-plan runs")
