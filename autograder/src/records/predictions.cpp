// Reading predict-then-run questions and the prediction record (predictions.hpp).
#include "records/predictions.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <regex>

namespace fs = std::filesystem;

namespace mgpu::grade {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// The level of a Markdown heading ("## Predict, then run" is 2), 0 for any other line.
int heading_level(const std::string& line) {
  std::size_t n = 0;
  while (n < line.size() && line[n] == '#') ++n;
  return n >= 1 && n <= 6 && n < line.size() && line[n] == ' ' ? static_cast<int>(n) : 0;
}

// Reads "<!-- predict: COMMAND | LABEL -->" (text is the line, left-trimmed); nothing when the
// line is no predict annotation at all, PredictError when it is one but malformed.
std::optional<Measure> annotation(const std::string& text, const std::string& where) {
  if (!starts_with(text, "<!--")) return std::nullopt;
  const std::string body = trim(text.substr(4));
  if (!starts_with(lower(body), "predict:")) return std::nullopt;
  const auto close = body.find("-->");
  const std::string form = "<!-- predict: COMMAND | LABEL --> on one line";
  if (close == std::string::npos)
    throw PredictError(
        fmt::format("{}: a predict annotation must close on its line; expected {}", where, form));
  const std::string inner = body.substr(8, close - 8);
  const auto bar = inner.rfind('|');
  Measure m;
  if (bar != std::string::npos) {
    m.command = trim(inner.substr(0, bar));
    m.label = trim(inner.substr(bar + 1));
  }
  if (m.command.empty() || m.label.empty())
    throw PredictError(fmt::format(
        "{}: a predict annotation needs a command and, after the last '|', the label of the value "
        "that answers the question; expected {}",
        where, form));
  return m;
}

// The README read line by line: fenced code and <details> blocks are skipped, a heading opens or
// closes a predict section, a numbered item starts a question, the lines after it continue it.
struct QuestionReader {
  std::string file;
  std::vector<Question> questions;
  std::map<int, int> first_line;  // question number -> its line
  int section = 0;                // the predict section's heading level; 0 outside one
  bool fence = false, details = false, in_paragraph = false;
  Question* current = nullptr;

  void read(const std::string& line, int n) {
    const std::string where = fmt::format("{}:{}", file, n);
    const std::string text = trim(line);
    if (starts_with(text, "```") || starts_with(text, "~~~")) {
      fence = !fence;
      in_paragraph = false;
      return;
    }
    if (fence) return;
    if (auto m = annotation(text, where)) return add_measure(*m, n, where);
    if (const int level = heading_level(line)) return heading(line, level);
    if (in_details(text)) return;
    item_or_text(line, text, n, where);
  }

  void add_measure(Measure m, int n, const std::string& where) {
    if (current == nullptr)
      throw PredictError(fmt::format(
          "{}: a predict annotation outside every question; put it inside a numbered question "
          "under a \"Predict, then run\" heading",
          where));
    m.line = n;
    current->measures.push_back(m);
  }

  void heading(const std::string& line, int level) {
    if (section != 0 && level <= section) section = 0;
    if (lower(line).find("predict") != std::string::npos) section = level;
    current = nullptr;
    in_paragraph = details = false;
  }

  // Whether text lies in a <details> block (an answer the student opens after predicting).
  bool in_details(const std::string& text) {
    if (starts_with(lower(text), "<details")) details = true;
    if (!details) return false;
    in_paragraph = false;
    if (lower(text).find("</details>") != std::string::npos) details = false;
    return true;
  }

