// Grading without the reference (the student distribution): build the submission and run each
// chapter's visible doctest tests, and say plainly that graded cases need the reference.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "grade.hpp"

namespace mgpu::grade {

/// One chapter's visible tests.
struct VisibleChapter {
  std::string name;           ///< chapter folder
  bool build_failed = false;  ///< its tests did not compile
  std::string build_error;    ///< the compiler's first error
  int cases = 0;              ///< doctest test cases
  int passed = 0;             ///< of which passed
  int failed = 0;             ///< of which failed
  std::string summary;        ///< the counts from doctest's XML report, or why there are none
  std::string next_todo;      ///< the first "not implemented: <this>" the tests met ("11.1 x")
};

/// Builds and runs test_<chapter> for each chapter on a staged copy of the submission.
std::vector<VisibleChapter> run_visible_tests(const std::filesystem::path& submission,
                                              const Project& project, const Rubric& rubric,
                                              const GradeOptions& opts);

/// Reads the test-case counts of doctest's XML report (--reporters=xml) into v: its last
/// <OverallResultsTestCases successes=".." failures=".."> element, and the first TODO that a
/// failure names as not implemented. False when there is none (the
/// program ended before its report, or is not a doctest program).
bool read_doctest_report(const std::string& xml, VisibleChapter& v);

/// The report of run_visible_tests, ending with the note about the reference.
std::string visible_report(const std::vector<VisibleChapter>& chapters, bool colour);

}  // namespace mgpu::grade
