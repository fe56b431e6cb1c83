# loom_version() (include/loom/version.h, src/core/version.c): the header's release numbers
# must be project(VERSION)'s, and the commit is read from git each time the library is built,
# written into the build tree only when it changed (so nothing recompiles after a plain
# rebuild). Included once loom_objects exists.
file(STRINGS ${CMAKE_CURRENT_SOURCE_DIR}/include/loom/version.h loom_version_lines
  REGEX "^#define LOOM_VERSION_(MAJOR|MINOR|PATCH) [0-9]+$")
string(REGEX REPLACE "[^;]*LOOM_VERSION_[A-Z]+ ([0-9]+)" "\\1" loom_header_version "${loom_version_lines}")
string(REPLACE ";" "." loom_header_version "${loom_header_version}")
if(NOT loom_header_version STREQUAL PROJECT_VERSION)
  message(FATAL_ERROR "include/loom/version.h says ${loom_header_version}, project(VERSION) ${PROJECT_VERSION}: "
    "make them agree")
endif()

set(LOOM_COMMIT_SOURCE ${CMAKE_CURRENT_BINARY_DIR}/generated/loom_commit.c)
add_custom_target(loom_commit
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR} -DOUT=${LOOM_COMMIT_SOURCE}
    -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/version_commit.cmake
  BYPRODUCTS ${LOOM_COMMIT_SOURCE}
  COMMENT "Reading the git commit for loom_version_commit()" VERBATIM)
target_sources(loom_objects PRIVATE ${LOOM_COMMIT_SOURCE})
add_dependencies(loom_objects loom_commit)
