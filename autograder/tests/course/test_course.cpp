// The course's own rubric end to end (slow: builds every chapter twice): the reference solutions
// get full marks, and the pristine skeleton in chapters/ gets zero with every case
// not-implemented (GPU lab cases: skipped where there is no CUDA device). Skipped where there
// is no reference (student distribution, student builds).
#include <doctest/doctest.h>

#include "../helpers.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::testing;
namespace fs = std::filesystem;

TEST_CASE("grading the reference solutions gives full marks" * doctest::skip(!can_grade())) {
  fs::path out = fresh_dir("course_solution") / "grade.json";
  RunOutcome o = grader({"grade", "--solution", "--json", out.string(), "--work-dir", (work() / "grade").string(), "--timings"}, 1200);
  INFO(o.out);
  REQUIRE(o.exit_code == 0);
  auto j = nlohmann::json::parse(read_text(out));
  MESSAGE(j["score"] << " of " << j["max_score"]);
  CHECK(j["max_score"].get<double>() > 0);
  CHECK(j["score"].get<double>() == j["max_score"].get<double>());
  for (const auto& ch : j["chapters"])
    for (const auto& c : ch["cases"])  // GPU lab cases are skipped where no CUDA device is visible
      CHECK_MESSAGE((c["status"] == "passed" || (ch["name"] == "gpu_labs" && c["status"] == "skipped")),
                    c["name"] << ": " << c["reason"]);
}

TEST_CASE("grading the pristine skeleton gives zero, every case not-implemented" * doctest::skip(!can_grade())) {
  fs::path out = fresh_dir("course_skeleton") / "grade.json";
  fs::path skeleton = this_project().root / "chapters";
  RunOutcome o = grader({"grade", skeleton.string(), "--json", out.string(), "--work-dir", (work() / "grade").string(), "--timings"}, 1200);
  INFO(o.out);
  REQUIRE(o.exit_code == 0);
  auto j = nlohmann::json::parse(read_text(out));
  MESSAGE("timings: " << j["timings"].dump());
  CHECK(j["score"].get<double>() == 0);
  for (const auto& ch : j["chapters"])
    for (const auto& c : ch["cases"])
      CHECK_MESSAGE((c["status"] == "not-implemented" || (ch["name"] == "gpu_labs" && c["status"] == "skipped")),
                    c["name"] << ": " << c["reason"]);
}
