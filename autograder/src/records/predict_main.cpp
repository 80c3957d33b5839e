// mgpu-predict: `./mgpu predict`, predict-then-run with a record (predictions.hpp). ./mgpu runs it
// in the checkout's root, passing the folder the command was typed in as MGPU_CALLER_PWD.
#include <sys/wait.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <regex>
#include <sstream>

#include "records/predictions.hpp"
#include "records/records.hpp"

namespace fs = std::filesystem;
using namespace mgpu::grade;

namespace {

const char* kUsage =
    R"(usage: ./mgpu predict CHAPTER                 the chapter's questions, your predictions beside them
       ./mgpu predict CHAPTER N VALUE         record your prediction for question N
       ./mgpu predict CHAPTER N               run question N's command, measured beside predicted

Predict-then-run: each chapter README's "Predict, then run" sections ask numbered questions to
answer before running anything. Record your answer first (CHAPTER is 11_5, 11.5 or
11_5_pipeline; VALUE is what you predict, a number or a few words):
  ./mgpu predict 11_5 2 0.27
Then `./mgpu predict 11_5 2` runs the command the README names for that question and prints the
measured value beside yours (a question with no command says so; run what its text says).
Every prediction is added to .mgpu/predictions.tsv (chapter, question, value, UTC time), which
your submission includes: your instructor sees what you predicted, and it is never scored.
MGPU_PREDICTIONS_LOG names another record file.
)";

struct Usage : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The chapter folder ARG names: its full name, or a prefix that ends where an underscore follows
// (11_5, 11.5). Anything else is an error listing the chapters.
std::string chapter_of(std::string arg) {
  while (!arg.empty() && arg.back() == '/') arg.pop_back();
  if (arg.rfind("chapters/", 0) == 0) arg = arg.substr(9);
  std::replace(arg.begin(), arg.end(), '.', '_');
  std::vector<std::string> names, matches;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("chapters", ec))
    if (e.is_directory() && fs::exists(e.path() / "README.md"))
      names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    if (n == arg) return n;
    if (n.rfind(arg + "_", 0) == 0) matches.push_back(n);
  }
  if (matches.size() == 1) return matches.front();
  std::string list;
  for (const auto& n : matches.empty() ? names : matches) list += "\n  " + n;
  throw Usage(matches.empty()
                  ? fmt::format("no chapter is called '{}'; name one of:{}", arg, list)
                  : fmt::format("'{}' fits several chapters; name one of:{}", arg, list));
}

// The record: MGPU_PREDICTIONS_LOG (relative to where ./mgpu was called from) or the default.
fs::path predictions_record() { return record_path("MGPU_PREDICTIONS_LOG", kPredictionsRecord); }

const Question& question_of(const std::vector<Question>& qs, const std::string& arg,
                            const fs::path& readme) {
  int n = -1;
  if (!arg.empty() && arg.size() < 5 &&
      std::all_of(arg.begin(), arg.end(), [](unsigned char c) { return std::isdigit(c); }))
    n = std::stoi(arg);
  for (const auto& q : qs)
    if (q.number == n) return q;
  std::string list;
  for (const auto& q : qs) list += fmt::format("{}{}", list.empty() ? "" : ", ", q.number);
  throw Usage(fmt::format("{} has no question '{}'; its questions are {}", readme.generic_string(),
                          arg, list));
}

std::string shortened(const std::string& s, std::size_t width) {
  return s.size() <= width ? s : s.substr(0, width - 3) + "...";
}

int list(const std::string& chapter, const std::vector<Question>& qs, const fs::path& readme) {
  const auto record = read_predictions(predictions_record());
  fmt::print("Predict-then-run questions of {} (run: the question names a command to measure):\n",
             readme.generic_string());
  fmt::print("  {:>3}  {:<12}  {:<3}  {}\n", "#", "yours", "run", "question");
  for (const auto& q : qs) {
    const auto mine = latest_prediction(record, chapter, q.number);
    fmt::print("  {:>3}  {:<12}  {:<3}  {}\n", q.number, shortened(mine.value_or("-"), 12),
               q.measures.empty() ? "" : "yes", shortened(q.text, 70));
  }
  fmt::print("Record one: ./mgpu predict {0} N VALUE; then ./mgpu predict {0} N measures it.\n",
             chapter);
  return 0;
}

