// GPU lab cases in the grade: the rubric section is validated; a lab is judged by the outputs it
// writes to the grader's descriptor, compared with the reference lab's (a RESULT line on stdout,
// forged or not, earns nothing); and without a CUDA device (or with GPU grading turned off) every
// GPU case is reported as skipped in every report format and counts for nothing.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <sys/stat.h>

#include "commands/distribute.hpp"
#include "helpers.hpp"
#include "pipeline/gpu_labs.hpp"
#include "report/report.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::testing;
namespace fs = std::filesystem;

namespace {

const char* kGpuSection = R"("gpu_labs": {
    "title": "GPU labs",
    "files": {"allreduce_bw": ["ring.cpp"]},
    "cases": {"gpu.allreduce_bw": {"lab": "allreduce_bw", "points": 2, "args": ["--ranks", "4"]},
              "gpu.allreduce_bw_hidden": {"lab": "allreduce_bw", "points": 1, "visibility": "hidden"}}
  })";

std::string rubric_with(const std::string& gpu) {
  return std::string(
             R"({"chapters": {"c": {"files": ["f.cpp"], "cases": {"c.x": {"points": 1}}}}, )") +
         gpu + "}";
}

}  // namespace

TEST_CASE("the rubric's gpu_labs section is read, and its mistakes are named with a fix") {
  Rubric r = parse_rubric(rubric_with(kGpuSection), "r.json");
  REQUIRE(r.gpu_labs.has_value());
  REQUIRE(r.gpu_labs->cases.size() == 2);
  CHECK(r.gpu_labs->cases[0].lab == "allreduce_bw");
  CHECK(r.gpu_labs->cases[0].points == 2);
  CHECK(r.gpu_labs->cases[0].args == std::vector<std::string>{"--ranks", "4"});
  CHECK(r.gpu_labs->cases[1].visibility == Visibility::hidden);
  CHECK(r.gpu_labs->files.at("allreduce_bw") == std::vector<std::string>{"ring.cpp"});

  const std::string bad = R"("gpu_labs": {"files": {"allreduce_bw": ["../ring.cpp"]},
      "cases": {"gpu.x": {"lab": "nope", "points": -1, "colour": "red"}}})";
  try {
    parse_rubric(rubric_with(bad), "r.json");
    FAIL("a malformed gpu_labs section was accepted");
  } catch (const RubricError& e) {
    const std::string m = e.what();
    MESSAGE(m);
    CHECK(m.find("r.json: gpu_labs.files.allreduce_bw:") != std::string::npos);
    CHECK(m.find("gpu_labs.cases.gpu.x.lab: missing, or not a lab listed") != std::string::npos);
    CHECK(m.find("gpu_labs.cases.gpu.x.points") != std::string::npos);
    CHECK(m.find("gpu_labs.cases.gpu.x.colour: unknown field") != std::string::npos);
  }
}

TEST_CASE("a GPU case's error measure, tolerance and memory are read, and wrong ones named") {
  Rubric r = parse_rubric(rubric_with(R"("gpu_labs": {"files": {"zero3": ["zero3.cpp"]}, "cases": {
      "gpu.zero3": {"lab": "zero3", "error": "norm_rel", "tolerance": 0.05, "memory_mb": 4096}}})"),
                          "r.json");
  REQUIRE(r.gpu_labs.has_value());
  const GpuLabCase& c = r.gpu_labs->cases.at(0);
  CHECK(c.error == LabError::norm_rel);
  CHECK(c.tolerance == 0.05);
  CHECK(c.memory_mb == 4096);
  try {
    parse_rubric(rubric_with(R"("gpu_labs": {"files": {"zero3": ["zero3.cpp"]}, "cases": {
        "gpu.zero3": {"lab": "zero3", "error": "l2", "tolerance": -1, "memory_mb": 0}}})"),
                 "r.json");
    FAIL("a wrong error measure was accepted");
  } catch (const RubricError& e) {
    const std::string m = e.what();
    CHECK(m.find("gpu.zero3.error: unknown error measure \"l2\"; fix: use \"max_rel\" or "
                 "\"norm_rel\"") != std::string::npos);
    CHECK(m.find("gpu.zero3.tolerance: expected a number >= 0") != std::string::npos);
    CHECK(m.find("gpu.zero3.memory_mb: expected a number > 0") != std::string::npos);
  }
}

