# cmake -DMD_FILTER=... -DFIGURES=... -DDOCS_DIR=... -DSOURCE_DIR=docs -P build_site.cmake:
# Doxygen over the READMEs and headers (docs/Doxyfile), a fresh html/ each time so that no page of
# an older build lingers, then the part of MathJax the pages use copied beside them. Any Doxygen
# warning, and any Markdown Doxygen silently gave up on, fails it.
find_program(DOXYGEN doxygen)
if(NOT DOXYGEN)
  message(FATAL_ERROR "docs: doxygen not found: apt-get install doxygen (./mgpu docs does it)")
endif()
set(mathjax $ENV{MGPU_MATHJAX_DIR})
if(NOT mathjax)
  set(mathjax /usr/share/javascript/mathjax)
endif()
if(NOT EXISTS ${mathjax}/MathJax.js)
  message(FATAL_ERROR "docs: MathJax 2 not found in ${mathjax}: apt-get install libjs-mathjax "
                      "(or set MGPU_MATHJAX_DIR)")
endif()

file(REMOVE_RECURSE ${DOCS_DIR}/html)
file(MAKE_DIRECTORY ${DOCS_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} -E env MGPU_MD_FILTER=${MD_FILTER}
                        MGPU_DOCS_FIGURES=${FIGURES} ${DOXYGEN} Doxyfile
                WORKING_DIRECTORY ${SOURCE_DIR} RESULT_VARIABLE status
                OUTPUT_FILE ${DOCS_DIR}/doxygen.log ERROR_FILE ${DOCS_DIR}/doxygen.log)
if(NOT status EQUAL 0)
  file(READ ${DOCS_DIR}/doxygen.log log)
  message(FATAL_ERROR "${log}docs: Doxygen reported warnings (above); fix what they name")
endif()

# Markdown Doxygen gave up on (a table row with a code span opening on a quote, `'...`, for one)
# comes out as raw HTML around Doxygen's internal \ilinebr marker, without a warning.
file(GLOB pages ${DOCS_DIR}/html/*.html)
set(garbled)
foreach(page ${pages})
  file(STRINGS ${page} hits REGEX "ilinebr")
  if(hits)
    get_filename_component(name ${page} NAME)
    list(APPEND garbled ${name})
  endif()
endforeach()
if(garbled)
  message(FATAL_ERROR "docs: Doxygen could not parse the Markdown behind ${garbled} (look there "
                      "for \\ilinebr: the Markdown just before it is what to rewrite)")
endif()

# The part of MathJax 2 the pages use (TeX in, SVG out, the TeX font): 2 MB of Debian's 54.
foreach(part MathJax.js extensions jax/input/TeX jax/element jax/output/SVG/jax.js
             jax/output/SVG/config.js jax/output/SVG/autoload jax/output/SVG/fonts/TeX
             localization/en)
  get_filename_component(parent ${part} DIRECTORY)
  file(COPY ${mathjax}/${part} DESTINATION ${DOCS_DIR}/html/mathjax/${parent})
endforeach()
message(STATUS "docs: ${DOCS_DIR}/html/index.html")
