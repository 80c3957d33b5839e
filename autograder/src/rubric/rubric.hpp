// The rubric: the data file instructors edit (autograder/rubric.json). Per chapter the files a
// student may edit (the manifest) and per case its points, visibility, tolerance, limits and
// budgets. Loading validates everything and reports each problem with file, field and fix.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "report/model.hpp"

namespace mgpu::grade {

/// |a - b| <= atol + rtol * |b|, b being the reference (numpy.isclose).
struct Tolerance {
  double rtol = 0;  ///< relative part
  double atol = 0;  ///< absolute part
};

/// A tolerance where either part may be left to the default.
struct PartialTolerance {
  std::optional<double> rtol;  ///< relative part, if given
  std::optional<double> atol;  ///< absolute part, if given
};

/// A measured cost that must stay within factor times the reference's measurement, and, where a
/// floor is given, must not fall below min_factor times it: less than any correct code needs
/// means the work happened outside what the runtime measures, and the case is wrong.
struct Budget {
  std::string measure;               ///< name the case passes to ctx.measure(), e.g. "bytes_sent"
  double factor = 1;                 ///< allowed ratio to the reference
  double points = 0;                 ///< earned only when the case is also correct
  std::optional<double> min_factor;  ///< floor as a ratio to the reference, if any
  std::string below;                 ///< what a measure under the floor means, for the student
};

/// One graded case.
struct CaseSpec {
  std::string name;                                ///< as registered with MGPU_CASE
  std::string chapter;                             ///< owning chapter folder
  double points = 1;                               ///< correctness points
  Visibility visibility = Visibility::visible;     ///< who sees it on Gradescope
  std::optional<std::string> dtype;                ///< overrides the dtype the case emitted
  PartialTolerance tolerance;                      ///< case-wide override
  std::map<std::string, PartialTolerance> values;  ///< per-value overrides
  double time_limit_s = 10;                        ///< wall clock
  double memory_mb = 2048;                         ///< address space
  std::vector<Budget> budgets;                     ///< measured costs with points
  double max_score() const;                        ///< points + budget points
};

/// One chapter: what a student may edit and what is graded.
struct ChapterSpec {
  std::string name;                ///< folder under chapters/
  std::string title;               ///< shown in reports
  std::vector<std::string> files;  ///< the manifest: student-editable files in that folder
  std::string skeleton;            ///< pristine files, relative to the project root
  std::vector<CaseSpec> cases;     ///< in file order
};

/// One GPU lab case: run bin/gpu_<lab> with args on a CUDA device and read its RESULT line.
/// How a GPU lab's output is measured against the reference lab's: relative to the output's
/// scale, since bf16 results have plenty of near-zero elements where |a-b|/|b| means nothing.
enum class LabError {
  max_rel,   ///< max_i |a_i - b_i| / max_i |b_i|
  norm_rel,  ///< ||a - b||_2 / ||b||_2
};

struct GpuLabCase {
  std::string name;                             ///< e.g. "gpu.allreduce_bw"
  std::string lab;                              ///< folder under gpu_labs/, e.g. "allreduce_bw"
  double points = 1;                            ///< earned when every output is within tolerance
  Visibility visibility = Visibility::visible;  ///< who sees it on Gradescope
  std::vector<std::string> args;                ///< command-line arguments of the lab binary
  double time_limit_s = 300;                    ///< wall clock of one run
  double memory_mb = 16384;                     ///< host memory of the lab's whole process tree
  LabError error = LabError::max_rel;           ///< how each output's error is measured
  double tolerance = 2e-2;                      ///< the largest error accepted for any output
};

/// The rubric's "gpu_labs" section: graded only where a CUDA device is visible.
struct GpuLabsSpec {
  std::string title = "GPU labs";                         ///< shown in reports
  std::map<std::string, std::vector<std::string>> files;  ///< lab -> student-editable files
  std::vector<GpuLabCase> cases;                          ///< in file order
  /// Labs that may run on one GPU at a time, across every batch worker and grader process of the
  /// machine (sandbox/gpu_slots.hpp); --labs-per-gpu overrides it.
  int labs_per_gpu = 1;
};

/// The whole rubric.
struct Rubric {
  std::uint64_t seed = 20251129;                     ///< default grading seed
  double time_limit_s = 10;                          ///< default per case
  double memory_mb = 2048;                           ///< default per case
  std::map<std::string, Tolerance> dtype_tolerance;  ///< "bf16", "fp32", "fp64"
  std::vector<ChapterSpec> chapters;                 ///< in file order
  std::vector<std::string> sources;                  ///< files it was read from
  std::optional<GpuLabsSpec> gpu_labs;               ///< GPU lab cases, if the rubric has any
  /// Points a chapter loses per TODO whose highest opened hint (`./mgpu hint`) is level 1, 2 or 3;
  /// none by default. A chapter never drops below 0.
  std::array<double, 3> hint_cost{0, 0, 0};

  /// Tolerance for one value: value override, then case override, then the dtype default.
  Tolerance tolerance_for(const CaseSpec& c, const std::string& value,
                          const std::string& emitted_dtype) const;
  /// The chapter named, or nullptr.
  const ChapterSpec* chapter(const std::string& name) const;
};

/// Every problem found in a rubric file, one per line: "FILE: FIELD: problem; fix: ...".
class RubricError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Reads and validates a rubric file; throws RubricError listing every problem.
Rubric load_rubric(const std::filesystem::path& file);
/// Validates JSON text as if read from `file` (used by load_rubric and the tests). A partial
/// rubric (a private addition) may leave out a chapter's files.
Rubric parse_rubric(const std::string& text, const std::string& file, bool partial = false);
/// The main rubric plus private additions: each extra file is validated on its own, then its
/// chapters and cases are laid over the main one (a case of the same name replaces the main one's).
Rubric load_rubrics(const std::filesystem::path& main,
                    const std::vector<std::filesystem::path>& extra);

}  // namespace mgpu::grade
