// Report writers. All of them read the same grade model; none of them decides anything. Each
// writes from with_valid_utf8(g), so bytes a student printed can never make a report fail.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "report/model.hpp"
#include "rubric/rubric.hpp"

namespace mgpu::grade {

/// The table for a terminal: chapters, points, one reason per case that lost points.
/// colour: ANSI colours (only on a TTY, never with NO_COLOR); timings: the per-phase seconds.
std::string terminal_report(const Grade& g, bool colour, bool timings);

/// Everything in the grade model as JSON (the --json report).
nlohmann::json json_report(const Grade& g);

/// Gradescope's results.json: score, execution_time, output, visibility, tests[]. When any case
/// is not visible, the output shows only the visible subtotal (Gradescope hides the total then,
/// and a printed total would reveal the hidden results); skipped cases read as not passed.
nlohmann::json gradescope_report(const Grade& g);

/// The results.json run_autograder writes when the grader could not grade: score 0, the reason,
/// and every case of the rubric listed as failed, so a student sees what happened and what counts.
nlohmann::json gradescope_fallback(const Rubric& rubric, const std::string& reason);

/// PrairieLearn's external-grader results.json: gradable, score as a fraction of the points (0 to
/// 1), message, and tests[] with name, points, max_points, message and output. PrairieLearn shows
/// every test at once, so a case that is not visible shows its status only, never its feedback.
/// A rejected submission, or one with no points to earn here, is not gradable (no attempt used).
nlohmann::json prairielearn_report(const Grade& g);

/// The results.json for a submission that was not graded: gradable false with the reason, so
/// PrairieLearn charges no attempt for the grader's failure or an unreadable upload.
nlohmann::json prairielearn_not_gradable(const std::string& reason);

/// JUnit XML: one testsuite per chapter, one testcase per case.
std::string junit_report(const Grade& g);

}  // namespace mgpu::grade
