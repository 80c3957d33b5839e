# Prints the CTest name (<program>/<case>) of every doctest case the test programs' sources
# declare, one a line, without building them: `./mgpu test FILTER` refuses a FILTER that matches
# none of these and no program before it spends minutes building programs to list their cases.
# The sources of each program come from the map mgpu_doctest writes at configure time
# (build/<tree>/test_sources/<program>.txt); the sources are read now, so a case added since the
# last configure is seen.
# Run as: cmake -DMAP=<build tree>/test_sources -P this file.
cmake_minimum_required(VERSION 3.20)
file(GLOB maps ${MAP}/*.txt)
# One C++ string literal; a case name is one or several of them side by side (clang-format splits
# a long name over lines).
set(literal "\"([^\"\\\\]|\\\\.)*\"")
foreach(map IN LISTS maps)
  get_filename_component(program ${map} NAME_WE)
  file(STRINGS ${map} sources)
  foreach(source IN LISTS sources)
    if(NOT EXISTS "${source}")
      continue()
    endif()
    file(READ "${source}" text)
    string(REGEX MATCHALL "TEST_CASE\\([ \t\r\n]*(${literal}[ \t\r\n]*)+" cases "${text}")
    foreach(case IN LISTS cases)
      string(REGEX MATCHALL "${literal}" pieces "${case}")
      set(name "")
      foreach(piece IN LISTS pieces)
        string(REGEX REPLACE "^\"(.*)\"$" "\\1" piece "${piece}")
        string(APPEND name "${piece}")
      endforeach()
      string(REPLACE "\\\"" "\"" name "${name}")
      message("${program}/${name}")
    endforeach()
  endforeach()
endforeach()
