// The terminal table: one block per chapter, a line per case, the reason on the same line.
#include <fmt/format.h>

#include "report/hints.hpp"
#include "report/report.hpp"
#include "util.hpp"

namespace mgpu::grade {
namespace {

const char* colour_of(Status s) {
  switch (s) {
    case Status::passed:
      return "\033[32m";
    case Status::not_implemented:
      return "\033[33m";
    case Status::reference_error:
      return "\033[35m";
    case Status::skipped:
      return "\033[36m";
    default:
      return "\033[31m";
  }
}

// Reasons can carry a multi-line message (a deadlock report, say): the table shows its first
// line, shortened; the full text is in the JSON and Gradescope feedback.
std::string one_line(const std::string& s) {
  std::string line = s.substr(0, s.find('\n'));
  constexpr std::size_t kMax = 160;
  if (line.size() > kMax) line = truncate_utf8(line, kMax - 3) + "...";
  return line;
}

std::string pts(double v) { return fmt::format("{:g}", std::round(v * 100) / 100); }

}  // namespace

std::string terminal_report(const Grade& graded, bool colour, bool timings) {
  const Grade g = with_valid_utf8(graded);
  const char* bold = colour ? "\033[1m" : "";
  const char* reset = colour ? "\033[0m" : "";
  // The secret seed is never printed: this table may be shown to the student.
  std::string s = fmt::format("{}grade of {}{}  (seed {}{})\n", bold, g.submission, reset, g.seed,
                              g.hidden_seed ? "; hidden cases: a secret seed" : "");
  for (const auto& n : g.notes) s += "  note: " + one_line(n) + "\n";
  for (const auto& ch : g.chapters) {
    s += fmt::format("\n{}{:<44}{} {:>7}/{}\n", bold, ch.title, reset, pts(ch.score()),
                     pts(ch.max_score()));
    if (ch.build_failed) s += fmt::format("  build failed: {}\n", one_line(ch.build_error));
    for (const auto& c : ch.cases) {
      std::string st = status_name(c.status);
      std::string shown = colour ? fmt::format("{}{:<15}{}", colour_of(c.status), st, reset)
                                 : fmt::format("{:<15}", st);
      std::string points = fmt::format("{:>5}/{}", pts(c.score), pts(c.max_score));
      s += fmt::format("  {} {:<34} {}", shown, c.name, points);
      if (!c.reason.empty() && !(ch.build_failed && c.status == Status::build_failed))
        s += std::string(points.size() < 10 ? 10 - points.size() : 1, ' ') + one_line(c.reason);
      s += "\n";
    }
    if (!ch.hints.empty()) s += "  hints opened: " + one_line(hints_summary(ch)) + "\n";
    if (!ch.predictions.empty()) s += "  predictions: " + one_line(predictions_summary(ch)) + "\n";
  }
  s += fmt::format("\n{}total {}/{}{}\n", bold, pts(g.score()), pts(g.max_score()), reset);
  if (g.score() < g.max_score())
    s += "Each line shows the first reason only; --json FILE has every case's full feedback: first "
         "and worst wrong "
         "element, tolerances, and the program's output.\n";
  if (timings) {
    s += "timings:";
    for (const auto& [phase, sec] : g.timings) s += fmt::format("  {} {:.2f} s", phase, sec);
    s += "\n";
  }
  return s;
}

}  // namespace mgpu::grade
