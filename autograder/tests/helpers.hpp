// Shared helpers of the grader's tests: run mgpu-grade, read its JSON, make scratch folders.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/build.hpp"
#include "sandbox/runner.hpp"
#include "util.hpp"

namespace mgpu::grade::testing {

namespace fs = std::filesystem;

/// True when this build can grade: a solution build tree with solutions/ present. In the student
/// distribution and in student build trees the grading tests skip.
inline bool can_grade() {
  Project p = this_project();
  return p.own_is_solution && p.has_solutions();
}

inline fs::path fixtures() { return MGPU_GRADE_FIXTURES; }
inline fs::path work() { return MGPU_GRADE_TEST_WORK; }
/// The grader's --work-dir for this test program (MGPU_GRADE_WORK, set per program in
/// autograder/tests/CMakeLists.txt): the course's tests share the chaff proof's, and with it its
/// reference results and trees; the grader's own tests have one of their own.
inline fs::path grade_work() { return work() / MGPU_GRADE_WORK; }

/// A fresh empty folder under the test work folder.
inline fs::path fresh_dir(const std::string& name) {
  fs::path d = work() / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

/// Writes text (bytes as given) to file, creating its folders.
inline void put(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << text;
}

/// Runs mgpu-grade with args (and env added to the environment); returns the outcome
/// (stdout+stderr merged in out).
inline RunOutcome grader(const std::vector<std::string>& args, double wall_s = 600,
                         const std::vector<std::pair<std::string, std::string>>& env = {}) {
  RunSpec spec;
  spec.exe = MGPU_GRADE_EXE;
  spec.args = args;
  spec.env = env;
  spec.isolate = false;
  spec.wall_s = wall_s;
  spec.merge_output = true;
  spec.output_cap = 1 << 20;
  return run_process(spec);
}

/// The arguments that point the grader at the toy chapters and a private work folder.
inline std::vector<std::string> toy_args(std::vector<std::string> extra) {
  std::vector<std::string> a{"--rubric",   (fixtures() / "toy" / "rubric.json").string(),
                             "--chapter",  "toy_",
                             "--work-dir", grade_work().string(),
                             "--jobs",     "2"};
  extra.insert(extra.end(), a.begin(), a.end());
  return extra;
}

/// A submission folder holding toy_a/toy_a.cpp from fixture `kind` (or the skeleton when kind
/// is empty) and the correct toy_b.
inline fs::path toy_submission(const fs::path& where, const std::string& kind) {
  fs::create_directories(where / "toy_a");
  fs::create_directories(where / "toy_b");
  fs::path a = kind.empty() ? fixtures() / "toy/skeleton/toy_a/toy_a.cpp"
                            : fixtures() / "submissions" / kind / "toy_a/toy_a.cpp";
  fs::copy_file(a, where / "toy_a/toy_a.cpp", fs::copy_options::overwrite_existing);
  fs::copy_file(fixtures() / "toy/solution/toy_b/toy_b.cpp", where / "toy_b/toy_b.cpp",
                fs::copy_options::overwrite_existing);
  return where;
}

/// Status of case `name` in a --json report.
inline std::string case_status(const nlohmann::json& report, const std::string& name) {
  for (const auto& ch : report["chapters"])
    for (const auto& c : ch["cases"])
      if (c["name"] == name) return c["status"];
  return "absent";
}

/// Score of chapter `name` in a --json report.
inline double chapter_score(const nlohmann::json& report, const std::string& name) {
  for (const auto& ch : report["chapters"])
    if (ch["name"] == name) return ch["score"];
  return -1;
}

}  // namespace mgpu::grade::testing
