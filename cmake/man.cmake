# Man pages of the tools (issue 33): loom-run.1 and the others, made at build time by help2man
# (Debian's help2man) from each tool's own --help and --version, so a page never says other
# than the tool; installed under share/man/man1 (component "man"), so that `man loom-run` works
# after an install. Included once LOOM_TOOLS lists the tools.
#   LOOM_MAN_PAGES  the pages (build tree), for whoever packages them
#   loom_man        the target that makes them (part of `all`)
find_program(LOOM_HELP2MAN help2man)
set(LOOM_MAN_PAGES "")
if(NOT LOOM_HELP2MAN)
  message(STATUS "help2man not found: no man pages (scripts/install-deps.sh installs it)")
  return()
endif()
set(LOOM_MAN_DIR ${CMAKE_CURRENT_BINARY_DIR}/man/man1)
set(loom_man_name_loom-info "list the devices and memory nodes Loom finds on this machine")
set(loom_man_name_loom-plan "show a graph's memory estimate, its rewrites and its plan of stages")
set(loom_man_name_loom-run "run a Loom graph on real data under memory limits")
set(loom_man_name_loom-bench "measure devices with Loom beside their vendor libraries")
foreach(tool ${LOOM_TOOLS})
  set(page ${LOOM_MAN_DIR}/${tool}.1)
  set(name "${loom_man_name_${tool}}")
  if(NOT name)
    set(name "a Loom tool")
  endif()
  # --no-discard-stderr: a tool that printed its help on stderr would still get a page, and
  # help2man's check would be wrong; LOOM_LOG=warn keeps library notes out of the page.
  add_custom_command(OUTPUT ${page}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${LOOM_MAN_DIR}
    COMMAND ${CMAKE_COMMAND} -E env LOOM_LOG=warn ${LOOM_HELP2MAN} --no-info --section=1
      "--source=Loom ${PROJECT_VERSION}" "--name=${name}" --output=${page} $<TARGET_FILE:${tool}>
    DEPENDS ${tool} COMMENT "Writing the man page of ${tool}" VERBATIM)
  list(APPEND LOOM_MAN_PAGES ${page})
endforeach()
add_custom_target(loom_man ALL DEPENDS ${LOOM_MAN_PAGES})
install(FILES ${LOOM_MAN_PAGES} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT man)
