# The plot of `loom-bench suite` as a browser sees it (issue 19): a tiny suite on every device
# found draws its SVG; headless Chromium parses it (no <parsererror>, one roofline group per
# device of the JSON report) and renders it to a PNG of the drawing's size.
#   cmake -DTOOL=loom-bench -DCHROMIUM=chromium -DRENDER=scripts/render-svg.sh -DWORK=dir
#         -P check_bench_svg_browser.cmake
cmake_minimum_required(VERSION 3.25)

function(fail msg)
  message(FATAL_ERROR "${msg}")
endfunction()

file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
execute_process(COMMAND "${TOOL}" suite --tiny --json ${WORK}/r.json --plot ${WORK}/r.svg
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  fail("suite exited ${rc}\n--- stdout:\n${out}\n--- stderr:\n${err}")
endif()
file(READ ${WORK}/r.json json)
string(JSON n_devices LENGTH "${json}" devices)

# --dump-dom prints the document Chromium built: the SVG's own elements, or an XHTML page with a
# <parsererror> saying where the XML broke. --no-sandbox: Chromium will not run as root with it.
execute_process(COMMAND "${CHROMIUM}" --headless --no-sandbox --disable-gpu --dump-dom
  file://${WORK}/r.svg RESULT_VARIABLE rc OUTPUT_VARIABLE dom ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR dom STREQUAL "")
  fail("${CHROMIUM} --dump-dom exited ${rc} and printed ${dom}\n--- stderr:\n${err}")
endif()
if(dom MATCHES "<parsererror")
  fail("Chromium could not parse the SVG:\n${dom}")
endif()
if(NOT dom MATCHES "^<svg xmlns=\"http://www.w3.org/2000/svg\"")
  string(SUBSTRING "${dom}" 0 300 head)
  fail("Chromium's document is not the SVG: ${head}")
endif()
string(REGEX MATCHALL "<g class=\"roofline\">" roofs "${dom}")
list(LENGTH roofs n_roofs)
string(REGEX MATCHALL "<g class=\"device\" id=\"device-[a-z0-9]+\">" panels "${dom}")
list(LENGTH panels n_panels)
if(NOT n_roofs EQUAL n_devices OR NOT n_panels EQUAL n_devices)
  fail("Chromium's document has ${n_panels} device panels and ${n_roofs} rooflines; the report has ${n_devices} devices")
endif()
# issue 33: each panel has a legend, its points numbered and keyed in a table under the plot
foreach(group legend point-numbers point-key ratios)
  string(REGEX MATCHALL "<g class=\"${group}\">" found "${dom}")
  list(LENGTH found n_found)
  if(NOT n_found EQUAL n_devices)
    fail("Chromium's document has ${n_found} <g class=\"${group}\"> for ${n_devices} devices")
  endif()
endforeach()
math(EXPR last "${n_devices} - 1")
foreach(i RANGE ${last})
  string(JSON id GET "${json}" devices ${i} id)
  if(NOT dom MATCHES "<g class=\"device\" id=\"device-${id}\">")
    fail("Chromium's document has no panel of ${id}")
  endif()
endforeach()

# The rendering: a PNG whose header (IHDR, bytes 16-23) holds the <svg>'s width and height.
execute_process(COMMAND sh ${RENDER} ${WORK}/r.svg ${WORK}/r.png
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  fail("render-svg.sh exited ${rc}\n${out}${err}")
endif()
file(READ ${WORK}/r.png png LIMIT 24 HEX)
if(NOT png MATCHES "^89504e470d0a1a0a")
  fail("${WORK}/r.png is not a PNG (${png})")
endif()
string(SUBSTRING "${png}" 32 8 w_hex)
string(SUBSTRING "${png}" 40 8 h_hex)
math(EXPR w "0x${w_hex}")
math(EXPR h "0x${h_hex}")
file(READ ${WORK}/r.svg svg LIMIT 400)
if(NOT svg MATCHES "<svg [^>]*width=\"([0-9]+)\" height=\"([0-9]+)\"")
  fail("the SVG has no width and height")
endif()
if(NOT w EQUAL CMAKE_MATCH_1 OR NOT h EQUAL CMAKE_MATCH_2)
  fail("the PNG is ${w} x ${h}, the SVG ${CMAKE_MATCH_1} x ${CMAKE_MATCH_2}")
endif()
file(SIZE ${WORK}/r.png png_bytes)
# a blank page of that size compresses to a few KiB; three panels of text and lines do not
math(EXPR least "${n_devices} * 20000")
if(png_bytes LESS least)
  fail("the PNG is ${png_bytes} bytes: Chromium drew next to nothing")
endif()
message(STATUS "${n_devices} devices, ${n_roofs} rooflines in Chromium's document, PNG ${w} x ${h} (${png_bytes} bytes)")