// Runs command in the checkout's root, its output shown as it comes; returns the output and
// the exit status.
std::pair<std::string, int> run(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return {out, 127};
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) {
    out.append(buf, n);
    std::fwrite(buf, 1, n, stdout);
    std::fflush(stdout);
  }
  const int status = ::pclose(p);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : 128};
}

// Why a question's command gave no number, in the student's terms: the function of theirs it
// waits for, when the output names one: the planner's "finish 11.2 name" on the label's line, or
// else the first "not implemented: 11.2 name" (mgpu::NotImplemented) anywhere.
std::string why_not_measured(const std::string& output, int rc, const std::string& label) {
  static const std::regex finish(R"(finish ([0-9][0-9.]*) ([A-Za-z_0-9]+))");
  static const std::regex missing(
      R"(not implemented: ([0-9][0-9.]*|gpu [a-z_0-9]+) ([A-Za-z_0-9]+))");
  std::string section, name;
  std::smatch m;
  std::istringstream lines(output);
  for (std::string line; section.empty() && std::getline(lines, line);)
    if (line.find(label) != std::string::npos && std::regex_search(line, m, finish))
      section = m[1].str(), name = m[2].str();
  if (section.empty() && std::regex_search(output, m, missing))
    section = m[1].str(), name = m[2].str();
  if (!section.empty())
    return fmt::format(
        "it needs your {} {}, not written yet; write it, then ask again "
        "(./mgpu hint {} {} if you are stuck)",
        section, name, section, name);
  if (rc != 0)
    return fmt::format("the command stopped with exit status {}; its output above says why", rc);
  return fmt::format(
      "its output above has no number after '{}'; the row may be waiting for a "
      "chapter function of yours (look for 'not implemented' or 'needs')",
      label);
}

int measure(const std::string& chapter, const Question& q, const fs::path& readme) {
  const auto mine = latest_prediction(read_predictions(predictions_record()), chapter, q.number);
  fmt::print("Question {} ({}:{}): {}\n", q.number, readme.generic_string(), q.line,
             shortened(q.text, 300));
  if (q.measures.empty()) {
    fmt::print("It names no command to measure: run what its text says and compare with {}.\n",
               mine ? "your prediction, " + *mine : "what you predict");
    return 0;
  }
  if (!mine) {
    std::string commands;
    for (const auto& m : q.measures) commands += "\n  " + m.command;
    throw Usage(fmt::format(
        "predict first: ./mgpu predict {} {} VALUE records your answer; then this command "
        "measures it. (To look without predicting, run it yourself:{})",
        chapter, q.number, commands));
  }
  int status = 0;
  std::vector<std::string> lines;
  for (const auto& m : q.measures) {
    fmt::print("\n$ {}\n", m.command);
    std::fflush(stdout);
    const auto [output, rc] = run(m.command);
    const auto value = measured_value(output, m.label);
    if (value) {
      lines.push_back(fmt::format("  {:<40}  measured {:<10}  yours {}", m.label, *value, *mine));
    } else {
      status = 1;
      lines.push_back(fmt::format("  {:<40}  not measured: {}", m.label,
                                  why_not_measured(output, rc, m.label)));
    }
  }
  fmt::print("\nQuestion {}, measured beside your prediction:\n", q.number);
  for (const auto& l : lines) fmt::print("{}\n", l);
  fmt::print("The README's answer says why (open its <details> under question {}).\n", q.number);
  return status;
}

int predict(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "-h" || args[0] == "--help")) {
    std::cout << kUsage;
    return 0;
  }
  if (args.empty()) throw Usage("name a chapter (see ./mgpu predict --help)");
  const std::string chapter = chapter_of(args[0]);
  const fs::path readme = fs::path("chapters") / chapter / "README.md";
  const auto questions = read_questions(readme);
  if (args.size() == 1) return list(chapter, questions, readme);
  const Question& q = question_of(questions, args[1], readme);
  if (args.size() == 2) return measure(chapter, q, readme);
  std::string value;
  for (std::size_t i = 2; i < args.size(); ++i) value += (i > 2 ? " " : "") + args[i];
  const fs::path record = predictions_record();
  append_prediction(record, {chapter, q.number, value, utc_now()});
  fmt::print("Recorded for {} question {}: {}  (in {})\n", chapter, q.number, value,
             record.generic_string());
  if (!q.measures.empty()) fmt::print("Now measure it: ./mgpu predict {} {}\n", args[0], q.number);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return predict(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {  // Usage, PredictError, an unwritable record
    std::cerr << "mgpu: predict: " << e.what() << "\n";
    return 2;
  }
}
