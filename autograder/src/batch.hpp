// grade-batch: every submission in a folder (sub-folders and .zip files) graded in parallel into
// a CSV gradebook, one row appended and fsynced as each finishes; a rerun skips rows already there.
#pragma once

#include <filesystem>

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

/// One CSV field, quoted when it needs to be (RFC 4180).
std::string csv_field(const std::string& s);
/// Splits one CSV line (RFC 4180 quoting, no embedded newlines).
std::vector<std::string> csv_split(const std::string& line);

}  // namespace mgpu::grade
