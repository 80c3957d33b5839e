// The one grade model every report is written from: submission -> chapters -> cases, with the
// status, points and a one-line reason of each case, plus the time spent per phase.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mgpu::grade {

/// What happened to one case.
enum class Status {
  passed,               ///< values within tolerance (budget points may still be lost)
  wrong,                ///< values outside tolerance, or a value missing
  not_implemented,      ///< the skeleton's NotImplemented escaped the case
  crashed,              ///< killed by a signal, or an exception escaped the case
  timeout,              ///< wall-clock or CPU limit reached
  out_of_memory,        ///< address-space limit reached (std::bad_alloc or the kernel)
  disk_limit,           ///< its folders filled (total or entries), or a file over its size limit
  no_result,            ///< exited without one complete result (e.g. exit(0) inside the case)
  build_failed,         ///< the chapter did not compile or link
  reference_error,      ///< the reference itself failed: a grader problem, not counted
  skipped,              ///< not run here (a GPU case without a CUDA device): counts for nothing
  rejected_submission,  ///< the submission broke an unpacking rule (a link, `..`, over a cap):
                        ///< nothing ran
};

/// Lower-case name used in every report ("not-implemented", ...).
const char* status_name(Status s);

/// Who sees a case on Gradescope.
/// Gradescope's four visibilities: when a student sees a case.
enum class Visibility { visible, hidden, after_due_date, after_published };
/// "visible", "hidden", "after_due_date" or "after_published".
const char* visibility_name(Visibility v);
/// The visibility a name stands for; nullopt for an unknown name.
std::optional<Visibility> parse_visibility(const std::string& name);
/// The fix to print for an unknown visibility name.
inline constexpr const char* kVisibilityFix =
    "use \"visible\", \"hidden\", \"after_due_date\" or \"after_published\"";

/// The grade of one case.
struct CaseGrade {
  std::string name;                             ///< e.g. "11_5.bubble"
  std::string chapter;                          ///< e.g. "11_5_pipeline"
  Visibility visibility = Visibility::visible;  ///< from the rubric
  Status status = Status::no_result;            ///< what happened
  double score = 0;                             ///< points earned (correctness + budgets)
  double max_score = 0;                         ///< points available (correctness + budgets)
  std::string reason;                           ///< one line; empty when everything passed
  std::string feedback;  ///< details: mismatches, budget figures, captured output
  double seconds = 0;    ///< wall time of the student's run
};

/// The grade of one chapter.
struct ChapterGrade {
  std::string name;              ///< folder name, e.g. "11_2_data_parallel"
  std::string title;             ///< human title from the rubric
  bool build_failed = false;     ///< the chapter did not compile
  std::string build_error;       ///< the compiler's first error, paths relative to the submission
  std::vector<CaseGrade> cases;  ///< in rubric order
  std::map<std::string, int> hints;        ///< TODO id -> the highest hint level the student opened
  double hint_cost = 0;                    ///< points the rubric's hint_cost takes for those hints
  std::map<int, std::string> predictions;  ///< predict-then-run question -> the student's latest
  double score() const;                    ///< sum over cases, less hint_cost (never below 0)
  double max_score() const;  ///< sum over cases (reference errors and skipped cases excluded)
};

/// The grade of one submission.
struct Grade {
  std::string submission;                    ///< what was graded, as given on the command line
  std::uint64_t seed = 0;                    ///< the seed of the visible cases
  std::optional<std::uint64_t> hidden_seed;  ///< set: the other cases ran with this secret seed
  std::vector<ChapterGrade> chapters;        ///< in rubric order
  std::vector<std::pair<std::string, double>> timings;  ///< phase name -> seconds, in order
  std::vector<std::string> notes;                       ///< warnings for the reader
  double execution_seconds = 0;                         ///< wall time of the whole grade
  double score() const;                                 ///< sum over chapters
  double max_score() const;                             ///< sum over chapters
};

/// A copy of g whose every text is valid UTF-8 (see valid_utf8). Report writers start from it:
/// student output and compiler messages are bytes, and one invalid byte would make the JSON
/// writer throw and leave Gradescope with no result at all.
Grade with_valid_utf8(Grade g);

}  // namespace mgpu::grade
