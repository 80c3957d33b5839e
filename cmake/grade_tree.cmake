# A submission's grading tree: the grader configures one per submission with
# MGPU_GRADE_LINK_FROM=<its own, trusted tree>. It compiles the chapters only, from the
# submission's files, and links each case program with that tree's archives: the runtime, the case
# harness and the chapter's case objects. So the submission's build neither compiles the graded
# cases nor needs their sources in view, and compiles a few files instead of the whole course.
# The grader runs the link as a step of its own, after checking the chapter objects' symbols
# (autograder/src/pipeline/build.cpp).
foreach(lib runtime case_harness)
  add_library(mgpu_${lib} STATIC IMPORTED)
endforeach()
set_target_properties(mgpu_runtime PROPERTIES
  IMPORTED_LOCATION ${MGPU_GRADE_LINK_FROM}/runtime/libmgpu_runtime.a
  INTERFACE_INCLUDE_DIRECTORIES ${PROJECT_SOURCE_DIR}/runtime/include
  INTERFACE_LINK_LIBRARIES "Eigen3::Eigen;Threads::Threads")
set_target_properties(mgpu_case_harness PROPERTIES
  IMPORTED_LOCATION ${MGPU_GRADE_LINK_FROM}/autograder/libmgpu_case_harness.a
  INTERFACE_LINK_LIBRARIES mgpu_runtime)

include(${PROJECT_SOURCE_DIR}/cmake/cases.cmake)
add_subdirectory(chapters)
get_property(mgpu_chapters GLOBAL PROPERTY MGPU_CHAPTERS)
foreach(chapter IN LISTS mgpu_chapters)
  mgpu_case_program(${chapter})
endforeach()
# The grader's own tests grade two toy chapters (autograder/tests/fixtures/toy): a submission
# of them is staged with their files.
if(EXISTS ${MGPU_STUDENT_DIR}/toy_a AND EXISTS ${PROJECT_SOURCE_DIR}/autograder/tests/fixtures/toy/chapters.cmake)
  include(${PROJECT_SOURCE_DIR}/autograder/tests/fixtures/toy/chapters.cmake)
endif()
