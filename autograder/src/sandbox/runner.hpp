// Running one program in isolation: a sandbox (sandbox.hpp: namespaces, or a throwaway uid), its
// own session, a wall-clock and a memory limit that hold for everything it starts, resource
// limits, stdin from /dev/null, a fresh working folder, a scrubbed environment, and stdout/stderr
// captured up to a cap.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sandbox/sandbox.hpp"

namespace mgpu::grade {

/// The argument RunSpec::companion's path replaces.
inline const std::string kCompanionArg = "{companion}";

/// What to run and how tightly to hold it.
struct RunSpec {
  std::filesystem::path exe;      ///< absolute path (isolated) or a name looked up in PATH
  std::vector<std::string> args;  ///< argv[1..]; kCompanionArg stands for companion's path
  /// A second program the first may start (a host case program's ranks): in view beside it, in
  /// the sandbox as outside; every argument equal to kCompanionArg becomes its path there.
  std::filesystem::path companion;
  double wall_s = 10;                       ///< wall-clock limit; the process group is killed at it
  bool isolate = true;                      ///< sandbox, limits, fresh temp dir, scrubbed env
  bool drop_privileges = true;              ///< when isolated and running as root: a throwaway uid
  std::uint64_t memory_bytes = 2ull << 30;  ///< RLIMIT_AS per process (not with devices), and
                                            ///< resident bytes of the whole tree (isolated only)
  std::uint64_t file_bytes = 16ull << 20;   ///< RLIMIT_FSIZE (isolated only)
  /// Isolated only: what the case's folders may hold together (the uid sandbox: its working
  /// folder, and files its processes deleted but hold open; namespaces: /case, /tmp and /dev/shm,
  /// each a memory folder of this size), and how many entries; the tree is killed at either.
  std::uint64_t disk_bytes = 64ull << 20;
  std::uint64_t disk_files = 4096;
  std::uint64_t open_files = 64;  ///< RLIMIT_NOFILE (isolated only)
  std::uint64_t extra_processes =
      1024;                   ///< RLIMIT_NPROC headroom over the user's tasks (threads count)
  int result_fd = -1;         ///< if >= 0, a pipe is opened as this fd and read back
  std::filesystem::path cwd;  ///< working folder when not isolated (empty: inherit)
  std::vector<std::pair<std::string, std::string>> env;  ///< added (not isolated) or set (isolated)
  std::size_t output_cap = 64 * 1024;    ///< bytes kept of stdout and of stderr each
  std::size_t result_cap = 64ull << 20;  ///< a larger result counts as no result
  bool merge_output = false;             ///< stderr into the stdout capture (builds)
  /// Device nodes the isolated program may open (a GPU lab's /dev/nvidia*): bound into the
  /// namespace sandbox, with /sys read-only for the driver. With any, there is no RLIMIT_AS (the
  /// CUDA driver reserves far more address space than it touches); the whole tree's resident
  /// memory is still held to memory_bytes.
  std::vector<std::filesystem::path> devices;
  /// Not isolated, grader running as root: run as this uid (and gid), dying with the grader. A
  /// student build in the uid sandbox runs so, unable to read the sealed reference.
  std::optional<uid_t> run_as;
  /// Not isolated: confine the program with Landlock to this view where the kernel has it (a
  /// student build in the uid sandbox, which then reaches nothing of the project but what it
  /// compiles). Isolated runs in the uid sandbox always get case_view() of their folder.
  std::optional<FsView> view;
  /// Not isolated: RLIMIT_AS and RLIMIT_FSIZE for every process (a build: one compiler told to
  /// read /dev/zero stops at the first, one told to write it into an object at the second); 0:
  /// none.
  std::uint64_t unisolated_memory_bytes = 0;
  std::uint64_t unisolated_file_bytes = 0;
};

/// What happened.
struct RunOutcome {
  bool started = false;     ///< exec succeeded
  std::string start_error;  ///< why not
  bool exited = false;      ///< normal exit (then exit_code is set)
  int exit_code = -1;       ///< valid when exited
  int signal = 0;           ///< terminating signal, 0 if none
  bool timed_out = false;   ///< we killed it at the wall-clock limit
  bool memory_exceeded =
      false;  ///< we killed it: its processes together held more than memory_bytes
  std::uint64_t tree_memory_bytes = 0;  ///< what they held then
  bool disk_exceeded = false;  ///< its folders held disk_bytes or more than disk_files (killed, or
                               ///< found so when it ended)
  std::string disk_use;        ///< what they held then and the limits, in words
  std::string result;          ///< everything written to result_fd
  bool result_overflow = false;  ///< the result exceeded result_cap
  std::string out;               ///< captured stdout (capped)
  std::string err;               ///< captured stderr (capped)
  bool out_truncated = false;    ///< stdout exceeded output_cap
  bool err_truncated = false;    ///< stderr exceeded output_cap
  double wall_s = 0;             ///< seconds from fork to the end
};

/// Runs spec to completion (or to its limit). Thread-safe: cases run on several threads.
RunOutcome run_process(const RunSpec& spec);

/// Kills every process group still running (installed for SIGINT/SIGTERM by the CLI).
void kill_all_running();

/// "SIGSEGV (segmentation fault)" and the like.
std::string signal_description(int sig);

}  // namespace mgpu::grade