TEST_CASE(
    "a lab's outputs are compared with the reference's by scale, and every kind of wrong output "
    "fails") {
  GpuLabCase c;
  c.tolerance = 0.02;
  const auto ref = nlohmann::json::parse(R"({"y": [0.0, 10.0, -5.0], "dx": [1.0, 2.0]})");
  // Within 2% of the output's largest element, though 0.1 against 0.0 is no relative error at all.
  CHECK(compare_lab_values(nlohmann::json::parse(R"({"y": [0.1, 10.1, -5.0], "dx": [1.0, 2.0]})"),
                           ref, c)
            .ok);

  auto fails = [&](const char* student, const std::string& why) {
    Comparison cmp = compare_lab_values(nlohmann::json::parse(student), ref, c);
    CHECK_FALSE(cmp.ok);
    CHECK_MESSAGE(cmp.reason.find(why) != std::string::npos, cmp.reason);
  };
  fails(R"({"y": [0.0, 10.0, -5.0], "dx": [1.0, 2.5]})",
        "dx: max_rel error 0.25 over the tolerance 0.02");
  fails(R"({"y": [0.0, 10.0, -5.0]})", "dx: missing (the reference lab writes it)");
  fails(R"({"y": [0.0, 10.0], "dx": [1.0, 2.0]})", "y: 2 elements, the reference has 3");
  fails(R"({"y": [0.0, "nan", -5.0], "dx": [1.0, 2.0]})", "y: max_rel error nan");
  fails(R"({"y": "pass", "dx": [1.0, 2.0]})", "y: not an array of numbers");
  CHECK_FALSE(compare_lab_values(ref, nlohmann::json::object(), c)
                  .ok);  // a reference that wrote nothing judges nothing

  // norm_rel: a few far-off elements among many right ones count less than under max_rel.
  std::vector<double> want(100, 1.0), got(100, 1.0);
  got[0] = 1.3;
  c.error = LabError::norm_rel;
  c.tolerance = 0.05;
  CHECK(compare_lab_values({{"w", got}}, {{"w", want}}, c).ok);  // 0.3 / 10 = 0.03
  c.error = LabError::max_rel;
  CHECK_FALSE(compare_lab_values({{"w", got}}, {{"w", want}}, c).ok);  // 0.3 / 1
}

namespace {

// A stand-in for a lab binary: a shell script, run the way run_lab runs a lab.
fs::path fake_lab(const fs::path& dir, const std::string& name, const std::string& body) {
  fs::path p = dir / name;
  put(p, "#!/bin/sh\n" + body);
  ::chmod(p.c_str(), 0755);
  return p;
}

}  // namespace

