// Building: configuring a cached student build tree on the staged files (pipeline/stage.hpp; a
// CUDA tree too when the GPU labs are graded), and building each chapter's case program and each
// lab on its own so a compile error costs that exercise only.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "rubric/rubric.hpp"

namespace mgpu::grade {

/// Where the grader lives: its source root and its own build tree.
struct Project {
  std::filesystem::path root;      ///< the repository (holds chapters/, autograder/, ...)
  std::filesystem::path own_tree;  ///< the build tree mgpu-grade was built in
  bool own_is_solution = false;    ///< own_tree was configured with MGPU_IMPL=solution
  bool has_solutions() const;      ///< solutions/ exists (absent in the student distribution)
};

/// The project this mgpu-grade binary was built from.
Project this_project();

/// A build tree to configure.
struct TreeConfig {
  std::filesystem::path dir;                      ///< the build tree
  std::string impl = "student";                   ///< MGPU_IMPL
  std::filesystem::path student_dir;              ///< MGPU_STUDENT_DIR (student impl)
  std::vector<std::filesystem::path> cases_dirs;  ///< MGPU_GRADE_CASES_DIRS (private cases)
  /// The instructor's own code (a chaff or wheat): still built in the student sandbox, but with
  /// the grader's compiler cache, which only student code must never see or fill.
  bool trusted = false;
  /// A submission's grading tree (cmake/grade_tree.cmake): it compiles the chapters only, and its
  /// case programs link this trusted tree's runtime, harness and case archives, so the build sees
  /// no case source. Empty: a whole tree (the GPU labs', the visible tests').
  std::filesystem::path link_from{};
  /// A CUDA tree (MGPU_CUDA=ON) that builds the GPU labs with the lab files from this folder
  /// (MGPU_GPU_STUDENT_DIR, Staged::gpu_labs_dir). Empty: MGPU_CUDA=OFF.
  std::filesystem::path gpu_student_dir{};
};

/// Makes `base` (a submission's folder, <work>/student/<name>: src/ and its build trees) ready
/// for `occupant` (the submission's path). When another submission had it last (a batch slot),
/// everything of that one goes first: its unzipped sources, every object compiled from its files
/// (an object whose dependency file names base/src), and every archive and program, so no build
/// can read another student's code, source or machine code; the tree's configuration stays.
/// `trusted` (an instructor's proof, TreeConfig::trusted) taking over from another proof keeps
/// everything: the previous occupant's objects are the instructor's too, and ninja recompiles only
/// the files whose text changed.
void claim_student_folder(const std::filesystem::path& base, const std::string& occupant,
                          bool trusted = false);

/// The value of cache variable `name` in build tree `tree` (its CMakeCache.txt), "" if unset.
std::string cache_value(const std::filesystem::path& tree, const std::string& name);

/// Configures dir unless it already is with the same settings. Returns "" or the error text.
/// Package locations the grader's own tree was given (CMAKE_PREFIX_PATH, MGPU_NCCL_*) are passed
/// on.
std::string configure_tree(const TreeConfig& cfg, const Project& project);

/// The outcome of building one target.
struct TargetBuild {
  bool ok = false;          ///< built
  std::string first_error;  ///< the compiler's first error line, scratch paths made readable
  std::string log;          ///< the build output from the first error on (capped)
  double seconds = 0;       ///< wall time of the build
};

/// What a build of a student tree may do. `compile`: compile the submission, as a leased uid
/// that sees only what it compiles. `link`: link a grading tree's case program (run only after
/// the link check passed on its objects): the same view plus the trusted archives, as the
/// grader's user, who alone can read them; a link runs no student code.
enum class BuildStep { compile, link };

/// Builds one target of a configured tree with `jobs` parallel compiles. scratch_chapters, if
/// given, is replaced by "chapters" in messages so students see their own paths.
TargetBuild build_target(const std::filesystem::path& tree, const std::string& target, int jobs,
                         const Project& project, const std::filesystem::path& scratch_chapters = {},
                         BuildStep step = BuildStep::compile);

/// Name of the case program of a chapter.
inline std::string case_target(const std::string& chapter) { return "cases_" + chapter; }
/// The host program of a chapter whose cases keep their rank code in rank bodies
/// (autograder/harness/rank_code.hpp): it links no chapter code, and runs a student's cases with
/// each rank a case_target program of the student's.
inline std::string host_target(const std::string& chapter) {
  return case_target(chapter) + "_host";
}

/// Whether the configured tree `tree` has a program target `target` (in its build.ninja).
bool has_program_target(const std::filesystem::path& tree, const std::string& target);
/// Name of a chapter's library: the submission's objects of it.
inline std::string chapter_target(const std::string& chapter) { return "mgpu_" + chapter; }
/// Name of a GPU lab's program (gpu_labs/CMakeLists.txt), built in a CUDA tree.
inline std::string lab_target(const std::string& lab) { return "gpu_" + lab; }

}  // namespace mgpu::grade
