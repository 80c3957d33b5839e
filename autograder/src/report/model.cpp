// Status and visibility names, the score sums of the grade model, and its UTF-8-safe copy.
#include "report/model.hpp"

#include <algorithm>

#include "util.hpp"

namespace mgpu::grade {

const char* status_name(Status s) {
  switch (s) {
    case Status::passed:
      return "passed";
    case Status::wrong:
      return "wrong";
    case Status::not_implemented:
      return "not-implemented";
    case Status::crashed:
      return "crashed";
    case Status::timeout:
      return "timeout";
    case Status::out_of_memory:
      return "out-of-memory";
    case Status::disk_limit:
      return "disk-limit";
    case Status::no_result:
      return "no-result";
    case Status::build_failed:
      return "build-failed";
    case Status::reference_error:
      return "reference-error";
    case Status::skipped:
      return "skipped";
    case Status::rejected_submission:
      return "rejected-submission";
  }
  return "?";
}

const char* visibility_name(Visibility v) {
  switch (v) {
    case Visibility::visible:
      return "visible";
    case Visibility::hidden:
      return "hidden";
    case Visibility::after_due_date:
      return "after_due_date";
    case Visibility::after_published:
      return "after_published";
  }
  return "visible";
}

std::optional<Visibility> parse_visibility(const std::string& name) {
  for (Visibility v : {Visibility::visible, Visibility::hidden, Visibility::after_due_date,
                       Visibility::after_published})
    if (name == visibility_name(v)) return v;
  return std::nullopt;
}

double ChapterGrade::score() const {
  double s = 0;
  for (const auto& c : cases) s += c.score;
  return std::max(0.0, s - hint_cost);
}

double ChapterGrade::max_score() const {
  double s = 0;
  for (const auto& c : cases)
    if (c.status != Status::reference_error && c.status != Status::skipped) s += c.max_score;
  return s;
}

double Grade::score() const {
  double s = 0;
  for (const auto& c : chapters) s += c.score();
  return s;
}

double Grade::max_score() const {
  double s = 0;
  for (const auto& c : chapters) s += c.max_score();
  return s;
}

Grade with_valid_utf8(Grade g) {
  g.submission = valid_utf8(g.submission);
  for (auto& n : g.notes) n = valid_utf8(n);
  for (auto& t : g.timings) t.first = valid_utf8(t.first);
  for (auto& ch : g.chapters) {
    ch.name = valid_utf8(ch.name);
    ch.title = valid_utf8(ch.title);
    ch.build_error = valid_utf8(ch.build_error);
    for (auto& c : ch.cases) {
      c.name = valid_utf8(c.name);
      c.chapter = valid_utf8(c.chapter);
      c.reason = valid_utf8(c.reason);
      c.feedback = valid_utf8(c.feedback);
    }
  }
  return g;
}

}  // namespace mgpu::grade
