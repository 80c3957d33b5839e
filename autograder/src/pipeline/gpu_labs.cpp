// GPU labs in the grade: rubric section, device detection, and running the lab binaries of the
// reference and of the submission like case programs: isolated, each writing its outputs to a
// descriptor the grader opened. The grader compares the submission's outputs with the
// reference's; what a lab prints (its own check included) is only feedback.
#include "pipeline/gpu_labs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <set>

#include "pipeline/compare.hpp"
#include "pipeline/pristine.hpp"
#include "sandbox/runner.hpp"
#include "util.hpp"

namespace fs = std::filesystem;

namespace mgpu::grade {
namespace {

std::string err(const std::string& file, const std::string& field, const std::string& problem,
                const std::string& fix) {
  return fmt::format("{}: {}: {}; fix: {}", file, field, problem, fix);
}

void known(const nlohmann::ordered_json& obj, const std::string& file, const std::string& field,
           const std::set<std::string>& keys, std::vector<std::string>& errors) {
  for (const auto& [k, v] : obj.items())
    if (!keys.count(k)) {
      std::string list;
      for (const auto& n : keys) list += (list.empty() ? "" : ", ") + n;
      errors.push_back(
          err(file, field + "." + k, "unknown field", "remove it or use one of: " + list));
    }
}

bool plain_name(const std::string& s) {
  return !s.empty() && s.find('/') == std::string::npos && s.find("..") == std::string::npos &&
         s[0] != '.';
}

// A case's grade before anything ran: its name, place and points.
CaseGrade lab_case(const GpuLabCase& c) {
  CaseGrade g;
  g.name = c.name;
  g.chapter = "gpu_labs";
  g.visibility = c.visibility;
  g.max_score = c.points;
  return g;
}

// A skipped case: not run, worth nothing either way.
CaseGrade skipped(const GpuLabCase& c, const std::string& reason) {
  CaseGrade g = lab_case(c);
  g.max_score = 0;
  g.status = Status::skipped;
  g.reason = reason;
  g.feedback = "not run here; it counts neither toward the score nor toward the maximum";
  return g;
}

// A case decided by a build: the reference's (not counted) or the submission's.
CaseGrade build_failure(const GpuLabCase& c, Status status, const std::string& reason,
                        const std::string& log) {
  CaseGrade g = lab_case(c);
  g.status = status;
  g.reason = reason;
  g.feedback = log;
  return g;
}

// Copies the pristine IMPL files of every lab, then the submission's, into dest/<lab>/.
void stage_gpu_files(const GpuLabsSpec& spec, const fs::path& submission, const fs::path& unzipped,
                     const fs::path& dest, const Project& project, const fs::path& pristine) {
  fs::path top = fs::is_regular_file(submission) ? unzipped : submission;
  std::vector<fs::path> roots{top / "gpu_labs", top};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(top, ec))
    if (e.is_directory() && !e.is_symlink()) roots.push_back(e.path() / "gpu_labs");
  for (const auto& [lab, files] : spec.files) {
    fs::create_directories(dest / lab);
    for (const auto& f : files) {
      std::string text = read_text(pristine_dir(project, pristine, fs::path("gpu_labs") / lab) / f);
      for (const auto& r : roots) {
        fs::path p = r / lab / f;
        if (!fs::is_symlink(p) && fs::is_regular_file(p) && fs::file_size(p) <= (1u << 20)) {
          text = read_text(p);
          break;
        }
      }
      write_if_changed(dest / lab / f, text);
    }
  }
}

}  // namespace

bool gpu_labs_selected(const Rubric& rubric, const std::vector<std::string>& filters) {
  if (!rubric.gpu_labs || rubric.gpu_labs->cases.empty()) return false;
  if (filters.empty()) return true;
  for (const auto& f : filters)
    if (std::string("gpu_labs").rfind(f, 0) == 0) return true;
  return false;
}

