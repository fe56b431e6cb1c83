# Loom's libblas.so.3 (docs/blas.md): the reference BLAS and CBLAS ABI over Loom and the host
# BLAS, in a folder of its own (build/blas/, installed in ${CMAKE_INSTALL_LIBDIR}/loom-blas/)
# as Debian installs OpenBLAS's and BLIS's, so that LD_LIBRARY_PATH, LD_PRELOAD or
# update-alternatives put it under an unmodified program. It links libloom.so (the public API)
# and OpenBLAS, which it opens again by path for the routines it forwards.
file(GLOB LOOM_BLAS_SHIM_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/blas/*.c)
add_library(loom_blas_shim SHARED ${LOOM_BLAS_SHIM_SOURCES})
set_target_properties(loom_blas_shim PROPERTIES
  OUTPUT_NAME blas VERSION 3 SOVERSION 3
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/blas
  # Installed beside libloom's folder: ../ finds libloom.so.
  INSTALL_RPATH "$ORIGIN/..;${CMAKE_INSTALL_RPATH}")
target_include_directories(loom_blas_shim PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_link_libraries(loom_blas_shim PRIVATE loom ${LOOM_BLAS} Threads::Threads ${CMAKE_DL_LIBS} m)
install(TARGETS loom_blas_shim LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/loom-blas)
