// Stage, the pipeline's first step: a submission's files copied into a scratch folder, on top of
// the pristine skeleton, where the build step finds them.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "pipeline/build.hpp"
#include "rubric/rubric.hpp"

namespace mgpu::grade {

/// The result of copying a submission.
struct Staged {
  std::filesystem::path chapters_dir;  ///< pass as MGPU_STUDENT_DIR
  std::filesystem::path
      top;  ///< the folder the submission's files were read from (a zip: where it was unpacked)
  std::vector<std::string> notes;           ///< what was not found, for the report
  std::vector<std::string> chapters_found;  ///< chapters with at least one submitted file
  std::filesystem::path gpu_labs_dir;  ///< the staged lab folders (MGPU_GPU_STUDENT_DIR); empty
                                       ///< when no GPU lab is graded
};

/// Copies SUBMISSION (a folder or .zip) into scratch/chapters: for every chapter, the pristine
/// .cpp files from its skeleton folder under pristine (pristine_root), overlaid by the submission's
/// manifest files. Files are only rewritten when their content changed. A zip is extracted with
/// extract_zip and a folder checked with check_submission_folder first: both throw
/// RejectedSubmission (unpack.hpp). With `gpu_labs` (the GPU labs are graded), the same for the
/// labs into scratch/gpu_labs/<lab>/: the pristine files gpu_labs.files names, each overlaid by
/// the submission's copy, found under gpu_labs/<lab>/, loose as <lab>/, or under a top folder's
/// gpu_labs/<lab>/.
Staged stage_submission(const std::filesystem::path& submission,
                        const std::filesystem::path& scratch, const Rubric& rubric,
                        const Project& project, const std::filesystem::path& pristine,
                        const GpuLabsSpec* gpu_labs = nullptr);

}  // namespace mgpu::grade
