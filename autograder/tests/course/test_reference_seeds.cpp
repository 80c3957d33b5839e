// The reference over many seeds. Hidden cases run with a seed derived per student
// (GradeOptions::hidden_seed), so every seed must give the reference a result: a drawn grid point
// that repeated a fixed one once named a value twice and failed about one seed in five. Every
// graded case runs here with sixteen seeds on this tree's own case programs, the reference the
// grader uses. It grades nothing and uses no work folder, so it runs beside the tests that hold
// the grading lock rather than after them. A run spends most of its time starting its sandbox and
// its program rather than computing (here about 38 ms a run, 6 of them busy), so the runs go four
// at a time.
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
  struct Run {
    fs::path exe;
    const CaseSpec* spec;
    std::uint64_t seed;
    CaseRun result;
  };
  std::vector<Run> runs;
  for (const auto& ch : rubric.chapters) {
    const fs::path exe = this_project().own_tree / "bin" / ("cases_" + ch.name);
    REQUIRE_MESSAGE(fs::exists(exe), exe.string());
    for (const auto& c : ch.cases)
      for (std::uint64_t seed = 1; seed <= 16; ++seed)
        runs.push_back({exe, &c, seed * 7919 + 13, {}});
  }
  parallel_for(runs.size(), 4, [&](std::size_t i) {
    runs[i].result = run_case(runs[i].exe, *runs[i].spec, runs[i].seed, true);
  });
  for (const Run& r : runs)  // doctest's checks, from this thread only
    CHECK_MESSAGE(r.result.status == Status::passed,
                  r.spec->name << " seed " << r.seed << ": " << r.result.reason);
  MESSAGE(runs.size() << " reference runs");
}
