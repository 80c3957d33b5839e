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
  std::filesystem::path dir;      ///< folder of submissions
  std::filesystem::path csv;      ///< gradebook, created or resumed
  std::filesystem::path reports;  ///< if set, one JSON report per submission goes here
  int jobs = 2;                   ///< submissions graded at the same time
  int shard = 0;                  ///< this run grades the submissions of slice `shard` ...
  int shards = 1;                 ///< ... of `shards` (shard_of), so N machines share a class
};

/// The slice (0 .. shards-1) a submission belongs to: a hash of its name, so the assignment is
/// stable whatever else is in the folder and wherever it runs.
int shard_of(const std::string& submission, int shards);

/// Parses "I/N" (1 <= I <= N) into opts.shard = I-1 and opts.shards = N; throws naming the fix.
void parse_shard(const std::string& text, BatchOptions& opts);

/// Joins gradebooks written by the shards of one batch into out, one row per submission, sorted
/// by name. Every input must have the same header; a submission in two inputs with different
/// rows is an error naming both. Returns the number of rows.
std::size_t merge_gradebooks(const std::vector<std::filesystem::path>& inputs,
                             const std::filesystem::path& out);

/// The name a batch submission is graded under before any disambiguation: its folder name or
/// zip stem made valid UTF-8, line breaks as spaces (a gradebook row holds it whole).
std::string batch_display_name(const std::string& raw);

/// The file name (without ".json") of a batch submission's report: safe_name, and where that is
/// longer than 200 bytes its first bytes and a hash of the whole name.
std::string batch_report_stem(const std::string& name);

/// Unique names for a batch's submissions: raw names (folder name or zip stem) and the entries'
/// file names ("x.zip"), in the batch's order.
struct BatchNames {
  std::vector<std::string> names;       ///< one per raw name; no two share a batch_report_stem()
  std::vector<std::string> collisions;  ///< one line per group that had to be told apart
};
/// batch_display_name of each; where two or more would share a report file (batch_report_stem)
/// or a gradebook row, each of them gets "~" and 8 hex digits of a hash of its file name (so a
/// folder "x" and "x.zip" differ too), or of its file name and a count where another submission
/// already has that name, and the group is described in `collisions`. Never refuses: no name can
/// stop the others from being graded.
BatchNames unique_batch_names(const std::vector<std::string>& raw,
                              const std::vector<std::string>& file_names = {});

/// Grades the batch; returns the number of submissions graded in this run. Two submissions
/// never share a row, a report or a hidden seed (unique_batch_names); a disambiguated name is
/// said on stderr and in the submission's report notes.
int grade_batch(const BatchOptions& b, const Project& project, const Rubric& rubric,
                const GradeOptions& opts);

/// The gradebook's header: submission, score, max_score, one column per graded block (chapter,
/// and "gpu_labs" when graded), failed_cases, status, seconds, seed.
std::vector<std::string> csv_header(const std::vector<std::string>& blocks);
/// A gradebook row of g with exactly csv_header(blocks)'s columns; a block g lacks is left empty.
/// status is "graded", or "rejected-submission: <why>" when the submission was rejected.
std::vector<std::string> csv_row(const std::string& submission, const Grade& g,
                                 const std::vector<std::string>& blocks);

/// One CSV field, quoted when it needs to be (RFC 4180); made valid UTF-8.
std::string csv_field(const std::string& s);
/// Splits one CSV line (RFC 4180 quoting, no embedded newlines).
std::vector<std::string> csv_split(const std::string& line);

}  // namespace mgpu::grade
