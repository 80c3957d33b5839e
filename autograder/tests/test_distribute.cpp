// What leaves the instructor's checkout, on a small git repository made for the test: release and
// bundle ship HEAD (never the working tree), refuse uncommitted changes unless told, keep the
// reference and graded cases from students, and speak to students in the release's READMEs.
// Instructors' tools: skipped in the student distribution (which has neither them nor git).
#include <doctest/doctest.h>

#include <fstream>

#include "commands/distribute.hpp"
#include "helpers.hpp"
#include "pipeline/pristine.hpp"
#include "records/hint_book.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::testing;
namespace fs = std::filesystem;

namespace {

std::string zip_listing(const fs::path& zip) {
  RunSpec spec;
  spec.exe = "unzip";
  spec.args = {"-Z1", zip.string()};
  spec.isolate = false;
  spec.output_cap = 1 << 20;
  return run_process(spec).out;
}

void git(const fs::path& repo, std::vector<std::string> args) {
  RunSpec spec;
  spec.exe = "git";
  spec.args = {
      "-C", repo.string(), "-c", "user.name=course", "-c", "user.email=course@example.org"};
  spec.args.insert(spec.args.end(), args.begin(), args.end());
  spec.isolate = false;
  RunOutcome o = run_process(spec);
  INFO(o.out, o.err);
  REQUIRE(o.exit_code == 0);
}

// A course in miniature, committed: one chapter, its solution, a graded case, a chaff, the
// Gradescope and PrairieLearn scripts, a README with both audiences' lines and the presets.
Project mini_course(const std::string& name) {
  const fs::path root = fresh_dir(name);
  put(root / "chapters/c1/c1.cpp", "// TODO: write me\n");
  put(root / "chapters/c1/c1.hpp", "int f();\n");
  put(root / "chapters/c1/tests/test_c1.cpp", "// visible tests\n");
  put(root / "solutions/c1/c1.cpp", "int f() { return 42; }\n");
  put(root / "autograder/cases/c1.cpp", "// hidden case\n");
  put(root / "autograder/chaff/c1/wrong.json", "{}\n");
  put(root / "autograder/rubric.json", "{}\n");
  put(root / "gpu_labs/lab/ring.cpp", "// lab skeleton\n");
  fs::create_directories(root / "autograder/gradescope");
  for (const char* s : {"setup.sh", "run_autograder"})
    fs::copy_file(this_project().root / "autograder/gradescope" / s,
                  root / "autograder/gradescope" / s, fs::copy_options::overwrite_existing);
  put(root / "autograder/prairielearn/run_grader",
      read_text(this_project().root / "autograder/prairielearn/run_grader"));
  put(root / "README.md",
      "# Course\n<!-- instructor-only -->\nCompare with solutions/.\n<!-- /instructor-only -->\n"
      "<!-- student-only\nYour work is graded by your instructor.\n-->\nBoth read this.\n");
  put(root / "CMakePresets.json", R"({"version": 6, "configurePresets": [
    {"name": "base", "hidden": true},
    {"name": "solution", "inherits": "base", "cacheVariables": {"MGPU_IMPL": "solution"}},
    {"name": "ci", "inherits": "solution"},
    {"name": "student", "inherits": "base", "cacheVariables": {"MGPU_IMPL": "student"}}],
  "buildPresets": [{"name": "solution", "configurePreset": "solution"}, {"name": "ci", "configurePreset": "ci"},
                   {"name": "student", "configurePreset": "student"}]})");
  git(root, {"init", "-q"});
  git(root, {"add", "-A"});
  git(root, {"commit", "-q", "-m", "course"});
  Project p;
  p.root = root;
  return p;
}

}  // namespace

TEST_CASE(
    "the release is HEAD for students: no reference, no graded cases, the pristine skeleton, "
    "student READMEs" *
    doctest::skip(!can_grade())) {
  Project p = mini_course("release_repo");
  put(p.root / "stray.svg", "<svg/>");  // untracked: never ships
  fs::path out = fresh_dir("release") / "course";
  Shipment s = write_release(p, out, false);
  CHECK(s.files > 5);
  CHECK(s.left_out.empty());
  for (const char* gone : {"solutions", "autograder/cases", "autograder/chaff",
                           "autograder/gradescope", "autograder/prairielearn", "stray.svg", ".git"})
    CHECK_MESSAGE(!fs::exists(out / gone), gone);
  CHECK(read_text(out / "chapters/c1/c1.cpp") == "// TODO: write me\n");
  CHECK(read_text(out / kShippedSkeleton / "chapters/c1/c1.cpp") == "// TODO: write me\n");
  CHECK(read_text(out / kShippedSkeleton / "gpu_labs/lab/ring.cpp") == "// lab skeleton\n");
  CHECK_FALSE(fs::exists(out / kShippedSkeleton / "chapters/c1/tests"));
  CHECK(read_text(out / "README.md") ==
        "# Course\nYour work is graded by your instructor.\nBoth read this.\n");
  const std::string presets = read_text(out / "CMakePresets.json");
  CHECK(presets.find("\"student\"") != std::string::npos);
  CHECK(presets.find("\"solution\"") == std::string::npos);
  CHECK(presets.find("\"ci\"") == std::string::npos);
  CHECK_THROWS_WITH_AS(write_release(p, out, false), doctest::Contains("not empty"),
                       std::runtime_error);
}

