// The visible tests' reading of doctest's XML report, on the report of a real doctest program:
// this one, running one of its own cases.
#include <doctest/doctest.h>

#include <filesystem>
#include <stdexcept>

#include "commands/visible.hpp"
#include "sandbox/runner.hpp"

using namespace mgpu::grade;

namespace {

RunOutcome run_self(const std::string& filter) {
  RunSpec rs;
  rs.exe = std::filesystem::read_symlink("/proc/self/exe");
  rs.args = {"--no-intro", "--reporters=xml", "--no-skip", "--test-case=" + filter};
  rs.isolate = false;  // the reading is tested here, not the sandbox
  rs.wall_s = 60;
  rs.output_cap = 16u << 20;
  return run_process(rs);
}

}  // namespace

TEST_CASE("visible tests: a case that passes, as doctest reports it") { CHECK(1 + 1 == 2); }

// Run only through run_self: it fails the way a chapter's test fails on an unwritten TODO.
TEST_CASE("visible tests: a TODO not written yet, as doctest reports it" * doctest::skip()) {
  CHECK(1 + 1 == 2);
  throw std::logic_error("not implemented: 11.1 bytes_per_parameter");
}

TEST_CASE("visible tests: the counts come from doctest's XML report") {
  RunOutcome one = run_self("visible tests: a case that passes*");
  REQUIRE(one.exited);
  VisibleChapter v;
  REQUIRE(read_doctest_report(one.out, v));
  CHECK(v.cases == 1);
  CHECK(v.passed == 1);
  CHECK(v.failed == 0);

  // A filter that selects nothing: a report with no cases.
  RunOutcome none = run_self("no case has this name");
  VisibleChapter w;
  REQUIRE(read_doctest_report(none.out, w));
  CHECK(w.cases == 0);

  // A report cut short before its counts (the program died) gives none.
  VisibleChapter cut;
  const auto at = one.out.find("<OverallResultsTestCases");
  REQUIRE(at != std::string::npos);
  CHECK_FALSE(read_doctest_report(one.out.substr(0, at), cut));
  CHECK_FALSE(read_doctest_report("test cases: 3 | 3 passed | 0 failed", cut));

  // An unwritten TODO: the report names it, so the student knows what to write next.
  RunOutcome todo = run_self("visible tests: a TODO not written yet*");
  VisibleChapter t;
  REQUIRE(read_doctest_report(todo.out, t));
  CHECK(t.failed == 1);
  CHECK(t.next_todo == "11.1 bytes_per_parameter");
  CHECK(one.out.find("not implemented") == std::string::npos);
  CHECK(v.next_todo.empty());
}
