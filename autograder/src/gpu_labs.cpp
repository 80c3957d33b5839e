// GPU labs in the grade: rubric section, device detection, and running the lab binaries of the
// reference and of the submission. A lab judges itself (it compares with a CPU reference and
// prints check=pass|fail|not_implemented); the grader turns that verdict into points.
#include "gpu_labs.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <regex>
#include <set>
#include <sstream>

#include "pristine.hpp"
#include "runner.hpp"
#include "util.hpp"

namespace fs = std::filesystem;

namespace mgpu::grade {
namespace {

std::string err(const std::string& file, const std::string& field, const std::string& problem, const std::string& fix) {
  return fmt::format("{}: {}: {}; fix: {}", file, field, problem, fix);
}

void known(const nlohmann::ordered_json& obj, const std::string& file, const std::string& field,
           const std::set<std::string>& keys, std::vector<std::string>& errors) {
  for (const auto& [k, v] : obj.items())
    if (!keys.count(k)) {
      std::string list;
      for (const auto& n : keys) list += (list.empty() ? "" : ", ") + n;
      errors.push_back(err(file, field + "." + k, "unknown field", "remove it or use one of: " + list));
    }
}

bool plain_name(const std::string& s) {
  return !s.empty() && s.find('/') == std::string::npos && s.find("..") == std::string::npos && s[0] != '.';
}

// A skipped case: not run, worth nothing either way.
CaseGrade skipped(const GpuLabCase& c, const std::string& reason) {
  CaseGrade g;
  g.name = c.name;
  g.chapter = "gpu_labs";
  g.visibility = c.visibility;
  g.status = Status::skipped;
  g.reason = reason;
  g.feedback = "not run here; it counts neither toward the score nor toward the maximum";
  return g;
}

// One run of a lab binary: the process outcome, classified like a case run.
struct LabRun {
  Status status = Status::no_result;
  std::string reason;
  std::string output;
  double seconds = 0;
};

LabRun run_lab(const fs::path& exe, const GpuLabCase& c) {
  LabRun r;
  RunSpec spec;
  spec.exe = exe;
  spec.args = c.args;
  spec.wall_s = c.time_limit_s;
  // Not isolated: the CUDA driver needs a large address space and its environment
  // (CUDA_VISIBLE_DEVICES, LD_LIBRARY_PATH); the wall-clock limit still kills the process group.
  spec.isolate = false;
  spec.merge_output = true;
  spec.output_cap = 256 * 1024;
  RunOutcome o = run_process(spec);
  r.seconds = o.wall_s;
  r.output = o.out;
  if (!o.started) {
    r.status = Status::crashed;
    r.reason = o.start_error;
    return r;
  }
  if (o.timed_out) {
    r.status = Status::timeout;
    r.reason = fmt::format("exceeded the {:g} s time limit and was stopped", c.time_limit_s);
    return r;
  }
  auto res = parse_lab_result(o.out);
  if (!res) {
    r.status = o.signal ? Status::crashed : Status::no_result;
    r.reason = o.signal ? "killed by " + signal_description(o.signal)
                        : fmt::format("exited with code {} without a RESULT line", o.exit_code);
    return r;
  }
  if (res->check == "pass") {
    r.status = Status::passed;
  } else if (res->check == "not_implemented") {
    r.status = Status::not_implemented;
    r.reason = "the lab reports check=not_implemented";
  } else if (res->check == "fail") {
    r.status = Status::wrong;
    r.reason = "the lab's own check failed";
    if (auto e = res->fields.find("err"); e != res->fields.end()) r.reason += " (max rel error " + e->second + ")";
  } else {
    // check=error: the lab stopped on an exception and printed its message as "error: ...".
    r.status = Status::crashed;
    r.reason = "the lab reports check=" + res->check;
    std::istringstream lines(o.out);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("error: ", 0) == 0 || line.rfind("Error: ", 0) == 0) {
        r.reason += ": " + line.substr(7);
        break;
      }
  }
  return r;
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

void parse_gpu_labs(const nlohmann::ordered_json& v, const std::string& file, GpuLabsSpec& out,
                    std::vector<std::string>& errors) {
  const std::string field = "gpu_labs";
  if (!v.is_object()) {
    errors.push_back(err(file, field, "expected an object", R"(write {"files": {"tp_ffn": ["tp_ffn.cpp"]}, "cases": {...}})"));
    return;
  }
  known(v, file, field, {"title", "files", "cases", "description"}, errors);
  if (v.contains("title")) {
    if (v["title"].is_string()) out.title = v["title"].get<std::string>();
    else errors.push_back(err(file, field + ".title", "expected a string", "write a title such as \"GPU labs\""));
  }
  if (v.contains("files")) {
    if (!v["files"].is_object()) {
      errors.push_back(err(file, field + ".files", "expected an object of lab -> file names", R"(write {"tp_ffn": ["tp_ffn.cpp", "gelu.cu"]})"));
    } else {
      for (const auto& [lab, fl] : v["files"].items()) {
        bool ok = plain_name(lab) && fl.is_array() && !fl.empty();
        for (const auto& f : fl) ok = ok && f.is_string() && plain_name(f.get<std::string>());
        if (!ok) errors.push_back(err(file, field + ".files." + lab, "expected a lab folder name and a non-empty array of plain file names", "list the files students edit in gpu_labs/<lab>/"));
        else
          for (const auto& f : fl) out.files[lab].push_back(f.get<std::string>());
      }
    }
  }
  if (!v.contains("cases") || !v["cases"].is_object()) {
    errors.push_back(err(file, field + ".cases", "missing or not an object", R"(write {"gpu.tp_ffn": {"lab": "tp_ffn", "points": 2}})"));
    return;
  }
  for (const auto& [name, c] : v["cases"].items()) {
    std::string cf = field + ".cases." + name;
    if (!c.is_object()) {
      errors.push_back(err(file, cf, "expected an object", R"(write {"lab": "tp_ffn", "points": 2})"));
      continue;
    }
    known(c, file, cf, {"lab", "points", "visibility", "args", "time_limit_s", "description"}, errors);
    GpuLabCase g;
    g.name = name;
    if (c.contains("lab") && c["lab"].is_string() && out.files.count(c["lab"].get<std::string>())) g.lab = c["lab"].get<std::string>();
    else errors.push_back(err(file, cf + ".lab", "missing, or not a lab listed in gpu_labs.files", "name a lab folder that gpu_labs.files lists"));
    if (c.contains("points")) {
      if (c["points"].is_number() && c["points"].get<double>() >= 0) g.points = c["points"].get<double>();
      else errors.push_back(err(file, cf + ".points", "expected a number >= 0", "write e.g. 2"));
    }
    if (c.contains("visibility")) {
      if (auto v = parse_visibility(c["visibility"].is_string() ? c["visibility"].get<std::string>() : "")) g.visibility = *v;
      else errors.push_back(err(file, cf + ".visibility", "unknown visibility " + c["visibility"].dump(), kVisibilityFix));
    }
    if (c.contains("args")) {
      bool ok = c["args"].is_array();
      if (ok)
        for (const auto& a : c["args"]) ok = ok && a.is_string();
      if (ok)
        for (const auto& a : c["args"]) g.args.push_back(a.get<std::string>());
      else errors.push_back(err(file, cf + ".args", "expected an array of strings", R"(write ["--ranks", "4", "--backend", "emulated"])"));
    }
    if (c.contains("time_limit_s")) {
      if (c["time_limit_s"].is_number() && c["time_limit_s"].get<double>() > 0) g.time_limit_s = c["time_limit_s"].get<double>();
      else errors.push_back(err(file, cf + ".time_limit_s", "expected a number > 0", "write e.g. 300"));
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
    return fmt::format("CUDA is not built in {} (the GPU labs need -DMGPU_CUDA=ON and the CUDA toolkit)",
                       reference_tree.filename().string());
  return "";
}

std::optional<LabResult> parse_lab_result(const std::string& output) {
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("RESULT ", 0) != 0) continue;
    LabResult r;
    std::istringstream words(line.substr(7));
    for (std::string w; words >> w;)
      if (auto eq = w.find('='); eq != std::string::npos) r.fields[w.substr(0, eq)] = w.substr(eq + 1);
    if (auto c = r.fields.find("check"); c != r.fields.end()) r.check = c->second;
    return r;
  }
  return std::nullopt;
}

ChapterGrade grade_gpu_labs(const GpuLabsSpec& spec, const fs::path& submission, const std::string& build_name,
                            const Project& project, const fs::path& reference_tree, const GradeOptions& opts,
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
    stage_gpu_files(spec, submission, base / "src" / "unzipped", staged, project, pristine_root(project, opts.work_dir));
    student_tree = base / "build-gpu";
    tree_error = configure_tree({student_tree, "student", base / "src" / "chapters", opts.cases_dirs}, project, staged);
  }
  std::map<std::string, TargetBuild> ref_builds, student_builds;
  for (const auto& c : spec.cases) {
    CaseGrade g;
    g.name = c.name;
    g.chapter = cg.name;
    g.visibility = c.visibility;
    g.max_score = c.points;
    const std::string target = "gpu_" + c.lab;
    if (!ref_builds.count(c.lab)) ref_builds[c.lab] = build_target(reference_tree, target, opts.jobs, project);
    const TargetBuild& rb = ref_builds[c.lab];
    LabRun ref;
    if (rb.ok) ref = run_lab(reference_tree / "bin" / target, c);
    if (!rb.ok || ref.status != Status::passed) {
      g.status = Status::reference_error;
      g.reason = rb.ok ? "the reference lab did not pass (" + std::string(status_name(ref.status)) + ": " + ref.reason + "); not counted"
                       : "the reference lab does not build: " + rb.first_error;
      g.feedback = rb.ok ? ref.output : rb.log;
      cg.cases.push_back(std::move(g));
      continue;
    }
    LabRun st = ref;
    if (!solution) {
      if (!tree_error.empty()) {
        student_builds[c.lab] = TargetBuild{false, "the CUDA build could not be configured", tree_error, 0};
      } else if (!student_builds.count(c.lab)) {
        student_builds[c.lab] = build_target(student_tree, target, opts.jobs, project);
      }
      const TargetBuild& sb = student_builds[c.lab];
      if (!sb.ok) {
        g.status = Status::build_failed;
        g.reason = sb.first_error;
        g.feedback = sb.log;
        cg.cases.push_back(std::move(g));
        continue;
      }
      st = run_lab(student_tree / "bin" / target, c);
    }
    g.status = st.status;
    g.reason = st.reason;
    g.seconds = st.seconds;
    g.score = st.status == Status::passed ? c.points : 0;
    g.feedback = (st.reason.empty() ? "" : st.reason + "\n") + "--- lab output ---\n" + st.output;
    cg.cases.push_back(std::move(g));
  }
  return cg;
}

}  // namespace mgpu::grade