TEST_CASE(
    "a release from a checkout with edited chapters is refused, and with --allow-dirty ships the "
    "committed files" *
    doctest::skip(!can_grade())) {
  Project p = mini_course("dirty_repo");
  put(p.root / "chapters/c1/c1.cpp",
      "int f() { return 42; }  // finished in the instructor's copy\n");
  fs::path dir = fresh_dir("dirty_release");
  CHECK_THROWS_WITH_AS(write_release(p, dir / "refused", false),
                       doctest::Contains("chapters/c1/c1.cpp"), std::runtime_error);
  CHECK_FALSE(fs::exists(dir / "refused" / "chapters"));
  Shipment s = write_release(p, dir / "allowed", true);
  CHECK(s.left_out == std::vector<std::string>{"chapters/c1/c1.cpp"});
  CHECK(read_text(dir / "allowed/chapters/c1/c1.cpp") == "// TODO: write me\n");
  // An uncommitted change in what does not ship (the reference) does not block a release.
  Project q = mini_course("dirty_solution_repo");
  put(q.root / "solutions/c1/c1.cpp", "int f() { return 43; }\n");
  CHECK_NOTHROW(write_release(q, dir / "solutions_dirty", false));
}

TEST_CASE(
    "the pristine skeleton comes from HEAD in a checkout and from autograder/skeleton in a "
    "release" *
    doctest::skip(!can_grade())) {
  Project p = mini_course("pristine_repo");
  put(p.root / "chapters/c1/c1.cpp", "int f() { return 42; }\n");
  fs::path work_dir = fresh_dir("pristine_work");
  fs::path root = pristine_root(p, work_dir);
  CHECK(read_text(pristine_dir(p, root, "chapters/c1") / "c1.cpp") == "// TODO: write me\n");
  CHECK_FALSE(fs::exists(root / "solutions"));
  fs::path out = fresh_dir("pristine_release") / "course";
  write_release(p, out, true);
  Project r;
  r.root = out;
  put(out / "chapters/c1/c1.cpp", "int f() { return 1; }  // the student's work\n");
  CHECK(read_text(pristine_dir(r, pristine_root(r, work_dir), "chapters/c1") / "c1.cpp") ==
        "// TODO: write me\n");
  Project none;
  none.root = fresh_dir("not_a_checkout");
  CHECK_THROWS_WITH_AS(pristine_root(none, work_dir), doctest::Contains("no pristine skeleton"),
                       std::runtime_error);
}