TEST_CASE(
    "a lab that prints a passing RESULT line but writes no outputs gets nothing, one with the "
    "reference's outputs passes") {
  fs::path dir = fresh_dir("gpu_forged");
  ::chmod(dir.c_str(), 0755);
  GpuLabCase c;
  c.name = "gpu.tp_ffn";
  c.lab = "tp_ffn";
  c.points = 3;
  c.time_limit_s = 30;
  c.memory_mb = 1024;
  const std::string outputs = R"(printf '{"status": "ok", "values": {"y": [1.0, 2.0]}}' >&3
)";
  const CaseRun ref = run_lab(
      fake_lab(dir, "reference", "echo 'RESULT lab=tp_ffn impl=solution check=pass'\n" + outputs),
      c);
  REQUIRE_MESSAGE(ref.status == Status::passed, ref.reason << "\n" << ref.output);

  // The attack: the verdict a lab prints, with no outputs for the grader.
  const CaseRun forged = run_lab(
      fake_lab(dir, "forged", "echo 'RESULT lab=tp_ffn impl=student ranks=4 check=pass err=0'\n"),
      c);
  CaseGrade g = judge_lab(c, forged, ref);
  CHECK(g.status == Status::no_result);
  CHECK(g.score == 0);
  CHECK(g.max_score == 3);
  CHECK_MESSAGE(g.reason.find("results printed on stdout are not read") != std::string::npos,
                g.reason);

  // Outputs that are not the reference's, with a passing line beside them.
  const CaseRun wrong = run_lab(fake_lab(dir, "wrong", R"(echo 'RESULT lab=tp_ffn check=pass'
printf '{"status": "ok", "values": {"y": [1.0, 3.0]}}' >&3
)"),
                                c);
  g = judge_lab(c, wrong, ref);
  CHECK(g.status == Status::wrong);
  CHECK(g.score == 0);

  // The same outputs as the reference, and a lab that failed its own check: the grader's verdict
  // counts.
  const CaseRun right =
      run_lab(fake_lab(dir, "right", "echo 'RESULT lab=tp_ffn check=fail'\n" + outputs), c);
  g = judge_lab(c, right, ref);
  CHECK_MESSAGE(g.status == Status::passed, g.reason << "\n" << g.feedback);
  CHECK(g.score == 3);

  // A reference without a result makes the case not count, whatever the submission did.
  g = judge_lab(c, right, forged);
  CHECK(g.status == Status::reference_error);
}

TEST_CASE(
    "a run with device nodes has them and no address-space limit, other cases keep the limit") {
  RunSpec spec;
  spec.exe = "/bin/sh";
  spec.args = {"-c", "ulimit -v; test -c /dev/null && echo device-ok"};
  spec.wall_s = 30;
  spec.memory_bytes = 1ull << 30;
  RunOutcome o = run_process(spec);
  REQUIRE_MESSAGE(o.started, o.start_error);
  CHECK(o.out == std::to_string((1ull << 30) / 1024) + "\ndevice-ok\n");
  spec.devices = {"/dev/null"};
  o = run_process(spec);
  CHECK(o.out == "unlimited\ndevice-ok\n");
}

TEST_CASE("MGPU_GRADE_GPU=0 turns GPU grading off, without a device the reason says so") {
  const char* old = std::getenv("MGPU_GRADE_GPU");
  const std::string saved = old ? old : "";
  ::setenv("MGPU_GRADE_GPU", "0", 1);
  CHECK(gpu_labs_unavailable(this_project().own_tree).find("MGPU_GRADE_GPU=0") !=
        std::string::npos);
  if (old)
    ::setenv("MGPU_GRADE_GPU", saved.c_str(), 1);
  else
    ::unsetenv("MGPU_GRADE_GPU");
  if (!old && visible_cuda_devices() == 0)
    CHECK(gpu_labs_unavailable(this_project().own_tree) ==
          "no CUDA device is visible on this machine");
}

