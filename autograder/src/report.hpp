// Report writers. All of them read the same grade model; none of them decides anything. Each
// writes from with_valid_utf8(g), so bytes a student printed can never make a report fail.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "model.hpp"

namespace mgpu::grade {

/// The table for a terminal: chapters, points, one reason per case that lost points.
/// colour: ANSI colours (only on a TTY, never with NO_COLOR); timings: the per-phase seconds.
std::string terminal_report(const Grade& g, bool colour, bool timings);

/// Everything in the grade model as JSON (the --json report).
nlohmann::json json_report(const Grade& g);

/// Gradescope's results.json: score, execution_time, output, visibility, tests[].
nlohmann::json gradescope_report(const Grade& g);

/// JUnit XML: one testsuite per chapter, one testcase per case.
std::string junit_report(const Grade& g);

}  // namespace mgpu::grade
