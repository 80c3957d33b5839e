// Grading one submission: build the reference and the submission, run every case of the chosen
// chapters (and the GPU labs) in isolation on both, and turn the outcomes into the grade model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/build.hpp"
#include "report/model.hpp"
#include "rubric/rubric.hpp"
#include "sandbox/runner.hpp"

namespace mgpu::grade {

/// Settings shared by grade and grade-batch.
struct GradeOptions {
  std::vector<std::string> chapters;  ///< empty: every chapter of the rubric
  /// Empty: every case of those chapters. Otherwise only the cases named here run, and the grade
  /// holds only them (a chaff is judged on the cases it must lose and on nothing else).
  std::vector<std::string> cases;
  std::uint64_t seed = 0;  ///< seed of the visible cases (public)
  /// Seed of every case that is not visible. Derived from the instructor's secret and the
  /// student's id (derive_seed) so that no table computed from the public case sources answers
  /// it; unset: the public seed.
  std::optional<std::uint64_t> hidden_seed;
  std::string secret;  ///< the instructor's secret; when set, for_student derives hidden_seed
  /// These options for one student: hidden_seed derived from the secret and the student's id
  /// (unchanged when there is no secret).
  GradeOptions for_student(const std::string& student_id) const;
  /// The seed case spec runs with.
  std::uint64_t seed_for(const CaseSpec& spec) const {
    return spec.visibility == Visibility::visible || !hidden_seed ? seed : *hidden_seed;
  }
  std::vector<std::filesystem::path> cases_dirs;  ///< private case sources
  std::filesystem::path work_dir;                 ///< cached build trees and reference results
  int jobs = 2;                                   ///< parallel compiles and case runs
  bool drop_privileges = true;                    ///< run cases as nobody when root
  bool trusted_build = false;  ///< the submission is the instructor's proof (TreeConfig::trusted)
  int labs_per_gpu = 0;        ///< GPU labs at a time per device; 0: the rubric's labs_per_gpu
};

/// The hidden cases' seed for one student: a hash of the secret and the student's id, below 1e9.
std::uint64_t derive_seed(const std::string& secret, const std::string& student_id);

/// How one case program run ended, judged only by the grader.
struct CaseRun {
  Status status = Status::no_result;  ///< passed here means "gave a result"; compared later
  nlohmann::json result;              ///< the harness document when one came back
  std::string reason;                 ///< one line when no usable result
  std::string output;                 ///< captured stdout/stderr, for feedback
  double seconds = 0;                 ///< wall time of the run
};

/// What a finished run of a program that reports through the grader's descriptor amounts to:
/// crashed, timed out, out of memory, no (complete) result, or the document's own status. The
/// limits are only named in the reasons. Used for case programs and GPU labs alike.
CaseRun classify_run(const RunOutcome& o, double time_limit_s, double memory_mb);

/// RLIMIT_NOFILE of a case run in its host program: the host holds one socket per rank process,
/// so this bounds the world such a case can run (about 250 ranks).
inline constexpr std::uint64_t kRankProcessOpenFiles = 256;

/// Runs case `name` of the case program exe, isolated, and classifies the outcome.
/// `untrusted_code`: a student's program, which then runs only as the ranks, student calls and
/// plain cases of `host`, the trusted host program of its chapter (host_target), unless
/// MGPU_RANKS=threads (MGPU_RANKS=processes runs every program's so).
CaseRun run_case(const std::filesystem::path& exe, const CaseSpec& spec, std::uint64_t seed,
                 bool drop_privileges, bool untrusted_code = false,
                 const std::filesystem::path& host = {});

/// When either run gave no result, fills g's status, reason and feedback from it and returns
/// true: a failed reference makes the case reference_error (not counted), a failed student run
/// keeps its own status. False when both have values to compare.
bool decided_by_runs(CaseGrade& g, const CaseRun& student, const CaseRun& reference);

/// Judges a student's run against the reference run into a CaseGrade.
CaseGrade judge_case(const CaseSpec& spec, const CaseRun& student, const CaseRun& reference,
                     const Rubric& rubric);

/// The reference result cached in file `cache`, if it is a passed run of the program whose stamp
/// (content hash, and for a GPU lab its arguments) is `stamp`. Read like a student's result
/// (bounded depth, checked shape): a damaged or planted entry is simply recomputed.
std::optional<CaseRun> cached_reference(const std::filesystem::path& cache,
                                        const std::string& stamp);
/// Caches a reference run under `stamp` for cached_reference, when it passed (a failure is
/// retried next time, never remembered). `name` is the case, for people reading the file.
void store_reference(const std::filesystem::path& cache, const std::string& stamp,
                     const std::string& name, const CaseRun& run);

/// The reference: its build tree and its results per (seed, case), cached on disk.
class Reference {
 public:
  /// Uses the grader's own tree, or a private one under work_dir when private cases are given.
  Reference(const Project& project, const Rubric& rubric, const GradeOptions& opts);
  /// Builds the chapters' case programs and runs (or loads) every case with the seed
  /// seeds.seed_for gives it. Thread-safe. Returns seconds spent.
  double prepare(const std::vector<const ChapterSpec*>& chapters, const GradeOptions& seeds);
  /// Builds the reference's program of every GPU lab `spec`'s cases name (once per lab). Its runs
  /// are not kept: a lab runs on a device, beside the submission's run of it. Returns seconds
  /// spent.
  double prepare_labs(const GpuLabsSpec& spec);
  /// The reference run of a case (after prepare).
  const CaseRun& get(const std::string& case_name, std::uint64_t seed) const;
  /// The build of a GPU lab's reference program (after prepare_labs).
  TargetBuild lab_build(const std::string& lab) const;
  /// The reference lab's run of GPU case c: kept in memory after the first submission, and on
  /// disk (work_dir/reference/gpu_labs/, keyed by the lab program's content and the case's
  /// arguments) for later graders, so a batch runs each reference lab once. Waits for one of
  /// `labs_per_gpu` GPU slots when it must run. Thread-safe.
  CaseRun lab_run(const GpuLabCase& c, int labs_per_gpu) const;
  /// How many times lab_run really ran a reference lab (not answered from memory or disk).
  int lab_runs() const;
  /// The build tree holding the reference case programs.
  const std::filesystem::path& tree() const { return tree_; }
  /// Set when the reference could not be built for a chapter.
  std::map<std::string, std::string> build_errors;