// Longer than a screen for the reason parse_rubric is: the section's fields, each with its check.
void parse_gpu_labs(const nlohmann::ordered_json& v, const std::string& file, GpuLabsSpec& out,
                    std::vector<std::string>& errors) {
  const std::string field = "gpu_labs";
  if (!v.is_object()) {
    errors.push_back(err(file, field, "expected an object",
                         R"(write {"files": {"tp_ffn": ["tp_ffn.cpp"]}, "cases": {...}})"));
    return;
  }
  known(v, file, field, {"title", "files", "cases", "description"}, errors);
  if (v.contains("title")) {
    if (v["title"].is_string())
      out.title = v["title"].get<std::string>();
    else
      errors.push_back(
          err(file, field + ".title", "expected a string", "write a title such as \"GPU labs\""));
  }
  if (v.contains("files")) {
    if (!v["files"].is_object()) {
      errors.push_back(err(file, field + ".files", "expected an object of lab -> file names",
                           R"(write {"tp_ffn": ["tp_ffn.cpp", "gelu.cu"]})"));
    } else {
      for (const auto& [lab, fl] : v["files"].items()) {
        bool ok = plain_name(lab) && fl.is_array() && !fl.empty();
        for (const auto& f : fl) ok = ok && f.is_string() && plain_name(f.get<std::string>());
        if (!ok)
          errors.push_back(
              err(file, field + ".files." + lab,
                  "expected a lab folder name and a non-empty array of plain file names",
                  "list the files students edit in gpu_labs/<lab>/"));
        else
          for (const auto& f : fl) out.files[lab].push_back(f.get<std::string>());
      }
    }
  }
  if (!v.contains("cases") || !v["cases"].is_object()) {
    errors.push_back(err(file, field + ".cases", "missing or not an object",
                         R"(write {"gpu.tp_ffn": {"lab": "tp_ffn", "points": 2}})"));
    return;
  }
  for (const auto& [name, c] : v["cases"].items()) {
    std::string cf = field + ".cases." + name;
    if (!c.is_object()) {
      errors.push_back(
          err(file, cf, "expected an object", R"(write {"lab": "tp_ffn", "points": 2})"));
      continue;
    }
    known(c, file, cf,
          {"lab", "points", "visibility", "args", "time_limit_s", "memory_mb", "error", "tolerance",
           "description"},
          errors);
    GpuLabCase g;
    g.name = name;
    if (c.contains("lab") && c["lab"].is_string() && out.files.count(c["lab"].get<std::string>()))
      g.lab = c["lab"].get<std::string>();
    else
      errors.push_back(err(file, cf + ".lab", "missing, or not a lab listed in gpu_labs.files",
                           "name a lab folder that gpu_labs.files lists"));
    if (c.contains("points")) {
      if (c["points"].is_number() && c["points"].get<double>() >= 0)
        g.points = c["points"].get<double>();
      else
        errors.push_back(err(file, cf + ".points", "expected a number >= 0", "write e.g. 2"));
    }
    if (c.contains("visibility")) {
      if (auto v = parse_visibility(c["visibility"].is_string() ? c["visibility"].get<std::string>()
                                                                : ""))
        g.visibility = *v;
      else
        errors.push_back(err(file, cf + ".visibility",
                             "unknown visibility " + c["visibility"].dump(), kVisibilityFix));
    }
    if (c.contains("args")) {
      bool ok = c["args"].is_array();
      if (ok)
        for (const auto& a : c["args"]) ok = ok && a.is_string();
      if (ok)
        for (const auto& a : c["args"]) g.args.push_back(a.get<std::string>());
      else
        errors.push_back(err(file, cf + ".args", "expected an array of strings",
                             R"(write ["--ranks", "4", "--backend", "emulated"])"));
    }
    if (c.contains("time_limit_s")) {
      if (c["time_limit_s"].is_number() && c["time_limit_s"].get<double>() > 0)
        g.time_limit_s = c["time_limit_s"].get<double>();
      else
        errors.push_back(
            err(file, cf + ".time_limit_s", "expected a number > 0", "write e.g. 300"));
    }
    if (c.contains("memory_mb")) {
      if (c["memory_mb"].is_number() && c["memory_mb"].get<double>() > 0)
        g.memory_mb = c["memory_mb"].get<double>();
      else
        errors.push_back(err(file, cf + ".memory_mb", "expected a number > 0", "write e.g. 16384"));
    }
    if (c.contains("error")) {
      const std::string e = c["error"].is_string() ? c["error"].get<std::string>() : "";
      if (e == "max_rel")
        g.error = LabError::max_rel;
      else if (e == "norm_rel")
        g.error = LabError::norm_rel;
      else
        errors.push_back(err(file, cf + ".error", "unknown error measure " + c["error"].dump(),
                             R"(use "max_rel" or "norm_rel")"));
    }
    if (c.contains("tolerance")) {
      if (c["tolerance"].is_number() && c["tolerance"].get<double>() >= 0)
        g.tolerance = c["tolerance"].get<double>();
      else
        errors.push_back(err(file, cf + ".tolerance", "expected a number >= 0", "write e.g. 0.02"));
    }
    out.cases.push_back(std::move(g));
  }
}

