// What leaves the instructor's checkout: the release has no solutions and no private files, a
// student's zip holds exactly the manifest files, and the Gradescope bundle has its two scripts.
#include <doctest/doctest.h>

#include <fstream>

#include "distribute.hpp"
#include "helpers.hpp"

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

}  // namespace

TEST_CASE("the release leaves out solutions/, build/ and autograder/private/") {
  Project p = this_project();
  fs::path out = fresh_dir("release") / "course";
  std::size_t n = write_release(p, out);
  MESSAGE(n << " files in the release");
  CHECK(n > 10);
  CHECK_FALSE(fs::exists(out / "solutions"));
  CHECK_FALSE(fs::exists(out / "build"));
  CHECK_FALSE(fs::exists(out / "autograder" / "private"));
  CHECK_FALSE(fs::exists(out / "autograder" / "chaff"));  // edits of the reference
  CHECK_FALSE(fs::exists(out / "autograder" / "wheat"));
  CHECK(fs::exists(out / "autograder" / "rubric.json"));
  CHECK(fs::exists(out / "chapters"));
  CHECK(fs::exists(out / "mgpu"));
  CHECK((fs::status(out / "mgpu").permissions() & fs::perms::owner_exec) != fs::perms::none);
  CHECK_THROWS_WITH_AS(write_release(p, out), doctest::Contains("not empty"), std::runtime_error);
}

TEST_CASE("submit zips exactly the manifest files, as chapters/<chapter>/<file>") {
  fs::path dir = fresh_dir("submit");
  fs::path chapters = dir / "chapters";
  fs::create_directories(chapters / "toy_a");
  std::ofstream(chapters / "toy_a" / "toy_a.cpp") << "// mine\n";
  std::ofstream(chapters / "toy_a" / "notes.txt") << "not graded\n";
  Rubric r = load_rubrics(this_project().root / "autograder" / "rubric.json", {fixtures() / "toy" / "rubric.json"});
  auto files = write_submission(r, chapters, dir / "upload.zip");
  CHECK(files == std::vector<std::string>{"chapters/toy_a/toy_a.cpp"});
  CHECK(zip_listing(dir / "upload.zip") == "chapters/toy_a/toy_a.cpp\n");
}

TEST_CASE("the Gradescope bundle has setup.sh, run_autograder, the solutions and the private files" *
          doctest::skip(!this_project().has_solutions())) {
  fs::path dir = fresh_dir("bundle");
  fs::create_directories(dir / "cases");
  std::ofstream(dir / "cases" / "toy_a.cpp") << "// private case\n";
  write_gradescope_bundle(this_project(), dir / "autograder.zip", {fixtures() / "toy" / "rubric.json"}, {dir / "cases"},
                          dir / "staging");
  std::string list = zip_listing(dir / "autograder.zip");
  for (const char* f : {"setup.sh\n", "run_autograder\n", "autograder/private/rubric-0.json\n",
                        "autograder/private/cases-0/toy_a.cpp\n", "autograder/private/grade-args\n", "autograder/rubric.json\n"})
    CHECK_MESSAGE(list.find(f) != std::string::npos, f);
  CHECK(list.find("solutions/") != std::string::npos);
  CHECK(list.find("\nbuild/") == std::string::npos);
  CHECK(read_text(dir / "staging" / "run_autograder").find("--gradescope /autograder/results/results.json") != std::string::npos);
}
