// A hostile submission costs its own cases only, under both sandboxes: it cannot read the cached
// reference results or run the reference's case program, nothing it starts outlives its case,
// and its memory limit holds for all its processes together (autograder/SECURITY.md).
#include <doctest/doctest.h>

#include <fstream>

#include "helpers.hpp"
#include "sandbox.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::testing;
namespace fs = std::filesystem;

namespace {

// This test's own seed, so processes of other graders running at the same time are not counted.
const char* kSeed = "424242";

// Processes of a toy case program run with this test's seed: what a case could have left behind.
int toy_case_processes() {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::ifstream in(e.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmd.find("cases_toy_a") != std::string::npos && cmd.find(kSeed) != std::string::npos) ++n;
  }
  return n;
}

void attack_batch(const std::string& mode) {
  fs::path dir = fresh_dir("attacks_" + mode);
  const std::vector<std::string> attacks{"steal_reference", "exec_reference", "setsid_escape", "memory_children"};
  for (const auto& a : attacks) {
    fs::path sub = toy_submission(dir / "subs" / a, "");
    fs::copy_file(fixtures() / "attacks" / a / "toy_a/toy_a.cpp", sub / "toy_a/toy_a.cpp", fs::copy_options::overwrite_existing);
  }
  // Compile time: a submission that answers right only when the compiler can see the reference.
  // Written here, since the reference's absolute path differs from machine to machine.
  {
    fs::path sub = toy_submission(dir / "subs" / "include_reference", "");
    std::string text = read_text(fixtures() / "toy/solution/toy_a/toy_a.cpp");
    const std::string body = "double toy_scale(double x, int k) { return x * k; }";
    REQUIRE(text.find(body) != std::string::npos);
    text.replace(text.find(body), body.size(),
                 "#if __has_include(\"" + (this_project().root / "solutions/11_1_memory/formulas.cpp").string() +
                     "\")\ndouble toy_scale(double x, int k) { return x * k; }\n#else\n"
                     "double toy_scale(double, int) { return -1; }\n#endif");
    std::ofstream(sub / "toy_a/toy_a.cpp") << text;
  }
  // A correct submission graded beside them must keep its full marks.
  fs::path good = toy_submission(dir / "subs" / "zz_correct", "");
  fs::copy_file(fixtures() / "toy/solution/toy_a/toy_a.cpp", good / "toy_a/toy_a.cpp", fs::copy_options::overwrite_existing);
  // The exec attack finds the reference's case program from the work folder's name; it must be
  // really there, or the attack would lose for the wrong reason.
  const Project p = this_project();
  REQUIRE(work().filename() == "grade-tests-" + p.own_tree.filename().string());
  REQUIRE(fs::exists(work().parent_path() / p.own_tree.filename() / "bin" / "cases_toy_a"));
  // The reference results must be in the cache for the thief to find them (outside a sandbox).
  REQUIRE(grader(toy_args({"grade", "--solution", "--quiet", "--seed", kSeed})).exit_code == 0);

  RunSpec spec;
  spec.exe = MGPU_GRADE_EXE;
  spec.args = toy_args({"grade-batch", (dir / "subs").string(), "--csv", (dir / "grades.csv").string(), "--reports",
                        (dir / "reports").string(), "--seed", kSeed});
  spec.isolate = false;
  spec.wall_s = 600;
  spec.merge_output = true;
  spec.env = {{"MGPU_SANDBOX", mode}};
  RunOutcome o = run_process(spec);
  INFO(o.out);
  REQUIRE(o.exit_code == 0);
  auto report = [&](const std::string& name) { return nlohmann::json::parse(read_text(dir / "reports" / (name + ".json"))); };
  CHECK(case_status(report("steal_reference"), "toy_a.scale") == "wrong");
  CHECK(case_status(report("exec_reference"), "toy_a.scale") == "wrong");
  // The build could not read solutions/: hidden (namespaces: the answer is wrong) or unreadable
  // (uid: GCC's __has_include sees the file, reading it fails the build). Either way no points.
  const std::string included = case_status(report("include_reference"), "toy_a.scale");
  CHECK((included == "wrong" || included == "build-failed"));
  CHECK(case_status(report("setsid_escape"), "toy_a.scale") == "passed");
  auto mem = report("memory_children");
  CHECK(case_status(mem, "toy_a.series") == "out-of-memory");
  CHECK(mem.dump().find("processes together held") != std::string::npos);
  auto ok = report("zz_correct");
  CHECK(ok["score"].get<double>() == ok["max_score"].get<double>());
  CHECK(toy_case_processes() == 0);
}

}  // namespace

TEST_CASE("hostile submissions cost their own cases only, in namespaces" *
          doctest::skip(!can_grade() || sandbox().kind != SandboxKind::namespaces)) {
  attack_batch("namespaces");
}

TEST_CASE("hostile submissions cost their own cases only, with a uid per case (the fallback)" *
          doctest::skip(!can_grade() || ::geteuid() != 0)) {
  attack_batch("uid");
}
