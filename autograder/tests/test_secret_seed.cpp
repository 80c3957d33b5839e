// Secret inputs (autograder/SECURITY.md, "Secret seeds"): with the instructor's secret, every case
// that is not visible runs with a seed derived from the secret and the student's id, so an answer
// table computed from the public case sources and the rubric's seed scores nothing, two students
// get different inputs, and the seed appears in no student-visible output.
#include <doctest/doctest.h>

#include <fstream>

#include "grade.hpp"
#include "helpers.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::testing;
namespace fs = std::filesystem;

namespace {

const char* kSecret = "course-secret-for-the-tests-0001";

fs::path secret_file() {
  fs::path f = fresh_dir("secret") / "secret";
  std::ofstream(f) << kSecret << "\n";
  return f;
}

nlohmann::json grade_as(const fs::path& sub, const std::vector<std::string>& extra,
                        const fs::path& out) {
  std::vector<std::string> args{"grade",      sub.string(), "--quiet", "--json",
                                out.string(), "--seed",     "20251129"};
  args.insert(args.end(), extra.begin(), extra.end());
  RunOutcome o = grader(toy_args(args));
  INFO(o.out);
  REQUIRE(o.exit_code == 0);
  CHECK(o.out.find(std::to_string(derive_seed(kSecret, "alice"))) == std::string::npos);
  return nlohmann::json::parse(read_text(out));
}

}  // namespace

TEST_CASE(
    "a seed derived from a secret and a student id is stable, differs between students and is not "
    "the secret") {
  CHECK(derive_seed(kSecret, "alice") == derive_seed(kSecret, "alice"));
  CHECK(derive_seed(kSecret, "alice") != derive_seed(kSecret, "bob"));
  CHECK(derive_seed(kSecret, "alice") != derive_seed("another-secret-of-16+", "alice"));
  CHECK(derive_seed("ab", "c") != derive_seed("a", "bc"));
  CHECK(derive_seed(kSecret, "alice") < 1000000000ull);
}

TEST_CASE(
    "an answer table for the public seed wins the hidden case without a secret and loses it with "
    "one" *
    doctest::skip(!can_grade())) {
  fs::path dir = fresh_dir("public_seed_table");
  fs::path sub = toy_submission(dir / "submission", "");
  fs::copy_file(fixtures() / "attacks/public_seed_table/toy_a/toy_a.cpp", sub / "toy_a/toy_a.cpp",
                fs::copy_options::overwrite_existing);
  auto open = grade_as(sub, {}, dir / "open.json");
  CHECK(case_status(open, "toy_a.series") == "passed");  // the attack works against a public seed
  CHECK_FALSE(open.contains("hidden_seed"));

  fs::path secret = secret_file();
  auto sealed =
      grade_as(sub, {"--secret", secret.string(), "--student-id", "alice"}, dir / "sealed.json");
  CHECK(case_status(sealed, "toy_a.series") == "wrong");
  CHECK(case_status(sealed, "toy_a.scale") == "passed");  // visible cases keep the public seed
  CHECK(sealed["seed"] == 20251129);
  CHECK(sealed["hidden_seed"] == derive_seed(kSecret, "alice"));
}

TEST_CASE(
    "with a secret the reference still gets full marks, and each student's hidden inputs are their "
    "own" *
    doctest::skip(!can_grade())) {
  fs::path dir = fresh_dir("secret_solution");
  fs::path sub = toy_submission(dir / "submission", "");
  fs::copy_file(fixtures() / "toy/solution/toy_a/toy_a.cpp", sub / "toy_a/toy_a.cpp",
                fs::copy_options::overwrite_existing);
  fs::path secret = secret_file();
  auto alice =
      grade_as(sub, {"--secret", secret.string(), "--student-id", "alice"}, dir / "alice.json");
  auto bob = grade_as(sub, {"--secret", secret.string(), "--student-id", "bob"}, dir / "bob.json");
  CHECK(alice["score"] == alice["max_score"]);
  CHECK(bob["score"] == bob["max_score"]);
  CHECK(alice["hidden_seed"] != bob["hidden_seed"]);
  // Gradescope's metadata names the student; a group's ids are sorted, so any member gives the
  // same.
  fs::path meta = dir / "submission_metadata.json";
  std::ofstream(meta)
      << R"({"id": 99, "users": [{"id": 7, "email": "b@x"}, {"id": 3, "email": "a@x"}]})";
  auto group = grade_as(sub, {"--secret", secret.string(), "--submission-metadata", meta.string()},
                        dir / "group.json");
  CHECK(group["hidden_seed"] == derive_seed(kSecret, "3+7"));
}

TEST_CASE("a secret that is too short is refused with the fix" * doctest::skip(!can_grade())) {
  fs::path f = fresh_dir("short_secret") / "secret";
  std::ofstream(f) << "1234\n";
  RunOutcome o = grader(toy_args({"grade", "--solution", "--quiet", "--secret", f.string()}));
  CHECK(o.exit_code == 2);
  CHECK(o.out.find("at least 16") != std::string::npos);
}
