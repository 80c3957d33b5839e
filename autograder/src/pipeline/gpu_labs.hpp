// GPU labs in the grade: the rubric's "gpu_labs" section, detection of a usable CUDA device, and
// grading of the lab binaries (gpu_labs/, bin/gpu_<lab>) like case programs: each runs isolated
// with the GPU's device nodes and writes its outputs to the grader's descriptor (--result-fd),
// and the grader compares them with the reference lab's. Without a device, or without a CUDA
// build, every GPU case is reported as skipped and counts for nothing.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grade.hpp"
#include "pipeline/build.hpp"
#include "pipeline/compare.hpp"
#include "report/model.hpp"
#include "rubric/rubric.hpp"

namespace mgpu::grade {

/// Reads the rubric's "gpu_labs" section into `out`; each problem is appended to `errors` as
/// "FILE: FIELD: problem; fix: ...". Unknown fields are errors, as everywhere in the rubric.
void parse_gpu_labs(const nlohmann::ordered_json& section, const std::string& file,
                    GpuLabsSpec& out, std::vector<std::string>& errors);

/// True when a grade has the GPU lab block (a chapter named "gpu_labs"): the rubric has GPU cases
/// and there is no --chapter filter, or one that "gpu_labs" starts with.
bool gpu_labs_selected(const Rubric& rubric, const std::vector<std::string>& filters);

/// CUDA devices this process may use: the /dev/nvidia<N> nodes, or none when CUDA_VISIBLE_DEVICES
/// hides them all ("", "-1", "NoDevFiles").
int visible_cuda_devices();

/// Why the GPU labs cannot be graded here ("" when they can): MGPU_GRADE_GPU=0 in the environment,
/// no CUDA device, or a reference tree built without CUDA (no gpu_labs/ in it). MGPU_GRADE_GPU=1
/// skips the device check (for containers that hide /dev but still reach a GPU).
std::string gpu_labs_unavailable(const std::filesystem::path& reference_tree);

/// The device nodes a lab needs: every /dev/nvidia* entry (the GPUs, nvidiactl, nvidia-uvm, ...).
std::vector<std::filesystem::path> gpu_device_nodes();

/// Runs a lab binary as a case: isolated with the device nodes, `c.args` plus --result-fd 3, the
/// case's time and memory limits. A lab that writes nothing there has no result, whatever it
/// prints.
CaseRun run_lab(const std::filesystem::path& exe, const GpuLabCase& c);

/// Every output the reference lab wrote against the submission's output of the same name, by
/// the case's error measure and tolerance. A missing output, a length that differs or a NaN fails.
Comparison compare_lab_values(const nlohmann::json& student, const nlohmann::json& reference,
                              const GpuLabCase& c);

/// The grade of one lab case from the submission's run and the reference's (reference_error when
/// the reference gave no result).
CaseGrade judge_lab(const GpuLabCase& c, const CaseRun& student, const CaseRun& reference);

/// The grade of the GPU lab cases, as one more chapter named "gpu_labs". When
/// gpu_labs_unavailable() gives a reason, every case is `skipped` with it (no build, no run).
/// Otherwise the reference's lab binaries (reference_tree) and the submission's (a CUDA student
/// tree under work_dir/student/<build_name>/build-gpu, with the manifest files staged from
/// `submission`) run one after the other; a case earns its points when every output is within
/// tolerance of the reference's. `solution` grades the reference itself.
ChapterGrade grade_gpu_labs(const GpuLabsSpec& spec, const std::filesystem::path& submission,
                            const std::string& build_name, const Project& project,
                            const std::filesystem::path& reference_tree, const GradeOptions& opts,
                            bool solution);

}  // namespace mgpu::grade
