// The proof that the graded cases tell right from wrong: chaffs (known-wrong edits of the
// reference that must lose named cases) and wheats (known-right alternatives that must get full
// marks), kept in autograder/chaff/<chapter>/*.json and autograder/wheat/<chapter>/*.json and
// graded by `mgpu-grade chaff` like any submission.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "grade.hpp"
#include "pipeline/build.hpp"
#include "rubric/rubric.hpp"

namespace mgpu::grade {

/// One text substitution in one of the chapter's manifest files.
struct Edit {
  std::string file;     ///< manifest file name, e.g. "data_parallel.cpp"
  std::string find;     ///< exact text of the reference file
  std::string replace;  ///< what it becomes
  bool all = false;     ///< every occurrence (otherwise exactly one must exist)
};

/// A chaff or a wheat.
struct Proof {
  bool chaff = true;                   ///< chaff: must lose must_lose; wheat: must get full marks
  std::string chapter;                 ///< rubric chapter it edits
  std::string name;                    ///< file stem
  std::filesystem::path file;          ///< where it is defined
  std::string description;             ///< the mistake (or the alternative), one line
  std::vector<Edit> edits;             ///< applied to a copy of the reference
  std::vector<std::string> must_lose;  ///< chaff only: cases that must score below their maximum
};

/// Every chaff and wheat under root/autograder/{chaff,wheat}, of the chapters matching filters
/// (prefixes; empty: all), validated against the rubric. Throws listing every problem.
std::vector<Proof> load_proofs(const Project& project, const Rubric& rubric,
                               const std::vector<std::string>& filters);

/// Writes into dir/chapters the reference files of every chapter with p's edits applied to its
/// chapter. Throws naming the edit when its text is not found as specified.
void stage_proof(const Proof& p, const Project& project, const Rubric& rubric,
                 const std::filesystem::path& dir);

/// The verdict on one proof.
struct ProofResult {
  bool held = false;  ///< chaff caught, or wheat accepted
  std::string line;   ///< "caught   11_2_data_parallel/sum: 11_2.dp_step_runtime (wrong: ...)"
};

/// Judges one proof's grade (of its chapter only).
ProofResult judge_proof(const Proof& p, const Grade& g);

/// The rubric chapters whose every chaff and wheat `filters` (load_proofs' filters) selects: all
/// of them without filters, those a chapter prefix ("11_2") names, none for a filter naming
/// single proofs ("11_2_data_parallel/ring_").
std::vector<std::string> whole_chapters(const Rubric& rubric,
                                        const std::vector<std::string>& filters);

/// The cases of `chapters` that no chaff in `proofs` must lose, in rubric order: graded, yet never
/// shown to reject wrong code.
std::vector<const CaseSpec*> unproved_cases(const std::vector<Proof>& proofs, const Rubric& rubric,
                                            const std::vector<std::string>& chapters);

/// Grades every proof (opts.jobs at a time, each in a reused build slot), prints one line each
/// and the totals to out, then one line for each case of `whole` (whole_chapters) that no chaff
/// must lose. Returns true when every chaff was caught, every wheat accepted and every case of
/// `whole` has a chaff.
bool run_proofs(const std::vector<Proof>& proofs, const Project& project, const Rubric& rubric,
                const GradeOptions& opts, const std::vector<std::string>& whole, std::ostream& out);

}  // namespace mgpu::grade