TEST_CASE("without a CUDA device every GPU case is skipped, shown as skipped, and not counted" *
          doctest::skip(!can_grade())) {
  fs::path dir = fresh_dir("gpu_skipped");
  // The toy chapters plus a gpu_labs section naming a real lab (it never runs here).
  std::ofstream(dir / "gpu.json") << "{\"chapters\": {}, " << kGpuSection << "}";
  fs::path json = dir / "grade.json", junit = dir / "junit.xml", gs = dir / "results.json";
  RunSpec spec;
  spec.exe = MGPU_GRADE_EXE;
  spec.args = toy_args({"grade", "--solution", "--json", json.string(), "--junit", junit.string(),
                        "--gradescope", gs.string(), "--rubric", (dir / "gpu.json").string(),
                        "--chapter", "gpu"});
  spec.isolate = false;
  spec.wall_s = 600;
  spec.merge_output = true;
  // Where a device is visible, force the path this test is about; elsewhere detection takes it.
  const bool device = visible_cuda_devices() > 0;
  if (device) spec.env = {{"MGPU_GRADE_GPU", "0"}};
  RunOutcome o = run_process(spec);
  INFO(o.out);
  REQUIRE(o.exit_code == 0);
  const std::string reason = device ? "GPU grading is turned off (MGPU_GRADE_GPU=0)"
                                    : "no CUDA device is visible on this machine";

  auto j = nlohmann::json::parse(read_text(json));
  CHECK(j["max_score"].get<double>() == 6);  // the toy chapters' points only
  CHECK(j["score"].get<double>() == 6);
  bool seen = false;
  for (const auto& ch : j["chapters"]) {
    if (ch["name"] != "gpu_labs") continue;
    seen = true;
    CHECK(ch["score"].get<double>() == 0);
    CHECK(ch["max_score"].get<double>() == 0);
    REQUIRE(ch["cases"].size() == 2);
    for (const auto& c : ch["cases"]) {
      CHECK(c["status"] == "skipped");
      CHECK(c["reason"] == reason);
      CHECK(c["max_score"].get<double>() == 0);
    }
  }
  CHECK(seen);
  CHECK(o.out.find("skipped         gpu.allreduce_bw") != std::string::npos);  // terminal table
  CHECK(o.out.find("GPU labs skipped: " + reason) != std::string::npos);       // and its note

  const std::string xml = read_text(junit);
  CHECK(xml.find(
            "<testsuite name=\"gpu_labs\" tests=\"2\" failures=\"0\" errors=\"0\" skipped=\"2\"") !=
        std::string::npos);
  CHECK(xml.find("<skipped message=\"" + reason + "\"/>") != std::string::npos);
  CHECK(xml.find("type=\"skipped\"") == std::string::npos);  // not a failure

  auto g = nlohmann::json::parse(read_text(gs));
  CHECK(g["score"].get<double>() == 6);
  int skipped_tests = 0;
  for (const auto& t : g["tests"]) {
    if (t["name"].get<std::string>().find("gpu.allreduce_bw") == std::string::npos) continue;
    ++skipped_tests;
    CHECK(t["max_score"].get<double>() == 0);
    CHECK(t["score"].get<double>() == 0);
    CHECK(t["name"].get<std::string>().find("(skipped") != std::string::npos);
    CHECK(t["status"] == "failed");  // 0 of 0 without a status would read as passed
    CHECK(t["output"].get<std::string>().rfind("skipped: " + reason, 0) == 0);
  }
  CHECK(skipped_tests == 2);
  CHECK(g["output"].get<std::string>().find("2 tests skipped") != std::string::npos);
}

TEST_CASE("--chapter filters leave the GPU labs out unless they name them" *
          doctest::skip(!can_grade())) {
  fs::path dir = fresh_dir("gpu_filtered");
  std::ofstream(dir / "gpu.json") << "{\"chapters\": {}, " << kGpuSection << "}";
  fs::path json = dir / "grade.json";
  RunOutcome o = grader(toy_args(
      {"grade", "--solution", "--json", json.string(), "--rubric", (dir / "gpu.json").string()}));
  INFO(o.out);
  REQUIRE(o.exit_code == 0);
  for (const auto& ch : nlohmann::json::parse(read_text(json))["chapters"])
    CHECK(ch["name"] != "gpu_labs");
}

