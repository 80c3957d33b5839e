// PrairieLearn's results.json (--prairielearn) and its entry point (autograder/prairielearn/
// run_grader): the fields PrairieLearn reads, the score as the grade's fraction, hidden cases'
// details withheld, the 1 MB limit kept, and a submission that could not be graded marked not
// gradable with the reason, so the student loses no attempt.
#include <doctest/doctest.h>

#include "grade.hpp"
#include "helpers.hpp"
#include "report/report.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::testing;

namespace {

Grade pl_sample_grade() {
  Grade g;
  g.seed = 42;
  ChapterGrade a;
  a.name = "11_5_pipeline";
  a.title = "11.5 Pipeline parallelism";
  a.cases.push_back({"11_5.bubble", a.name, Visibility::visible, Status::wrong, 0, 2,
                     "gpipe outside tolerance", "gpipe[0]: got 3, expected 4", 0.1});
  a.cases.push_back({"11_5.in_flight", a.name, Visibility::hidden, Status::wrong, 0, 1,
                     "secret-input mismatch", "inputs drawn from the secret seed: 7 11 13", 0.2});
  a.cases.push_back({"11_5.sum", a.name, Visibility::visible, Status::passed, 3, 3, "", "", 0.1});
  ChapterGrade labs;
  labs.name = "gpu_labs";
  labs.title = "GPU labs";
  labs.cases.push_back({"gpu.zero3", labs.name, Visibility::visible, Status::skipped, 0, 0,
                        "no CUDA device is visible on this machine", "", 0});
  g.chapters = {a, labs};
  return g;
}

// The fields PrairieLearn's grader results element reads, with their types.
void check_pl_shape(const nlohmann::json& j) {
  REQUIRE(j.is_object());
  CHECK(j["gradable"].is_boolean());
  REQUIRE(j["score"].is_number());
  CHECK(j["score"].get<double>() >= 0);
  CHECK(j["score"].get<double>() <= 1);
  CHECK(j["message"].is_string());
  REQUIRE(j["tests"].is_array());
  for (const auto& t : j["tests"]) {
    CHECK(t["name"].is_string());
    CHECK(t["points"].is_number());
    CHECK(t["max_points"].is_number());
    CHECK(t["points"].get<double>() <= t["max_points"].get<double>());
    CHECK(t["message"].is_string());
    if (t.contains("output")) CHECK(t["output"].is_string());
  }
  CHECK(j.dump().size() < 1'000'000);  // PrairieLearn refuses a larger results.json
}

// PrairieLearn's entry point on the grade folder `grade`, with the grader's arguments `args`.
RunOutcome run_pl_grader(const fs::path& grade, std::vector<std::string> args, double wall_s) {
  RunSpec spec;
  spec.exe = this_project().root / "autograder" / "prairielearn" / "run_grader";
  spec.args = std::move(args);
  spec.env = {{"PL_GRADE_DIR", grade.string()}, {"MGPU_GRADE_EXE", MGPU_GRADE_EXE}};
  spec.isolate = false;
  spec.wall_s = wall_s;
  spec.merge_output = true;
  return run_process(spec);
}

}  // namespace

TEST_CASE("PrairieLearn results.json: score is the fraction of points, hidden details withheld") {
  const nlohmann::json j = prairielearn_report(pl_sample_grade());
  check_pl_shape(j);
  CHECK(j["gradable"] == true);
  CHECK(j["score"].get<double>() == doctest::Approx(3.0 / 6.0));
  REQUIRE(j["tests"].size() == 4);
  CHECK(j["tests"][0]["name"] == "11.5 Pipeline parallelism 11_5.bubble");
  CHECK(j["tests"][0]["max_points"] == 2);
  CHECK(j["tests"][0]["message"] == "wrong: gpipe outside tolerance");
  CHECK(j["tests"][0]["output"] == "gpipe[0]: got 3, expected 4");
  // PrairieLearn shows every test at once: a hidden case gives its points and status only.
  CHECK(j["tests"][1]["points"] == 0);
  CHECK(j["tests"][1]["max_points"] == 1);
  CHECK_FALSE(j["tests"][1].contains("output"));
  CHECK(j.dump().find("secret") == std::string::npos);
  CHECK(j["tests"][2]["points"] == 3);
  CHECK(j["tests"][3]["max_points"] == 0);  // a skipped GPU lab counts for nothing
  CHECK(j["tests"][3]["name"].get<std::string>().find("(skipped") != std::string::npos);
  CHECK(j["message"].get<std::string>().find("Score 3 of 6 points.") != std::string::npos);
}