TEST_CASE(
    "the release carries hints sealed, no grader or runtime tests, and never a reference body" *
    doctest::skip(!can_grade())) {
  Project p = mini_course("leak_repo");
  const std::string hints = "## f: the answer\n### 1\nidea\n### 2\nshape\n### 3\npointer\n";
  put(p.root / "chapters/c1/hints.md", hints);
  put(p.root / "autograder/tests/fixtures/attack.cpp", "// an attack\n");
  put(p.root / "runtime/tests/test_ring.cpp", "// a runtime test\n");
  const std::string solved =
      "int g(int n) {\n  int total = n * (n - 1);\n  for (int s = 0; s < n - 1; ++s)\n"
      "    total += chunk_of(s, n);\n  return total / n;\n}\n";
  put(p.root / "solutions/c1/g.cpp", solved);
  put(p.root / "chapters/c1/g.cpp", "int g(int n) {\n  // TODO(c1 g)\n}\n");
  git(p.root, {"add", "-A"});
  git(p.root, {"commit", "-q", "-m", "hints, tests and g"});
  fs::path dir = fresh_dir("leak_release");
  write_release(p, dir / "clean", false);
  CHECK_FALSE(fs::exists(dir / "clean/chapters/c1/hints.md"));
  const std::string sealed = read_text(dir / "clean/chapters/c1" / kSealedHints);
  CHECK(sealed.find("pointer") == std::string::npos);
  CHECK(read_hint_text(dir / "clean/chapters/c1") == hints);
  CHECK_FALSE(fs::exists(dir / "clean/autograder/tests"));
  CHECK_FALSE(fs::exists(dir / "clean/runtime/tests"));
  // The solved lines, re-indented and with a comment, in a file that ships: refused, naming both.
  put(p.root / "tools/helper.cpp",
      "// a helper\nint h(int n) {\n    int total = n*(n - 1);  // as in the text\n"
      "    for (int s = 0; s < n - 1; ++s)\n        total += chunk_of(s, n);\n}\n");
  git(p.root, {"add", "-A"});
  git(p.root, {"commit", "-q", "-m", "a helper that repeats the reference"});
  CHECK_THROWS_WITH_AS(write_release(p, dir / "leaky", false),
                       doctest::Contains("tools/helper.cpp:3 repeats solutions/c1/g.cpp:2"),
                       std::runtime_error);
  CHECK_FALSE(fs::exists(dir / "leaky"));
  // A hint is read through `./mgpu hint`: one that gives the solved lines is refused as well.
  fs::remove(p.root / "tools/helper.cpp");
  put(p.root / "chapters/c1/hints.md",
      hints + "## g: the loop\n### 1\nidea\n### 2\nshape\n### 3\n```cpp\n" + solved + "```\n");
  git(p.root, {"add", "-A"});
  git(p.root, {"commit", "-q", "-m", "a hint that gives the answer"});
  CHECK_THROWS_WITH_AS(write_release(p, dir / "leaky_hint", false),
                       doctest::Contains("chapters/c1/hints.sealed:"), std::runtime_error);
}

TEST_CASE("markers that do not close are an error naming the file") {
  CHECK_THROWS_WITH_AS(student_markdown("a\n<!-- instructor-only -->\nb\n", "README.md"),
                       doctest::Contains("README.md"), std::runtime_error);
  CHECK(student_markdown("no markers\n", "x.md") == "no markers\n");
}

TEST_CASE("submit zips exactly the manifest files, as chapters/<chapter>/<file>") {
  fs::path dir = fresh_dir("submit");
  fs::path chapters = dir / "chapters";
  fs::create_directories(chapters / "toy_a");
  std::ofstream(chapters / "toy_a" / "toy_a.cpp") << "// mine\n";
  std::ofstream(chapters / "toy_a" / "notes.txt") << "not graded\n";
  Rubric r = load_rubrics(this_project().root / "autograder" / "rubric.json",
                          {fixtures() / "toy" / "rubric.json"});
  auto files = write_submission(r, chapters, dir / "upload.zip");
  CHECK(files == std::vector<std::string>{"chapters/toy_a/toy_a.cpp"});
  CHECK(zip_listing(dir / "upload.zip") == "chapters/toy_a/toy_a.cpp\n");
}

TEST_CASE(
    "the Gradescope bundle: HEAD with the reference, the scripts at the top, private files and a "
    "secret" *
    doctest::skip(!can_grade())) {
  Project p = mini_course("bundle_repo");
  put(p.root / "solutions/c1/c1.cpp", "int f() { return 0; }  // uncommitted\n");
  fs::path dir = fresh_dir("bundle");
  put(dir / "cases" / "toy_a.cpp", "// private case\n");
  BundleOptions b;
  b.out = dir / "autograder.zip";
  b.rubrics = {fixtures() / "toy" / "rubric.json"};
  b.cases_dirs = {dir / "cases"};
  b.scratch = dir / "staging";
  CHECK_THROWS_WITH_AS(write_gradescope_bundle(p, b), doctest::Contains("solutions/c1/c1.cpp"),
                       std::runtime_error);
  b.allow_dirty = true;
  write_gradescope_bundle(p, b);
  std::string list = zip_listing(b.out);
  for (const char* f :
       {"setup.sh\n", "run_autograder\n", "autograder/private/rubric-0.json\n",
        "autograder/private/secret\n", "autograder/private/cases-0/toy_a.cpp\n",
        "autograder/private/grade-args\n", "autograder/skeleton/chapters/c1/c1.cpp\n",
        "solutions/c1/c1.cpp\n", "autograder/cases/c1.cpp\n"})
    CHECK_MESSAGE(list.find(f) != std::string::npos, f);
  CHECK(list.find("autograder/chaff/") == std::string::npos);
  CHECK(read_text(b.scratch / "bundle/solutions/c1/c1.cpp") == "int f() { return 42; }\n");
  CHECK(read_text(b.scratch / "bundle/autograder/private/secret").size() >= 16);
  CHECK((fs::status(b.scratch / "bundle/run_autograder").permissions() & fs::perms::owner_exec) !=
        fs::perms::none);
}
