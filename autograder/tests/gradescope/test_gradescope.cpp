// Gradescope, emulated as its autograder specification describes it: the bundle is unpacked into
// <root>/source, setup.sh runs once (as on the image build), and run_autograder runs once per
// submission in <root>/submission, writing <root>/results/results.json. Every results.json is
// checked against the documented format, and each kind of submission against what its student
// must see. Slow (setup.sh builds the reference and the student tree as the image would); the
// bundle ships git's HEAD, so this tests what is committed.
#include <doctest/doctest.h>

#include <fstream>
#include <functional>

#include "../gradescope_schema.hpp"
#include "../helpers.hpp"
#include "rubric/rubric.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::testing;
namespace fs = std::filesystem;

namespace {

const fs::path kRoot = work() / "gradescope" / "autograder";

RunOutcome script(const std::string& name, double wall_s) {
  RunSpec spec;
  spec.exe = (kRoot / "source" / name).string();
  spec.env = {{"AUTOGRADER_ROOT", kRoot.string()}};
  spec.isolate = false;
  spec.wall_s = wall_s;
  spec.merge_output = true;
  spec.output_cap = 4 << 20;
  return run_process(spec);
}

std::string solution(const std::string& chapter, const std::string& file) {
  return read_text(this_project().root / "solutions" / chapter / file);
}

// The 11.1 reference with `find` replaced, once.
std::string edited_11_1(const std::string& find, const std::string& replace) {
  std::string text = solution("11_1_memory", "formulas.cpp");
  const auto at = text.find(find);
  REQUIRE_MESSAGE(at != std::string::npos, find);
  return text.replace(at, find.size(), replace);
}

// Runs run_autograder on the submission folder `fill` builds; returns results.json after
// checking that it exists and conforms.
nlohmann::json submit(const std::string& kind, const std::function<void(const fs::path&)>& fill) {
  const fs::path sub = kRoot / "submission";
  fs::remove_all(sub);
  fs::create_directories(sub);
  fill(sub);
  RunOutcome o = script("run_autograder", 900);
  INFO(kind << ":\n" << o.out);
  CHECK(o.exit_code == 0);
  const fs::path results = kRoot / "results" / "results.json";
  REQUIRE(fs::exists(results));
  nlohmann::json j = nlohmann::json::parse(read_text(results));
  const auto errors = gradescope_schema_errors(j);
  for (const auto& e : errors) FAIL_CHECK(kind << ": " << e);
  MESSAGE(kind << ": score " << j["score"] << "; "
               << j["output"].get<std::string>().substr(0, 300));
  return j;
}

double chapter_points(const nlohmann::json& results, const std::string& title) {
  double s = 0;
  for (const auto& t : results["tests"])
    if (t["name"].get<std::string>().rfind(title + " ", 0) == 0) s += t["score"].get<double>();
  return s;
}

bool any_output_has(const nlohmann::json& results, const std::string& text) {
  if (results["output"].get<std::string>().find(text) != std::string::npos) return true;
  for (const auto& t : results["tests"])
    if (t["output"].get<std::string>().find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE(
    "the Gradescope bundle sets up and grades every kind of submission into a valid results.json" *
    doctest::skip(!can_grade())) {
  const Rubric rubric = load_rubric(this_project().root / "autograder" / "rubric.json");
  const std::string title_11_1 = rubric.chapter("11_1_memory")->title;
  double max_points = 0;
  for (const auto& ch : rubric.chapters)
    for (const auto& c : ch.cases) max_points += c.max_score();

  // ---- the image build: unpack the bundle, run setup.sh
  fs::remove_all(kRoot);
  fs::create_directories(kRoot / "source");
  const fs::path zip = work() / "gradescope" / "autograder.zip";
  RunOutcome b = grader({"gradescope-bundle", zip.string(), "--allow-dirty"});
  INFO(b.out);
  REQUIRE(b.exit_code == 0);
  RunSpec unzip;
  unzip.exe = "unzip";
  unzip.args = {"-q", zip.string(), "-d", (kRoot / "source").string()};
  unzip.isolate = false;
  REQUIRE(run_process(unzip).exit_code == 0);
  RunOutcome setup = script("setup.sh", 3000);
  INFO(setup.out);
  REQUIRE(setup.exit_code == 0);
  put(kRoot / "submission_metadata.json",
      R"({"id": 1, "users": [{"id": 4242, "email": "s@example.org", "name": "S"}]})");

  // ---- one submission of each kind. setup.sh built the skeleton in the folder these are graded
  // from, so each compiles only what differs from it; the solved one, which differs everywhere,
  // comes last.
  auto empty = submit("empty", [](const fs::path&) {});
  CHECK(empty["score"].get<double>() == 0);
  CHECK(empty["output"].get<std::string>().find("no chapter folder") != std::string::npos);

  auto broken = submit("compile error", [](const fs::path& s) {
    put(s / "chapters/11_1_memory/formulas.cpp", "this is not C++ <std::vector<double>> &amp;\n");
  });
  CHECK(broken["output"].get<std::string>().find("11_1_memory does not compile") !=
        std::string::npos);
  CHECK(any_output_has(broken, "std::vector<double>"));  // as text: output_format says so

  auto loop = submit("infinite loop", [&](const fs::path& s) {
    put(s / "chapters/11_1_memory/formulas.cpp",
        edited_11_1("double training_flops(double params, double tokens) {",
                    "double training_flops(double params, double tokens) {\n  for (volatile int "
                    "spin = 0;; spin = spin + 1) {}"));
  });
  CHECK(any_output_has(loop, "timeout"));
  CHECK(chapter_points(loop, title_11_1) > 0);  // the other 11.1 cases keep their points

  auto bytes = submit("invalid UTF-8 output", [&](const fs::path& s) {
    // Prints bytes that are not UTF-8, then answers wrong, so the output reaches the feedback.
    // The helper is static: a submission may define only what the reference's files define.
    put(s / "chapters/11_1_memory/formulas.cpp",
        "#include <cstdio>\n" +
            edited_11_1("double bytes_per_parameter(const PrecisionRecipe& recipe) {",
                        "static double bytes_per_parameter_ok(const PrecisionRecipe& recipe);\n"
                        "double bytes_per_parameter(const PrecisionRecipe& recipe) {\n"
                        "  std::fputs(\"\\xff\\xfe broken \\xc3\", stderr);\n  return 1 + "
                        "bytes_per_parameter_ok(recipe);\n}\n"
                        "static double bytes_per_parameter_ok(const PrecisionRecipe& recipe) {"));
  });
  CHECK(bytes["output"].get<std::string>().find("could not grade") ==
        std::string::npos);  // graded, not the fallback
  CHECK(chapter_points(bytes, title_11_1) > 0);
  CHECK(any_output_has(bytes, "broken"));

  auto loose = submit("loose files", [&](const fs::path& s) {
    for (const char* f : {"data_parallel.cpp", "ring_all_reduce.cpp", "formulas.cpp"})
      put(s / f, solution("11_2_data_parallel", f));
  });
  CHECK(loose["output"].get<std::string>().find("loose files graded by name") != std::string::npos);
  CHECK(loose["output"].get<std::string>().find("formulas.cpp belongs to several chapters") !=
        std::string::npos);

  auto zipped = submit("a zip inside the folder", [&](const fs::path& s) {
    const fs::path from = work() / "gradescope" / "zip-src";
    fs::remove_all(from);
    put(from / "chapters/11_1_memory/formulas.cpp", solution("11_1_memory", "formulas.cpp"));
    RunSpec z;
    z.exe = "zip";
    z.args = {"-q", "-r", (s / "manygpu-submission.zip").string(), "chapters"};
    z.cwd = from;
    z.isolate = false;
    REQUIRE(run_process(z).exit_code == 0);
  });
  CHECK(zipped["output"].get<std::string>().find(
            "graded the files inside manygpu-submission.zip") != std::string::npos);
  double max_11_1 = 0;
  for (const auto& c : rubric.chapter("11_1_memory")->cases) max_11_1 += c.max_score();
  CHECK(chapter_points(zipped, title_11_1) == max_11_1);

  auto solved = submit("solved", [&](const fs::path& s) {
    for (const auto& ch : rubric.chapters)
      for (const auto& f : ch.files) put(s / "chapters" / ch.name / f, solution(ch.name, f));
  });
  CHECK(solved["score"].get<double>() == max_points);

  // ---- the grader itself fails: the fallback lists every test as failed, with the reason
  const fs::path args = kRoot / "source/autograder/private/grade-args";
  put(args, "--chapter no_such_chapter\n");
  auto fallback = submit("grader failure", [](const fs::path&) {});
  CHECK(fallback["score"].get<double>() == 0);
  CHECK(fallback["output"].get<std::string>().find("no_such_chapter") != std::string::npos);
  CHECK(fallback["tests"].size() > 10);
  // ... and when even the fallback cannot read the rubric, the smallest valid results.json.
  const fs::path rubric_file = kRoot / "source/autograder/rubric.json";
  const std::string kept = read_text(rubric_file);
  put(rubric_file, "{ not json");
  auto last = submit("grader and fallback failure", [](const fs::path&) {});
  CHECK(last["score"].get<double>() == 0);
  put(rubric_file, kept);
  fs::remove(args);
}
