// What the tools (mgpu plan, pipeline, checkpoint) mean by failure: the exit statuses they all
// share and the error a tool throws for bad flags, which their command lines
// (tools/command_line.hpp) turn into exit status 2.
#pragma once

#include <stdexcept>
#include <string>

namespace mgpu::tools {

/// The exit statuses every tool gives the same meaning; a tool adds its own from 4 up.
enum CommonExitStatus : int {
  kExitOk = 0,       ///< the report was printed
  kExitIoError = 1,  ///< an output file could not be written
  kExitUsage = 2,    ///< a flag is missing, unknown or inconsistent; the message says the fix
  kExitNotImplemented = 3,  ///< a chapter function the run needs is still a TODO
};

/// A flag was missing, out of range or inconsistent; the message names the flag and the fix.
class UsageError : public std::invalid_argument {
 public:
  /// @param message what is wrong and what to use instead.
  explicit UsageError(const std::string& message) : std::invalid_argument(message) {}
};

}  // namespace mgpu::tools
