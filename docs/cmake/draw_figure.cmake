# cmake -DTOOL=... -DARGS=a;b -DSVG=FILE -DIMPL=solution|student -P draw_figure.cmake: runs
# TOOL ARGS --svg FILE, its output in FILE.txt. A failure removes the half-drawn figure; it fails
# the build on the reference, and on the student tree leaves the page without the figure.
get_filename_component(dir ${SVG} DIRECTORY)
file(MAKE_DIRECTORY ${dir})
execute_process(COMMAND ${TOOL} ${ARGS} --svg ${SVG} OUTPUT_FILE ${SVG}.txt ERROR_FILE ${SVG}.txt
                RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  file(READ ${SVG}.txt said)
  file(REMOVE ${SVG})
  get_filename_component(name ${SVG} NAME)
  if(IMPL STREQUAL "student")
    message(STATUS "docs: ${name} needs chapter code that is not written yet; its page goes "
                   "without it")
  else()
    message(FATAL_ERROR "${said}docs: the figure ${name} failed: ${TOOL} ${ARGS} --svg ${SVG}")
  endif()
endif()
