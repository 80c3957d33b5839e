// End to end on the toy chapters: the reference gets full marks, the skeleton zero with every
// case not-implemented, and each fixture submission its status while the other chapter's grade
// stands. The fixtures are graded as one batch (which also checks the CSV and its resumption),
// sharing two cached build trees, so this file costs one build plus a small file per fixture.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "commands/batch.hpp"
#include "grade.hpp"
#include "helpers.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::testing;
namespace fs = std::filesystem;

TEST_CASE("an exception on a worker thread reaches the caller instead of ending the grader") {
  // Thread 1 throws on its first item; the caller's thread works slowly, so thread 1 gets one.
  std::atomic<int> done{0};
  CHECK_THROWS_WITH(parallel_for(100, 2,
                                 [&](std::size_t, int worker) {
                                   if (worker == 1)
                                     throw std::runtime_error("a case failed on thread 1");
                                   std::this_thread::sleep_for(std::chrono::milliseconds(2));
                                   ++done;
                                 }),
                    "a case failed on thread 1");
  CHECK(done.load() < 99);  // the first exception stops the loop
}

TEST_CASE("grading the toy reference gives full marks" * doctest::skip(!can_grade())) {
  fs::path out = fresh_dir("toy_solution") / "grade.json";
  RunOutcome o = grader(toy_args({"grade", "--solution", "--json", out.string()}));
  INFO(o.out);
  REQUIRE(o.exit_code == 0);
  auto j = nlohmann::json::parse(read_text(out));
  CHECK(j["max_score"].get<double>() == 6);  // 2 + 1 + (1 + 1 budget) + 1
  CHECK(j["score"].get<double>() == j["max_score"].get<double>());
}

TEST_CASE("grading the toy skeleton gives zero with every case not-implemented" *
          doctest::skip(!can_grade())) {
  fs::path dir = fresh_dir("toy_skeleton");
  fs::create_directories(dir / "submission");  // no chapter files: everything is the skeleton
  fs::path out = dir / "grade.json";
  RunOutcome o = grader(toy_args({"grade", (dir / "submission").string(), "--json", out.string()}));
  INFO(o.out);
  REQUIRE(o.exit_code == 0);
  auto j = nlohmann::json::parse(read_text(out));
  CHECK(j["score"].get<double>() == 0);
  for (const auto& ch : j["chapters"])
    for (const auto& c : ch["cases"]) CHECK_MESSAGE(c["status"] == "not-implemented", c["name"]);
}

