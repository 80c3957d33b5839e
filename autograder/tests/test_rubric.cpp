// The rubric loader rejects malformed files with file, field and fix, lays private rubrics over
// the main one, and the repository's rubric agrees with the case sources and the chapter folders.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>

#include "helpers.hpp"
#include "pipeline/build.hpp"
#include "rubric/rubric.hpp"

using namespace mgpu::grade;
namespace fs = std::filesystem;

namespace {

std::string rejection(const std::string& text) {
  try {
    parse_rubric(text, "my_rubric.json");
  } catch (const RubricError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a malformed rubric is rejected naming file, field and fix") {
  std::string msg =
      rejection(R"({"chapters": {"11_5_pipeline": {"files": ["formulas.cpp"], "cases": {
      "11_5.bubble": {"points": "two", "visibility": "secret", "poins": 1,
                      "budgets": [{"measure": "bytes_sent", "factor": -1}]}}}}})");
  MESSAGE(msg);
  CHECK(msg.find(
            "my_rubric.json: chapters.11_5_pipeline.cases.11_5.bubble.points: expected a number") !=
        std::string::npos);
  CHECK(msg.find("visibility: unknown visibility \"secret\"; fix: use \"visible\", \"hidden\", "
                 "\"after_due_date\" or \"after_published\"") != std::string::npos);
  CHECK(msg.find("11_5.bubble.poins: unknown field; fix:") != std::string::npos);
  CHECK(msg.find("budgets[0].factor: -1 is out of range") != std::string::npos);
  CHECK(msg.find("budgets[0].points: missing") != std::string::npos);
  CHECK(msg.find("5 problems") == 0);
}

TEST_CASE("JSON syntax errors and missing manifests are reported too") {
  CHECK(rejection("{\"chapters\": {,}}").find("my_rubric.json: not valid JSON") == 0);
  CHECK(rejection(R"({"chapters": {"x": {"cases": {}}}})").find("chapters.x.files: missing") !=
        std::string::npos);
  CHECK(rejection(R"({"chapters": {"x": {"files": ["../etc/passwd"]}}})")
            .find("not a plain file name") != std::string::npos);
  CHECK(rejection(R"({"chapters": {"x": {"files": ["a.cpp"]}}})").empty());
}

TEST_CASE("a private rubric adds cases and overrides settings of existing ones") {
  fs::path dir = testing::fresh_dir("rubric_merge");
  std::ofstream(dir / "main.json")
      << R"({"seed": 1, "chapters": {"a": {"files": ["a.cpp"], "cases": {
      "a.one": {"points": 1}, "a.two": {"points": 1}}}}})";
  std::ofstream(dir / "private.json") << R"({"seed": 9, "chapters": {"a": {"cases": {
      "a.two": {"points": 5, "visibility": "hidden"}, "a.secret": {"points": 3, "visibility": "after_due_date"}}}}})";
  Rubric r = load_rubrics(dir / "main.json", {dir / "private.json"});
  CHECK(r.seed == 9);
  REQUIRE(r.chapters.size() == 1);
  const auto& cases = r.chapters[0].cases;
  REQUIRE(cases.size() == 3);
  CHECK(cases[1].name == "a.two");
  CHECK(cases[1].points == 5);
  CHECK(cases[1].visibility == Visibility::hidden);
  CHECK(cases[2].name == "a.secret");
  CHECK(r.chapters[0].files == std::vector<std::string>{"a.cpp"});
}

TEST_CASE(
    "the repository rubric names only cases the case sources define, and real manifest files") {
  Project p = this_project();
  Rubric r = load_rubric(p.root / "autograder" / "rubric.json");
  std::set<std::string> defined;
  static const std::regex def(R"re(MGPU_CASE(?:_ISOLATED)?\("([^"]+)"\))re");
  for (const auto& e : fs::recursive_directory_iterator(p.root / "autograder" / "cases")) {
    if (e.path().extension() != ".cpp") continue;
    std::string text = read_text(e.path());
    for (std::sregex_iterator it(text.begin(), text.end(), def), end; it != end; ++it)
      defined.insert((*it)[1]);
  }
  int cases = 0;
  for (const auto& ch : r.chapters) {
    CHECK_MESSAGE(fs::is_directory(p.root / ch.skeleton), ch.name);
    for (const auto& f : ch.files)
      CHECK_MESSAGE(fs::is_regular_file(p.root / "chapters" / ch.name / f), ch.name << "/" << f);
    // A skeleton .cpp missing from the manifest would silently be graded as the skeleton.
    for (const auto& e : fs::directory_iterator(p.root / ch.skeleton))
      if (e.path().extension() == ".cpp")
        CHECK_MESSAGE(
            std::count(ch.files.begin(), ch.files.end(), e.path().filename().string()) == 1,
            ch.name << ": add " << e.path().filename().string()
                    << " to its \"files\" in autograder/rubric.json");
    for (const auto& c : ch.cases) {
      CHECK_MESSAGE(defined.count(c.name) == 1,
                    c.name << " is in the rubric but no MGPU_CASE defines it");
      ++cases;
    }
  }
  MESSAGE(cases << " graded cases in " << r.chapters.size() << " chapters");
  CHECK(cases > 0);
}