int visible_cuda_devices() {
  if (const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::string s = cvd;
    if (s.empty() || s == "-1" || s == "NoDevFiles") return 0;
  }
  int n = 0;
  std::error_code ec;
  static const std::regex node(R"(nvidia[0-9]+)");
  for (const auto& e : fs::directory_iterator("/dev", ec))
    if (std::regex_match(e.path().filename().string(), node)) ++n;
  return n;
}

std::string gpu_labs_unavailable(const fs::path& reference_tree) {
  const char* force = std::getenv("MGPU_GRADE_GPU");
  std::string f = force ? force : "";
  if (f == "0") return "GPU grading is turned off (MGPU_GRADE_GPU=0)";
  if (f != "1" && visible_cuda_devices() == 0) return "no CUDA device is visible on this machine";
  std::error_code ec;
  if (!fs::is_directory(reference_tree / "gpu_labs", ec))
    return fmt::format(
        "CUDA is not built in {} (the GPU labs need -DMGPU_CUDA=ON and the CUDA toolkit)",
        reference_tree.filename().string());
  return "";
}

std::vector<fs::path> gpu_device_nodes() {
  std::vector<fs::path> nodes;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev", ec))
    if (e.path().filename().string().rfind("nvidia", 0) == 0) nodes.push_back(e.path());
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

CaseRun run_lab(const fs::path& exe, const GpuLabCase& c) {
  RunSpec spec;
  spec.exe = exe;
  spec.args = c.args;
  spec.args.insert(spec.args.end(), {"--result-fd", "3"});
  spec.result_fd = 3;
  spec.wall_s = c.time_limit_s;
  spec.memory_bytes = static_cast<std::uint64_t>(c.memory_mb * 1024 * 1024);
  spec.devices = gpu_device_nodes();
  spec.open_files = 1024;  // the driver, cuBLAS and NCCL open many
  spec.output_cap = 256 * 1024;
  spec.merge_output = true;
  // The devices the grader was given, and nothing else of its environment.
  for (const char* var : {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"})
    if (const char* v = std::getenv(var)) spec.env.emplace_back(var, v);
  return classify_run(run_process(spec), c.time_limit_s, c.memory_mb);
}

namespace {

// The error of one output by the case's measure; NaN when either side has a NaN.
double lab_error(const std::vector<double>& a, const std::vector<double>& b, LabError measure) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return std::nan("");
    const double d = std::fabs(a[i] - b[i]);
    if (measure == LabError::max_rel) {
      diff = std::max(diff, d);
      scale = std::max(scale, std::fabs(b[i]));
    } else {
      diff += d * d;
      scale += b[i] * b[i];
    }
  }
  if (std::isnan(diff)) return diff;  // inf - inf
  if (scale == 0) return diff == 0 ? 0 : INFINITY;
  return measure == LabError::max_rel ? diff / scale : std::sqrt(diff / scale);
}

// A JSON array of numbers ("nan", "inf" as text); false if anything else is in it.
bool decode_array(const nlohmann::json& j, std::vector<double>& out) {
  if (!j.is_array()) return false;
  out.resize(j.size());
  for (std::size_t i = 0; i < j.size(); ++i)
    if (!decode_number(j[i], out[i])) return false;
  return true;
}

}  // namespace

Comparison compare_lab_values(const nlohmann::json& student, const nlohmann::json& reference,
                              const GpuLabCase& c) {
  Comparison cmp;
  const char* measure = c.error == LabError::max_rel ? "max_rel" : "norm_rel";
  cmp.tolerances = fmt::format("every output: {} error <= {:g}", measure, c.tolerance);
  auto fail = [&](const std::string& line) {
    cmp.ok = false;
    cmp.mismatches.push_back(line);
    if (cmp.reason.empty()) cmp.reason = line;
  };
  if (!reference.is_object() || reference.empty()) {
    fail("the reference lab wrote no outputs");
    return cmp;
  }
  for (const auto& [name, ref] : reference.items()) {
    std::vector<double> want, got;
    if (!decode_array(ref, want)) {
      fail(fmt::format("{}: the reference's output is not an array of numbers", name));
      continue;
    }
    if (!student.is_object() || !student.contains(name)) {
      fail(fmt::format("{}: missing (the reference lab writes it)", name));
      continue;
    }
    if (!decode_array(student[name], got)) {
      fail(fmt::format("{}: not an array of numbers", name));
      continue;
    }
    if (got.size() != want.size()) {
      fail(fmt::format("{}: {} elements, the reference has {}", name, got.size(), want.size()));
      continue;
    }
    const double e = lab_error(got, want, c.error);
    cmp.max_rel_error = std::isnan(e) || std::isnan(cmp.max_rel_error)
                            ? std::nan("")
                            : std::max(cmp.max_rel_error, e);
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (std::isnan(got[i]) && !std::isnan(want[i])) ++cmp.nan_count;
      if (!std::isnan(got[i]) && !std::isnan(want[i]))
        cmp.max_abs_error = std::max(cmp.max_abs_error, std::fabs(got[i] - want[i]));
    }
    if (!(e <= c.tolerance))
      fail(fmt::format("{}: {} error {:.3g} over the tolerance {:g}", name, measure, e,
                       c.tolerance));
  }
  return cmp;
}

