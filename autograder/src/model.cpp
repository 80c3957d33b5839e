// Status and visibility names, and the score sums of the grade model.
#include "model.hpp"

namespace mgpu::grade {

const char* status_name(Status s) {
  switch (s) {
    case Status::passed: return "passed";
    case Status::wrong: return "wrong";
    case Status::not_implemented: return "not-implemented";
    case Status::crashed: return "crashed";
    case Status::timeout: return "timeout";
    case Status::out_of_memory: return "out-of-memory";
    case Status::no_result: return "no-result";
    case Status::build_failed: return "build-failed";
    case Status::reference_error: return "reference-error";
    case Status::skipped: return "skipped";
  }
  return "?";
}

const char* visibility_name(Visibility v) {
  switch (v) {
    case Visibility::visible: return "visible";
    case Visibility::hidden: return "hidden";
    case Visibility::after_due_date: return "after_due_date";
  }
  return "visible";
}

double ChapterGrade::score() const {
  double s = 0;
  for (const auto& c : cases) s += c.score;
  return s;
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

}  // namespace mgpu::grade