TEST_CASE("the repository rubric's GPU lab manifests are exactly the labs' IMPL files") {
  Project p = this_project();
  Rubric r = load_rubric(p.root / "autograder" / "rubric.json");
  REQUIRE(r.gpu_labs.has_value());
  // gpu_labs/CMakeLists.txt declares each lab as `mgpu_add_gpu_lab(<lab> IMPL <file>...)`.
  std::map<std::string, std::vector<std::string>> declared;
  const std::string cmake = read_text(p.root / "gpu_labs" / "CMakeLists.txt");
  static const std::regex lab(R"(\nmgpu_add_gpu_lab\((\w+) IMPL ([^)]*)\))");
  for (std::sregex_iterator it(cmake.begin(), cmake.end(), lab), end; it != end; ++it) {
    std::istringstream files((*it)[2].str());
    for (std::string f; files >> f;) declared[(*it)[1]].push_back(f);
  }
  CHECK(!declared.empty());
  CHECK(r.gpu_labs->files == declared);
  for (const auto& [name, files] : r.gpu_labs->files)
    for (const auto& f : files)
      CHECK_MESSAGE(fs::is_regular_file(p.root / "gpu_labs" / name / f), name << "/" << f);
  for (const auto& c : r.gpu_labs->cases)
    CHECK_MESSAGE(r.gpu_labs->files.count(c.lab) == 1, c.name);
}

TEST_CASE(
    "submit also zips the GPU lab files that sit beside chapters/, as gpu_labs/<lab>/<file>") {
  fs::path dir = fresh_dir("submit_gpu");
  fs::create_directories(dir / "chapters" / "toy_a");
  fs::create_directories(dir / "gpu_labs" / "allreduce_bw");
  std::ofstream(dir / "chapters" / "toy_a" / "toy_a.cpp") << "// mine\n";
  std::ofstream(dir / "gpu_labs" / "allreduce_bw" / "ring.cpp") << "// my ring\n";
  std::ofstream(dir / "gpu_labs" / "allreduce_bw" / "main.cpp") << "// harness, not mine\n";
  std::ofstream(dir / "gpu.json") << "{\"chapters\": {}, " << kGpuSection << "}";
  Rubric r = load_rubrics(this_project().root / "autograder" / "rubric.json",
                          {fixtures() / "toy" / "rubric.json", dir / "gpu.json"});
  auto files = write_submission(r, dir / "chapters", dir / "upload.zip");
  CHECK(files ==
        std::vector<std::string>{"chapters/toy_a/toy_a.cpp", "gpu_labs/allreduce_bw/ring.cpp"});
}

TEST_CASE(
    "a student tree finds packages where the grader's own tree did: cache values are read exactly "
    "by name") {
  fs::path dir = fresh_dir("cache_value");
  put(dir / "CMakeCache.txt",
      "// comment\nCMAKE_PREFIX_PATH_EXTRA:STRING=wrong\nCMAKE_PREFIX_PATH:PATH=/opt/deps/root\n"
      "MGPU_NCCL_LIBRARY:FILEPATH=\n");
  CHECK(cache_value(dir, "CMAKE_PREFIX_PATH") == "/opt/deps/root");
  CHECK(cache_value(dir, "MGPU_NCCL_LIBRARY").empty());
  CHECK(cache_value(dir, "MGPU_NCCL_INCLUDE").empty());
  CHECK(cache_value(dir / "nowhere", "CMAKE_PREFIX_PATH").empty());
}