TEST_CASE("every misbehaviour gets its own status, and the untouched chapter's grade stands" *
          doctest::skip(!can_grade())) {
  fs::path dir = fresh_dir("toy_batch");
  const std::map<std::string, std::pair<std::string, std::string>> expect{
      // fixture -> (case, status)
      {"segfault", {"toy_a.scale", "crashed"}},
      {"infinite_loop", {"toy_a.series", "timeout"}},
      {"exit_before_result", {"toy_a.scale", "no-result"}},
      {"fake_stdout", {"toy_a.scale", "no-result"}},
      {"memory_bomb", {"toy_a.series", "out-of-memory"}},
      {"compile_error", {"toy_a.scale", "build-failed"}},
      {"wrong_answer", {"toy_a.scale", "wrong"}},
      {"throws", {"toy_a.series", "crashed"}},
  };
  for (const auto& [kind, _] : expect) toy_submission(dir / "subs" / kind, kind);
  toy_submission(dir / "subs" / "wasteful", "wasteful");
  // One submission arrives as a zip, as uploads do.
  toy_submission(dir / "zipped", "wrong_answer");
  REQUIRE(std::system(("cd " + (dir / "zipped").string() +
                       " && zip -q -r ../subs/zipped_wrong.zip toy_a toy_b")
                          .c_str()) == 0);

  fs::path csv = dir / "grades.csv";
  RunOutcome o = grader(toy_args({"grade-batch", (dir / "subs").string(), "--csv", csv.string(),
                                  "--reports", (dir / "reports").string()}),
                        900);
  INFO(o.out);
  REQUIRE(o.exit_code == 0);
  auto report = [&](const std::string& name) {
    return nlohmann::json::parse(read_text(dir / "reports" / (name + ".json")));
  };
  for (const auto& [kind, cs] : expect) {
    auto j = report(kind);
    CHECK_MESSAGE(case_status(j, cs.first) == cs.second, kind);
    CHECK_MESSAGE(chapter_score(j, "toy_b") == 1, kind << ": toy_b must keep its point");
  }
  // Misbehaving in one function costs that case only.
  CHECK(case_status(report("segfault"), "toy_a.series") == "passed");
  CHECK(case_status(report("infinite_loop"), "toy_a.scale") == "passed");
  // Correct but wasteful: passed, with the budget point lost.
  auto w = report("wasteful");
  CHECK(case_status(w, "toy_a.sum") == "passed");
  CHECK(chapter_score(w, "toy_a") == 4);
  CHECK(case_status(report("zipped_wrong"), "toy_a.scale") == "wrong");
  // Reasons a student can act on.
  auto reason = [&](const std::string& kind, const std::string& c) {
    auto j = report(kind);
    for (const auto& ch : j["chapters"])
      for (const auto& x : ch["cases"])
        if (x["name"] == c) return x["reason"].get<std::string>();
    return std::string();
  };
  CHECK(reason("segfault", "toy_a.scale").find("SIGSEGV") != std::string::npos);
  CHECK(reason("fake_stdout", "toy_a.scale").find("stdout are not read") != std::string::npos);
  CHECK(reason("compile_error", "toy_a.scale").find("chapters/toy_a/toy_a.cpp") !=
        std::string::npos);
  CHECK(reason("throws", "toy_a.series").find("std::out_of_range") != std::string::npos);

  // The gradebook: a header and one row per submission; a rerun grades nothing new.
  auto lines = [&] {
    std::ifstream in(csv);
    std::vector<std::string> v;
    for (std::string l; std::getline(in, l);) v.push_back(l);
    return v;
  };
  auto first = lines();
  REQUIRE(first.size() == expect.size() + 3);
  CHECK(first[0].rfind("submission,score,max_score,toy_a,toy_b", 0) == 0);
  RunOutcome again =
      grader(toy_args({"grade-batch", (dir / "subs").string(), "--csv", csv.string()}));
  CHECK(again.out.find("0 to grade") != std::string::npos);
  CHECK(lines() == first);

  // Three shards, merged, give the same gradebook (rows sorted; the seconds column aside).
  std::vector<std::string> shard_args;
  for (int i = 1; i <= 3; ++i) {
    fs::path part = dir / ("shard" + std::to_string(i) + ".csv");
    RunOutcome s = grader(toy_args({"grade-batch", (dir / "subs").string(), "--csv", part.string(),
                                    "--shard", std::to_string(i) + "/3"}),
                          900);
    INFO(s.out);
    REQUIRE(s.exit_code == 0);
    shard_args.push_back(part.string());
  }
  std::vector<std::string> merge_args{"grade-batch", "merge", (dir / "merged.csv").string()};
  merge_args.insert(merge_args.end(), shard_args.begin(), shard_args.end());
  RunOutcome m = grader(merge_args);
  INFO(m.out);
  REQUIRE(m.exit_code == 0);
  auto without_seconds = [](std::vector<std::string> rows) {
    const auto header = csv_split(rows.front());
    const auto at = std::find(header.begin(), header.end(), "seconds") - header.begin();
    for (auto& r : rows) {
      auto f = csv_split(r);
      f.erase(f.begin() + at);
      r.clear();
      for (const auto& x : f) r += csv_field(x) + ",";
    }
    std::sort(rows.begin() + 1, rows.end());
    return rows;
  };
  std::vector<std::string> merged;
  {
    std::ifstream in(dir / "merged.csv");
    for (std::string l; std::getline(in, l);) merged.push_back(l);
  }
  CHECK(without_seconds(merged) == without_seconds(first));
  BatchOptions bad;
  CHECK_THROWS_WITH(parse_shard("4/3", bad), doctest::Contains("1 <= I <= N"));
}