TEST_CASE("PrairieLearn results.json stays under 1 MB, and a rejected upload is not gradable") {
  Grade g = pl_sample_grade();
  for (int i = 0; i < 300; ++i)
    g.chapters[0].cases.push_back({"11_5.flood" + std::to_string(i), "11_5_pipeline",
                                   Visibility::visible, Status::crashed, 0, 1, "flood",
                                   std::string(64 * 1024, 'x'), 0});
  check_pl_shape(prairielearn_report(g));

  Grade rejected = pl_sample_grade();
  rejected.chapters[0].cases[0].status = Status::rejected_submission;
  rejected.chapters[0].cases[0].reason = "chapters/x.cpp is a symbolic link; upload the file";
  const nlohmann::json r = prairielearn_report(rejected);
  CHECK(r["gradable"] == false);
  REQUIRE(r["format_errors"].size() == 1);
  CHECK(r["format_errors"][0].get<std::string>().find("symbolic link") != std::string::npos);
}

TEST_CASE(
    "run_grader grades /grade/student into /grade/results/results.json, its score the grade's "
    "fraction" *
    doctest::skip(!can_grade())) {
  const fs::path grade = fresh_dir("prairielearn") / "grade";
  toy_submission(grade / "student", "wrong_answer");
  put(grade / "data" / "data.json", R"({"params": {}, "variant_seed": 1234567})");
  const fs::path secret = grade.parent_path() / "secret", json = grade.parent_path() / "grade.json";
  put(secret, "a-secret-of-more-than-sixteen-characters\n");
  RunOutcome o =
      run_pl_grader(grade, toy_args({"--json", json.string(), "--secret", secret.string()}), 600);
  INFO(o.out);
  REQUIRE(o.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(read_text(grade / "results" / "results.json"));
  const nlohmann::json full = nlohmann::json::parse(read_text(json));
  check_pl_shape(j);
  CHECK(j["gradable"] == true);
  const double fraction = full["score"].get<double>() / full["max_score"].get<double>();
  CHECK(fraction < 1);  // the wrong answer loses points
  CHECK(j["score"].get<double>() == doctest::Approx(fraction));
  std::size_t cases = 0;
  for (const auto& ch : full["chapters"]) cases += ch["cases"].size();
  CHECK(j["tests"].size() == cases);
  // The hidden inputs are this variant's: the student id is data.json's variant_seed.
  CHECK(full["hidden_seed"].get<std::uint64_t>() ==
        derive_seed("a-secret-of-more-than-sixteen-characters", "pl-variant-1234567"));
}

TEST_CASE("run_grader leaves a not-gradable results.json with the reason when grading fails" *
          doctest::skip(!can_grade())) {
  const fs::path grade = fresh_dir("prairielearn_fails") / "grade";
  fs::create_directories(grade / "student");
  RunOutcome o = run_pl_grader(grade, {"--rubric", (grade / "no-such-rubric.json").string()}, 120);
  INFO(o.out);
  CHECK(o.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(read_text(grade / "results" / "results.json"));
  CHECK(j["gradable"] == false);
  REQUIRE(j["format_errors"].size() == 1);
  CHECK(j["format_errors"][0].get<std::string>().find("no-such-rubric.json") != std::string::npos);
}
