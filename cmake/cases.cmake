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
  if(MGPU_GRADE_LINK_FROM)
    add_library(mgpu_cases_${chapter} STATIC IMPORTED)
    set_target_properties(mgpu_cases_${chapter} PROPERTIES
      IMPORTED_LOCATION ${MGPU_GRADE_LINK_FROM}/cases/libmgpu_cases_${chapter}.a
      INTERFACE_LINK_LIBRARIES "mgpu_case_harness;mgpu_${chapter}")
  else()
    set(patterns)
    foreach(dir ${mgpu_cases_root} ${P_DIRS} ${MGPU_GRADE_CASES_DIRS})
      list(APPEND patterns ${dir}/${chapter}.cpp ${dir}/${chapter}/*.cpp)
    endforeach()
    file(GLOB sources CONFIGURE_DEPENDS ${patterns})
    if(NOT sources)
      return()
    endif()
    add_library(mgpu_cases_${chapter} STATIC ${sources})
    # One folder for every chapter's archive: where a grading tree finds them.
    set_target_properties(mgpu_cases_${chapter} PROPERTIES ARCHIVE_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/cases)
    target_link_libraries(mgpu_cases_${chapter} PUBLIC mgpu_case_harness mgpu_${chapter})
    mgpu_strict_warnings(mgpu_cases_${chapter})
    mgpu_optimize_for_compile_time(mgpu_cases_${chapter})  # drawing inputs, emitting values
  endif()
  add_executable(cases_${chapter} ${mgpu_empty_source})
  target_link_libraries(cases_${chapter} PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,mgpu_cases_${chapter}>")
endfunction()