TEST_CASE("one grade writes the same result as terminal table, JSON, Gradescope and JUnit" *
          doctest::skip(!can_grade())) {
  fs::path dir = fresh_dir("toy_reports");
  toy_submission(dir / "sub", "wrong_answer");
  RunOutcome o = grader(toy_args(
      {"grade", (dir / "sub").string(), "--json", (dir / "g.json").string(), "--gradescope",
       (dir / "results.json").string(), "--junit", (dir / "junit.xml").string(), "--timings"}));
  INFO(o.out);
  REQUIRE(o.exit_code == 0);
  auto j = nlohmann::json::parse(read_text(dir / "g.json"));
  auto gs = nlohmann::json::parse(read_text(dir / "results.json"));
  CHECK(gs["score"].get<double>() == j["score"].get<double>());
  CHECK(gs["tests"].size() == 4);
  CHECK(read_text(dir / "junit.xml").find("failures=\"1\"") != std::string::npos);
  CHECK(o.out.find("toy_a.scale") != std::string::npos);
  CHECK(o.out.find("timings:") != std::string::npos);
  CHECK(o.out.find("\033[") == std::string::npos);  // not a terminal: no colour
}

TEST_CASE("the submission folder is never modified" * doctest::skip(!can_grade())) {
  fs::path dir = fresh_dir("toy_untouched");
  fs::path sub = toy_submission(dir / "sub", "wrong_answer");
  auto before = fs::last_write_time(sub / "toy_a/toy_a.cpp");
  std::string text = read_text(sub / "toy_a/toy_a.cpp");
  RunOutcome o = grader(toy_args({"grade", sub.string(), "--quiet"}));
  REQUIRE(o.exit_code == 0);
  CHECK(read_text(sub / "toy_a/toy_a.cpp") == text);
  CHECK(fs::last_write_time(sub / "toy_a/toy_a.cpp") == before);
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::recursive_directory_iterator(sub)) ++n;
  CHECK(n == 4);  // two folders, two files: nothing added
}

TEST_CASE("a private case folder closed to other users is graded for a student too" *
          doctest::skip(!can_grade())) {
  // As in a Gradescope bundle (autograder/private/cases-N): the folder is the grader's alone, and
  // a student build, which runs as a uid of its own, compiles a copy of its sources.
  const fs::path dir = fresh_dir("toy_private_cases");
  const fs::path cases = dir / "private" / "cases";
  put(cases / "toy_b" / "extra.cpp", R"(#include "case.hpp"
#include "toy_b/toy_b.hpp"
MGPU_CASE("toy_b.private_add") { ctx.emit("sum", mgpu::toy::toy_add(20, 22)); }
)");
  fs::permissions(dir / "private", fs::perms::owner_all);
  auto rubric = nlohmann::json::parse(read_text(fixtures() / "toy" / "rubric.json"));
  rubric["chapters"]["toy_b"]["cases"]["toy_b.private_add"] = {{"points", 1}};
  put(dir / "rubric.json", rubric.dump());
  const fs::path out = dir / "grade.json";
  RunOutcome o =
      grader({"grade", toy_submission(dir / "submission", "").string(), "--json", out.string(),
              "--rubric", (dir / "rubric.json").string(), "--cases-dir", cases.string(),
              "--chapter", "toy_b", "--work-dir", grade_work().string(), "--jobs", "2"});
  INFO(o.out);
  REQUIRE(o.exit_code == 0);
  const auto j = nlohmann::json::parse(read_text(out));
  CHECK(case_status(j, "toy_b.private_add") == "passed");
  CHECK(case_status(j, "toy_b.add") == "passed");
}
