// The command line of `mgpu pipeline`: flags to FigureOptions (CLI11), then the report, the
// SVG timeline, the Chrome trace and the --target-bubble answer. A function rather than main()
// so that tests run the same code and check exit statuses and output.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "errors.hpp"

namespace mgpu::pipeline_figure {

/// Exit statuses of `mgpu pipeline`.
enum ExitStatus : int {
  /// the report (or the --target-bubble answer) was printed
  kExitOk = tools::kExitOk,
  /// --svg or --trace could not be written
  kExitIoError = tools::kExitIoError,
  /// a flag is missing, unknown or inconsistent; the message says the fix
  kExitUsage = tools::kExitUsage,
  /// a chapter function the run needs is still a TODO
  kExitNotImplemented = tools::kExitNotImplemented,
  /// the schedule or the executor failed (invalid schedule, deadlock, other order)
  kExitBadSchedule = 4,
};

/// Runs `mgpu pipeline` on `args` (the flags, without the program name), printing the report to
/// `out` and problems to `err`. Relative --svg and --trace paths are relative to the working
/// directory (`./mgpu pipeline` runs the program in the folder it was called from). Returns one
/// of ExitStatus.
int run_pipeline_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace mgpu::pipeline_figure
