// What leaves the instructor's checkout: the student distribution (release), a student's upload
// (submit), and the Gradescope autograder bundle. Release and bundle ship git's HEAD.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "pipeline/build.hpp"
#include "rubric/rubric.hpp"

namespace mgpu::grade {

/// What a release or bundle wrote.
struct Shipment {
  std::size_t files = 0;  ///< files of the repository shipped
  std::vector<std::string>
      left_out;  ///< shipped files whose uncommitted changes were left out (--allow-dirty)
};

/// Writes the student distribution to out (which must not exist or be empty): HEAD without
/// solutions/, graded cases, chaffs, wheats or private files; READMEs in their student version
/// (student_markdown), presets without the reference (student_presets), and the pristine
/// skeleton in autograder/skeleton/. Throws, naming the files, when a shipped file has
/// uncommitted changes, unless allow_dirty.
Shipment write_release(const Project& project, const std::filesystem::path& out, bool allow_dirty);

/// Zips the rubric's manifest files found under from (a chapters/ folder), and the hint record
/// beside it (.mgpu/hints.tsv and .mgpu/predictions.tsv, if any), into out.
/// Returns the files included, relative to from's parent.
std::vector<std::string> write_submission(const Rubric& rubric, const std::filesystem::path& from,
                                          const std::filesystem::path& out);

/// What goes into a Gradescope bundle besides HEAD.
struct BundleOptions {
  std::filesystem::path out;                      ///< the zip to write
  std::vector<std::filesystem::path> rubrics;     ///< private rubrics, laid over the course's
  std::vector<std::filesystem::path> cases_dirs;  ///< private case sources
  std::filesystem::path secret_file;              ///< the hidden cases' secret; empty: a random one
  std::filesystem::path scratch;                  ///< a folder of the grader's to assemble in
  bool allow_dirty = false;                       ///< ship HEAD despite uncommitted changes
};

/// Writes the Gradescope autograder zip: HEAD (solutions included), the pristine skeleton,
/// private rubrics, cases and the secret under autograder/private/, and setup.sh and
/// run_autograder (from autograder/gradescope/) at the top.
Shipment write_gradescope_bundle(const Project& project, const BundleOptions& options);

/// The student version of a Markdown file: blocks between `<!-- instructor-only -->` and
/// `<!-- /instructor-only -->` are dropped, and `<!-- student-only` ... `-->` blocks (comments,
/// so invisible in the instructor's copy) are shown. One file serves both audiences.
std::string student_markdown(std::string text, const std::string& file);

/// CMakePresets.json without the presets that build the reference (MGPU_IMPL=solution, directly
/// or inherited) and the build and test presets that use them.
std::string student_presets(const std::string& json);

}  // namespace mgpu::grade
