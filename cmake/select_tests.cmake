# Which tests `./mgpu test FILTER` runs and what it builds first. The programs come from the map
# CMake writes when it configures a tree (build/<tree>/mgpu-tests.tsv, cmake/mgpu.cmake: one line
# per program, <name> TAB <kind> TAB <build target>, "-" for nothing to build); the cases from
# their sources (cmake/list_test_cases.cmake), so nothing is built to choose.
# A FILTER that matches program names selects those programs whole (`11_2`, `gpu`,
# `runtime|tools`); any other FILTER is matched against the cases' full names
# (`'11_5_pipeline/.*GPipe'`) and the programs declaring such a case are built. FILTER is a CMake
# regular expression, as CTest's -R is.
# Prints `regex <what ctest -R runs>` and `targets <target> ...`, one line each. When FILTER
# matches no program and no case it prints neither and lists the programs with their case counts.
# Run as: cmake -DTREE=build/<tree> -DFILTER=<regex> -P this file.
cmake_minimum_required(VERSION 3.20)

if(NOT EXISTS "${TREE}/mgpu-tests.tsv")
  message(FATAL_ERROR "${TREE}/mgpu-tests.tsv is missing; configure again: cmake --preset <tree>")
endif()
file(STRINGS "${TREE}/mgpu-tests.tsv" rows)
set(names "")
foreach(row IN LISTS rows)
  string(REGEX REPLACE "\t.*" "" name "${row}")
  list(APPEND names "${name}")
endforeach()

# The programs whose name FILTER matches.
set(programs "")
foreach(name IN LISTS names)
  if(name MATCHES "${FILTER}")
    list(APPEND programs "${name}")
  endif()
endforeach()

# <program>/<case> of every case the sources declare, into `declared`.
macro(read_declared_cases)
  execute_process(COMMAND "${CMAKE_COMMAND}" -DMAP=${TREE}/test_sources -P
                          "${CMAKE_CURRENT_LIST_DIR}/list_test_cases.cmake" ERROR_VARIABLE declared)
  string(REGEX REPLACE "\n$" "" declared "${declared}")
  string(REPLACE "\n" ";" declared "${declared}")
endmacro()

# Otherwise the programs of the cases FILTER matches: declared in the sources, or already known
# to CTest (a test that is not a doctest case is its program).
if(programs)
  list(JOIN programs "|" alternatives)
  set(regex "^(test_)?(${alternatives})(/|_NOT_BUILT-|$)")
else()
  set(regex "${FILTER}")
  read_declared_cases()
  execute_process(COMMAND ctest --test-dir "${TREE}" -N -R "${FILTER}" OUTPUT_VARIABLE listed)
  string(REGEX MATCHALL "Test +#[0-9]+: [^\n]*" listed "${listed}")
  list(TRANSFORM listed REPLACE "^Test +#[0-9]+: *" "")
  foreach(case IN LISTS declared listed)
    if(case MATCHES "${FILTER}")
      string(REGEX REPLACE "/.*" "" program "${case}")
      list(APPEND programs "${program}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES programs)
endif()

if(NOT programs)
  # The programs, with how many cases each declares when more than one.
  message("mgpu: test: '${FILTER}' matches no test program and no test case. The programs:")
  foreach(name IN LISTS names)
    set(count 0)
    foreach(case IN LISTS declared)
      if(case MATCHES "^([^/]*)/" AND CMAKE_MATCH_1 STREQUAL name)
        math(EXPR count "${count} + 1")
      endif()
    endforeach()
    string(LENGTH "${name}" length)
    math(EXPR pad "28 - ${length}")
    set(spaces "")
    if(pad GREATER 0)
      string(REPEAT " " ${pad} spaces)
    endif()
    if(count GREATER 1)
      message("  ${name}${spaces} ${count} cases")
    else()
      message("  ${name}${spaces} ")
    endif()
  endforeach()
  message("  (ctest --test-dir ${TREE} -N lists every case)")
  return()
endif()

# The build targets of the chosen programs ("-": a script, nothing to build).
set(targets "")
foreach(row IN LISTS rows)
  string(REPLACE "\t" ";" fields "${row}")
  list(GET fields 0 name)
  list(GET fields 2 target)
  if(name IN_LIST programs AND NOT target STREQUAL "-")
    list(APPEND targets "${target}")
  endif()
endforeach()
list(REMOVE_DUPLICATES targets)
list(SORT targets)
list(JOIN targets " " targets)
execute_process(COMMAND "${CMAKE_COMMAND}" -E echo "regex ${regex}")
execute_process(COMMAND "${CMAKE_COMMAND}" -E echo "targets ${targets}")