  void item_or_text(const std::string& line, const std::string& text, int n,
                    const std::string& where) {
    static const std::regex item(R"(^ {0,2}(\d{1,4})[.)][ \t]+(.*)$)");
    std::smatch match;
    // Outside a predict section, a numbered item is a question when it says "predict" at once
    // (a stretch section's question); any other item (a TODO list) ends the question before.
    const bool is_item = std::regex_match(line, match, item);
    if (is_item && section == 0 && lower(match[2].str()).find("predict") == std::string::npos) {
      current = nullptr;
      in_paragraph = false;
    } else if (is_item) {
      const int number = std::stoi(match[1].str());
      if (const auto it = first_line.find(number); it != first_line.end())
        throw PredictError(fmt::format(
            "{}: question {} again (the first is on line {}); number the questions apart", where,
            number, it->second));
      first_line[number] = n;
      questions.push_back({number, n, trim(match[2].str()), {}});
      current = &questions.back();
      in_paragraph = true;
    } else if (in_paragraph && current != nullptr) {
      if (text.empty())
        in_paragraph = false;
      else
        current->text += " " + text;
    }
  }
};

}  // namespace

std::vector<Question> read_questions(const fs::path& readme) {
  std::ifstream in(readme);
  const std::string file = readme.generic_string();
  if (!in) throw PredictError(fmt::format("{}: cannot be read", file));
  QuestionReader reader;
  reader.file = file;
  int n = 0;
  for (std::string line; std::getline(in, line);) reader.read(line, ++n);
  if (reader.questions.empty())
    throw PredictError(fmt::format(
        "{}: no predict-then-run questions found; expected numbered items (\"1. ...\") under a "
        "heading that contains \"Predict\"",
        file));
  return std::move(reader.questions);
}

std::vector<Prediction> read_predictions(const fs::path& record, int* skipped) {
  std::vector<Prediction> out;
  std::ifstream in(record);
  int bad = 0;
  static const std::regex line_form(R"(^([^\t]+)\t(\d{1,4})\t([^\t]*)\t([^\t]*)$)");
  for (std::string line; std::getline(in, line);) {
    if (trim(line).empty()) continue;
    std::smatch m;
    if (!std::regex_match(line, m, line_form) || trim(m[3].str()).empty()) {
      ++bad;
      continue;
    }
    out.push_back({m[1].str(), std::stoi(m[2].str()), m[3].str(), m[4].str()});
  }
  if (skipped) *skipped = bad;
  return out;
}

void append_prediction(const fs::path& record, const Prediction& p) {
  std::string value = p.value;
  std::replace_if(
      value.begin(), value.end(), [](char c) { return c == '\t' || c == '\n' || c == '\r'; }, ' ');
  std::error_code ec;
  if (record.has_parent_path()) fs::create_directories(record.parent_path(), ec);
  std::ofstream out(record, std::ios::app);
  out << p.chapter << '\t' << p.question << '\t' << value << '\t' << p.time << '\n';
  if (!out.flush())
    throw std::runtime_error(
        fmt::format("cannot add to the prediction record {}; make its folder writable (or set "
                    "MGPU_PREDICTIONS_LOG)",
                    record.string()));
}

std::optional<std::string> latest_prediction(const std::vector<Prediction>& record,
                                             const std::string& chapter, int question) {
  std::optional<std::string> latest;
  for (const auto& p : record)
    if (p.chapter == chapter && p.question == question) latest = p.value;
  return latest;
}

std::optional<std::string> measured_value(const std::string& output, const std::string& label) {
  if (label.empty()) return std::nullopt;
  const std::string hay = lower(output);
  const auto at = hay.find(lower(label));
  if (at == std::string::npos) return std::nullopt;
  const auto end_of_line = output.find('\n', at);
  const std::string rest = output.substr(at + label.size(), end_of_line == std::string::npos
                                                                ? std::string::npos
                                                                : end_of_line - at - label.size());
  // The value follows the label at once, past spaces and a ':' or '='; anything else there (a
  // "finish 11.5 ..." row of a function not written yet) is no measurement.
  const auto start = rest.find_first_not_of(" \t:=");
  if (start == std::string::npos) return std::nullopt;
  static const std::regex number(R"(^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?%?)");
  std::smatch m;
  const std::string tail = rest.substr(start);
  if (!std::regex_search(tail, m, number)) return std::nullopt;
  return m.str();
}

}  // namespace mgpu::grade
