# No file of src/ is over 1,000 lines (issue 29, acceptance 4): a room that size is read whole
# by a newcomer; past it the file is cut along its seams. Run with -DSOURCE=the tree.
file(GLOB_RECURSE files RELATIVE ${SOURCE} ${SOURCE}/src/*.c ${SOURCE}/src/*.h ${SOURCE}/src/*.cu
     ${SOURCE}/src/*.cl)
set(over "")
foreach(f ${files})
  # Each line, empty ones included, as wc -l counts them.
  file(READ ${SOURCE}/${f} text)
  string(REGEX MATCHALL "\n" newlines "${text}")
  list(LENGTH newlines lines)
  if(lines GREATER 1000)
    string(APPEND over "  ${f}: ${lines} lines\n")
  endif()
endforeach()
list(LENGTH files n)
if(NOT n GREATER 100)
  message(FATAL_ERROR "file sizes: found ${n} files under ${SOURCE}/src, expected the tree's hundreds")
endif()
if(over)
  message(FATAL_ERROR "file sizes: over 1,000 lines (cut them along their seams):\n${over}")
endif()
message(STATUS "file sizes: ${n} files of src/, none over 1,000 lines")
