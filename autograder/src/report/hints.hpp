// The hints a student opened with `./mgpu hint`, and the predictions made with `./mgpu predict`,
// as the grader reports them. The command appends one line per opened hint to .mgpu/hints.tsv in
// the student's checkout (hint_book.hpp) and `./mgpu submit` packs that file. The record is the
// student's own word: it is shown to instructors, and costs points only where the rubric's
// hint_cost says so.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "records/hint_book.hpp"
#include "report/model.hpp"
#include "rubric/rubric.hpp"

namespace mgpu::grade {

/// Rubric chapter -> TODO id -> the highest level opened.
using HintsSeen = std::map<std::string, std::map<std::string, int>>;

/// Reads a record (a missing file is no hints). A line's chapter is a rubric chapter's name, a
/// unique prefix of one ("11_2"), or a GPU lab's name (counted under "gpu_labs" as "lab: TODO").
/// Lines that fit none of these are skipped, each with a note saying why.
HintsSeen read_hints(const std::filesystem::path& record, const Rubric& rubric,
                     std::vector<std::string>& notes);

/// "ring reduce-scatter (level 2), ...", and what they cost when the rubric prices them.
std::string hints_summary(const ChapterGrade& chapter);

/// Rubric chapter -> question number -> the latest prediction (predictions.hpp).
using PredictionsMade = std::map<std::string, std::map<int, std::string>>;

/// Reads a prediction record (.mgpu/predictions.tsv) by rubric chapter, as read_hints reads the
/// hint record; lines that name no chapter are skipped with a note.
PredictionsMade read_predictions_by_chapter(const std::filesystem::path& record,
                                            const Rubric& rubric, std::vector<std::string>& notes);

/// "2: 0.27, 5: 0.25" (reported, never scored).
std::string predictions_summary(const ChapterGrade& chapter);

/// Sets each chapter's predictions.
void apply_predictions(std::vector<ChapterGrade>& chapters, const PredictionsMade& made);

/// Sets each chapter's hints, and its hint_cost from the rubric's price per highest level.
void apply_hints(std::vector<ChapterGrade>& chapters, const HintsSeen& seen, const Rubric& rubric);

}  // namespace mgpu::grade
