// PrairieLearn's external-grader results.json (--prairielearn): the same grade model as every
// other report, in PrairieLearn's terms. Its score is a fraction of 1, its results file must stay
// under 1 MB, and it has no per-test visibility: every test is shown to the student at once, so
// the details of a case that is not visible (its inputs come from the secret seed) are withheld.
#include <fmt/format.h>

#include <algorithm>

#include "report/hints.hpp"
#include "report/report.hpp"
#include "util.hpp"

namespace mgpu::grade {
namespace {

// PrairieLearn refuses a results.json over 1 MB; the texts below are cut to fit well under it.
constexpr std::size_t kPlMaxTestOutput = 16 * 1024;
constexpr std::size_t kPlAllTestsOutput = 640 * 1024;
constexpr std::size_t kPlMaxMessage = 64 * 1024;

std::string cut(const std::string& s, std::size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  return truncate_utf8(s, max_bytes) +
         fmt::format("\n[... {} more bytes not shown]", s.size() - max_bytes);
}

// The summary shown above the tests: points, the seed that reruns the visible tests, and what
// else the student should know (chapters that did not compile, hints, predictions, notes).
std::string pl_message(const Grade& g) {
  std::string m = fmt::format("Score {:g} of {:g} points.", g.score(), g.max_score());
  m += fmt::format(
      "\nVisible tests ran with seed {}: `./mgpu grade --seed {}` runs them the same way; the "
      "details of the other tests are not shown.",
      g.seed, g.seed);
  for (const auto& ch : g.chapters)
    if (ch.build_failed) m += fmt::format("\n{} does not compile: {}", ch.name, ch.build_error);
  for (const auto& ch : g.chapters)
    if (!ch.hints.empty()) m += fmt::format("\n{}: hints opened: {}", ch.title, hints_summary(ch));
  for (const auto& ch : g.chapters)
    if (!ch.predictions.empty())
      m += fmt::format("\n{}: predictions: {}", ch.title, predictions_summary(ch));
  for (const auto& n : g.notes) m += "\nnote: " + n;
  return cut(m, kPlMaxMessage);
}

nlohmann::json pl_test(const ChapterGrade& ch, const CaseGrade& c, std::size_t output_cap) {
  const bool skipped = c.status == Status::skipped;
  const bool uncounted = skipped || c.status == Status::reference_error;
  nlohmann::json t{{"name", fmt::format("{} {}", ch.title, c.name)},
                   {"points", c.score},
                   {"max_points", uncounted ? 0.0 : c.max_score}};
  if (skipped) {
    t["name"] = t["name"].get<std::string>() + " (skipped: not run, 0 points)";
    t["message"] = "skipped: " + c.reason;
  } else if (c.visibility != Visibility::visible) {
    // Its feedback can hold inputs drawn from the secret seed; the points are in the score anyway.
    const bool full = c.status == Status::passed && c.score >= c.max_score;
    t["message"] = std::string(status_name(c.status)) +
                   (full ? "" : " (a hidden test: its details are not shown)");
  } else {
    t["message"] = std::string(status_name(c.status)) + (c.reason.empty() ? "" : ": " + c.reason);
    t["output"] = cut(c.feedback, output_cap);
  }
  return t;
}

}  // namespace

nlohmann::json prairielearn_report(const Grade& graded) {
  const Grade g = with_valid_utf8(graded);
  // A submission the unpacking rules rejected (a link, a `..` path, over a cap) is not gradable:
  // PrairieLearn then charges no attempt and shows why.
  for (const auto& ch : g.chapters)
    for (const auto& c : ch.cases)
      if (c.status == Status::rejected_submission)
        return prairielearn_not_gradable("the submission was rejected: " + c.reason);
  if (g.max_score() <= 0)
    return prairielearn_not_gradable(
        "nothing in this submission could be graded here (no test carries points)" +
        (g.notes.empty() ? std::string() : ": " + g.notes.front()));
  std::size_t tests = 0;
  for (const auto& ch : g.chapters) tests += ch.cases.size();
  const std::size_t output_cap =
      std::min(kPlMaxTestOutput, kPlAllTestsOutput / std::max<std::size_t>(tests, 1));
  nlohmann::json j{{"gradable", true},
                   {"score", std::clamp(g.score() / g.max_score(), 0.0, 1.0)},
                   {"message", pl_message(g)},
                   {"tests", nlohmann::json::array()}};
  for (const auto& ch : g.chapters)
    for (const auto& c : ch.cases) j["tests"].push_back(pl_test(ch, c, output_cap));
  return j;
}

nlohmann::json prairielearn_not_gradable(const std::string& reason) {
  const std::string r = cut(valid_utf8(reason), kPlMaxMessage);
  return {{"gradable", false},
          {"score", 0.0},
          {"format_errors", nlohmann::json::array({r})},
          {"message", "This submission was not graded, and the attempt does not count: " + r},
          {"tests", nlohmann::json::array()}};
}

}  // namespace mgpu::grade
