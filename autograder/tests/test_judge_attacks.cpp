// Results the grader cannot digest, and names that clash, in one real batch: each attack on the
// result descriptor (fixtures/attacks: deep_result, result_wrong_types, two_results,
// invalid_utf8_result, huge_result, truncated_result) costs its own case a status that says what
// was wrong, the other cases of the same submission keep their points, and correct submissions
// graded beside them keep full marks, each in its own row and report even when their names clean
// to the same report name (autograder/SECURITY.md).
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "commands/batch.hpp"
#include "helpers.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::testing;
namespace fs = std::filesystem;

TEST_CASE("batch names: names that clean to one report name are told apart and said") {
  // "a b" and "a_b" share the report a_b.json; a folder and a zip of one stem share everything.
  BatchNames n = unique_batch_names({"a b", "a_b", "c", "d", "d", "e\xff", "e\xfe"},
                                    {"a b", "a_b", "c", "d", "d.zip", "e\xff", "e\xfe"});
  REQUIRE(n.names.size() == 7);
  CHECK(n.names[2] == "c");  // untouched when alone
  std::set<std::string> reports;
  for (const auto& name : n.names) reports.insert(batch_report_stem(name));
  CHECK(reports.size() == 7);
  CHECK(n.names[0].rfind("a b~", 0) == 0);
  CHECK(n.names[1].rfind("a_b~", 0) == 0);
  CHECK(n.names[5].rfind("e\xef\xbf\xbd~", 0) == 0);  // valid UTF-8 for the gradebook
  REQUIRE(n.collisions.size() == 3);
  CHECK(n.collisions[0].find("would share the report name a_b") != std::string::npos);
  // The same folder always gets the same name, whatever else is in the batch.
  CHECK(unique_batch_names({"a b", "a_b"}).names[0] == n.names[0]);
  // A name made to look like another's disambiguated one keeps it (it is alone), and the one
  // it was aimed at gets another: nobody is refused, every report is its own.
  const std::string taken = n.names[0];
  for (const auto& names :
       {std::vector<std::string>{"a b", "a_b", taken}, {taken, "a b", "a_b", "a b~x", "a_b"}}) {
    BatchNames aimed = unique_batch_names(names);
    std::set<std::string> stems;
    for (const auto& name : aimed.names) stems.insert(batch_report_stem(name));
    CHECK(stems.size() == names.size());  // "a_b" twice too: two entries, two names
    CHECK(aimed.names[names.size() == 3 ? 2 : 0] == taken);
    CHECK(std::count(aimed.names.begin(), aimed.names.end(), taken) == 1);
  }
  // A name of 255 invalid bytes (765 when each is made U+FFFD) still fits a file name, and two
  // that differ only past the cut differ.
  const std::string a(255, '\xff'), b = std::string(254, '\xff') + "b";
  BatchNames longs = unique_batch_names({a, b});
  CHECK(batch_report_stem(longs.names[0]).size() <= 200);
  CHECK(batch_report_stem(longs.names[0]) != batch_report_stem(longs.names[1]));
  // A line break cannot split a gradebook row.
  CHECK(batch_display_name("x\ny") == "x y");
}

