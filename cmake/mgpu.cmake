# Course-wide CMake helpers. A chapter is one line in chapters/CMakeLists.txt:
#   mgpu_add_chapter(11_2_data_parallel)
# which builds its library from the impl chosen by MGPU_IMPL, its visible tests, and registers
# them with CTest under the chapter's name (so `ctest -R 11_2` runs just that chapter's cases).

# Warnings are errors only where the project checks itself (MGPU_WERROR: the ci, asan and tsan
# presets, which `./mgpu test --ci` uses). Everyone else, a student's newer compiler or a
# Gradescope image, gets the warnings without a failed build: a new compiler's new warning must
# not stop a course from running. Student skeletons are never strict: a stub that ignores its
# parameters, or half-finished student code, must still compile.
option(MGPU_WERROR "Treat warnings in the project's own code as errors" OFF)
if(MGPU_WERROR)
  set(MGPU_ERROR_FLAG -Werror)
  set(MGPU_CUDA_ERROR_FLAGS -Xcompiler=-Wall,-Wextra,-Werror --Werror=all-warnings)
else()
  set(MGPU_ERROR_FLAG "")
  set(MGPU_CUDA_ERROR_FLAGS -Xcompiler=-Wall,-Wextra)
endif()

function(mgpu_strict_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic ${MGPU_ERROR_FLAG}>)
endfunction()

function(mgpu_student_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-unused-variable>)
endfunction()

# mgpu_optimize_for_compile_time(target ...): -O1 without debug information, for code whose time
# goes into compiling it, not running it: the grader, the tools' and demos' command lines and JSON,
# the graded cases, and every test program (mgpu_doctest). The code they drive (the runtime, the
# chapter and lab libraries) keeps the build's -O2 -g, so a student still debugs their own code
# with line numbers. CLI11, nlohmann::json and doctest are header templates; a file that uses
# them compiles about twice as fast this way (GCC 12, here: a CLI11 user 19 s to 10 s, a JSON user
# 10 s to 5 s, a chapter's test file 7 s to 3.5 s), and a cold build has a hundred of them. Debug
# builds and sanitizer builds (whose reports need line numbers) keep their flags.
function(mgpu_optimize_for_compile_time)
  if(MGPU_SANITIZE)
    return()
  endif()
  foreach(target IN LISTS ARGN)
    target_compile_options(${target} PRIVATE $<$<NOT:$<CONFIG:Debug>>:-O1 -g0>)
  endforeach()
endfunction()

# mgpu_unity_build(target ...): compiles the target's sources eight to a translation unit, so the
# header templates they share (nlohmann::json, CLI11, fmt, doctest) are parsed once per eight
# files. For the targets of many such files: in a cold build here (GCC 12, two cores) the grader's
# library took 42 s of compiling instead of 83, its test program 35 instead of 82. The files of one
# target must keep their internal names apart (no two `namespace { ... run(...) }` alike), which
# the build then checks.
function(mgpu_unity_build)
  foreach(target IN LISTS ARGN)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endforeach()
endfunction()

