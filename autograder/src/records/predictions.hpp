// Predict-then-run: the questions in a chapter README's "Predict, then run" sections, and the
// record of what a student predicted before running anything. `./mgpu predict` (predict_main.cpp)
// writes the record, .mgpu/predictions.tsv, one line per prediction (chapter, question, value,
// UTC time, separated by tabs); `./mgpu submit` packs it and the grader reports it beside the
// hints (hints.hpp). Predictions are reported, never scored.
//
// A README question is a numbered list item ("5. With four stages ...") under a heading that
// contains "predict" (any level; the section ends at the next heading of the same or a higher
// level), or a numbered item elsewhere whose first line says "predict" ("4. Predict, for ...").
// Items inside code fences or <details> blocks are not questions. A question may carry
// one or more annotations, each on a line of its own anywhere in the question's text:
//
//   <!-- predict: ./mgpu pipeline --stages 4 --micro-batches 8 | bubble -->
//
// the command that measures the answer, then after the last '|' the label of the printed value:
// the number right after the first occurrence of the label (case-insensitive) in the command's
// standard output, past spaces and a ':' or '=', is the measured value. The format is documented
// for authors in autograder/tests/predict/README.md.
#pragma once

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mgpu::grade {

/// Where the record lies, relative to the checkout's root and to a submission's top folder.
inline const std::filesystem::path kPredictionsRecord = ".mgpu/predictions.tsv";

/// A README that cannot be read as questions; what() starts with "FILE:LINE: " (or "FILE: ").
struct PredictError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One annotation: the command to run and the label of the value that answers the question.
struct Measure {
  std::string command;
  std::string label;
  int line = 0;  ///< 1-based line of the annotation in the README
};

/// One predict-then-run question.
struct Question {
  int number = 0;                 ///< the number the README gives it
  int line = 0;                   ///< 1-based line of its list item
  std::string text;               ///< its first paragraph, whitespace collapsed
  std::vector<Measure> measures;  ///< its annotations, in order (none: nothing to run)
};

/// The questions of a README, in file order. Throws PredictError naming the file (and line) when
/// it cannot be read, has no question at all, numbers two questions alike, or holds an
/// annotation that is malformed or outside every question.
std::vector<Question> read_questions(const std::filesystem::path& readme);

/// One line of the record.
struct Prediction {
  std::string chapter;  ///< the chapter's folder name, e.g. "11_5_pipeline"
  int question = 0;
  std::string value;  ///< as the student typed it (tabs and line breaks made spaces)
  std::string time;   ///< UTC, 2026-12-01T15:00:00Z
};

/// The record's lines in order; a missing file is an empty record. Lines that are not
/// "chapter TAB number TAB value TAB time" are counted in *skipped (when given) and left out.
std::vector<Prediction> read_predictions(const std::filesystem::path& record,
                                         int* skipped = nullptr);

/// Appends one line (the folder is created); throws std::runtime_error naming the file when it
/// cannot be written.
void append_prediction(const std::filesystem::path& record, const Prediction& p);

/// The latest value recorded for a chapter's question, if any.
std::optional<std::string> latest_prediction(const std::vector<Prediction>& record,
                                             const std::string& chapter, int question);

/// The measured value in a command's output: the number right after the first occurrence of
/// label (case-insensitive), past spaces and a ':' or '=', with a trailing % kept; nothing when
/// the label is missing or no number follows it there.
std::optional<std::string> measured_value(const std::string& output, const std::string& label);

}  // namespace mgpu::grade
