// What the tools' command lines (mgpu plan, pipeline, checkpoint) share: the flag-parsing step,
// writing an output file, and the one mapping from what a run throws to a message and an exit
// status (errors.hpp). Included by the tools' cli.cpp only: it brings in CLI11.
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <functional>
#include <mgpu/not_implemented.hpp>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "errors.hpp"

namespace mgpu::tools {

/// An output file (--svg, --json, --trace) could not be written.
class WriteError : public std::runtime_error {
 public:
  /// @param message the path and what to check.
  explicit WriteError(const std::string& message) : std::runtime_error(message) {}
};

/// Writes `text` to `path`, replacing it; throws WriteError naming the path when it cannot.
inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary);
  file << text;
  file.close();
  if (!file) throw WriteError(fmt::format("cannot write '{}': check that its folder exists", path));
}

/// Parses `args` (the flags, without the program name) into `app`. Returns nothing when the run
/// goes on, or the status to exit with: 0 after --help, kExitUsage after a message on `err` that
/// names the bad flag and where the flags are listed.
inline std::optional<int> parse_flags(CLI::App& app, const std::vector<std::string>& args,
                                      std::ostream& out, std::ostream& err) {
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 consumes from the back
    app.parse(reversed);
    return std::nullopt;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::ParseError& e) {
    err << app.get_name() << ": " << e.what() << "\n  see ./" << app.get_name()
        << " --help for the flags\n";
    return kExitUsage;
  }
}

/// Runs `body` (a tool's run after its flags are parsed) and turns what it throws into a message on
/// `err`, prefixed by `tool`, and an exit status: a chapter function still a TODO gives
/// kExitNotImplemented with where to write it (`chapter`, e.g. "11_5_pipeline") and how to check
/// it; UsageError kExitUsage; WriteError kExitIoError; anything else, the chapter code failing
/// during the run (a chapter's own argument checks included), `failed_status`.
inline int run_reported(const std::string& tool, const std::string& chapter, int failed_status,
                        std::ostream& err, const std::function<int()>& body) {
  try {
    return body();
  } catch (const NotImplemented& e) {
    err << fmt::format(
        "{}: {}\n  write it in chapters/{}/ (see its README), check it with ./mgpu test --student "
        "{}, then run this again\n",
        tool, e.what(), chapter, chapter);
    return kExitNotImplemented;
  } catch (const UsageError& e) {
    err << tool << ": " << e.what() << '\n';
    return kExitUsage;
  } catch (const WriteError& e) {
    err << tool << ": " << e.what() << '\n';
    return kExitIoError;
  } catch (const std::exception& e) {
    err << tool << ": the run failed: " << e.what() << '\n';
    return failed_status;
  }
}

}  // namespace mgpu::tools