TEST_CASE("a result the grader cannot digest costs its case only, and clashing names stay apart" *
          doctest::skip(!can_grade())) {
  fs::path dir = fresh_dir("judge_attacks");
  const std::map<std::string, std::pair<std::string, std::string>> expect{
      // fixture -> (status of toy_a.scale, words of its reason)
      {"deep_result", {"no-result", "nested deeper than 16 levels"}},
      {"result_wrong_types", {"no-result", "has a message that is not a string"}},
      {"two_results", {"no-result", "more than one JSON document"}},
      {"invalid_utf8_result", {"no-result", "invalid UTF-8 at byte"}},
      {"huge_result", {"crashed", "std::runtime_error"}},
      {"truncated_result", {"no-result", "is cut short"}},
  };
  for (const auto& [attack, _] : expect) {
    fs::path sub = toy_submission(dir / "subs" / attack, "");
    fs::copy_file(fixtures() / "attacks" / attack / "toy_a/toy_a.cpp", sub / "toy_a/toy_a.cpp",
                  fs::copy_options::overwrite_existing);
  }
  // Correct submissions whose names clash: "zz correct" and "zz_correct" share a report name,
  // and a folder "zz_dup" and "zz_dup.zip" share a name outright. One is named like the name
  // "zz correct" would get to tell it apart, to take it; two names of bytes that are not UTF-8
  // differ only in them; one is 255 such bytes, its report name longer than a file name may be.
  const std::string aimed = unique_batch_names({"zz correct", "zz_correct"}).names[0];
  const std::vector<std::string> good{"zz correct",
                                      "zz_correct",
                                      "zz_dup",
                                      aimed,
                                      "zz\xff\xfe",
                                      "zz\xfe\xff",
                                      "zz" + std::string(253, '\xfe')};
  for (const std::string& name : good) {
    fs::path good = toy_submission(dir / "subs" / name, "");
    fs::copy_file(fixtures() / "toy/solution/toy_a/toy_a.cpp", good / "toy_a/toy_a.cpp",
                  fs::copy_options::overwrite_existing);
  }
  REQUIRE(std::system(("cd '" + (dir / "subs" / "zz_dup").string() +
                       "' && zip -q -r ../zz_dup.zip toy_a toy_b")
                          .c_str()) == 0);

  fs::path csv = dir / "grades.csv";
  const std::vector<std::string> args =
      toy_args({"grade-batch", (dir / "subs").string(), "--csv", csv.string(), "--reports",
                (dir / "reports").string()});
  // With threads the student's code runs in the case's own process and writes on the result
  // descriptor itself. In a graded run (processes) a case's student code runs in a process of
  // its own with that descriptor closed, and only a rank's process could still write there: the
  // parser is attacked directly here, as such a rank would.
  RunOutcome o = grader(args, 900, {{"MGPU_RANKS", "threads"}});
  INFO(o.out);
  REQUIRE(o.exit_code == 0);
  auto report = [&](const std::string& file) {
    return nlohmann::json::parse(read_text(dir / "reports" / (file + ".json")));
  };
  auto reason = [&](const nlohmann::json& j, const std::string& c) {
    for (const auto& ch : j["chapters"])
      for (const auto& x : ch["cases"])
        if (x["name"] == c) return x["reason"].get<std::string>();
    return std::string();
  };
  for (const auto& [attack, want] : expect) {
    auto j = report(attack);
    CHECK_MESSAGE(case_status(j, "toy_a.scale") == want.first, attack);
    CHECK_MESSAGE(reason(j, "toy_a.scale").find(want.second) != std::string::npos,
                  attack << ": " << reason(j, "toy_a.scale"));
    CHECK_MESSAGE(reason(j, "toy_a.scale").size() < 5000, attack);
    // Only that case: the submission's other cases and chapter keep their points.
    CHECK_MESSAGE(case_status(j, "toy_a.series") == "passed", attack);
    CHECK_MESSAGE(case_status(j, "toy_a.sum") == "passed", attack);
    CHECK_MESSAGE(chapter_score(j, "toy_b") == 1, attack);
  }
  // Eight correct submissions (the zip too), eight reports with full marks; the six whose
  // names clashed say so, and the one that took a suffixed name keeps it.
  std::vector<std::string> good_reports;
  for (const auto& e : fs::directory_iterator(dir / "reports"))
    if (e.path().filename().string().rfind("zz", 0) == 0)
      good_reports.push_back(e.path().stem().string());
  CHECK(good_reports.size() == good.size() + 1);
  int renamed = 0;
  for (const auto& r : good_reports) {
    auto j = report(r);
    CHECK_MESSAGE(chapter_score(j, "toy_a") == 5, r);
    CHECK_MESSAGE(chapter_score(j, "toy_b") == 1, r);
    for (const auto& note : j["notes"])
      renamed += note.get<std::string>().find("graded as") != std::string::npos;
  }
  CHECK(renamed == 6);
  CHECK(fs::exists(dir / "reports" / (batch_report_stem(aimed) + ".json")));
  CHECK(o.out.find("would share the report name zz_correct;") != std::string::npos);
  CHECK(o.out.find("would share the report name zz_dup;") != std::string::npos);
  // One row each, and a rerun finds every row done.
  auto rows = [&] {
    std::ifstream in(csv);
    std::set<std::string> names;
    std::size_t n = 0;
    for (std::string l; std::getline(in, l); ++n) names.insert(csv_split(l).at(0));
    return std::pair(n, names.size());
  };
  const std::size_t n = expect.size() + good.size() + 2;  // the zip, and the header
  CHECK(rows() == std::pair<std::size_t, std::size_t>(n, n));
  RunOutcome again = grader(args, 900);
  INFO(again.out);
  CHECK(again.out.find("0 to grade") != std::string::npos);
  CHECK(rows().first == n);
}
