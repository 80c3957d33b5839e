// The course's own rubric end to end (slow: builds every chapter twice): the reference solutions
// get full marks, and the committed skeleton gets zero with every case not-implemented (GPU lab
// cases: skipped where there is no CUDA device). Skipped where there is no reference (student
// distribution, student builds).
#include <doctest/doctest.h>

#include "../helpers.hpp"
#include "grade.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::testing;
namespace fs = std::filesystem;

TEST_CASE("grading the reference solutions gives full marks" * doctest::skip(!can_grade())) {
  fs::path out = fresh_dir("course_solution") / "grade.json";
  RunOutcome o = grader({"grade", "--solution", "--quiet", "--json", out.string(), "--work-dir",
                         grade_work().string(), "--timings"},
                        1200);
  INFO(o.out);
  REQUIRE(o.exit_code == 0);
  auto j = nlohmann::json::parse(read_text(out));
  MESSAGE(j["score"] << " of " << j["max_score"]);
  CHECK(j["max_score"].get<double>() > 0);
  CHECK(j["score"].get<double>() == j["max_score"].get<double>());
  for (const auto& ch : j["chapters"])
    for (const auto& c : ch["cases"])  // GPU lab cases are skipped where no CUDA device is visible
      CHECK_MESSAGE(
          (c["status"] == "passed" || (ch["name"] == "gpu_labs" && c["status"] == "skipped")),
          c["name"] << ": " << c["reason"]);
}

// A submission is graded from its own files plus the committed skeleton, never the working
// chapters/ (which in an instructor's checkout may hold finished code). Both submissions are
// folders named "submission", so they share one cached student build tree.
namespace {

nlohmann::json grade_folder(const std::string& name, const fs::path& folder) {
  fs::path out = fresh_dir(name) / "grade.json";
  RunOutcome o = grader({"grade", folder.string(), "--quiet", "--json", out.string(), "--work-dir",
                         grade_work().string(), "--timings"},
                        1200);
  INFO(o.out);
  REQUIRE(o.exit_code == 0);
  return nlohmann::json::parse(read_text(out));
}

}  // namespace

TEST_CASE("an empty submission is the pristine skeleton: zero, every case not-implemented" *
          doctest::skip(!can_grade())) {
  fs::path empty = fresh_dir("course_skeleton") / "submission";
  fs::create_directories(empty);
  auto j = grade_folder("course_skeleton_report", empty);
  MESSAGE("timings: " << j["timings"].dump());
  CHECK(j["score"].get<double>() == 0);
  for (const auto& ch : j["chapters"])
    for (const auto& c : ch["cases"])
      CHECK_MESSAGE((c["status"] == "not-implemented" ||
                     (ch["name"] == "gpu_labs" && c["status"] == "skipped")),
                    c["name"] << ": " << c["reason"]);
}

TEST_CASE("a submission holding one chapter's files scores on that chapter only" *
          doctest::skip(!can_grade())) {
  fs::path sub = fresh_dir("course_one_chapter") / "submission";
  const fs::path from = this_project().root / "solutions" / "11_1_memory";
  fs::create_directories(sub / "chapters" / "11_1_memory");
  for (const auto& e : fs::directory_iterator(from))
    if (e.path().extension() == ".cpp")
      fs::copy_file(e.path(), sub / "chapters" / "11_1_memory" / e.path().filename());
  auto j = grade_folder("course_one_chapter_report", sub);
  for (const auto& ch : j["chapters"]) {
    INFO(ch["name"]);
    if (ch["name"] == "11_1_memory")
      CHECK(ch["score"] == ch["max_score"]);
    else
      CHECK(ch["score"].get<double>() == 0);
  }
}