 private:
  const Project& project_;
  const Rubric& rubric_;
  GradeOptions opts_;
  std::filesystem::path tree_;
  std::map<std::pair<std::uint64_t, std::string>, CaseRun> runs_;  // by (seed, case)
  std::set<std::string> built_;                         // chapters whose case program is built
  std::map<std::string, TargetBuild> lab_builds_;       // by lab
  mutable std::map<std::string, CaseRun> lab_outputs_;  // by GPU case: passed reference runs
  mutable int lab_run_count_ = 0;
  mutable std::mutex lab_runs_mu_;  // one reference lab at a time; guards the two above
  mutable std::mutex mu_;           // guards runs_ against readers while prepare writes
  std::mutex prepare_mu_;           // one prepare at a time (batch workers all call it)
};

/// The chapters to grade: the rubric's, filtered by opts.chapters (prefix match, "11_2"
/// selects 11_2_data_parallel). Throws naming the unknown filter.
std::vector<const ChapterSpec*> select_chapters(const Rubric& rubric,
                                                const std::vector<std::string>& filters);

/// Grades a submission folder/zip (or, when submission is empty, the reference build itself).
/// build_name names the cached student tree under work_dir.
Grade grade_submission(const std::filesystem::path& submission, const std::string& build_name,
                       const Project& project, const Rubric& rubric, Reference& reference,
                       const GradeOptions& opts, bool solution);

/// Runs f(i) for i in [0, n) on `jobs` threads.
void parallel_for(std::size_t n, int jobs, const std::function<void(std::size_t)>& f);
/// Runs f(i, worker) for i in [0, n) on `jobs` threads; worker in [0, jobs) names the thread, so
/// each can own a resource (a build slot) without a pool of its own. The first exception stops
/// the loop and is rethrown once every thread has finished.
void parallel_for(std::size_t n, int jobs, const std::function<void(std::size_t, int)>& f);

}  // namespace mgpu::grade
