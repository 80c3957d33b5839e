# Fails when a chapter's code includes another chapter's header. Chapters depend on the runtime
# and their own header only, so that a student stuck in one chapter is never blocked in another;
# the types several chapters share live in runtime/include/mgpu/course.hpp.
# Run as a test: cmake -DROOT=<source dir> -DCHAPTERS=<name[:dep,dep];...> -P this file.
# A chapter's allowed dependencies (its DEPENDS in chapters/CMakeLists.txt) follow its name.
cmake_minimum_required(VERSION 3.20)
set(chapter_names "")
foreach(entry IN LISTS CHAPTERS)
  string(REGEX REPLACE ":.*" "" name "${entry}")
  list(APPEND chapter_names "${name}")
endforeach()

set(problems "")
foreach(entry IN LISTS CHAPTERS)
  string(REGEX REPLACE ":.*" "" name "${entry}")
  set(allowed "${name}")
  if(entry MATCHES ":(.+)$")
    string(REPLACE "," ";" deps "${CMAKE_MATCH_1}")
    list(APPEND allowed ${deps})
  endif()
  # The course's copies only: the contract and skeleton, its tests, and the reference.
  file(GLOB_RECURSE files ${ROOT}/chapters/${name}/*.hpp ${ROOT}/chapters/${name}/*.cpp
                          ${ROOT}/solutions/${name}/*.cpp)
  foreach(file IN LISTS files)
    file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"/]+/")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^[^\"]*\"([^\"/]+)/.*$" "\\1" folder "${line}")
      if(folder IN_LIST chapter_names AND NOT folder IN_LIST allowed)
        file(RELATIVE_PATH where ${ROOT} ${file})
        string(STRIP "${line}" line)
        string(APPEND problems "  ${where}: ${line}\n")
      endif()
    endforeach()
  endforeach()
endforeach()

if(problems)
  message(FATAL_ERROR "a chapter includes another chapter's header:\n${problems}"
                      "Chapters use the runtime and their own headers only: move what they share "
                      "into runtime/include/mgpu/course.hpp (or declare the dependency with DEPENDS "
                      "in chapters/CMakeLists.txt, as the exercises do).")
endif()
list(LENGTH chapter_names count)
message(STATUS "${count} chapters checked: each includes the runtime and its own headers only")
