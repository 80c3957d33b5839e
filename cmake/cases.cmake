# mgpu_case_program(chapter [DIRS dir...]): the graded-case program cases_<chapter>. Its case
# objects form the archive mgpu_cases_<chapter> (linked whole: each case registers itself from a
# static initialiser), from every case source found for the chapter in autograder/cases, the DIRS
# given and MGPU_GRADE_CASES_DIRS; it links them with the harness and mgpu_<chapter> of this tree.
# In a submission's grading tree (MGPU_GRADE_LINK_FROM, cmake/grade_tree.cmake) the case objects
# are the trusted tree's archive instead, so the submission's build never compiles them.
set(MGPU_GRADE_CASES_DIRS "" CACHE STRING "Extra folders of graded-case sources (private cases), ;-separated")
set(mgpu_cases_root ${CMAKE_CURRENT_LIST_DIR}/../autograder/cases)
set(mgpu_empty_source ${CMAKE_BINARY_DIR}/mgpu_empty.cpp)
file(CONFIGURE OUTPUT ${mgpu_empty_source} CONTENT "// main() is the harness's\n")

function(mgpu_case_program chapter)
  cmake_parse_arguments(P "" "" "DIRS" ${ARGN})
  # Case files named *.host.cpp hold the isolated cases, whose rank code is in rank bodies
  # (rank_code.hpp): they call no chapter function. Their archive mgpu_cases_host_<chapter> (empty
  # for a chapter of plain cases only) is linked into cases_<chapter> with the rest, and alone,
  # with no chapter code, into the host program cases_<chapter>_host, where the grader runs a
  # student's cases: their ranks, student calls and plain cases run as the student's
  # cases_<chapter>.
  if(MGPU_GRADE_LINK_FROM)
    foreach(kind cases cases_host)
      add_library(mgpu_${kind}_${chapter} STATIC IMPORTED)
      set_target_properties(mgpu_${kind}_${chapter} PROPERTIES
        IMPORTED_LOCATION ${MGPU_GRADE_LINK_FROM}/cases/libmgpu_${kind}_${chapter}.a
        INTERFACE_LINK_LIBRARIES "mgpu_case_harness;mgpu_${chapter}")
    endforeach()
  else()
    set(patterns)
    foreach(dir ${mgpu_cases_root} ${P_DIRS} ${MGPU_GRADE_CASES_DIRS})
      list(APPEND patterns ${dir}/${chapter}.cpp ${dir}/${chapter}/*.cpp)
    endforeach()
    file(GLOB sources CONFIGURE_DEPENDS ${patterns})
    if(NOT sources)
      return()
    endif()
    set(host_sources ${sources})
    list(FILTER host_sources INCLUDE REGEX "\\.host\\.cpp$")
    list(FILTER sources EXCLUDE REGEX "\\.host\\.cpp$")
    if(NOT host_sources)
      set(host_sources ${mgpu_empty_source})
    endif()
    add_library(mgpu_cases_host_${chapter} STATIC ${host_sources})
    # The chapter's headers (its types) but not its code.
    target_link_libraries(mgpu_cases_host_${chapter} PUBLIC mgpu_case_harness)
    target_include_directories(mgpu_cases_host_${chapter} PRIVATE
                               $<TARGET_PROPERTY:mgpu_${chapter},INTERFACE_INCLUDE_DIRECTORIES>)
    add_library(mgpu_cases_${chapter} STATIC ${sources})
    target_link_libraries(mgpu_cases_${chapter} PUBLIC mgpu_case_harness mgpu_${chapter})
    foreach(lib mgpu_cases_${chapter} mgpu_cases_host_${chapter})
      # One folder for every chapter's archives: where a grading tree finds them.
      set_target_properties(${lib} PROPERTIES ARCHIVE_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/cases)
      mgpu_strict_warnings(${lib})
      mgpu_optimize_for_compile_time(${lib})  # drawing inputs, emitting values
    endforeach()
    add_executable(cases_${chapter}_host ${mgpu_empty_source})
    target_link_libraries(cases_${chapter}_host PRIVATE
                          "$<LINK_LIBRARY:WHOLE_ARCHIVE,mgpu_cases_host_${chapter}>")
  endif()
  add_executable(cases_${chapter} ${mgpu_empty_source})
  target_link_libraries(cases_${chapter} PRIVATE
                        "$<LINK_LIBRARY:WHOLE_ARCHIVE,mgpu_cases_${chapter},mgpu_cases_host_${chapter}>"
                        mgpu_${chapter})
endfunction()
