// The command line of `mgpu checkpoint`: flags to FigureOptions (CLI11), then the report and the
// SVG. A function rather than main() so that tests run the same code and check exit statuses
// and output.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "errors.hpp"

namespace mgpu::checkpoint_figure {

/// Exit statuses of `mgpu checkpoint`.
enum ExitStatus : int {
  /// the report was printed
  kExitOk = tools::kExitOk,
  /// --svg could not be written
  kExitIoError = tools::kExitIoError,
  /// a flag is missing, unknown or out of range; the message says the fix
  kExitUsage = tools::kExitUsage,
  /// a chapter function the run needs is still a TODO
  kExitNotImplemented = tools::kExitNotImplemented,
  /// the chapter code failed during the run (e.g. activations left behind)
  kExitRunFailed = 4,
};

/// Runs `mgpu checkpoint` on `args` (the flags, without the program name), printing the report to
/// `out` and problems to `err`. A relative --svg path is relative to the working directory
/// (`./mgpu checkpoint` runs the program in the folder it was called from). Returns one of
/// ExitStatus.
int run_checkpoint_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace mgpu::checkpoint_figure