CaseGrade judge_lab(const GpuLabCase& c, const CaseRun& student, const CaseRun& reference) {
  CaseGrade g = lab_case(c);
  g.seconds = student.seconds;
  if (decided_by_runs(g, student, reference)) return g;
  try {
    const Comparison cmp =
        compare_lab_values(student.result.value("values", nlohmann::json::object()),
                           reference.result.value("values", nlohmann::json::object()), c);
    g.status = cmp.ok ? Status::passed : Status::wrong;
    g.reason = cmp.reason;
    g.score = cmp.ok ? c.points : 0;
    g.feedback = cmp.detail() + "\n" + student.output;
  } catch (const std::exception& e) {
    // classify_run hands over only checked documents; should the judge throw anyway, it costs
    // this case, not the grade.
    g.status = Status::no_result;
    g.score = 0;
    g.reason = "the grader could not judge its outputs (" + truncate_utf8(e.what(), 200) + ")";
    g.feedback = g.reason + "\n" + student.output;
  }
  return g;
}

ChapterGrade grade_gpu_labs(const GpuLabsSpec& spec, const fs::path& submission,
                            const std::string& build_name, const Project& project,
                            const fs::path& reference_tree, const GradeOptions& opts,
                            bool solution) {
  ChapterGrade cg;
  cg.name = "gpu_labs";
  cg.title = spec.title;
  if (std::string why = gpu_labs_unavailable(reference_tree); !why.empty()) {
    for (const auto& c : spec.cases) cg.cases.push_back(skipped(c, why));
    return cg;
  }
  // The submission's labs: a CUDA student tree whose IMPL files come from the staged folder.
  fs::path base = opts.work_dir / "student" / safe_name(build_name);
  fs::path student_tree = reference_tree;
  std::string tree_error;
  if (!solution) {
    fs::path staged = base / "src" / "gpu_labs";
    stage_gpu_files(spec, submission, base / "src" / "unzipped", staged, project,
                    pristine_root(project, opts.work_dir));
    student_tree = base / "build-gpu";
    tree_error =
        configure_tree({student_tree, "student", base / "src" / "chapters", {}}, project, staged);
  }
  std::map<std::string, TargetBuild> ref_builds, student_builds;
  for (const auto& c : spec.cases) {
    const std::string target = "gpu_" + c.lab;
    if (!ref_builds.count(c.lab))
      ref_builds[c.lab] = build_target(reference_tree, target, opts.jobs, project);
    const TargetBuild& rb = ref_builds[c.lab];
    if (!rb.ok) {
      cg.cases.push_back(build_failure(c, Status::reference_error,
                                       "the reference lab does not build: " + rb.first_error,
                                       rb.log));
      continue;
    }
    const CaseRun ref = run_lab(reference_tree / "bin" / target, c);
    if (solution || ref.status != Status::passed) {
      cg.cases.push_back(judge_lab(c, ref, ref));
      continue;
    }
    if (!tree_error.empty()) {
      student_builds[c.lab] =
          TargetBuild{false, "the CUDA build could not be configured", tree_error, 0};
    } else if (!student_builds.count(c.lab)) {
      student_builds[c.lab] = build_target(student_tree, target, opts.jobs, project);
    }
    const TargetBuild& sb = student_builds[c.lab];
    if (!sb.ok) {
      cg.cases.push_back(build_failure(c, Status::build_failed, sb.first_error, sb.log));
      continue;
    }
    cg.cases.push_back(judge_lab(c, run_lab(student_tree / "bin" / target, c), ref));
  }
  return cg;
}

}  // namespace mgpu::grade
