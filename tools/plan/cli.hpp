// The command line of `mgpu plan`: flags to Options (CLI11), then the report, the JSON and the
// SVG. A function rather than main() so that tests can run it and check exit codes and output.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "errors.hpp"

namespace mgpu::planner {

/// Exit statuses of `mgpu plan`.
enum ExitStatus : int {
  /// the report was printed (whether or not the layout fits)
  kExitOk = tools::kExitOk,
  /// --json or --svg could not be written
  kExitIoError = tools::kExitIoError,
  /// a flag is missing, unknown or inconsistent; the message says the fix
  kExitUsage = tools::kExitUsage,
  /// A chapter function escaped the rows that wait for it (a planner bug: a pending row was read).
  /// Unwritten chapter functions leave their rows pending and the report still exits 0.
  kExitNotImplemented = tools::kExitNotImplemented,
};

/// Runs the planner on `args` (the flags, without the program name), printing the report to
/// `out` and problems to `err`. Relative --json and --svg paths are relative to the working
/// directory (`./mgpu plan` runs the program in the folder it was called from). Returns one of
/// ExitStatus.
int run_plan_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

/// The chapter folder a NotImplemented message points at, e.g. "not implemented: 11.3 zero_state"
/// gives "chapters/11_3_zero"; "chapters/" when the section is not recognised.
std::string chapter_folder_for(const std::string& not_implemented_message);

}  // namespace mgpu::planner
