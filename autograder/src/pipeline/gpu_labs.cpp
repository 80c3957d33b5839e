// The GPU lab kind: device detection, the labs' CUDA tree and builds, and running and judging
// a lab like a case program: isolated, writing its outputs to a descriptor the grader opened.
// The grader compares the submission's outputs with the reference's; what a lab prints (its own
// check included) is only feedback.
#include "pipeline/gpu_labs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <regex>

#include "pipeline/compare.hpp"
#include "sandbox/gpu_slots.hpp"
#include "sandbox/runner.hpp"
#include "util.hpp"

namespace fs = std::filesystem;

namespace mgpu::grade {
namespace {

// A case's grade before anything ran: its name, place and points.
CaseGrade lab_case(const GpuLabCase& c) {
  CaseGrade g;
  g.name = c.name;
  g.chapter = "gpu_labs";
  g.visibility = c.visibility;
  g.max_score = c.points;
  return g;
}

}  // namespace

bool gpu_labs_selected(const Rubric& rubric, const std::vector<std::string>& filters) {
  if (!rubric.gpu_labs || rubric.gpu_labs->cases.empty()) return false;
  if (filters.empty()) return true;
  for (const auto& f : filters)
    if (std::string("gpu_labs").rfind(f, 0) == 0) return true;
  return false;
}

GpuLabs select_gpu_labs(const Rubric& rubric, const std::vector<std::string>& filters,
                        const fs::path& reference_tree) {
  GpuLabs labs;
  if (!gpu_labs_selected(rubric, filters)) return labs;
  labs.spec = &*rubric.gpu_labs;
  labs.unavailable = gpu_labs_unavailable(reference_tree);
  return labs;
}

TreeConfig lab_tree_config(const fs::path& base, const Staged& st) {
  TreeConfig cfg{base / "build-gpu", "student", st.chapters_dir, {}};
  cfg.gpu_student_dir = st.gpu_labs_dir;
  return cfg;
}

std::map<std::string, TargetBuild> build_labs(const GpuLabsSpec& spec, const fs::path& tree,
                                              const std::string& tree_error, int jobs,
                                              const Project& project) {
  std::map<std::string, TargetBuild> builds;
  for (const auto& c : spec.cases) {
    const std::string& lab = c.lab;
    if (builds.count(lab)) continue;
    if (!tree_error.empty()) {
      builds[lab] = TargetBuild{false, "the CUDA build could not be configured", tree_error, 0};
      continue;
    }
    Progress p(fmt::format("building the GPU lab {}", lab));
    builds[lab] = build_target(tree, lab_target(lab), jobs, project);
  }
  return builds;
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

CaseRun run_lab(const fs::path& exe, const GpuLabCase& c, int labs_per_gpu) {
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
  const GpuSlot slot(gpu_slot_folder(), gpu_slot_device(), labs_per_gpu);
  return classify_run(run_process(spec), c.time_limit_s, c.memory_mb);
}

std::string lab_args_key(const GpuLabCase& c) {
  std::string args;
  for (const auto& a : c.args) args += a + '\0';  // "\0" keeps ["a b"] apart from ["a", "b"]
  return fmt::format("{:016x}", fnv1a64(args));
}

std::string reference_lab_stamp(const fs::path& exe, const GpuLabCase& c) {
  return fmt::format("{}-{}-{}", file_hash(exe), lab_args_key(c), visible_cuda_devices());
}

CaseRun run_or_load_reference_lab(const fs::path& exe, const GpuLabCase& c, const fs::path& cache,
                                  int labs_per_gpu, bool& ran) {
  const std::string stamp = reference_lab_stamp(exe, c);
  ran = false;
  if (auto cached = cached_reference(cache, stamp)) return std::move(*cached);
  Progress p(
      fmt::format("running the reference's GPU lab {} (its outputs are then cached)", c.name));
  ran = true;
  CaseRun run = run_lab(exe, c, labs_per_gpu);
  store_reference(cache, stamp, c.name, run);
  return run;
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

CaseGrade skipped_lab(const GpuLabCase& c, const std::string& reason) {
  CaseGrade g = lab_case(c);
  g.max_score = 0;
  g.status = Status::skipped;
  g.reason = reason;
  g.feedback = "not run here; it counts neither toward the score nor toward the maximum";
  return g;
}

CaseGrade unbuilt_lab(const GpuLabCase& c, Status status, const std::string& reason,
                      const std::string& log) {
  CaseGrade g = lab_case(c);
  g.status = status;
  g.reason = reason;
  g.feedback = log;
  return g;
}

}  // namespace mgpu::grade