TEST_CASE(
    "grading two submissions runs the reference lab once: its outputs are cached by program and "
    "arguments") {
  fs::path dir = fresh_dir("gpu_reference_cache");
  ::chmod(dir.c_str(), 0755);
  // A reference tree whose lab writes a new number on every run, so a reused result shows.
  Project project{dir, dir / "tree", true};
  fs::create_directories(project.own_tree / "bin");
  const std::string lab_body =
      "printf '{\"status\": \"ok\", \"values\": {\"y\": [%s, 2.0]}}' \"$(date +%s%N)\" >&3\n";
  fake_lab(project.own_tree / "bin", "gpu_tp_ffn", lab_body);
  Rubric rubric;
  GradeOptions opts;
  opts.work_dir = dir / "work";
  GpuLabCase c;
  c.name = "gpu.tp_ffn";
  c.lab = "tp_ffn";
  c.points = 3;
  c.args = {"--check-d", "128"};
  c.time_limit_s = 30;
  c.memory_mb = 1024;
  auto first_value = [](const CaseRun& r) { return r.result["values"]["y"][0].get<double>(); };

  Reference reference(project, rubric, opts);
  const CaseRun a = reference.lab_run(c, 1);  // the first submission's grade
  REQUIRE_MESSAGE(a.status == Status::passed, a.reason << "\n" << a.output);
  const CaseRun b = reference.lab_run(c, 1);  // the second's
  CHECK(reference.lab_runs() == 1);
  CHECK(first_value(b) == first_value(a));
  CHECK(fs::exists(opts.work_dir / "reference" / "gpu_labs" /
                   ("gpu.tp_ffn-" + lab_args_key(c) + ".json")));

  // Another grader on the same work folder (the next batch, a rerun) reads it from disk.
  Reference later(project, rubric, opts);
  CHECK(first_value(later.lab_run(c, 1)) == first_value(a));
  CHECK(later.lab_runs() == 0);

  // Other arguments (another shape) are another result; so is a rebuilt lab program.
  GpuLabCase wider = c;
  wider.args = {"--check-d", "256"};
  Reference shapes(project, rubric, opts);
  const CaseRun w = shapes.lab_run(wider, 1);
  CHECK(shapes.lab_runs() == 1);
  CHECK(first_value(w) != first_value(a));
  // ... kept beside the first: a rubric that grades the same case name at another shape (a
  // private rubric, the next course) does not make this one run its reference again.
  Reference first_shape_again(project, rubric, opts);
  CHECK(first_value(first_shape_again.lab_run(c, 1)) == first_value(a));
  CHECK(first_shape_again.lab_runs() == 0);
  fake_lab(project.own_tree / "bin", "gpu_tp_ffn", "# rebuilt\n" + lab_body);
  Reference rebuilt(project, rubric, opts);
  CHECK(first_value(rebuilt.lab_run(c, 1)) != first_value(a));
  CHECK(rebuilt.lab_runs() == 1);

  // A reference lab without outputs is not remembered: the next submission tries it again.
  fake_lab(project.own_tree / "bin", "gpu_tp_ffn", "echo 'no outputs'\n");
  Reference failing(project, rubric, opts);
  CHECK(failing.lab_run(c, 1).status == Status::no_result);
  CHECK(failing.lab_run(c, 1).status == Status::no_result);
  CHECK(failing.lab_runs() == 2);
}

TEST_CASE(
    "the repository rubric grades each lab at small shapes: every timing shape given, and few "
    "timed steps") {
  Project p = this_project();
  Rubric r = load_rubric(p.root / "autograder" / "rubric.json");
  REQUIRE(r.gpu_labs.has_value());
  static const std::regex shape_option(R"re(add_shape_option\(app, "(\w+)")re");
  int shapes = 0;
  for (const auto& c : r.gpu_labs->cases) {
    INFO(c.name);
    std::map<std::string, std::string> args;
    for (std::size_t i = 0; i + 1 < c.args.size(); ++i) args[c.args[i]] = c.args[i + 1];
    // A lab's defaults are its timing shapes, sized for a whole GPU (ZeRO-3's takes GBs): the
    // rubric must override each one, or every graded run would take them.
    const std::string main = read_text(p.root / "gpu_labs" / c.lab / "main.cpp");
    for (std::sregex_iterator it(main.begin(), main.end(), shape_option), end; it != end; ++it) {
      const std::string option = "--" + (*it)[1].str();
      ++shapes;
      REQUIRE_MESSAGE(args.count(option) == 1, option << " is left at the lab's timing default");
      CHECK_MESSAGE(std::stoi(args[option]) <= 1024, option << " " << args[option]);
    }
    REQUIRE_MESSAGE(args.count("--iters") == 1, "the timed steps are left at the lab's default");
    CHECK(std::stoi(args["--iters"]) <= 2);
    if (args.count("--max-bytes")) CHECK(std::stoll(args["--max-bytes"]) <= (16ll << 20));
  }
  CHECK(shapes >= 6);  // tp_ffn's three and zero3's three: the pattern still finds them
  CHECK(r.gpu_labs->labs_per_gpu == 1);
}
