// grade-batch: every submission in a folder (sub-folders and .zip files) graded in parallel into
// a CSV gradebook, one row appended and fsynced as each finishes; a rerun skips rows already there.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "grade.hpp"

namespace mgpu::grade {

/// Batch settings on top of the grading options.
struct BatchOptions {
  std::filesystem::path dir;        ///< folder of submissions
  std::filesystem::path csv;        ///< gradebook, created or resumed
  std::filesystem::path reports;    ///< if set, one JSON report per submission goes here
  int jobs = 2;                     ///< submissions graded at the same time
};

/// Grades the batch; returns the number of submissions graded in this run.
int grade_batch(const BatchOptions& b, const Project& project, const Rubric& rubric, const GradeOptions& opts);

/// The gradebook's header: submission, score, max_score, one column per graded block (chapter,
/// and "gpu_labs" when graded), failed_cases, status, seconds, seed.
std::vector<std::string> csv_header(const std::vector<std::string>& blocks);
/// A gradebook row of g with exactly csv_header(blocks)'s columns; a block g lacks is left empty.
/// status is "graded", or "rejected-submission: <why>" when the submission was rejected.
std::vector<std::string> csv_row(const std::string& submission, const Grade& g, const std::vector<std::string>& blocks);

/// One CSV field, quoted when it needs to be (RFC 4180); made valid UTF-8.
std::string csv_field(const std::string& s);
/// Splits one CSV line (RFC 4180 quoting, no embedded newlines).
std::vector<std::string> csv_split(const std::string& line);

}  // namespace mgpu::grade
