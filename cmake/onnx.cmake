# ONNX models read into the IR (src/onnx/, docs/onnx.md). The protobuf reader is generated at
# build time by protoc-c from the vendored onnx.proto (Debian's protobuf-c-compiler and
# libprotobuf-c-dev): no hand-written protobuf decoder. Included by the top-level
# CMakeLists.txt after loom_objects, loom and loom_static exist, so the sources and the library
# are added to those targets here.
pkg_check_modules(PROTOBUF_C REQUIRED IMPORTED_TARGET libprotobuf-c)
find_program(LOOM_PROTOC_C protoc-c REQUIRED)

# Written under generated/onnx/ so the sources include "onnx/onnx.pb-c.h", a path of their
# own module (scripts/check-layers.sh).
set(LOOM_ONNX_GEN ${CMAKE_CURRENT_BINARY_DIR}/generated/onnx)
add_custom_command(
  OUTPUT ${LOOM_ONNX_GEN}/onnx.pb-c.c ${LOOM_ONNX_GEN}/onnx.pb-c.h
  COMMAND ${CMAKE_COMMAND} -E make_directory ${LOOM_ONNX_GEN}
  COMMAND ${LOOM_PROTOC_C} --proto_path=${CMAKE_CURRENT_SOURCE_DIR}/src/onnx --c_out=${LOOM_ONNX_GEN} onnx.proto
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/onnx/onnx.proto
  COMMENT "protoc-c: src/onnx/onnx.proto")
# protoc-c's own code is not held to Loom's warnings.
set_source_files_properties(${LOOM_ONNX_GEN}/onnx.pb-c.c PROPERTIES COMPILE_OPTIONS "-w")

file(GLOB LOOM_ONNX_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/onnx/*.c)
target_sources(loom_objects PRIVATE ${LOOM_ONNX_SOURCES} ${LOOM_ONNX_GEN}/onnx.pb-c.c)
target_link_libraries(loom_objects PRIVATE PkgConfig::PROTOBUF_C)
target_link_libraries(loom PRIVATE PkgConfig::PROTOBUF_C)
target_link_libraries(loom_static PRIVATE $<BUILD_INTERFACE:PkgConfig::PROTOBUF_C>
  INTERFACE $<INSTALL_INTERFACE:protobuf-c>)
# loom.pc (cmake/package.cmake): libprotobuf-c ships a .pc file of its own.
if(LOOM_PC_REQUIRES_PRIVATE)
  string(APPEND LOOM_PC_REQUIRES_PRIVATE ", libprotobuf-c")
else()
  set(LOOM_PC_REQUIRES_PRIVATE "libprotobuf-c")
endif()
