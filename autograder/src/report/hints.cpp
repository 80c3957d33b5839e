// Reading the hint record and pricing it (hints.hpp).
#include "report/hints.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

#include "records/predictions.hpp"

namespace fs = std::filesystem;

namespace mgpu::grade {
namespace {

// The rubric chapter a record's chapter field names, and the prefix its TODO id gets ("" if none).
std::pair<std::string, std::string> owner(const std::string& name, const Rubric& rubric) {
  std::vector<std::string> matches;
  for (const auto& ch : rubric.chapters) {
    if (ch.name == name) return {ch.name, ""};
    if (ch.name.rfind(name + "_", 0) == 0) matches.push_back(ch.name);
  }
  if (matches.size() == 1) return {matches.front(), ""};
  if (rubric.gpu_labs) {
    const std::string lab = name.rfind("gpu_labs/", 0) == 0 ? name.substr(9) : name;
    if (rubric.gpu_labs->files.count(lab)) return {"gpu_labs", lab + ": "};
  }
  return {"", ""};
}

}  // namespace

HintsSeen read_hints(const fs::path& record, const Rubric& rubric,
                     std::vector<std::string>& notes) {
  HintsSeen seen;
  std::ifstream in(record);
  int skipped = 0;
  std::string first_skipped;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto opened = parse_record_line(line);
    const auto [name, prefix] =
        opened ? owner(opened->chapter, rubric) : std::pair<std::string, std::string>{};
    if (name.empty()) {
      if (skipped++ == 0) first_skipped = line;
      continue;
    }
    int& highest = seen[name][prefix + opened->todo];
    highest = std::max(highest, opened->level);
  }
  if (skipped > 0)
    notes.push_back(fmt::format(
        "{} line(s) of the hint record {} name no chapter, TODO and level 1-3 and were not "
        "counted (the first: \"{}\")",
        skipped, kHintsRecord.string(), first_skipped.substr(0, 120)));
  return seen;
}

std::string hints_summary(const ChapterGrade& chapter) {
  std::string s;
  for (const auto& [todo, level] : chapter.hints)
    s += fmt::format("{}{} (level {})", s.empty() ? "" : ", ", todo, level);
  if (chapter.hint_cost > 0) s += fmt::format("; -{:g} points", chapter.hint_cost);
  return s;
}

void apply_hints(std::vector<ChapterGrade>& chapters, const HintsSeen& seen, const Rubric& rubric) {
  for (auto& ch : chapters) {
    const auto it = seen.find(ch.name);
    if (it == seen.end()) continue;
    ch.hints = it->second;
    ch.hint_cost = 0;
    for (const auto& [todo, level] : ch.hints)
      ch.hint_cost += rubric.hint_cost[static_cast<std::size_t>(level - 1)];
  }
}

PredictionsMade read_predictions_by_chapter(const fs::path& record, const Rubric& rubric,
                                            std::vector<std::string>& notes) {
  PredictionsMade made;
  int malformed = 0, unknown = 0;
  for (const auto& p : read_predictions(record, &malformed)) {
    const auto [name, prefix] = owner(p.chapter, rubric);
    if (name.empty() || !prefix.empty()) {
      ++unknown;
      continue;
    }
    made[name][p.question] = p.value;  // the record is in time order: the latest wins
  }
  if (malformed + unknown > 0)
    notes.push_back(fmt::format(
        "{} line(s) of the prediction record {} name no chapter, question and value and were "
        "not reported",
        malformed + unknown, kPredictionsRecord.string()));
  return made;
}

std::string predictions_summary(const ChapterGrade& chapter) {
  std::string s;
  for (const auto& [question, value] : chapter.predictions)
    s += fmt::format("{}{}: {}", s.empty() ? "" : ", ", question, value);
  return s + " (not scored)";
}

void apply_predictions(std::vector<ChapterGrade>& chapters, const PredictionsMade& made) {
  for (auto& ch : chapters)
    if (const auto it = made.find(ch.name); it != made.end()) ch.predictions = it->second;
}

}  // namespace mgpu::grade
