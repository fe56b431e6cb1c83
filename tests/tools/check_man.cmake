# The man pages after an install (issue 33): installs the "man" component into WORK and asks
# `man` for each tool's page there: it must be found under share/man/man1, name the tool and
# its version, and carry the options of its --help.
#   cmake -DBINARY_DIR=... -DWORK=... -DTOOLS=loom-run;loom-plan;... -DVERSION=X.Y.Z -P check_man.cmake
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BINARY_DIR} --component man --prefix ${WORK}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "installing the man pages failed:\n${out}${err}")
endif()
find_program(MAN man REQUIRED)
string(REPLACE "|" ";" tools "${TOOLS}")
foreach(tool ${tools})
  if(NOT EXISTS ${WORK}/share/man/man1/${tool}.1)
    message(FATAL_ERROR "no ${WORK}/share/man/man1/${tool}.1 after the install")
  endif()
  # MANPATH: the installed tree only; MANWIDTH and no pager: plain text to compare.
  execute_process(COMMAND ${CMAKE_COMMAND} -E env MANPATH=${WORK}/share/man MANWIDTH=100 MANPAGER=cat PAGER=cat
    ${MAN} ${tool} RESULT_VARIABLE rc OUTPUT_VARIABLE page ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "man ${tool}: exit ${rc}\n${err}")
  endif()
  string(ASCII 8 backspace)
  string(REGEX REPLACE ".${backspace}" "" page "${page}") # overstrike bold and underline
  if(NOT page MATCHES "NAME\n +${tool} - " OR NOT page MATCHES "${VERSION}" OR NOT page MATCHES "--version")
    message(FATAL_ERROR "man ${tool} does not show the tool's name, version ${VERSION} and options:\n${page}")
  endif()
  message(STATUS "man ${tool}: found under ${WORK}/share/man/man1, ${VERSION}")
endforeach()
