// The full grade as JSON (--json), and Gradescope's results.json (--gradescope).
#include <fmt/format.h>

#include "report.hpp"

namespace mgpu::grade {

nlohmann::json json_report(const Grade& graded) {
  const Grade g = with_valid_utf8(graded);
  nlohmann::json j;
  j["submission"] = g.submission;
  j["seed"] = g.seed;
  j["score"] = g.score();
  j["max_score"] = g.max_score();
  j["execution_seconds"] = g.execution_seconds;
  j["notes"] = g.notes;
  j["timings"] = nlohmann::json::object();
  for (const auto& [phase, sec] : g.timings) j["timings"][phase] = sec;
  j["chapters"] = nlohmann::json::array();
  for (const auto& ch : g.chapters) {
    nlohmann::json c{{"name", ch.name}, {"title", ch.title}, {"score", ch.score()}, {"max_score", ch.max_score()},
                     {"build_failed", ch.build_failed}, {"build_error", ch.build_error}, {"cases", nlohmann::json::array()}};
    for (const auto& cs : ch.cases)
      c["cases"].push_back({{"name", cs.name}, {"status", status_name(cs.status)}, {"score", cs.score},
                            {"max_score", cs.max_score}, {"visibility", visibility_name(cs.visibility)},
                            {"reason", cs.reason}, {"feedback", cs.feedback}, {"seconds", cs.seconds}});
    j["chapters"].push_back(std::move(c));
  }
  return j;
}

nlohmann::json gradescope_report(const Grade& graded) {
  const Grade g = with_valid_utf8(graded);
  nlohmann::json j;
  j["score"] = g.score();
  j["execution_time"] = static_cast<long>(std::lround(g.execution_seconds));
  j["visibility"] = "visible";
  j["stdout_visibility"] = "hidden";
  std::string output = fmt::format("Graded with seed {}. Score {:g} of {:g}.", g.seed, g.score(), g.max_score());
  for (const auto& ch : g.chapters)
    if (ch.build_failed) output += fmt::format("\n{} does not compile: {}", ch.name, ch.build_error);
  for (const auto& n : g.notes) output += "\nnote: " + n;
  std::size_t skips = 0;
  for (const auto& ch : g.chapters)
    for (const auto& c : ch.cases) skips += c.status == Status::skipped;
  if (skips) output += fmt::format("\n{} case{} skipped (not run here, not counted).", skips, skips == 1 ? "" : "s");
  j["output"] = output;
  j["tests"] = nlohmann::json::array();
  for (std::size_t i = 0; i < g.chapters.size(); ++i) {
    const auto& ch = g.chapters[i];
    for (std::size_t k = 0; k < ch.cases.size(); ++k) {
      const auto& c = ch.cases[k];
      bool full = c.status == Status::passed && c.score >= c.max_score;
      std::string out = fmt::format("{}{}", status_name(c.status), c.reason.empty() ? "" : ": " + c.reason);
      if (!c.feedback.empty()) out += "\n\n" + c.feedback;
      if (c.status == Status::skipped) {
        // Gradescope has no "skipped": 0 of 0 points, the word in the name and the output.
        j["tests"].push_back({{"name", fmt::format("{} {} (skipped)", ch.title, c.name)},
                              {"number", fmt::format("{}.{}", i + 1, k + 1)},
                              {"score", 0.0},
                              {"max_score", 0.0},
                              {"output", out},
                              {"visibility", visibility_name(c.visibility)}});
        continue;
      }
      j["tests"].push_back({{"name", fmt::format("{} {}", ch.title, c.name)},
                            {"number", fmt::format("{}.{}", i + 1, k + 1)},
                            {"score", c.score},
                            {"max_score", c.status == Status::reference_error ? 0.0 : c.max_score},
                            {"status", full ? "passed" : "failed"},
                            {"output", out},
                            {"visibility", visibility_name(c.visibility)}});
    }
  }
  return j;
}

}  // namespace mgpu::grade
