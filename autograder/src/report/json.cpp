// The full grade as JSON (--json), and Gradescope's results.json (--gradescope).
#include <fmt/format.h>

#include <cmath>

#include "report/hints.hpp"
#include "report/report.hpp"
#include "util.hpp"

namespace mgpu::grade {

nlohmann::json json_report(const Grade& graded) {
  const Grade g = with_valid_utf8(graded);
  nlohmann::json j;
  j["submission"] = g.submission;
  j["seed"] = g.seed;
  if (g.hidden_seed)
    j["hidden_seed"] = *g.hidden_seed;  // instructors' report: lets a grade be rerun
  j["score"] = g.score();
  j["max_score"] = g.max_score();
  j["execution_seconds"] = g.execution_seconds;
  j["notes"] = g.notes;
  j["timings"] = nlohmann::json::object();
  for (const auto& [phase, sec] : g.timings) j["timings"][phase] = sec;
  j["chapters"] = nlohmann::json::array();
  for (const auto& ch : g.chapters) {
    nlohmann::json c{{"name", ch.name},
                     {"title", ch.title},
                     {"score", ch.score()},
                     {"max_score", ch.max_score()},
                     {"build_failed", ch.build_failed},
                     {"build_error", ch.build_error},
                     {"hints", ch.hints},
                     {"hint_cost", ch.hint_cost},
                     {"predictions", nlohmann::json::object()},
                     {"cases", nlohmann::json::array()}};
    for (const auto& [question, value] : ch.predictions)
      c["predictions"][std::to_string(question)] = value;
    for (const auto& cs : ch.cases)
      c["cases"].push_back({{"name", cs.name},
                            {"status", status_name(cs.status)},
                            {"score", cs.score},
                            {"max_score", cs.max_score},
                            {"visibility", visibility_name(cs.visibility)},
                            {"reason", cs.reason},
                            {"feedback", cs.feedback},
                            {"seconds", cs.seconds}});
    j["chapters"].push_back(std::move(c));
  }
  return j;
}

namespace {

// Every string field in text format: compiler messages hold `<`, `>` and `&` that HTML or
// Markdown would eat.
nlohmann::json gradescope_test(const std::string& name, const std::string& number, double score,
                               double max_score, bool passed, const std::string& output,
                               Visibility visibility) {
  return {
      {"name", name},     {"name_format", "text"},   {"number", number},
      {"score", score},   {"max_score", max_score},  {"status", passed ? "passed" : "failed"},
      {"output", output}, {"output_format", "text"}, {"visibility", visibility_name(visibility)}};
}

nlohmann::json gradescope_top(double score, double seconds, const std::string& output) {
  return {{"score", score},
          {"execution_time", static_cast<long>(std::lround(seconds))},
          {"output", output},
          {"output_format", "text"},
          {"test_output_format", "text"},
          {"test_name_format", "text"},
          {"visibility", "visible"},
          {"stdout_visibility", "hidden"},
          {"tests", nlohmann::json::array()}};
}

// The summary above the tests: the visible points (and how many more are to come), the seed the
// visible tests ran with, what did not compile, hints, predictions, notes and skips. The secret
// seed is never written here: this output is the student's.
std::string gradescope_output(const Grade& g) {
  double visible = 0, visible_max = 0, other_max = 0;
  std::size_t skips = 0;
  for (const auto& ch : g.chapters)
    for (const auto& c : ch.cases) {
      skips += c.status == Status::skipped;
      if (c.status == Status::skipped || c.status == Status::reference_error) continue;
      if (c.visibility == Visibility::visible) {
        visible += c.score;
        visible_max += c.max_score;
      } else {
        other_max += c.max_score;
      }
    }
  std::string output = other_max > 0
                           ? fmt::format(
                                 "Visible tests: {:g} of {:g} points. Tests worth {:g} more points "
                                 "are shown after the due date "
                                 "or when grades are published; they count toward your score.",
                                 visible, visible_max, other_max)
                           : fmt::format("Score {:g} of {:g}.", g.score(), g.max_score());
  output += fmt::format(
      "\nVisible tests ran with seed {}: `./mgpu grade --seed {}` runs them the same way.", g.seed,
      g.seed);
  for (const auto& ch : g.chapters)
    if (ch.build_failed)
      output += fmt::format("\n{} does not compile: {}", ch.name, ch.build_error);
  for (const auto& ch : g.chapters)
    if (!ch.hints.empty())
      output += fmt::format("\n{}: hints opened: {}", ch.title, hints_summary(ch));
  for (const auto& ch : g.chapters)
    if (!ch.predictions.empty())
      output += fmt::format("\n{}: predictions: {}", ch.title, predictions_summary(ch));
  for (const auto& n : g.notes) output += "\nnote: " + n;
  if (skips)
    output += fmt::format("\n{} test{} skipped (not run here, not counted).", skips,
                          skips == 1 ? "" : "s");
  return output;
}

// One case as a Gradescope test numbered `number` ("chapter.case").
nlohmann::json gradescope_case(const ChapterGrade& ch, const CaseGrade& c,
                               const std::string& number) {
  std::string out =
      fmt::format("{}{}", status_name(c.status), c.reason.empty() ? "" : ": " + c.reason);
  if (!c.feedback.empty()) out += "\n\n" + c.feedback;
  if (c.status == Status::skipped)  // Gradescope has no "skipped"; 0 of 0 would read as passed.
    return gradescope_test(fmt::format("{} {} (skipped: not run, 0 points)", ch.title, c.name),
                           number, 0, 0, false, out, c.visibility);
  const bool full = c.status == Status::passed && c.score >= c.max_score;
  return gradescope_test(fmt::format("{} {}", ch.title, c.name), number, c.score,
                         c.status == Status::reference_error ? 0.0 : c.max_score, full, out,
                         c.visibility);
}

}  // namespace

nlohmann::json gradescope_report(const Grade& graded) {
  const Grade g = with_valid_utf8(graded);
  nlohmann::json j = gradescope_top(g.score(), g.execution_seconds, gradescope_output(g));
  for (std::size_t i = 0; i < g.chapters.size(); ++i) {
    const auto& ch = g.chapters[i];
    for (std::size_t k = 0; k < ch.cases.size(); ++k)
      j["tests"].push_back(gradescope_case(ch, ch.cases[k], fmt::format("{}.{}", i + 1, k + 1)));
  }
  return j;
}

nlohmann::json gradescope_fallback(const Rubric& rubric, const std::string& raw_reason) {
  const std::string reason = valid_utf8(raw_reason);
  nlohmann::json j =
      gradescope_top(0, 0,
                     "The autograder could not grade this submission, so every test below reads 0. "
                     "Your instructor sees the details; resubmitting the same files will not help "
                     "until it is fixed.\nReason: " +
                         reason);
  // GPU lab cases are left out: without a device (Gradescope's case) they are worth nothing.
  for (std::size_t i = 0; i < rubric.chapters.size(); ++i) {
    const auto& ch = rubric.chapters[i];
    for (std::size_t k = 0; k < ch.cases.size(); ++k) {
      const auto& c = ch.cases[k];
      j["tests"].push_back(gradescope_test(
          fmt::format("{} {}", ch.title, c.name), fmt::format("{}.{}", i + 1, k + 1), 0,
          c.max_score(), false, "the autograder could not run this test", c.visibility));
    }
  }
  return j;
}

}  // namespace mgpu::grade
