# What a program that links the installed static archive must link besides (loom.pc,
# Loom::loom_static), from what the modules found. Included by the top CMakeLists.txt after
# cmake/opencl.cmake, cmake/cuda.cmake and cmake/mpi.cmake have added to LOOM_INSTALL_LIBS.
#
# No folder of this machine goes into either file: they are copied to other machines and
# prefixes. pkg-config: the dependencies that have a .pc file are Requires.private (their own
# .pc files say where they are and what they need: openblas.pc names its OpenMP build's folder);
# the others are plain -l names. CMake: plain names, except CUDA's runtime, which
# LoomConfig.cmake finds again on the user's machine (CUDA::cudart_static).

# Library name -> pkg-config module, for those Debian ships a .pc file for.
set(_loom_pc_module_openblas openblas)
set(_loom_pc_module_fftw3 fftw3)
set(_loom_pc_module_fftw3f fftw3f)
set(_loom_pc_module_hwloc hwloc)
set(_loom_pc_module_OpenCL OpenCL)
set(_loom_pc_module_clblast clblast)
set(_loom_pc_module_clFFT clFFT)

# CLBlast and clFFT are linked by the opencl backend when found (cmake/opencl.cmake).
if(LOOM_HAVE_OPENCL)
  list(PREPEND LOOM_INSTALL_LIBS OpenCL)
  if(LOOM_HAVE_CLBLAST)
    list(PREPEND LOOM_INSTALL_LIBS clblast)
  endif()
  if(LOOM_HAVE_CLFFT)
    list(PREPEND LOOM_INSTALL_LIBS clFFT)
  endif()
endif()
list(REMOVE_DUPLICATES LOOM_INSTALL_LIBS)

set(LOOM_PC_REQUIRES_PRIVATE "")
set(_loom_pc_libs "")
set(LOOM_CMAKE_INSTALL_LIBS "")
foreach(_lib ${LOOM_INSTALL_LIBS})
  if(DEFINED _loom_pc_module_${_lib})
    pkg_check_modules(_loom_pc_${_lib} QUIET ${_loom_pc_module_${_lib}})
  endif()
  if(DEFINED _loom_pc_module_${_lib} AND _loom_pc_${_lib}_FOUND)
    list(APPEND LOOM_PC_REQUIRES_PRIVATE ${_loom_pc_module_${_lib}})
  else()
    list(APPEND _loom_pc_libs -l${_lib})
  endif()
  if(_lib STREQUAL "cudart_static")
    list(APPEND LOOM_CMAKE_INSTALL_LIBS CUDA::cudart_static)
  else()
    list(APPEND LOOM_CMAKE_INSTALL_LIBS ${_lib})
  endif()
endforeach()
# OpenMP as a link flag, not a library: -fopenmp makes GCC link libgomp and clang its libomp
# from the folder only it knows (a clang-built archive needs __kmpc_*, a GCC-built one GOMP_*,
# which libomp provides too).
list(APPEND _loom_pc_libs -fopenmp)
list(APPEND LOOM_CMAKE_INSTALL_LIBS -fopenmp)
string(REPLACE ";" ", " LOOM_PC_REQUIRES_PRIVATE "${LOOM_PC_REQUIRES_PRIVATE}")
string(REPLACE ";" " " LOOM_PC_LIBS_PRIVATE "${_loom_pc_libs}")

set(LOOM_PC_NOTE "")
if(LOOM_HAVE_CUDA)
  # The toolkit ships no .pc file for its runtime, and its folder is this machine's.
  set(LOOM_PC_NOTE "# Static linking: the CUDA toolkit's lib folder (libcudart_static.a) must be on the
# linker's path (-L or LIBRARY_PATH).")
endif()
