// The GPU labs as one more kind of graded exercise, beside the chapters' cases. What the kind
// supplies to the grade's steps (grade.cpp):
//   stage   the lab files (rubric "gpu_labs.files"), staged by stage_submission with the chapters;
//   build   a CUDA tree (lab_tree_config) and one program per lab (lab_target, build_labs);
//   run     each lab case's program, isolated with the GPU's device nodes, writing its outputs to
//           the grader's descriptor and classified like a case (run_lab -> classify_run);
//   judge   its outputs against the reference lab's by an error measure (judge_lab ->
//           compare_lab_values in compare.cpp).
// Without a CUDA device, or without a CUDA build, every lab case is reported as skipped and
// counts for nothing (gpu_labs_unavailable); nothing is staged, built or run then.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "grade.hpp"
#include "pipeline/build.hpp"
#include "pipeline/compare.hpp"
#include "pipeline/stage.hpp"
#include "report/model.hpp"
#include "rubric/rubric.hpp"

namespace mgpu::grade {

/// The GPU labs of one grade: selected or not, and graded here or skipped.
struct GpuLabs {
  const GpuLabsSpec* spec = nullptr;  ///< the rubric's labs; nullptr when not selected
  std::string unavailable;            ///< why they are skipped here ("" when they are graded)
  bool selected() const { return spec != nullptr; }
  bool graded() const { return spec != nullptr && unavailable.empty(); }
};

/// The labs a grade covers: selected (gpu_labs_selected), then checked with gpu_labs_unavailable.
GpuLabs select_gpu_labs(const Rubric& rubric, const std::vector<std::string>& filters,
                        const std::filesystem::path& reference_tree);

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

/// The submission's CUDA tree, base/build-gpu: a whole student tree with the staged chapters
/// (st.chapters_dir) and labs (st.gpu_labs_dir).
TreeConfig lab_tree_config(const std::filesystem::path& base, const Staged& st);

/// Builds every lab's program (lab_target) of `tree` once: lab -> build. With `tree_error` (the
/// tree could not be configured) nothing is built and every lab fails with it.
std::map<std::string, TargetBuild> build_labs(const GpuLabsSpec& spec,
                                              const std::filesystem::path& tree,
                                              const std::string& tree_error, int jobs,
                                              const Project& project);

/// Runs a lab binary as a case: isolated with the device nodes, `c.args` plus --result-fd 3, the
/// case's time and memory limits. A lab that writes nothing there has no result, whatever it
/// prints. It first waits for one of `labs_per_gpu` slots of the device (sandbox/gpu_slots.hpp),
/// machine-wide, and holds it while it runs; the wait does not count toward its time limit.
CaseRun run_lab(const std::filesystem::path& exe, const GpuLabCase& c, int labs_per_gpu = 1);

/// The case's arguments as 16 hex digits: rubrics that give one case name other shapes keep
/// their reference outputs in files of their own.
std::string lab_args_key(const GpuLabCase& c);

/// What keys a reference lab's cached outputs: the program's content hash, the case's arguments
/// (its shapes, seeds and ranks) and how many CUDA devices are visible (with --ranks 0 or
/// --backend auto the lab runs differently on another count).
std::string reference_lab_stamp(const std::filesystem::path& exe, const GpuLabCase& c);

/// The reference lab's run of case c: the run cached in `cache` when its stamp is this program's
/// and these arguments' (reference_lab_stamp), else run_lab, cached when it gave outputs; `ran`
/// tells which.
CaseRun run_or_load_reference_lab(const std::filesystem::path& exe, const GpuLabCase& c,
                                  const std::filesystem::path& cache, int labs_per_gpu, bool& ran);

/// The grade of one lab case from the submission's run and the reference's (reference_error when
/// the reference gave no result), by compare_lab_values.
CaseGrade judge_lab(const GpuLabCase& c, const CaseRun& student, const CaseRun& reference);

/// A lab case not run here: skipped, worth nothing either way.
CaseGrade skipped_lab(const GpuLabCase& c, const std::string& reason);

/// A lab case decided by a build: the reference's (reference_error, not counted) or the
/// submission's (build_failed).
CaseGrade unbuilt_lab(const GpuLabCase& c, Status status, const std::string& reason,
                      const std::string& log);

}  // namespace mgpu::grade