# MGPU_SANITIZE=address (AddressSanitizer, UndefinedBehaviorSanitizer and LeakSanitizer) or
# thread (ThreadSanitizer) instruments everything built, for `./mgpu test --sanitize KIND`. The
# runtime runs every rank on its own thread and shares buffers between them, so a data race or a
# use-after-free there would make a student's result depend on scheduling.
set(MGPU_SANITIZE "" CACHE STRING "Build with sanitizers: empty, address or thread")
set_property(CACHE MGPU_SANITIZE PROPERTY STRINGS "" address thread)
if(MGPU_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
elseif(MGPU_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread)
  add_link_options(-fsanitize=thread)
elseif(NOT MGPU_SANITIZE STREQUAL "")
  message(FATAL_ERROR "MGPU_SANITIZE='${MGPU_SANITIZE}': use address, thread or leave it empty")
endif()

# One doctest main for every test program, compiled once.
add_library(mgpu_doctest_main STATIC ${PROJECT_SOURCE_DIR}/cmake/doctest_main.cpp)
target_link_libraries(mgpu_doctest_main PUBLIC doctest::doctest)
mgpu_optimize_for_compile_time(mgpu_doctest_main)  # doctest's runner: 12 s of compiling at -O2 -g
# The comparison core (testing/mgpu_test/mismatch.hpp): header-only and without doctest, so the
# grader's comparison links it as well as the tests, and both diagnose a mismatch alike.
add_library(mgpu_mismatch INTERFACE)
target_include_directories(mgpu_mismatch INTERFACE ${PROJECT_SOURCE_DIR}/testing)
# Shared test support (testing/mgpu_test/compare.hpp: check_close and friends) for every test.
target_link_libraries(mgpu_doctest_main PUBLIC mgpu_mismatch)

include(${doctest_DIR}/doctest.cmake)  # doctest_discover_tests, from the doctest package

# mgpu_doctest(NAME name SOURCES ... LIBS ... LABELS ... [TIMEOUT s] [RESOURCE_LOCK lock] [COST s]):
# a test
# program, test_<name>, whose every test case is its own CTest entry "<name>/<test case>", so a
# failure names its case, CTest spreads the cases over the cores and a slow case does not hold up
# the rest of its program. The cases are listed by running the program after each build
# (doctest_discover_tests); until its first build the program shows as one placeholder entry,
# test_<name>_NOT_BUILT-<hash>, which `./mgpu test` maps back to the program to build. LABELS,
# TIMEOUT (seconds per case, 300 unless given), RESOURCE_LOCK and COST apply to every case. COST
# (about how many seconds a case takes) lets CTest start the slow cases first on a fresh tree,
# before it has timings of its own, so they overlap the many quick ones instead of trailing them.
function(mgpu_doctest)
  cmake_parse_arguments(T "" "NAME;TIMEOUT;RESOURCE_LOCK;COST" "SOURCES;LIBS;LABELS" ${ARGN})
  set(program test_${T_NAME})
  add_executable(${program} ${T_SOURCES})
  target_link_libraries(${program} PRIVATE mgpu_doctest_main ${T_LIBS})
  mgpu_strict_warnings(${program})
  mgpu_optimize_for_compile_time(${program})
  # The program's sources, for cmake/list_test_cases.cmake: `./mgpu test FILTER` reads the case
  # names from them before anything is built.
  list(TRANSFORM T_SOURCES PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/ REGEX "^[^/]" OUTPUT_VARIABLE sources)
  list(JOIN sources "\n" sources)
  file(WRITE ${CMAKE_BINARY_DIR}/test_sources/${T_NAME}.txt "${sources}\n")
  set_property(GLOBAL APPEND PROPERTY MGPU_TEST_MAP "${T_NAME}\tdoctest\t${program}")
  add_custom_command(TARGET ${program} POST_BUILD
                     COMMAND ${CMAKE_COMMAND} -DPROGRAM=$<TARGET_FILE:${program}>
                             -P ${PROJECT_SOURCE_DIR}/cmake/check_test_names.cmake
                     VERBATIM)
  # --case-sensitive: a case runs by its exact name, which must not also select a case whose
  # name differs only in case.
  doctest_discover_tests(${program} TEST_PREFIX "${T_NAME}/"
                         EXTRA_ARGS --no-intro --force-colors=false --case-sensitive)
  # The properties go on in a script of our own, included after the discovered list: a list
  # value (LABELS a;b) does not survive doctest_discover_tests' PROPERTIES.
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  # A case run by its name that runs no test case was skipped by its skip decorator (no GPU, a
  # student tree): CTest says so rather than "Passed". check_test_names.cmake makes sure every
  # name selects exactly one case.
  set(properties "LABELS [==[${T_LABELS}]==] TIMEOUT ${T_TIMEOUT}"
                 " SKIP_REGULAR_EXPRESSION [==[\\[doctest\\] test cases: +0 \\|]==]")
  if(T_RESOURCE_LOCK)
    string(APPEND properties " RESOURCE_LOCK ${T_RESOURCE_LOCK}")
  endif()
  if(T_COST)
    string(APPEND properties " COST ${T_COST}")
  endif()
  set(script ${CMAKE_CURRENT_BINARY_DIR}/${program}_properties.cmake)
  file(WRITE ${script} "if(${program}_TESTS)\n"
                       "  set_tests_properties(\${${program}_TESTS} PROPERTIES ${properties})\n"
                       "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${script})
endfunction()

# Where the student build takes its chapter .cpp files from. The grader points this at a copy of
# a submission, so headers and tests always come from this tree and only the .cpp files differ.
set(MGPU_STUDENT_DIR ${PROJECT_SOURCE_DIR}/chapters CACHE PATH "Folder holding the student's chapter .cpp files")

# A chapter library's warnings: strict for the reference, the student's set otherwise. One place,
# since the chapters' precompiled header is used only under the very options it was built with.
function(mgpu_chapter_warnings target)
  if(MGPU_IMPL STREQUAL "solution")
    mgpu_strict_warnings(${target})
  else()
    mgpu_student_warnings(${target})
  endif()
endfunction()

# The chapters' precompiled header: the runtime's headers, Eigen and the standard library, which
# every chapter file includes and which take about a second of each compile (GCC 12: 11.4's
# tensor_parallel.cpp 2.9 s to 2.0 s, 11.6's checkpointing.cpp 2.2 s to 1.4 s). Built once per
# tree, by a library of its own that nothing links, and reused by every chapter library: each
# chaff the grader proves and each file a student changes compiles that much faster. No chapter's
# header is in it, so a chapter still sees only what it includes of the other chapters.
function(mgpu_chapter_pch target)
  if(NOT TARGET mgpu_chapter_pch)
    set(anchor ${CMAKE_BINARY_DIR}/mgpu_chapter_pch.cpp)
    file(CONFIGURE OUTPUT ${anchor} CONTENT "// the chapters' precompiled header is built here\n")
    add_library(mgpu_chapter_pch STATIC ${anchor})
    # The chapters' own options: GCC uses a precompiled header only under the same ones.
    target_include_directories(mgpu_chapter_pch PUBLIC ${PROJECT_SOURCE_DIR}/chapters)
    target_link_libraries(mgpu_chapter_pch PUBLIC mgpu_runtime)
    mgpu_chapter_warnings(mgpu_chapter_pch)
    target_precompile_headers(mgpu_chapter_pch PRIVATE
      <algorithm> <cmath> <cstddef> <cstdint> <span> <stdexcept> <string> <utility> <vector>
      <Eigen/Core>
      [["mgpu/check_args.hpp"]] [["mgpu/cluster.hpp"]] [["mgpu/model/layers.hpp"]]
      [["mgpu/not_implemented.hpp"]] [["mgpu/tensor.hpp"]])
  endif()
  target_precompile_headers(${target} REUSE_FROM mgpu_chapter_pch)
endfunction()

# mgpu_add_chapter(name [DEPENDS other_chapter...])
# Library mgpu_<name>: the chapter's .cpp files from chapters/<name> (student) or
# solutions/<name> (solution); headers always come from chapters/<name>, the contract.
# Tests: every chapters/<name>/tests/*.cpp in one program, test_<name>.
function(mgpu_add_chapter name)
  cmake_parse_arguments(C "" "" "DEPENDS" ${ARGN})
  if(MGPU_IMPL STREQUAL "solution")
    set(impl_dir ${PROJECT_SOURCE_DIR}/solutions/${name})
  else()
    set(impl_dir ${MGPU_STUDENT_DIR}/${name})
  endif()
  file(GLOB sources CONFIGURE_DEPENDS ${impl_dir}/*.cpp)
  if(NOT sources)
    message(FATAL_ERROR "chapter ${name}: no .cpp files in ${impl_dir}")
  endif()
  add_library(mgpu_${name} STATIC ${sources})
  target_include_directories(mgpu_${name} PUBLIC ${PROJECT_SOURCE_DIR}/chapters)
  target_link_libraries(mgpu_${name} PUBLIC mgpu_runtime)
  foreach(dep IN LISTS C_DEPENDS)
    target_link_libraries(mgpu_${name} PUBLIC mgpu_${dep})
  endforeach()
  mgpu_chapter_warnings(mgpu_${name})
  mgpu_chapter_pch(mgpu_${name})
  file(GLOB tests CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/chapters/${name}/tests/*.cpp)
  if(tests)
    mgpu_doctest(NAME ${name} SOURCES ${tests} LIBS mgpu_${name} LABELS "chapter;${name}")
  endif()
  set_property(GLOBAL APPEND PROPERTY MGPU_CHAPTERS ${name})
  # name:dep,dep for the include check (cmake/check_chapter_includes.cmake).
  list(JOIN C_DEPENDS "," deps)
  set_property(GLOBAL APPEND PROPERTY MGPU_CHAPTER_DEPENDS "${name}:${deps}")
endfunction()

# The map `./mgpu test FILTER` selects by, written at the end of configuring:
# build/<tree>/mgpu-tests.tsv, one line per program: <name> TAB <kind> TAB <build target>.
# A doctest program (kind doctest) runs as the CTest tests <name>/<case> (test_<name>_NOT_BUILT-...
# until built) and is built as test_<name>; any other test (kind test) is the CTest test <name>,
# run by the target mgpu_test_target names for it, or by nothing to build ("-": a script).
function(mgpu_test_target target)
  foreach(test IN LISTS ARGN)
    set_property(GLOBAL APPEND PROPERTY MGPU_TEST_TARGETS "${test}=${target}")
  endforeach()
endfunction()

function(mgpu_write_test_map)
  get_property(lines GLOBAL PROPERTY MGPU_TEST_MAP)
  get_property(targets GLOBAL PROPERTY MGPU_TEST_TARGETS)
  set(dirs ${PROJECT_SOURCE_DIR})
  while(dirs)
    list(POP_FRONT dirs dir)
    get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
    list(APPEND dirs ${subdirs})
    get_property(tests DIRECTORY ${dir} PROPERTY TESTS)
    foreach(test IN LISTS tests)
      set(target "-")
      foreach(pair IN LISTS targets)
        if(pair MATCHES "^${test}=(.*)$")
          set(target ${CMAKE_MATCH_1})
        endif()
      endforeach()
      list(APPEND lines "${test}\ttest\t${target}")
    endforeach()
  endwhile()
  list(SORT lines)
  list(JOIN lines "\n" text)
  file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/mgpu-tests.tsv CONTENT "${text}\n" @ONLY)
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL mgpu_write_test_map)
