// The reference over many seeds. Hidden cases run with a seed derived per student
// (GradeOptions::hidden_seed), so every seed must give the reference a result: a drawn grid point
// that repeated a fixed one once named a value twice and failed about one seed in five. Every
// graded case runs here with sixteen seeds on this tree's own case programs, the reference the
// grader uses. It grades nothing and uses no work folder, so it runs beside the tests that hold
// the grading lock rather than after them.
#include <doctest/doctest.h>

#include "../helpers.hpp"
#include "grade.hpp"
#include "rubric/rubric.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::testing;
namespace fs = std::filesystem;

TEST_CASE("the reference gives a result for every case over many seeds" *
          doctest::skip(!can_grade())) {
  const Rubric rubric = load_rubric(this_project().root / "autograder" / "rubric.json");
  int runs = 0;
  for (const auto& ch : rubric.chapters) {
    const fs::path exe = this_project().own_tree / "bin" / ("cases_" + ch.name);
    REQUIRE_MESSAGE(fs::exists(exe), exe.string());
    for (const auto& c : ch.cases)
      for (std::uint64_t seed = 1; seed <= 16; ++seed) {
        const CaseRun r = run_case(exe, c, seed * 7919 + 13, true);
        CHECK_MESSAGE(r.status == Status::passed,
                      c.name << " seed " << seed * 7919 + 13 << ": " << r.reason);
        ++runs;
      }
  }
  MESSAGE(runs << " reference runs");
}
